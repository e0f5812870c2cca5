"""Faithfulness correlation and infidelity: analytic oracles, a loop-by-loop NumPy reference on a
tiny CNN, and Captum's infidelity on a PyTorch twin with the same weights and perturbations."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.techniques.explanation_quality import faithfulness as fq

from . import tiny_cnn


def _sum_score(batch, image_index):
    return np.asarray(batch, np.float64).sum(axis=(1, 2, 3))


# --- faithfulness correlation -------------------------------------------------------------------

def test_faithfulness_of_the_exact_map_of_a_sum_is_one():
    """f(x) = sum x, Phi = x, baseline 0: the drop is exactly the subset's relevance."""
    rng = np.random.default_rng(0)
    images = rng.random((5, 9, 7, 1), dtype=np.float32)
    subsets = fq.random_subsets(5, (9, 7), 20, 12, rng)
    rho = fq.faithfulness_correlation(images, images[..., 0], _sum_score, subsets, rows=33)
    np.testing.assert_allclose(rho, 1.0, atol=1e-6)
    flipped = fq.faithfulness_correlation(images, -images[..., 0], _sum_score, subsets)
    np.testing.assert_allclose(flipped, -1.0, atol=1e-6)
    # a constant map gives every subset the same relevance: no correlation
    assert np.isnan(fq.faithfulness_correlation(images, np.ones((5, 9, 7)), _sum_score,
                                                subsets)).all()


def test_random_subsets_have_the_asked_size_and_vary():
    subsets = fq.random_subsets(3, (6, 5), 40, 7, np.random.default_rng(1))
    assert subsets.shape == (3, 40, 6, 5)
    assert (subsets.sum(axis=(2, 3)) == 7).all()
    # every pixel is drawn about 40 * 7 / 30 times per image
    assert subsets.sum(axis=1).min() > 0
    with pytest.raises(ValueError):
        fq.random_subsets(1, (2, 2), 1, 5, np.random.default_rng(0))


def _faithfulness_by_loops(params, images, maps, targets, subsets, baseline):
    """Reference: one image and one subset at a time, the NumPy forward pass, np.corrcoef."""
    out = []
    for n in range(len(images)):
        x = images[n].astype(np.float64)
        clean = tiny_cnn.numpy_forward(params, x[None])[0, targets[n]]
        sums, drops = [], []
        for mask in subsets[n]:
            perturbed = x.copy()
            perturbed[mask] = baseline
            drops.append(clean - tiny_cnn.numpy_forward(params, perturbed[None])[0, targets[n]])
            sums.append(maps[n][mask].sum())
        out.append(np.corrcoef(sums, drops)[0, 1])
    return np.asarray(out)


def test_faithfulness_matches_a_loop_reference_on_a_tiny_cnn():
    params = tiny_cnn.weights(0)
    model = tiny_cnn.keras_model(params)
    images = tiny_cnn.images(4)
    targets = np.array([0, 1, 2, 1])
    maps = (tiny_cnn.keras_saliency(model, images, targets) * images).sum(-1)   # grad x input
    subsets = fq.random_subsets(4, (8, 8), 15, 10, np.random.default_rng(2))
    ours = fq.faithfulness_correlation(images, maps, tiny_cnn.keras_score(model, targets),
                                       subsets, baseline=0.5, rows=17)
    reference = _faithfulness_by_loops(params, images, maps, targets, subsets, 0.5)
    np.testing.assert_allclose(ours, reference, atol=1e-4)
    assert np.all(np.abs(ours) <= 1)


# --- infidelity ---------------------------------------------------------------------------------

def test_infidelity_of_the_exact_attribution_of_a_linear_model_is_zero():
    rng = np.random.default_rng(3)
    images = rng.random((4, 6, 6, 2), dtype=np.float32)
    w = rng.normal(0, 1, (6, 6, 2)).astype(np.float32)

    def linear(batch, image_index):
        return np.einsum("nhwc,hwc->n", np.asarray(batch, np.float64), w)

    phi = np.broadcast_to(w, images.shape)
    noise = fq.gaussian_perturbations(images.shape, 30, 0.2, rng)
    squares = fq.square_removals(images, 30, 3, rng)
    for perturbations in (noise, squares):
        # float32 inputs: x - I rounds at ~1e-7, so 0 up to (1e-6)^2
        assert fq.infidelity(images, phi, linear, perturbations).max() < 1e-9
        # twice the exact attribution: unnormalised it errs by (I^T w)^2; normalised it is exact
        doubled = fq.infidelity(images, 2 * phi, linear, perturbations)
        expected = np.mean(np.einsum("nshwc,hwc->ns", perturbations.astype(np.float64), w) ** 2,
                           axis=1)
        np.testing.assert_allclose(doubled, expected, rtol=1e-4)
        assert fq.infidelity(images, 2 * phi, linear, perturbations, normalize=True).max() < 1e-9


