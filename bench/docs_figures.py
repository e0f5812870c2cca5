"""The screenshots of reportgen's docs are taken from a build, not by hand: this script builds the
README's demo site (`python -m reportgen demo`: trains MNIST_Demo, then builds) and photographs
its pages in headless Chromium (Debian's, driven by Playwright) at a fixed viewport, and copies
the figure files the docs show from it as the build drew them, writing docs/img/<name>.png
with PNG text chunks that record what made it: this script, the commit it ran from, the site's
digest, the page, the viewport, the texts the picture shows that the docs quote (the held-out
accuracy, the findings' step, a figure's caption and scores) and a digest of the pixels, so a
retouched image or a caption quoting other numbers fails tests/test_docs_figures.py.

    python bench/docs_figures.py [--work-dir DIR] [--models-dir DIR]

--work-dir keeps the models, the artifact store and the site between runs: a second run trains
nothing and rebuilds from the store (seconds). Without it all three live in a temporary folder
removed at the end (a demo from scratch: about 3 minutes on 2 idle cores, more under load).
--models-dir reuses a models folder whose MNIST_Demo has a finished run (training is skipped).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
SCRIPT = "bench/docs_figures.py"
DEMO_MODEL = "MNIST_Demo"
VIEWPORT = {"width": 1280, "height": 900}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

# PNG text keys (tEXt chunks; "Software", "Source" and "Description" are the PNG
# specification's registered keywords, section 11.3.4.2). tests/test_docs_figures.py reads them.
KEY_SOFTWARE, KEY_SOURCE, KEY_DESCRIPTION = "Software", "Source", "Description"
KEY_COMMIT, KEY_SITE, KEY_VIEWPORT = "reportgen commit", "Site digest", "Viewport"
KEY_SHOWN, KEY_PIXELS, KEY_MADE = "Shown", "Pixels SHA-256", "Made"


@dataclass(frozen=True)
class Screenshot:
    name: str           # docs/img/<name>.png
    page: str           # the page's path inside the site
    description: str
    # JavaScript returning {label: text} of what the picture shows that the docs may quote
    shown_js: str


_OVERVIEW_SHOWN = """() => {
  const shown = {};
  for (const div of document.querySelectorAll('dl.rg-facts:not(.rg-training-run) > div')) {
    const dt = div.querySelector('dt'), dd = div.querySelector('dd');
    if (dt && dd) shown[dt.textContent.trim()] = dd.innerText.trim();
  }
  const step = document.querySelector('.rg-findings > p b');
  if (step) shown['Findings step'] = step.innerText.trim();
  document.querySelectorAll('.rg-findings-list > li').forEach((li, i) => {
    const r = li.getBoundingClientRect();
    if (r.top < window.innerHeight) shown[`Finding ${i + 1}`] = li.innerText.trim();
  });
  return shown;
}"""

SCREENSHOTS = (
    Screenshot("overview", f"models/{DEMO_MODEL}/index.html", f"{DEMO_MODEL}'s overview in the "
               "site `reportgen demo` builds, the top of the page", _OVERVIEW_SHOWN),
)


@dataclass(frozen=True)
class Figure:
    """One of the site's own figure files, copied as the build drew it."""
    name: str           # docs/img/<name>.png
    page: str           # the page that shows it, at its default step and input
    file: str           # the figure inside the site
    numbers: str = ""   # a JSON of scores beside the figure (inside the site) to record


_STEP_FILES = f"artifacts/{DEMO_MODEL}/5-40"
FIGURES = (
    Figure("primary_heatmaps", f"models/{DEMO_MODEL}/primary-caps.html",
           f"{_STEP_FILES}/test-0/primary_heatmaps-per_layer.png"),
    Figure("rpv", f"models/{DEMO_MODEL}/class-caps.html", f"{_STEP_FILES}/test-0/rpv-modified.png"),
    Figure("decoder_perturbation", f"models/{DEMO_MODEL}/decoder.html",
           f"{_STEP_FILES}/test-0/decoder_perturbation.png"),
    Figure("adversarial_robustness", f"models/{DEMO_MODEL}/analyses.html",
           f"{_STEP_FILES}/dataset/adversarial_robustness-accuracy.png",
           numbers=f"{_STEP_FILES}/dataset/adversarial_robustness.json"),
)

# The caption of the figure showing `file`, and the predictions' caption of the same page
# (the class the image figures are drawn for).
_FIGURE_SHOWN = """(file) => {
  const shown = {};
  const img = [...document.querySelectorAll('img')].find(i => i.getAttribute('src')
                                                              .endsWith(file));
  if (!img) return null;
  const figure = img.closest('figure');
  // a figure of several images (one per panel) has no caption of this one alone
  const caption = figure && figure.querySelectorAll('img').length === 1
                  && figure.querySelector('figcaption');
  shown['Caption'] = caption ? caption.textContent.trim() : '';
  shown['Alt'] = img.getAttribute('alt') || '';
  const step = document.querySelector('[data-rg="step"]');
  if (step) shown['Step'] = step.textContent.trim();
  const predictions = [...document.querySelectorAll('img')].find(
    i => /predictions\.png$/.test(i.getAttribute('src')));
  const said = predictions && predictions.closest('figure')
               && predictions.closest('figure').querySelector('figcaption');
  if (said && file.includes('/test-')) shown['Predictions'] = said.textContent.trim();
  return shown;
}"""


