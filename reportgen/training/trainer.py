"""Train a CapsNet and save a weights file every K batches (SPEC §2, issue 2).

Steps are named EPOCH-BATCH (epoch 1-based; 0-0 = untrained). Each save writes, atomically:
the weights file, the history (history.json: losses and validation accuracy per saved step) and
the optimizer state (train_state.npz) so `--resume` continues exactly where the last save was.
A custom loop (not `fit`) because saves fall inside epochs and resume may start mid-epoch; the
bench compares its throughput with `fit` on the same model.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from reportgen import console
from reportgen.catalog import HISTORY_FILE, ModelEntry
from reportgen.errors import ReportgenError
from reportgen.training.checkpoints import (Step, atomic_path, atomic_write_text, list_steps,
                                            load_weights, save_weights)

STATE_FILE = "train_state.npz"
ARCHIVE_DIR = "archive"
VALIDATION_LIMIT = 1000


@dataclass(frozen=True)
class TrainOptions:
    epochs: int | None = None         # None: params.toml's training.epochs
    batch_size: int | None = None
    save_every: int | None = None
    learning_rate: float | None = None
    data: str | None = None           # None: params.toml's dataset
    seed: int = 0
    resume: bool = False
    fresh: bool = False               # archive an earlier run instead of refusing
    limit: int | None = None          # use only the first N (shuffled) training images


def _epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled order of epoch `epoch`: reproducible, so a resumed epoch skips the same batches."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def _validation_split(dataset, seed: int):
    """Up to VALIDATION_LIMIT test images, a seeded sample (the whole test split if smaller)."""
    n = len(dataset.x_test)
    idx = np.sort(np.random.default_rng(seed).permutation(n)[:VALIDATION_LIMIT])
    return dataset.x_test[idx], dataset.y_test[idx]


def _archive_run(entry: ModelEntry) -> Path:
    """Move an earlier run's products to models/NAME/archive/<UTC time>/ (never delete)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = entry.path / ARCHIVE_DIR / stamp
    target.mkdir(parents=True)
    for path in entry.path.iterdir():
        if path.name.endswith(".weights.h5") or path.name in (HISTORY_FILE, STATE_FILE):
            shutil.move(str(path), target / path.name)
    return target


def train(entry: ModelEntry, options: TrainOptions = TrainOptions()) -> list[dict]:
    """Train `entry` and return its history records. See TrainOptions for the knobs."""
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.data.datasets import load_dataset
    from reportgen.training.evaluate import accuracy

    params = entry.params
    tp = params.training
    epochs = options.epochs or tp.epochs
    batch_size = options.batch_size or tp.batch_size
    save_every = options.save_every or tp.save_every
    learning_rate = options.learning_rate or tp.learning_rate

    existing = list_steps(entry.path)
    if existing and not options.resume:
        if not options.fresh:
            raise ReportgenError(
                f"{entry.path} already holds a training run (steps {existing[0]} ... "
                f"{existing[-1]}).",
                fix=f"Continue it with `reportgen train {entry.name} --resume`, or start over "
                    f"with `--fresh` (moves the old run to {entry.path / ARCHIVE_DIR}/).")
        console.notice(f"Earlier run moved to {_archive_run(entry)}")
        existing = []

    dataset = load_dataset(options.data or params.dataset, seed=options.seed)
    if tuple(dataset.input_shape) != tuple(params.input_shape):
        raise ReportgenError(f"Dataset '{dataset.name}' does not fit model {entry.name}.",
                             expected=f"images of shape {tuple(params.input_shape)}",
                             received=f"{tuple(dataset.input_shape)}",
                             fix="Choose another --data or edit input_shape in params.toml.")
    if dataset.num_classes > params.num_classes:
        raise ReportgenError(f"Dataset '{dataset.name}' has more classes than model {entry.name}.",
                             expected=f"at most {params.num_classes} classes",
                             received=str(dataset.num_classes))
    x_train, y_train = dataset.x_train, dataset.y_train
    if options.limit:
        keep = np.sort(np.random.default_rng(options.seed).permutation(len(x_train))[:options.limit])
        x_train, y_train = x_train[keep], y_train[keep]
    x_val, y_val = _validation_split(dataset, options.seed)
    n = len(x_train)
    batches_per_epoch = math.ceil(n / batch_size)

    keras.utils.set_random_seed(options.seed)
    net = build_capsnet(params)
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(net.model.trainable_variables)  # so a resume can restore its moments
    history: list[dict] = []
    start = Step(1, 0)
    if existing:  # resume
        last = existing[-1]
        load_weights(net, entry.weights_path(last))
        history = [r for r in entry.history() if Step.parse(r["step"]) <= last]
        _load_optimizer_state(entry.path / STATE_FILE, optimizer, last)
        start = Step(last.epoch + 1, 0) if last.batch >= batches_per_epoch or last.epoch == 0 \
            else Step(last.epoch, last.batch)
        console.notice(f"Resuming {entry.name} from step {last}")
    console.notice(f"Training {entry.name} on {dataset.source}: {n:,} images, batch {batch_size}, "
                   f"{epochs} epochs, saving every {save_every} batches")

    train_step = make_train_step(net, optimizer)

    clock = time.perf_counter()
    sums = np.zeros(4)
    seen = 0

    def save(step: Step) -> None:
        nonlocal sums, seen
        val_acc = accuracy(net, x_val, y_val)
        record = {"step": str(step), "epoch": step.epoch, "batch": step.batch,
                  "images_seen": (max(step.epoch - 1, 0) * n +
                                  min(step.batch * batch_size, n)),
                  "loss": sums[0] / seen if seen else None,
                  "margin_loss": sums[1] / seen if seen else None,
                  "reconstruction_loss": sums[2] / seen if seen else None,
                  "train_accuracy": sums[3] / seen if seen else None,
                  "val_accuracy": val_acc, "seconds": round(time.perf_counter() - clock, 3)}
        save_weights(net, entry.weights_path(step))
        _save_optimizer_state(entry.path / STATE_FILE, optimizer, step)
        history.append(record)
        atomic_write_text(entry.path / HISTORY_FILE, json.dumps(
            {"model": entry.name, "dataset": dataset.source, "batch_size": batch_size,
             "records": history}, indent=1))
        sums, seen = np.zeros(4), 0

    if not existing:
        save(Step(0, 0))
    total_batches = sum(batches_per_epoch - (start.batch if e == start.epoch else 0)
                        for e in range(start.epoch, epochs + 1))
    try:
        with console.progress(total_batches, f"train {entry.name}", unit="batch") as bar:
            for epoch in range(start.epoch, epochs + 1):
                order = _epoch_order(n, options.seed, epoch)
                first = start.batch if epoch == start.epoch else 0
                for b in range(first, batches_per_epoch):
                    idx = np.sort(order[b * batch_size:(b + 1) * batch_size])
                    one_hot = np.eye(params.num_classes, dtype=np.float32)[y_train[idx]]
                    out = train_step(x_train[idx], one_hot)
                    k = len(idx)
                    sums += np.array([float(out[0]) * k, float(out[1]) * k, float(out[2]) * k,
                                      float(out[3])])
                    seen += k
                    bar.update(1)
                    bar.set_postfix(loss=f"{sums[0] / seen:.4f}", acc=f"{sums[3] / seen:.3f}",
                                    refresh=False)
                    if (b + 1) % save_every == 0 or b + 1 == batches_per_epoch:
                        save(Step(epoch, b + 1))
                        bar.set_postfix(val_acc=f"{history[-1]['val_accuracy']:.4f}")
    except KeyboardInterrupt:
        last = history[-1]["step"] if history else "none"
        console.notice(f"\nInterrupted. Last complete step: {last}. Continue with "
                       f"`reportgen train {entry.name} --resume`.")
        raise
    return history


