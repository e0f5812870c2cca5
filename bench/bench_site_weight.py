"""The weight of a default site, what its heaviest page fetches before it is usable, and a cold
build's time per input image against the model work it contains.

    python bench/bench_site_weight.py [--models-dir models] [--site DIR] [--no-build]
                                      [--no-pages] [--no-timing] [--timing-only] [--in-memory]

1. Site weight: `reportgen build --models MNIST_Demo` with every default (all saved steps, test
   images 0-15, dataset analyses at steps spread over training) into a temporary folder, with
   the project's artifact store (a second run only draws); or the site given by --site. Total
   MB and number of files, the largest kinds of file, and the MB without what loads only when
   the reader opens the draw panel (its runtime and network: the target counts the rest).
2. Transfer before usable: every page opened in headless Chromium (Debian's) over reportgen's
   own server, 1280x1000 viewport: the bytes of every response until the page has loaded and
   the network has been idle for 0.5 s (the step's live-decoder scripts included; images the
   page lazy-loads below the fold are not fetched, so not counted). Target: at most 2 MB.
3. Cold build per image and step: in-process builds of two of MNIST_Demo's steps with test
   images 0-1 and 0-31, twice: plain steps (1-10 and 5-40, no dataset analyses) and analysed
   steps (0-0 and 5-40 with their dataset analyses, so the perturbation grids are drawn too).
   Each pair starts from copies of a store that warm-up builds (other images, in both
   numbers: they pay for importing TensorFlow and for tracing both batch shapes) filled with
   what does not depend on the images, so only the chosen images' work is cold. Per image and
   step = the difference of the two builds' wall times / 30 / 2; model work = the same
   difference of the time spent computing (reportgen.engine.step.compute_step: the probe
   pass, the techniques' arithmetic and storing their arrays, the last also shown apart:
   on this machine's disk its time varies most); everything else is drawing (the filmstrip's frames
   included), placing and rendering pages. The default build's figure weights the two by its
   16 plain and 5 analysed steps. Target: at most 3x the model work. This machine's times
   vary by half from run to run, and the model work with them: each pair of builds runs five
   times, the pair with the median ratio counts, and the range of the five ratios is shown.
   The builds run in a temporary project folder; `--in-memory` puts it, the stores and the
   sites in /dev/shm: the same measurement without the disk (`--timing-only`: only this part).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODEL = "MNIST_Demo"
PAGE_LIMIT = 2_000_000
SITE_LIMIT_MB = 60
RATIO_LIMIT = 3                               # model work per image, in a quiet moment
DEFAULT_STEPS, DEFAULT_ANALYSED = 21, 5      # MNIST_Demo's saved steps; `--analyses spread`
FEW, MANY = 2, 32                             # the two builds' numbers of input images
REPEATS = 5                                   # pairs of builds; the median ratio counts


def build_default_site(models_dir: Path, site: Path) -> float:
    """`reportgen build --models MNIST_Demo` (every default) into `site`; its wall time."""
    env = {k: v for k, v in os.environ.items() if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "reportgen", "--models-dir", str(models_dir), "build",
                    "--models", MODEL, "--site-dir", str(site)], check=True, cwd=ROOT, env=env)
    return time.perf_counter() - start


# what a page fetches only when the reader opens its draw panel: the runtime and the network
ON_OPEN = ("onnxruntime-web.js", "draw_panel.js")


def site_weight(site: Path) -> dict:
    sizes = collections.Counter()
    files, on_open = 0, 0
    for path in site.rglob("*"):
        if path.is_file():
            files += 1
            sizes[path.suffix or path.name] += path.stat().st_size
            if path.name.endswith(ON_OPEN):
                on_open += path.stat().st_size
    return {"bytes": sum(sizes.values()), "files": files, "by_kind": sizes.most_common(6),
            "on_open": on_open}


def page_transfers(site: Path) -> list[tuple[int, str, int]]:
    """(bytes, page, requests) of every page, heaviest first."""
    from browser_support import chromium, serve

    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    out = []
    with serve(site) as url, chromium() as browser:
        for page_path in pages:
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            sizes = []

            def count(response, sizes=sizes):
                try:
                    sizes.append(len(response.body()))
                except Exception:        # a redirect or an aborted request has no body
                    sizes.append(0)

            page = context.new_page()
            page.on("response", count)
            page.goto(url + page_path, wait_until="load", timeout=60000)
            page.wait_for_load_state("networkidle", timeout=60000)
            out.append((sum(sizes), page_path, len(sizes)))
            context.close()
    return sorted(out, reverse=True)


def cold_per_image(models_dir: Path, in_memory: bool = False) -> dict:
    """Per-image wall time of a cold build and the model work in it (see the module doc).
    The builds run in a temporary project folder (their working folders and time measurements
    stay out of this project's `.reportgen`); `in_memory`: that folder, the stores and the sites
    in /dev/shm, so that no disk is in the figures."""
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.engine import step as engine_step

    from reportgen.cache.store import ArtifactStore

    spent = [0.0, 0.0]          # computing a step; of which storing its arrays
    original, original_put = engine_step.compute_step, ArtifactStore.put_arrays

    def adding_to(slot: int, function):
        """`function`, its wall time added to spent[slot]."""
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[slot] += time.perf_counter() - start
        return timed

    def one_build(images: str, steps: str, analyses: str, cache: Path,
                  site: Path) -> tuple[float, float, float]:
        spent[:] = [0.0, 0.0]
        start = time.perf_counter()
        summary = build(Catalog(models_dir), BuildOptions(
            models=MODEL, steps=steps, images=images, analyses=analyses, eval_images=10,
            site_dir=str(site), cache_dir=str(cache)))
        assert summary.ok, summary.failed
        return time.perf_counter() - start, spent[0], spent[1]

    engine_step.compute_step = adding_to(0, original)
    ArtifactStore.put_arrays = adding_to(1, original_put)
    out, spread = {}, {}
    try:
        # two steps each, so that the filmstrip's frames (one colour scale) are drawn too
        for kind, steps, analyses in (("plain", "1-10,5-40", "none"),
                                      ("analysed", "last", "last")):     # 0-0 and 5-40
            with tempfile.TemporaryDirectory(dir="/dev/shm" if in_memory else None) as tmp, \
                    _working_in(Path(tmp)):
                # the warm-up pays for importing TensorFlow and fills a store with the dataset
                # analyses (other images): each measured build starts from a copy of it, so
                # that only the chosen images' work is cold
                warm = Path(tmp) / "warm"
                # both batch shapes once (TensorFlow traces a new shape once per process)
                one_build("test:100-101", steps, analyses, warm, Path(tmp) / "site-warm")
                one_build(f"test:100-{99 + MANY}", steps, analyses, warm,
                          Path(tmp) / "site-warm")
                runs = collections.defaultdict(list)
                for repeat in range(REPEATS):
                    for label, images in (("few", f"test:0-{FEW - 1}"),
                                          ("many", f"test:0-{MANY - 1}")):
                        cache = Path(tmp) / f"cache-{label}-{repeat}"
                        shutil.copytree(warm, cache)
                        runs[label].append(one_build(images, steps, analyses, cache,
                                                     Path(tmp) / f"site-{label}-{repeat}"))
                        shutil.rmtree(cache)
            # per input image and built step, from each repeat's pair of builds (made one
            # after the other, so that both see the machine in the same state); the repeat
            # with the median ratio counts, and the ratios' range is shown
            per = (MANY - FEW) * 2
            pairs = sorted((((wm - wf) / per, (mm - mf) / per, (sm - sf) / per)
                            for (wf, mf, sf), (wm, mm, sm) in zip(runs["few"], runs["many"])),
                           key=lambda pair: pair[0] / max(pair[1], 1e-9))
            out[kind] = pairs[len(pairs) // 2]
            spread[kind] = [wall / max(model, 1e-9) for wall, model, _ in pairs]
    finally:
        engine_step.compute_step, ArtifactStore.put_arrays = original, original_put
    # the default build: 21 steps, the dataset analyses (and the perturbation grids) at 5
    mix = [(DEFAULT_STEPS - DEFAULT_ANALYSED) / DEFAULT_STEPS, DEFAULT_ANALYSED / DEFAULT_STEPS]
    wall, model, stored = (mix[0] * out["plain"][i] + mix[1] * out["analysed"][i]
                           for i in range(3))
    return {"plain": out["plain"], "analysed": out["analysed"], "per_image_s": wall,
            "model_s": model, "stored_s": stored, "ratio": wall / max(model, 1e-9),
            "spread": spread}


@contextlib.contextmanager
def _working_in(folder: Path):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def cold_report(timing: dict) -> list[str]:
    """`cold_per_image`'s figures as lines: each kind of step, then the default build's mix."""
    lines = []
    for kind in ("plain", "analysed"):
        wall, model, stored = timing[kind]
        ratios = timing["spread"][kind]
        lines.append(f"{kind} step: {wall * 1000:.0f} ms per image against {model * 1000:.1f} "
                     f"ms of model work (storing its arrays {stored * 1000:.1f} ms) = "
                     f"{wall / max(model, 1e-9):.1f}x (median of {len(ratios)}; "
                     f"{min(ratios):.1f}x to {max(ratios):.1f}x)")
    lines.append(f"the default build's mix ({DEFAULT_STEPS - DEFAULT_ANALYSED} plain, "
                 f"{DEFAULT_ANALYSED} analysed steps): {timing['per_image_s'] * 1000:.0f} ms "
                 f"against {timing['model_s'] * 1000:.1f} ms = **{timing['ratio']:.1f}x** "
                 f"(target <= {RATIO_LIMIT}x)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--site", type=Path, help="measure this site instead of building one")
    parser.add_argument("--no-build", action="store_true", help="with --site: do not rebuild it")
    parser.add_argument("--no-pages", action="store_true")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--timing-only", action="store_true", help="only part 3")
    parser.add_argument("--in-memory", action="store_true",
                        help="cold builds with their store and site in /dev/shm (no disk)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.timing_only:
            args.no_timing = False
            return _print_timing(args)
        site = args.site or Path(tmp) / "site"
        if not args.no_build:
            seconds = build_default_site(args.models_dir, site)
            print(f"default build of {MODEL}: {seconds:.0f} s")
        weight = site_weight(site)
        print(f"site: {weight['bytes'] / 1e6:.1f} MB in {weight['files']:,} files, of which "
              f"{weight['on_open'] / 1e6:.1f} MB load only when the draw panel is opened: "
              f"{(weight['bytes'] - weight['on_open']) / 1e6:.1f} MB without them "
              f"(target <= {SITE_LIMIT_MB} MB); largest kinds: "
              + ", ".join(f"{kind} {size / 1e6:.1f} MB" for kind, size in weight["by_kind"]))
        if not args.no_pages:
            pages = page_transfers(site)
            heaviest, page, requests = pages[0]
            print(f"largest page before usable: {page}, {heaviest / 1e6:.2f} MB in {requests} "
                  f"requests (target <= {PAGE_LIMIT / 1e6:.0f} MB); next: "
                  + ", ".join(f"{p} {b / 1e6:.2f} MB" for b, p, _ in pages[1:4]))
    if not args.no_timing:
        _print_timing(args)


def _print_timing(args) -> None:
    for line in cold_report(cold_per_image(args.models_dir.resolve(), args.in_memory)):
        print(f"cold build per image and step{' (in memory)' * args.in_memory}, {line}")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_site_weight"):
        main()
