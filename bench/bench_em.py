"""Speed of matrix capsules with EM routing: one training step and one inference pass, as
reportgen runs them (the trainer's XLA-compiled step, the evaluation's compiled encoder).

    python bench/bench_em.py [--model MNIST_EM] [--steps 20] [--batches 4] [--repeats 3]

Prints images per second for training (batch = the model's batch size, Adam, spread loss) and
inference (batches of 250, as reportgen evaluates), the time of the first call of each (tracing
and XLA compilation), and the machine's load average: the CPU is often shared, so compare two
implementations in one run, alternating (e.g. two checkouts via PYTHONPATH), never across runs.
Inputs are random images (the cost does not depend on the values).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _net(model: str):
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import load_model_params

    keras.utils.set_random_seed(0)
    return build_capsnet(load_model_params(Path("models") / model / "params.toml"))


def _best_rate(run, images_per_call: int, calls: int, repeats: int) -> float:
    """Images per second of the fastest of `repeats` rounds of `calls` calls (the least
    disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, time.perf_counter() - start)
    return calls * images_per_call / best


def bench_training(net, steps: int, repeats: int) -> tuple[float, float]:
    """(images per second, seconds of the first step)."""
    import keras
    import numpy as np

    from reportgen.training.trainer import make_train_step

    batch = net.params.training.batch_size
    rng = np.random.default_rng(0)
    images = rng.random((batch, *net.params.input_shape), dtype=np.float32)
    one_hot = np.eye(net.params.num_classes, dtype=np.float32)[
        rng.integers(0, net.params.num_classes, batch)]
    optimizer = keras.optimizers.Adam(net.params.training.learning_rate)
    optimizer.build(net.model.trainable_variables)
    step = make_train_step(net, optimizer)
    start = time.perf_counter()
    float(step(images, one_hot)[0])
    compile_seconds = time.perf_counter() - start
    return _best_rate(lambda: float(step(images, one_hot)[0]), batch, steps, repeats), \
        compile_seconds


def bench_inference(net, batches: int, repeats: int, batch: int = 250) -> tuple[float, float]:
    """(images per second, seconds of the first call) of the evaluation's compiled encoder."""
    import numpy as np

    from reportgen.capsnet.compiled import encoder_scores

    images = np.random.default_rng(1).random((batch, *net.params.input_shape), dtype=np.float32)
    start = time.perf_counter()
    encoder_scores(net, images)
    compile_seconds = time.perf_counter() - start
    return _best_rate(lambda: encoder_scores(net, images), batch, batches, repeats), \
        compile_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="MNIST_EM")
    parser.add_argument("--steps", type=int, default=20, help="training steps per round")
    parser.add_argument("--batches", type=int, default=4, help="inference batches per round")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the fastest counts")
    args = parser.parse_args()
    net = _net(args.model)
    train_rate, train_compile = bench_training(net, args.steps, args.repeats)
    infer_rate, infer_compile = bench_inference(net, args.batches, args.repeats)
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"{args.model}: train {train_rate:.1f} img/s (first step {train_compile:.1f} s), "
          f"inference {infer_rate:.1f} img/s (first call {infer_compile:.1f} s), "
          f"load average {load} on {os.cpu_count()} CPUs", flush=True)


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_em"):
        main()