def test_square_removals_set_one_square_to_the_baseline():
    rng = np.random.default_rng(4)
    images = rng.random((2, 7, 9, 1), dtype=np.float32) + 1.0
    removals = fq.square_removals(images, 5, 3, rng, baseline=0.25)
    removed = images[:, None] - removals
    changed = removals[..., 0] != 0
    assert (changed.sum(axis=(2, 3)) == 9).all()
    np.testing.assert_allclose(removed[..., 0][changed], 0.25, atol=1e-6)
    rows, cols = np.nonzero(changed[1, 2])
    assert np.ptp(rows) == 2 and np.ptp(cols) == 2          # one 3x3 square


def _infidelity_by_loops(params, images, phi, targets, perturbations, normalize):
    out = []
    for n in range(len(images)):
        x = images[n].astype(np.float64)
        clean = tiny_cnn.numpy_forward(params, x[None])[0, targets[n]]
        a, d = [], []
        for pert in perturbations[n].astype(np.float64):
            a.append((pert * phi[n]).sum())
            d.append(clean - tiny_cnn.numpy_forward(params, (x - pert)[None])[0, targets[n]])
        a, d = np.asarray(a), np.asarray(d)
        if normalize:
            a = a * (a @ d) / (a @ a)
        out.append(np.mean((a - d) ** 2))
    return np.asarray(out)


@pytest.mark.parametrize("normalize", [False, True])
def test_infidelity_matches_a_loop_reference_and_captum(normalize):
    import torch
    from captum.metrics import infidelity as captum_infidelity

    params = tiny_cnn.weights(1)
    model = tiny_cnn.keras_model(params)
    images = tiny_cnn.images(5, seed=2)
    targets = np.array([2, 0, 1, 1, 0])
    phi = tiny_cnn.keras_saliency(model, images, targets)
    rng = np.random.default_rng(5)
    perturbations = np.concatenate([fq.gaussian_perturbations(images.shape, 12, 0.1, rng),
                                    fq.square_removals(images, 6, 3, rng)], axis=1)
    ours = fq.infidelity(images, phi, tiny_cnn.keras_score(model, targets), perturbations,
                         normalize=normalize, rows=23)
    reference = _infidelity_by_loops(params, images, phi, targets, perturbations, normalize)
    np.testing.assert_allclose(ours, reference, rtol=2e-3, atol=1e-7)

    # Captum: the same perturbations, in its order (each input's samples together, as it
    # expands the batch with repeat_interleave), on NCHW tensors
    samples = perturbations.shape[1]
    nchw = lambda a: torch.from_numpy(np.ascontiguousarray(np.moveaxis(a, -1, -3)))  # noqa
    flat = nchw(perturbations.reshape(-1, *images.shape[1:]))

    def perturb(inputs):
        assert inputs.shape[0] == len(flat)
        return flat, inputs - flat

    twin = tiny_cnn.torch_model(params)
    with torch.no_grad():
        theirs = captum_infidelity(twin, perturb, nchw(images), nchw(phi),
                                   target=torch.from_numpy(targets), n_perturb_samples=samples,
                                   normalize=normalize).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=2e-3, atol=1e-7)


# --- max-sensitivity ----------------------------------------------------------------------------

