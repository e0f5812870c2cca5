"""Drawing the dataset analyses' panels in a worker process while the next analysis computes.

A cold build spends about as long drawing the dataset analyses' figures (matplotlib: Python,
one core) as computing them (TensorFlow, seconds per analysis). As soon as an analysis' arrays
are stored, the build hands them to a worker process (`DrawingPool.submit`); when the step's
panels are assembled, `take` returns what the worker drew, and the store keeps it exactly as
if drawn in the build's own process (same renderers, same bytes). Figures the worker has not
begun by then are withdrawn and drawn by the build itself, so both cores draw. Renderers never
import TensorFlow: a worker starts in about a second, while the build imports TensorFlow.
A worker is `python -m reportgen.pages.drawing_pool` reading pickled jobs on its standard input
(not a multiprocessing pool: that re-imports the caller's main script in the worker, which
reruns a user's unguarded script and could wait for the build's own lock).
(The inputs' panels are drawn in the build's process: handed to the worker, during the probe
pass or after it, they did not make a cold build faster per image; README, Benchmarks.)

`REPORTGEN_DRAWING_PROCESSES` overrides the choice of one worker on a machine with two cores
or more: 0 draws everything in the build's process, N > 0 uses N workers.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future
from pathlib import Path

ENVIRONMENT = "REPORTGEN_DRAWING_PROCESSES"
_HEADER = struct.Struct("!Q")          # each message: its length, then a pickle


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


def _send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    """The next message, or None at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None


class DrawingPool:
    """Figures drawn ahead in worker processes, keyed by their figure entry's key.

    Jobs wait here, in order, until a worker is free: one still waiting can be withdrawn
    (`take` draws it in the build's process instead)."""

    def __init__(self, processes: int):
        self.processes = processes
        self._pending: dict[str, Future] = {}
        self._queue: deque = deque()
        self._ready = threading.Condition()
        self._workers: list[subprocess.Popen] = []
        self._threads: list[threading.Thread] = []
        self._closing = False

    def start(self) -> None:
        """Start the workers (each imports the renderers: about a second, while the build
        imports TensorFlow and builds its first model)."""
        if self.processes <= 0 or self._workers:
            return
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                              if p])}
        for _ in range(self.processes):
            worker = subprocess.Popen([sys.executable, "-m", "reportgen.pages.drawing_pool"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
            thread = threading.Thread(target=self._serve, args=(worker,), daemon=True,
                                      name="reportgen-drawing")
            self._workers.append(worker)
            self._threads.append(thread)
            thread.start()

    def submit(self, key: str, technique: str, arrays: dict, params, ctx) -> None:
        """Start drawing `technique`'s figures of `arrays` (what `Technique.render` gets)."""
        if self.processes <= 0 or key in self._pending:
            return
        self.start()
        future: Future = Future()
        self._pending[key] = future
        with self._ready:
            self._queue.append((future, (technique, arrays, params, ctx)))
            self._ready.notify()

    def take(self, key: str):
        """The figures drawn for `key` (a list of techniques.base.Figure), or None when none
        were started, no worker has begun them (they are withdrawn: the caller draws them
        itself, so both cores draw) or drawing failed (the caller draws them and reports any
        error as a build always does)."""
        future = self._pending.pop(key, None)
        if future is None or future.cancel():
            return None
        try:
            return future.result()
        except Exception:       # noqa: BLE001 (a worker that died, or a renderer's error)
            return None

    def close(self) -> None:
        """Stop the workers; figures never taken are dropped (they are drawn when needed)."""
        with self._ready:
            self._closing = True
            for future, _ in self._queue:
                future.cancel()
            self._queue.clear()
            self._ready.notify_all()
        self._pending.clear()
        for worker in self._workers:
            try:
                worker.stdin.close()            # the worker's end of input: it exits
            except OSError:
                pass
        for worker, thread in zip(self._workers, self._threads):
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            thread.join(timeout=5)
            if worker.stdout is not None:
                worker.stdout.close()
        self._workers, self._threads = [], []

    def _serve(self, worker: subprocess.Popen) -> None:
        """Hand one worker the next job whenever it is free, until the pool closes."""
        while True:
            with self._ready:
                while not self._queue and not self._closing:
                    self._ready.wait()
                if self._closing:
                    return
                future, job = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue                        # withdrawn by `take`
            try:
                _send(worker.stdin, job)
                reply = _receive(worker.stdout)
            except (OSError, ValueError) as exc:  # the worker is gone (or the pool closed)
                reply = ("error", repr(exc))
            if reply is None or reply[0] != "ok":
                future.set_exception(RuntimeError(f"drawing worker: {reply!r}"[:500]))
                if reply is None:
                    return self._fail_waiting()
            else:
                future.set_result(reply[1])

    def _fail_waiting(self) -> None:
        """A worker died: what waits for it is drawn by the build (its `take` gets None)."""
        with self._ready:
            for future, _ in self._queue:
                future.cancel()
            self._queue.clear()


def _warm_up() -> None:
    import reportgen.figures.plots  # noqa: F401  (matplotlib and the shared chart helpers)
    from reportgen.techniques import all_techniques

    all_techniques()


def _draw(technique: str, arrays: dict, params, ctx) -> list:
    from reportgen.techniques import get_technique

    return list(get_technique(technique).render(arrays, params, ctx))


def _worker() -> None:
    """A worker's loop: a job in on standard input, its figures (or the error) out."""
    # Ctrl-C at the terminal reaches the whole process group: the build handles it and closes
    # the pool; a worker must not print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests, replies = sys.stdin.buffer, os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())   # a stray print cannot break a reply
    from reportgen import plugins

    plugins.quiet = True              # the build that started it says what did not load
    _warm_up()
    while True:
        job = _receive(requests)
        if job is None:
            return
        try:
            reply = ("ok", _draw(*job))
        except Exception as exc:                # noqa: BLE001 (the build draws it again)
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            _send(replies, reply)
        except OSError:                         # the build is gone (killed): so is its work
            return


if __name__ == "__main__":
    _worker()
