"""Drawing the dataset analyses' panels in a worker process while the next analysis computes.

A cold build spends about as long drawing the dataset analyses' figures (matplotlib: Python,
one core) as computing them (TensorFlow, seconds per analysis). As soon as an analysis' arrays
are stored, the build hands them to a worker process (`DrawingPool.submit`); when the step's
panels are assembled, `take` returns what the worker drew, and the store keeps it exactly as
if drawn in the build's own process (same renderers, same bytes). Figures the worker has not
begun by then are withdrawn and drawn by the build itself, so both cores draw. Renderers never
import TensorFlow: a worker starts in about a second, while the build imports TensorFlow.
(The inputs' panels are drawn in the build's process: handed to the worker, during the probe
pass or after it, they did not make a cold build faster per image; README, Benchmarks.)

`REPORTGEN_DRAWING_PROCESSES` overrides the choice of one worker on a machine with two cores
or more: 0 draws everything in the build's process, N > 0 uses N workers.
"""

from __future__ import annotations

import os
import signal

ENVIRONMENT = "REPORTGEN_DRAWING_PROCESSES"


def processes_for() -> int:
    """Worker processes for a build: one where there is a second core, unless the environment
    says otherwise."""
    chosen = os.environ.get(ENVIRONMENT, "").strip()
    if chosen:
        try:
            return max(0, int(chosen))
        except ValueError:
            from reportgen.errors import ReportgenError

            raise ReportgenError(f"{ENVIRONMENT} must be a whole number of processes.",
                                 received=repr(chosen),
                                 fix=f"set {ENVIRONMENT}=0 (draw in the build's process) or "
                                     f"a number of worker processes, or unset it") from None
    return 1 if (os.cpu_count() or 1) >= 2 else 0


class DrawingPool:
    """Figures drawn ahead in worker processes, keyed by their figure entry's key."""

    def __init__(self, processes: int):
        self.processes = processes
        self._executor = None
        self._pending: dict = {}

    def start(self) -> None:
        """Start the workers (each imports the renderers: about a second, while the build
        imports TensorFlow and builds its first model)."""
        if self.processes <= 0 or self._executor is not None:
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: the build's process runs TensorFlow's threads
        self._executor = ProcessPoolExecutor(
            self.processes, mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_started)
        for _ in range(self.processes):
            self._executor.submit(_warm_up)

    def submit(self, key: str, technique: str, arrays: dict, params, ctx) -> None:
        """Start drawing `technique`'s figures of `arrays` (what `Technique.render` gets)."""
        if self.processes <= 0 or key in self._pending:
            return
        self.start()
        self._pending[key] = self._executor.submit(_draw, technique, arrays, params, ctx)

    def take(self, key: str):
        """The figures drawn for `key` (a list of techniques.base.Figure), or None when none
        were started, the worker has not begun them (they are withdrawn: the caller draws
        them itself, so both cores draw) or drawing failed (the caller draws them and reports
        any error as a build always does)."""
        future = self._pending.pop(key, None)
        if future is None or future.cancel():
            return None
        try:
            return future.result()
        except Exception:       # noqa: BLE001 (a worker that died, or a renderer's error)
            return None

    def close(self) -> None:
        """Stop the workers; figures never taken are dropped (they are drawn when needed)."""
        self._pending.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


def _worker_started() -> None:
    # Ctrl-C at the terminal reaches the whole process group: the build handles it and stops
    # its workers; a worker must not print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _warm_up() -> None:
    import reportgen.figures.plots  # noqa: F401  (matplotlib and the shared chart helpers)
    from reportgen.techniques import all_techniques

    all_techniques()


def _draw(technique: str, arrays: dict, params, ctx) -> list:
    from reportgen.techniques import get_technique

    return list(get_technique(technique).render(arrays, params, ctx))
