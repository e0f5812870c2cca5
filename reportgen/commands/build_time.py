"""How long a build takes when nothing is cached: the estimate said before it starts, corrected
while it runs, and the measured costs it comes from (README, `reportgen build`).

A build is counted in kinds of work (KINDS), each a number of units times a unit cost:

    build           once: TensorFlow's import, the comparisons, the pages and MkDocs
    model           per model: its Keras model, the input gallery, filmstrip and trends
    step            per chosen step: weights, checkpoint analyses, the accuracy pass, figures
    input           per (step, input): the probe pass and the input's figures
    analysed_step   per step with dataset analyses: their figures
    eval_image      per (analysed step, evaluation image): the dataset analyses

A unit cost is kept per model family, size class and technique set (`cost_group`; the start-up
and site per size class, `build_group`), at MNIST_Demo's size (`size_factor`: bigger models
cost more per unit) and as it would be on an idle machine: a build divides what it measured by
how much other work slowed it (reportgen.commands.cpu_load: the run queue, sampled while it
runs), and an estimate multiplies by how busy the machine is as the build starts. A build
estimates with what the builds before it measured on this machine (CALIBRATION_FILE, per host
name; the median of the last few builds' measurements), else with the reference costs (measured on
this project's 2-core CPU) scaled by how fast this processor is (`machine_slowness`: a fixed
NumPy and Python workload of at most 0.3 s, run only when a reference cost is needed, so a
rebuild on a machine that has built before pays nothing). While it runs, what remains is
re-estimated from how long the steps done so far took against their estimate
(`BuildClock.remaining`): other work starting mid-build shows there from the next computed
step on.

Deliberately not used for the evaluation set's size: that is fitted to a fixed budget
(reportgen.commands.build_settings.fitted_eval_images) so that the same options give the same
results, and cache keys, on every machine.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
import statistics
import time
from pathlib import Path
from typing import Callable

from reportgen.commands import cpu_load
from reportgen.settings.families import costs as family_costs

KINDS = ("build", "model", "step", "input", "analysed_step", "eval_image")
FORMAT = 2      # 2: costs as on an idle machine (1 kept the load of the builds that measured them)
DEMO_PARAMS = 2_117_072     # MNIST_Demo's trainable parameters: the reference costs' size
# How the cost of a unit grows with the trainable parameters above MNIST_Demo's (a smaller
# model costs what MNIST_Demo does: fixed overheads dominate): per input as params^1 (README,
# Benchmarks: the engine's ms per image), the dataset analyses as params^1.3 (0.6 s per image
# for MNIST_Demo, 3.4 s for the 8.2 M-parameter MNIST baseline).
SIZE_EXPONENTS = {"build": 0.0, "model": 0.0, "step": 1.0, "input": 1.0, "analysed_step": 0.0,
                  "eval_image": 1.3}
# Seconds per unit at MNIST_Demo's size on this project's 2-core CPU (REFERENCE_PROBE_S), shared
# with other work (load average 3 to 5): the start-up and site of a build here; the per-model
# kinds are each family's (FamilyCosts.reference, reportgen.families), the default family's
# for a family without its own.
REFERENCE_BUILD_S = 13.7
REFERENCE_PROBE_S = 0.115   # probe_seconds() on that CPU
# How much that shared CPU's other work slowed those builds: the same demo build, cold, took
# 160 s and 203 s on the idle machine where these costs predicted about 350 s. The reference
# costs divided by it are an idle machine's, as the calibration file keeps its own.
REFERENCE_SLOWDOWN = 2.0
SLOWNESS_BOUNDS = (0.25, 4.0)   # a probe gone wrong must not multiply the estimate
LIVE_BOUNDS = (0.25, 8.0)       # the running correction, likewise


def reference_seconds(family: str, kind: str) -> float:
    """Seconds per unit of `kind` for `family` at MNIST_Demo's size on the reference CPU."""
    known = family_costs(family)
    if kind == "eval_image" and known.seconds_per_eval_image is not None:
        return known.seconds_per_eval_image
    return known.reference[kind]


