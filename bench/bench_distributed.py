"""The same build in-process and on Dask LocalClusters: wall time, speed-up, the scheduler's
overhead per task, and what N machines would give.

    python bench/bench_distributed.py [--models MNIST_Demo] [--steps every:4] [--images test:0-3]
                                      [--analyses all] [--eval-images 20] [--workers 1 2]

Each build computes into an empty store and writes its own site; one task is one (model,
step): load the weights, run every per-input, per-checkpoint and dataset technique. The
in-process build runs first, after a warm-up build that pays for importing TensorFlow;
cluster builds start their LocalCluster (N worker processes, one thread each) and import
TensorFlow on its workers outside the timed part (long-lived workers pay it once; printed).

Reported per run: the whole build's wall time; the compute phase's (in-process: the time in
reportgen.engine.step.compute_step; cluster: from the first task sent to the last result); the
sum of the tasks' own durations (measured on the workers); overhead per task = (compute wall x
workers - sum of durations) / tasks. "N machines" replays the measured task durations of the
local:1 run, longest first, onto N workers, plus the measured overhead per task: a lower bound
that assumes the store and the models are as close to every machine as they are here.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
MARKER = ".reportgen-site.json"


def run_build(models_dir: Path, work: Path, args, scheduler: str | None) -> dict:
    from reportgen.catalog import Catalog
    from reportgen.cluster import runner
    from reportgen.commands.build import BuildOptions, build
    from reportgen.engine import step as engine_step

    spent = [0.0]
    original_compute, original_run = engine_step.compute_step, runner.ClusterCompute._run
    captured = {}

    def timed(*a, **k):
        start = time.perf_counter()
        try:
            return original_compute(*a, **k)
        finally:
            spent[0] += time.perf_counter() - start

    def run(self, planned, shared):
        original_run(self, planned, shared)
        captured["wall"] = self.wall_seconds
        captured["durations"] = [r.seconds for r in self.reports.values() if r.error is None]

    work.mkdir(parents=True, exist_ok=True)
    engine_step.compute_step, runner.ClusterCompute._run = timed, run
    try:
        start = time.perf_counter()
        summary = build(Catalog(models_dir), BuildOptions(
            models=args.models, steps=args.steps, images=args.images, analyses=args.analyses,
            eval_images=args.eval_images,
            site_dir=str(work / "site"), cache_dir=str(work / "cache")), scheduler=scheduler)
        wall = time.perf_counter() - start
    finally:
        engine_step.compute_step, runner.ClusterCompute._run = original_compute, original_run
    assert summary.ok, summary.failed
    if scheduler is None:
        return {"wall": wall, "compute": spent[0], "durations": None}
    return {"wall": wall, "compute": captured["wall"], "durations": captured["durations"]}


def same_site(a: Path, b: Path) -> bool:
    """Every file byte for byte; the site marker by the files it lists, each with its sha256."""
    from cluster_fixture import tree

    ta, tb = tree(a), tree(b)
    if sorted(ta) != sorted(tb):
        return False
    if any(ta[n] != tb[n] for n in ta if n != MARKER):
        return False
    return json.loads(ta[MARKER])["files"] == json.loads(tb[MARKER])["files"]


def _import_engine() -> None:
    import keras  # noqa: F401
    import tensorflow  # noqa: F401

    import reportgen.engine.step  # noqa: F401


def replay(durations: list[float], workers: int, overhead: float) -> float:
    """Wall time of the tasks scheduled longest first onto `workers` (each task + overhead)."""
    finish = [0.0] * workers
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(finish, finish[0] + d + overhead)
    return max(finish)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--models", default="MNIST_Demo")
    parser.add_argument("--steps", default="every:4")
    parser.add_argument("--images", default="test:0-3")
    parser.add_argument("--analyses", default="all")
    parser.add_argument("--eval-images", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    from reportgen.cluster.scheduler import SchedulerSpec, open_client

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        warm = argparse.Namespace(**{**vars(args), "steps": "last", "images": "test:0",
                                     "analyses": "none"})
        run_build(args.models_dir, tmp / "warm-up", warm, None)
        results = {"in-process": run_build(args.models_dir, tmp / "in-process", args, None)}
        startup = {}
        for n in args.workers:
            # the cluster is started here and reused by the build (open_client is patched to
            # hand it over), so its start-up is not part of the build's time
            import reportgen.cluster.runner as runner

            with open_client(SchedulerSpec("local", workers=n)) as client:
                from contextlib import contextmanager

                # long-lived workers import TensorFlow once: timed here, not in the tasks
                start = time.perf_counter()
                client.run(_import_engine)
                startup[n] = time.perf_counter() - start

                @contextmanager
                def reuse(spec, client=client):
                    yield client

                original = runner.open_client
                runner.open_client = reuse
                try:
                    results[f"local:{n}"] = run_build(args.models_dir, tmp / f"local-{n}",
                                                      args, f"local:{n}")
                finally:
                    runner.open_client = original
        base = results["in-process"]
        print(f"\nbuild: --models {args.models} --steps {args.steps} --images {args.images} "
              f"--analyses {args.analyses} --eval-images {args.eval_images}; "
              f"{os.cpu_count()} CPU cores\n")
        print("| run | build wall | compute phase | tasks | sum of task durations | "
              "overhead per task | speed-up (build) | same site |")
        print("|---|---|---|---|---|---|---|---|")
        overhead1, durations1 = None, None
        for name, r in results.items():
            if r["durations"] is None:
                tasks, total, overhead, same = "—", "—", "—", "(reference)"
            else:
                n = int(name.split(":")[1])
                total_s = sum(r["durations"])
                per = (r["compute"] * n - total_s) / max(len(r["durations"]), 1)
                if n == 1:
                    overhead1, durations1 = per, r["durations"]
                tasks, total, overhead = len(r["durations"]), f"{total_s:.1f} s", f"{per:.2f} s"
                same = "yes" if same_site(tmp / "in-process" / "site",
                                          tmp / name.replace(":", "-") / "site") else "NO"
            print(f"| {name} | {r['wall']:.1f} s | {r['compute']:.1f} s | {tasks} | {total} | "
                  f"{overhead} | {base['wall'] / r['wall']:.2f}x | {same} |")
        if durations1:
            rest = base["wall"] - base["compute"]      # planning, drawing, pages: on the client
            print("\nWorker start-up (importing TensorFlow, once per worker, before the build): "
                  + ", ".join(f"local:{n} {t:.1f} s" for n, t in startup.items()))
            print(f"\nN machines (the local:1 run's {len(durations1)} task durations, longest "
                  f"first, + {overhead1:.2f} s per task; client work {rest:.1f} s):\n")
            print("| machines | compute phase | build | vs in-process |")
            print("|---|---|---|---|")
            for n in (1, 2, 4, 8, 16):
                compute = replay(durations1, n, overhead1)
                print(f"| {n} | {compute:.1f} s | {compute + rest:.1f} s | "
                      f"{base['wall'] / (compute + rest):.2f}x |")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_distributed"):
        main()
