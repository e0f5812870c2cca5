"""Train a CapsNet and save a weights file every K batches.

Steps are named EPOCH-BATCH (epoch 1-based; 0-0 = untrained). Each save commits the step's
weights, the optimizer state and the history together (the order, and what the next start does
after a kill at any moment, are in reportgen.training.run_state), so `--resume` continues from
the last saved step with the optimizer's state as it was (Adam's moments, SGD's momentum
buffers, the iteration count): a resumed run computes the same next steps as an uninterrupted
one with the same seed. The optimizer is params.toml's `[training] optimizer`
(reportgen.training.optimizers); a resume refuses another kind than the run's. A custom loop
(not `fit`) because saves fall inside epochs and a resume may start mid-epoch; the bench
compares its throughput with `fit` on the same model.

Each record holds the classification loss under the name of the loss the network trains
(`Network.classification_loss_name()`: its family's `classification_loss`, e.g. "margin_loss",
"cross_entropy"); history.json's "classification_loss" says which. Runs of an older reportgen
recorded every family's under "margin_loss": resuming one renames it in the earlier records.

The model comes as a `ModelFolder` (reportgen.model_folder: its name, folder, parameters and
file paths), so training never imports the catalog that finds the folders.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from reportgen import console
from reportgen.errors import ReportgenError
from reportgen.model_folder import HISTORY_FILE, STATE_FILE, ModelFolder, Step
from reportgen.training.checkpoints import load_weights, nonfinite
from reportgen.data.held_out import MARKER_KEY
from reportgen.training.run_info import RUN_SECTION, run_facts, training_run
from reportgen.training.run_state import (Committed, archive_run, archive_uncommitted,
                                          commit_step, recover, remove_temporary_files,
                                          sigint_deferred, training_lock)

# history.json's "accuracy" of a two-label run: what its accuracies count
TOP2_ACCURACY = "top-2: both labels among the two highest class scores"
# settings that fix which images each EPOCH-BATCH step saw: a resume must keep them
_ORDER_SETTINGS = ("data", "seed", "batch_size", "limit")
# the optimizer's settings a run records (params.toml's [training]); a run recorded without
# them trained with Adam and no weight decay
_OPTIMIZER_SETTINGS = ("optimizer", "momentum", "weight_decay")
_ADAM = {"optimizer": "adam", "momentum": None, "weight_decay": 0.0}


@dataclass(frozen=True)
class TrainOptions:
    epochs: int | None = None         # None: params.toml's training.epochs
    batch_size: int | None = None     # None: the run's on --resume, else params.toml's
    save_every: int | None = None
    learning_rate: float | None = None
    data: str | None = None           # None: the run's on --resume, else params.toml's dataset
    seed: int | None = None           # None: the run's on --resume, else 0
    resume: bool = False
    fresh: bool = False               # archive an earlier run instead of refusing
    limit: int | None = None          # use only the first N (shuffled) training images
    # Stop at the first saved step whose validation accuracy is at least this: models compared
    # at the same clean accuracy (Gu 2022 stops every model of his affine benchmark at ~99.22%).
    until_accuracy: float | None = None


@dataclass
class Run:
    """A run ready to train: the network and optimizer (restored on resume) and its data."""

    net: object
    optimizer: object
    settings: dict                    # data, seed, batch_size, limit, learning_rate, save_every
    epochs: int
    start: Step                       # the first batch to train is start.batch of start.epoch
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    source: str                       # the dataset's description, for history.json
    history: list[dict] = field(default_factory=list)
    resumed_from: Step | None = None
    until_accuracy: float | None = None   # TrainOptions.until_accuracy
    # every step trained beside the one held-out split: false when resuming an older run
    held_out: bool = True
    # Two labels per image (MultiMNIST): y_* are (N, 2); `components(split, indices)` renders
    # each image's two digits (the reconstruction targets) from its index in the data set's
    # split, which train_indices (None: all of them) / val_indices keep through --limit and
    # the validation sample.
    components: object = None
    train_indices: np.ndarray | None = None
    val_indices: np.ndarray | None = None

    @property
    def two_labels(self) -> bool:
        return self.components is not None

    @property
    def batches_per_epoch(self) -> int:
        return math.ceil(len(self.x_train) / self.settings["batch_size"])


def _epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled order of epoch `epoch`: reproducible, so a resumed epoch skips the same batches."""
    return np.random.default_rng([seed, epoch]).permutation(n)


