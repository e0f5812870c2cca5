"""Drawing dataset panels in a worker process while the build computes the next analysis.

A cold build spends about as long drawing the dataset analyses' figures (matplotlib: Python,
one core) as computing them (TensorFlow). As soon as an analysis' arrays are stored, the build
hands them to a worker process (`DrawingPool.submit`); when the step's panels are assembled,
`take` returns what the worker drew, and the store keeps it exactly as if drawn in the build's
own process (same renderers, same bytes). Renderers never import TensorFlow, so a worker
starts in about a second: it is started only for builds with much to draw (`worth_a_process`).

`REPORTGEN_DRAWING_PROCESSES` overrides the choice: 0 draws everything in the build's process,
N > 0 uses N workers whatever the build's size.
"""

from __future__ import annotations

import os
import signal

ENVIRONMENT = "REPORTGEN_DRAWING_PROCESSES"
# Estimated seconds of dataset figures below which a worker does not pay for its start (~1 s
# of CPU importing NumPy, matplotlib and the renderers) and the second core it takes.
WORTH_A_PROCESS_S = 30.0


def processes_for(estimated_drawing_seconds: float) -> int:
    """Worker processes for a build expected to draw its dataset figures for that long."""
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
    if (os.cpu_count() or 1) < 2 or estimated_drawing_seconds < WORTH_A_PROCESS_S:
        return 0
    return 1


class DrawingPool:
    """Figures drawn ahead in worker processes, keyed by their figure entry's key."""

    def __init__(self, processes: int):
        self.processes = processes
        self._executor = None
        self._pending: dict = {}

    def submit(self, key: str, technique: str, arrays: dict, params, ctx) -> None:
        """Start drawing `technique`'s figures of `arrays` (what `Technique.render` gets)."""
        if self.processes <= 0 or key in self._pending:
            return
        if self._executor is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawn, not fork: the build's process runs TensorFlow's threads
            self._executor = ProcessPoolExecutor(
                self.processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_started)
        self._pending[key] = self._executor.submit(_draw, technique, arrays, params, ctx)

    def take(self, key: str):
        """The figures drawn for `key` (a list of techniques.base.Figure), or None when none
        were started or drawing failed (the caller draws them itself and reports any error
        as a build always does)."""
        future = self._pending.pop(key, None)
        if future is None:
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


def _draw(technique: str, arrays: dict, params, ctx) -> list:
    from reportgen.techniques import get_technique

    return list(get_technique(technique).render(arrays, params, ctx))
