"""Hostile inputs against real `reportgen` subprocesses: model folders with unsafe names or a
garbage params.toml never stop the valid models from being listed or built; a huge or
malicious image, a checkpoint declaring a huge tensor, or a params.toml no machine can hold
never eats the machine; damaged weights files are listed as damaged; every problem is one
line."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from test_training import TINY_TOML, _tiny_data
from trained_tiny import copy_trained_tiny

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# Folder names a user can create that must not become model names (they reach URLs, file names
# and HTML): markup, spaces, an option-like name, non-ASCII, bytes that are not UTF-8.
UNSAFE = ["a<b", "has space", "-dash", "Modèle", os.fsdecode(b"bytes\xff")]
SHOWN = {"a<b": "a<b", "has space": "has space", "-dash": "-dash", "Modèle": "Modèle",
         os.fsdecode(b"bytes\xff"): "bytes\\udcff"}
BIG = 10_000            # a 10000 x 10000 PNG: 100 million pixels, about 130 KB on disk


def _run(args, cwd, models, timeout=240, **env):
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd,
                          env={**os.environ, "REPORTGEN_MODELS": str(models), **env},
                          capture_output=True, text=True, errors="backslashreplace",
                          timeout=timeout)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A trained tiny model beside folders that are not valid models."""
    tmp = tmp_path_factory.mktemp("hostile")
    params = TINY_TOML.format(data=_tiny_data(tmp / "toy.npz"))
    root = tmp / "models"
    for name in ["Tiny", *UNSAFE]:
        (root / name).mkdir(parents=True)
        (root / name / "params.toml").write_text(params)
    (root / "Garbage").mkdir()
    (root / "Garbage" / "params.toml").write_bytes(b"\x89PNG\x00 = = [[[ not toml")
    shutil.rmtree(root / "Tiny")
    copy_trained_tiny(tmp_path_factory, root / "Tiny")
    return root


@pytest.fixture(scope="module")
def big_png(tmp_path_factory):
    """A mostly black 10000 x 10000 greyscale PNG with a white disc, made in its own process so
    that the 100 MB it takes to draw stays out of the test process."""
    path = tmp_path_factory.mktemp("big") / "big.png"
    code = textwrap.dedent(f"""
        from PIL import Image, ImageDraw
        img = Image.new("L", ({BIG}, {BIG}))
        ImageDraw.Draw(img).ellipse((3000, 3000, 7000, 7000), fill=255)
        img.save({str(path)!r}, compress_level=9)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert path.stat().st_size < 1_000_000
    return path


def _bomb_png(path: Path, width: int, height: int) -> Path:
    """A valid PNG header announcing width x height pixels, with almost no data behind it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)   # 8-bit greyscale
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(b"\x00" * 1000)) + chunk(b"IEND", b""))
    return path


def test_models_lists_the_valid_model_and_each_invalid_folder_with_its_reason(models, tmp_path):
    result = _run(["models"], tmp_path, models)
    assert result.returncode == 0, result.stderr
    rows = {line.split("  ")[0]: line for line in result.stdout.splitlines()[2:]}
    assert set(rows) == {"Tiny", "Garbage", *SHOWN.values()}
    assert "mnist" not in rows["Tiny"] and "toy.npz" in rows["Tiny"]
    for name in SHOWN.values():
        assert "invalid: Unsafe model name" in rows[name], rows[name]
    assert "invalid:" in rows["Garbage"] and "not valid TOML" in rows["Garbage"]
    assert "6 model folders are invalid" in result.stderr

    listed = json.loads(_run(["models", "--json"], tmp_path, models).stdout)
    by_name = {r["name"]: r for r in listed}
    assert by_name["Tiny"]["valid"] is True and by_name["Tiny"]["steps"][-1] == "1-5"
    assert [r["name"] for r in listed if not r["valid"]] == sorted(["Garbage", *SHOWN.values()])
    assert all(r["error"] and "\n" not in r["error"] for r in listed if not r["valid"])


