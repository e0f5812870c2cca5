"""EM routing (Hinton, Sabour & Frosst 2018) against the NumPy oracle written from the
equations (numpy_oracle.py beside this file): random votes for 1-5 iterations, the one-iteration
uniform case, a planted cluster pulling its children, convolutional windows (a child competes
over every parent that sees it) and finite gradients where the equations divide by zero."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.capsnet.conv_windows import ConvWindows
from reportgen.families.em.routing import em_routing, inverse_temperatures

from . import numpy_oracle as oracle


def _random(rng, batch=2, children=9, parents=4, dims=16):
    return (rng.normal(size=(batch, children, parents, dims)).astype(np.float32),
            rng.random((batch, children)).astype(np.float32),
            rng.normal(size=parents).astype(np.float32),
            rng.normal(size=parents).astype(np.float32))


@pytest.mark.parametrize("iterations", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("temperature", [0.01, 1.0])
def test_matches_the_oracle(iterations, temperature):
    rng = np.random.default_rng(iterations)
    votes, activations, beta_u, beta_a = _random(rng)
    beta_a *= 20.0       # so that lambda (beta_a - cost) is not ~0 at the small temperature
    got = em_routing(votes, activations, beta_u, beta_a, iterations, temperature)
    want = oracle.em_routing(votes, activations, beta_u, beta_a, iterations, temperature)
    assert [g.shape for g in got] == [(2, 4), (2, 4, 16), (2, 9, 4)]
    assert all(isinstance(g, np.ndarray) and g.dtype == np.float32 for g in got)
    for g, w, name in zip(got, want, ("activations", "poses", "assignments")):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5, err_msg=name)
    np.testing.assert_allclose(got[2].sum(-1), 1.0, atol=1e-5)


def test_one_iteration_is_uniform_assignment_and_weighted_means():
    rng = np.random.default_rng(3)
    votes, activations, beta_u, beta_a = _random(rng, children=6, parents=3)
    a, poses, assignments = em_routing(votes, activations, beta_u, beta_a, iterations=1,
                                       inverse_temperature=0.5)
    np.testing.assert_allclose(assignments, 1.0 / 3.0, rtol=1e-6)
    r = activations[..., None] / 3.0                                       # (B, N, 1)
    mean = (r[..., None] * votes).sum(1) / r.sum(1)[..., None]
    np.testing.assert_allclose(poses, mean, rtol=1e-5, atol=1e-6)
    variance = (r[..., None] * (votes - mean[:, None]) ** 2).sum(1) / r.sum(1)[..., None] + 1e-7
    cost = ((beta_u[:, None] + 0.5 * np.log(variance)) * r.sum(1)[..., None]).sum(-1)
    lam = inverse_temperatures(1, 0.5)[0]
    assert lam == pytest.approx(0.5 * 0.05)
    np.testing.assert_allclose(a, 1 / (1 + np.exp(-lam * (beta_a - cost))), rtol=1e-5)


def test_a_planted_cluster_pulls_its_children():
    """Ten children whose votes for parent 0 agree (and scatter for parent 1) end up assigned to
    parent 0, whose pose moves onto the cluster; the scattered children go to parent 1."""
    rng = np.random.default_rng(7)
    centre = rng.normal(size=16).astype(np.float32)
    votes = rng.normal(scale=3.0, size=(1, 20, 2, 16)).astype(np.float32)
    votes[0, :10, 0] = centre + rng.normal(scale=0.05, size=(10, 16))
    votes[0, 10:, 1] = rng.normal(scale=0.5, size=(10, 16)) + 5.0
    activations = np.ones((1, 20), np.float32)
    beta = np.zeros(2, np.float32)
    before = em_routing(votes, activations, beta, beta, iterations=1)
    a, poses, assignments = em_routing(votes, activations, beta, beta, iterations=3)
    want = oracle.em_routing(votes, activations, beta, beta, 3)
    np.testing.assert_allclose(assignments, want[2], atol=1e-5)
    assert assignments[0, :10, 0].min() > 0.99
    assert assignments[0, 10:, 1].min() > 0.99
    assert np.abs(poses[0, 0] - centre).max() < 0.1
    assert np.abs(before[1][0, 0] - centre).max() > 0.5       # uniform routing: pulled away
    assert a[0, 0] > before[0][0, 0]                           # a tighter Gaussian: more active


@pytest.mark.parametrize("grid, kernel, stride", [((6, 5), 3, 2), ((5, 5), 3, 1),
                                                  ((4, 6), 2, 2)])
def test_convolutional_windows_route_over_every_parent_that_sees_a_child(grid, kernel, stride):
    """The window form equals dense routing whose mask lets child (y, x, i) reach exactly the
    parents whose kernel covers (y, x): the oracle's softmax runs over all of them."""
    rng = np.random.default_rng(sum(grid) + kernel)
    windows = ConvWindows(grid, kernel, stride)
    ph, pw = windows.parent_grid
    tin, tout = 2, 3
    votes = rng.normal(size=(2, ph, pw, kernel, kernel, tin, tout, 16)).astype(np.float32)
    activations = rng.random((2, *grid, tin)).astype(np.float32)
    beta_u = rng.normal(size=tout).astype(np.float32)
    beta_a = 20 * rng.normal(size=tout).astype(np.float32)
    a, poses, assignments = em_routing(votes, activations, beta_u, beta_a, 3, 0.01,
                                       windows=windows)
    mask = windows.dense_mask(tin, tout)
    dense = np.zeros((2, *mask.shape, 16), np.float32)
    for p in range(ph):
        for q in range(pw):
            for ky in range(kernel):
                for kx in range(kernel):
                    for i in range(tin):
                        child = ((p * stride + ky) * grid[1] + q * stride + kx) * tin + i
                        parents = (p * pw + q) * tout + np.arange(tout)
                        dense[:, child, parents] = votes[:, p, q, ky, kx, i]
    want = oracle.em_routing(dense, activations.reshape(2, -1), np.tile(beta_u, ph * pw),
                             np.tile(beta_a, ph * pw), 3, 0.01, mask=mask)
    np.testing.assert_allclose(a.reshape(2, -1), want[0], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(poses.reshape(2, -1, 16), want[1], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(windows.densify(assignments), want[2], atol=2e-5)
    # The dense form with the same mask is the same computation.
    masked = em_routing(dense, activations.reshape(2, -1), np.tile(beta_u, ph * pw),
                        np.tile(beta_a, ph * pw), 3, 0.01, mask=mask)
    np.testing.assert_allclose(masked[2], want[2], atol=2e-5)
    # Each covered child's assignments over ALL its parents sum to 1 (uncovered ones: 0).
    covered = windows.parents_per_position().reshape(-1) > 0
    sums = windows.densify(assignments).sum(-1).reshape(2, -1, tin)
    np.testing.assert_allclose(sums[:, covered], 1.0, atol=1e-5)
    np.testing.assert_allclose(sums[:, ~covered], 0.0)


def _gradients(votes, activations, beta_u, beta_a, iterations=3, **kwargs):
    import tensorflow as tf

    variables = [tf.Variable(x) for x in (votes, activations, beta_u, beta_a)]
    with tf.GradientTape() as tape:
        a, poses, _ = em_routing(*variables, iterations=iterations, **kwargs)
        total = tf.reduce_sum(a) + tf.reduce_sum(tf.square(poses))
    assert np.isfinite(total.numpy())
    return [g.numpy() for g in tape.gradient(total, variables)]


@pytest.mark.parametrize("case", ["random", "one_child", "zero_activations", "identical_votes"])
def test_gradients_are_finite(case):
    rng = np.random.default_rng(5)
    votes, activations, beta_u, beta_a = _random(rng, children=1 if case == "one_child" else 7)
    if case == "zero_activations":
        activations[:] = 0.0
    if case == "identical_votes":              # zero variance: only the 1e-7 remains
        votes[:] = votes[:, :1]
    grads = _gradients(votes, activations, beta_u, beta_a)
    assert all(np.isfinite(g).all() for g in grads)
    a, poses, assignments = em_routing(votes, activations, beta_u, beta_a)
    assert np.isfinite(a).all() and np.isfinite(poses).all() and np.isfinite(assignments).all()
    if case == "zero_activations":       # a parent that receives nothing: mean 0, cost 0
        np.testing.assert_allclose(poses, 0.0)
        lam = inverse_temperatures(3, 0.01)[-1]
        np.testing.assert_allclose(a, np.broadcast_to(1 / (1 + np.exp(-lam * beta_a)), a.shape),
                                   rtol=1e-6)


def test_window_gradients_are_finite_and_detaching_keeps_the_values():
    rng = np.random.default_rng(9)
    windows = ConvWindows((5, 5), 3, 2)
    votes = rng.normal(size=(1, 2, 2, 3, 3, 2, 3, 16)).astype(np.float32)
    activations = rng.random((1, 5, 5, 2)).astype(np.float32)
    activations[0, 0, 0] = 0.0
    beta = np.zeros(3, np.float32)
    grads = _gradients(votes, activations, beta, beta, windows=windows)
    assert all(np.isfinite(g).all() for g in grads)
    plain = em_routing(votes, activations, beta, beta, windows=windows)
    detached = em_routing(votes, activations, beta, beta, windows=windows,
                          detach_assignments=True)
    for p, d in zip(plain, detached):
        np.testing.assert_array_equal(p, d)


def test_bad_shapes_are_refused():
    votes, activations, beta_u, beta_a = _random(np.random.default_rng(0))
    with pytest.raises(ValueError, match="iterations"):
        em_routing(votes, activations, beta_u, beta_a, iterations=0)
    with pytest.raises(ValueError, match="mask"):
        em_routing(votes, activations, beta_u, beta_a, mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="do not fit"):
        em_routing(np.zeros((1, 2, 2, 3, 3, 2, 3, 16), np.float32),
                   np.zeros((1, 6, 6, 2), np.float32), 0.0, 0.0,
                   windows=ConvWindows((5, 5), 3, 2))


def test_a_pass_without_gradients_gives_the_same_values_bit_for_bit():
    """`no_gradient_pass` leaves out the E-step term that only shapes the gradient through mu
    (exactly 0): dense and windowed routing give identical arrays with and without it."""
    from reportgen.capsnet.gradient_pass import no_gradient_pass

    rng = np.random.default_rng(7)
    dense = _random(rng, children=12, parents=5)
    windows = ConvWindows((5, 5), 3, 1)
    windowed = (rng.normal(size=(2, 3, 3, 3, 3, 2, 4, 16)).astype(np.float32),
                rng.random((2, 5, 5, 2)).astype(np.float32),
                rng.normal(size=4).astype(np.float32), 20 * rng.normal(size=4).astype(np.float32))
    for args, kwargs in ((dense, {}), (windowed, {"windows": windows})):
        plain = em_routing(*args, 3, 0.01, **kwargs)
        with no_gradient_pass():
            skipped = em_routing(*args, 3, 0.01, **kwargs)
        for a, b in zip(plain, skipped):
            assert np.array_equal(a, b)


def test_passes_without_gradients_are_traced_knowing_it():
    """reportgen.capsnet.compiled traces a pass made with gradients=False inside
    `no_gradient_pass`, and one with gradients as it is."""
    from types import SimpleNamespace

    import tensorflow as tf

    from reportgen.capsnet.compiled import compiled
    from reportgen.capsnet.gradient_pass import gradient_taken

    seen = []

    def make():
        def double(x):
            seen.append(not gradient_taken())
            return 2 * x
        return double

    net = SimpleNamespace(uses_xla=lambda gradients: False, compiled_passes={})
    assert float(compiled(net, "forward", make, gradients=False)(tf.ones(()))) == 2.0
    assert float(compiled(net, "backward", make, gradients=True)(tf.ones(()))) == 2.0
    assert seen == [True, False]
    assert gradient_taken()      # reset after tracing