def test_max_sensitivity_of_a_linear_and_a_constant_explanation():
    """Phi(x) = A x (an explanation linear in the input): Phi(x + d) - Phi(x) = A d, so the
    score is max_d ||A d|| / ||A x|| exactly; a constant explanation does not move: 0."""
    rng = np.random.default_rng(6)
    images = rng.random((4, 5, 6, 2), dtype=np.float32)
    a = rng.normal(0, 1, (5 * 6 * 2, 5 * 6)).astype(np.float64)

    def linear(batch, image_index):
        return (np.asarray(batch, np.float64).reshape(len(batch), -1) @ a).reshape(-1, 5, 6)

    deltas = fq.linf_ball(images.shape, 7, 0.05, rng)
    assert np.abs(deltas).max() <= 0.05 and np.abs(deltas).max() > 0.04
    got = fq.max_sensitivity(images, linear, deltas, rows=9)
    moved = np.linalg.norm(deltas.astype(np.float64).reshape(4, 7, -1) @ a, axis=-1)
    expected = moved.max(axis=1) / np.linalg.norm(
        images.astype(np.float64).reshape(4, -1) @ a, axis=-1)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    constant = fq.max_sensitivity(images, lambda b, i: np.ones((len(b), 5, 6)), deltas)
    np.testing.assert_array_equal(constant, 0.0)
    # an all-zero explanation has no relative change: undefined
    assert np.isnan(fq.max_sensitivity_of(np.zeros((2, 3, 3)), np.ones((2, 4, 3, 3)))).all()


def _numpy_saliency(params, x, targets):
    """The gradient of each image's target logit with respect to its input, by hand for the
    tiny CNN (tanh conv 3x3 valid -> flatten -> dense): the reference explanation."""
    x = np.asarray(x, np.float64)
    n, h, w, _ = x.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))
    conv = np.tanh(np.einsum("nhwcij,ijcf->nhwf", windows, params["kernel"]) + params["bias"])
    back = params["dense"][:, targets].T.reshape(n, h - 2, w - 2, -1) * (1 - conv ** 2)
    grad = np.zeros_like(x)
    for i in range(3):                  # the 3x3 kernel's taps, not pixels
        for j in range(3):
            grad[:, i:i + h - 2, j:j + w - 2] += np.einsum("nhwf,cf->nhwc", back,
                                                           params["kernel"][i, j])
    return grad


def test_max_sensitivity_matches_a_numpy_twin_and_captum():
    """The saliency (input gradient) of the tiny CNN: ours through Keras's gradients against a
    hand-written NumPy gradient, and against captum.metrics.sensitivity_max on the PyTorch twin
    with the same weights and the same perturbations."""
    import torch
    from captum.metrics import sensitivity_max

    params = tiny_cnn.weights(2)
    model = tiny_cnn.keras_model(params)
    images = tiny_cnn.images(4, seed=3)
    targets = np.array([1, 0, 2, 2])
    np.testing.assert_allclose(tiny_cnn.keras_saliency(model, images, targets),
                               _numpy_saliency(params, images, targets), atol=1e-5)
    deltas = fq.linf_ball(images.shape, 6, 0.1, np.random.default_rng(7))

    def keras_explain(batch, image_index):
        return tiny_cnn.keras_saliency(model, batch, targets[image_index])

    def numpy_explain(batch, image_index):
        return _numpy_saliency(params, batch, targets[image_index])

    ours = fq.max_sensitivity(images, keras_explain, deltas, rows=10)
    twin = fq.max_sensitivity(images, numpy_explain, deltas)
    np.testing.assert_allclose(ours, twin, rtol=1e-4)
    assert (ours > 0).all()

    nchw = lambda a: torch.from_numpy(np.ascontiguousarray(np.moveaxis(a, -1, -3)))  # noqa
    flat = nchw(deltas.reshape(-1, *images.shape[1:]))
    net = tiny_cnn.torch_model(params)

    def perturb(inputs):
        assert inputs.shape[0] == len(flat)    # each input's samples together (repeat_interleave)
        return inputs + flat

    def saliency(inputs, target):
        inputs = inputs[0] if isinstance(inputs, tuple) else inputs   # Captum passes a tuple
        inputs = inputs.detach().clone().requires_grad_(True)
        with torch.enable_grad():                   # sensitivity_max runs under no_grad
            chosen = net(inputs).gather(1, target[:, None]).sum()
            return torch.autograd.grad(chosen, inputs)   # a tuple, as Captum's attributions

    theirs = sensitivity_max(saliency, nchw(images), perturb_func=perturb,
                             n_perturb_samples=deltas.shape[1],
                             target=torch.from_numpy(targets)).detach().numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-3)
