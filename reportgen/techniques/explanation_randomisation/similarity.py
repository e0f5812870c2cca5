"""Similarity of two saliency maps, image by image (batched over images, no loop over pixels):
Spearman's rank correlation of the absolute and of the signed maps, and the structural
similarity index SSIM (Wang, Bovik, Sheikh & Simoncelli 2004, Eq. 13) of the absolute maps —
the measures of Adebayo et al. 2018 (Sanity checks for saliency maps, section 3)."""

from __future__ import annotations

import numpy as np

from reportgen.techniques.explanation_fidelity import spearman

MEASURES = ("spearman_abs", "spearman_signed", "ssim")
LABELS = {"spearman_abs": "Spearman of |map|", "spearman_signed": "Spearman of the signed map",
          "ssim": "SSIM of |map|"}
WINDOW = 7            # side of SSIM's uniform window (skimage.metrics.structural_similarity's)
K1, K2 = 0.01, 0.03   # Wang et al. 2004's constants


def _window_means(x: np.ndarray, window: int) -> np.ndarray:
    """(N, H-w+1, W-w+1) means of x (N, H, W) over every window x window square inside it."""
    view = np.lib.stride_tricks.sliding_window_view(x, (window, window), axis=(1, 2))
    return view.mean(axis=(-2, -1))


def ssim(a: np.ndarray, b: np.ndarray, data_range: float = 1.0,
         window: int = WINDOW) -> np.ndarray:
    """(N,) mean SSIM of maps a, b (N, H, W) (Wang et al. 2004, Eq. 13, C1 = (K1 L)^2,
    C2 = (K2 L)^2, L = data_range), local statistics over a uniform window x window square with
    the sample (n - 1) covariance, averaged over the squares wholly inside the image — as
    skimage.metrics.structural_similarity with its defaults (win_size 7, not gaussian). A map
    smaller than the window is compared over one window of its whole size."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    window = min(window, a.shape[1], a.shape[2])
    count = window * window
    scale = count / (count - 1) if count > 1 else 1.0
    mu_a, mu_b = _window_means(a, window), _window_means(b, window)
    var_a = scale * (_window_means(a * a, window) - mu_a ** 2)
    var_b = scale * (_window_means(b * b, window) - mu_b ** 2)
    cov = scale * (_window_means(a * b, window) - mu_a * mu_b)
    c1, c2 = (K1 * data_range) ** 2, (K2 * data_range) ** 2
    index = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / \
        ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return index.mean(axis=(1, 2))


def unit_abs(maps: np.ndarray) -> np.ndarray:
    """(N, H, W) |maps| divided by each map's maximum (an all-zero map stays 0); NaN (pixels no
    grid cell reaches) counts as 0."""
    maps = np.abs(np.nan_to_num(np.asarray(maps, np.float64), nan=0.0))
    top = maps.reshape(len(maps), -1).max(axis=1) if maps.size else np.zeros(len(maps))
    return maps / np.where(top > 0, top, 1.0)[:, None, None]


def covered(maps: np.ndarray) -> np.ndarray:
    """(N, h, w) the pixels a placed map covers (N, H, W; NaN where no grid cell reaches),
    which are the same for every map of one explanation: a grid map drawn at its cells'
    receptive-field centres gives back that grid. Where the covered pixels are not one
    rectangular lattice, the maps are returned whole with NaN as 0.

    Comparing over the uncovered pixels too would count hundreds of pixels that are 0 in every
    map, of any network, as agreement (a 6x6 primary grid covers 36 of 784 MNIST pixels)."""
    maps = np.asarray(maps, np.float64)
    seen = np.isfinite(maps)
    if not len(maps) or not seen.any():
        return np.nan_to_num(maps, nan=0.0)
    rows, cols = seen.any(axis=(0, 2)), seen.any(axis=(0, 1))
    lattice = np.zeros(maps.shape[1:], bool)
    lattice[np.ix_(rows, cols)] = True
    if not (seen == lattice[None]).all():
        return np.nan_to_num(maps, nan=0.0)
    return maps[:, rows][:, :, cols]


def similarities(reference: np.ndarray, other: np.ndarray) -> dict[str, np.ndarray]:
    """{measure: (N,)} of maps `other` to `reference` (N, H, W), per image, over the pixels
    the maps cover (`covered`, decided on both together): Spearman of |map| and of the signed
    map (NaN where a map is constant), SSIM of the absolute maps scaled to [0, 1] by each
    map's maximum (data range 1)."""
    n = len(reference)
    both = covered(np.concatenate([np.asarray(reference, np.float64),
                                   np.asarray(other, np.float64)]))
    a, b = both[:n], both[n:]
    flat = lambda m: m.reshape(len(m), -1)                     # noqa: E731
    return {"spearman_abs": spearman(flat(np.abs(a)), flat(np.abs(b))),
            "spearman_signed": spearman(flat(a), flat(b)),
            "ssim": ssim(unit_abs(a), unit_abs(b), data_range=1.0)}
