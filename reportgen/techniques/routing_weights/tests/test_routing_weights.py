"""Routing weights (reportgen.techniques.routing_weights) on tiny nets of every family that routes
from a grid: the maps against a slow NumPy loop over the children written here (dense coupling
coefficients of a CapsNet; EM's window-form assignments, densified here from the model's own
output; Self-Routing's padded windows), uniform routing giving 1/parents exactly, a batch equal
to image by image, the figures' panels, and a pose-only family (inverted dot-product attention
routing, Tsai et al. 2020) whose capsules have no activation to read."""

from __future__ import annotations

import numpy as np
import pytest
from em_fixture import build_tiny_em
from family_nets import TINY_GRACAPS, TINY_SELF_ROUTING, build

from reportgen.capsnet.description import CapsuleLayer, Head, ModelDescription, RoutingWeights
from reportgen.capsnet.description import conv_stack
from reportgen.engine.model import not_applicable_reason
from reportgen.engine.step import plan
from reportgen.figures.figure import RenderContext
from reportgen.figures.panel_kit import HIGHLIGHT
from reportgen.probe.probe import ProbeBatch, run_probe
from reportgen.techniques import get_technique

CLASS_NAMES = ("a", "b", "c")


@pytest.fixture(scope="module")
def technique():
    return get_technique("routing_weights")


@pytest.fixture(scope="module")
def em_net():
    return build_tiny_em(seed=3)


@pytest.fixture(scope="module")
def self_routing_net():
    return build(TINY_SELF_ROUTING, seed=2)


def _compute(technique, net, images, params):
    declared = technique.needs_for(params, net)
    batch = run_probe(net, images, needs=declared)
    return technique.compute(batch.restricted(declared, "routing_weights"), params)


def _sees(child: int, parent: int, kernel: int, stride: int, pad: int) -> bool:
    """Whether parent position `parent` of a convolution sees child position `child` (one
    axis): its window covers children parent*stride - pad … parent*stride - pad + kernel - 1."""
    return 0 <= child + pad - parent * stride < kernel


def reference_maps(weights, grid, types, parent_grid, parent_types, kernel=1, stride=1,
                   pad=0):
    """The slow oracle: for every child capsule i = (row * W + col) * types + type and every
    parent j = (position * parent types) + parent type it can route to, add w_ij to its grid
    cell's map of j's type, then divide by the weights added (types x positions seeing it)."""
    weights = np.asarray(weights, np.float64)
    batch = len(weights)
    gh, gw = grid
    ph, pw = parent_grid if parent_grid is not None else (1, 1)
    total = np.zeros((batch, gh, gw, parent_types))
    count = np.zeros((gh, gw))
    for i in range(gh * gw * types):
        cell, _ = divmod(i, types)
        row, col = divmod(cell, gw)
        for position in range(ph * pw):
            prow, pcol = divmod(position, pw)
            if parent_grid is not None and not (_sees(row, prow, kernel, stride, pad)
                                                and _sees(col, pcol, kernel, stride, pad)):
                continue
            count[row, col] += 1
            for p in range(parent_types):
                total[:, row, col, p] += weights[:, i, position * parent_types + p]
    with np.errstate(invalid="ignore"):
        return np.where(count[None, :, :, None] > 0, total / count[None, :, :, None], np.nan)


def test_variants_and_pages(technique, tiny_net, em_net, self_routing_net):
    assert technique.variants(tiny_net) == [technique.params_type()]
    assert technique.layer_for(technique.params_type()) == "class"
    em = technique.variants(em_net)
    assert [p.layer for p in em] == ["primary_caps", "conv_caps1", ""]
    assert [technique.layer_for(p) for p in em] == ["convcaps", "convcaps", "class"]
    assert [p.layer for p in technique.variants(self_routing_net)] == ["primary_caps", ""]
    # it reads the routing weights and the prediction, no activation
    assert technique.needs_for(technique.params_type(), tiny_net) == \
        {"routing:primary_caps", "predicted"}


