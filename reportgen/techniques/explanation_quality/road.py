"""ROAD, RemOve And Debias (Rong, Leemann, Borisov, Kasneci & Kasneci, "A Consistent and Efficient
Evaluation Strategy for Attribution Methods", ICML 2022): remove a share of the pixels in the
order a map ranks them and fill them by *noisy linear imputation* (their section 4), so that the
removal itself leaks as little as possible of which pixels were removed, then read the model's
score of the imputed image.

- Noisy linear imputation (Rong et al. 2022, section 4; the authors' NoisyLinearImputer,
  github.com/tleemann/road_evaluation, road/imputations.py, MIT licence): every removed pixel i
  is the weighted mean of its 8 neighbours j inside the image,
      x_i = sum_j w_ij x_j / sum_j w_ij,   w = 1/6 (direct neighbours), 1/12 (diagonal ones),
  kept pixels fixed. This is one sparse linear system per image and channel (the removed pixels
  its unknowns: a discrete harmonic interpolation); the solution plus Gaussian noise
  N(0, sigma^2) on the imputed pixels (absolute, in input units: the authors' default
  noise=0.01) is the imputed image. The systems of many images are solved at once as one
  block-diagonal sparse system (scipy.sparse.linalg.spsolve), built with vectorised index
  arithmetic; it is nonsingular whenever each image keeps at least one pixel.
- MoRF / LeRF (most / least relevant first): at removal fraction p the round(p * H * W) pixels
  of highest (MoRF) or lowest (LeRF) relevance are removed (every channel of a pixel). Ties are
  broken by a seeded random key per pixel, the same key for both orders (so LeRF's order is
  MoRF's reversed, as the authors' fixed 1e-4 random offset does): a constant map's orderings
  are uniformly random.

Model-free as the rest of this package: the score is any callable
`score(batch (M, H, W, C), image_index (M,)) -> (M,)`.
"""

from __future__ import annotations

import numpy as np

# (row offset, column offset, weight): the authors' neighbors_weights
NEIGHBOURS = ((1, 1, 1 / 12), (0, 1, 1 / 6), (-1, 1, 1 / 12), (1, -1, 1 / 12), (0, -1, 1 / 6),
              (-1, -1, 1 / 12), (1, 0, 1 / 6), (-1, 0, 1 / 6))
ORDERS = ("morf", "lerf")
ROWS = 50             # images imputed (one block-diagonal solve) and scored at a time


