"""Faithfulness of an attribution to the model it explains: does the relevance a map gives a set
of pixels predict how much the score changes when those pixels change? Model-free: the model
is any score callable `score(batch (M, H, W, C), image_index (M,)) -> (M,)`, called with at
most `rows` rows at a time (as explanation_fidelity.perturbation_curves).

- Faithfulness correlation (Bhatt, Weller & Moura, "Evaluating and Aggregating Feature-based
  Model Explanations", IJCAI 2020, Eq. 2):
      mu_F(f, Phi, x) = corr_{S ~ random subsets of size |S|} ( sum_{i in S} Phi_i(x),
                                                               f(x) - f(x_{[x_S = x_bar_S]}) )
  the Pearson correlation, over random pixel subsets S, between the relevance of S and the drop
  of the score when S is set to a baseline x_bar. f(x) = sum x with Phi = x and x_bar = 0 gives
  exactly 1.
- Infidelity (Yeh, Hsieh, Suggala, Inouye & Ravikumar, "On the (In)fidelity and Sensitivity of
  Explanations", NeurIPS 2019, Eq. 1 / Def. 2.1):
      INFD(Phi, f, x) = E_{I ~ mu_I} [ (I^T Phi(x) - (f(x) - f(x - I)))^2 ]
  over perturbations I (Gaussian noise, or square removals I = x - x_bar on a random square).
  With `normalize` (as captum.metrics.infidelity), Phi is first scaled by the optimal
      beta = E[I^T Phi (f(x) - f(x - I))] / E[(I^T Phi)^2]
  (Yeh et al. §2.2 note that infidelity is otherwise not scale invariant). For f(x) = w . x the
  exact attribution Phi = w gives I^T w = f(x) - f(x - I): infidelity 0.
- Max-sensitivity (Yeh et al. 2019, Def. 3.1, estimated by Monte Carlo as
  captum.metrics.sensitivity_max):
      SENS_MAX(Phi, f, x, r) = max_{||delta||_inf <= r} ||Phi(x + delta) - Phi(x)|| / ||Phi(x)||
  the max over `samples` perturbations delta drawn uniformly from the L-inf ball of radius r
  (every input value independently in [-r, r]; x + delta is not clipped), with the Frobenius
  norm of the map. A constant explanation gives 0; Phi(x) = A x (linear in the input) gives
  max ||A delta|| / ||A x||.

Every perturbed score f(x_S), f(x - I) depends on the perturbation only, not on the map: the
`*_drops` / `*_changes` halves compute them once and score any number of maps against them
(`faithfulness_from_drops`, `infidelity_from_changes`), as explanation_quality does for its
explanations and baselines.
"""

from __future__ import annotations

import numpy as np

ROWS = 500            # rows per score call


