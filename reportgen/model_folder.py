"""The layout of one model folder, `models/NAME/`: every file name, pattern and path, in one place.

    models/NAME/
      params.toml                   the model, human-edited (its schema: reportgen.settings)
      README.md                     the author's own words about the model (Markdown, optional):
                                    shown at the top of its pages and in the supplement
      EPOCH-BATCH.weights.h5        the weights of each saved training step (`Step` <-> name)
      history.json                  one record per saved step
      train_state.npz               the optimizer state after the newest step, the run's settings
      group.json                    a run of a group (`train --seeds/--sweep`): its group, base
                                    model and the settings that differ from the base's
      archive/<time>/               an earlier run, moved aside by `train --fresh`
      archive/<time>-uncommitted/   weights without a history record, moved aside by `--resume`
      .tmp-XXXXXXXX.weights.h5|.npz|.json   a write in progress (then renamed onto its target)
      .tmp-step-E-B.weights.h5      a step's weights waiting for the step's commit

Everything but params.toml, README.md and group.json is a product of training and git-ignored
(`.gitignore`'s `models/*/` lines). One `reportgen train` per folder at a time: the lock is an
flock on the folder itself (`lock_path`, reportgen.file_locks), so no lock file ever appears in
it or is left behind by a kill. The order in which a step's files are committed, and what the next start does after a
kill, are in reportgen.training.run_state; the catalog (reportgen.catalog) finds and validates
the folders.

This module imports nothing of reportgen but errors and settings (no training, no catalog, no
TensorFlow), so every layer can read the layout from here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from reportgen.errors import ReportgenError
# The parameter file's name is defined beside its schema, one layer below (the schema's own
# messages name the file); every other module reads it from here.
from reportgen.settings.model_params import PARAMS_FILE, ModelParams, load_model_params

WEIGHTS_SUFFIX = ".weights.h5"
HISTORY_FILE = "history.json"
STATE_FILE = "train_state.npz"
GROUP_FILE = "group.json"
NOTES_FILE = "README.md"
NOTES_LIMIT = 64 * 1024     # bytes: a paragraph or a page, not a paper
ARCHIVE_DIR = "archive"
UNCOMMITTED_SUFFIX = "-uncommitted"
ARCHIVE_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"   # UTC, sortable, unique per microsecond
TEMP_PREFIX = ".tmp-"
PENDING_PREFIX = TEMP_PREFIX + "step-"
# The suffixes of atomic writes in a model folder (weights, the state, the history): a temporary
# name is TEMP_PREFIX + tempfile.mkstemp's 8 characters + one of these.
TEMP_SUFFIXES = (WEIGHTS_SUFFIX, ".npz", ".json")

_STEP = re.compile(r"^(\d+)-(\d+)$")
_ATOMIC_TEMP = re.compile(rf"^{re.escape(TEMP_PREFIX)}[a-z0-9_]{{8}}"
                          rf"({'|'.join(map(re.escape, TEMP_SUFFIXES))})$")
_PENDING = re.compile(rf"^{re.escape(PENDING_PREFIX)}(\d+)-(\d+){re.escape(WEIGHTS_SUFFIX)}$")


@dataclass(frozen=True, order=True)
class Step:
    """A training step: `batch` batches into epoch `epoch` (1-based); 0-0 is untrained."""

    epoch: int
    batch: int

    def __str__(self) -> str:
        return f"{self.epoch}-{self.batch}"

    @classmethod
    def parse(cls, text: str) -> "Step":
        match = _STEP.match(text.strip())
        if not match:
            raise ReportgenError("Invalid training step.", expected="EPOCH-BATCH, e.g. 3-100",
                                 received=repr(text))
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def from_filename(cls, name: str) -> "Step | None":
        """The step whose weights file is named `name` ('3-100.weights.h5'), or None."""
        if not name.endswith(WEIGHTS_SUFFIX):
            return None
        match = _STEP.match(name[: -len(WEIGHTS_SUFFIX)])
        return cls(int(match.group(1)), int(match.group(2))) if match else None

    @property
    def filename(self) -> str:
        return f"{self}{WEIGHTS_SUFFIX}"


def list_steps(model_dir: Path) -> list[Step]:
    """Every saved step of a model, in training order."""
    steps = (Step.from_filename(p.name) for p in Path(model_dir).glob(f"*{WEIGHTS_SUFFIX}"))
    return sorted(s for s in steps if s is not None)


def is_temporary(name: str) -> bool:
    """True for the names reportgen gives its own temporary files in a model folder (an atomic
    write in progress, or a step's pending weights); never for a file a user might own."""
    return bool(_ATOMIC_TEMP.match(name) or _PENDING.match(name))


def is_pending(name: str) -> bool:
    """True for a step's weights waiting for the step's commit (`.tmp-step-E-B.weights.h5`)."""
    return bool(_PENDING.match(name))


def is_training_product(name: str) -> bool:
    """True for the files a training run leaves in the folder (what `train --fresh` moves to
    archive/): the state, the history, pending weights and every weights file that is not a
    write in progress."""
    return (name in (STATE_FILE, HISTORY_FILE) or is_pending(name)
            or (name.endswith(WEIGHTS_SUFFIX) and not is_temporary(name)))


@dataclass(frozen=True)
class ModelFolder:
    """One model: its name (the folder's name), its folder, and where each of its files is."""

    name: str
    path: Path

    @classmethod
    def at(cls, path: str | Path) -> "ModelFolder":
        path = Path(path)
        return cls(path.name, path)

    # -- paths -----------------------------------------------------------------------------------
    @property
    def params_path(self) -> Path:
        return self.path / PARAMS_FILE

    @property
    def history_path(self) -> Path:
        return self.path / HISTORY_FILE

    @property
    def notes_path(self) -> Path:
        return self.path / NOTES_FILE

    @property
    def state_path(self) -> Path:
        return self.path / STATE_FILE

    @property
    def group_path(self) -> Path:
        return self.path / GROUP_FILE

    @property
    def archive_root(self) -> Path:
        return self.path / ARCHIVE_DIR

    @property
    def lock_path(self) -> Path:
        """What `reportgen train` locks: the folder itself (see the module docstring)."""
        return self.path

    def weights_path(self, step: Step) -> Path:
        return self.path / step.filename

    def pending_path(self, step: Step) -> Path:
        """Where step's weights wait until the step is committed."""
        return self.path / f"{PENDING_PREFIX}{step}{WEIGHTS_SUFFIX}"

    def archive_dir(self, when: datetime, uncommitted: bool = False) -> Path:
        """archive/<UTC time>/ (or <time>-uncommitted/) for files moved aside at `when`."""
        stamp = when.astimezone(timezone.utc).strftime(ARCHIVE_TIME_FORMAT)
        return self.archive_root / f"{stamp}{UNCOMMITTED_SUFFIX if uncommitted else ''}"

    # -- contents --------------------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        return list_steps(self.path)

    @property
    def params(self) -> ModelParams:
        """params.toml, validated; an unreadable file is a ReportgenError too."""
        path = self.params_path
        if path.is_symlink() and not path.exists():
            raise ReportgenError(f"Model parameter file {path} is a broken link.",
                                 fix=f"Point the link at a params.toml or replace {path} with one.")
        if path.exists() and not path.is_file():
            raise ReportgenError(f"Model parameter file {path} is not a file.",
                                 fix=f"Replace {path} with a params.toml file.")
        try:
            return load_model_params(path)
        except OSError as exc:  # a folder named params.toml, no permission, an I/O error
            raise ReportgenError(f"Cannot read the model parameter file {path}.",
                                 received=f"{type(exc).__name__}: {exc.strerror or exc}",
                                 fix=f"Make {path} a readable TOML file.") from exc

    def notes(self) -> str:
        """The author's Markdown about the model (README.md), or "" when there is none. One that
        is not UTF-8 text or longer than NOTES_LIMIT is a ReportgenError naming the file."""
        path = self.notes_path
        if not path.is_file():
            return ""
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ReportgenError(f"Cannot read the model's notes {path}.",
                                 received=f"{type(exc).__name__}: {exc.strerror or exc}",
                                 fix=f"Make {path} a readable Markdown file.") from exc
        if len(data) > NOTES_LIMIT:
            raise ReportgenError(f"The model's notes {path} are too long to show on its pages.",
                                 received=f"{len(data):,} bytes",
                                 fix=f"Keep {path} under {NOTES_LIMIT // 1024} KB (the paragraph "
                                     "about the model; link longer texts).")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReportgenError(f"The model's notes {path} are not UTF-8 text.",
                                 received=f"byte {exc.start}: {data[exc.start:exc.start + 1]!r}",
                                 fix=f"Save {path} as UTF-8.") from exc

    def history(self) -> list[dict]:
        """The training history (one record per saved step), or [] before training."""
        path = self.history_path
        if not path.is_file():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            problem = _history_problem(data)
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"an unreadable file ({getattr(exc, 'strerror', None) or exc})"
        if problem:
            raise ReportgenError(
                f"Training history {path} is corrupt.",
                expected="the JSON that `reportgen train` writes: an object with a 'records' "
                         "list, one object per saved step",
                received=problem,
                fix=f"Correct the value in {path}, or delete the file (the next training run "
                    "writes a new one, without the records of earlier steps)")
        return data["records"]


# What `reportgen train` writes into history.json, by kind of value: the pages, the listing and
# `--resume` read these as whole numbers, numbers or text, so a hand-edited value of another
# kind makes the model's history corrupt (that model fails alone) instead of a page.
_COUNTS = ("epoch", "batch", "images_seen", "training_images", "limit", "epochs", "batch_size",
           "save_every", "seed")
_FRACTIONS = ("train_accuracy", "val_accuracy", "until_accuracy")      # within [0, 1]
# finite numbers >= 0: the losses (the classification losses of reportgen's families,
# Family.classification_loss, among them), times and the optimizer's settings
_NUMBERS = ("loss", "margin_loss", "spread_loss", "nll", "cross_entropy", "reconstruction_loss",
            "seconds", "wall_seconds", "learning_rate", "momentum", "weight_decay")
# whole numbers a float holds exactly (the charts and the listing compute with them)
_LARGEST_COUNT = 2 ** 53
_TEXTS = ("model", "data", "dataset", "accuracy", "classification_loss", "optimizer")
RUN_SECTION = "training"           # history.json's key of the run's facts (training.run_info)


def _history_problem(data) -> str | None:
    """What is wrong with a parsed history.json, in a few words, or None."""
    if not isinstance(data, dict):
        return f"{_kind(data)} instead of an object"
    records = data.get("records")
    if not isinstance(records, list):
        return "no 'records' list"
    run = data.get(RUN_SECTION, {})
    if not isinstance(run, dict):
        return f"'{RUN_SECTION}' is {_kind(run)} instead of an object"
    for i, record in enumerate(records):
        step = record.get("step") if isinstance(record, dict) else None
        try:
            Step.parse(step if isinstance(step, str) else "")
        except ReportgenError:
            return f"record {i} without a valid 'step' ({step!r})"
    for where, values in ((None, data), (RUN_SECTION, run),
                          *((f"record {i} (step {r['step']})", r) for i, r in enumerate(records))):
        problem = _value_problem(values)
        if problem:
            return f"{where}: {problem}" if where else problem
    return None


def _value_problem(values: dict) -> str | None:
    """The first known key of `values` whose value is of the wrong kind, said, or None."""
    for key, value in values.items():
        if value is None:
            continue
        if key in _COUNTS:
            wrong = isinstance(value, bool) or not isinstance(value, int) or \
                not 0 <= value < _LARGEST_COUNT
            expected = f"a whole number from 0 to {_LARGEST_COUNT:,}"
        elif key in _FRACTIONS:
            wrong = not _is_number(value) or not 0 <= value <= 1
            expected = "a number from 0 to 1"
        elif key in _NUMBERS:
            wrong = not _is_number(value) or not 0 <= value < math.inf
            expected = "a finite number >= 0"
        elif key in _TEXTS:
            wrong = not isinstance(value, str)
            expected = "text"
        else:
            continue
        if wrong:
            return f"'{key}' is {_kind(value)} {json.dumps(value)[:40]}, expected {expected} or null"
    return None


def _is_number(value) -> bool:
    """A JSON number a float holds (a 360-digit integer does not: float() overflows)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _kind(value) -> str:
    kinds = {list: "an array", dict: "an object", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return kinds.get(type(value), "a value")
