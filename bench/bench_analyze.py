"""A warm `reportgen.analyze` call against what it cannot avoid: loading the step's weights and
one bare XLA-compiled forward pass of the same images.

    python bench/bench_analyze.py [--model MNIST] [--images 256] [--rounds 5]

The model's params.toml (models/MODEL) is copied into a temporary models folder with one step
of freshly initialised weights (the cost does not depend on their values). Timed: the first
`analyze(MODEL, images="test:0-N", techniques=["predictions"])` of the session (it builds the
network and compiles its passes), then, alternating in rounds, the same call again (warm), a
`load_weights` of the step into a second network, and a bare `tf.function(jit_compile=True)`
forward of that network over the same images; medians of the rounds. Target: warm <= 1.15x
(load + bare forward).
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
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="MNIST")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    import keras
    import numpy as np
    import tensorflow as tf

    import reportgen
    from bench_xla import _timed, interleaved
    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.data.datasets import load_dataset
    from reportgen.settings.model_params import load_model_params
    from reportgen.training.checkpoints import load_weights, save_weights

    load_average = " ".join(f"{v:.2f}" for v in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        (models / args.model).mkdir(parents=True)
        shutil.copy(ROOT / "models" / args.model / "params.toml", models / args.model)
        params = load_model_params(models / args.model / "params.toml")
        keras.utils.set_random_seed(0)
        weights = models / args.model / "1-0.weights.h5"
        save_weights(build_capsnet(params), weights)
        call = dict(name=args.model, step="1-0", images=f"test:0-{args.images - 1}",
                    techniques=["predictions"], models_dir=models)
        first = _timed(lambda: reportgen.analyze(**call))
        second = _timed(lambda: reportgen.analyze(**call))

        net = build_capsnet(params)
        images = np.ascontiguousarray(load_dataset(params.dataset).x_test[:args.images],
                                      np.float32)
        bare = tf.function(lambda x: net.model(x, training=False), jit_compile=True)

        def bare_call():
            [np.asarray(v) for v in bare(tf.constant(images)).values()]

        load_weights(net, weights)
        first_bare = _timed(bare_call)
        seconds = interleaved({"warm": lambda: reportgen.analyze(**call),
                               "load": lambda: load_weights(net, weights),
                               "bare": bare_call}, args.rounds, seconds=2.0)
    floor = seconds["load"] + seconds["bare"]
    print(f"{args.model}, {args.images} images, techniques=['predictions'] (load average "
          f"{load_average} on {os.cpu_count()} CPUs; medians of {args.rounds} alternating "
          f"rounds)\n")
    print("| call | seconds |\n|---|---|")
    print(f"| first `analyze` (builds the network, compiles its passes) | {first:.2f} |")
    print(f"| second `analyze`, once | {second:.2f} |")
    print(f"| warm `analyze` | {seconds['warm']:.2f} |")
    print(f"| `load_weights` of the step | {seconds['load']:.2f} |")
    print(f"| bare XLA forward (first call {first_bare:.1f} s) | {seconds['bare']:.2f} |")
    print(f"\nwarm / (load + bare forward) = {seconds['warm']:.2f} / {floor:.2f} = "
          f"**{seconds['warm'] / floor:.2f}x** (target <= 1.15x); warm / bare forward "
          f"{seconds['warm'] / seconds['bare']:.2f}x; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_analyze"):
        main()