def _pixel_maps(maps: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """(N, H, W, C) attributions from (N, H, W) pixel maps (the same relevance on every channel)
    or (N, H, W, C) ones; NaN (pixels a grid map does not reach) counts as 0."""
    maps = np.nan_to_num(np.asarray(maps, np.float64), nan=0.0)
    if maps.ndim == len(shape) - 1:
        maps = np.broadcast_to(maps[..., None], shape)
    if maps.shape != tuple(shape):
        raise ValueError(f"maps must be (N, H, W) or {tuple(shape)}. Received {maps.shape}")
    return maps


def scores_in_rows(batches, score, total: int, rows: int = ROWS, bar=None) -> np.ndarray:
    """(total,) scores of the rows `batches(index)` builds, `rows` at a time:
    batches(index (M,)) -> (batch (M, H, W, C), image_index (M,))."""
    out = np.empty(total, np.float64)
    for start in range(0, total, rows):
        index = np.arange(start, min(start + rows, total))
        batch, image_index = batches(index)
        out[index] = np.asarray(score(batch, image_index), np.float64).reshape(-1)
        if bar is not None:
            bar.update(len(index))
    return out


def pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of a and b along the last axis; NaN where either is constant."""
    a = np.asarray(a, np.float64) - np.mean(a, axis=-1, keepdims=True)
    b = np.asarray(b, np.float64) - np.mean(b, axis=-1, keepdims=True)
    denominator = np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    ok = denominator > 0
    rho = (a * b).sum(-1) / np.where(ok, denominator, 1.0)
    return np.where(ok, np.clip(rho, -1.0, 1.0), np.nan)


def random_subsets(n: int, hw: tuple[int, int], subsets: int, size: int,
                   rng: np.random.Generator) -> np.ndarray:
    """(N, subsets, H, W) bool: per image, `subsets` uniformly random sets of `size` pixels."""
    pixels = hw[0] * hw[1]
    if not 0 < size <= pixels:
        raise ValueError(f"subset size must lie in 1…{pixels}, got {size}")
    order = np.argsort(rng.random((n, subsets, pixels)), axis=-1)
    chosen = np.zeros((n, subsets, pixels), bool)
    np.put_along_axis(chosen, order[..., :size], True, axis=-1)
    return chosen.reshape(n, subsets, *hw)


def subset_drops(images: np.ndarray, score, subsets: np.ndarray, baseline=0.0,
                 rows: int = ROWS, bar=None) -> np.ndarray:
    """(N, S) f(x) - f(x_[x_S = x_bar_S]) for the subsets (N, S, H, W) bool of every image
    (the pixels of a subset, all their channels, set to `baseline`: a scalar or an array
    broadcasting to (N, H, W, C))."""
    images = np.asarray(images, np.float32)
    subsets = np.asarray(subsets, bool)
    n, count = subsets.shape[:2]
    baseline = np.broadcast_to(np.asarray(baseline, np.float32), images.shape)

    def batches(index):
        image_index, s = np.divmod(index, count)
        mask = subsets[image_index, s][..., None]
        return np.where(mask, baseline[image_index], images[image_index]), image_index

    clean = scores_in_rows(lambda i: (images[i], i), score, n, rows)
    perturbed = scores_in_rows(batches, score, n * count, rows, bar).reshape(n, count)
    return clean[:, None] - perturbed


def faithfulness_from_drops(maps: np.ndarray, subsets: np.ndarray, drops: np.ndarray,
                            shape: tuple[int, ...]) -> np.ndarray:
    """(N,) Pearson correlation over the subsets of each subset's relevance sum_{i in S} Phi_i
    with its drop (`subset_drops`); `shape` (N, H, W, C) of the images."""
    phi = _pixel_maps(maps, shape)
    relevance = np.einsum("nshw,nhwc->ns", np.asarray(subsets, np.float64), phi)
    return pearson(relevance, drops)


def faithfulness_correlation(images: np.ndarray, maps: np.ndarray, score, subsets: np.ndarray,
                             baseline=0.0, rows: int = ROWS, bar=None) -> np.ndarray:
    """(N,) Bhatt et al.'s faithfulness correlation per image (NaN when undefined).

    images (N, H, W, C); maps (N, H, W) or (N, H, W, C) relevance; subsets (N, S, H, W) bool
    (`random_subsets`): the pixels (all their channels) set to `baseline` (a scalar or an
    array broadcasting to (N, H, W, C)) in each of the S perturbed copies.
    """
    images = np.asarray(images, np.float32)
    drops = subset_drops(images, score, subsets, baseline, rows, bar)
    return faithfulness_from_drops(maps, subsets, drops, images.shape)


def gaussian_perturbations(shape: tuple[int, ...], samples: int, sigma: float,
                           rng: np.random.Generator) -> np.ndarray:
    """(N, samples, H, W, C) perturbations I ~ N(0, sigma^2) per input value (Yeh et al. §4)."""
    n, *rest = shape
    return (sigma * rng.standard_normal((n, samples, *rest))).astype(np.float32)


def square_removals(images: np.ndarray, samples: int, side: int, rng: np.random.Generator,
                    baseline=0.0) -> np.ndarray:
    """(N, samples, H, W, C) perturbations I = x - baseline on one random side x side square
    (inside the image) and 0 elsewhere: x - I is x with the square set to the baseline (Yeh et
    al. §4, "square removal")."""
    images = np.asarray(images, np.float32)
    n, height, width = images.shape[:3]
    top = rng.integers(0, height - side + 1, (n, samples))
    left = rng.integers(0, width - side + 1, (n, samples))
    rows = np.arange(height)[None, None, :, None]
    cols = np.arange(width)[None, None, None, :]
    inside = ((rows >= top[..., None, None]) & (rows < top[..., None, None] + side)
              & (cols >= left[..., None, None]) & (cols < left[..., None, None] + side))
    removed = images[:, None] - np.asarray(baseline, np.float32)
    return np.where(inside[..., None], removed, 0.0).astype(np.float32)


def perturbation_changes(images: np.ndarray, score, perturbations: np.ndarray,
                         rows: int = ROWS, bar=None) -> np.ndarray:
    """(N, S) f(x) - f(x - I) for the perturbations I (N, S, H, W, C) of every image."""
    images = np.asarray(images, np.float32)
    perturbations = np.asarray(perturbations, np.float32)
    n, count = perturbations.shape[:2]

    def batches(index):
        image_index, s = np.divmod(index, count)
        return images[image_index] - perturbations[image_index, s], image_index

    clean = scores_in_rows(lambda i: (images[i], i), score, n, rows)
    return clean[:, None] - scores_in_rows(batches, score, n * count, rows, bar).reshape(
        n, count)


def infidelity_from_changes(maps: np.ndarray, perturbations: np.ndarray, changes: np.ndarray,
                            normalize: bool = False) -> np.ndarray:
    """(N,) mean over the perturbations of (I^T Phi - (f(x) - f(x - I)))^2, the changes from
    `perturbation_changes`; Phi scaled by the optimal beta when `normalize`."""
    perturbations = np.asarray(perturbations, np.float32)
    phi = _pixel_maps(maps, (perturbations.shape[0], *perturbations.shape[2:]))
    explained = np.einsum("nshwc,nhwc->ns", perturbations.astype(np.float64), phi)
    changes = np.asarray(changes, np.float64)
    if normalize:
        squares = (explained ** 2).sum(axis=1)
        beta = np.divide((explained * changes).sum(axis=1), np.where(squares > 0, squares, 1.0))
        explained = beta[:, None] * explained * (squares > 0)[:, None]
    return np.mean((explained - changes) ** 2, axis=1)


def infidelity(images: np.ndarray, maps: np.ndarray, score, perturbations: np.ndarray,
               normalize: bool = False, rows: int = ROWS, bar=None) -> np.ndarray:
    """(N,) Yeh et al.'s infidelity per image: the mean over the S perturbations I of
    (I^T Phi - (f(x) - f(x - I)))^2, with Phi scaled by the optimal beta when `normalize`.

    images (N, H, W, C); maps (N, H, W) or (N, H, W, C) attributions; perturbations
    (N, S, H, W, C) (`gaussian_perturbations`, `square_removals`).
    """
    changes = perturbation_changes(images, score, perturbations, rows, bar)
    return infidelity_from_changes(maps, perturbations, changes, normalize)


# --- max-sensitivity ----------------------------------------------------------------------------

def linf_ball(shape: tuple[int, ...], samples: int, radius: float,
              rng: np.random.Generator) -> np.ndarray:
    """(N, samples, H, W, C) perturbations delta, every value uniform in [-radius, radius]
    (the L-inf ball of Yeh et al. Def. 3.1; captum.metrics' default perturb_func)."""
    n, *rest = shape
    return rng.uniform(-radius, radius, (n, samples, *rest)).astype(np.float32)


def max_sensitivity_of(clean: np.ndarray, perturbed: np.ndarray) -> np.ndarray:
    """(N,) max over the samples of ||Phi(x + delta) - Phi(x)|| / ||Phi(x)|| (Frobenius norms
    over everything but the first axes), from the clean maps (N, ...) and the maps of the
    perturbed inputs (N, samples, ...); NaN (pixels a grid map does not reach) counts as 0,
    and an all-zero clean map has no sensitivity (NaN)."""
    clean = np.nan_to_num(np.asarray(clean, np.float64), nan=0.0)
    perturbed = np.nan_to_num(np.asarray(perturbed, np.float64), nan=0.0)
    n, samples = perturbed.shape[:2]
    clean = clean.reshape(n, -1)
    change = np.linalg.norm(perturbed.reshape(n, samples, -1) - clean[:, None], axis=-1)
    size = np.linalg.norm(clean, axis=-1)
    ratio = change.max(axis=1) / np.where(size > 0, size, 1.0)
    return np.where(size > 0, ratio, np.nan)


def max_sensitivity(images: np.ndarray, explain, deltas: np.ndarray, rows: int = ROWS,
                    bar=None) -> np.ndarray:
    """(N,) Yeh et al.'s max-sensitivity per image, Monte Carlo over `deltas` (N, S, H, W, C)
    (`linf_ball`). explain(batch (M, H, W, C), image_index (M,)) -> (M, ...) the explanation
    of each row (of its image's class), called with at most `rows` rows at a time."""
    images = np.asarray(images, np.float32)
    deltas = np.asarray(deltas, np.float32)
    n, count = deltas.shape[:2]

    def rows_of(index):
        image_index, s = np.divmod(index, count)
        return images[image_index] + deltas[image_index, s], image_index

    clean = _maps_in_rows(lambda i: (images[i], i), explain, n, rows)
    perturbed = _maps_in_rows(rows_of, explain, n * count, rows, bar)
    return max_sensitivity_of(clean, perturbed.reshape(n, count, *perturbed.shape[1:]))


def _maps_in_rows(batches, explain, total: int, rows: int, bar=None) -> np.ndarray:
    parts = []
    for start in range(0, total, rows):
        index = np.arange(start, min(start + rows, total))
        batch, image_index = batches(index)
        parts.append(np.asarray(explain(batch, image_index), np.float64))
        if bar is not None:
            bar.update(len(index))
    return np.concatenate(parts)
