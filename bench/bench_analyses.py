"""Time of each dataset-level analysis, per 100 evaluation images, and the whole suite.

    python bench/bench_analyses.py [--models MNIST_Demo MNIST] [--images 100] [--suite-images 500]

Models without trained weights run with their initial weights (the cost does not depend on the
values). Each analysis gets its own EvalBatch, so its time includes the clean pass it needs;
the suite shares one EvalBatch, as `reportgen build` does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def load(name: str):
    from reportgen.catalog import Catalog

    catalog = Catalog(Path(__file__).resolve().parents[1] / "models")
    return catalog.load(name, "last" if catalog.get(name).steps else "init")


def evaluation(net, n: int):
    from reportgen.data.datasets import load_dataset
    from reportgen.probe.evaluation import EvalBatch, stratified_sample

    data = load_dataset(net.params.dataset)
    idx = stratified_sample(data.y_test, n)
    return EvalBatch(net, data.x_test[idx], data.y_test[idx], data.class_names)


def main() -> None:
    from reportgen.techniques import all_techniques

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["MNIST_Demo", "MNIST"])
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--suite-images", type=int, default=500,
                        help="evaluation set for the whole-suite timing (0 = skip)")
    args = parser.parse_args()
    analyses = [t for t in all_techniques() if t.scope == "dataset"]
    print("| model | " + " | ".join(t.name for t in analyses) + " | suite (s) |")
    print("|---|" + "---|" * (len(analyses) + 1))
    for name in args.models:
        net = load(name)
        cells = []
        for tech in analyses:
            if not tech.variants(net):           # not applicable (a 40x40 benchmark, MultiMNIST)
                cells.append("—")
                continue
            params = tech.variants(net)[0]
            batch = evaluation(net, args.images)
            start = time.perf_counter()
            tech.compute(batch, params)
            cells.append(f"{time.perf_counter() - start:.1f} s")
        suite = "-"
        if args.suite_images and name == args.models[0]:
            batch = evaluation(net, args.suite_images)
            start = time.perf_counter()
            for tech in analyses:
                if tech.variants(net):
                    tech.compute(batch, tech.variants(net)[0])
            suite = f"{time.perf_counter() - start:.0f} ({args.suite_images} images)"
        print(f"| {name} (per {args.images} images) | " + " | ".join(cells) + f" | {suite} |",
              flush=True)


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_analyses"):
        main()
