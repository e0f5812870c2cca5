"""The CNN baselines of Gu 2022 (dissertation, Ch.5; Gu & Tresp, CVPR 2020): build the Keras
model. Its description, settings and parameter count are its family's (reportgen.families.cnn).

The conv layers are params.toml's `[[conv]]`; the head is `cnn.head`
(reportgen.families.cnn.CNN_HEADS):
- "avg" (ConvNet-Avg): global average pooling + FC(classes); softmax cross-entropy.
- "fc" (ConvNet-FC): flatten + FC(`cnn.dense`..., ReLU) + FC(classes); softmax cross-entropy.
- "r" (ConvNet-R): flatten + FC(classes x dims) + FC(classes); cross-entropy plus the
  reconstruction from all classes x dims units (not class-conditional).
- "cr" (ConvNet-CR): flatten + FC(classes x dims) seen as classes vectors of dims; a class's
  score is sigmoid(sum of its dims); binary cross-entropy per class plus the reconstruction
  from the true class's dims only (the others masked, as in the CapsNet).
- "cr_sf" (ConvNet-CR-SF): cr with the squash: the last conv's channels squashed as vectors of
  `cnn.vector_dims` (primary capsules), FC(classes x dims) without bias scaled by 1/classes
  (the CapsNet's vote matrices summed with the uniform couplings of No-R), each class vector
  squashed, its length the score: a CapsNet without routing (No-R), with the same parameter
  count. The FC kernel is the vote matrices themselves, drawn as the CapsNet draws them
  (Normal, `class_caps.kernel_init_stddev`): the same function, initialisation and Adam steps
  as CapsNet-NoR, so the two train alike.
The classes x dims feature units are linear (no activation), like the capsules' poses.

"logits" are the pre-activation scores (softmax input; for cr the sum; for cr_sf the norm of
the unsquashed vector); "probabilities" are what the model predicts by (softmax, sigmoid,
length). Loss choices are ours where Gu 2022 does not give them: cr_sf keeps the CapsNet's
margin loss (it is one); cr uses binary cross-entropy, since the margin loss on sigmoid scores
drove every score to 0 within one epoch (a saturated sigmoid passes no gradient back).
"""

from __future__ import annotations

from reportgen.capsnet.description import DecoderDescription, describe
from reportgen.capsnet.network import Network
from reportgen.errors import ReportgenError


