"""The on-disk state of a training run in models/NAME/, and how a saved step is committed.

A saved step S is three things that must agree: its weights (`S.weights.h5`), the train state
(`train_state.npz`: the optimizer's variables after S, i.e. Adam's moments and iteration count,
the run's settings and a full copy of the history) and its record in `history.json`. They are
written in this order (each file written beside its target, flushed to disk, then renamed):

1. the weights, to the pending file `.tmp-step-S.weights.h5`;
2. `train_state.npz` naming step S -- the commit point: S is saved once this rename happened;
3. `history.json`, the same history as in the state;
4. the pending weights renamed to `S.weights.h5`.

So at every moment each `E-B.weights.h5` in the folder has its record in `history.json` and, if
it is the newest, the optimizer state of `train_state.npz`. A kill before (2) loses only step S,
which the resumed run recomputes from the previous step; a kill after (2) is completed by
`recover` at the next start of `reportgen train` for that model: it renames the committed
pending weights into place, rewrites `history.json` from the state, and deletes every other
temporary file reportgen names (`.tmp-` + mkstemp's 8 characters + `.weights.h5`/`.npz`/`.json`,
and `.tmp-step-E-B.weights.h5`), never any other file. A weights file without a record in the
committed history (from an older reportgen that wrote the weights first, or copied in by hand)
is moved to `archive/<time>-uncommitted/` on `--resume`, never deleted and never kept with a
gap in the history.

The names and paths (and the `is_temporary` test) are reportgen.model_folder's; every function
here takes a `ModelFolder`. `STATE_FILE` and `is_temporary` are re-exported for the code that
imports them from this module.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from reportgen import file_locks
from reportgen.errors import ReportgenError
from reportgen.model_folder import (STATE_FILE, ModelFolder, Step, is_temporary,
                                    is_training_product)
from reportgen.training.checkpoints import (atomic_path, atomic_write_text, fsync_dir,
                                            fsync_file)

STATE_FORMAT = 1  # the layout of the arrays inside train_state.npz


@dataclass
class Committed:
    """What `train_state.npz` (or, without one, `history.json`) says was saved last."""

    step: Step | None                    # None: nothing committed
    history: dict = field(default_factory=dict)      # the history.json document
    settings: dict = field(default_factory=dict)     # seed, batch_size, limit, data, ...
    optimizer: list[np.ndarray] | None = None        # optimizer.variables, in order
    optimizer_names: list[str] = field(default_factory=list)
    has_history: bool = False            # the state carries the history (not an older state)

    @property
    def records(self) -> list[dict]:
        return list(self.history.get("records", []))


# --- writing ---------------------------------------------------------------------------------

def commit_step(folder: ModelFolder, step: Step, write_weights: Callable[[Path], None],
                optimizer_variables, history: dict, settings: dict) -> None:
    """Save step `step` in the order the module docstring gives; Ctrl-C waits until it is done."""
    pending = folder.pending_path(step)
    history_text = json.dumps(history, indent=1)
    with sigint_deferred():
        try:
            write_weights(pending)
            fsync_file(pending)
            with atomic_path(folder.state_path, suffix=".npz") as tmp:
                _write_state(tmp, step, optimizer_variables, history_text, settings)
        except BaseException:
            # not committed (a full disk, an error writing): the pending weights are nobody's,
            # so they go now rather than hold the disk until the next `train`
            if _committed_step(folder) != str(step):
                pending.unlink(missing_ok=True)
            raise
        atomic_write_text(folder.history_path, history_text)
        os.replace(pending, folder.weights_path(step))
        fsync_dir(folder.path)


def _committed_step(folder: ModelFolder) -> str | None:
    """The step train_state.npz names, or None (no state, or one that cannot be read)."""
    try:
        with open(folder.state_path, "rb") as handle, \
                np.load(handle, allow_pickle=False) as npz:
            return str(npz["step"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None


def _write_state(path: Path, step: Step, optimizer_variables, history_text: str,
                 settings: dict) -> None:
    arrays = {f"opt_{i}": np.asarray(v) for i, v in enumerate(optimizer_variables)}
    names = [getattr(v, "path", f"variable_{i}") for i, v in enumerate(optimizer_variables)]
    np.savez(path, format=np.array(STATE_FORMAT), step=np.array(str(step)),
             history=np.array(history_text), settings=np.array(json.dumps(settings)),
             optimizer_names=np.array(names), **arrays)


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C that arrives mid-commit until the commit is complete, then raise it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda *args: caught.append(args))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(*caught[0])
    elif caught and previous == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


# --- reading ---------------------------------------------------------------------------------

def read_state(folder: ModelFolder) -> Committed | None:
    """The committed state, or None without a state file. Corrupt files raise a one-line error."""
    path, name = folder.state_path, folder.name
    if not path.is_file():
        return None
    fix = (f"Delete {path} (`reportgen train {name} --resume` then continues from the latest "
           f"weights file with a fresh optimizer) or start over with `reportgen train {name} "
           f"--fresh`")
    try:
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
            files = set(npz.files)
            step = Step.parse(str(npz["step"]))
            if "format" not in files:  # written before the history copy existed
                optimizer = [npz[f"v{i}"] for i in range(len(files) - 1)]
                return Committed(step, optimizer=optimizer)
            count = sum(1 for f in files if f.startswith("opt_"))
            return Committed(step, history=json.loads(str(npz["history"])),
                             settings=json.loads(str(npz["settings"])),
                             optimizer=[npz[f"opt_{i}"] for i in range(count)],
                             optimizer_names=[str(s) for s in npz["optimizer_names"]],
                             has_history=True)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ReportgenError(f"Training state {path} is unreadable (truncated or not a "
                             "reportgen train state)", received=_first_line(exc), fix=fix) from exc
    except ReportgenError as exc:  # a malformed step name inside
        raise ReportgenError(f"Training state {path} is unreadable", received=exc.what,
                             fix=fix) from exc


def read_history(folder: ModelFolder) -> dict | None:
    """history.json as a document, or None when absent. A corrupt file raises a one-line error.

    (The catalog's `ModelFolder.history()` reads the same file for listing and building; this
    reader's fix tells how a training run rebuilds it.)
    """
    path, name = folder.history_path, folder.name
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        [Step.parse(r["step"]) for r in doc["records"]]
        return doc
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, ReportgenError) as exc:
        has_state = folder.state_path.is_file()
        raise ReportgenError(
            f"Training history {path} is unreadable (truncated or not a reportgen history)",
            received=_first_line(exc),
            fix=f"Delete {path}; `reportgen train {name} --resume` rewrites it from "
                f"{STATE_FILE}" if has_state else
                f"Restore {path}, or start over with `reportgen train {name} --fresh`") from exc


def _first_line(exc: BaseException) -> str:
    text = exc.what if isinstance(exc, ReportgenError) else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0][:200]


# --- recovery --------------------------------------------------------------------------------

def recover(folder: ModelFolder) -> tuple[Committed, list[str]]:
    """Complete a step committed before a kill and delete reportgen's temporary files.

    Returns the committed state (step None when nothing was committed) and notices for the user.
    Reads the state first, so a corrupt state file stops here with its one-line error.
    """
    notices: list[str] = []
    state = read_state(folder)
    if state is not None and not state.has_history:  # an older state: history.json rules
        state.history = read_history(folder) or {"records": []}
    keep = None  # the committed step's pending weights: renamed below, after history.json
    if state is not None and not folder.weights_path(state.step).exists():
        keep = folder.pending_path(state.step)
    remove_temporary_files(folder, keep=keep)
    if state is None:
        history = read_history(folder)
        records = history["records"] if history else []
        step = Step.parse(records[-1]["step"]) if records else None
        return Committed(step, history=history or {}), notices
    history_text = json.dumps(state.history, indent=1)
    history_path = folder.history_path
    current = history_path.read_text(encoding="utf-8") if history_path.is_file() else None
    if state.has_history and current != history_text:
        if current is not None:
            read_history(folder)  # a corrupt history.json is reported, not replaced
        atomic_write_text(history_path, history_text)
        notices.append(f"Completed {history_path} from {STATE_FILE} (step {state.step}).")
    pending = folder.pending_path(state.step)
    if pending.is_file():
        os.replace(pending, folder.weights_path(state.step))
        fsync_dir(folder.path)
        notices.append(f"Completed step {state.step}: its weights were written before the "
                       "interruption.")
    return state, notices


def remove_temporary_files(folder: ModelFolder, keep: Path | None = None) -> None:
    """Delete the leftovers of interrupted writes: only names `is_temporary` accepts."""
    for path in folder.path.iterdir():
        if path.is_file() and is_temporary(path.name) and path != keep:
            path.unlink()


def archive_uncommitted(folder: ModelFolder,
                        committed: Committed) -> tuple[Path | None, list[Step]]:
    """Move weights files that have no record in the committed history to archive/."""
    known = {r["step"] for r in committed.records}
    stray = [s for s in folder.steps if str(s) not in known]
    if not stray:
        return None, []
    target = _archive_folder(folder, uncommitted=True)
    for step in stray:
        shutil.move(str(folder.weights_path(step)), target / step.filename)
    return target, stray


def archive_run(folder: ModelFolder) -> Path | None:
    """Move a run's products (weights, state, history) to archive/<UTC time>/; never delete."""
    products = [p for p in folder.path.iterdir() if p.is_file() and is_training_product(p.name)]
    if not products:
        return None
    target = _archive_folder(folder)
    # the state first: a kill midway leaves weights without a committed history, which the
    # next --resume archives too, never trains on top of
    for path in sorted(products, key=lambda p: p.name != STATE_FILE):
        shutil.move(str(path), target / path.name)
    return target


def _archive_folder(folder: ModelFolder, uncommitted: bool = False) -> Path:
    target = folder.archive_dir(datetime.now(timezone.utc), uncommitted=uncommitted)
    target.mkdir(parents=True)
    return target


@contextmanager
def training_lock(folder: ModelFolder) -> Iterator[None]:
    """One `reportgen train` per model at a time (the recovery deletes temporary files). The
    lock is on the folder itself (reportgen.file_locks: why not filelock)."""
    name, model_dir = folder.name, folder.lock_path
    fd = os.open(model_dir, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            locked = file_locks.try_lock(fd)
        except OSError:
            locked = True  # a file system without locks: train unguarded, as before
        if not locked:
            raise ReportgenError(f"Another `reportgen train {name}` is running on {model_dir}",
                                 fix="Wait for it to finish, or stop it first")
        yield
    finally:
        os.close(fd)  # also releases the lock; the kernel releases it when a process dies