class _BlockOrder:
    """The shuffled order of an epoch over data rendered as it is read in blocks (MultiMNIST's
    rounds, reportgen.data.multimnist): the blocks in a shuffled order, each block's images
    shuffled within it, so that memory stays one block's and a batch reads one or two blocks.
    Sliced like the permutation `_epoch_order` gives; reproducible as it is."""

    def __init__(self, n: int, block: int, seed: int, epoch: int):
        self.n, self.block, self.seed, self.epoch = n, block, seed, epoch
        self.blocks = np.random.default_rng([seed, epoch]).permutation(-(-n // block))
        sizes = np.minimum(block, n - self.blocks * block)       # the last block may be short
        self.ends = np.cumsum(sizes)                             # in the shuffled order
        self._within: tuple[int, np.ndarray] | None = None

    def _shuffled(self, slot: int) -> np.ndarray:
        if self._within is None or self._within[0] != slot:
            start = int(self.blocks[slot]) * self.block
            size = min(self.block, self.n - start)
            order = np.random.default_rng([self.seed, self.epoch, slot]).permutation(size) + start
            self._within = (slot, order)
        return self._within[1]

    def __getitem__(self, key: slice) -> np.ndarray:
        positions = np.arange(self.n)[key]
        slots = np.searchsorted(self.ends, positions, side="right")
        offsets = positions - (self.ends[slots] - np.minimum(
            self.block, self.n - self.blocks[slots] * self.block))
        out = np.empty(len(positions), np.int64)
        for slot in np.unique(slots):
            at = slots == slot
            out[at] = self._shuffled(int(slot))[offsets[at]]
        return out


def train(entry: ModelFolder, options: TrainOptions = TrainOptions()) -> list[dict]:
    """Train `entry` and return its history records. See TrainOptions for the knobs."""
    with training_lock(entry):
        run = open_run(entry, options)
        return _train_loop(entry, run)


def open_run(entry: ModelFolder, options: TrainOptions) -> Run:
    """Recover the model folder after an interruption, then set up a new or resumed run.

    The caller holds `training_lock` (train does); tests call this to inspect a resumed run.
    """
    if options.resume and options.fresh:
        raise ReportgenError("--resume and --fresh exclude each other",
                             fix="Continue the run with --resume, or start over with --fresh")
    committed = _recover_folder(entry, options)
    existing = entry.steps
    if existing and not options.resume:
        raise ReportgenError(
            f"{entry.path} already holds a training run (steps {existing[0]} ... "
            f"{existing[-1]}).",
            fix=f"Continue it with `reportgen train {entry.name} --resume`, or start over "
                f"with `--fresh` (moves the old run to {entry.archive_root}/).")
    if existing:
        existing = _drop_uncommitted(entry, committed)
    settings = _settings(entry, options, committed.settings if existing else {})
    if existing:
        _check_optimizer(entry, committed, settings)
    until = options.until_accuracy
    if until is not None and not 0 < until <= 1:
        raise ReportgenError("--until-accuracy must be a fraction of correct images.",
                             expected="a number in (0, 1], e.g. 0.99", received=repr(until))
    run = _load_data(entry, options, settings)
    run.until_accuracy = until

    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.training.optimizers import make_optimizer

    keras.utils.set_random_seed(settings["seed"])
    run.net = build_capsnet(entry.params)
    run.optimizer = make_optimizer(entry.params.training, settings["learning_rate"])
    run.optimizer.build(run.net.model.trainable_variables)  # so a resume can restore its moments
    if existing:
        last = existing[-1]
        _load_step_weights(entry, run.net, last)
        run.history = [r for r in committed.records if Step.parse(r["step"]) <= last]
        _restore_optimizer(entry, run.optimizer, committed, last, settings)
        run.start = Step(last.epoch + 1, 0) if last.batch >= run.batches_per_epoch \
            or last.epoch == 0 else Step(last.epoch, last.batch)
        run.resumed_from = last
        run.held_out = bool(training_run(entry).get(MARKER_KEY))
        console.notice(f"Resuming {entry.name} from step {last}")
    return run


def _recover_folder(entry: ModelFolder, options: TrainOptions) -> Committed:
    """Finish or undo what a killed run left (see run_state); with --fresh, archive the run."""
    if options.fresh:
        try:  # complete a committed step so the archive holds the whole run
            recover(entry)
        except ReportgenError:
            pass  # a damaged run is archived as it is
        target = archive_run(entry)
        remove_temporary_files(entry)
        if target is not None:
            console.notice(f"Earlier run moved to {target}")
        return Committed(None)
    committed, notices = recover(entry)
    for line in notices:
        console.notice(line)
    return committed


def _drop_uncommitted(entry: ModelFolder, committed: Committed) -> list[Step]:
    """Move weights without a history record aside, so the history has no gap; return the rest."""
    if committed.step is None:
        raise ReportgenError(
            f"{entry.path} holds weights files but neither {HISTORY_FILE} nor {STATE_FILE}, so "
            "there is no run to resume",
            fix=f"Start over with `reportgen train {entry.name} --fresh` (moves the weights to "
                f"{entry.archive_root}/)")
    target, moved = archive_uncommitted(entry, committed)
    if moved:
        console.notice(f"Moved {len(moved)} weights file(s) without a history record "
                       f"({', '.join(map(str, moved))}) to {target}")
    existing = entry.steps
    if not existing:
        raise ReportgenError(f"{entry.path} holds no saved step of the run to resume",
                             fix=f"Start over with `reportgen train {entry.name} --fresh`")
    return existing


def _settings(entry: ModelFolder, options: TrainOptions, recorded: dict) -> dict:
    """The run's settings: options, else (on resume) the run's own, else params.toml's."""
    tp = entry.params.training
    given = {"data": options.data, "seed": options.seed, "batch_size": options.batch_size,
             "limit": options.limit, "learning_rate": options.learning_rate,
             "save_every": options.save_every}
    for key in _ORDER_SETTINGS:
        if key in recorded and given[key] is not None and given[key] != recorded[key]:
            flag = "--" + key.replace("_", "-")
            kept = f"no {flag}" if recorded[key] is None else f"{flag} {recorded[key]}"
            raise ReportgenError(
                f"{flag} differs from the run being resumed, so its steps would not line up",
                expected=kept, received=f"{flag} {given[key]}",
                fix=f"Use {kept} to continue the run, or start over with `reportgen train "
                    f"{entry.name} --fresh`")
    defaults = {"data": entry.params.dataset, "seed": 0, "batch_size": tp.batch_size,
                "limit": None, "learning_rate": tp.learning_rate, "save_every": tp.save_every}
    settings = {key: given[key] if given[key] is not None else recorded.get(key, defaults[key])
                for key in defaults}
    # the optimizer is params.toml's (no option); _check_optimizer compares it with the run's
    return {**settings, **optimizer_settings(tp)}


def optimizer_settings(training) -> dict:
    """{optimizer, momentum (None for Adam), weight_decay} of TrainingParams `training`, as a
    run records them."""
    return {"optimizer": training.optimizer,
            "momentum": training.momentum if training.optimizer == "sgd" else None,
            "weight_decay": training.weight_decay}


def _recorded_optimizer(committed: Committed) -> dict:
    """The optimizer settings of the run being resumed (Adam, without weight decay, for a run
    that did not record them: every run before the setting existed)."""
    recorded = committed.settings or {}
    if "optimizer" not in recorded:
        return dict(_ADAM)
    return {key: recorded.get(key, _ADAM[key]) for key in _OPTIMIZER_SETTINGS}


def _check_optimizer(entry: ModelFolder, committed: Committed, settings: dict) -> None:
    """Refuse to resume with another kind of optimizer than the run's, whose saved state (Adam's
    moments, SGD's momentum buffers, or none) the new one could not take; SGD with and without
    momentum count as two kinds. Without a saved optimizer state (the run resumes with a fresh
    optimizer, said so) any optimizer may continue."""
    if committed.optimizer is None:
        return
    was, now = _recorded_optimizer(committed), settings

    def kind(s: dict) -> str:
        if s["optimizer"] != "sgd":
            return f'optimizer = "{s["optimizer"]}"'
        return 'optimizer = "sgd" ' + ("without momentum (momentum = 0)" if not s["momentum"]
                                       else f"with momentum {s['momentum']:g}")

    if was["optimizer"] != now["optimizer"] or \
            (was["optimizer"] == "sgd" and bool(was["momentum"]) != bool(now["momentum"])):
        raise ReportgenError(
            f"{entry.params_path}'s [training] {kind(now)} differs from the run being "
            f"resumed, which trained with {kind(was)}: its saved optimizer state "
            f"({entry.state_path}) does not carry over",
            expected=kind(was), received=kind(now),
            fix=f"Set [training] back to {kind(was)} to continue the run, or start over with "
                f"`reportgen train {entry.name} --fresh`")


def _load_data(entry: ModelFolder, options: TrainOptions, settings: dict) -> Run:
    from reportgen.data.datasets import load_dataset
    from reportgen.data.held_out import validation_indices
    from reportgen.data.multimnist import take
    from reportgen.data.label_arity import PAIR, check_label_arity, model_label_arity

    params = entry.params
    # the same held-out split whatever the seed, which shuffles and subsets the training images
    dataset = load_dataset(settings["data"])
    arity = model_label_arity(params)
    check_label_arity(dataset, entry.name, arity)
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
    keep = None               # every training image
    if settings["limit"]:
        keep = _limited(len(x_train), settings["limit"], settings["seed"])
        x_train, y_train = take(x_train, keep), take(y_train, keep)
    val = validation_indices(len(dataset.x_test))
    run = Run(net=None, optimizer=None, settings=settings,
              epochs=options.epochs or params.training.epochs, start=Step(1, 0),
              x_train=x_train, y_train=y_train, x_val=dataset.x_test[val],
              y_val=dataset.y_test[val], source=dataset.source)
    if arity == PAIR:
        if dataset.components is None:
            raise ReportgenError(
                f"Dataset '{dataset.name}' cannot render the single digits of its pairs, which "
                f"model {entry.name} reconstructs.",
                expected="a data set of overlaid digits with their parts, such as multimnist",
                received=f"'{dataset.name}'", fix="Train it with --data multimnist.")
        run.components, run.train_indices, run.val_indices = dataset.components, keep, val
    return run


def _limited(n: int, limit: int, seed: int) -> np.ndarray:
    """Sorted indices of the `limit` training images a --limit run keeps, chosen by its seed
    (without a permutation of all n when n is large: rendered data sets hold millions)."""
    rng = np.random.default_rng(seed)
    if n <= 1_000_000:
        return np.sort(rng.permutation(n)[:limit])
    return np.sort(rng.choice(n, min(limit, n), replace=False))


def _load_step_weights(entry: ModelFolder, net, step: Step) -> None:
    try:
        load_weights(net, entry.weights_path(step))
    except ReportgenError as exc:
        raise ReportgenError(exc.what, expected=exc.expected, received=exc.received,
                             fix=f"Move {entry.weights_path(step)} out of {entry.path}; "
                                 f"`reportgen train {entry.name} --resume` then continues from "
                                 "the step before, or start over with --fresh") from exc


def _restore_optimizer(entry: ModelFolder, optimizer, committed: Committed, last: Step,
                       settings: dict) -> None:
    """The optimizer's state (Adam's moments, SGD's momentum buffers, the iteration count) as
    saved with `last`; a fresh optimizer (said so) if the state belongs to another step (its
    weights were removed by hand) or is missing. A changed momentum or weight decay is said;
    another kind of optimizer was refused before (_check_optimizer)."""
    learning_rate = settings["learning_rate"]
    state_path = entry.state_path
    if committed.optimizer is None or committed.step != last:
        reason = (f"{state_path} is missing" if committed.optimizer is None else
                  f"{state_path} belongs to step {committed.step}, whose weights file is gone")
        console.notice(f"{reason}; resuming from step {last} with a fresh optimizer.")
        return
    variables = optimizer.variables
    shapes = [tuple(v.shape) for v in variables]
    saved = [tuple(a.shape) for a in committed.optimizer]
    if shapes != saved:
        raise ReportgenError(
            f"Optimizer state in {state_path} does not fit model {entry.name}",
            expected=f"{len(shapes)} optimizer variables shaped as this params.toml builds them",
            received=f"{len(saved)} variables",
            fix=f"Delete {state_path} to resume with a fresh optimizer, or start over with "
                f"`reportgen train {entry.name} --fresh`")
    for var, array in zip(variables, committed.optimizer):
        var.assign(array)
    # the run's base rate, not the optimizer's: a decaying rate is set again batch by batch
    previous = (committed.settings or {}).get("learning_rate")
    if previous is not None and not np.isclose(previous, learning_rate):
        console.notice(f"Learning rate changed from {previous:g} to {learning_rate:g}.")
    was = _recorded_optimizer(committed)
    for key, words in (("momentum", "SGD momentum"), ("weight_decay", "Weight decay")):
        if was[key] is not None and settings[key] is not None \
                and not np.isclose(was[key], settings[key]):
            console.notice(f"{words} changed from {was[key]:g} to {settings[key]:g} "
                           f"([training] {key} in {entry.params_path}).")
    optimizer.learning_rate = learning_rate


def _train_loop(entry: ModelFolder, run: Run) -> list[dict]:
    params = entry.params
    settings = run.settings
    batch_size, save_every = settings["batch_size"], settings["save_every"]
    n, batches_per_epoch, start = len(run.x_train), run.batches_per_epoch, run.start
    decay = params.training.learning_rate_decay
    net, history = run.net, run.history
    # The data source was announced when it loaded; say only which data set this run uses.
    console.notice(f"Training {entry.name} on {run.settings.get('data') or params.dataset}: "
                   f"{n:,} images, batch {batch_size}, "
                   f"{run.epochs} epoch{'' if run.epochs == 1 else 's'}, "
                   f"saving every {save_every} batches")
    from reportgen.training.evaluate import accuracy, top2_accuracy

    from reportgen.training.optimizers import describe as optimizer_words

    if run.two_labels:
        from reportgen.training.two_label import pair_classification_loss

        train_step = make_pair_train_step(entry.name, net, run.optimizer)
        validation_accuracy = top2_accuracy
        classification = pair_classification_loss(net)
    else:
        train_step = make_train_step(net, run.optimizer)
        validation_accuracy = accuracy
        classification = net.classification_loss_name()
    console.notice(f"Optimizer: {optimizer_words(params.training)} at learning rate "
                   f"{settings['learning_rate']:g}; classification loss: {classification}")
    if run.resumed_from is not None:
        history[:] = [_named_loss(r, classification) for r in history]
    clock = time.perf_counter()
    # wall time over every session of the run; unknown when resuming a run that did not
    # record it
    before = 0.0 if run.resumed_from is None else \
        (history[-1].get("wall_seconds") if history else None)
    facts = run_facts(settings, run.source, n, run.epochs, run.until_accuracy, run.held_out)
    sums = np.zeros(4)
    seen = 0

    def save(step: Step) -> None:
        nonlocal sums, seen
        problem = nonfinite((v.path, v.numpy()) for v in net.model.weights)
        if problem is not None:     # a finite loss, then an update to NaN: never saved
            raise _stopped(entry, run, history, f"step {step}'s weights are not numbers "
                                                f"({problem})")
        record = {"step": str(step), "epoch": step.epoch, "batch": step.batch,
                  "images_seen": (max(step.epoch - 1, 0) * n +
                                  min(step.batch * batch_size, n)),
                  "loss": sums[0] / seen if seen else None,
                  classification: sums[1] / seen if seen else None,
                  "reconstruction_loss": sums[2] / seen if seen else None,
                  "train_accuracy": sums[3] / seen if seen else None,
                  "val_accuracy": validation_accuracy(net, run.x_val, run.y_val),
                  "val_images": len(run.x_val),
                  "seconds": round(time.perf_counter() - clock, 3)}
        record["wall_seconds"] = None if before is None else round(before + record["seconds"], 3)
        doc = {"model": entry.name, "dataset": run.source, "batch_size": batch_size,
               # which key of the records holds the classification loss (Family.
               # classification_loss; older histories: "margin_loss")
               "classification_loss": classification,
               RUN_SECTION: facts, "records": history + [record]}
        if run.two_labels:   # what train_accuracy and val_accuracy count
            doc["accuracy"] = TOP2_ACCURACY
        with sigint_deferred():  # Ctrl-C mid-save: the step is saved and counted, then we stop
            commit_step(entry, step, lambda path: net.model.save_weights(str(path)),
                        run.optimizer.variables, doc, settings)
            history.append(record)
        sums, seen = np.zeros(4), 0

    until = run.until_accuracy

    def reached() -> bool:
        accuracy = history[-1]["val_accuracy"] if history else None
        if until is None or accuracy is None or accuracy < until:
            return False
        console.notice(f"Validation accuracy {accuracy:.4f} >= {until:g} at step "
                       f"{history[-1]['step']}: stopping (--until-accuracy).")
        return True

    if run.resumed_from is None:
        save(Step(0, 0))
    if reached():
        return history
    total_batches = sum(batches_per_epoch - (start.batch if e == start.epoch else 0)
                        for e in range(start.epoch, run.epochs + 1))
    try:
        with console.progress(total_batches, f"train {entry.name}", unit="batch") as bar:
            shown = {}          # the bar's postfix: epoch, running means over the epoch
            accuracy_key = "top2_acc" if run.two_labels else "acc"
            for epoch in range(start.epoch, run.epochs + 1):
                block = getattr(run.x_train, "block", None)
                order = _epoch_order(n, settings["seed"], epoch) if block is None else \
                    _BlockOrder(n, block, settings["seed"], epoch)
                first = start.batch if epoch == start.epoch else 0
                shown["epoch"] = f"{epoch}/{run.epochs}"
                epoch_loss = epoch_correct = 0.0
                epoch_seen = 0
                for b in range(first, batches_per_epoch):
                    idx = np.sort(order[b * batch_size:(b + 1) * batch_size])
                    if not run.two_labels:
                        targets = (np.eye(params.num_classes, dtype=np.float32)[run.y_train[idx]],)
                    else:
                        targets = (run.y_train[idx],
                                   run.components("train", idx if run.train_indices is None
                                                  else run.train_indices[idx]))
                    progress = ((epoch - 1) * batches_per_epoch + b) \
                        / max(run.epochs * batches_per_epoch - 1, 1)
                    # Families whose loss or learning rate changes over training follow the
                    # share done (e.g. a spread-loss margin growing 0.2 -> 0.9); others keep both
                    net.set_training_progress(progress)
                    # params.toml's decay per epoch, batch by batch (1: a constant rate)
                    factor = net.learning_rate_factor(progress) * \
                        decay ** (epoch - 1 + b / batches_per_epoch)
                    if factor != 1.0:
                        run.optimizer.learning_rate = settings["learning_rate"] * factor
                    out = train_step(run.x_train[idx], *targets)
                    if not math.isfinite(float(out[0])):
                        raise _stopped(entry, run, history, f"the loss is {float(out[0])} at "
                                                            f"epoch {epoch}, batch {b + 1}")
                    k = len(idx)
                    sums += np.array([float(out[0]) * k, float(out[1]) * k, float(out[2]) * k,
                                      float(out[3])])
                    seen += k
                    epoch_loss += float(out[0]) * k
                    epoch_correct += float(out[3])
                    epoch_seen += k
                    bar.update(1)
                    # images of two digits: the accuracies are top-2 (the bar says so)
                    shown.update({"loss": f"{epoch_loss / epoch_seen:.4f}",
                                  accuracy_key: f"{epoch_correct / epoch_seen:.3f}"})
                    bar.set_postfix(shown, refresh=False)
                    if (b + 1) % save_every == 0 or b + 1 == batches_per_epoch:
                        save(Step(epoch, b + 1))
                        shown[f"val_{accuracy_key}"] = f"{history[-1]['val_accuracy']:.4f}"
                        bar.set_postfix(shown)
                        if reached():
                            return history
    except KeyboardInterrupt:
        last = history[-1]["step"] if history else "none"
        console.notice(f"\nInterrupted. Last saved step: {last}. Continue with "
                       f"`reportgen train {entry.name} --resume`.")
        raise
    return history


def _named_loss(record: dict, name: str) -> dict:
    """`record` with an older reportgen's "margin_loss" (which held every family's
    classification loss) under `name`, in its place; as it is otherwise."""
    if name == "margin_loss" or "margin_loss" not in record or name in record:
        return record
    return {name if key == "margin_loss" else key: value for key, value in record.items()}


def _stopped(entry: ModelFolder, run: Run, history: list[dict], why: str) -> ReportgenError:
    """The one-line error of a run stopped by a number that is not one; the steps saved so
    far stay as they are."""
    last = history[-1]["step"] if history else None
    rate = run.settings["learning_rate"]
    return ReportgenError(
        f"Training {entry.name} stopped: {why}; "
        + (f"the last good step, {last}, is kept" if last else "no step was saved"),
        fix=(f"Continue from it at a lower learning rate: `reportgen train {entry.name} "
             f"--resume --learning-rate {rate / 10:g}`" if last else
             f"Train at a lower learning rate: --learning-rate {rate / 10:g}"))


def _xla_training(net) -> bool:
    """Whether the training step is XLA-compiled: the family's measured choice, or params.toml's
    training.xla for a network it speeds up."""
    return net.uses_xla(gradients=True) or net.params.training.xla


def make_train_step(net, optimizer):
    """One compiled optimisation step of the family's loss (`net.training_losses`: for the
    CapsNet, margin loss + lambda x reconstruction loss, Sabour et al. 2017, eq. 4 and section
    4.1). Returns (mean total loss, mean classification loss — the history names it
    `net.classification_loss_name()` —, mean reconstruction loss, number correct)."""
    import tensorflow as tf

    variables = net.model.trainable_variables
    losses = net.training_losses      # the family's loss (reportgen.capsnet.network.Network)

    # XLA where the family's passes with gradients gain from it (Family.xla), or where
    # params.toml's training.xla asks for it. Batches are not
    # padded (batch norm in training reads the batch's own statistics): an epoch's short last
    # batch traces once more, and that trace is reused by every later epoch.
    @tf.function(jit_compile=_xla_training(net) or None)
    def train_step(images, one_hot):
        with tf.GradientTape() as tape:
            margin, rec, lengths = losses(images, one_hot)
            total = tf.reduce_mean(margin + rec)
        grads = tape.gradient(total, variables)
        optimizer.apply(grads, variables)
        correct = tf.reduce_sum(tf.cast(tf.argmax(lengths, 1) == tf.argmax(one_hot, 1),
                                        tf.float32))
        return total, tf.reduce_mean(margin), tf.reduce_mean(rec), correct

    return train_step


def make_pair_train_step(name: str, net, optimizer):
    """make_train_step for two labels per image (MultiMNIST): the network's two-label loss
    (reportgen.training.two_label.pair_training_losses) on (images, labels (B, 2), the two
    source digits (B, 2, H, W, C)); correct = top-2."""
    import tensorflow as tf

    from reportgen.training.two_label import pair_training_losses, top2_correct

    losses = pair_training_losses(net)
    if losses is None:
        raise ReportgenError(
            f"Model {name} cannot be trained on two labels per image.",
            expected="a CapsNet with class-capsule lengths, or a CNN with logits",
            received=f"a {net.description.head.kind} head",
            fix="Give it a single-label data set, or train a MULTIMNIST_* model.")
    variables = net.model.trainable_variables

    @tf.function(jit_compile=_xla_training(net) or None)
    def train_step(images, labels, sources):
        with tf.GradientTape() as tape:
            classification, rec, scores = losses(images, labels, sources)
            total = tf.reduce_mean(classification + rec)
        grads = tape.gradient(total, variables)
        optimizer.apply(grads, variables)
        correct = tf.reduce_sum(top2_correct(labels, scores))
        return total, tf.reduce_mean(classification), tf.reduce_mean(rec), correct

    return train_step
