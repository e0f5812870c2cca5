"""ROAD's noisy linear imputation and MoRF/LeRF orderings (reportgen.techniques.explanation_quality
.road) against exact oracles: a linear ramp and a constant image are harmonic, so the noise-free
imputation rebuilds them exactly; the authors' own system set-up (copied below) solved densely
gives the same images; a sum-of-pixels model with the map = the input loses most under MoRF, and
a 3 x 3 case computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.techniques.explanation_quality import road


# --- reference: the authors' system set-up ------------------------------------------------------
# Copied from github.com/tleemann/road_evaluation, road/imputations.py (NoisyLinearImputer.
# add_offset_to_indices and setup_sparse_system, MIT licence, (c) 2022 Tobias Leemann), with a
# dense NumPy matrix in place of scipy's lil_matrix and the print comments dropped.
neighbors_weights = [((1, 1), 1 / 12), ((0, 1), 1 / 6), ((-1, 1), 1 / 12), ((1, -1), 1 / 12),
                     ((0, -1), 1 / 6), ((-1, -1), 1 / 12), ((1, 0), 1 / 6), ((-1, 0), 1 / 6)]


def add_offset_to_indices(indices, offset, mask_shape):
    cord1 = indices % mask_shape[1]
    cord0 = indices // mask_shape[1]
    cord0 += offset[0]
    cord1 += offset[1]
    valid = ((cord0 < 0) | (cord1 < 0) | (cord0 >= mask_shape[0]) | (cord1 >= mask_shape[1]))
    return ~valid, indices + offset[0] * mask_shape[1] + offset[1]


def setup_system(mask, img, neighbors_weights):
    """mask (H, W) 1 = kept, img (C, H, W); returns the (N, N) system and (N, C) right side."""
    maskflt = mask.flatten()
    imgflat = img.reshape((img.shape[0], -1))
    indices = np.argwhere(maskflt == 0).flatten()
    coords_to_vidx = np.zeros(len(maskflt), dtype=int)
    coords_to_vidx[indices] = np.arange(len(indices))
    numEquations = len(indices)
    A = np.zeros((numEquations, numEquations))
    b = np.zeros((numEquations, img.shape[0]))
    sum_neighbors = np.ones(numEquations)
    for n in neighbors_weights:
        offset, weight = n[0], n[1]
        valid, new_coords = add_offset_to_indices(indices, offset, mask.shape)
        valid_coords = new_coords[valid]
        valid_ids = np.argwhere(valid == 1).flatten()
        has_values_coords = valid_coords[maskflt[valid_coords] > 0.5]
        has_values_ids = valid_ids[maskflt[valid_coords] > 0.5]
        b[has_values_ids, :] -= weight * imgflat[:, has_values_coords].T
        has_no_values = valid_coords[maskflt[valid_coords] < 0.5]
        variable_ids = coords_to_vidx[has_no_values]
        has_no_values_ids = valid_ids[maskflt[valid_coords] < 0.5]
        A[has_no_values_ids, variable_ids] = weight
        sum_neighbors[np.argwhere(valid == 0).flatten()] = \
            sum_neighbors[np.argwhere(valid == 0).flatten()] - weight
    A[np.arange(numEquations), np.arange(numEquations)] = -sum_neighbors
    return A, b


def authors_imputation(image: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """(H, W, C) the authors' noise-free imputation of one image, solved densely."""
    img = np.moveaxis(image, -1, 0)
    A, b = setup_system((~removed).astype(float), img, neighbors_weights)
    out = img.reshape(img.shape[0], -1).copy()
    out[:, np.flatnonzero(removed.reshape(-1))] = np.linalg.solve(A, b).T
    return np.moveaxis(out.reshape(img.shape), 0, -1)


# --- imputation ---------------------------------------------------------------------------------

def test_linear_ramp_and_constant_are_rebuilt_exactly():
    """A discrete harmonic function stays itself: a ramp (removed pixels off the border, where
    the weighted mean is symmetric) and a constant image (removed anywhere)."""
    rng = np.random.default_rng(0)
    rows, cols = np.mgrid[:12, :10]
    ramp = np.stack([0.3 * rows - 0.2 * cols + 1.0, -0.1 * rows + 0.05 * cols], -1)[None]
    removed = np.zeros((1, 12, 10), bool)
    removed[0, 1:-1, 1:-1] = rng.random((10, 8)) < 0.7
    np.testing.assert_allclose(road.linear_imputation(ramp, removed), ramp, atol=1e-12)
    constant = np.full((2, 12, 10, 1), 0.37)
    anywhere = rng.random((2, 12, 10)) < 0.8
    np.testing.assert_allclose(road.linear_imputation(constant, anywhere), constant, atol=1e-12)