def build_cnn(params) -> Network:
    """The Keras 3 model. Outputs: conv maps by layer name, logits, probabilities, and for the
    heads with feature units "features" (B, classes, dims) and, with a class-conditional
    decoder, "reconstruction" (from the top class's features)."""
    import keras
    from keras import layers

    from reportgen.families.cnn.layers import ClassSum, MaskTop, Squash, VectorNorm
    from reportgen.capsnet.layers import Length, PrimaryCaps
    from reportgen.capsnet.network import build_convs, build_decoder

    from reportgen.data.label_arity import PAIR, model_label_arity

    description = describe(params)
    two_labels = model_label_arity(params) == PAIR
    cnn = params.family_settings
    head, classes, dims = cnn.head, params.num_classes, params.class_caps.dims
    image = keras.Input(params.input_shape, name="image")
    x, outputs, _ = build_convs(description, image)
    features = None
    if head == "avg":
        logits = layers.Dense(classes, name="logits")(
            layers.GlobalAveragePooling2D(name="global_average")(x))
    elif head == "fc":
        h = layers.Flatten(name="flatten")(x)
        for i, units in enumerate(cnn.dense):
            h = layers.Dense(units, activation="relu", name=f"dense{i + 1}")(h)
        logits = layers.Dense(classes, name="logits")(h)
    else:
        if head == "cr_sf":
            filters = description.conv_layers[-1].filters
            vector = cnn.vector_dims
            if filters % vector:
                raise ReportgenError("Invalid model parameter 'cnn.vector_dims'.",
                                     expected=f"a divisor of the last conv's {filters} filters",
                                     received=repr(vector))
            x = PrimaryCaps(filters // vector, vector, name="squashed_vectors")(x)
        flat = layers.Flatten(name="flatten")(x)
        if head == "cr_sf":
            units = layers.Dense(classes * dims, use_bias=False, name="feature_units",
                                 kernel_initializer=keras.initializers.RandomNormal(
                                     stddev=params.class_caps.kernel_init_stddev))(flat)
            # sum_i c_ij W_ij u_i with c_ij = 1/classes: No-R's couplings, outside the kernel
            # so that Adam steps the vote matrices as it does in the CapsNet
            units = layers.Rescaling(1.0 / classes, name="uniform_coupling")(units)
        else:
            units = layers.Dense(classes * dims, name="feature_units")(flat)
        if head == "r":
            logits = layers.Dense(classes, name="logits")(units)
        else:
            features = layers.Reshape((classes, dims), name="class_features")(units)
        if head == "cr":
            logits = ClassSum(name="logits")(features)
        elif head == "cr_sf":
            logits = VectorNorm(name="logits")(features)
            features = Squash(name="squashed_features")(features)
    if head == "cr" or (two_labels and head != "cr_sf"):
        # two labels per image (MultiMNIST): independent class scores, sigmoid + binary
        # cross-entropy (Gu 2022, Ch.5 section 3.2), not a softmax that makes them compete
        probabilities = layers.Activation("sigmoid", name="probabilities")(logits)
    elif head == "cr_sf":
        probabilities = Length(name="probabilities")(features)
    else:
        probabilities = layers.Softmax(name="probabilities")(logits)
    outputs.update(logits=logits, probabilities=probabilities)
    if head == "r":     # the units are not split by class: one vector of classes * dims
        outputs["features"] = layers.Reshape((1, classes * dims), name="features")(units)
    elif features is not None:
        outputs["features"] = features
    decoder = reconstructor = None
    if description.decoder is not None:
        decoder = build_decoder(description.decoder)
        outputs["reconstruction"] = decoder(MaskTop(name="mask_top")([features, probabilities]))
    elif head == "r" and params.decoder.enabled:
        # Trained with the model, so an output of it (its weights are saved with the rest);
        # not class-conditional, so not the description's decoder.
        reconstructor = build_decoder(DecoderDescription(
            input_size=classes * dims, units=tuple(params.decoder.units),
            output_shape=tuple(params.input_shape)))
        outputs["unmasked_reconstruction"] = reconstructor(units)
    model = keras.Model(image, outputs, name=f"convnet_{head}")
    vectors = outputs.get("features", logits)
    encoder = keras.Model(image, [vectors, probabilities], name=f"convnet_{head}_encoder")
    scores = keras.Model(image, [vectors, logits, probabilities], name=f"convnet_{head}_train")
    net = Network(params=params, description=description, model=model, encoder=encoder,
                  decoder=decoder,
                  pair_logits=None if head == "cr_sf" else
                  keras.Model(image, [vectors, logits], name=f"convnet_{head}_pair"))
    net.training_losses = _training_losses(params, scores, decoder, reconstructor)
    if head == "cr_sf":        # the lengths of squashed class vectors: the margin loss
        net.classification_loss = "margin_loss"
    return net


def _training_losses(params, scores, decoder, reconstructor):
    """(images, one_hot) -> (classification loss (B,), reconstruction loss (B,), scores (B, K))."""
    from keras import ops

    from reportgen.capsnet.layers import Mask
    from reportgen.capsnet.losses import margin_loss, reconstruction_loss

    lp, head = params.loss, params.family_settings.head
    mask = Mask()

    def losses(images, one_hot):
        vectors, logits, probabilities = scores(images, training=True)
        if head == "cr":
            # per-class binary cross-entropy of the sigmoid scores, summed over the classes
            classification = ops.sum(ops.binary_crossentropy(one_hot, logits, from_logits=True),
                                     axis=-1)
        elif head == "cr_sf":
            classification = margin_loss(one_hot, probabilities, lp.m_plus, lp.m_minus,
                                         lp.down_weight)
        else:
            classification = ops.categorical_crossentropy(one_hot, logits, from_logits=True)
        if decoder is not None:
            rec = reconstruction_loss(images, decoder(mask([vectors, one_hot]), training=True),
                                      lp.reconstruction_weight)
        elif reconstructor is not None:
            flat = ops.reshape(vectors, (ops.shape(vectors)[0], -1))
            rec = reconstruction_loss(images, reconstructor(flat, training=True),
                                      lp.reconstruction_weight)
        else:
            rec = ops.zeros_like(classification)
        return classification, rec, probabilities

    return losses
