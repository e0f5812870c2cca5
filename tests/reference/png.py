"""A small PNG encoder written from the PNG specification (3rd ed., sections 7-9 and 11), to
make test files Pillow cannot: every row under a chosen filter, 1- to 16-bit samples of any
colour type, non-zero padding bits, Adam7 interlacing, image data split over many IDAT chunks.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
NONE, SUB, UP, AVERAGE, PAETH = range(5)
# Adam7 passes: (first row, first column, row step, column step)
ADAM7 = [(0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
         (1, 0, 2, 1)]


def chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def pack_rows(samples: np.ndarray, bit_depth: int, padding: int = 0) -> np.ndarray:
    """Samples (h, w, channels) -> unfiltered row bytes (h, row_bytes): 16-bit big-endian,
    sub-byte depths packed most significant bits first, the unused low bits of a row's last
    byte set to `padding` (decoders must ignore them)."""
    h, w, c = samples.shape
    flat = samples.reshape(h, w * c).astype(np.uint32)
    if bit_depth == 16:
        return np.stack([flat >> 8, flat & 0xFF], axis=-1).reshape(h, -1).astype(np.uint8)
    if bit_depth == 8:
        return flat.astype(np.uint8)
    bits = ((flat[..., None] >> np.arange(bit_depth - 1, -1, -1)) & 1).reshape(h, -1)
    spare = (-bits.shape[1]) % 8
    pad = ((padding >> np.arange(spare - 1, -1, -1)) & 1) if spare else np.zeros(0, int)
    bits = np.concatenate([bits, np.broadcast_to(pad, (h, spare))], axis=1)
    return np.packbits(bits.astype(np.uint8), axis=1)


def _paeth(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def _left(x: np.ndarray, bpp: int) -> np.ndarray:
    """The byte a whole pixel to the left of each byte (0 left of the row's start)."""
    out = np.zeros_like(x)
    out[bpp:] = x[:max(0, len(x) - bpp)]
    return out


def filter_row(x: np.ndarray, above: np.ndarray, bpp: int, kind: int) -> bytes:
    """One unfiltered row (and the one above it) -> its filter type byte and filtered bytes:
    each byte minus the predictor of that filter type (section 9.2), modulo 256."""
    x, above = x.astype(np.int32), above.astype(np.int32)
    a, c = _left(x, bpp), _left(above, bpp)
    predictor = {NONE: 0, SUB: a, UP: above, AVERAGE: (a + above) // 2,
                 PAETH: _paeth(a, above, c)}[kind]
    return bytes([kind]) + ((x - predictor) % 256).astype(np.uint8).tobytes()


def filter_rows(rows: np.ndarray, bpp: int, filters) -> bytes:
    """Unfiltered rows (h, n) -> the filtered stream, row y under filter type filters[y] (or
    all under one type)."""
    kinds = [filters] * len(rows) if isinstance(filters, int) else list(filters)
    above = np.zeros(rows.shape[1], np.int32)
    out = []
    for x, kind in zip(rows, kinds):
        out.append(filter_row(x, above, bpp, kind))
        above = x
    return b"".join(out)


def header(width: int, height: int, bit_depth: int, colour_type: int,
           interlace: bool = False) -> bytes:
    return SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth,
                                                  colour_type, 0, 0, int(interlace)))


def write_rows(path, width: int, height: int, bit_depth: int, colour_type: int, rows,
               filters=SUB, level: int = 1) -> None:
    """Write a large PNG from an iterable of sample rows (width, channels), one row at a time:
    memory stays a few rows whatever the image's size."""
    bpp = max(1, bit_depth * CHANNELS[colour_type] // 8)
    deflate = zlib.compressobj(level)
    with open(path, "wb") as f:
        f.write(header(width, height, bit_depth, colour_type))
        above = None
        for samples in rows:
            x = pack_rows(np.asarray(samples)[None], bit_depth)[0]
            data = deflate.compress(filter_row(x, x * 0 if above is None else above, bpp,
                                               filters))
            if data:
                f.write(chunk(b"IDAT", data))
            above = x
        f.write(chunk(b"IDAT", deflate.flush()) + chunk(b"IEND", b""))


def encode(samples: np.ndarray, bit_depth: int, colour_type: int, filters=PAETH, *,
           palette: bytes | None = None, trns: bytes | None = None, padding: int = 0,
           interlace: bool = False, idat_size: int | None = None, level: int = 6) -> bytes:
    """A PNG file of samples (h, w, channels) (palette indices for colour type 3)."""
    h, w, c = samples.shape
    assert c == CHANNELS[colour_type]
    bpp = max(1, bit_depth * c // 8)
    if interlace:
        stream = b""
        for y0, x0, dy, dx in ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.size:
                stream += filter_rows(pack_rows(sub, bit_depth, padding), bpp, filters)
    else:
        stream = filter_rows(pack_rows(samples, bit_depth, padding), bpp, filters)
    data = zlib.compress(stream, level)
    size = idat_size or len(data) or 1
    parts = [header(w, h, bit_depth, colour_type, interlace)]
    if palette is not None:
        parts.append(chunk(b"PLTE", palette))
    if trns is not None:
        parts.append(chunk(b"tRNS", trns))
    parts.append(chunk(b"tEXt", b"Comment\x00between the header and the image data"))
    parts += [chunk(b"IDAT", data[i:i + size]) for i in range(0, len(data), size)]
    parts.append(chunk(b"IEND", b""))
    return b"".join(parts)