def test_build_of_every_model_builds_the_valid_one_and_fails_the_rest(models, big_png,
                                                                     tmp_path):
    site = tmp_path / "site"
    result = _run(["build", "--models", "*", "--steps", "last", "--images", "test:0-1",
                   "--analyses", "none", "--image", str(big_png),
                   "--cache-dir", str(tmp_path / "cache"), "--site-dir", str(site)],
                  tmp_path, models)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output                 # partial failure: the rest was built
    assert "Traceback" not in output
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    for name in ["Garbage", *SHOWN.values()]:
        assert sum(name in line for line in failed) == 1, (name, failed)
    assert (site / "index.html").is_file()
    tiny_pages = list((site / "models" / "Tiny").rglob("*.html"))
    assert tiny_pages, sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Tiny" in home and "a&lt;b" in home and "a<b" not in home   # listed, escaped
    # the 10000 x 10000 input became a 12 x 12 input image of the Tiny model
    inputs = list(site.rglob("file-*-big.png"))
    assert inputs, "the large --image was not shown"


# Each draws a white disc (3000..7000) on a black or transparent 10000 x 10000 image, in a process
# of its own: a PNG of every colour type Pillow holds at 4 bytes a pixel, palette with tRNS, and
# 16-bit RGBA (8 bytes a pixel in the file; Pillow cannot write it, so it is written row by row).
BIG_PNGS = {
    "RGB": """
        img = Image.new("RGB", (BIG, BIG))
        ImageDraw.Draw(img).ellipse((3000, 3000, 7000, 7000), fill=(255, 255, 255))
        img.save(PATH, compress_level=1)
    """,
    "RGBA": """
        img = Image.new("RGBA", (BIG, BIG), (255, 255, 255, 0))
        ImageDraw.Draw(img).ellipse((3000, 3000, 7000, 7000), fill=(255, 255, 255, 255))
        img.save(PATH, compress_level=1)
    """,
    "P": """
        img = Image.new("P", (BIG, BIG), 2)                  # 2: white, transparent
        img.putpalette([0, 0, 0, 255, 255, 255, 255, 255, 255])
        ImageDraw.Draw(img).ellipse((3000, 3000, 7000, 7000), fill=1)
        img.save(PATH, transparency=2, compress_level=1)
    """,
    "RGBA16": r"""
        import struct, zlib
        import numpy as np
        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data
                    + struct.pack(">I", zlib.crc32(kind + data)))
        deflate = zlib.compressobj(1)
        row = np.empty((BIG, 4), ">u2")
        with open(PATH, "wb") as f:
            header = struct.pack(">IIBBBBB", BIG, BIG, 16, 6, 0, 0, 0)    # 16-bit RGBA
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header))
            for y in range(BIG):
                row[:] = (65535, 65535, 65535, 0)                 # white, transparent
                half = int(max(0, 2000 ** 2 - (y - 5000) ** 2) ** 0.5)
                row[5000 - half:5000 + half] = 65535
                f.write(chunk(b"IDAT", deflate.compress(b"\x00" + row.tobytes())))
            f.write(chunk(b"IDAT", deflate.flush()) + chunk(b"IEND", b""))
    """,
}
PEAK = textwrap.dedent("""
    import sys
    from reportgen.data.inputs import load_image_file
    if sys.argv[1] != "-":
        out = load_image_file(sys.argv[1], (28, 28, 1))
        print(out.shape, float(out[14, 14, 0]), float(out[0, 0, 0]), end=" ")
    status = open("/proc/self/status").read()
    print([int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM")][0])
""")


def _peak(arg: str) -> list[str]:
    """Peak resident memory (VmHWM, KB) of a child that decodes the image through the project's
    function, after its shape and the centre and corner values it decoded to."""
    return subprocess.run([sys.executable, "-c", PEAK, arg], capture_output=True, text=True,
                          check=True, timeout=120).stdout.split()


@pytest.fixture(scope="module")
def baseline_kb():
    """The same child's peak when it only imports the function."""
    return int(_peak("-")[0])


@pytest.mark.parametrize("kind", ["L", "RGB", "RGBA", "P", "RGBA16"])
def test_a_10000_square_png_decodes_in_bounded_memory(big_png, baseline_kb, tmp_path, kind):
    path = big_png
    if kind != "L":
        path = tmp_path / f"{kind}.png"
        code = f"from PIL import Image, ImageDraw\nBIG, PATH = {BIG}, {str(path)!r}\n"
        subprocess.run([sys.executable, "-c", code + textwrap.dedent(BIG_PNGS[kind])],
                       check=True, timeout=120)
    decoded = _peak(str(path))
    extra_mb = (int(decoded[-1]) - baseline_kb) / 1024
    assert decoded[:3] == ["(28,", "28,", "1)"]
    assert float(decoded[3]) > 0.99 and float(decoded[4]) == 0.0    # the disc, black corners
    # Decoded whole, the image alone would take 95 MB (8-bit grey) to 381 MB (Pillow's 4 bytes
    # a pixel), and 477 MB with a palette's conversion to RGBA: read in bands, it never is.
    assert extra_mb < 64, f"decoding took {extra_mb:.0f} MB"


