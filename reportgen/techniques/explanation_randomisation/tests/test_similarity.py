"""The similarity measures against references: SSIM against Wang et al. 2004's formula computed
window by window in plain Python (and skimage's, where installed), Spearman against
scipy.stats.spearmanr image by image."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from reportgen.techniques.explanation_randomisation.similarity import (ssim, similarities,
                                                                      unit_abs)


def _ssim_by_hand(a: np.ndarray, b: np.ndarray, window: int = 7, data_range: float = 1.0):
    """Wang et al. 2004, Eq. 13, one window at a time: local means, sample variances and the
    sample covariance over each window x window square, the index averaged over the squares."""
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    values = []
    for i in range(a.shape[0] - window + 1):
        for j in range(a.shape[1] - window + 1):
            x = a[i:i + window, j:j + window].ravel()
            y = b[i:i + window, j:j + window].ravel()
            mx, my = x.mean(), y.mean()
            vx, vy = x.var(ddof=1), y.var(ddof=1)
            cxy = np.cov(x, y, ddof=1)[0, 1]
            values.append((2 * mx * my + c1) * (2 * cxy + c2)
                          / ((mx ** 2 + my ** 2 + c1) * (vx + vy + c2)))
    return float(np.mean(values))


def test_ssim_of_identical_maps_is_one_and_of_a_shifted_constant_is_analytic():
    rng = np.random.default_rng(0)
    maps = rng.random((3, 10, 9))
    np.testing.assert_allclose(ssim(maps, maps), 1.0, atol=1e-12)
    # two constant maps c and d: variances and covariance 0, SSIM = (2cd + C1) / (c² + d² + C1)
    c, d, c1 = 0.2, 0.7, 0.01 ** 2
    got = ssim(np.full((1, 8, 8), c), np.full((1, 8, 8), d))
    np.testing.assert_allclose(got, (2 * c * d + c1) / (c * c + d * d + c1), rtol=1e-12)


def test_ssim_equals_the_formula_window_by_window():
    rng = np.random.default_rng(1)
    a = rng.random((4, 11, 9))
    b = 0.6 * a + 0.4 * rng.random((4, 11, 9))
    expected = [_ssim_by_hand(x, y) for x, y in zip(a, b)]
    np.testing.assert_allclose(ssim(a, b), expected, rtol=1e-10)
    small = rng.random((2, 5, 5))                      # smaller than the window: one 5x5 window
    np.testing.assert_allclose(ssim(small, small[::-1]), [_ssim_by_hand(small[0], small[1], 5),
                                                          _ssim_by_hand(small[1], small[0], 5)],
                               rtol=1e-10)


def test_ssim_agrees_with_skimage_where_installed():
    metrics = pytest.importorskip("skimage.metrics")
    rng = np.random.default_rng(2)
    a, b = rng.random((2, 16, 16))
    expected = metrics.structural_similarity(a, b, data_range=1.0)
    np.testing.assert_allclose(ssim(a[None], b[None]), [expected], rtol=1e-7)


def test_spearman_equals_scipy_image_by_image_with_ties_and_nan_pixels():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(5, 6, 6))
    b = a + rng.normal(size=(5, 6, 6))
    a[:, :2] = 0.0                                      # ties
    b[0, 0, 0] = np.nan                                 # a pixel no cell reaches counts as 0
    got = similarities(a, b)
    clean = np.nan_to_num(b, nan=0.0)
    for i in range(5):
        signed = stats.spearmanr(a[i].ravel(), clean[i].ravel()).statistic
        absolute = stats.spearmanr(np.abs(a[i]).ravel(), np.abs(clean[i]).ravel()).statistic
        np.testing.assert_allclose(got["spearman_signed"][i], signed, rtol=1e-12)
        np.testing.assert_allclose(got["spearman_abs"][i], absolute, rtol=1e-12)
        np.testing.assert_allclose(got["ssim"][i], _ssim_by_hand(unit_abs(a)[i],
                                                                 unit_abs(clean)[i], window=6),
                                   rtol=1e-10)      # a 6x6 map: one window of its whole size
    constant = similarities(np.ones((1, 6, 6)), a[:1])
    assert np.isnan(constant["spearman_abs"][0])                # a constant map: undefined


def test_maps_are_compared_over_the_pixels_their_grid_covers():
    """A 3x4 grid drawn as tiles at its cells' receptive-field centres on a 12x12 input (NaN
    elsewhere): compared over the covered rectangle only, not over pixels that are 0 in every
    map. Spearman over the tiles equals Spearman of the grids (every cell repeated as often:
    its ranks are an affine map of the grid's ranks)."""
    from reportgen.figures.placement import place_grid_at_centres

    rng = np.random.default_rng(4)
    grids = rng.random((2, 3, 4))
    placed = np.moveaxis(place_grid_at_centres(np.moveaxis(grids, 0, -1), (12, 12), (1, 3, 2)),
                         -1, 0)
    seen = np.isfinite(placed[0])
    rows, cols = np.flatnonzero(seen.any(1)), np.flatnonzero(seen.any(0))
    assert 0 < seen.sum() < 144 and seen.sum() == len(rows) * len(cols)
    region = placed[:, rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
    got = similarities(placed[:1], placed[1:])
    expected = stats.spearmanr(grids[0].ravel(), grids[1].ravel()).statistic
    np.testing.assert_allclose(got["spearman_abs"], [expected], rtol=1e-12)
    window = min(7, *region.shape[1:])
    np.testing.assert_allclose(got["ssim"], [_ssim_by_hand(unit_abs(region[:1])[0],
                                                           unit_abs(region[1:])[0], window)],
                               rtol=1e-10)
    whole = similarities(np.nan_to_num(placed[:1]), np.nan_to_num(placed[1:]))
    assert whole["spearman_abs"][0] > got["spearman_abs"][0]   # the zeros would agree
