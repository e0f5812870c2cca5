"""Training and inference throughput: reportgen's trainer vs plain Keras `fit` on the same model.

    python bench/bench_training.py [--models MNIST_Demo MNIST MNIST_EM] [--images 2000] [--epochs 3]

Both run the same CapsNet, losses, optimizer, batch size and images in one process (for matrix
capsules with EM routing, MNIST_EM: the spread loss with its margin schedule, XLA-compiled in
both, as the trainer compiles it). Throughput
is measured over epochs 2..E (epoch 1 includes tracing). The trainer's figure includes what it
does besides stepping: one checkpoint save and one validation pass (1,000 images) per epoch, so
it is the honest cost of `reportgen train`.
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


def bench_trainer(name: str, images: int, epochs: int) -> float:
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(Path("models") / name, Path(tmp) / name,
                        ignore=shutil.ignore_patterns("*.h5", "*.json", "*.npz", "archive"))
        entry = Catalog(tmp).get(name)
        history = train(entry, TrainOptions(epochs=epochs, limit=images, save_every=10**9))
    ends = {r["epoch"]: r["seconds"] for r in history if r["epoch"] > 0}
    return (epochs - 1) * images / (ends[epochs] - ends[1])


def bench_fit(name: str, images: int, epochs: int) -> float:
    import keras
    import numpy as np

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.capsnet.layers import Mask
    from reportgen.capsnet.losses import margin_loss, reconstruction_loss
    from reportgen.data.datasets import load_dataset
    from reportgen.settings.model_params import load_model_params

    params = load_model_params(Path("models") / name / "params.toml")
    data = load_dataset(params.dataset)
    x = np.asarray(data.x_train[:images])
    y = np.eye(params.num_classes, dtype=np.float32)[data.y_train[:images]]
    keras.utils.set_random_seed(0)
    net = build_capsnet(params)
    if getattr(net, "set_training_progress", None) is not None:
        return _fit_em(net, params, x, y, epochs)
    image = keras.Input(params.input_shape)
    label = keras.Input((params.num_classes,))
    capsules, lengths = net.encoder(image)
    outputs = {"lengths": lengths}
    losses = {"lengths": lambda t, p: margin_loss(t, p)}
    targets = {"lengths": y}
    if net.decoder is not None:
        outputs["reconstruction"] = net.decoder(Mask()([capsules, label]))
        w = params.loss.reconstruction_weight
        losses["reconstruction"] = lambda t, p: reconstruction_loss(t, p, w)
        targets["reconstruction"] = x
    model = keras.Model([image, label], outputs)
    model.compile(keras.optimizers.Adam(params.training.learning_rate), loss=losses)
    times = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter())

    model.fit([x, y], targets, batch_size=params.training.batch_size, epochs=epochs,
              shuffle=True, verbose=0, callbacks=[Clock()])
    return (epochs - 1) * images / (times[-1] - times[0])


def _fit_em(net, params, x, y, epochs: int) -> float:
    """`fit` of an EM network: spread loss on the class activations, margin moved per batch."""
    import keras

    from reportgen.capsnet.losses import spread_loss

    image = keras.Input(params.input_shape)
    _, scores = net.encoder(image)
    model = keras.Model(image, scores)
    model.compile(keras.optimizers.Adam(params.training.learning_rate),
                  loss=lambda t, p: spread_loss(t, p, net.margin), jit_compile=True)
    steps = epochs * -(-len(x) // params.training.batch_size)
    times = []

    class Schedule(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.step = 0

        def on_train_batch_begin(self, batch, logs=None):
            net.set_training_progress(self.step / max(steps - 1, 1))
            self.step += 1

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter())

    model.fit(x, y, batch_size=params.training.batch_size, epochs=epochs, shuffle=True,
              verbose=0, callbacks=[Schedule()])
    return (epochs - 1) * len(x) / (times[-1] - times[0])


def bench_inference(name: str, images: int) -> tuple[float, float]:
    import numpy as np

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import load_model_params

    net = build_capsnet(load_model_params(Path("models") / name / "params.toml"))
    x = np.random.default_rng(0).random((images, *net.params.input_shape), dtype=np.float32)
    net.encoder(x[:100])
    start = time.perf_counter()
    for i in range(0, images, 100):
        net.encoder(x[i:i + 100])
    direct = images / (time.perf_counter() - start)
    net.encoder.predict(x[:100], verbose=0)
    start = time.perf_counter()
    net.encoder.predict(x, batch_size=100, verbose=0)
    return direct, images / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["MNIST_Demo", "MNIST", "MNIST_EM"])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    print("| model | reportgen train (img/s) | keras fit (img/s) | trainer overhead | "
          "inference, direct call (img/s) | inference, predict() (img/s) |")
    print("|---|---|---|---|---|---|")
    for name in args.models:
        ours = bench_trainer(name, args.images, args.epochs)
        fit = bench_fit(name, args.images, args.epochs)
        direct, predict = bench_inference(name, args.images)
        print(f"| {name} | {ours:.0f} | {fit:.0f} | {100 * (fit / ours - 1):+.1f}% | "
              f"{direct:.0f} | {predict:.0f} |", flush=True)


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_training"):
        main()
