"""The docs' pictures are what a build shows: every PNG the docs or the README show was written by
bench/docs_figures.py (its PNG text chunks say so, and its pixels are the ones it wrote) or is
listed below as drawn by hand with the reason; and every number the alt text or the caption
beside a picture quotes is one the picture's recorded texts hold, so a caption left from an
older build fails."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "bench/docs_figures.py"
# Pictures no script makes, each with why (a diagram drawn for the docs, say).
BY_HAND: dict[str, str] = {}

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+\.png)\)")
# A number as the docs and the site write it: 1,000 / 96.7 / 0.092 / a step such as 5-40 (a
# percent sign aside: "70–74%" quotes 70%).
_NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?:-\d+)?")


def shown_pictures() -> list[tuple[str, Path, str]]:
    """(where, the picture, its alt text and the italic caption right below it) for every PNG
    the docs pages and the README show."""
    found = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        lines = md.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            for alt, src in _IMAGE.findall(line):
                after = [x.strip() for x in lines[i + 1:i + 3] if x.strip()]
                caption = after[0] if after and re.fullmatch(r"\*[^*].*\*", after[0]) else ""
                found.append((f"{md.relative_to(ROOT)}:{i + 1}",
                              (md.parent / src).resolve(), f"{alt} {caption}"))
    return found


def numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(text))


def unrecorded_numbers(picture: Path, words: str) -> set[str]:
    """The numbers `words` quote that the picture's recorded texts do not hold."""
    shown = json.loads(Image.open(picture).text["Shown"])
    return numbers(words) - numbers(" ".join(f"{k} {v}" for k, v in shown.items()))


def made_by_the_script(picture: Path) -> list[str]:
    """Why `picture` is not as bench/docs_figures.py wrote it (none when it is)."""
    image = Image.open(picture)
    text = image.text
    if text.get("Software") != SCRIPT:
        return [f"not made by {SCRIPT}"]
    problems = []
    if text.get("Pixels SHA-256") != hashlib.sha256(image.convert("RGBA").tobytes()).hexdigest():
        problems.append(f"edited after {SCRIPT} wrote it")
    if not re.fullmatch(r"[0-9a-f]{40}(-dirty)?", text.get("reportgen commit", "")):
        problems.append("no commit recorded")
    if not (text.get("Site digest") and text.get("Source") and "Shown" in text):
        problems.append("no site, page or shown texts recorded")
    return problems


def test_every_docs_picture_is_made_by_the_script_or_drawn_by_hand_for_a_reason():
    pictures = shown_pictures()
    assert any(p.name == "overview.png" for _, p, _ in pictures)    # the scan finds images
    for where, picture, _ in pictures:
        assert picture.is_file(), where
        name = picture.relative_to(ROOT).as_posix()
        if name in BY_HAND:
            assert Image.open(picture).text.get("Software") != SCRIPT, \
                f"{name} is made by {SCRIPT}: take it off the hand-made list"
            continue
        assert made_by_the_script(picture) == [], f"{where}: {name}"


def test_the_words_beside_a_picture_quote_the_numbers_it_shows():
    for where, picture, words in shown_pictures():
        if picture.relative_to(ROOT).as_posix() in BY_HAND:
            continue
        missing = unrecorded_numbers(picture, words)
        assert not missing, (f"{where} quotes {sorted(missing)}, which {picture.name} does not "
                             f"show (its texts: {Image.open(picture).text['Shown']})")


def test_the_overview_shows_the_held_out_accuracy_its_caption_quotes():
    shown = json.loads(Image.open(ROOT / "docs/img/overview.png").text["Shown"])
    caption = next(w for _, p, w in shown_pictures()
                   if p.name == "overview.png" and "%" in w)
    accuracy = re.search(r"\d+(?:\.\d+)?%", caption).group()
    latest = next(v for k, v in shown.items() if k.startswith("Latest val."))
    assert float(accuracy[:-1]) == pytest.approx(float(latest.split("%")[0]), abs=0.05)


def test_a_retouched_picture_or_a_stale_caption_is_caught(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import docs_figures
    finally:
        sys.path.remove(str(ROOT / "bench"))
    import io

    buffer = io.BytesIO()
    Image.new("RGB", (8, 4), "white").save(buffer, format="PNG")
    out = tmp_path / "shot.png"
    docs_figures.write_png(buffer.getvalue(), out, {
        "Software": SCRIPT, "reportgen commit": "0" * 40, "Site digest": "ab12",
        "Source": "MNIST_Demo/", "Shown": json.dumps({"Latest val. accuracy": "96.70%",
                                                 "Finding 1": "Accuracy is 96.7% on 1,000 "
                                                              "held-out images at step 5-40"})})
    assert unrecorded_numbers(out, "96.7% on 1,000 held out at step 5-40") == set()
    assert unrecorded_numbers(out, "94.0% on 50 images at step 5-40") == {"94.0", "50"}
    assert made_by_the_script(out) == []
    image = Image.open(out)
    retouched = image.copy()
    retouched.putpixel((0, 0), (0, 0, 0))
    info = PngInfo()
    for key, value in image.text.items():
        info.add_itxt(key, value)
    retouched.save(tmp_path / "retouched.png", pnginfo=info)
    assert made_by_the_script(tmp_path / "retouched.png") == [f"edited after {SCRIPT} wrote it"]
    image.save(tmp_path / "by_hand.png")            # no text chunks
    assert made_by_the_script(tmp_path / "by_hand.png") == [f"not made by {SCRIPT}"]
