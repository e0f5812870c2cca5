"""The single forward (and, when needed, backward) pass per (model, step, batch of images).

Every technique reads from the ProbeBatch this returns; none runs the network forward for itself.
Gradients for Grad-CAM++ are taken in the same pass: of each image's target class-capsule length
(the predicted class) with respect to every conv layer's output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Tensors a technique can ask for (Technique.needs). Shapes for batch B:
TENSORS = {
    "images": "(B, H, W, C) the inputs, float32 in [0, 1]",
    "conv:<layer>": "(B, h, w, filters) post-activation output of a conv layer",
    "primary_capsules": "(B, N, D) squashed primary capsules, N = gh*gw*types",
    "primary_lengths": "(B, gh, gw, types) primary-capsule lengths on the grid",
    "coupling": "(B, N, classes) final coupling coefficients c_ij",
    "class_capsules": "(B, classes, dims)",
    "lengths": "(B, classes) class-capsule lengths",
    "predicted": "(B,) int64 argmax of lengths",
    "reconstruction": "(B, H, W, C) decoder output from the longest capsule (if decoder)",
    "grad:<layer>": "(B, h, w, filters) d length[predicted] / d conv output",
}


@dataclass
class ProbeBatch:
    net: object                      # reportgen.capsnet.architecture.CapsNet (decoder calls)
    images: np.ndarray
    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def __len__(self) -> int:
        return len(self.images)


def run_probe(net, images: np.ndarray, gradients: bool = True) -> ProbeBatch:
    """One pass over `images` (B, H, W, C) float32 collecting every tensor of TENSORS."""
    import tensorflow as tf

    x = tf.convert_to_tensor(np.asarray(images, np.float32))
    conv_names = net.conv_layer_names
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x)  # records the path from the input through every conv output
        outputs = net.model(x, training=False)
        lengths = outputs["lengths"]
        predicted = tf.argmax(lengths, axis=1)
        target = tf.gather(lengths, predicted, axis=1, batch_dims=1)
    tensors = {"images": np.asarray(images, np.float32)}
    if gradients:
        grads = tape.gradient(target, [outputs[n] for n in conv_names])
        for name, grad in zip(conv_names, grads):
            tensors[f"grad:{name}"] = grad.numpy()
    for name in conv_names:
        tensors[f"conv:{name}"] = outputs[name].numpy()
    gh, gw = net.grid_shape
    types = net.params.primary.types
    primary = outputs["primary_capsules"].numpy()
    tensors["primary_capsules"] = primary
    tensors["primary_lengths"] = np.sqrt(np.sum(primary ** 2, axis=-1)).reshape(-1, gh, gw, types)
    tensors["coupling"] = outputs["coupling"].numpy()
    tensors["class_capsules"] = outputs["class_capsules"].numpy()
    tensors["lengths"] = lengths.numpy()
    tensors["predicted"] = predicted.numpy().astype(np.int64)
    if "reconstruction" in outputs:
        tensors["reconstruction"] = outputs["reconstruction"].numpy()
    return ProbeBatch(net=net, images=tensors["images"], tensors=tensors)


def subset(batch: ProbeBatch, index) -> ProbeBatch:
    """The same tensors for a subset of the batch's images (no model work)."""
    index = np.asarray(index)
    return ProbeBatch(net=batch.net, images=batch.images[index],
                      tensors={k: v[index] for k, v in batch.tensors.items()})


def empty_batch(net) -> ProbeBatch:
    """A batch of no images: what checkpoint-scope techniques (e.g. conv kernels) receive."""
    shape = (0, *net.params.input_shape)
    return ProbeBatch(net=net, images=np.zeros(shape, np.float32),
                      tensors={"images": np.zeros(shape, np.float32)})
