"""Deterministic encoders: arrays and matplotlib figures in, identical bytes for identical input.

Pillow writes no metadata chunks unless asked, so a fixed compression level is enough for PNGs.
matplotlib stamps the software version, dates and random SVG ids unless told otherwise:
`matplotlib_bytes` removes all of them (and the software names, so the bytes do not depend on
the installed version). Only `matplotlib.figure.Figure` objects are used (never
pyplot's global state), so rendering is safe from several threads and leaves no figures behind.
"""

from __future__ import annotations

import io
import threading

import numpy as np

# zlib level 6: 8 % fewer bytes than level 4 for 1.3x its encoding time (40.6 -> 37.3 MB of
# palette PNGs on a default MNIST_Demo site, a few seconds of its build); level 9 saves 4 % more
# for 5x the time (bench/bench_site_weight.py)
PNG_COMPRESS_LEVEL = 6
SVG_HASHSALT = "reportgen"
KINDS = ("png", "svg", "pdf")
# PNG plots are drawn at twice their layout size (the page's width/height attributes): sharp on
# high-density screens and in print. Image mosaics keep one pixel per layout pixel on the site
# (its weight) and are doubled, nearest-neighbour, in the paper supplement (`upscale_png`).
PIXEL_RATIO = 2
# Site PNGs are mosaics of colormapped cells, digits and labels: a few hundred colours, stored as
# RGB they were most of a site's weight. A 256-colour palette holds them exactly when they have
# at most 256 colours, else (Pillow's max-coverage quantiser, no dithering) when no channel of any
# pixel moves by more than this many levels of 255 — about half the bytes, invisible on screen;
# the numbers themselves are in each figure's JSON/CSV.
PALETTE_TOLERANCE = 6