@pytest.mark.parametrize("kind", ["bomb", "truncated"])
def test_a_malicious_or_broken_image_is_one_line(models, big_png, tmp_path, kind):
    if kind == "bomb":
        image = _bomb_png(tmp_path / "bomb.png", 20_000, 20_000)
        expected = ["is too large to read", "400,000,000 pixels", "MAX_IMAGE_PIXELS"]
    else:
        image = tmp_path / "cut.png"
        image.write_bytes(big_png.read_bytes()[:2_000])
        expected = ["is truncated or corrupt"]
    result = _run(["build", "--models", "Tiny", "--steps", "last", "--images", "test:0",
                   "--analyses", "none", "--image", str(image),
                   "--cache-dir", str(tmp_path / "cache"), "--site-dir", str(tmp_path / "site")],
                  tmp_path, models)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert repr(str(image)) in errors[0] and "Fix:" in errors[0]
    for text in expected:
        assert text in errors[0], errors[0]


# ------------------------------------------------------------ checkpoints declaring huge tensors

# The class capsules' weights of a small 28x28 model (144 primary capsules) declared 2,800x
# longer: 2.06 GB of float32 behind a file of about a megabyte (HDF5: compressed chunks of
# zeros; safetensors: a sparse file, its data section never written).
CAPSULES = 144 * 2800


def _huge_h5(path: Path) -> Path:
    import h5py

    from test_import_capsnet_keras import keras_weights, write_capsnet_keras_h5

    write_capsnet_keras_h5(path, keras_weights())
    with h5py.File(path, "a") as f:
        del f["digitcaps/digitcaps/W:0"]
        f["digitcaps"].create_dataset("digitcaps/W:0", shape=(10, CAPSULES, 16, 8), dtype="f4",
                                      chunks=(1, 1024, 16, 8), compression="gzip")
    return path


def _huge_safetensors(path: Path) -> Path:
    from test_import_safetensors import gram_ai_state

    state = gram_ai_state()
    del state["digit_capsules.route_weights"]
    header, offset = {}, 0
    for name, array in state.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    shape = [10, CAPSULES, 8, 16]
    size = 4 * int(np.prod(shape))
    header["digit_capsules.route_weights"] = {"dtype": "F32", "shape": shape,
                                              "data_offsets": [offset, offset + size]}
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(a.tobytes() for a in
                                                               state.values()))
        f.truncate(8 + len(text) + offset + size)      # sparse: takes no disk
    return path


# `reportgen import ...` (the real command line) that prints its process's peak resident memory
# (VmHWM, KB; a fresh count since exec, unlike a child's rusage, which counts the forking
# parent's pages) as its last line.
PEAK_OF_COMMAND = """
import atexit, sys
def peak():
    status = open("/proc/self/status").read()
    print([line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")][0],
          file=sys.stderr)
atexit.register(peak)
from reportgen.cli import main
main(sys.argv[1:], prog_name="reportgen")
"""


def _import_peak(path: Path, source: str, tmp_path: Path) -> tuple[int, str, int]:
    """(exit code, stderr, peak resident memory in MB) of `reportgen import` in its process."""
    result = subprocess.run([sys.executable, "-c", PEAK_OF_COMMAND, "--models-dir",
                             str(tmp_path / "models"), "import", str(path), "--from", source],
                            capture_output=True, text=True, cwd=tmp_path, timeout=240)
    *lines, peak_kb = result.stderr.rstrip().splitlines()
    return result.returncode, "\n".join(lines), int(peak_kb) // 1024


