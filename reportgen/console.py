"""The one place that prints: notices, progress bars, summaries.

Progress goes to stderr so that `--json` output on stdout stays machine-readable. A progress
bar is drawn only on a terminal; when stderr is a file or a pipe (CI logs, `2>build.log`) each
bar prints one final line instead of carriage-return redraws and escape codes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from typing import Iterator

from tqdm import tqdm

_shown: set[str] | None = None      # notices printed in this command (None: not deduplicated)
_lock = threading.Lock()
_debug = False                      # --debug: tracebacks of the failures a run goes past


def show_tracebacks(on: bool) -> None:
    """`--debug` (the CLI calls this per command)."""
    global _debug
    _debug = bool(on)


def failure_traceback(exc: BaseException) -> None:
    """With --debug (or REPORTGEN_DEBUG set), the full traceback of a failure the run reports
    in one line and goes past (a model or a step that failed while the others were built)."""
    if _debug or os.environ.get("REPORTGEN_DEBUG"):
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        sys.stderr.flush()


def notices_once() -> None:
    """From now on each distinct notice prints once (the CLI calls this per command): a
    dataset loaded again for another model or technique does not repeat its notice."""
    global _shown
    with _lock:
        _shown = set()


def notice(message: str) -> None:
    """A one-line notice for the user (e.g. which data source was used)."""
    with _lock:      # one write under the lock: notices of drawing threads never interleave
        if _shown is not None:
            if message in _shown:
                return
            _shown.add(message)
        if _interactive() and tqdm._instances:
            # a bar is drawn: tqdm clears it, writes the line above it and draws it again
            tqdm.write(message, file=sys.stderr)
        else:
            sys.stderr.write(message + "\n")
        sys.stderr.flush()


def echo(message: str = "") -> None:
    """Normal output on stdout."""
    print(message, flush=True)


def _interactive() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):     # replaced or closed stream
        return False


# Away from a terminal (a log file, CI, nohup), a progress line this often on long work, so
# that a log is not silent between its first and last line.
LOG_EVERY_SECONDS = 60.0


class _FinalLine:
    """What a progress bar offers its callers (update, postfix), away from a terminal: a line
    every LOG_EVERY_SECONDS while the work goes on (`description: n/total unit (P%) after 1 min
    00 s, about 2 min 30 s left`) and one when it closes: `description: n/total unit in
    12.3 s (postfix)`."""

    def __init__(self, total: int | None, description: str, unit: str):
        self.total, self.desc, self.unit = total, description, unit
        self.n = 0
        self.postfix = ""
        self._start = time.monotonic()
        self._logged = self._start
        self._closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY_SECONDS:
            self._logged = now
            print(self._line(now - self._start), file=sys.stderr, flush=True)

    def _line(self, elapsed: float) -> str:
        """The line of work still going on: done so far, elapsed, and (with a total) what is
        left at the rate so far."""
        done = f"{self.n:,}/{self.total:,} {self.unit} ({100 * self.n / self.total:.0f}%)" \
            if self.total else f"{self.n:,} {self.unit}"
        left = ""
        if self.total and 0 < self.n < self.total:
            left = f", about {duration(elapsed * (self.total - self.n) / self.n)} left"
        postfix = f" ({self.postfix})" if self.postfix else ""
        return f"{self.desc}: {done} after {duration(elapsed)}{left}{postfix}"

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **kwargs) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = str(s)

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def refresh(self, *args, **kwargs) -> None:
        pass

    def write(self, s: str, *args, **kwargs) -> None:
        print(s, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        total = f"/{self.total:,}" if self.total is not None else ""
        line = (f"{self.desc}: {self.n:,}{total} {self.unit} in "
                f"{time.monotonic() - self._start:.1f} s")
        print(line + (f" ({self.postfix})" if self.postfix else ""), file=sys.stderr, flush=True)


def duration(seconds: float) -> str:
    """`1 min 05 s`, `42 s`: how long work took, in the progress lines' words."""
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


@contextmanager
def progress(total: int | None, description: str, unit: str = "it") -> Iterator[tqdm]:
    """A progress bar on stderr on a terminal; elsewhere a line every LOG_EVERY_SECONDS of
    work and a final line."""
    if _interactive():
        bar = tqdm(total=total, desc=description, unit=unit, file=sys.stderr,
                   dynamic_ncols=True, mininterval=0.5, leave=True)
    else:
        bar = _FinalLine(total, description, unit)
    try:
        yield bar
    finally:
        bar.close()
