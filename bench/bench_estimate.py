"""The time estimate `reportgen build` prints before it starts against the time the build
took, in a fresh project folder (reference costs scaled to this processor) and again in the
same folder (costs this machine measured), each build cold (an empty store, a new site).

    python bench/bench_estimate.py [--model MNIST_Demo] [--steps 3] [--images 4]
                                   [--eval-images 20] [--runs 2]

The model's params.toml (models/MODEL) with `--steps` saved steps of freshly initialised
weights (the cost does not depend on their values). Each build is a real `reportgen build`
process; the plan's "Whole build: ... about X" line and the summary's time are read from its
output, with the slowdown it said for the other work running ("other work running: Nx") and
the load average before and after. Run it on an idle machine and on a busy one: the estimate
should hold within 30% on both (the load counted once).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _seconds(text: str) -> float:
    """'about 3 min' / '45 s' / '1 min 05 s' / '2 h 01 min' -> seconds."""
    total = 0.0
    for value, unit in re.findall(r"(\d+)\s*(h|min|s)\b", text):
        total += int(value) * {"h": 3600, "min": 60, "s": 1}[unit]
    return total


def make_project(folder: Path, models: list[str], steps: int) -> None:
    """folder/models/MODEL for each of `models`: its params.toml (from this repository) and
    `steps` saved steps of freshly initialised weights (0-0, 1-10, ...)."""
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import load_model_params
    from reportgen.training.checkpoints import save_weights

    for model in models:
        target = folder / "models" / model
        target.mkdir(parents=True)
        shutil.copy(ROOT / "models" / model / "params.toml", target)
        params = load_model_params(target / "params.toml")
        for i in range(steps):
            keras.utils.set_random_seed(i)
            save_weights(build_capsnet(params), target / f"{i}-{10 * i}.weights.h5")


def build(project: Path, args, run: int) -> dict:
    command = [sys.executable, "-m", "reportgen", "build", "--models", args.model, "--steps",
               "all", "--images", f"test:0-{args.images - 1}", "--eval-images",
               str(args.eval_images), "--analyses", "all", "--cache-dir",
               str(project / f"cache-{run}"), "--site-dir", str(project / f"site-{run}")]
    before = _load()
    started = time.perf_counter()
    result = subprocess.run(command, cwd=project, capture_output=True, text=True)
    wall = time.perf_counter() - started
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(output)
    plan = re.search(r"Whole build: .*?about ([^(]+?) if nothing is cached \((.*)\)", output)
    busy = re.search(r"other work running: ([\d.]+)x", output)
    taken = re.search(r"time: (.+?) \(estimated", output)
    return {"estimate": _seconds(plan.group(1)), "said": plan.group(1).strip(),
            "basis": "measured here" if "measured on this machine" in plan.group(2)
            else "reference costs", "busy": float(busy.group(1)) if busy else 1.0,
            "taken": _seconds(taken.group(1)), "wall": wall, "load": f"{before} → {_load()}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="MNIST_Demo")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--eval-images", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    print(f"{args.model}: {args.steps} steps x {args.images} images, dataset analyses at every "
          f"step over {args.eval_images} images; {os.cpu_count()} CPUs\n")
    print("| build | estimate from | other work said | estimated | took | error | load "
          "average (1, 5, 15 min) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        make_project(project, [args.model], args.steps)
        for run in range(args.runs):
            r = build(project, args, run)
            error = (r["estimate"] - r["wall"]) / r["wall"]
            print(f"| {run + 1} | {r['basis']} | {r['busy']:.1f}x | {r['said']} "
                  f"({r['estimate']:.0f} s) | {r['wall']:.0f} s | {100 * error:+.0f}% | "
                  f"{r['load']} |", flush=True)


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_estimate"):
        main()
