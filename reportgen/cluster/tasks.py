"""What a worker runs: one (model, step) — build the model (once per model on this worker),
load the step's weights once, compute every missing result into the shared store.

A task returns its outcome instead of raising, so a user error (a broken weights file) reaches
the client as one line and is never retried; only a worker that dies is replaced and its task
run again elsewhere (Dask reschedules it). Entries are written whole, so a killed worker leaves
no partial one.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import time
from dataclasses import dataclass

from reportgen.errors import ReportgenError, StoreError

_HOOK_DIR = "REPORTGEN_CLUSTER_HOOK_DIR"      # tests: where tasks note that they run
_PAUSE_AFTER = "REPORTGEN_CLUSTER_PAUSE_AFTER"  # tests: the first task pauses after N entries


@dataclass(frozen=True)
class StepTask:
    """Everything a worker needs for one step besides the model's inputs (sent once a model)."""

    model: str
    step: str
    params: object              # reportgen.settings.model_params.ModelParams
    weights: str                # absolute path, the same on every worker (a shared folder)
    variants: tuple             # (technique name, technique params)
    keys: object                # reportgen.engine.step.StepKeys, planned on the client
    store: str                  # the store's URL or absolute folder
    batch_size: int


_state: dict = {"digest": None, "handle": None, "stores": {}}


def run_step(task: StepTask, shared) -> dict:
    """{computed, reused, seconds, worker, notices} or {error, kind: user | store | bug}."""
    start = time.perf_counter()
    notes = io.StringIO()
    try:
        with contextlib.redirect_stderr(notes):
            counts = _compute(task, *shared)
    except StoreError as exc:
        return {"error": exc.message, "kind": "store"}
    except ReportgenError as exc:
        return {"error": exc.message, "kind": "user"}
    except Exception as exc:             # a bug: reported with its (model, step), not retried
        return {"error": " ".join(f"{type(exc).__name__}: {exc}".split()), "kind": "bug"}
    return {"computed": counts.computed, "reused": counts.reused,
            "seconds": time.perf_counter() - start,
            "worker": f"{socket.gethostname()}:{os.getpid()}",
            "notices": [line for line in notes.getvalue().splitlines() if line.strip()]}


def _compute(task: StepTask, inputs, eval_set):
    from reportgen.engine.step import compute_step
    from reportgen.techniques import get_technique

    store = _store(task.store)
    _hook_started(task)
    if os.environ.get(_HOOK_DIR) and os.environ.get(_PAUSE_AFTER):
        store = _PausingStore(store, int(os.environ[_PAUSE_AFTER]), f"{task.model} {task.step}")
    variants = tuple((get_technique(name), p) for name, p in task.variants)
    return compute_step(_handle(task.params), task.weights, variants, inputs, eval_set,
                        task.keys, store, task.batch_size,
                        {"model": task.model, "step": task.step})


def _store(location: str):
    from reportgen.cache.backends import open_store

    stores = _state["stores"]
    if location not in stores:
        stores[location] = open_store(location)
    return stores[location]


def _handle(params):
    """The model of `params`, built once on this worker while its tasks keep coming; Keras'
    global state is cleared before another model is built (as an in-process build does)."""
    from reportgen.engine.model import ModelHandle, build_keras_model, model_digest

    digest = model_digest(params)
    if _state["digest"] != digest:
        if _state["handle"] is not None and _state["handle"].built:
            import keras

            keras.backend.clear_session()
        _state["digest"], _state["handle"] = digest, ModelHandle(params, build=build_keras_model)
    return _state["handle"]


# -- tests' synchronisation (kill a worker at a chosen moment, no sleeping) ----------------------
def _hook_started(task: StepTask) -> None:
    folder = os.environ.get(_HOOK_DIR)
    if folder:
        name = f"started-{os.getpid()}-{task.model}-{task.step}-{time.time_ns()}"
        with open(os.path.join(folder, name), "w"):
            pass


class _PausingStore:
    """The first task (across the cluster) to write N entries writes `paused` ("PID MODEL
    STEP") and waits there to be killed; every other task runs through."""

    def __init__(self, store, after: int, label: str):
        self._store, self._after, self._label, self._puts = store, after, label, 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_arrays(self, key, arrays, meta):
        self._store.put_arrays(key, arrays, meta)
        self._puts += 1
        if self._puts != self._after:
            return
        path = os.path.join(os.environ[_HOOK_DIR], "paused")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()} {self._label}".encode())
        os.close(fd)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:     # bounded: a test that never kills moves on
            time.sleep(0.05)
