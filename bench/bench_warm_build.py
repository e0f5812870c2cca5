"""The demo's site built cold (empty artifact store, no site) vs rebuilt with nothing to compute,
each as the wall time of a real `reportgen build` process, in one run.

    python bench/bench_warm_build.py [--models-dir models] [--repeats 3]

Builds what `reportgen demo` builds (MNIST_Demo: every 4th step, test images 0-15, dataset
analyses at the last step over 200 images) into a temporary folder; trains MNIST_Demo first
(`reportgen train MNIST_Demo`, about a minute) when it has no finished run. The rebuild must
compute, draw and render nothing and leave the site byte for byte; the target is at most 2% of
the cold build. The processes run as after a normal install: Python may cache bytecode (the
cold build compiles reportgen's modules once, as a first run after installing does).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 0.02


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE", "REPORTGEN_DEBUG",
                        "PYTHONDONTWRITEBYTECODE")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def ensure_trained(models_dir: Path) -> None:
    from reportgen.catalog import Catalog
    from reportgen.commands.demo import DEMO_MODEL

    entry = Catalog(models_dir).get(DEMO_MODEL)
    if entry.steps and entry.steps[-1].epoch >= entry.params.training.epochs:
        return
    print(f"training {DEMO_MODEL} first (about a minute) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "reportgen", "--models-dir", str(models_dir), "train",
                    DEMO_MODEL, *(["--resume"] if entry.steps else [])],
                   check=True, env=_env(), cwd=ROOT)


def build_command(models_dir: Path) -> list[str]:
    """`reportgen build` with the demo's settings (reportgen.commands.demo.DEMO_BUILD)."""
    from reportgen.commands.demo import DEMO_BUILD

    args = [sys.executable, "-m", "reportgen", "--models-dir", str(models_dir), "build",
            "--site-dir", "site", "--cache-dir", "cache"]
    for option, value in DEMO_BUILD.items():
        args += [f"--{option.replace('_', '-')}", str(value)]
    return args


def timed(command: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"build failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return seconds, proc.stdout + proc.stderr


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def summary_line(output: str) -> str:
    return next((line for line in output.splitlines() if line.startswith("computed ")), "?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--repeats", type=int, default=3, help="no-op rebuilds to time")
    args = parser.parse_args()
    models_dir = args.models_dir.resolve()
    ensure_trained(models_dir)
    command = build_command(models_dir)
    with tempfile.TemporaryDirectory(prefix="bench-warm-build-") as tmp:
        work = Path(tmp)
        cold, output = timed(command, work)
        print(f"cold:  {cold:7.2f} s   {summary_line(output)}", file=sys.stderr)
        before = tree_digest(work / "site")
        warm, redone = [], 0
        while len(warm) < args.repeats:
            seconds, output = timed(command, work)
            if not summary_line(output).startswith("computed 0 ") or "up to date" not in output:
                # reportgen's own sources (techniques, templates) changed since the last build:
                # that build was right to redo work; it is not timed as a no-op
                redone += 1
                print(f"redone: {seconds:6.2f} s   {summary_line(output)} (sources changed "
                      f"during the run?)", file=sys.stderr)
                if redone > 2:
                    raise SystemExit(f"the rebuild is not a no-op:\n{output}")
                before = tree_digest(work / "site")
                continue
            warm.append(seconds)
            print(f"no-op: {seconds:7.2f} s   {summary_line(output)}", file=sys.stderr)
            if tree_digest(work / "site") != before:
                raise SystemExit("a no-op rebuild changed the site")
    median = statistics.median(warm)
    print("| build (MNIST_Demo, demo settings) | wall time |")
    print("|---|---|")
    print(f"| cold (empty store, no site) | {cold:.1f} s |")
    print(f"| no-op rebuild (median of {len(warm)}; min {min(warm):.2f} s) | {median:.2f} s "
          f"({100 * median / cold:.1f}% of cold; target <= {100 * TARGET:.0f}%) |")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_warm_build"):
        main()