def linear_imputation(images: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """(N, H, W, C) the images with their removed pixels (N, H, W) bool replaced by the
    noise-free linear imputation: each removed pixel the weighted mean (NEIGHBOURS) of its
    in-image neighbours, removed or kept, kept pixels unchanged. One sparse solve for all
    images and channels. Raises ValueError if an image has every pixel removed."""
    from scipy.sparse import csc_matrix
    from scipy.sparse.linalg import spsolve

    images = np.asarray(images, np.float64)
    removed = np.asarray(removed, bool)
    n, height, width, channels = images.shape
    if removed.shape != (n, height, width):
        raise ValueError(f"removed must be {(n, height, width)}. Received {removed.shape}")
    if removed.reshape(n, -1).all(axis=1).any():
        raise ValueError("linear imputation needs at least one kept pixel per image")
    out = images.copy()
    flat = removed.reshape(-1)
    unknowns = np.flatnonzero(flat)                        # global pixel index of each unknown
    count = unknowns.size
    if count == 0:
        return out
    variable = np.full(flat.size, -1, np.int64)
    variable[unknowns] = np.arange(count)
    values = images.reshape(-1, channels)
    image, rest = np.divmod(unknowns, height * width)
    row, col = np.divmod(rest, width)
    rows, cols, weights = [], [], []
    rhs = np.zeros((count, channels))
    total = np.zeros(count)                                # sum of the in-image weights
    equation = np.arange(count)
    for dr, dc, weight in NEIGHBOURS:                      # 8 offsets, vectorised over pixels
        r, c = row + dr, col + dc
        inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
        total += weight * inside
        neighbour = (image * height + r) * width + c
        eq, nb = equation[inside], neighbour[inside]
        free = flat[nb]
        rows.append(eq[free])
        cols.append(variable[nb[free]])
        weights.append(np.full(int(free.sum()), weight))
        np.add.at(rhs, eq[~free], -weight * values[nb[~free]])
    rows.append(equation)
    cols.append(equation)
    weights.append(-total)
    system = csc_matrix((np.concatenate(weights), (np.concatenate(rows), np.concatenate(cols))),
                        shape=(count, count))
    # the natural (row-major) order keeps each image's band of width W: faster than COLAMD here
    solution = spsolve(system, rhs, permc_spec="NATURAL")
    out.reshape(-1, channels)[unknowns] = np.asarray(solution).reshape(count, channels)
    return out


def noisy_linear_imputation(images: np.ndarray, removed: np.ndarray, noise: np.ndarray | float,
                            rng: np.random.Generator | None = None) -> np.ndarray:
    """(N, H, W, C) linear imputation plus noise on the imputed pixels only: `noise` an array
    broadcasting to the images (drawn by the caller), or a sigma for N(0, sigma^2) from rng."""
    imputed = linear_imputation(images, removed)
    if np.ndim(noise) == 0:
        noise = float(noise) * rng.standard_normal(imputed.shape)
    return np.where(np.asarray(removed, bool)[..., None], imputed + noise, imputed)


def removal_masks(maps: np.ndarray, ties: np.ndarray, fractions, order: str) -> np.ndarray:
    """(N, F, H, W) bool: per image and fraction p the round(p * H * W) pixels of highest
    ("morf") or lowest ("lerf") relevance; ties (N, H, W) break equal relevance (NaN counts as
    0). LeRF's order is MoRF's reversed."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    maps = np.nan_to_num(np.asarray(maps, np.float64), nan=0.0)
    n, height, width = maps.shape
    pixels = height * width
    # ascending by relevance, then by the tie key: rank 0 = least relevant
    ascending = np.lexsort((ties.reshape(n, -1), maps.reshape(n, -1)), axis=-1)
    rank = np.empty_like(ascending)
    np.put_along_axis(rank, ascending, np.arange(pixels)[None].repeat(n, 0), axis=-1)
    if order == "morf":
        rank = pixels - 1 - rank                            # rank 0 = most relevant
    counts = np.rint(np.asarray(fractions, np.float64) * pixels).astype(np.int64)
    return (rank[:, None, :] < counts[None, :, None]).reshape(n, len(counts), height, width)


def road_scores(images: np.ndarray, maps: np.ndarray, score, fractions, ties: np.ndarray,
                noise: np.ndarray, rows: int = ROWS, bar=None) -> dict[str, np.ndarray]:
    """{"morf", "lerf": (N, F)} the score of every image with the MoRF / LeRF share `fractions`
    of its pixels removed by `maps` (N, H, W) and noisily linearly imputed, noise (N, 2, F, H,
    W, C) (order axis in ORDERS order; added on the imputed pixels only)."""
    from reportgen.techniques.explanation_quality.faithfulness import scores_in_rows

    images = np.asarray(images, np.float64)
    n = images.shape[0]
    fractions = tuple(fractions)
    count = len(fractions)
    out = {}
    for o, order in enumerate(ORDERS):
        masks = removal_masks(maps, ties, fractions, order)

        def batches(index, masks=masks, o=o):
            image_index, f = np.divmod(index, count)
            removed = masks[image_index, f]
            imputed = noisy_linear_imputation(images[image_index], removed,
                                              noise[image_index, o, f])
            return imputed.astype(np.float32), image_index

        out[order] = scores_in_rows(batches, score, n * count, rows, bar).reshape(n, count)
    return out