@pytest.mark.parametrize("kind", ["h5", "safetensors"])
def test_a_small_file_declaring_a_huge_tensor_is_refused_before_reading_it(tmp_path, kind):
    if kind == "h5":
        path, source, tensor = _huge_h5(tmp_path / "big.h5"), "capsnet-keras", \
            "digitcaps/digitcaps/W:0"
        expected, received = "(10, 144, 16, 8)", "(10, 403200, 16, 8)"
    else:
        path, source, tensor = _huge_safetensors(tmp_path / "big.safetensors"), "gram-ai", \
            "digit_capsules.route_weights"
        expected, received = "(10, 144, 8, 16)", "(10, 403200, 8, 16)"
    assert path.stat().st_size > 2 * 10 ** 9 or kind == "h5"    # the safetensors' length
    assert path.stat().st_blocks * 512 < 4 * 1024 * 1024        # on disk: about a megabyte
    code, err, peak_mb = _import_peak(path, source, tmp_path)
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert f"tensor '{tensor}'" in errors[0] and f"Expected shape {expected}" in errors[0]
    assert f"Received shape {received}" in errors[0], errors[0]
    # Read whole, the declared tensor alone is 2,064 MB (4 GB at the peak, measured before the
    # shapes were checked first); Python, NumPy, h5py and reportgen take about 60 MB.
    assert peak_mb < 400, f"the refused import peaked at {peak_mb} MB"
    assert not (tmp_path / "models").exists()


# --------------------------------------------------- damaged weights, models no machine can hold

def test_damaged_weights_files_are_listed_as_damaged_and_the_build_names_them(models, tmp_path):
    root = tmp_path / "models"
    shutil.copytree(models / "Tiny", root / "Tiny")
    good = root / "Tiny" / "1-5.weights.h5"
    size = good.stat().st_size
    (root / "Tiny" / "2-1.weights.h5").write_bytes(good.read_bytes()[:size // 3])   # cut
    (root / "Tiny" / "2-2.weights.h5").write_bytes(np.random.default_rng(0).bytes(size))
    listed = json.loads(_run(["models", "--json"], tmp_path, root).stdout)
    tiny = next(r for r in listed if r["name"] == "Tiny")
    assert tiny["steps"][-1] == "1-5" and "2-1" not in tiny["steps"]
    assert [{k: d[k] for k in ("step", "reason")} for d in tiny["damaged_steps"]] == [
        {"step": "2-1", "reason": f"truncated ({size // 3:,} of {size:,} bytes)"},
        {"step": "2-2", "reason": "not an HDF5 file (no HDF5 signature at its start)"}]
    # saved after the last loadable step, with no accuracy of their own to show
    assert all(d["after_last"] and d["val_accuracy"] is None for d in tiny["damaged_steps"])
    table = _run(["models"], tmp_path, root)
    assert table.returncode == 0 and "damaged step 2-2" in table.stdout
    assert "not an HDF5 file" in table.stdout
    assert "2 saved steps are damaged" in table.stderr

    result = _run(["build", "--models", "Tiny", "--steps", "2-1", "--images", "test:0",
                   "--analyses", "none", "--cache-dir", str(tmp_path / "cache"),
                   "--site-dir", str(tmp_path / "site")], tmp_path, root)
    output = result.stdout + result.stderr
    assert result.returncode in (1, 2) and "Traceback" not in output, output
    assert "2-1.weights.h5 is unreadable" in output and "truncated (" in output, output


ABSURD = """dataset = "mnist"
input_shape = [28, 28, 1]
[decoder]
units = [3000000, 15000000]
"""


def test_a_model_no_machine_can_hold_is_refused_in_one_line_before_tensorflow(tmp_path):
    root = tmp_path / "models"
    (root / "Absurd").mkdir(parents=True)
    (root / "Absurd" / "params.toml").write_text(ABSURD)
    listed = json.loads(_run(["models", "--json"], tmp_path, root).stdout)
    assert listed[0]["valid"] is False
    assert "45,012,264,805,008 trainable parameters" in listed[0]["error"]
    started = time.monotonic()
    result = _run(["train", "Absurd", "--epochs", "1"], tmp_path, root)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stdout + result.stderr
    assert "too large for this machine" in errors[0] and "45,012,264,805,008" in errors[0]
    assert "Traceback" not in result.stderr and "OOM" not in result.stderr
    assert time.monotonic() - started < 60           # refused before TensorFlow builds it
    assert sorted(p.name for p in (root / "Absurd").iterdir()) == ["params.toml"]
