"""How long one technique may compute at one step, and the line that names a slow one.

`watched(...)` wraps one call of a technique's `compute`. While it runs longer than
SLOW_AFTER_SECONDS a background thread says so in one line (model, step, technique, time so
far), again every REPEAT_SECONDS; nothing is said once the call has returned. Past the limit
the call is interrupted with TechniqueTooLong, and the engine fails that technique alone at
that step as it fails one that raised (reportgen.engine.step).

The interruption is a real-time timer's signal (setitimer(ITIMER_REAL) / SIGALRM, as the
plug-in import limit in reportgen.plugins): its handler raises between two Python
instructions, so a sleeping or looping technique stops at once and one inside a long C call
(a TensorFlow op) as soon as that call returns. Signals are handled only by the main thread
and do not exist on Windows: elsewhere (a Dask worker's thread) there is no hard limit, only
the line (and a call that returned after its limit is not failed).
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from reportgen import console
from reportgen.errors import ReportgenError

# Without --technique-seconds: 30 min per call, or 10 s per image the call computes over
# when more. The largest built-in analyses take about 0.3 s an image on a 2-core CPU (the MNIST
# baseline's explanation fidelity or adversarial robustness: docs' Benchmarks), a few times that
# for the largest models, so this leaves a slow or busy machine an order of magnitude to spare,
# and an evaluation set the user made larger gets proportionally longer; only work that is
# stuck or far off its normal cost reaches it.
DEFAULT_SECONDS = 1800
DEFAULT_SECONDS_PER_IMAGE = 10
SLOW_AFTER_SECONDS = 30.0    # a technique computing this long is named in a line...
REPEAT_SECONDS = 60.0        # ...and again this often while it goes on
OPTION = "--technique-seconds"


def default_seconds(images: int) -> int:
    """The limit of one call over `images` images when the user set none."""
    return max(DEFAULT_SECONDS, DEFAULT_SECONDS_PER_IMAGE * int(images))


def check_seconds(value) -> int | None:
    """--technique-seconds as given: None (the default) or a whole number of seconds >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ReportgenError(f"Invalid {OPTION}.",
                             expected="a whole number of seconds >= 1 that one technique may "
                                      "compute at one step",
                             received=repr(value),
                             fix=f"give e.g. {OPTION} 3600, or leave it out for the default "
                                 f"({DEFAULT_SECONDS // 60} min, {DEFAULT_SECONDS_PER_IMAGE} s "
                                 f"per image when more)")
    return value


class TechniqueTooLong(ReportgenError):
    """A technique's compute ran past its limit (its message is the failure's one line)."""

    def __init__(self, technique: str, seconds: float):
        super().__init__(f"Technique '{technique}' did not finish within {seconds:g} s at "
                         f"this step, the limit of one technique at one step, and was stopped",
                         fix=f"raise the limit with {OPTION} N (technique_seconds = N in a "
                             f"--config file)")
        self.technique, self.seconds = technique, seconds


class _Call:
    """One watched call: what the line says about it, when it is said next, whether its limit
    interrupted it."""

    def __init__(self, label: str, limit: float | None, started: float):
        self.label, self.limit, self.started = label, limit, started
        self.next_line = started + SLOW_AFTER_SECONDS
        self.armed = False       # the alarm may raise (only inside the call itself)
        self.expired = False     # the alarm went off


class _Lines:
    """One daemon thread per process saying which calls are still computing. Lines are written
    while holding `_cond`, and a call is taken off under it: once `watched` has returned, no
    line about its call can follow."""

    def __init__(self):
        self._cond = threading.Condition()
        self._calls: set[_Call] = set()
        self._thread: threading.Thread | None = None

    def add(self, call: _Call) -> None:
        with self._cond:
            self._calls.add(call)
            if self._thread is None or not self._thread.is_alive():   # a forked child has none
                self._thread = threading.Thread(target=self._run, name="reportgen-slow-lines",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, call: _Call) -> None:
        with self._cond:
            self._calls.discard(call)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for call in sorted(self._calls, key=lambda c: c.started):
                    if call.next_line <= now:
                        console.notice(_line(call, now))
                        call.next_line = now + REPEAT_SECONDS
                due = [c.next_line for c in self._calls]
                self._cond.wait(max(0.0, min(due) - time.monotonic()) if due else None)


_lines = _Lines()


def _line(call: _Call, now: float) -> str:
    limit = f", limit {console.duration(call.limit)}" if call.limit else ""
    return f"  {call.label} still computing ({console.duration(now - call.started)} so " \
           f"far{limit})"


@contextmanager
def watched(label: str, technique: str, limit: float | None) -> Iterator[_Call]:
    """Run the block as one technique's compute: `label` ("MODEL STEP: Title") names it in the
    slow line; past `limit` seconds (None: none) TechniqueTooLong is raised in it. The
    yielded call's `expired` is True when the limit went off, even if the technique caught
    the exception. Any SIGALRM handler and real-time timer set before are given back."""
    started = time.monotonic()
    hard = limit is not None and _can_interrupt()
    call = _Call(label, limit if hard else None, started)
    _lines.add(call)
    previous = None
    if hard:
        def interrupt(signum, frame):
            call.expired = True
            if call.armed:
                raise TechniqueTooLong(technique, limit)

        previous = signal.signal(signal.SIGALRM, interrupt)
        before = signal.setitimer(signal.ITIMER_REAL, limit)[0]
        call.armed = True
    try:
        yield call
    finally:
        try:
            call.armed = False      # an alarm arriving before this still raises, once
        finally:
            if hard:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                if before:          # someone else's timer: given back, less the time spent
                    left = before - (time.monotonic() - started)
                    signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6))
            _lines.remove(call)


def _can_interrupt() -> bool:
    """Whether a SIGALRM can interrupt this thread: the main thread of a platform with
    setitimer, and a previous handler that can be given back (one set from C cannot)."""
    return (hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGALRM) is not None)
