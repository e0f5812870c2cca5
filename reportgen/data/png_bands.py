"""Decode a large PNG a band of rows at a time, never holding the whole image.

Pillow decodes a PNG into one buffer of 1 to 4 bytes a pixel, so a 10000 x 10000 RGB file takes
400 MB however small the model input it becomes. Here the image data (the zlib stream over the
IDAT chunks) is inflated a band at a time. A PNG row is stored filtered against the row above
(PNG specification, section 9 "Filtering"): the Up, Average and Paeth filters need the previous
row's unfiltered bytes, and Average and Paeth run along the row.
Rather than unfilter in Python, each band becomes a small valid PNG for Pillow to decode: the
file's own header, palette and transparency with the band's height, and as image data the row
above the band unfiltered (filter type None) followed by the band's rows exactly as stored. The
decoder then sees the same bytes above the band's first row as it would in the whole file, so
each band decodes to exactly the pixels of Pillow's whole-image decode.

The unfiltered bytes of a band's last row (the next band's context) come from Pillow too:
read straight from the decoded pixels where the decode keeps every byte (8-bit samples, 16-bit
grey), else by decoding the same data under an 8-bit header of equal bytes per pixel (filters
work on bytes one pixel apart, so the unfiltered bytes are the same). 16-bit RGB and RGBA have
no such 8-bit twin, but there Pillow keeps only the high bytes, which never depend on low ones.

Only plain still images are read in bands: interlaced (Adam7) and animated (APNG) files are
left to Pillow (`PngLayout.whole_image_reason`).
"""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np
from PIL import Image, PngImagePlugin

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}            # colour type -> samples per pixel
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_BYTE_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}                # bytes per pixel -> 8-bit colour type
_COPIED = (b"PLTE", b"tRNS")                          # the chunks that change decoded pixels
_READ = 1 << 16                                       # compressed bytes read at a time


class PngDataError(ValueError):
    """The image data of a PNG is truncated or corrupt."""


@dataclass(frozen=True)
class PngLayout:
    """What a PNG's chunks before the image data say about how to decode it."""

    width: int
    height: int
    bit_depth: int
    colour_type: int
    interlaced: bool
    animated: bool
    copied: bytes          # the PLTE and tRNS chunks, whole (length, type, data, CRC)
    idat_offset: int       # where the first IDAT chunk starts in the file

    @property
    def pixel_bits(self) -> int:
        return self.bit_depth * _CHANNELS[self.colour_type]

    @property
    def filter_distance(self) -> int:
        """Bytes between a byte and the one the Sub/Average/Paeth filters see to its left."""
        return max(1, self.pixel_bits // 8)

    @property
    def row_bytes(self) -> int:
        return (self.width * self.pixel_bits + 7) // 8

    @property
    def whole_image_reason(self) -> str | None:
        """Why this file cannot be read in bands (None: it can)."""
        if self.interlaced:
            return "an interlaced (Adam7) PNG"
        if self.animated:
            return "an animated PNG (APNG)"
        return None


def read_layout(path: str | Path) -> PngLayout | None:
    """The layout of a PNG file, or None when its chunks are not ones this module decodes (not a
    PNG, an unknown critical chunk, a missing palette...): Pillow then reads it, or reports it."""
    try:
        with open(path, "rb") as f:
            return _parse_layout(f)
    except (struct.error, ValueError):
        return None


def _parse_layout(f: BinaryIO) -> PngLayout | None:
    if f.read(8) != SIGNATURE:
        return None
    header: tuple[int, ...] | None = None
    copied: list[bytes] = []
    animated = False
    while True:
        start = f.tell()
        length, kind = struct.unpack(">I4s", f.read(8))
        if length > 0x7FFFFFFF:
            return None
        if header is None and kind != b"IHDR":
            return None
        if kind == b"IDAT":
            break
        if kind in (b"IHDR", *_COPIED):
            data = f.read(length)
            crc = f.read(4)
            if len(data) != length or len(crc) != 4:
                return None
            if kind == b"IHDR":
                if length != 13:
                    return None
                header = struct.unpack(">IIBBBBB", data)
            else:
                copied.append(struct.pack(">I", length) + kind + data + crc)
            continue
        if kind[0:1].isupper():          # IEND before any image data, or unknown and critical
            return None
        animated = animated or kind == b"acTL"
        f.seek(length + 4, io.SEEK_CUR)
    width, height, depth, colour, method, filters, interlace = header
    if (colour not in _CHANNELS or depth not in _DEPTHS[colour] or method or filters
            or interlace > 1 or not width or not height):
        return None
    if colour == 3 and not any(c[4:8] == b"PLTE" for c in copied):
        return None
    return PngLayout(width=width, height=height, bit_depth=depth, colour_type=colour,
                     interlaced=bool(interlace), animated=animated, copied=b"".join(copied),
                     idat_offset=start)


def iter_bands(path: str | Path, layout: PngLayout, band_rows: int) -> Iterator[Image.Image]:
    """The image's rows as Pillow images of `band_rows` rows each (the last one shorter), top
    to bottom, each exactly as the same rows of Pillow's whole-image decode (same mode, palette
    and `info["transparency"]`).

    Holds about four copies of one band at a time. Raises PngDataError when the image data is
    truncated or corrupt, and what Pillow raises for data it cannot decode.
    """
    if layout.whole_image_reason:
        raise ValueError(f"cannot read {layout.whole_image_reason} in bands")
    band_rows = max(1, int(band_rows))
    with open(path, "rb") as f:
        f.seek(layout.idat_offset)
        above: bytes | None = None       # the unfiltered row above the band (None: the top)
        done = 0
        for block in _filtered_blocks(f, layout, band_rows):
            done += len(block) // (1 + layout.row_bytes)
            image, above = _decode_band(layout, block, above, need_last=done < layout.height)
            yield image


def _idat_pieces(f: BinaryIO) -> Iterator[bytes]:
    """The compressed image data: the contents of consecutive IDAT chunks, in pieces."""
    while True:
        head = f.read(8)
        if len(head) < 8:
            return
        length, kind = struct.unpack(">I4s", head)
        if kind != b"IDAT":
            return
        while length:
            piece = f.read(min(length, _READ))
            if not piece:
                return
            length -= len(piece)
            yield piece
        f.read(4)        # the CRC; Pillow does not check it for image data either


def _filtered_blocks(f: BinaryIO, layout: PngLayout,
                     band_rows: int) -> Iterator[bytearray]:
    """The inflated image data, `band_rows` filtered rows (filter byte + row bytes) at a time;
    max_length keeps each inflate step within the band."""
    stride = 1 + layout.row_bytes
    inflate = zlib.decompressobj()
    pieces = _idat_pieces(f)
    row = 0
    while row < layout.height:
        want = min(band_rows, layout.height - row) * stride
        block = bytearray()
        while len(block) < want:
            if inflate.unconsumed_tail:
                data = inflate.unconsumed_tail
            elif inflate.eof:
                break
            else:
                data = next(pieces, b"")
                if not data:
                    break
            try:
                block += inflate.decompress(data, want - len(block))
            except zlib.error as exc:
                raise PngDataError(f"corrupt image data after row {row:,} ({exc})") from None
        if len(block) < want:
            raise PngDataError(f"the image data ends at row {row + len(block) // stride:,} "
                               f"of {layout.height:,}")
        row += want // stride
        yield block


def _chunk(kind: bytes, *data: bytes) -> list[bytes]:
    """A chunk as parts to join (its data may come in several pieces)."""
    crc = zlib.crc32(kind)
    for piece in data:
        crc = zlib.crc32(piece, crc)
    return [struct.pack(">I", sum(map(len, data))), kind, *data, struct.pack(">I", crc)]


_IEND = b"".join(_chunk(b"IEND"))


def _decode(width: int, height: int, depth: int, colour: int, extra: bytes,
            idat: list[bytes]) -> Image.Image:
    """Pillow's decode of a PNG made of this header, the `extra` chunks and the IDAT chunk.

    Opened through the PNG plugin's class rather than Image.open, so the decompression-bomb
    check is not repeated on every band (the caller checked the whole image's size).
    """
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0))
    png = b"".join((SIGNATURE, *header, extra, *idat, _IEND))
    image = PngImagePlugin.PngImageFile(io.BytesIO(png))
    del png
    image.load()
    return image