def test_dense_coupling_coefficients_match_the_loop(technique, tiny_net, images, probe):
    """A CapsNet (Sabour et al. 2017): primary capsules -> class capsules, dense c_ij."""
    out = _compute(technique, tiny_net, images, technique.params_type())
    layer = tiny_net.description.primary_capsules
    want = reference_maps(probe["routing:primary_caps"], layer.grid, layer.types, None, 3)
    assert out["maps"].dtype == np.float32 and out["maps"].shape == (5, 4, 4, 3)
    np.testing.assert_allclose(out["maps"], want, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(out["predicted"], probe["predicted"].astype(np.float32))
    # c_ij sum to 1 over the classes (sums_over "parents"): so do each cell's maps
    np.testing.assert_allclose(out["maps"].sum(-1), 1.0, rtol=1e-5)
    # not uniform: the routing iterations moved the couplings
    assert np.ptp(out["maps"]) > 1e-5


def test_uniform_coupling_gives_one_over_the_parents_exactly(technique, make_net, images):
    """Gu 2022's No-R: one routing iteration, c_ij = 1/3 for every pair: every map is 1/3."""
    net = make_net(class_caps={"dims": 4, "routing": "none"})
    maps = _compute(technique, net, images, technique.params_type())["maps"]
    np.testing.assert_array_equal(maps, np.full(maps.shape, 1 / 3, np.float32))


@pytest.mark.slow
def test_em_window_assignments_match_the_loop(technique, em_net):
    """EM routing (Hinton et al. 2018): the model gives the assignments of a convolutional
    capsule layer in window form (B, Ph, Pw, K, K, Tin, Tout); densified here from the model's
    own output, independently of the probe (the same weights within the float32 rounding of
    another pass), and the maps are the loop over the children of the probe's."""
    images = np.random.default_rng(8).random((3, 12, 12, 1), dtype=np.float32)
    raw = {k: np.asarray(v) for k, v in em_net.model(images, training=False).items()}
    probe = run_probe(em_net, images)
    layers = em_net.description.capsule_layers
    checked = 0
    for params in technique.variants(em_net):
        name = params.layer or "conv_caps2"
        index = [c.name for c in layers].index(name)
        layer, after = layers[index], layers[index + 1]
        window = raw[f"{name}_routing"]
        kernel = stride = 1
        if after.grid is None:                    # into the classes: dense already
            dense = window
        else:
            b, ph, pw, kernel, _, tin, tout = window.shape
            stride = after.strides[0]
            gh, gw = layer.grid
            dense = np.zeros((b, gh, gw, tin, ph, pw, tout), np.float64)
            for p in range(ph):
                for q in range(pw):
                    for ky in range(kernel):
                        for kx in range(kernel):
                            dense[:, p * stride + ky, q * stride + kx, :, p, q] = \
                                window[:, p, q, ky, kx]
            dense = dense.reshape(b, gh * gw * tin, ph * pw * tout)
            checked += 1
        np.testing.assert_allclose(probe[f"routing:{name}"], dense, atol=2e-5, err_msg=name)
        want = reference_maps(probe[f"routing:{name}"], layer.grid, layer.types, after.grid,
                              after.types, kernel=kernel, stride=stride)
        got = _compute(technique, em_net, images, params)["maps"]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg=name)
        # and from the model's own window form, within the other pass's rounding
        np.testing.assert_allclose(got, reference_maps(dense, layer.grid, layer.types,
                                                       after.grid, after.types, kernel=kernel,
                                                       stride=stride), atol=2e-5, err_msg=name)
    assert checked == 2
    # the primary grid's last row and column are seen by no 3x3 window of stride 2: NaN there
    primary = _compute(technique, em_net, images, technique.variants(em_net)[0])["maps"]
    assert np.isnan(primary[:, -1]).all() and np.isfinite(primary[:, :-1, :-1]).all()


def test_self_routing_padded_windows_match_the_loop(technique, self_routing_net):
    """Self-Routing (Hahn et al. 2019): ConvCaps over a zero-padded grid (padding 1)."""
    images = np.random.default_rng(9).random((3, 12, 12, 1), dtype=np.float32)
    probe = run_probe(self_routing_net, images)
    layers = self_routing_net.description.capsule_layers
    primary, conv_caps = layers[0], layers[1]
    got = _compute(technique, self_routing_net, images, technique.params_type(layer=primary.name))
    want = reference_maps(probe[f"routing:{primary.name}"], primary.grid, primary.types,
                          conv_caps.grid, conv_caps.types, kernel=3, stride=2, pad=1)
    np.testing.assert_allclose(got["maps"], want, rtol=1e-5, atol=1e-8)