def make_train_step(net, optimizer):
    """One compiled optimisation step: margin loss + lambda x reconstruction loss (SPEC §2).

    The decoder sees the true class's capsule (masked by the label). Returns
    (mean total loss, mean margin loss, mean reconstruction loss, number correct).
    """
    import tensorflow as tf

    from reportgen.capsnet.layers import Mask
    from reportgen.capsnet.losses import margin_loss, reconstruction_loss

    lp = net.params.loss
    mask = Mask()
    variables = net.model.trainable_variables

    @tf.function
    def train_step(images, one_hot):
        with tf.GradientTape() as tape:
            capsules, lengths = net.encoder(images, training=True)
            margin = margin_loss(one_hot, lengths, lp.m_plus, lp.m_minus, lp.down_weight)
            if net.decoder is not None:
                recon = net.decoder(mask([capsules, one_hot]), training=True)
                rec = reconstruction_loss(images, recon, lp.reconstruction_weight)
            else:
                rec = tf.zeros_like(margin)
            total = tf.reduce_mean(margin + rec)
        grads = tape.gradient(total, variables)
        optimizer.apply(grads, variables)
        correct = tf.reduce_sum(tf.cast(tf.argmax(lengths, 1) == tf.argmax(one_hot, 1),
                                        tf.float32))
        return total, tf.reduce_mean(margin), tf.reduce_mean(rec), correct

    return train_step


def _save_optimizer_state(path: Path, optimizer, step: Step) -> None:
    arrays = {f"v{i}": np.asarray(v) for i, v in enumerate(optimizer.variables)}
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez(tmp, step=np.array(str(step)), **arrays)


def _load_optimizer_state(path: Path, optimizer, step: Step) -> None:
    """Restore Adam's moments if they were saved at `step`; otherwise warn and start them fresh."""
    if not path.is_file():
        console.notice(f"No optimizer state at {path}; resuming with a fresh optimizer.")
        return
    with np.load(path, allow_pickle=False) as state:
        if str(state["step"]) != str(step) or len(state.files) - 1 != len(optimizer.variables):
            console.notice(f"Optimizer state in {path} is not from step {step}; "
                           "resuming with a fresh optimizer.")
            return
        for i, var in enumerate(optimizer.variables):
            var.assign(state[f"v{i}"])