def test_batched_sparse_solve_equals_the_authors_dense_system():
    rng = np.random.default_rng(1)
    images = rng.random((4, 9, 11, 3))
    removed = rng.random((4, 9, 11)) < np.array([0.1, 0.5, 0.9, 0.3])[:, None, None]
    got = road.linear_imputation(images, removed)
    for i in range(4):
        np.testing.assert_allclose(got[i], authors_imputation(images[i], removed[i]),
                                   atol=1e-10)
    kept = ~removed
    np.testing.assert_array_equal(got[kept], images[kept])          # kept pixels unchanged
    # every removed pixel is the weighted mean of its in-image neighbours (the defining equation)
    padded = np.pad(got, ((0, 0), (1, 1), (1, 1), (0, 0)))
    inside = np.pad(np.ones((4, 9, 11)), ((0, 0), (1, 1), (1, 1)))
    total = sum(w * padded[:, 1 + dr:10 + dr, 1 + dc:12 + dc] for dr, dc, w in road.NEIGHBOURS)
    weight = sum(w * inside[:, 1 + dr:10 + dr, 1 + dc:12 + dc] for dr, dc, w in road.NEIGHBOURS)
    np.testing.assert_allclose(got[removed], (total / weight[..., None])[removed], atol=1e-10)


def test_noise_lands_on_removed_pixels_with_the_requested_sigma():
    rng = np.random.default_rng(2)
    images = rng.random((3, 20, 20, 1))
    removed = rng.random((3, 20, 20)) < 0.5
    clean = road.linear_imputation(images, removed)
    noisy = road.noisy_linear_imputation(images, removed, 0.05, np.random.default_rng(3))
    added = (noisy - clean)[..., 0]
    assert (added[~removed] == 0).all()
    # 600 N(0, 0.05^2) draws: the sample sd within 10% (chi-square: ~5 sd's)
    assert np.std(added[removed]) == pytest.approx(0.05, rel=0.1)
    assert abs(np.mean(added[removed])) < 4 * 0.05 / np.sqrt(removed.sum())


def test_every_pixel_removed_is_refused():
    with pytest.raises(ValueError):
        road.linear_imputation(np.zeros((1, 3, 3, 1)), np.ones((1, 3, 3), bool))


# --- orderings ----------------------------------------------------------------------------------

def test_removal_masks_take_the_top_and_bottom_pixels_ties_by_key():
    rng = np.random.default_rng(4)
    maps = rng.random((2, 5, 6))
    ties = rng.random((2, 5, 6))
    fractions = (0.1, 0.5, 0.9)
    morf = road.removal_masks(maps, ties, fractions, "morf")
    lerf = road.removal_masks(maps, ties, fractions, "lerf")
    for f, p in enumerate(fractions):
        k = int(round(p * 30))
        for i in range(2):
            order = np.argsort(maps[i].reshape(-1))
            assert set(np.flatnonzero(morf[i, f])) == set(order[-k:])
            assert set(np.flatnonzero(lerf[i, f])) == set(order[:k])
    # a constant map: the tie key alone orders it
    flat = road.removal_masks(np.ones((1, 5, 6)), ties[:1], (0.2,), "morf")[0, 0]
    assert set(np.flatnonzero(flat)) == set(np.argsort(ties[0].reshape(-1))[-6:])


def _sum_score(batch, image_index):
    return np.asarray(batch, np.float64).sum(axis=(1, 2, 3))


def test_hand_computed_three_by_three_case():
    """x = 1 at the centre, 0 elsewhere; the map ranks the centre first and the corner (0, 0)
    last. MoRF at 1/9 removes the centre: its neighbours are all 0, so f = 0. LeRF removes the
    corner: weights 1/6 to (0, 1) and (1, 0) (both 0), 1/12 to the centre (1), so it becomes
    (1/12) / (5/12) = 0.2 and f = 1.2."""
    image = np.zeros((1, 3, 3, 1))
    image[0, 1, 1] = 1.0
    relevance = np.arange(9, dtype=float).reshape(1, 3, 3)
    relevance[0, 1, 1] = 100.0
    curves = road.road_scores(image, relevance, _sum_score, (1 / 9,), np.zeros((1, 3, 3)),
                              np.zeros((1, 2, 1, 3, 3, 1)))
    assert curves["morf"][0, 0] == pytest.approx(0.0, abs=1e-12)
    assert curves["lerf"][0, 0] == pytest.approx(1.2, abs=1e-6)


def test_sum_model_with_the_input_as_map_loses_most_under_morf():
    """f = sum of the pixels, map = the input: removing the brightest pixels first and filling
    them from darker neighbours lowers f at every fraction, below a random ordering's, and
    below LeRF's."""
    rng = np.random.default_rng(5)
    images = rng.random((6, 12, 12, 1))
    fractions = (0.1, 0.3, 0.5, 0.7, 0.9)
    ties = rng.random((6, 12, 12))
    noise = np.zeros((6, 2, len(fractions), 12, 12, 1))
    own = road.road_scores(images, images[..., 0], _sum_score, fractions, ties, noise)
    chance = road.road_scores(images, rng.random((6, 12, 12)), _sum_score, fractions, ties,
                              noise)
    clean = images.sum(axis=(1, 2, 3))[:, None]
    assert (own["morf"] < clean).all() and (own["lerf"] > clean).all()
    assert (own["morf"] < chance["morf"]).all() and (own["lerf"] > chance["lerf"]).all()
    assert (np.diff(own["morf"], axis=1) < 0).all()
