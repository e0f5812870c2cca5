"""Peak memory of a build of several models against each model's build alone: a build holds
one model at a time, so its peak should be the largest single-model build's (target: within
0.5 GB of it).

    python bench/bench_memory.py [--models MNIST_Demo MNIST MNIST_ConvNet_R] [--images 4]
                                 [--eval-images 20]

Each model's params.toml (models/MODEL) in a temporary project with one saved step of freshly
initialised weights (memory does not depend on their values); every build is a real, cold
`reportgen build --steps last --analyses last` process (an empty store, a new site). Peak
memory is the build process's maximum resident set as the kernel counts it (`wait4`'s
ru_maxrss), and the largest sum of the resident sets of it and its drawing worker, sampled
every 0.1 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _tree_rss(pid: int) -> int:
    """Resident bytes of process `pid` and its children (from /proc)."""
    total, pending = 0, [str(pid)]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as f:
                    pending += f.read().split()
        except OSError:
            continue
    return total


def build(project: Path, models: list[str], args, run: str) -> dict:
    command = [sys.executable, "-m", "reportgen", "build", "--models", ",".join(models),
               "--steps", "last", "--analyses", "last", "--images",
               f"test:0-{args.images - 1}", "--eval-images", str(args.eval_images),
               "--cache-dir", str(project / f"cache-{run}"), "--site-dir",
               str(project / f"site-{run}")]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    peak = [0]

    def sample():
        while process.poll() is None:
            peak[0] = max(peak[0], _tree_rss(process.pid))
            time.sleep(0.1)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(output)
    return {"maxrss": usage.ru_maxrss * 1024, "tree": peak[0],
            "seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["MNIST_Demo", "MNIST",
                                                         "MNIST_ConvNet_R"])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--eval-images", type=int, default=20)
    args = parser.parse_args()
    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    from bench_estimate import _load, make_project

    print(f"Cold builds, --steps last --analyses last, {args.images} images, "
          f"{args.eval_images} evaluation images; {os.cpu_count()} CPUs\n")
    print("| build | peak (build process) | peak (with its drawing worker) | time | load "
          "average |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        make_project(project, args.models, steps=1)
        runs = [[m] for m in args.models] + [list(args.models)]
        peaks = {}
        for i, models in enumerate(runs):
            before = _load()
            r = build(project, models, args, str(i))
            name = " + ".join(models)
            peaks[name] = r
            print(f"| {name} | {r['maxrss'] / 1e9:.2f} GB | {r['tree'] / 1e9:.2f} GB | "
                  f"{r['seconds']:.0f} s | {before} → {_load()} |", flush=True)
    alone = max(peaks[m]["maxrss"] for m in args.models)
    together = peaks[" + ".join(args.models)]["maxrss"]
    print(f"\n{len(args.models)}-model build {together / 1e9:.2f} GB against the largest "
          f"single-model build's {alone / 1e9:.2f} GB: {(together - alone) / 1e9:+.2f} GB "
          f"(target <= +0.5 GB)")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_memory"):
        main()
