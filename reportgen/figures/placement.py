"""Put a conv layer's grid of values back on the input image.

`place_grid_on_input` uses the receptive field (start, size, stride) of the layer: cell p sees input
rows start + p*stride ... start + p*stride + size - 1, and each input pixel gets the average of the
cells that see it. In the baseline (6x6 primary grid, (0, 17, 2) on 28x28) the cell centres run
from 8 to 18, so `stretch_grid` — the even stretch over the whole image earlier tools did —
spreads the map about 2.3x too wide. Kept for comparison.

Both are separable, so they are two small matrix products (no loops over pixels or cells).
A receptive field is one (start, size, stride) for both axes, or an object with `rows` and
`cols` triples (reportgen.capsnet.description.ReceptiveField) when the axes differ.
"""

from __future__ import annotations

import numpy as np


def axes(receptive_field) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """((start, size, stride) of the rows, of the columns) of a receptive field."""
    if hasattr(receptive_field, "rows"):
        return (tuple(int(v) for v in receptive_field.rows),
                tuple(int(v) for v in receptive_field.cols))
    start, size, stride = (int(v) for v in receptive_field)
    return (start, size, stride), (start, size, stride)


def coverage_matrix(cells: int, pixels: int, start: int, size: int, stride: int) -> np.ndarray:
    """(pixels, cells) 0/1 matrix: 1 where the cell's receptive field contains the pixel."""
    if cells < 1 or pixels < 1 or size < 1 or stride < 1:
        raise ValueError(f"Invalid placement: {cells} cells on {pixels} pixels with receptive "
                         f"field (start={start}, size={size}, stride={stride})")
    first = start + stride * np.arange(cells)               # first pixel each cell sees
    pix = np.arange(pixels)[:, None]
    return ((pix >= first[None, :]) & (pix < first[None, :] + size)).astype(np.float64)


def place_grid_on_input(grid: np.ndarray, input_hw: tuple[int, int],
                        receptive_field: tuple[int, int, int]) -> np.ndarray:
    """(H, W) float64 map of `grid` (gh, gw) spread over the input pixels each cell sees.

    Pixels seen by several cells get the average of their values; pixels no cell sees are NaN
    (use `seen_mask` for the mask). A trailing channel axis is allowed: (gh, gw, N) → (H, W, N).
    """
    g = np.asarray(grid, dtype=np.float64)
    if g.ndim not in (2, 3):
        raise ValueError(f"grid must be (gh, gw) or (gh, gw, N). Received shape {g.shape}")
    row_field, col_field = axes(receptive_field)
    height, width = (int(v) for v in input_hw)
    rows = coverage_matrix(g.shape[0], height, *row_field)             # (H, gh)
    cols = coverage_matrix(g.shape[1], width, *col_field)              # (W, gw)
    total = np.einsum("yp,pq...,xq->yx...", rows, g, cols, optimize=True)
    count = np.outer(rows.sum(axis=1), cols.sum(axis=1))               # cells covering (y, x)
    if g.ndim == 3:
        count = count[:, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def seen_mask(grid_hw: tuple[int, int], input_hw: tuple[int, int],
              receptive_field: tuple[int, int, int]) -> np.ndarray:
    """(H, W) bool: True where at least one grid cell sees the pixel."""
    row_field, col_field = axes(receptive_field)
    rows = coverage_matrix(int(grid_hw[0]), int(input_hw[0]), *row_field).any(axis=1)
    cols = coverage_matrix(int(grid_hw[1]), int(input_hw[1]), *col_field).any(axis=1)
    return np.outer(rows, cols)


def centre_matrix(cells: int, pixels: int, start: int, size: int, stride: int) -> np.ndarray:
    """(pixels, cells) 0/1 matrix: pixel y belongs to the cell whose receptive-field centre is
    nearest, within half a stride. Cell p's centre is start + p*stride + (size-1)/2."""
    if cells < 1 or pixels < 1 or size < 1 or stride < 1:
        raise ValueError(f"Invalid placement: {cells} cells on {pixels} pixels with receptive "
                         f"field (start={start}, size={size}, stride={stride})")
    first_centre = start + (size - 1) / 2.0
    owner = np.floor((np.arange(pixels) - first_centre + stride / 2.0) / stride).astype(int)
    return (owner[:, None] == np.arange(cells)[None, :]).astype(np.float64)


def place_grid_at_centres(grid: np.ndarray, input_hw: tuple[int, int],
                          receptive_field: tuple[int, int, int]) -> np.ndarray:
    """(H, W) map: each cell drawn as a stride x stride tile at its receptive field's centre.

    The sharp counterpart of `place_grid_on_input` (which averages overlapping fields and so
    blurs): in the baseline the 6x6 primary grid lands on rows/columns 7 … 18 (centres 8 … 18),
    where the naive stretch spreads it over 0 … 27. Pixels outside are NaN. (gh, gw, N) allowed.
    """
    g = np.asarray(grid, dtype=np.float64)
    if g.ndim not in (2, 3):
        raise ValueError(f"grid must be (gh, gw) or (gh, gw, N). Received shape {g.shape}")
    row_field, col_field = axes(receptive_field)
    height, width = (int(v) for v in input_hw)
    rows = centre_matrix(g.shape[0], height, *row_field)
    cols = centre_matrix(g.shape[1], width, *col_field)
    total = np.einsum("yp,pq...,xq->yx...", rows, g, cols, optimize=True)
    owned = np.outer(rows.sum(axis=1), cols.sum(axis=1)) > 0
    if g.ndim == 3:
        owned = owned[:, :, None]
    return np.where(owned, total, np.nan)


def stretch_matrix(cells: int, pixels: int) -> np.ndarray:
    """(pixels, cells) 0/1 matrix of the even nearest-neighbour stretch: pixel y → cell
    floor(y * cells / pixels)."""
    owner = (np.arange(pixels) * cells) // pixels
    return (owner[:, None] == np.arange(cells)[None, :]).astype(np.float64)


def stretch_grid(grid: np.ndarray, input_hw: tuple[int, int]) -> np.ndarray:
    """(H, W) float64: the naive even stretch of `grid` over the whole input (nearest neighbour),
    as earlier tools did; ignores what each cell actually sees. (gh, gw, N) → (H, W, N)."""
    g = np.asarray(grid, dtype=np.float64)
    rows = stretch_matrix(g.shape[0], int(input_hw[0]))
    cols = stretch_matrix(g.shape[1], int(input_hw[1]))
    return np.einsum("yp,pq...,xq->yx...", rows, g, cols, optimize=True)