def size_factor(kind: str, trainable_params: int) -> float:
    return max(1.0, trainable_params / DEMO_PARAMS) ** SIZE_EXPONENTS[kind]


def size_class(trainable_params: int) -> int:
    ratio = max(trainable_params, 1) / DEMO_PARAMS
    return min(4, max(-4, math.floor(math.log(ratio, 4) + 0.5)))


def build_group(trainable_params: list[int]) -> str:
    """What the start-up and the site's cost is kept under: the size class of the build's
    biggest model (a test's site of tiny nets is quicker to make than the demo's)."""
    return f"build@{max(size_class(p) for p in trainable_params)}"


def cost_group(family: str, trainable_params: int, techniques: tuple[str, ...],
               default: tuple[str, ...], skipped: tuple[str, ...] = ()) -> str:
    """What a unit cost is kept under: the family, the model's size class (its parameters
    within a factor of 2 of MNIST_Demo's: class 0, of 4x MNIST_Demo's: class 1, ...; what a
    test's 3 k-parameter net measured must not teach the estimate of a 2 M-parameter one),
    the technique set unless it is the default (three techniques cost less than all), and the
    dataset analyses `skipped` as not applicable to the model (a MultiMNIST model runs one of
    them: its costs must not teach those of a single-label model of its size)."""
    from reportgen.cache.keys import hash_json

    group = f"{family}@{size_class(trainable_params)}"
    if tuple(techniques) != tuple(default):
        group += f"+{hash_json(sorted(techniques))[:8]}"
    if skipped:
        group += f"-{hash_json(sorted(skipped))[:8]}"
    return group


# --------------------------------------------------------------------------------------------
# The machine's speed


def probe_seconds(chunks: int = 30, budget_s: float = 0.3) -> float:
    """Seconds this CPU takes for a fixed workload (small matrix products and a Python loop:
    the build is TensorFlow kernels and Python drawing): the fastest of up to `chunks` short
    runs, times `chunks`; about 0.12 s on this project's CPU. On a busy machine the runs stop
    after `budget_s` (at least 5 of them).

    The runs are timed in this thread's CPU time, not in wall time: on a busy machine a run
    of a few milliseconds waits in the run queue for most of its wall time (on 2 cores at a
    load of 7 the fastest of them still took 1.6-4.5x the reference's wall time), and the
    estimate counts that wait once, as how busy the machine is (`Costs.busy`); counted here
    too, it was counted twice. The fastest run measures the processor, not its moment."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    fastest, deadline = math.inf, time.perf_counter() + budget_s
    for done in range(chunks):
        start = time.thread_time()
        for _ in range(20):
            b = a
            for _ in range(4):
                b = np.tanh(b @ a * 0.05)
            total = 0
            for i in range(5_000):
                total += i % 7
        fastest = min(fastest, time.thread_time() - start)
        if done >= 4 and time.perf_counter() > deadline:
            break
    return fastest * chunks


def machine_slowness(seconds: float | None = None) -> float:
    """How much slower than the reference costs' machine this one is (2.0: twice as
    slow), within SLOWNESS_BOUNDS."""
    seconds = probe_seconds() if seconds is None else seconds
    low, high = SLOWNESS_BOUNDS
    return min(high, max(low, seconds / REFERENCE_PROBE_S))


# --------------------------------------------------------------------------------------------
# What builds on this machine measured


def read_calibration(path: str | Path, host: str | None = None) -> tuple[dict, str | None]:
    """(this machine's {group: {kind: {"seconds": per unit, "units": n}}}, None), or ({}, why)
    when the file is there but is not one this module wrote (damaged, cut short, another
    format): ignored, and replaced by the next build's measurements."""
    machines, problem = _read_machines(Path(path))
    return machines.get(host or socket.gethostname(), {}), problem


def _read_machines(path: Path) -> tuple[dict, str | None]:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        return {}, getattr(exc, "strerror", None) or type(exc).__name__
    try:
        data = json.loads(text)
    except ValueError:
        return {}, "not valid JSON"
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}, f"not format {FORMAT}"
    machines = data.get("machines")
    if not isinstance(machines, dict):
        return {}, "no machines"
    for host, groups in machines.items():
        if not isinstance(groups, dict):
            return {}, f"{host!r} is not a table"
        for group, kinds in groups.items():
            if not isinstance(kinds, dict):
                return {}, f"{group!r} is not a table"
            for kind, entry in kinds.items():
                if kind not in KINDS or not _valid_entry(entry):
                    return {}, f"{group!r} {kind!r} is not a measured cost"
    return machines, None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _valid_entry(entry) -> bool:
    if not isinstance(entry, dict):
        return False
    seconds, units, recent = entry.get("seconds"), entry.get("units"), entry.get("recent", [])
    return (_number(seconds) and _number(units) and seconds >= 0 and units > 0
            and isinstance(recent, list) and all(_number(v) and v >= 0 for v in recent))


