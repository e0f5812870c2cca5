"""Every family trained to a target accuracy: training images/s, epochs and wall time to the
target, and the held-out accuracy reached (README, "Training recipes").

    python bench/bench_families.py [--models MNIST_Demo MNIST_ConvNet_R ...] [--target 0.95]
                                   [--epochs 15] [--limit N]

Each model trains from its own params.toml (its recipe: learning rate, normalisation,
initialisation) in a temporary copy of its folder, exactly as `reportgen train NAME
--until-accuracy TARGET --epochs E` does, on the bundled digits unless the model names another
data set. Held-out accuracy is the trainer's validation accuracy: the 1,000 bundled test
digits, never trained on. Prints one Markdown row per model and the machine's load average
(the runs share the CPU with whatever else runs; compare rows of one run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FAMILIES = ("MNIST_Demo", "MNIST_ConvNet_R", "MNIST_GraCaps", "MNIST_ConvNet_CR_SF", "MNIST_NoR",
            "MNIST_AffCaps", "MNIST_ConvNet_CR", "MNIST_EM", "MNIST_SelfRouting")


def train_to_target(name: str, target: float, epochs: int, limit: int | None) -> dict:
    from reportgen.catalog import Catalog
    from reportgen.data.datasets import load_dataset
    from reportgen.training.trainer import TrainOptions, train

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(Path("models") / name, Path(tmp) / name,
                        ignore=shutil.ignore_patterns("*.h5", "*.json", "*.npz", "archive"))
        entry = Catalog(tmp).get(name)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        history = train(entry, TrainOptions(epochs=epochs, until_accuracy=target, limit=limit))
        wall = time.perf_counter() - start
        n_train = limit or len(load_dataset(entry.params.dataset).x_train)
    last = history[-1]
    best = max(r["val_accuracy"] for r in history if r["epoch"] > 0)
    return {"step": last["step"], "epochs": last["images_seen"] / n_train, "wall": wall,
            "rate": last["images_seen"] / max(last["seconds"], 1e-9),
            "accuracy": last["val_accuracy"], "best": best, "load": load}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(FAMILIES))
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    print(f"| model | stopped at | epochs | wall time | training img/s | held out | best | "
          f"load at start |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models:
        row = train_to_target(name, args.target, args.epochs, args.limit)
        verdict = "" if row["accuracy"] >= args.target else f" (below {args.target:.0%})"
        print(f"| {name} | {row['step']} | {row['epochs']:.1f} | {row['wall'] / 60:.1f} min | "
              f"{row['rate']:.0f} | {row['accuracy']:.1%}{verdict} | {row['best']:.1%} | "
              f"{row['load']:.1f} |", flush=True)


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_families"):
        main()