def test_uniform_window_weights_give_one_over_the_parents_exactly(technique, em_net):
    """Hand-set uniform assignments into a convolutional capsule layer: each child's 1/parents
    over the parents it can route to (the types at every position seeing it): every map is
    1/parents at its cell, those the model's geometry counts."""
    from reportgen.capsnet.description import parents_per_child

    description = em_net.description
    layer, after = description.capsule_layers[:2]
    count = parents_per_child(description, layer.name)
    gh, gw = layer.grid
    ph, pw = after.grid
    sees = np.zeros((gh, gw, ph, pw), bool)
    for y, x, p, q in np.ndindex(gh, gw, ph, pw):
        sees[y, x, p, q] = _sees(y, p, 3, 2, 0) and _sees(x, q, 3, 2, 0)
    mask = np.repeat(np.repeat(sees.reshape(gh * gw, 1, ph * pw, 1), layer.types, 1),
                     after.types, 3).reshape(gh * gw * layer.types, -1)
    assert (mask.sum(1) == count).all()            # the geometry counted alike
    uniform = np.where(mask, 1.0 / np.maximum(count, 1)[:, None], 0.0).astype(np.float32)
    batch = ProbeBatch(net=em_net, images=np.zeros((2, 12, 12, 1), np.float32),
                       tensors={f"routing:{layer.name}": np.stack([uniform, uniform]),
                                "predicted": np.zeros(2, np.int64)})
    maps = technique.compute(batch, technique.params_type(layer=layer.name))["maps"]
    parents = count.reshape(gh, gw, layer.types)[..., 0]
    want = np.where(parents > 0, 1.0 / np.where(parents > 0, parents, 1), np.nan)
    np.testing.assert_allclose(maps, np.broadcast_to(want[None, :, :, None], maps.shape),
                               rtol=1e-6)


def test_a_batch_gives_what_each_image_gives(technique, em_net):
    images = np.random.default_rng(4).random((4, 12, 12, 1), dtype=np.float32)
    for params in technique.variants(em_net):
        batch = _compute(technique, em_net, images, params)
        one = _compute(technique, em_net, images[2:3], params)
        for key in batch:
            np.testing.assert_allclose(one[key][0], batch[key][2], rtol=1e-4, atol=1e-7)


def _tiles_along(png: bytes) -> tuple[int, np.ndarray]:
    """(how many tiles a row of the figure holds, the figure's pixels): runs of non-white
    pixels across the tiles' middle row (the input is a flat gray, so no tile pixel is
    white)."""
    import io

    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    dark = (pixels < 250).any(-1)
    # the tile row: the first row of the figure where most pixels are not white
    row = next(y for y in range(len(dark)) if dark[y].mean() > 0.3)
    line = dark[row + 10]
    return int(np.sum(line[1:] & ~line[:-1]) + line[0]), pixels


def _ctx(net, image) -> RenderContext:
    return RenderContext(model="m", step="1-1", class_names=CLASS_NAMES, image=image,
                         description=net.description)


def test_figures_one_panel_per_parent_type_predicted_framed(technique, em_net, tiny_net):
    image = np.full((12, 12, 1), 0.5, np.float32)
    images = np.stack([image, image])
    for net, panels in ((tiny_net, [3]), (em_net, [3, 2, 3])):
        variants = technique.variants(net)
        assert len(variants) == len(panels)       # one figure per routed layer
        for params, count in zip(variants, panels):
            out = _compute(technique, net, images, params)
            item = {k: v[0] for k, v in out.items()}
            figures = technique.render(item, params, _ctx(net, image))
            assert [f.kind for f in figures] == ["png"]
            tiles, pixels = _tiles_along(figures[0].data)
            assert tiles == count, (params, tiles)
            routing = net.description.layer(params.layer or
                                            net.description.routed_layers[-1].name).routing
            caption = figures[0].caption
            assert routing.words in caption and f"{routing.symbol}_ij sum to 1 over" in caption
            framed = (pixels == HIGHLIGHT).all(-1).any()
            classes = not params.layer
            assert framed == classes
            if classes:
                assert f"Predicted class {CLASS_NAMES[int(item['predicted'])]} framed" in caption
                assert "Uniform routing would give 1/3 = 0.333 everywhere" in caption
            numbers = technique.numbers(item, params, _ctx(net, image))
            assert (numbers["words"], numbers["sums_over"], numbers["symbol"]) == \
                (routing.words, routing.sums_over, routing.symbol)
            assert len(numbers["map_mean"]) == count


def test_where_it_does_not_apply():
    gracaps = build(TINY_GRACAPS)
    chosen = plan([get_technique("routing_weights")], gracaps)
    assert not chosen.variants
    assert not_applicable_reason(chosen.not_applicable[0][1]) == \
        "its attention weights do not lead from each child capsule to its parents"


