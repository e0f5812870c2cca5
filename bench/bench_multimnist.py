"""Top-2 accuracy of every saved step of a MultiMNIST model on its whole held-out split.

    python bench/bench_multimnist.py models/MULTIMNIST_Demo

Training validates on a fixed sample of 1,000 held-out pairs (reportgen.data.held_out): a step's
accuracy there is known to about +-1.3 points (one standard error at 80%). This scores each
saved step on every held-out pair of the model's data set (multimnist:80: 10,000 pairs of the
1,000 held-out digits, none a training digit; +-0.4 points) and prints them beside the
validation figure and the training run's minutes, into the table that docs/how-to/multimnist.md
includes (bench/docs_tables.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a trained MultiMNIST model folder")
    args = parser.parse_args()

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.data.datasets import load_dataset
    from reportgen.model_folder import ModelFolder
    from reportgen.training.checkpoints import load_weights
    from reportgen.training.evaluate import top2_accuracy

    entry = ModelFolder.at(args.folder)
    records = {r["step"]: r for r in entry.history()}
    dataset = load_dataset(entry.params.dataset)
    net = build_capsnet(entry.params)
    n = len(dataset.x_test)
    images, labels = dataset.x_test[:], dataset.y_test[:]
    print(f"{entry.name}: top-2 accuracy on all {n:,} held-out pairs of {dataset.name} "
          f"(chance 2.2%)")
    print("| step | pairs seen | minutes | validation (1,000 pairs) | all held-out pairs |")
    print("|---|---|---|---|---|")
    for step in entry.steps:
        load_weights(net, entry.weights_path(step))
        accuracy = top2_accuracy(net, images, labels)
        error = np.sqrt(accuracy * (1 - accuracy) / n)
        record = records.get(str(step), {})
        wall = record.get("wall_seconds")
        val = record.get("val_accuracy")
        print(f"| {step} | {record.get('images_seen', 0):,} | "
              f"{'' if wall is None else f'{wall / 60:.1f}'} | "
              f"{'' if val is None else f'{val:.1%}'} | {accuracy:.1%} ± {error:.1%} |")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_multimnist"):
        main()