RECENT = 5      # the measurements of a cost kept: the estimate takes their median


def blend(known: dict, measured: dict) -> dict:
    """What the next estimate uses: per (group, kind), the median of the last RECENT builds'
    measurements (the mean of two): a machine that got slower is followed within a few builds,
    and one disturbed build (a slow disk, a first run that fills caches) is outvoted instead of
    weighing half of the next estimate. An entry written before measurements were kept counts
    as one."""
    out = {group: dict(kinds) for group, kinds in known.items()}
    for group, kinds in measured.items():
        for kind, entry in kinds.items():
            before = out.setdefault(group, {}).get(kind)
            if before is None:
                recent, units = [entry["seconds"]], entry["units"]
            else:
                recent = [*before.get("recent", [before["seconds"]]), entry["seconds"]]
                units = before["units"] + entry["units"]
            recent = recent[-RECENT:]
            out[group][kind] = {"seconds": statistics.median(recent), "units": units,
                                "recent": recent}
    return out


def write_calibration(path: str | Path, measured: dict, host: str | None = None) -> None:
    """Blend `measured` into this machine's costs in the file, written whole under a temporary
    name and renamed over it (a killed build leaves the old file or the new one, never half of
    one). Best effort: a file that cannot be written only costs this build's measurements."""
    path = Path(path)
    host = host or socket.gethostname()
    machines, _ = _read_machines(path)      # what other builds wrote meanwhile; damaged: none
    machines[host] = blend(machines.get(host, {}), measured)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"format": FORMAT, "machines": machines}, indent=1,
                                  sort_keys=True), "utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:         # its folder cannot even be listed: nothing was written there
            pass


# --------------------------------------------------------------------------------------------
# The estimate


class Costs:
    """Unit costs for this build: this machine's measured ones, else the reference costs scaled by
    the processor's slowness (probed the first time a reference cost is asked for); both as on
    an idle machine, times how much the work running beside the build will slow it (`busy`,
    looked at once, when the first cost is asked for)."""

    def __init__(self, calibration: dict | None = None, slowness: float | None = None,
                 probe: Callable[[], float] = machine_slowness, busy: float | None = None,
                 load: Callable[[], float] | None = None):
        self.calibration = calibration or {}
        self._slowness = slowness
        self._probe = probe
        self._busy = busy
        self._load = load

    @property
    def slowness(self) -> float:
        if self._slowness is None:
            self._slowness = self._probe()
        return self._slowness

    @property
    def busy(self) -> float:
        """1.0 on an idle machine; 2.0 when other work will make the build take twice as long."""
        if self._busy is None:
            low, high = LIVE_BOUNDS
            self._busy = min(high, max(low, (self._load or cpu_load.slowdown_now)()))
        return self._busy

    def measured_here(self, group: str, kind: str) -> dict | None:
        return self.calibration.get(group, {}).get(kind)

    def unit(self, group: str, family: str, kind: str, trainable_params: int,
             share: float = 1.0) -> float:
        """Seconds per unit of `kind` of work for this model on this machine. `share`: the
        part of the reference cost's work that applies to the model (the reference costs are
        the whole technique suite's; a cost measured here is its group's own work already)."""
        entry = self.measured_here(group, kind)
        if entry is not None:
            seconds = float(entry["seconds"])
        else:
            if kind == "build":
                seconds = REFERENCE_BUILD_S
            else:
                seconds = reference_seconds(family, kind)
            seconds *= share * self.slowness / REFERENCE_SLOWDOWN
        return seconds * self.busy * size_factor(kind, trainable_params)

    def from_here(self, group: str, kinds=KINDS) -> bool:
        """Whether every one of `kinds` was measured on this machine."""
        return all(self.measured_here(group, kind) is not None for kind in kinds)