def scores(site: Path, figure: Figure) -> dict[str, str]:
    """An analysis's stored scores as the docs quote them: accuracies in whole percent, the
    number of images, keyed by their names (accuracy_<target>_<attack>_<eps>)."""
    if not figure.numbers:
        return {}
    data = json.loads((site / figure.numbers).read_text("utf-8"))
    shown = {}
    for key, value in data.items():
        if key == "images":
            shown["images"] = str(value)
        elif key.startswith(("accuracy_", "clean_accuracy")) and isinstance(value, float):
            label = key.replace("_", " ")
            if key.startswith("accuracy_"):
                label = label.rsplit(" ", 1)[0] + f" at eps = {key.rsplit('_', 1)[1]}"
            shown[label] = f"{round(100 * value)}%"
    return shown


def build_demo(work: Path, models_dir: Path | None) -> tuple[Path, list[str]]:
    """Run the README's demo with its models, store and site in `work` (or `models_dir`'s
    models); returns the site folder and the command that built it."""
    models = models_dir or work / "models"
    if models_dir is None and not (models / DEMO_MODEL).is_dir():
        models.mkdir(parents=True, exist_ok=True)
        shutil.copytree(ROOT / "models" / DEMO_MODEL, models / DEMO_MODEL)
    site = work / "site"
    command = [sys.executable, "-m", "reportgen", "--models-dir", str(models.resolve()), "demo",
               "--site-dir", str(site)]
    # this checkout's reportgen builds the site, whichever one the environment installed
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "REPORTGEN_CACHE": str(work / "cache"), "PYTHONPATH": path}
    subprocess.run(command, cwd=work, env=env, check=True)
    return site, ["python", "-m", "reportgen", "demo"]


def git_identity() -> str:
    """The commit this script ran from, `-dirty` when reportgen's code or templates differ."""
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "reportgen", "templates", "models", "bench")
    return commit + ("-dirty" if dirty else "")


def pixels_sha256(image) -> str:
    """The digest of the picture's RGBA pixels (not of the file: its text chunks vary)."""
    return hashlib.sha256(image.convert("RGBA").tobytes()).hexdigest()


def write_png(png: bytes, out: Path, text: dict[str, str]) -> None:
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    image = Image.open(io.BytesIO(png))
    if image.mode != "P":
        # 256 colours: a page's flat colours and anti-aliased text look the same at 40% of the
        # size of full RGB (77 KB vs 187 KB for the overview)
        image = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    info = PngInfo()
    for key, value in {**text, KEY_PIXELS: pixels_sha256(image)}.items():
        info.add_itxt(key, value)           # iTXt: UTF-8 (the findings hold ε, ±, …)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, pnginfo=info, optimize=True)


@contextlib.contextmanager
def served(site: Path):
    sys.path.insert(0, str(ROOT))
    from reportgen.commands.serve_cli import make_server

    server = make_server(site, "127.0.0.1", 0, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def photograph(site: Path, out_dir: Path, command: list[str]) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("Debian's chromium is not installed (apt-get install chromium)")
    marker = json.loads((site / ".reportgen-site.json").read_text("utf-8"))
    common = {KEY_SOFTWARE: SCRIPT, KEY_COMMIT: git_identity(),
              KEY_SITE: str(marker.get("digest", "")),
              KEY_VIEWPORT: f"{VIEWPORT['width']}x{VIEWPORT['height']}",
              KEY_MADE: datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "Site command": " ".join(command)}
    written = []
    with served(site) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
            for shot in SCREENSHOTS:
                page.goto(url + shot.page, wait_until="networkidle")
                page.evaluate("document.fonts.ready")
                shown = page.evaluate(shot.shown_js)
                out = out_dir / f"{shot.name}.png"
                write_png(page.screenshot(), out, {
                    **common, KEY_SOURCE: shot.page, KEY_DESCRIPTION: shot.description,
                    KEY_SHOWN: json.dumps(shown, ensure_ascii=False, indent=1)})
                written.append(out)
                print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: "
                      f"{shot.page}")
                for label, text in shown.items():
                    print(f"  {label}: {text}")
            for figure in FIGURES:
                page.goto(url + figure.page, wait_until="networkidle")
                shown = page.evaluate(_FIGURE_SHOWN, figure.file)
                if shown is None:
                    raise SystemExit(f"{figure.page} shows no {figure.file}")
                shown.update(scores(site, figure))
                out = out_dir / f"{figure.name}.png"
                write_png((site / figure.file).read_bytes(), out, {
                    **common, KEY_SOURCE: figure.file,
                    KEY_DESCRIPTION: f"the figure {figure.page} shows, as the build drew it",
                    KEY_SHOWN: json.dumps(shown, ensure_ascii=False, indent=1)})
                written.append(out)
                print(f"{out.name}: {figure.file}")
                for label, text in shown.items():
                    print(f"  {label}: {text}")
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, help="keep models, store and site here between "
                        "runs (default: a temporary folder)")
    parser.add_argument("--models-dir", type=Path, help="a models folder whose MNIST_Demo is "
                        "trained (default: a copy of models/MNIST_Demo, trained by the demo)")
    parser.add_argument("--out", type=Path, default=IMG, help="where the PNGs go [docs/img]")
    args = parser.parse_args(argv)
    start = time.monotonic()
    with contextlib.ExitStack() as stack:
        if args.work_dir:
            work = args.work_dir.resolve()
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="docs-figures-")))
        site, command = build_demo(work, args.models_dir and args.models_dir.resolve())
        built = time.monotonic()
        photograph(site, args.out, command)
    print(f"demo built in {built - start:.0f} s, screenshots in {time.monotonic() - built:.0f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