# --- a pose-only family: inverted dot-product attention routing (Tsai et al. 2020) ----------

INVERTED = RoutingWeights(kind="toy_inverted_attention",
                          words="inverted dot-product attention routing coefficients",
                          lacks="inverted attention routing", sums_over="parents", paths=True,
                          iterations=2, symbol="r")
TYPES, DIMS, CLASSES, CLASS_DIMS = 2, 4, 3, 4


def _pose_only(iterations: int):
    """12x12 -> conv 10x10 -> primary poses on a 4x4 grid (no activation) -> class poses by
    `iterations` of inverted dot-product attention routing: r_ij = softmax_j(v_j . u_hat[j|i])
    from v_j = 0 (uniform first), v_j = LayerNorm(sum_i r_ij u_hat[j|i]); a class's score is
    the length of its pose, which routing never reads."""
    import keras
    from keras import layers, ops

    from reportgen.capsnet.network import Network, build_convs

    convs = conv_stack((12, 12, 1), [("conv1", 4, 3, 1, "valid", "relu", ""),
                                     ("primary_conv", TYPES * DIMS, 3, 2, "valid", "none",
                                      "primary_caps")])
    primary = CapsuleLayer(name="primary_caps", pose="vector", grid=convs[-1].grid, types=TYPES,
                           pose_size=DIMS, activation="length", routing=INVERTED,
                           receptive_field=convs[-1].receptive_field)
    classes = CapsuleLayer(name="class_caps", pose="vector", grid=None, types=CLASSES,
                           pose_size=CLASS_DIMS, activation="length")
    description = ModelDescription(input_shape=(12, 12, 1), conv_layers=convs,
                                   capsule_layers=(primary, classes),
                                   head=Head("capsules", CLASSES, "class_caps"))
    keras.utils.set_random_seed(5)
    gh, gw = primary.grid
    children = gh * gw * TYPES
    image = keras.Input((12, 12, 1), name="image")
    x, outputs, _ = build_convs(description, image)
    poses = layers.Reshape((children, DIMS))(x)
    votes = ops.reshape(layers.Dense(CLASSES * CLASS_DIMS, use_bias=False, name="vote")(poses),
                        (-1, children, CLASSES, CLASS_DIMS))
    parents = ops.zeros_like(votes[:, 0])
    for _ in range(iterations):
        agreement = ops.sum(parents[:, None] * votes, axis=-1)           # (B, N, K)
        routing = ops.softmax(agreement, axis=-1)                        # over the parents
        pooled = ops.sum(routing[..., None] * votes, axis=1)
        centred = pooled - ops.mean(pooled, axis=-1, keepdims=True)
        parents = centred / ops.sqrt(ops.mean(centred ** 2, axis=-1, keepdims=True) + 1e-5)
    outputs.update({"primary_capsules": poses, "primary_caps_routing": routing,
                    "class_capsules": parents, "lengths": ops.norm(parents, axis=-1)})
    model = keras.Model(image, outputs, name="toy_inverted_attention")
    return Network(params=None, description=description, model=model,
                   encoder=keras.Model(image, [parents, outputs["lengths"]]))


@pytest.mark.parametrize("iterations", [1, 2])
def test_pose_only_capsules_get_their_routing_weights_drawn(technique, iterations):
    net = _pose_only(iterations)
    assert technique.applicable(net)
    params, = technique.variants(net)
    images = np.random.default_rng(6).random((3, 12, 12, 1), dtype=np.float32)
    probe = run_probe(net, images)
    out = _compute(technique, net, images, params)
    layer = net.description.primary_capsules
    if iterations == 1:       # v_j = 0: r_ij = 1/3 for every pair
        np.testing.assert_allclose(out["maps"], 1 / 3, rtol=1e-6)
    else:
        want = reference_maps(probe["routing:primary_caps"], layer.grid, layer.types, None,
                              CLASSES)
        np.testing.assert_allclose(out["maps"], want, rtol=1e-6, atol=1e-8)
        assert np.ptp(out["maps"]) > 1e-6
    item = {k: v[1] for k, v in out.items()}
    figure, = technique.render(item, params, _ctx(net, images[1]))
    assert "inverted dot-product attention routing coefficients" in figure.caption
    assert "each primary_caps capsule's r_ij sum to 1 over the 3 classes" in figure.caption