def _decode_band(layout: PngLayout, block: bytes, above: bytes | None,
                 need_last: bool) -> tuple[Image.Image, bytes | None]:
    """A band's filtered rows and the unfiltered row above it (None at the top) -> the band's
    pixels and, if `need_last`, the unfiltered bytes of its last row."""
    deflate = zlib.compressobj(0)                  # stored: Pillow only has to copy it out
    pieces = [] if above is None else [deflate.compress(b"\x00" + above)]
    pieces += [deflate.compress(block), deflate.flush()]
    idat = _chunk(b"IDAT", *pieces)
    del pieces
    rows = len(block) // (1 + layout.row_bytes) + (above is not None)
    image = _decode(layout.width, rows, layout.bit_depth, layout.colour_type, layout.copied, idat)
    last = _last_row(layout, image, idat, rows) if need_last else None
    if above is not None:
        image = image.crop((0, 1, layout.width, rows))
    return image, last


def _last_row(layout: PngLayout, image: Image.Image, idat: list[bytes], rows: int) -> bytes:
    """The unfiltered bytes of the last row of a decoded band (`idat` its image data), as far
    as they reach the decoded pixels of the next band."""
    pixels = np.asarray(image.crop((0, rows - 1, layout.width, rows)))[0]
    if layout.bit_depth == 8:                         # Pillow keeps every byte
        return pixels.tobytes()
    if image.mode == "I;16":                          # 16-bit grey, kept in native order
        return pixels.astype(">u2").tobytes()
    distance = layout.filter_distance
    if distance in _BYTE_TYPES:                       # same filter distance, 8-bit samples
        raw = _decode(layout.row_bytes // distance, rows, 8, _BYTE_TYPES[distance], b"", idat)
        return np.asarray(raw.crop((0, rows - 1, raw.width, rows))).tobytes()
    # 16-bit RGB / RGBA: Pillow keeps only each sample's high byte. The filters work on bytes
    # a whole pixel (an even number of bytes) apart, so high bytes unfilter from high bytes
    # alone: the low bytes of the row above never reach the decoded pixels, zeros stand in.
    row = np.zeros(layout.row_bytes, np.uint8)
    row[0::2] = pixels.reshape(-1)
    return row.tobytes()
