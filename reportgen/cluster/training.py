"""`reportgen train GLOB --scheduler ADDRESS`: several models trained at once, one per Dask
worker.

Each task trains one model into its own folder (models/NAME/, which every worker must see at
the same path) exactly as `reportgen train NAME` would: the trainer commits each step's weights,
optimizer state and history record together, so a worker killed mid-run leaves a folder that
`reportgen train NAME --resume` continues. A task returns its outcome instead of raising: a
user error (a broken params.toml, a missing dataset) reaches the client as one line and is
never retried; Ctrl-C cancels the tasks not yet finished (on local:N their training stops with
the workers; a remote worker finishes the model it is training).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from reportgen import console

EXIT_WITH_PARENT = "REPORTGEN_EXIT_WITH_PARENT"


@dataclass(frozen=True)
class TrainOutcome:
    model: str
    last_step: str = ""
    val_accuracy: float | None = None
    seconds: float = 0.0
    worker: str = ""
    error: str | None = None


def train_one(models_dir: str, name: str, options: dict) -> dict:
    """On a worker: `reportgen train NAME` with `options` (reportgen.training.trainer.
    TrainOptions fields) in a process of its own; {last_step, val_accuracy, seconds, worker}
    or {error}.

    Its own process, because Keras draws its initial weights from Python's global `random`,
    which the worker's own threads also use: in the worker, a seeded run would not reproduce.
    The child's output stays on the worker; it exits when the worker does (EXIT_WITH_PARENT),
    leaving its model folder as a killed `reportgen train` does (resumable)."""
    import subprocess
    import sys

    start = time.perf_counter()
    args = [sys.executable, "-m", "reportgen", "--models-dir", models_dir, "train", name]
    for key, value in options.items():
        if value is None or value is False:
            continue
        args += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    env = {**os.environ, EXIT_WITH_PARENT: "1"}
    proc = subprocess.run(args, capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        errors = [line[len("Error: "):] for line in proc.stderr.splitlines()
                  if line.startswith("Error: ")]
        return {"error": errors[-1] if errors else
                f"reportgen train {name} exited with code {proc.returncode}"}
    from reportgen.model_folder import ModelFolder

    records = ModelFolder(name, Path(models_dir) / name).history()
    last = records[-1] if records else {}
    return {"last_step": str(last.get("step", "")), "val_accuracy": last.get("val_accuracy"),
            "seconds": time.perf_counter() - start,
            "worker": f"{socket.gethostname()}:{os.getpid()}"}


def exit_with_parent() -> None:
    """In a `reportgen train` started by `train_one`: end this process (as a kill would) when
    the worker that started it is gone, so cancelling a local cluster stops its training."""
    if not os.environ.get(EXIT_WITH_PARENT):
        return
    import threading

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(130)

    threading.Thread(target=watch, daemon=True, name="reportgen-exit-with-parent").start()


def train_on_cluster(scheduler: str, models_dir, names: list[str],
                     options: dict) -> list[TrainOutcome]:
    """Train every model of `names` on the cluster, one task each; the outcomes in the order
    they finished, with one progress bar over the models."""
    from distributed import as_completed

    from reportgen.cluster.scheduler import open_client, parse_scheduler

    spec = parse_scheduler(scheduler)
    root = str(os.path.abspath(models_dir))
    outcomes: list[TrainOutcome] = []
    with open_client(spec) as client:
        futures = {client.submit(train_one, root, name, options, pure=False, retries=0,
                                 key=f"reportgen-train-{name}"): name for name in names}
        try:
            with console.progress(len(futures), "train on the cluster", unit="model") as bar:
                for future in as_completed(futures):
                    name = futures[future]
                    try:
                        result = future.result()
                    except Exception as exc:      # e.g. KilledWorker: its workers kept dying
                        result = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())}
                    outcome = TrainOutcome(model=name, **result)
                    outcomes.append(outcome)
                    bar.update(1)
                    bar.set_postfix_str(f"{name} {'failed' if outcome.error else 'done'}")
        except BaseException:                 # Ctrl-C: stop what is still training
            client.cancel(list(futures), force=True)
            raise
    return outcomes
