"""Analysis inputs: which images the analyses run on, and how they are varied.

An input is a test image of the dataset or an image file of the user's, optionally transformed
(rotated, inverted) to probe how the capsules react. Each input carries a stable, file-name-safe
key (pages and figures are named after it) and a digest of its source bytes plus transform
(cache keys are built from it, so the same pixels are never analysed twice).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from reportgen.data import png_bands
from reportgen.errors import ReportgenError

if TYPE_CHECKING:
    from reportgen.data.datasets import Dataset

_TRANSFORM_FORMS = ('"rotate:DEGREES" (counter-clockwise, any angle, e.g. rotate:90 or '
                    'rotate:-15.5), "invert", "none"; combine with "+" (rotate:90+invert); '
                    'list several with "," (rotate:90,invert)')
_SELECTION_FORMS = ('"test:0-15" (indices 0..15 of the test split, inclusive), '
                    '"test:3,7,9-11", or the same without "test:"')
_MAX_SELECTION = 1_000_000


@dataclass(frozen=True)
class Transform:
    """A variation of an input image: rotate about the centre, then (optionally) invert.

    The angle is normalised to (-180, 180] and rounded to 1/1000 degree, so equal rotations
    compare equal (rotate:270 == rotate:-90) and labels are exact.
    """

    rotate: float = 0.0
    invert: bool = False

    def __post_init__(self) -> None:
        angle = float(self.rotate)
        if not math.isfinite(angle):
            raise ReportgenError("A rotation angle must be a finite number.",
                                 expected="degrees such as 90 or -15.5", received=repr(self.rotate))
        angle = round(angle, 3) % 360.0
        if angle > 180.0:
            angle -= 360.0
        angle = round(angle, 3) + 0.0  # + 0.0 turns -0.0 into 0.0
        object.__setattr__(self, "rotate", angle)
        object.__setattr__(self, "invert", bool(self.invert))

    @classmethod
    def parse(cls, text: str) -> "Transform":
        """One transform from text: "rotate:90", "invert", "rotate:90+invert", "none" or ""."""
        raw = "" if text is None else str(text)
        rotate, invert = 0.0, False
        for part in raw.split("+"):
            token = part.strip().lower()
            if token in ("", "none", "orig", "original", "identity"):
                continue
            if token in ("invert", "inv"):
                invert = True
                continue
            name, sep, value = token.partition(":")
            if name.strip() in ("rotate", "rot") and sep:
                try:
                    angle = float(value.strip())
                except ValueError:
                    angle = math.nan
                if not math.isfinite(angle):
                    raise ReportgenError(f"Bad rotation angle in transform {raw!r}.",
                                         expected="rotate:DEGREES with a number, e.g. rotate:90",
                                         received=repr(part.strip()))
                rotate += angle
                continue
            raise ReportgenError(f"Unknown transform {part.strip()!r}.",
                                 expected=_TRANSFORM_FORMS, received=repr(raw),
                                 fix="use e.g. --transforms rotate:90,invert")
        return cls(rotate=rotate, invert=invert)

    @property
    def is_identity(self) -> bool:
        return self.rotate == 0.0 and not self.invert

    def label(self) -> str:
        """Short, file-name-safe name: "orig", "rot90", "rot-15.5", "inv", "rot90-inv"."""
        parts = []
        if self.rotate:
            parts.append(f"rot{_format_angle(self.rotate)}")
        if self.invert:
            parts.append("inv")
        return "-".join(parts) or "orig"

    def describe(self) -> str:
        """Human words: "original", "rotated 90°", "inverted", "rotated 90°, inverted"."""
        parts = []
        if self.rotate:
            parts.append(f"rotated {_format_angle(self.rotate)}°")
        if self.invert:
            parts.append("inverted")
        return ", ".join(parts) or "original"

    def __str__(self) -> str:
        """The text form `parse` accepts back."""
        parts = []
        if self.rotate:
            parts.append(f"rotate:{_format_angle(self.rotate)}")
        if self.invert:
            parts.append("invert")
        return "+".join(parts) or "none"


def _format_angle(angle: float) -> str:
    return f"{angle:.3f}".rstrip("0").rstrip(".")


def parse_transforms(text: str | None) -> list[Transform]:
    """Comma-separated transforms → list with the identity first and no duplicates.

    "rotate:90,invert" → [orig, rot90, inv]; "rotate:90+invert" is one combined transform.
    """
    result = [Transform()]
    for token in ("" if text is None else str(text)).split(","):
        transform = Transform.parse(token)
        if transform not in result:
            result.append(transform)
    return result


def apply_transform(image: np.ndarray, t: Transform) -> np.ndarray:
    """Rotate about the centre (degrees counter-clockwise, bilinear, black fill), then invert.

    Shape (H, W, C) is kept: corners that rotate out are cut, corners that rotate in are black
    (before inversion, so an inverted rotation has a white background). Returns float32.
    """
    arr = np.asarray(image, dtype=np.float32)
    if t.rotate:
        squeeze = arr.ndim == 2
        planes = arr[..., np.newaxis] if squeeze else arr
        rotated = [np.asarray(Image.fromarray(np.ascontiguousarray(planes[..., c]))
                              .rotate(t.rotate, resample=Image.Resampling.BILINEAR, fillcolor=0.0),
                              dtype=np.float32)
                   for c in range(planes.shape[-1])]
        arr = np.stack(rotated, axis=-1)
        if squeeze:
            arr = arr[..., 0]
        arr = np.clip(arr, 0.0, 1.0)
    if t.invert:
        arr = np.float32(1.0) - arr
    return np.ascontiguousarray(arr, dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# Image files


def _check_shape(input_shape: Sequence[int]) -> tuple[int, int, int]:
    try:
        h, w, c = (int(d) for d in input_shape)
    except (TypeError, ValueError):
        raise ReportgenError("An input shape must be (height, width, channels).",
                             expected="e.g. (28, 28, 1) or (32, 32, 3)",
                             received=repr(input_shape)) from None
    if h < 1 or w < 1 or c not in (1, 3):
        raise ReportgenError("Unsupported model input shape.",
                             expected="(H, W, 1) grayscale or (H, W, 3) RGB",
                             received=repr(tuple(input_shape)))
    return h, w, c


# Pillow's resize(reducing_gap=...) shrinks by an integer box filter first and resamples only
# the last 1 to 2 x gap-fold step. Doing that shrink on the decoded 8-/16-bit image, before any
# float conversion, bounds the float work to (2 x 4)^2 = 64 times the model's input, whatever
# the file's size. Pillow calls gap 3 indistinguishable from a full resample; 4 keeps large
# images within ~0.01 (about 3 grey levels) of the full bilinear resample this replaced.
_REDUCING_GAP = 4.0


def _float_scale(mode: str, top: float) -> float | None:
    """The value that maps a high bit-depth image to [0, 1] (None for 8-bit modes).

    Decided on the whole decoded image (before any shrinking, which lowers the maximum `top`):
    16-bit modes by their own range (Pillow's convert("L") would clip at 255 instead of
    scaling), 32-bit "I" / "F" by their largest value (<= 1, <= 255 or else 16-bit).
    """
    if mode.startswith("I;16"):
        return 65535.0
    if mode not in ("I", "F"):
        return None
    return 1.0 if (mode == "F" and top <= 1.0) else 255.0 if top <= 255.0 else 65535.0


def _largest(img: Image.Image) -> float:
    """The largest value of a 32-bit "I" / "F" image (what `_float_scale` needs), else 0."""
    if img.mode not in ("I", "F") or not (img.width and img.height):
        return 0.0
    return float(img.getextrema()[1])


def _normal_mode(mode: str, info: dict) -> str:
    """The mode `_normalise_mode` converts `mode` to."""
    if mode.startswith("I;16"):
        return "F"
    if mode in ("L", "LA", "RGB", "RGBA", "I", "F"):
        return mode
    if mode == "P":
        return "RGBA" if "transparency" in info else "RGB"
    if mode == "PA":
        return "RGBA"
    if mode == "1":
        return "L"
    if mode == "La":
        return "LA"
    return "RGBA" if "A" in mode or "a" in mode else "RGB"


def _normalise_mode(img: Image.Image) -> Image.Image:
    """Any 8-bit Pillow mode -> L, LA, RGB or RGBA; 16-/32-bit modes -> I or F."""
    mode = _normal_mode(img.mode, img.info)
    return img if mode == img.mode else img.convert(mode)


def _pil_to_float(img: Image.Image, scale: float | None = None) -> np.ndarray:
    """A normalised image (see `_normalise_mode`) -> float32 (h, w, 1 or 3) in [0, 1], alpha
    composited onto black; `scale` as `_float_scale` gives it for 16-/32-bit images."""
    if scale is not None:
        arr = np.asarray(img if img.mode == "F" else img.convert("F"), dtype=np.float32)
        return np.clip(arr / np.float32(scale), 0.0, 1.0)[..., np.newaxis]
    arr = np.asarray(img, dtype=np.float32) / np.float32(255.0)
    if arr.ndim == 2:
        arr = arr[..., np.newaxis]
    if img.mode in ("LA", "RGBA"):
        arr = arr[..., :-1] * arr[..., -1:]
    return arr


def _fitted_size(h: int, w: int, height: int, width: int) -> tuple[int, int]:
    """The size of an h x w image scaled to fit inside height x width, aspect kept."""
    scale = min(height / h, width / w)
    return min(height, max(1, round(h * scale))), min(width, max(1, round(w * scale)))


def _letterbox(arr: np.ndarray, height: int, width: int, fitted: tuple[int, int] | None = None,
               box: tuple[float, float, float, float] | None = None) -> np.ndarray:
    """Resize (h, w, c) to fit inside height x width with the aspect kept; pad black, centred.

    `fitted` and `box` describe an image already shrunk from a larger original: its size fitted
    as the original's was, and the original's extent in the shrunk image's pixels.
    """
    h, w, c = arr.shape
    if box is None and (h, w) == (height, width):
        return arr
    new_h, new_w = fitted or _fitted_size(h, w, height, width)
    out = np.zeros((height, width, c), dtype=np.float32)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    for ch in range(c):
        plane = Image.fromarray(np.ascontiguousarray(arr[..., ch]))
        resized = plane.resize((new_w, new_h), resample=Image.Resampling.BILINEAR, box=box)
        out[top:top + new_h, left:left + new_w, ch] = np.asarray(resized, dtype=np.float32)
    return np.clip(out, 0.0, 1.0)


def _shrink(img: Image.Image, fitted: tuple[int, int],
            box: tuple[float, float, float, float] | None):
    """Box-reduce a decoded image in its own (integer) mode until it is at most ~2 x
    _REDUCING_GAP times the fitted size, as Pillow's resize(reducing_gap) does.

    Returns the image and the original's extent in its pixels (None: the whole image, as is).
    """
    new_h, new_w = fitted
    x0, y0, x1, y1 = box or (0.0, 0.0, float(img.width), float(img.height))
    factor_x = int((x1 - x0) / new_w / _REDUCING_GAP) or 1
    factor_y = int((y1 - y0) / new_h / _REDUCING_GAP) or 1
    if factor_x == 1 and factor_y == 1:
        return img, box
    reduced = img.reduce((factor_x, factor_y))
    return reduced, (x0 / factor_x, y0 / factor_y, x1 / factor_x, y1 / factor_y)


def _to_model_input(img: Image.Image, height: int, width: int, channels: int,
                    fitted: tuple[int, int] | None = None,
                    box: tuple[float, float, float, float] | None = None) -> np.ndarray:
    """A decoded image -> float32 (height, width, channels); see `convert_image`."""
    fitted = fitted or _fitted_size(img.height, img.width, height, width)
    scale = _float_scale(img.mode, _largest(img))
    img = _normalise_mode(img)
    img, box = _shrink(img, fitted, box)
    return _float_input(img, scale, height, width, channels, fitted, box)


def _float_input(img: Image.Image, scale: float | None, height: int, width: int, channels: int,
                 fitted: tuple[int, int], box: tuple[float, float, float, float] | None):
    """A normalised, shrunk image -> float32 (height, width, channels), letterboxed."""
    arr = _pil_to_float(img, scale)
    if channels == 1 and arr.shape[-1] == 3:
        luma = np.array([0.299, 0.587, 0.114], dtype=np.float32)
        arr = (arr @ luma)[..., np.newaxis]
    elif channels == 3 and arr.shape[-1] == 1:
        arr = np.repeat(arr, 3, axis=-1)
    return np.ascontiguousarray(_letterbox(arr, height, width, fitted, box), dtype=np.float32)


def convert_image(img: Image.Image, input_shape: Sequence[int]) -> np.ndarray:
    """A Pillow image -> float32 (H, W, C) in [0, 1]: C=1 grey (ITU-R 601 luma, as Pillow's "L"),
    C=3 RGB; alpha onto black; letterboxed to H x W (bilinear, with the aspect kept).

    A large image is first box-reduced in its own 8-/16-bit mode (see `_REDUCING_GAP`), so only
    a few times the model's input is ever held as float.
    """
    height, width, channels = _check_shape(input_shape)
    return _to_model_input(img, height, width, channels)


def _pixel_limit() -> int | None:
    """Pillow's decompression-bomb limit: it refuses images over 2 x MAX_IMAGE_PIXELS."""
    limit = Image.MAX_IMAGE_PIXELS
    return None if limit is None else 2 * int(limit)


def _too_large(path: Path, size: tuple[int, int] | None, pixels: int | None) -> ReportgenError:
    limit = _pixel_limit()
    if size is not None:
        received = f"{size[0]:,} x {size[1]:,} = {size[0] * size[1]:,} pixels"
    else:
        received = f"{pixels:,} pixels" if pixels is not None else "an image over the limit"
    return ReportgenError(
        f"Image file {str(path)!r} is too large to read.",
        expected=f"at most {limit:,} pixels (Pillow's decompression-bomb limit, "
                 f"2 x PIL.Image.MAX_IMAGE_PIXELS)" if limit else "a smaller image",
        received=received,
        fix=f"Shrink the image first (models see it at their small input size anyway), e.g. "
            f"with ImageMagick: convert {str(path)!r} -resize 1000x1000 small.png")


def _open_error(path: Path, exc: Exception) -> ReportgenError:
    """One line for a file Pillow cannot decode, naming the file and what went wrong."""
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())
    if isinstance(exc, UnidentifiedImageError):
        try:
            empty = path.stat().st_size == 0
        except OSError:
            empty = False
        return ReportgenError(f"Image file {str(path)!r} is not a readable image (an unknown "
                              "format, or corrupt).", expected="a PNG, JPEG, GIF or BMP image",
                              received="an empty file" if empty else "bytes Pillow cannot "
                              "identify as any image format",
                              fix="export or download the image again, or convert it to PNG")
    if isinstance(exc, OSError) and exc.errno is not None:  # the file system, not the pixels
        return ReportgenError(f"Cannot read the image file {str(path)!r}.",
                              received=exc.strerror or detail,
                              fix="check the file's permissions")
    return ReportgenError(f"Image file {str(path)!r} is truncated or corrupt.",
                          expected="a complete PNG, JPEG, GIF or BMP image", received=detail,
                          fix="export or download the image again, or convert it to PNG")


