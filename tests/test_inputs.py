"""Analysis inputs: transforms, image-file conversion, selections and input assembly."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image, ImageDraw

import reportgen.data.inputs as inputs_module
from reference import png as ref_png
from reportgen.data import png_bands
from reportgen.data.datasets import Dataset
from reportgen.data.inputs import (InputImage, Transform, apply_transform, convert_image,
                                   load_image_file, make_inputs, parse_image_selection,
                                   parse_transforms)
from reportgen.errors import ReportgenError

SAFE_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def random_image(shape=(28, 28, 1), seed=0) -> np.ndarray:
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def small_dataset(n_test=20, shape=(28, 28, 1)) -> Dataset:
    rng = np.random.default_rng(0)
    return Dataset(name="tiny", x_train=rng.random((4, *shape), dtype=np.float32),
                   y_train=np.arange(4, dtype=np.int64) % 10,
                   x_test=rng.random((n_test, *shape), dtype=np.float32),
                   y_test=np.arange(n_test, dtype=np.int64) % 10,
                   class_names=tuple("0123456789"), source="test data")


# ------------------------------------------------------------------------------- transforms


@pytest.mark.parametrize("shape", [(28, 28, 1), (32, 32, 3), (9, 9)])
@pytest.mark.parametrize("angle, k", [(90, 1), (-90, -1), (270, -1), (180, 2)])
def test_rotation_by_right_angles_matches_rot90(shape, angle, k):
    img = random_image(shape)
    out = apply_transform(img, Transform(rotate=angle))
    assert out.shape == img.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, np.rot90(img, k=k, axes=(0, 1)), atol=1e-5)


def test_rotation_is_counter_clockwise():
    img = np.zeros((5, 5, 1), np.float32)
    img[0, 4] = 1.0  # top-right corner
    out = apply_transform(img, Transform(rotate=90))
    assert out[0, 0, 0] == pytest.approx(1.0)  # → top-left


def test_identity_and_double_inversion():
    img = random_image()
    np.testing.assert_array_equal(apply_transform(img, Transform()), img)
    np.testing.assert_array_equal(apply_transform(img, Transform(rotate=0)), img)
    inv = apply_transform(img, Transform(invert=True))
    np.testing.assert_allclose(inv, 1.0 - img, atol=1e-7)
    np.testing.assert_allclose(apply_transform(inv, Transform(invert=True)), img, atol=1e-6)


def test_arbitrary_rotation_keeps_shape_and_range():
    img = np.ones((20, 30, 3), np.float32)
    out = apply_transform(img, Transform(rotate=-15.5))
    assert out.shape == (20, 30, 3) and out.dtype == np.float32
    assert out.min() >= 0.0 and out.max() <= 1.0
    assert out[0, 0].tolist() == [0.0, 0.0, 0.0]  # the corner that rotated in is black
    assert out[10, 15].tolist() == pytest.approx([1.0, 1.0, 1.0])
    both = apply_transform(img, Transform(rotate=-15.5, invert=True))
    assert both[0, 0].tolist() == [1.0, 1.0, 1.0]  # rotate first, then invert


def test_transform_parsing_and_labels():
    assert Transform.parse("rotate:90") == Transform(rotate=90)
    assert Transform.parse(" Rotate: -15.5 ") == Transform(rotate=-15.5)
    assert Transform.parse("invert") == Transform(invert=True)
    assert Transform.parse("rotate:90+invert") == Transform(rotate=90, invert=True)
    assert Transform.parse("") == Transform.parse("none") == Transform()
    assert Transform(rotate=270) == Transform(rotate=-90) and Transform(rotate=360).is_identity
    assert Transform().label() == "orig"
    assert Transform(rotate=90).label() == "rot90"
    assert Transform(invert=True).label() == "inv"
    assert Transform(rotate=90, invert=True).label() == "rot90-inv"
    assert Transform(rotate=-15.5).label() == "rot-15.5"
    for t in (Transform(rotate=12.25, invert=True), Transform(invert=True), Transform()):
        assert Transform.parse(str(t)) == t
        assert SAFE_KEY.match(t.label())


@pytest.mark.parametrize("text", ["flip", "rotate:abc", "rotate:", "rotate:inf", "rotate90"])
def test_bad_transforms_are_rejected(text):
    with pytest.raises(ReportgenError, match="rotate:DEGREES"):
        Transform.parse(text)


def test_parse_transforms_list():
    assert parse_transforms("rotate:90,invert") == [
        Transform(), Transform(rotate=90), Transform(invert=True)]
    assert parse_transforms("rotate:90+invert") == [Transform(), Transform(rotate=90, invert=True)]
    assert parse_transforms("none,rotate:90,rotate:-270,invert,invert") == [
        Transform(), Transform(rotate=90), Transform(invert=True)]
    assert parse_transforms("") == [Transform()]


# ------------------------------------------------------------------------------- image files


def test_rgba_is_composited_onto_black(tmp_path):
    img = Image.new("RGBA", (28, 28), (255, 255, 255, 0))
    img.putpixel((3, 4), (255, 255, 255, 255))
    img.putpixel((5, 6), (255, 255, 255, 128))
    img.save(tmp_path / "a.png")
    out = load_image_file(tmp_path / "a.png", (28, 28, 1))
    assert out.shape == (28, 28, 1) and out.dtype == np.float32
    assert out[0, 0, 0] == 0.0 and out[4, 3, 0] == pytest.approx(1.0, abs=1e-2)
    assert out[6, 5, 0] == pytest.approx(128 / 255, abs=1e-2)


def test_palette_with_transparency(tmp_path):
    img = Image.new("P", (10, 10), 0)
    img.putpalette([255, 255, 255, 255, 0, 0] + [0] * 762)
    img.putpixel((1, 1), 1)
    img.info["transparency"] = 0
    img.save(tmp_path / "p.png", transparency=0)
    out = load_image_file(tmp_path / "p.png", (10, 10, 3))
    assert out.shape == (10, 10, 3)
    assert out[0, 0].tolist() == [0.0, 0.0, 0.0]  # transparent white → black
    assert out[1, 1].tolist() == pytest.approx([1.0, 0.0, 0.0])


def test_16_bit_grayscale_is_scaled_not_clipped(tmp_path):
    arr = np.zeros((8, 8), np.uint16)
    arr[0, 0], arr[1, 1] = 65535, 32768
    Image.fromarray(arr).save(tmp_path / "deep.png")
    with Image.open(tmp_path / "deep.png") as check:
        assert check.mode.startswith("I")
    out = load_image_file(tmp_path / "deep.png", (8, 8, 1))
    assert out[0, 0, 0] == pytest.approx(1.0) and out[1, 1, 0] == pytest.approx(0.5, abs=1e-3)
    assert out[2, 2, 0] == 0.0


def test_cmyk_jpeg_and_other_modes(tmp_path):
    Image.new("CMYK", (30, 30), (0, 0, 0, 0)).save(tmp_path / "c.jpg")  # CMYK white
    out = load_image_file(tmp_path / "c.jpg", (28, 28, 3))
    assert out.shape == (28, 28, 3) and out.min() >= 0.0 and out.max() <= 1.0
    assert out[14, 14].tolist() == pytest.approx([1.0, 1.0, 1.0], abs=0.02)
    for mode, name in (("1", "b.bmp"), ("LA", "la.png"), ("RGB", "rgb.bmp"), ("L", "l.gif")):
        Image.new(mode, (5, 7)).save(tmp_path / name)
        for channels in (1, 3):
            result = load_image_file(tmp_path / name, (28, 28, channels))
            assert result.shape == (28, 28, channels) and result.dtype == np.float32
            assert 0.0 <= result.min() and result.max() <= 1.0


def test_rgb_to_grayscale_uses_luma(tmp_path):
    Image.new("RGB", (4, 4), (255, 0, 0)).save(tmp_path / "red.png")
    out = load_image_file(tmp_path / "red.png", (4, 4, 1))
    assert out[0, 0, 0] == pytest.approx(0.299, abs=1e-3)


def test_large_non_square_image_is_letterboxed(tmp_path):
    Image.new("L", (2000, 1000), 255).save(tmp_path / "wide.png")
    out = load_image_file(tmp_path / "wide.png", (28, 28, 1))
    assert out.shape == (28, 28, 1)
    rows = np.flatnonzero(out[:, :, 0].max(axis=1) > 0.5)
    cols = np.flatnonzero(out[:, :, 0].max(axis=0) > 0.5)
    assert len(cols) == 28 and len(rows) == 14  # 2:1 aspect kept
    assert rows[0] == 7 and rows[-1] == 20  # centred, black bands above and below
    assert out[0, :, 0].max() == 0.0


def test_gif_uses_first_frame(tmp_path):
    frames = [Image.new("L", (6, 6), 255), Image.new("L", (6, 6), 0)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=50)
    out = load_image_file(tmp_path / "anim.gif", (6, 6, 1))
    assert out.min() == pytest.approx(1.0)


def test_unreadable_and_missing_files_are_named(tmp_path):
    (tmp_path / "notes.png").write_text("this is not an image")
    with pytest.raises(ReportgenError, match="notes.png"):
        load_image_file(tmp_path / "notes.png", (28, 28, 1))
    with pytest.raises(ReportgenError, match="ghost.png"):
        load_image_file(tmp_path / "ghost.png", (28, 28, 1))
    Image.new("L", (4, 4)).save(tmp_path / "ok.png")
    with pytest.raises(ReportgenError, match="input shape"):
        load_image_file(tmp_path / "ok.png", (28, 28, 4))


def _legacy_convert(img: Image.Image, input_shape) -> np.ndarray:
    """The converter this module had before large images were shrunk before float conversion:
    the whole image to float32, then a per-channel bilinear resize (the numerical reference)."""
    height, width, channels = input_shape
    mode = img.mode
    if mode.startswith("I;16") or mode in ("I", "F"):
        arr = np.asarray(img.convert("F") if mode != "F" else img, dtype=np.float32)
        top = float(arr.max()) if arr.size else 0.0
        scale = (65535.0 if mode.startswith("I;16") else
                 1.0 if (mode == "F" and top <= 1.0) else 255.0 if top <= 255.0 else 65535.0)
        arr = np.clip(arr / np.float32(scale), 0.0, 1.0)[..., np.newaxis]
    else:
        if mode == "P":
            img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        elif mode not in ("L", "LA", "RGB", "RGBA"):
            img = img.convert("L" if mode == "1" else "RGBA" if "A" in mode else "RGB")
        arr = np.asarray(img, dtype=np.float32) / np.float32(255.0)
        arr = arr[..., np.newaxis] if arr.ndim == 2 else arr
        if img.mode in ("LA", "RGBA"):
            arr = arr[..., :-1] * arr[..., -1:]
    if channels == 1 and arr.shape[-1] == 3:
        arr = (arr @ np.array([0.299, 0.587, 0.114], dtype=np.float32))[..., np.newaxis]
    elif channels == 3 and arr.shape[-1] == 1:
        arr = np.repeat(arr, 3, axis=-1)
    h, w, c = arr.shape
    if (h, w) == (height, width):
        return arr
    scale = min(height / h, width / w)
    new_h, new_w = min(height, max(1, round(h * scale))), min(width, max(1, round(w * scale)))
    out = np.zeros((height, width, c), dtype=np.float32)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    for ch in range(c):
        plane = Image.fromarray(np.ascontiguousarray(arr[..., ch]))
        resized = plane.resize((new_w, new_h), resample=Image.Resampling.BILINEAR)
        out[top:top + new_h, left:left + new_w, ch] = np.asarray(resized, dtype=np.float32)
    return np.clip(out, 0.0, 1.0)


def _photo(mode: str, w: int, h: int) -> Image.Image:
    """A natural-looking test image: smooth colour gradients, a bright disc and mild noise."""
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    planes = np.stack([np.sin(6 * x + k) * np.cos(4 * y - k) * 0.5 + 0.5 for k in range(4)], -1)
    planes[(x - 0.5) ** 2 + (y - 0.4) ** 2 < 0.05] = 1.0
    planes = np.clip(planes + np.random.default_rng(w).normal(0, 0.05, planes.shape), 0, 1)
    byte = (planes * 255).astype(np.uint8)
    if mode == "I;16":
        return Image.fromarray((planes[..., 0] * 65535).astype(np.uint16))
    if mode == "F":
        return Image.fromarray(planes[..., 0].astype(np.float32))
    if mode == "RGBA":
        return Image.fromarray(byte, "RGBA")
    if mode == "LA":
        return Image.fromarray(np.ascontiguousarray(byte[..., [0, 3]]), "LA")
    rgb = Image.fromarray(np.ascontiguousarray(byte[..., :3]), "RGB")
    return rgb.quantize(64) if mode == "P" else rgb.convert(mode)


CONVERSIONS = [("L", "png"), ("RGB", "png"), ("RGBA", "png"), ("LA", "png"), ("P", "png"),
               ("1", "bmp"), ("I;16", "png"), ("F", "tif"), ("RGB", "jpg"), ("CMYK", "jpg")]


@pytest.mark.parametrize("mode, ext", CONVERSIONS, ids=lambda v: v.replace(";", ""))
def test_conversion_matches_the_full_float_reference(tmp_path, mode, ext):
    """Images up to 2 x 4 = 8 times the model's input are converted exactly as before; larger
    ones are box-reduced first (Pillow's reducing_gap scheme) and stay within ~3 grey levels."""
    for w, h in [(5, 7), (28, 28), (100, 80), (200, 150), (640, 480), (1500, 1000)]:
        path = tmp_path / f"{w}x{h}.{ext}"
        _photo(mode, w, h).save(path)
        for shape in [(28, 28, 1), (32, 32, 3)]:
            with Image.open(path) as img:
                img.load()
                reference = _legacy_convert(img, shape)
            out = load_image_file(path, shape)
            assert out.shape == reference.shape and out.dtype == np.float32
            if max(w / shape[1], h / shape[0]) < 8:            # not reduced: identical
                np.testing.assert_array_equal(out, reference, err_msg=f"{w}x{h} {shape}")
            else:
                diff = np.abs(out - reference)
                assert diff.max() < 0.02 and diff.mean() < 0.002, (w, h, shape, diff.max())


def test_only_a_few_times_the_input_is_converted_to_float(tmp_path, monkeypatch):
    import reportgen.data.inputs as inputs

    converted, shrunk, bands = [], [], []
    real_float, real_shrink = inputs._pil_to_float, inputs._shrink
    real_bands = png_bands.iter_bands
    monkeypatch.setattr(inputs, "_pil_to_float",
                        lambda img, scale=None: converted.append(img.size) or real_float(img, scale))
    monkeypatch.setattr(inputs, "_shrink",
                        lambda img, *a: shrunk.append(img.size) or real_shrink(img, *a))
    monkeypatch.setattr(png_bands, "iter_bands", lambda *a: (
        bands.append(band.size) or band for band in real_bands(*a)))
    for size, name in (((3000, 2000), "big.png"), ((4000, 3000), "big.jpg"),
                       ((1500, 1000), "small.png")):
        img = Image.new("RGB", size, (20, 40, 60))
        ImageDraw.Draw(img).ellipse((500, 500, 1400, 900), fill=(250, 200, 10))
        img.save(tmp_path / name)
    for name in ("big.png", "big.jpg", "small.png"):
        load_image_file(tmp_path / name, (28, 28, 1))
    for w, h in converted:                 # at most 2 x gap (4) times the fitted 28 x 19 / 21
        assert w <= 8 * 28 and h <= 8 * 28
    # the large PNG is read in bands of whole 26-row reduction boxes, each within _BAND_BYTES
    rows = bands[0][1]
    assert sum(h for _, h in bands) == 2000 and all(w == 3000 for w, _ in bands)
    assert rows % 26 == 0 and 3000 * 4 * rows <= inputs._BAND_BYTES < 3000 * 4 * (rows + 26)
    assert len(bands) == -(-2000 // rows) > 1
    assert shrunk == [(500, 375),          # a JPEG decodes at 1/8 scale (Pillow's draft)
                      (1500, 1000)]        # a smaller PNG decodes whole, in 8-bit RGB


def test_image_past_the_decompression_bomb_limit_is_refused_in_one_line(tmp_path, monkeypatch):
    Image.new("L", (100, 60), 255).save(tmp_path / "huge.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 2_000)      # Pillow refuses over 4,000 pixels
    with pytest.raises(ReportgenError) as err:
        load_image_file(tmp_path / "huge.png", (28, 28, 1))
    message = err.value.message
    assert "\n" not in message and str(tmp_path / "huge.png") in message
    assert "6,000 pixels" in message and "at most 4,000 pixels" in message
    assert "MAX_IMAGE_PIXELS" in message and "Fix: Shrink the image" in message
    # between 1x and 2x the limit Pillow only warns (an error under pytest): still accepted
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4_000)
    out = load_image_file(tmp_path / "huge.png", (28, 28, 1))
    assert out.max() == pytest.approx(1.0) and out[0, 0, 0] == 0.0   # letterboxed white


def test_truncated_corrupt_and_empty_files_are_one_line_naming_the_file(tmp_path):
    _photo("RGB", 300, 200).save(tmp_path / "full.png")
    _photo("RGB", 300, 200).save(tmp_path / "full.jpg")
    for ext in ("png", "jpg"):
        data = (tmp_path / f"full.{ext}").read_bytes()
        (tmp_path / f"cut.{ext}").write_bytes(data[:len(data) // 2])
    (tmp_path / "empty.png").write_bytes(b"")
    cases = {"cut.png": "is truncated or corrupt", "cut.jpg": "is truncated or corrupt",
             "empty.png": "Received an empty file"}
    for name, text in cases.items():
        with pytest.raises(ReportgenError) as err:
            load_image_file(tmp_path / name, (28, 28, 1))
        message = err.value.message
        assert "\n" not in message and text in message and repr(str(tmp_path / name)) in message


def test_file_digest_is_sha256_of_the_bytes_and_the_transform(tmp_path):
    import hashlib

    _photo("L", 40, 30).save(tmp_path / "a.png")
    data = (tmp_path / "a.png").read_bytes()
    items = make_inputs(None, [], [tmp_path / "a.png"], parse_transforms("invert"), (28, 28, 1))
    assert [i.source_bytes_digest for i in items] == [
        hashlib.sha256(data + b"|" + label).hexdigest() for label in (b"orig", b"inv")]
    assert items[0].key == f"file-{hashlib.sha256(data).hexdigest()[:10]}-a"


# ------------------------------------------------------------------------------- PNG in bands

# every PNG colour type and bit depth (PNG specification, table 11.1)
PNG_TYPES = [(0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (2, 8), (2, 16), (3, 1), (3, 2), (3, 4),
             (3, 8), (4, 8), (4, 16), (6, 8), (6, 16)]


def _png_samples(colour: int, depth: int, h: int, w: int, seed: int):
    """Random samples for a colour type and depth, with the PLTE and tRNS chunks it takes: a
    palette shorter than the index range, alpha for some palette entries, a transparent grey
    or RGB value."""
    rng = np.random.default_rng(seed)
    top = (1 << depth) - 1
    samples = rng.integers(0, top + 1, (h, w, ref_png.CHANNELS[colour]))
    palette = trns = None
    if colour == 3:
        entries = min(top + 1, 11)
        samples %= entries
        palette = rng.integers(0, 256, 3 * entries, dtype=np.uint8).tobytes()
        trns = bytes([0, 90, 255, 30])
    elif colour == 0:
        trns = int(samples[0, 0, 0]).to_bytes(2, "big")
    elif colour == 2:
        trns = b"".join(int(v).to_bytes(2, "big") for v in samples[1, 1])
    return samples, palette, trns


def _bands_of(path, rows):
    layout = png_bands.read_layout(path)
    assert layout is not None and layout.whole_image_reason is None
    return list(png_bands.iter_bands(path, layout, rows))


def _assert_bands_equal_whole(path, rows_options):
    with Image.open(path) as whole:
        whole.load()
        expected = np.asarray(whole)
        for rows in rows_options:
            bands = _bands_of(path, rows)
            assert [b.height for b in bands[:-1]] == [rows] * (len(bands) - 1)
            for band in bands:
                assert band.mode == whole.mode and band.getpalette() == whole.getpalette()
                assert band.info.get("transparency") == whole.info.get("transparency")
            got = np.concatenate([np.asarray(b) for b in bands])
            np.testing.assert_array_equal(got, expected, err_msg=f"{path.name}, {rows} rows")


@pytest.mark.parametrize("colour, depth", PNG_TYPES, ids=lambda v: str(v))
def test_png_bands_equal_pillows_whole_decode_for_every_type_and_filter(tmp_path, colour, depth):
    """Rows under each filter type (and a mix), bands that split the image anywhere, one-row
    bands, one band; sub-byte rows with their unused padding bits set; image data over many
    IDAT chunks. Each band equals the same rows of Pillow's whole decode, mode and palette."""
    h, w = 23, 13                     # 13 pixels: sub-byte rows end in padding bits
    kinds = [ref_png.NONE, ref_png.SUB, ref_png.UP, ref_png.AVERAGE, ref_png.PAETH]
    mixed = list(np.random.default_rng(1).integers(0, 5, h))
    for seed, filters in enumerate([*kinds, mixed]):
        samples, palette, trns = _png_samples(colour, depth, h, w, seed)
        for padding in ((0, 0xFF) if depth < 8 else (0,)):
            path = tmp_path / f"f{seed}-p{padding}.png"
            path.write_bytes(ref_png.encode(samples, depth, colour, filters, palette=palette,
                                            trns=trns, padding=padding, idat_size=37))
            _assert_bands_equal_whole(path, [1, 4, 7, h, h + 5])
        if depth in (8, 16) and colour != 3:     # the decoded samples are the written ones
            band = np.concatenate([np.asarray(b) for b in _bands_of(path, 5)])
            if depth == 16 and colour == 0:
                np.testing.assert_array_equal(band, samples[..., 0])
            elif depth == 8:
                np.testing.assert_array_equal(band.reshape(samples.shape), samples)


@pytest.mark.parametrize("mode", ["1", "L", "LA", "RGB", "RGBA", "P", "I;16"])
def test_png_bands_equal_pillows_whole_decode_for_pillows_own_files(tmp_path, mode):
    """PNGs as Pillow writes them: its adaptive filter choice per row, stored or compressed."""
    img = _photo(mode if mode in ("I;16", "RGBA", "LA", "RGB", "L") else "RGB", 61, 47)
    img = img.quantize(200) if mode == "P" else img.convert("1") if mode == "1" else img
    for i, options in enumerate([{}, {"optimize": True}, {"compress_level": 0},
                                 {"compress_level": 9}]):
        img.save(tmp_path / f"{i}.png", **options)
        _assert_bands_equal_whole(tmp_path / f"{i}.png", [1, 10, 16, 47])


def _both_ways(path, shape, monkeypatch) -> tuple[np.ndarray, np.ndarray]:
    """load_image_file read whole by Pillow and in bands (of about `_BAND_BYTES`)."""
    monkeypatch.setattr(inputs_module, "_BAND_MIN_PIXELS", 10**12)
    whole = load_image_file(path, shape)
    monkeypatch.setattr(inputs_module, "_BAND_MIN_PIXELS", 0)
    return whole, load_image_file(path, shape)


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "LA", "P", "I;16", "1"])
def test_png_read_in_bands_converts_exactly_as_read_whole(tmp_path, monkeypatch, mode):
    """Bands a whole number of reduction boxes high shrink to exactly the whole image's
    reduction: the converted inputs are identical, reduced or not."""
    for w, h in [(5, 7), (100, 80), (640, 480), (1500, 1000), (333, 1201)]:
        # bands of 40 rows, rounded down to whole reduction boxes (at most 33 rows high here)
        monkeypatch.setattr(inputs_module, "_BAND_BYTES", 4 * w * 40)
        path = tmp_path / f"{w}x{h}.png"
        img = _photo(mode if mode != "1" else "L", w, h)
        (img.convert("1") if mode == "1" else img).save(path)
        for shape in [(28, 28, 1), (32, 32, 3), (9, 50, 3)]:
            whole, banded = _both_ways(path, shape, monkeypatch)
            np.testing.assert_array_equal(banded, whole, err_msg=f"{w}x{h} {shape}")


def test_a_very_wide_png_is_reduced_in_two_steps_within_a_grey_level(tmp_path, monkeypatch):
    """When one reduction box is taller than a band, bands shrink along rows only and the
    stacked bands along columns afterwards: two roundings instead of one."""
    path = tmp_path / "wide.png"
    _photo("RGB", 1500, 1000).save(path)
    # (28, 28): boxes of 13 x 13 pixels; bands of 5 rows of 1500 pixels
    monkeypatch.setattr(inputs_module, "_BAND_BYTES", 5 * 4 * 1500)
    bands = []
    real_bands = png_bands.iter_bands
    monkeypatch.setattr(png_bands, "iter_bands", lambda *a: (
        bands.append(band.height) or band for band in real_bands(*a)))
    whole, banded = _both_ways(path, (28, 28, 3), monkeypatch)
    assert set(bands) == {5}
    assert np.abs(banded - whole).max() <= 1.5 / 255 and not np.array_equal(banded, whole)


def test_truncated_and_corrupt_pngs_read_in_bands_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs_module, "_BAND_MIN_PIXELS", 0)
    samples, _, _ = _png_samples(2, 8, 40, 30, 0)
    data = ref_png.encode(samples, 8, 2, ref_png.PAETH, level=0)
    start = data.index(b"IDAT") + 4
    bad_filter = bytearray(data)
    bad_filter[start + 2 + 5 + 91 * 5] = 7        # a row's filter type 7 (stored block of rows)
    corrupt = bytearray(data)
    corrupt[start:start + 2] = b"\x00\x00"        # not a zlib header
    cases = {"cut.png": (data[:len(data) // 2], "image data ends at row 19 of 40"),
             "bad-filter.png": (bytes(bad_filter), "truncated or corrupt"),
             "corrupt.png": (bytes(corrupt), "corrupt image data")}
    for name, (content, text) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ReportgenError) as err:
            load_image_file(tmp_path / name, (28, 28, 1))
        message = err.value.message
        assert "\n" not in message and repr(str(tmp_path / name)) in message
        assert "is truncated or corrupt" in message and text in message, message


def test_an_interlaced_png_is_read_whole_within_the_budget_and_refused_past_it(tmp_path,
                                                                             monkeypatch):
    samples, _, _ = _png_samples(2, 8, 40, 30, 0)
    (tmp_path / "adam7.png").write_bytes(ref_png.encode(samples, 8, 2, ref_png.AVERAGE,
                                                        interlace=True))
    (tmp_path / "plain.png").write_bytes(ref_png.encode(samples, 8, 2, ref_png.AVERAGE))
    monkeypatch.setattr(inputs_module, "_BAND_MIN_PIXELS", 0)
    np.testing.assert_array_equal(load_image_file(tmp_path / "adam7.png", (28, 28, 3)),
                                  load_image_file(tmp_path / "plain.png", (28, 28, 3)))
    monkeypatch.setattr(inputs_module, "_DECODE_BUDGET", 40 * 30 * 4 - 1)
    assert load_image_file(tmp_path / "plain.png", (28, 28, 3)).shape == (28, 28, 3)  # bands
    with pytest.raises(ReportgenError) as err:
        load_image_file(tmp_path / "adam7.png", (28, 28, 3))
    message = err.value.message
    assert "\n" not in message and repr(str(tmp_path / "adam7.png")) in message
    assert "an interlaced (Adam7) PNG" in message and "30 x 40 pixels in mode RGB" in message
    assert "Fix: save it as a non-interlaced PNG" in message and "-interlace none" in message


def test_a_png_with_rows_too_wide_for_bands_is_read_whole_within_the_budget(tmp_path,
                                                                          monkeypatch):
    _photo("RGB", 300, 20).save(tmp_path / "strip.png")
    monkeypatch.setattr(inputs_module, "_BAND_MIN_PIXELS", 0)
    banded = load_image_file(tmp_path / "strip.png", (28, 28, 3))
    monkeypatch.setattr(inputs_module, "_BAND_MAX_WIDTH", 299)
    np.testing.assert_array_equal(load_image_file(tmp_path / "strip.png", (28, 28, 3)), banded)
    monkeypatch.setattr(inputs_module, "_DECODE_BUDGET", 300 * 20 * 4 - 1)
    with pytest.raises(ReportgenError, match=r"\(a PNG over 299 pixels wide, which cannot be "
                                             r"read in bands\)"):
        load_image_file(tmp_path / "strip.png", (28, 28, 3))


def test_other_whole_decodes_past_the_budget_are_refused(tmp_path, monkeypatch):
    """Formats without bands (BMP, GIF, an APNG) are held whole only up to the budget, counted
    with the conversion to their normalised mode (a palette image becomes RGB)."""
    _photo("RGB", 60, 50).save(tmp_path / "a.bmp")
    _photo("P", 60, 50).save(tmp_path / "p.gif")
    frames = [_photo("RGB", 60, 50), Image.new("RGB", (60, 50))]
    frames[0].save(tmp_path / "anim.png", save_all=True, append_images=frames[1:])
    monkeypatch.setattr(inputs_module, "_BAND_MIN_PIXELS", 0)
    first = load_image_file(tmp_path / "anim.png", (28, 28, 3))          # the first frame
    np.testing.assert_array_equal(first, convert_image(frames[0], (28, 28, 3)))
    monkeypatch.setattr(inputs_module, "_DECODE_BUDGET", 60 * 50 * (1 + 4) - 1)
    assert load_image_file(tmp_path / "a.bmp", (28, 28, 3)).shape == (28, 28, 3)
    with pytest.raises(ReportgenError, match="too large to decode whole"):
        load_image_file(tmp_path / "p.gif", (28, 28, 3))             # 1 + 4 bytes a pixel
    monkeypatch.setattr(inputs_module, "_DECODE_BUDGET", 60 * 50 * 4 - 1)
    for name, kind, mode in (("a.bmp", "a BMP image", "RGB"), ("p.gif", "a GIF image", "P"),
                             ("anim.png", "an animated PNG (APNG)", "RGB")):
        with pytest.raises(ReportgenError) as err:
            load_image_file(tmp_path / name, (28, 28, 3))
        message = err.value.message
        assert "\n" not in message and repr(str(tmp_path / name)) in message
        assert f"too large to decode whole ({kind}" in message, message
        assert f"60 x 50 pixels in mode {mode}" in message and "at most 0 MB" in message


# ------------------------------------------------------------------------------- selections


def test_parse_image_selection_forms():
    assert parse_image_selection("test:0-15") == list(range(16))
    assert parse_image_selection("test:3,7,9-11") == [3, 7, 9, 10, 11]
    assert parse_image_selection(" test: 5 , 2 - 3 ,5") == [5, 2, 3]
    assert parse_image_selection("4") == [4]
    assert parse_image_selection("") == [] and parse_image_selection("none") == []


@pytest.mark.parametrize("text, problem", [
    ("test:5-2", "backwards"), ("train:0-3", "train"), ("test:a", "'a'"), ("test:", "''"),
    ("test:-1", "'-1'"), ("test:1,,2", "''"), ("test:0-99999999", "too large"),
])
def test_parse_image_selection_errors(text, problem):
    with pytest.raises(ReportgenError, match=problem) as info:
        parse_image_selection(text)
    assert "test:0-15" in str(info.value)


# ---------------------------------------------------------------------------------- assembly


def test_make_inputs_keys_labels_and_digests(tmp_path):
    data = small_dataset()
    Image.new("L", (40, 20), 255).save(tmp_path / "My Cat (1).PNG")
    Image.new("L", (40, 20), 255).save(tmp_path / "copy.png")  # same bytes, other name
    files = [str(tmp_path / "My Cat (1).PNG"), str(tmp_path / "copy.png"),
             str(tmp_path / "copy.png")]
    transforms = parse_transforms("rotate:90,invert,rotate:-15.5+invert")
    inputs = make_inputs(data, [12, 0, 12], files, transforms, (28, 28, 1))
    assert all(isinstance(i, InputImage) for i in inputs)
    assert len(inputs) == 4 * 4  # two indices + two distinct files, four transforms each
    keys = [i.key for i in inputs]
    assert len(set(keys)) == len(keys) and all(SAFE_KEY.match(k) for k in keys)
    assert keys[:4] == ["test-12", "test-12-rot90", "test-12-inv", "test-12-rot-15.5-inv"]
    first = inputs[0]
    assert first.label == "test #12" and first.true_class == 2 and first.transform == Transform()
    np.testing.assert_array_equal(first.image, data.x_test[12])
    assert inputs[1].label == "test #12 (rotated 90°)"
    np.testing.assert_allclose(inputs[1].image, np.rot90(data.x_test[12]), atol=1e-5)
    cat = [i for i in inputs if i.key.startswith("file-") and i.key.endswith("my-cat-1")]
    assert len(cat) == 1 and cat[0].label == "My Cat (1).PNG" and cat[0].true_class is None
    assert re.fullmatch(r"file-[0-9a-f]{10}-my-cat-1", cat[0].key)
    assert cat[0].image.shape == (28, 28, 1)
    digests = [i.source_bytes_digest for i in inputs]
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests)
    assert len(set(digests[:4])) == 4  # transforms change the digest
    copy = [i for i in inputs if i.key.endswith("copy")][0]
    assert copy.source_bytes_digest == cat[0].source_bytes_digest  # same bytes, same transform
    assert make_inputs(data, [12], [], [], (28, 28, 1))[0].source_bytes_digest == digests[0]
    with pytest.raises(ValueError):
        first.image[0, 0, 0] = 0.5


def test_make_inputs_errors(tmp_path):
    data = small_dataset(n_test=20)
    with pytest.raises(ReportgenError, match="index 20") as info:
        make_inputs(data, [3, 20], [], [Transform()], (28, 28, 1))
    assert "20 images" in str(info.value)
    with pytest.raises(ReportgenError, match="index -1"):
        make_inputs(data, [-1], [], [Transform()], (28, 28, 1))
    with pytest.raises(ReportgenError, match=r"\(32, 32, 3\)"):
        make_inputs(data, [0], [], [Transform()], (32, 32, 3))
    (tmp_path / "x.png").write_bytes(b"garbage")
    with pytest.raises(ReportgenError, match="x.png"):
        make_inputs(data, [], [str(tmp_path / "x.png")], [Transform()], (28, 28, 1))
