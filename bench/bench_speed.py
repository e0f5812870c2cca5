"""Speed where it pays, every ratio in one run: XLA per family, the engine's forward against a
bare compiled forward, the CNN baseline against this machine's matmul peak, EM routing before
and after its rewrite, the cold build per input image against its model work, and
`reportgen demo` from an empty project folder.

    python bench/bench_speed.py [--models MNIST_Demo MNIST ...] [--em-before REV]
                                [--skip-xla] [--skip-em] [--skip-cold] [--skip-demo]

Each part is the function of the focused script (bench_xla.py, bench_em.py,
bench_site_weight.py), so the figures mean what those scripts' docstrings say; here they come
from one run, with the machine's load average before and after each part (this 2-core machine
is often shared: compare ratios, which are measured alternating within a part).

- EM before/after: bench_em.py in subprocesses, alternating between this tree and REV (the
  commit before EM routing laid its votes out per parent; its reportgen, bench_em.py and
  MNIST_EM exported with `git archive`); the faster of two runs of each counts. Needs a git
  checkout.
- Demo: `python -m reportgen demo` in an empty temporary project (MNIST_Demo's params.toml
  copied in): training and build, wall time; the package is already installed, so this is
  the README's first command without its `pip install`. The cold-build part then uses the
  MNIST_Demo it trained (with --skip-demo: the one in models/).
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

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

EM_BEFORE = "0243748"        # the last commit before EM routing on votes laid out by parent
DEMO_LIMIT_S = 180


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def part(title: str):
    print(f"\n## {title} (load average {_load()} on {os.cpu_count()} CPUs)\n", flush=True)
    return time.perf_counter()


def done(started: float) -> None:
    print(f"\n({time.perf_counter() - started:.0f} s; load average {_load()})", flush=True)


def xla(models: list[str], rounds: int) -> None:
    import bench_xla

    print("| model | family | fwd eager img/s | fwd graph | fwd XLA | XLA / best | "
          "fwd+bwd graph | fwd+bwd XLA | XLA / graph |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in models:
        r = bench_xla.family_forward(model, 64, 8, rounds)
        rate = r["rate"]
        print(f"| {model} | {r['family']} | {rate['eager']:.0f} | {rate['graph']:.0f} | "
              f"{rate['xla']:.0f} | {r['forward_ratio']:.2f}x | {rate['graph_grad']:.0f} | "
              f"{rate['xla_grad']:.0f} | {r['backward_ratio']:.2f}x |", flush=True)
    e = bench_xla.engine_forward("MNIST", 256, rounds)
    print(f"\nEngine forward (MNIST, 256 images, as `analyze(techniques=['predictions'])` runs "
          f"it): {e['engine']:.2f} s; bare XLA forward {e['bare']:.2f} s: "
          f"**{e['engine'] / e['bare']:.2f}x** (target <= 1.15x)")
    f = bench_xla.baseline_flop_rate("MNIST_ConvNet_R", 64, rounds)
    print(f"MNIST_ConvNet_R XLA forward {f['model']:.1f} GFLOP/s against a float32 2048x2048 "
          f"matmul's {f['peak']:.1f} GFLOP/s: **{100 * f['share']:.0f}% of peak** "
          "(target >= 70%)", flush=True)


def _em_run(tree: Path) -> tuple[float, float]:
    """(training, inference) img/s of `tree`'s bench_em.py (on its own reportgen)."""
    # its own docs table is not written: the before/after table here is the measurement
    env = {**os.environ, "PYTHONPATH": str(tree), "REPORTGEN_BENCH_DOCS": "0"}
    out = subprocess.run([sys.executable, str(tree / "bench" / "bench_em.py"), "--repeats", "2"],
                         env=env, cwd=tree, capture_output=True, text=True, check=True).stdout
    found = re.search(r"train ([\d.]+) img/s .*inference ([\d.]+) img/s", out)
    if found is None:
        raise SystemExit(f"bench_em.py printed no rates:\n{out}")
    return float(found[1]), float(found[2])


def em(before: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        old.mkdir()
        try:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", before, "reportgen",
                                      "bench/bench_em.py", "models/MNIST_EM"],
                                     capture_output=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            print(f"skipped: {before} cannot be exported with git archive (not a git checkout?)")
            return
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        runs = {"before": [], "after": []}
        for _ in range(2):                       # alternating, so both see the same machine
            runs["before"].append(_em_run(old))
            runs["after"].append(_em_run(ROOT))
    best = {k: (max(r[0] for r in v), max(r[1] for r in v)) for k, v in runs.items()}
    print("| MNIST_EM | before | after | speed-up |\n|---|---|---|---|")
    for i, what in enumerate(("training img/s", "inference img/s")):
        print(f"| {what} | {best['before'][i]:.1f} | {best['after'][i]:.1f} | "
              f"**{best['after'][i] / best['before'][i]:.2f}x** |")
    print("(target 2x)", flush=True)


def cold(models_dir: Path) -> None:
    import bench_site_weight as weight

    if not any((models_dir / "MNIST_Demo").glob("*.weights.h5")):
        print(f"skipped: MNIST_Demo has no weights in {models_dir} (run `reportgen demo`)")
        return
    for line in weight.cold_report(weight.cold_per_image(models_dir)):
        print(f"- {line}", flush=True)


def demo(project: Path) -> None:
    """`reportgen demo` in the empty folder `project` (MNIST_Demo trained into its models/)."""
    (project / "models" / "MNIST_Demo").mkdir(parents=True)
    shutil.copy(ROOT / "models" / "MNIST_Demo" / "params.toml",
                project / "models" / "MNIST_Demo" / "params.toml")
    env = {k: v for k, v in os.environ.items() if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE")}
    env["PYTHONPATH"] = str(ROOT)
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "reportgen", "demo"], cwd=project, env=env,
                         capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"reportgen demo failed:\n{out.stdout}\n{out.stderr}")
    trained = re.search(r"Trained MNIST_Demo[^\n]*", out.stdout + out.stderr)
    print(f"`reportgen demo` in an empty project: **{seconds:.0f} s** (target <= "
          f"{DEMO_LIMIT_S} s)" + (f"; {trained[0]}" if trained else ""), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["MNIST_Demo", "MNIST", "MNIST_GraCaps",
                                                          "MNIST_ConvNet_R", "MNIST_EM"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--em-before", default=EM_BEFORE)
    for name in ("xla", "em", "cold", "demo"):
        parser.add_argument(f"--skip-{name}", action="store_true")
    args = parser.parse_args()
    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    started = time.perf_counter()
    if not args.skip_xla:
        t = part("XLA per family (bench_xla.py: forward batch 64, forward + backward batch 8)")
        xla(args.models, args.rounds)
        done(t)
    if not args.skip_em:
        t = part(f"EM routing, {args.em_before} against this tree (bench_em.py)")
        em(args.em_before)
        done(t)
    with tempfile.TemporaryDirectory() as project:
        models_dir = ROOT / "models"
        if not args.skip_demo:
            t = part("reportgen demo")
            demo(Path(project))
            models_dir = Path(project) / "models"          # its trained MNIST_Demo
            done(t)
        if not args.skip_cold:
            t = part("Cold build per input image and step (bench_site_weight.py)")
            cold(models_dir)
            done(t)
    print(f"\nwhole run {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_speed"):
        main()
