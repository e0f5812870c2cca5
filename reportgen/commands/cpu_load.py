"""How busy the machine is right now, as the build's time estimate needs it
(reportgen.commands.build_time): how many times longer than on an idle machine the build's work
takes while other work shares the processor.

Counted from the kernel's run queue, not from the load average: `/proc/loadavg`'s fourth field
is the number of threads running or waiting for a core at this instant, and `/proc/self/task`
tells this process's own (and its child processes', the drawing worker's) from the rest. The
1-minute load average would still count, for a minute, the training `reportgen demo` just
finished, and would double the estimate of the build that follows it on an idle machine. One
instant says little on a busy machine (4.5x and 1.9x a few minutes apart at the same load
average of 7.5 on 2 cores): the estimate averages the looks a LoadSampler took from the
build's start until its plan is said.

A build wanting `d` cores (OWN_DEMAND before it has run, measured while it runs) on `cores`
cores shared with `o` other runnable threads gets each core's time in turns (the kernel's fair
scheduler): its work takes max(1, (d + o) / cores) times as long as alone, for d <= cores.
Where /proc is missing (not Linux), the machine counts as idle.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

# Cores a build keeps busy on its own: TensorFlow's kernels use every core, the drawing and the
# pages one (measured over a cold `reportgen demo` build on an idle 2-core machine).
OWN_DEMAND = 1.4
SAMPLES, SAMPLE_GAP_S = 8, 0.02    # the estimate's look before a build: 8 looks in 0.16 s


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def runnable_threads() -> tuple[int, int] | None:
    """(this process's threads running or ready to run, everyone else's) at this instant, or
    None where the kernel does not say (no /proc)."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        own = _running_threads("self", children=True)
    except OSError:
        return None
    own = max(0, own - 1)      # the thread reading this is running only to read it
    return own, max(0, running - own - 1)


def _running_threads(pid: str, children: bool = False) -> int:
    """Threads of process `pid` running or ready to run (and of its child processes)."""
    count = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
            kids = Path(f"/proc/{pid}/task/{task}/children").read_text().split() \
                if children else []
        except OSError:        # the thread ended meanwhile (or no children file)
            continue
        count += stat[stat.rfind(")") + 2:stat.rfind(")") + 3] == "R"
        for kid in kids:
            try:
                count += _running_threads(kid)
            except OSError:    # the child ended meanwhile
                pass
    return count


def slowdown(others: float, demand: float = OWN_DEMAND, n_cores: int | None = None) -> float:
    """How many times longer than alone work wanting `demand` cores takes beside `others`
    runnable threads (1.0: as fast as on an idle machine)."""
    n_cores = n_cores or cores()
    demand = min(max(demand, 0.1), n_cores)
    return max(1.0, (demand + max(0.0, others)) / n_cores)


def slowdown_now(samples: int = SAMPLES, gap_s: float = SAMPLE_GAP_S) -> float:
    """The slowdown a build starting now should expect, from a few looks at the run queue."""
    looks = []
    for i in range(samples):
        seen = runnable_threads()
        if seen is None:
            return 1.0
        looks.append(seen[1])
        if i + 1 < samples:
            time.sleep(gap_s)
    return slowdown(sum(looks) / len(looks))


class LoadSampler:
    """Looks at the run queue every `every_s` seconds from a background thread while a build
    runs; `slowdown()` is what the build's own demand beside the others' cost it on average."""

    def __init__(self, every_s: float = 0.25, look=runnable_threads):
        self.every_s = every_s
        self._look = look
        self._own = self._others = 0.0
        self._looks = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "LoadSampler":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="reportgen-load",
                                            daemon=True)
            self._thread.start()
        return self

    def __enter__(self) -> "LoadSampler":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.add(self._look())

    def reset(self) -> None:
        """Forget the looks so far (they saw a machine that has changed since)."""
        with self._lock:
            self._own = self._others = 0.0
            self._looks = 0

    def add(self, seen: tuple[int, int] | None) -> None:
        if seen is not None:
            with self._lock:
                self._own += seen[0]
                self._others += seen[1]
                self._looks += 1

    def expected_slowdown(self) -> float:
        """The slowdown a build starting now should expect (OWN_DEMAND beside the others the
        looks so far saw), with looks taken now up to SAMPLES of them."""
        while self._looks < SAMPLES:
            seen = self._look()
            if seen is None:
                return 1.0 if not self._looks else slowdown(self._others / self._looks)
            self.add(seen)
            if self._looks < SAMPLES:
                time.sleep(SAMPLE_GAP_S)
        return slowdown(self._others / self._looks)

    def slowdown(self) -> float:
        """The build's time / what it would have taken alone (1.0 before any look)."""
        if not self._looks:
            return 1.0
        own, others = self._own / self._looks, self._others / self._looks
        return slowdown(others, demand=max(own, 0.1))