def to_uint8(rgb: np.ndarray) -> np.ndarray:
    """Float arrays in [0, 1] → uint8 (rounded, clipped); uint8 arrays pass through."""
    arr = np.asarray(rgb)
    if arr.dtype == np.uint8:
        return arr
    if np.issubdtype(arr.dtype, np.bool_):
        return arr.astype(np.uint8) * 255
    if np.issubdtype(arr.dtype, np.floating):
        return (np.clip(np.nan_to_num(arr, nan=0.0), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return np.clip(arr, 0, 255).astype(np.uint8)


def pixel_digest(image: np.ndarray) -> str:
    """The first 16 hex digits of the SHA-256 of an image's shape and uint8 pixels
    (`to_uint8`): equal for the same picture however it reached a page (an input's page, an
    evaluation image in a chart), so a page can tell them for the same image."""
    import hashlib

    arr = np.ascontiguousarray(to_uint8(image))
    return hashlib.sha256(repr(arr.shape).encode() + arr.tobytes()).hexdigest()[:16]


def json_floats(values) -> list | float:
    """float32 (or float16) `values` as Python floats that print with the shortest digits
    reading back to the same float32 (0.2419113, not 0.24191129207611084): the JSON holds the
    precision the network computed, in half the characters. Nested lists keep the array's
    shape; float64 values pass through as they are."""
    arr = np.asarray(values)
    if arr.dtype not in (np.float32, np.float16):
        return arr.tolist()
    # NumPy prints each float32 with its shortest round-trip digits (Dragon4)
    return np.vectorize(float, otypes=[object])(arr.astype(str)).tolist()


def png_bytes(rgb: np.ndarray, compress_level: int = PNG_COMPRESS_LEVEL,
              gray_if_possible: bool = True, palette: bool = True,
              palette_tolerance: int | None = None) -> bytes:
    """PNG bytes of an (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) image (uint8, or float in [0, 1]).

    No metadata chunks are written, so identical arrays give byte-identical files. An RGB image
    whose pixels are all gray is stored as 8-bit grayscale (same pixels, ~3x less to compress);
    any other RGB image as 256 palette colours when `_palette` allows it within
    `palette_tolerance` levels (default PALETTE_TOLERANCE; `palette=False`: always RGB).
    """
    from PIL import Image

    arr = to_uint8(rgb)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
        raise ValueError(f"png_bytes expects an (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) array. "
                         f"Received shape {arr.shape}")
    if (gray_if_possible and arr.ndim == 3 and arr.shape[2] == 3
            and np.array_equal(arr[:, :, 0], arr[:, :, 1])
            and np.array_equal(arr[:, :, 1], arr[:, :, 2])):
        arr = arr[:, :, 0]
    mode = "L" if arr.ndim == 2 else ("RGB" if arr.shape[2] == 3 else "RGBA")
    image = Image.fromarray(np.ascontiguousarray(arr), mode=mode)
    if mode == "RGB" and palette:
        tolerance = PALETTE_TOLERANCE if palette_tolerance is None else palette_tolerance
        image = _palette(image, arr, tolerance) or image
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=compress_level)
    return buffer.getvalue()


def _palette(image, arr: np.ndarray, tolerance: int):
    """`image` (RGB, pixels `arr`) as a palette image: exact when it has at most 256 colours
    (palette sorted by colour, so the bytes depend on the pixels only), else quantised to 256
    when every channel of every pixel stays within `tolerance`; None otherwise."""
    from PIL import Image

    colors = image.getcolors(256)
    if colors is not None:
        keys = np.sort(np.array([r | (g << 8) | (b << 16) for _, (r, g, b) in colors],
                                dtype=np.uint32))
        out = Image.fromarray(_palette_indices(keys, _packed(image)), mode="P")
        out.putpalette(np.stack([keys & 255, (keys >> 8) & 255, keys >> 16], axis=1)
                       .astype(np.uint8).tobytes())
        return out
    quantized = image.quantize(256, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
    back = np.asarray(quantized.convert("RGB"), dtype=np.int16)
    if np.abs(back - arr).max() <= tolerance:
        return quantized
    return None


def _packed(image) -> np.ndarray:
    """uint32 r | g << 8 | b << 16 of every pixel of an RGB Pillow image, (H, W)."""
    width, height = image.size
    rgbx = np.frombuffer(image.tobytes("raw", "RGBX"), "<u4").reshape(height, width)
    return rgbx & np.uint32(0xFFFFFF)             # Pillow pads with 0xFF


_TABLES = threading.local()      # one per drawing thread: filled anew by every lookup


def _palette_indices(keys: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """uint8 positions in `keys` (sorted, at most 256 distinct 24-bit colours) of every
    `packed` colour, each of which must be one of `keys` (Pillow's getcolors lists them all).

    Through a table with a slot for every 24-bit colour: only the keys' slots are written (and
    only their pages of memory are ever touched), so the slots other images left behind are
    never read. One gather per pixel: a tenth of the time of a binary search."""
    table = getattr(_TABLES, "table", None)
    if table is None:
        table = _TABLES.table = np.empty(1 << 24, np.uint8)
    table[keys] = np.arange(len(keys), dtype=np.uint8)
    return table[packed]


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) read from a PNG's IHDR chunk, without decoding the image."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("Not a PNG file")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def palette_png(data: bytes) -> bytes:
    """The PNG `data` (e.g. matplotlib's RGBA on white) re-encoded as `png_bytes` does: a plot's
    flat colours and anti-aliased edges fit a 256-colour palette within PALETTE_TOLERANCE, at
    about a third of the bytes."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        image.load()
        if image.mode == "RGBA" and image.getextrema()[3][0] < 255:
            return data                     # transparent pixels: keep them as they are
        arr = np.asarray(image.convert("RGB"))
    return png_bytes(arr)


def upscale_png(data: bytes, factor: int = PIXEL_RATIO) -> bytes:
    """The PNG `data` enlarged `factor` times, nearest-neighbour, as deterministic PNG bytes.

    Every pixel becomes a `factor` x `factor` square, so heatmap cells and digits stay sharp
    where a PDF viewer or LaTeX would smooth a small image over a large area.
    """
    from PIL import Image

    if factor < 1:
        raise ValueError(f"factor must be at least 1. Received: {factor}")
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        if image.mode not in ("L", "RGB", "RGBA"):
            image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
        arr = np.asarray(image)
    if factor > 1:
        arr = np.repeat(np.repeat(arr, factor, axis=0), factor, axis=1)
    # the site's pixels as they are: a palette image has at most 256 colours, kept exactly
    return png_bytes(arr, gray_if_possible=False, palette_tolerance=0)


def new_figure(width_in: float, height_in: float, dpi: float = 100):
    """A pyplot-free matplotlib figure (Agg for PNG; the SVG/PDF backends pick themselves)
    whose text is raised to what prints at 7 pt in the supplement before each tight layout
    (reportgen.figures.print_size)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    from reportgen.figures.print_size import tight_layout

    class PaperFigure(MplFigure):
        def tight_layout(self, *args, **kwargs):
            tight_layout(self, lambda: super(PaperFigure, self).tight_layout(*args, **kwargs))

    fig = PaperFigure(figsize=(width_in, height_in), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def matplotlib_bytes(fig, kind: str, dpi: float | None = None) -> bytes:
    """Deterministic "png", "svg" or "pdf" bytes of a `matplotlib.figure.Figure`."""
    import matplotlib

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}. Received: {kind!r}")
    metadata = {"png": {"Software": None},
                "svg": {"Date": None, "Creator": None},
                "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}[kind]
    if kind == "pdf":
        from reportgen.figures import pdf_fonts

        pdf_fonts.install()             # each set of glyphs subset once per process
    buffer = io.BytesIO()
    # TrueType (42) rather than Type 3 fonts in PDFs: selectable text, and accepted by
    # publishers' PDF checks that refuse Type 3.
    # SVG text as <text> elements rather than glyph outlines: a third of the bytes, and the
    # words stay editable and searchable in a paper's figure (the PDF embeds its font).
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT, "pdf.compression": 6,
                                "pdf.fonttype": 42, "svg.fonttype": "none"}):
        extra = {"pil_kwargs": {"compress_level": PNG_COMPRESS_LEVEL}} if kind == "png" else {}
        fig.savefig(buffer, format=kind, metadata=metadata,
                    dpi=dpi if dpi is not None else fig.dpi, facecolor="white", **extra)
    return buffer.getvalue()