# A PNG of more pixels than this is read a band of rows at a time (see png_bands); smaller ones,
# and other formats, are decoded whole by Pillow.
_BAND_MIN_PIXELS = 4_000_000
# Bytes per band, the larger of the file's row bytes (up to 8 a pixel) and Pillow's decoded
# ones (up to 4 a pixel); a few copies of a band are in flight at once.
_BAND_BYTES = 4 * 1024 * 1024
# Memory a whole-image decode may take (the decoded image plus its mode conversion). An image
# past it that cannot be read in bands (interlaced PNG, BMP, GIF...) is refused instead.
_DECODE_BUDGET = 256 * 1024 * 1024
# The widest PNG read in bands: a band is at least one row (up to 8 bytes a pixel in the file)
# and a few copies of it are in flight.
_BAND_MAX_WIDTH = _DECODE_BUDGET // 64


def _pixel_bytes(mode: str) -> int:
    """Bytes a pixel of `mode` takes in Pillow's memory."""
    if mode in ("1", "L", "P"):
        return 1
    return 2 if mode.startswith("I;16") else 4


def _whole_decode_bytes(img: Image.Image) -> int:
    """Memory to decode `img` whole and convert it to its normalised mode."""
    size = _pixel_bytes(img.mode)
    normal = _normal_mode(img.mode, img.info)
    if normal != img.mode:
        size += _pixel_bytes(normal)
    return img.width * img.height * size