# --------------------------------------------------------------------------------------------
# The build as it runs


class BuildClock:
    """What this build measured, per cost group and kind, at MNIST_Demo's size as the
    calibration keeps it; and the estimate of what remains, corrected by how the computed steps
    went."""

    def __init__(self, costs: Costs, total_estimate: float = 0.0,
                 load: cpu_load.LoadSampler | None = None, overhead_estimate: float = 0.0,
                 now: Callable[[], float] = time.monotonic):
        self.costs = costs
        self.load = load or cpu_load.LoadSampler()   # started by the build, not here
        self.total_estimate = total_estimate
        # the part of it that is the start-up and the site (the "build" kind): not the models'
        # work, so neither corrected by their steps nor left to do once it has been spent
        self.overhead_estimate = overhead_estimate
        self._now = now
        self.started = now()
        self.measured: dict[str, dict[str, list[float]]] = {}   # group -> kind -> [s, units]
        self.estimated_done = 0.0       # the estimates of the work done (cached or not)
        self._computed_estimate = 0.0   # ... of the steps that computed everything they show
        self._computed_seconds = 0.0    # ... and how long they took
        self._work_seconds = 0.0        # wall time of the models' work done (cached or not)

    def elapsed(self) -> float:
        return self._now() - self.started

    def record(self, group: str, kind: str, seconds: float, units: float,
               trainable_params: int) -> None:
        """`seconds` spent on `units` of `kind` of work (0 units: time that belongs to units
        recorded elsewhere), divided by the model's size factor."""
        if units < 0:
            return
        scale = size_factor(kind, trainable_params)
        entry = self.measured.setdefault(group, {}).setdefault(kind, [0.0, 0.0])
        entry[0] += max(0.0, seconds) / scale
        entry[1] += units

    def finished(self, estimate: float, seconds: float | None, wall: float = 0.0) -> None:
        """A piece of the models' planned work is done: its estimate, its measured time when
        it computed everything (None: it found results stored, which says nothing of speed),
        and its wall time either way (less the start-up it paid for, such as importing
        TensorFlow): the rest of the time elapsed is the start-up's and the site's."""
        self.estimated_done += estimate
        self._work_seconds += max(0.0, wall)
        if seconds is not None:
            self._computed_estimate += estimate
            self._computed_seconds += seconds

    def correction(self) -> float:
        """Measured / estimated time of the steps computed so far (1.0 before the first)."""
        if self._computed_estimate <= 0:
            return 1.0
        low, high = LIVE_BOUNDS
        return min(high, max(low, self._computed_seconds / self._computed_estimate))

    def remaining(self) -> float:
        """Seconds the rest of the build should take if nothing more is cached: the models'
        work left, corrected by how their computed steps went, and what is left of the start-up
        and site's estimate once the time spent outside the models' work is taken off it (at
        the last step, only the site remains)."""
        models = max(0.0, self.total_estimate - self.overhead_estimate - self.estimated_done)
        overhead_spent = max(0.0, self.elapsed() - self._work_seconds)
        return (models * self.correction()
                + max(0.0, self.overhead_estimate - overhead_spent))

    def calibration(self) -> dict:
        """This build's measurements as the calibration file keeps them: per unit, divided by
        how much the other work running beside it slowed the build."""
        slowed = self.load.slowdown()
        return {group: {kind: {"seconds": s / units / slowed, "units": units}
                        for kind, (s, units) in kinds.items() if units > 0}
                for group, kinds in self.measured.items()}


def duration(seconds: float) -> str:
    """A rough duration as the plan says it: "45 s", "7 min"."""
    if seconds < 90:
        return f"{max(5, round(seconds / 5) * 5):.0f} s"
    return f"{round(seconds / 60):.0f} min"