def _too_large_to_decode(path: Path, img: Image.Image, needed: int,
                         reason: str | None) -> ReportgenError:
    mb = 1024 * 1024
    kind = f"{reason}, which cannot be read in bands" if reason else f"a {img.format} image"
    return ReportgenError(
        f"Image file {str(path)!r} is too large to decode whole ({kind}).",
        expected=f"at most {_DECODE_BUDGET // mb} MB decoded (a non-interlaced PNG of any size "
                 "is read a band of rows at a time)",
        received=f"{img.width:,} x {img.height:,} pixels in mode {img.mode}, "
                 f"{math.ceil(needed / mb):,} MB decoded",
        fix=f"save it as a non-interlaced PNG, or smaller, e.g. with ImageMagick: convert "
            f"{str(path)!r} -interlace none image.png")


def _png_in_bands(path: Path, layout: png_bands.PngLayout, height: int, width: int,
                  channels: int, fitted: tuple[int, int]) -> np.ndarray:
    """`_to_model_input` for a PNG read a band at a time: each band box-reduced as `_shrink`
    reduces the whole image, so only the reduced image is ever held whole.

    A band is a whole number of reduction boxes high, so each box lies in one band and the
    result equals the whole-image reduction exactly. Only when a band of one box height would
    exceed _BAND_BYTES (a very wide image) are the rows reduced afterwards, in a second step.
    """
    w, h = layout.width, layout.height
    factor_x = int(w / fitted[1] / _REDUCING_GAP) or 1
    factor_y = int(h / fitted[0] / _REDUCING_GAP) or 1
    rows = max(1, _BAND_BYTES // max(layout.row_bytes, 4 * w))
    band_factor_y = factor_y if rows >= factor_y else 1
    rows -= rows % band_factor_y
    reduced: Image.Image | None = None
    mode, top, y = "", 0.0, 0
    for band in png_bands.iter_bands(path, layout, rows):
        mode, top = band.mode, max(top, _largest(band))
        band = _normalise_mode(band)
        if (factor_x, band_factor_y) != (1, 1):
            band = band.reduce((factor_x, band_factor_y))
        if reduced is None:
            reduced = Image.new(band.mode, (band.width, -(-h // band_factor_y)))
        reduced.paste(band, (0, y))
        y += band.height
    assert reduced is not None
    if band_factor_y != factor_y:
        reduced = reduced.reduce((1, factor_y))
    box = None if (factor_x, factor_y) == (1, 1) else (0.0, 0.0, w / factor_x, h / factor_y)
    return _float_input(reduced, _float_scale(mode, top), height, width, channels, fitted, box)


def load_image_file(path: str | os.PathLike, input_shape: Sequence[int]) -> np.ndarray:
    """Read any PNG/JPEG/GIF/BMP (any size or mode; GIF -> first frame) as a model input.

    See `convert_image` for the conversion. Memory stays bounded whatever the file's size, and
    nothing of full size is converted to float: a PNG over _BAND_MIN_PIXELS (not interlaced
    or animated) is decoded a band of rows at a time, each band shrunk before the next is read;
    JPEGs are decoded at 1/2, 1/4 or 1/8 scale when that still leaves `_REDUCING_GAP` times
    the model's input (Pillow's `draft`); other images are decoded whole, up to
    _DECODE_BUDGET. Missing, unreadable, truncated or corrupt files, images past Pillow's
    decompression-bomb limit and whole decodes past the budget raise a one-line
    ReportgenError naming the file.
    """
    path = Path(path)
    height, width, channels = _check_shape(input_shape)
    if not path.is_file():
        raise ReportgenError(f"Image file {str(path)!r} does not exist.",
                             expected="a PNG, JPEG, GIF or BMP file",
                             received=str(path.resolve()) + (" (a folder)" if path.is_dir() else ""),
                             fix="check the path (relative paths are taken from the current folder)")
    try:
        with warnings.catch_warnings():
            # Between 1x and 2x MAX_IMAGE_PIXELS Pillow only warns: such an image is accepted,
            # its memory bounded by the shrinking above; past 2x it raises (refused below).
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                img.seek(0)
                limit = _pixel_limit()
                if limit is not None and img.width * img.height > limit:  # e.g. a later frame
                    raise _too_large(path, img.size, None)
                fitted = _fitted_size(img.height, img.width, height, width)
                reason = None
                if img.format == "PNG":
                    layout = png_bands.read_layout(path)
                    reason = layout.whole_image_reason if layout else None
                    if layout and layout.width > _BAND_MAX_WIDTH:
                        reason = f"a PNG over {_BAND_MAX_WIDTH:,} pixels wide"
                    if layout and not reason and img.width * img.height > _BAND_MIN_PIXELS:
                        return _png_in_bands(path, layout, height, width, channels, fitted)
                # JPEG: let the decoder scale down (DCT scaling) instead of decoding it all
                drafted = img.draft(img.mode, (math.ceil(fitted[1] * _REDUCING_GAP),
                                               math.ceil(fitted[0] * _REDUCING_GAP)))
                needed = _whole_decode_bytes(img)
                if needed > _DECODE_BUDGET:
                    raise _too_large_to_decode(path, img, needed, reason)
                img.load()
                # the original's extent in the drafted pixels (None: decoded at full size)
                box = drafted[1] if drafted and tuple(drafted[1][2:]) != img.size else None
                return _to_model_input(img, height, width, channels, fitted, box)
    except ReportgenError:
        raise
    except Image.DecompressionBombError as exc:
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        raise _too_large(path, None, int(pixels.group(1)) if pixels else None) from None
    except MemoryError:
        raise ReportgenError(f"Image file {str(path)!r} is too large to read in memory.",
                             fix="shrink the image first") from None
    except Exception as exc:  # Pillow raises many types for bad, truncated or odd files
        raise _open_error(path, exc) from None


# ---------------------------------------------------------------------------------------------
# Selection and assembly


def parse_image_selection(text: str | None) -> list[int]:
    """Test-split indices from "test:0-15" (inclusive), "test:3,7,9-11" or "3,7"; ""/"none" → [].

    Order is kept, duplicates dropped.
    """
    raw = "" if text is None else str(text)
    body = raw.strip()
    if body.lower() in ("", "none"):
        return []
    split, sep, rest = body.partition(":")
    if sep:
        if split.strip().lower() != "test":
            raise ReportgenError(f"Cannot select images from {split.strip()!r}.",
                                 expected=_SELECTION_FORMS, received=repr(raw),
                                 fix="only the test split can be selected, e.g. test:0-15")
        body = rest
    indices: list[int] = []
    seen: set[int] = set()
    for part in body.split(","):
        token = part.strip()
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", token)
        if not match:
            raise ReportgenError(f"Bad image selection {raw!r}: cannot read {token!r}.",
                                 expected=_SELECTION_FORMS, received=repr(raw))
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ReportgenError(f"Bad image selection {raw!r}: range {token!r} runs backwards.",
                                 expected="FIRST-LAST with FIRST <= LAST, e.g. test:0-15",
                                 received=repr(token))
        if last - first + 1 + len(indices) > _MAX_SELECTION:
            raise ReportgenError(f"Image selection {raw!r} is too large.",
                                 expected=f"at most {_MAX_SELECTION:,} images",
                                 received=f"range {token!r}",
                                 fix="select a smaller range, e.g. test:0-15")
        for i in range(first, last + 1):
            if i not in seen:
                seen.add(i)
                indices.append(i)
    return indices


@dataclass(frozen=True, eq=False)
class InputImage:
    """One image to analyse, already at the model's input shape."""

    key: str                     # file-name-safe, stable: "test-12", "file-3fa9c0d21e-cat-rot90"
    label: str                   # for people: "test #12", "cat.png (rotated 90°)"
    image: np.ndarray            # float32 [0, 1], (H, W, C); read-only
    true_class: int | None       # None when unknown, or when the image carries two classes
    source_bytes_digest: str     # sha256 of source bytes + transform label: feeds cache keys
    transform: Transform
    # The two classes of an image of two overlapping digits (MultiMNIST), else ().
    true_classes: tuple[int, ...] = ()

    @property
    def known_classes(self) -> tuple[int, ...]:
        """Every class the image is known to show: its pair, its one class, or ()."""
        return self.true_classes or (() if self.true_class is None else (self.true_class,))


def _safe_stem(name: str) -> str:
    stem = re.sub(r"[^a-z0-9_-]+", "-", Path(name).stem.lower()).strip("-_")
    return stem[:40].strip("-_") or "image"


def _digest(source: "hashlib._Hash", t: Transform) -> str:
    """sha256(source bytes + "|" + transform label), from a hash already fed the source bytes."""
    digest = source.copy()
    digest.update(b"|" + t.label().encode("ascii"))
    return digest.hexdigest()


def _hash_file(path: Path) -> "hashlib._Hash":
    """sha256 of a file read in blocks (an image file is not held in memory twice)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise ReportgenError(f"Cannot read the image file {str(path)!r}.",
                             received=exc.strerror or type(exc).__name__,
                             fix="check the file's permissions") from None
    return digest


def _with_transform(key: str, label: str, t: Transform) -> tuple[str, str]:
    if t.is_identity:
        return key, label
    return f"{key}-{t.label()}", f"{label} ({t.describe()})"


def _frozen(image: np.ndarray) -> np.ndarray:
    image = np.array(image, dtype=np.float32, copy=True)
    image.setflags(write=False)
    return image


def make_inputs(dataset: "Dataset | None", indices: Sequence[int], files: Sequence[str | os.PathLike],
                transforms: Sequence[Transform], input_shape: Sequence[int]) -> list[InputImage]:
    """Build the inputs: each test index, then each file, each under every transform.

    Empty `transforms` means the original only. Duplicate indices/files are dropped (keys stay
    unique). Errors: an index outside the test split, dataset images whose shape differs from the
    model's, unreadable files.
    """
    shape = _check_shape(input_shape)
    transforms = list(dict.fromkeys(transforms)) or [Transform()]
    result: list[InputImage] = []
    seen: set[str] = set()

    def add(key: str, label: str, pixels: np.ndarray, true_class: int | None,
            source: "hashlib._Hash", true_classes: tuple[int, ...] = ()) -> None:
        for t in transforms:
            k, lab = _with_transform(key, label, t)
            if k in seen:
                continue
            seen.add(k)
            result.append(InputImage(key=k, label=lab, image=_frozen(apply_transform(pixels, t)),
                                     true_class=true_class, source_bytes_digest=_digest(source, t),
                                     transform=t, true_classes=true_classes))

    if indices:
        if dataset is None:
            raise ReportgenError("Test images were selected but no dataset is loaded.",
                                 expected="a dataset to take test images from",
                                 received=f"indices {list(indices)[:5]}")
        if tuple(dataset.input_shape) != shape:
            raise ReportgenError(f"The {dataset.name} images do not fit the model.",
                                 expected=f"images of shape {shape} (the model's input)",
                                 received=f"{dataset.input_shape}",
                                 fix="pick the dataset the model was trained on")
        size = len(dataset.x_test)
        for raw in indices:
            i = int(raw)
            if not 0 <= i < size:
                raise ReportgenError(f"Test image index {i} is out of range.",
                                     expected=f"0..{size - 1} (the {dataset.name} test split has "
                                              f"{size:,} images)",
                                     received=str(i), fix=f"use e.g. test:0-{min(15, size - 1)}")
            pixels = np.ascontiguousarray(dataset.x_test[i], dtype=np.float32)
            label = np.asarray(dataset.y_test[i]).reshape(-1)
            if len(label) == 1:
                add(f"test-{i}", f"test #{i}", pixels, int(label[0]),
                    hashlib.sha256(pixels.tobytes()))
            else:    # two overlapping digits (MultiMNIST)
                add(f"test-{i}", f"test #{i}", pixels, None, hashlib.sha256(pixels.tobytes()),
                    tuple(int(k) for k in label))

    for name in files:
        path = Path(name)
        pixels = load_image_file(path, shape)
        source = _hash_file(path)
        key = f"file-{source.hexdigest()[:10]}-{_safe_stem(path.name)}"
        add(key, path.name, pixels, None, source)
    return result
