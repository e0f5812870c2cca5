"""The build's time estimate (reportgen.commands.build_time): unit costs times units of work,
learned from measured builds, kept in a file that a damaged copy of cannot break, and corrected
as the steps finish. Hand-made measurements only: nothing here is timed."""

from __future__ import annotations

import dataclasses
import json
import math
import socket

import pytest

from reportgen.commands import build_time, cpu_load
from reportgen.commands.build_plan import ModelPlan, build_seconds, whole_build_line
from reportgen.commands.build_time import (DEMO_PARAMS, FORMAT, REFERENCE_SLOWDOWN, BuildClock,
                                           Costs, read_calibration, write_calibration)
from reportgen.model_folder import Step
from reportgen.settings.families import family


def REFERENCE(name: str, kind: str) -> float:
    """A family's reference seconds per unit, as it declares them (reportgen.families)."""
    return family(name).costs.reference[kind]


STEPS = [Step(0, 0), Step(1, 10), Step(1, 20), Step(2, 10), Step(2, 20)]
HAND = {"build@0": {"build": {"seconds": 20.0, "units": 1}},
        "capsnet": {"model": {"seconds": 8.0, "units": 1}, "step": {"seconds": 0.5, "units": 5},
                    "input": {"seconds": 0.1, "units": 80},
                    "analysed_step": {"seconds": 12.0, "units": 2},
                    "eval_image": {"seconds": 1.5, "units": 100}}}


@pytest.fixture(autouse=True)
def idle_machine(monkeypatch):
    """The estimates here as on an idle machine, whatever else runs beside the tests."""
    monkeypatch.setattr(cpu_load, "slowdown_now", lambda: 1.0)


def _no_probe():
    raise AssertionError("costs measured on this machine need no probe")


def _plan(params=2_117_072, family="capsnet", inputs=16, eval_images=50):
    return ModelPlan("M", STEPS, [STEPS[0], STEPS[-1]], inputs, eval_images, True, params,
                     family)


def test_a_plan_is_its_units_times_the_unit_costs():
    plan = _plan()
    # 5 steps, 5 x 16 inputs, 2 analysed steps over 50 images each, one model
    assert plan.work() == {"model": 1, "step": 5, "input": 80, "analysed_step": 2,
                           "eval_image": 100}
    at_speed = Costs(HAND, probe=_no_probe)
    expected = 8.0 + 5 * 0.5 + 80 * 0.1 + 2 * 12.0 + 100 * 1.5
    assert plan.seconds(at_speed) == pytest.approx(expected)
    # the whole build adds the start-up and the site once
    assert build_seconds([plan, plan], at_speed) == pytest.approx(20.0 + 2 * expected)
    # one step's work sums to the model's steps
    steps = sum(plan.seconds(at_speed, plan.step_work(s in plan.analysed)) for s in STEPS)
    assert steps + 8.0 == pytest.approx(expected)


def test_bigger_models_cost_more_per_unit_smaller_ones_not_less():
    costs = Costs(HAND, probe=_no_probe)
    four = 4 * DEMO_PARAMS
    assert costs.unit("capsnet", "capsnet", "eval_image", four) == pytest.approx(1.5 * 4 ** 1.3)
    assert costs.unit("capsnet", "capsnet", "input", four) == pytest.approx(0.1 * 4)
    assert costs.unit("capsnet", "capsnet", "model", four) == pytest.approx(8.0)
    assert costs.unit("capsnet", "capsnet", "eval_image", 1000) == pytest.approx(1.5)


def test_without_measurements_the_reference_costs_decide():
    costs = Costs({}, slowness=1.0)
    plan = _plan()
    # the reference costs were measured on a shared machine: as on an idle one, divided by
    # how much that slowed them
    expected = sum(units * REFERENCE("capsnet", kind) / REFERENCE_SLOWDOWN
                   for kind, units in plan.work().items())
    assert plan.seconds(costs) == pytest.approx(expected)
    # a processor twice as slow as the reference machine's: every unit twice as long
    assert plan.seconds(Costs({}, slowness=2.0)) == pytest.approx(2 * expected)
    assert "measured on the reference machine" in plan.line(costs)
    assert "measured on this machine" in plan.line(Costs(HAND, probe=_no_probe))
    # what this machine measured of a kind replaces the reference of that kind only
    partial = Costs({"capsnet": {"step": {"seconds": 9.0, "units": 1}}}, slowness=2.0)
    assert plan.seconds(partial) == pytest.approx(
        2 * expected + 5 * (9.0 - 2 * 0.2 / REFERENCE_SLOWDOWN))
    assert "measured on the reference machine" in plan.line(partial)
    # a family with its own reference row, one without (the CapsNet's), EM's analyses
    cnn = _plan(family="cnn")
    assert cnn.seconds(costs) == pytest.approx(
        sum(units * REFERENCE("cnn", kind) / REFERENCE_SLOWDOWN
            for kind, units in cnn.work().items()))
    assert costs.unit("gracaps", "gracaps", "step", 1000) == pytest.approx(
        REFERENCE("capsnet", "step") / REFERENCE_SLOWDOWN)
    assert costs.unit("em", "em", "eval_image", 68_444) == pytest.approx(3.0 / REFERENCE_SLOWDOWN)


def test_the_machine_speed_probe_scales_within_bounds():
    assert build_time.machine_slowness(2 * build_time.REFERENCE_PROBE_S) == pytest.approx(2.0)
    assert build_time.machine_slowness(100.0) == build_time.SLOWNESS_BOUNDS[1]
    assert build_time.machine_slowness(0.0) == build_time.SLOWNESS_BOUNDS[0]
    line = whole_build_line([_plan(), _plan()], Costs({}, slowness=2.0))
    assert line.startswith("Whole build: 2 models, about ")
    assert line.endswith("if nothing is cached (start-up and site included; reference costs, "
                         "this processor 0.5x as fast)")
    assert whole_build_line([_plan()], Costs(HAND, probe=_no_probe)).endswith(
        "(start-up and site included; costs measured on this machine)")
    probed = []
    lazy = Costs({}, probe=lambda: probed.append(1) or 3.0)
    assert lazy.unit("capsnet", "capsnet", "step", 1) == pytest.approx(3 * 0.2 / REFERENCE_SLOWDOWN)
    assert lazy.unit("cnn", "cnn", "step", 1) == pytest.approx(
        3 * REFERENCE("cnn", "step") / REFERENCE_SLOWDOWN)
    assert probed == [1]                  # once, when a reference cost was first needed


def test_costs_are_learned_per_family_size_class_and_technique_set():
    full = ("a", "b", "c")
    demo = build_time.cost_group("capsnet", DEMO_PARAMS, full, full)
    assert demo == "capsnet@0"
    # within a factor of 2 of MNIST_Demo's size: the same class; 4x: the next; a test's net: apart
    assert build_time.cost_group("capsnet", int(1.9 * DEMO_PARAMS), full, full) == demo
    assert build_time.cost_group("capsnet", DEMO_PARAMS // 2 + 1000, full, full) == demo
    assert build_time.cost_group("capsnet", 4 * DEMO_PARAMS, full, full) == "capsnet@1"
    assert build_time.cost_group("capsnet", 3_000, full, full) == "capsnet@-4"
    assert build_time.cost_group("cnn", DEMO_PARAMS, full, full) == "cnn@0"
    subset = build_time.cost_group("capsnet", DEMO_PARAMS, ("a",), full)
    assert subset.startswith("capsnet@0+")
    assert subset != build_time.cost_group("capsnet", DEMO_PARAMS, ("b",), full)
    assert build_time.cost_group("capsnet", DEMO_PARAMS, ("a",), full) == subset   # stable
    # the start-up and site: by the biggest model of the build
    assert build_time.build_group([3_000, DEMO_PARAMS]) == "build@0"
    assert build_time.build_group([3_000]) == "build@-4"


def test_measured_costs_predict_the_same_build_again(tmp_path):
    """What a build measured, written and read back, estimates that build at its measured time
    (the processor's speed does not enter: it is this machine's)."""
    size = 2 * DEMO_PARAMS
    plan = _plan(params=int(size))
    clock = BuildClock(Costs({}, probe=_no_probe))
    measured = {"model": (9.0, 1), "step": (4.0, 5), "input": (16.0, 80),
                "analysed_step": (30.0, 2), "eval_image": (300.0, 100)}
    for kind, (seconds, units) in measured.items():
        clock.record("capsnet", kind, seconds, units, int(size))
    clock.record("capsnet", "input", 2.0, 0, int(size))       # a filmstrip: seconds, no units
    path = tmp_path / "build-times.json"
    write_calibration(path, clock.calibration(), host="here")
    known, problem = read_calibration(path, host="here")
    assert problem is None
    entry = known["capsnet"]["eval_image"]
    assert entry["units"] == 100
    assert entry["seconds"] == pytest.approx(300.0 / 100 / 2 ** 1.3)
    total = sum(s for s, _ in measured.values()) + 2.0
    assert plan.seconds(Costs(known, probe=_no_probe)) == pytest.approx(total)
    # another machine sharing the project folder keeps its own
    assert read_calibration(path, host="elsewhere") == ({}, None)
    write_calibration(path, {"cnn": {"step": {"seconds": 1.0, "units": 1}}}, host="elsewhere")
    assert read_calibration(path, host="here")[0] == known


def test_a_new_measurement_is_averaged_with_what_was_known(tmp_path):
    path = tmp_path / "build-times.json"
    write_calibration(path, {"capsnet": {"step": {"seconds": 1.0, "units": 4}}})
    write_calibration(path, {"capsnet": {"step": {"seconds": 3.0, "units": 2},
                                         "model": {"seconds": 5.0, "units": 1}},
                             "cnn": {"step": {"seconds": 0.5, "units": 3}}})
    known, _ = read_calibration(path)           # this machine's (host name)
    assert known["capsnet"]["step"] == {"seconds": 2.0, "units": 6, "recent": [1.0, 3.0]}
    assert known["capsnet"]["model"] == {"seconds": 5.0, "units": 1, "recent": [5.0]}
    assert known["cnn"]["step"] == {"seconds": 0.5, "units": 3, "recent": [0.5]}
    assert [p.name for p in tmp_path.iterdir()] == ["build-times.json"]   # no temporary left


def test_one_disturbed_build_is_outvoted_by_the_next_ones(tmp_path):
    """The estimate takes the median of the last builds' measurements: a build 3x slower than
    usual (a slow disk, a first run filling caches) no longer weighs half of the next estimate
    once two more builds have measured; only the last RECENT count."""
    path = tmp_path / "build-times.json"
    for seconds in (16.6, 5.7, 5.5):
        write_calibration(path, {"build@0": {"build": {"seconds": seconds, "units": 1}}})
    assert read_calibration(path)[0]["build@0"]["build"]["seconds"] == 5.7
    for seconds in (8.0, 8.2, 8.1, 7.9, 8.0):      # the machine got slower: followed
        write_calibration(path, {"build@0": {"build": {"seconds": seconds, "units": 1}}})
    entry = read_calibration(path)[0]["build@0"]["build"]
    assert entry["seconds"] == 8.0 and entry["units"] == 8
    assert entry["recent"] == [8.0, 8.2, 8.1, 7.9, 8.0]
    # a file written before measurements were kept: its cost counts as one of them
    path.write_text(json.dumps({"format": build_time.FORMAT, "machines": {socket.gethostname(): {
        "build@0": {"build": {"seconds": 9.0, "units": 3}}}}}))
    write_calibration(path, {"build@0": {"build": {"seconds": 5.0, "units": 1}}})
    assert read_calibration(path)[0]["build@0"]["build"] == {"seconds": 7.0, "units": 4,
                                                               "recent": [9.0, 5.0]}
    path.write_text(json.dumps({"format": build_time.FORMAT, "machines": {socket.gethostname(): {
        "build@0": {"build": {"seconds": 9.0, "units": 3, "recent": ["x"]}}}}}))
    assert read_calibration(path) == ({}, "'build@0' 'build' is not a measured cost")


def test_a_write_that_fails_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "build-times.json"
    write_calibration(path, HAND)
    before = path.read_bytes()

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(build_time.os, "replace", refuse)
    write_calibration(path, {"capsnet": {"step": {"seconds": 99.0, "units": 1}}})   # no raise
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["build-times.json"]
    write_calibration(tmp_path / "file" / "x.json", HAND)     # parent is missing: made
    monkeypatch.undo()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    write_calibration(blocked / "build-times.json", HAND)     # cannot be written: no raise


def _file(groups) -> str:
    return json.dumps({"format": FORMAT, "machines": {"here": groups}})


@pytest.mark.parametrize("text, why", [
    ("{not json", "not valid JSON"),
    (_file(HAND)[:-20], "not valid JSON"),      # cut short
    ("[1, 2]", f"not format {FORMAT}"),
    (json.dumps({"format": 99, "machines": {"here": HAND}}), f"not format {FORMAT}"),
    # format 1 kept the load of the builds that measured it: not an idle machine's costs
    (json.dumps({"format": 1, "machines": {"here": HAND}}), f"not format {FORMAT}"),
    (json.dumps({"format": FORMAT}), "no machines"),
    (json.dumps({"format": FORMAT, "machines": {"here": 3}}), "is not a table"),
    (_file({"capsnet": 3}), "is not a table"),
    (_file({"capsnet": {"step": {"seconds": -1, "units": 1}}}), "is not a measured cost"),
    (_file({"capsnet": {"step": {"seconds": 1, "units": 0}}}), "is not a measured cost"),
    (_file({"capsnet": {"step": {"seconds": "1", "units": 1}}}), "is not a measured cost"),
    (_file({"capsnet": {"step": {"seconds": True, "units": 1}}}), "is not a measured cost"),
    (_file({"capsnet": {"step": {"seconds": 1}}}), "is not a measured cost"),
    (_file({"capsnet": {"step": [1, 1]}}), "is not a measured cost"),
    ('{"format": %d, "machines": {"here": {"capsnet": {"step": {"seconds": NaN, "units": 1}}}}}'
     % FORMAT,
     "is not a measured cost"),
    (_file({"capsnet": {"lunch": {"seconds": 1, "units": 1}}}), "is not a measured cost"),
])
def test_a_damaged_file_is_ignored_and_replaced(tmp_path, text, why):
    path = tmp_path / "build-times.json"
    path.write_text(text)
    known, problem = read_calibration(path, host="here")
    assert known == {} and why in problem
    # the estimate falls back to the reference costs, and the next write replaces the file
    assert "measured on the reference machine" in _plan().line(Costs(known, slowness=1.0))
    write_calibration(path, {"capsnet": {"step": {"seconds": 1.0, "units": 1}}}, host="here")
    assert read_calibration(path, host="here") == (
        {"capsnet": {"step": {"seconds": 1.0, "units": 1, "recent": [1.0]}}}, None)


def test_unreadable_or_absent_files_are_no_measurements(tmp_path):
    path = tmp_path / "build-times.json"
    path.write_bytes(b"\xff\xfe\x00")
    known, problem = read_calibration(path)
    assert known == {} and problem
    assert read_calibration(tmp_path / "absent.json") == ({}, None)
    (tmp_path / "folder.json").mkdir()
    known, problem = read_calibration(tmp_path / "folder.json")
    assert known == {} and problem


def test_the_remaining_time_follows_the_steps_done_so_far():
    clock = BuildClock(Costs(HAND, probe=_no_probe), total_estimate=100.0)
    assert clock.correction() == 1.0 and clock.remaining() == 100.0
    clock.finished(10.0, 20.0)            # the first step took twice its estimate
    assert clock.correction() == pytest.approx(2.0)
    assert clock.remaining() == pytest.approx((100 - 10) * 2.0)
    clock.finished(10.0, None)            # found stored: done, but says nothing of speed
    assert clock.correction() == pytest.approx(2.0)
    assert clock.remaining() == pytest.approx((100 - 20) * 2.0)
    clock.finished(20.0, 10.0)            # a faster one: (20 + 10) s for (10 + 20) s estimated
    assert clock.correction() == pytest.approx(1.0)
    assert clock.remaining() == pytest.approx(60.0)
    clock.finished(70.0, 70.0)            # everything estimated is done
    assert clock.remaining() == 0.0
    wild = BuildClock(Costs(HAND, probe=_no_probe), total_estimate=100.0)
    wild.finished(1.0, 1000.0)            # one disturbed step does not multiply it without end
    assert wild.correction() == build_time.LIVE_BOUNDS[1]


def test_the_start_up_and_site_are_not_corrected_by_the_steps_and_count_down_as_they_pass():
    now = [0.0]
    clock = BuildClock(Costs(HAND, probe=_no_probe), total_estimate=100.0,
                       overhead_estimate=20.0, now=lambda: now[0])
    assert clock.remaining() == pytest.approx(100.0)
    now[0] = 5.0                          # the start-up: 5 s of the 20 s estimated
    assert clock.remaining() == pytest.approx(80.0 + 15.0)
    now[0] = 25.0
    clock.finished(10.0, 20.0, wall=20.0)  # a step took twice its estimate
    assert clock.remaining() == pytest.approx((80.0 - 10.0) * 2.0 + 15.0)
    now[0] = 60.0
    clock.finished(70.0, None, wall=35.0)  # the rest of the models' work, found stored
    # only the site is left: what remains of its estimate, not doubled by the steps' pace
    assert clock.remaining() == pytest.approx(15.0)
    now[0] = 100.0                        # the site took longer than estimated
    assert clock.remaining() == 0.0


def test_durations_in_words():
    assert build_time.duration(3) == "5 s" and build_time.duration(62) == "60 s"
    assert build_time.duration(150) == "2 min" and build_time.duration(652) == "11 min"
    assert 0 < build_time.probe_seconds(chunks=1) < math.inf


def test_other_work_running_lengthens_every_cost_and_is_said():
    idle, busy = Costs(HAND, probe=_no_probe, busy=1.0), Costs(HAND, probe=_no_probe, busy=2.5)
    plan = _plan()
    assert plan.seconds(busy) == pytest.approx(2.5 * plan.seconds(idle))
    reference = Costs({}, slowness=1.0, busy=2.5)
    assert plan.seconds(reference) == pytest.approx(2.5 * plan.seconds(Costs({}, slowness=1.0)))
    assert "other work running: 2.5x as long" in whole_build_line([plan], busy)
    assert "other work" not in whole_build_line([plan], idle)
    # the machine is looked at once, when a cost is first needed, and bounded like the rest
    looks = []
    lazy = Costs(HAND, probe=_no_probe, load=lambda: looks.append(1) or 50.0)
    lazy.unit("capsnet", "capsnet", "step", 1)
    lazy.unit("capsnet", "capsnet", "input", 1)
    assert looks == [1] and lazy.busy == build_time.LIVE_BOUNDS[1]


def test_a_build_slowed_by_other_work_keeps_an_idle_machines_costs():
    """Measured beside other work, the costs are kept divided by how much it slowed the build:
    the next estimate, on an idle machine, is the build's time alone."""
    sampler = cpu_load.LoadSampler()
    for _ in range(10):
        sampler.add((2, 2))       # the build wants 2 cores, 2 other threads want them too
    clock = BuildClock(Costs({}, probe=_no_probe), load=sampler)
    clock.record("capsnet", "step", 10.0, 5, DEMO_PARAMS)
    slowed = cpu_load.slowdown(2, demand=2)       # twice as long on 2 cores
    assert clock.calibration()["capsnet"]["step"]["seconds"] == pytest.approx(2.0 / slowed)
    assert BuildClock(Costs({})).calibration() == {}       # nothing measured: nothing kept


def test_the_slowdown_is_the_fair_share_of_the_cores():
    # fewer runnable threads than cores: as fast as alone
    assert cpu_load.slowdown(0, demand=1.4, n_cores=2) == 1.0
    assert cpu_load.slowdown(0.5, demand=1.4, n_cores=2) == 1.0
    # more: each gets cores / threads of a core
    assert cpu_load.slowdown(2.6, demand=1.4, n_cores=2) == pytest.approx(2.0)
    assert cpu_load.slowdown(6, demand=2, n_cores=2) == pytest.approx(4.0)
    # a demand above the cores cannot be met even alone: it does not count as slowing
    assert cpu_load.slowdown(0, demand=8, n_cores=2) == 1.0
    # a sampler that never looked (no /proc) says idle
    assert cpu_load.LoadSampler().slowdown() == 1.0
    cpu_load_missing = cpu_load.LoadSampler()
    cpu_load_missing.add(None)
    assert cpu_load_missing.slowdown() == 1.0


def test_the_run_queue_tells_this_process_from_the_others():
    """On Linux: a thread of ours spinning is counted as ours, not as other work."""
    if cpu_load.runnable_threads() is None:
        pytest.skip("no /proc run queue on this system: the machine counts as idle")
    import threading
    import time

    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        time.sleep(0.05)
        looks = [cpu_load.runnable_threads() for _ in range(20)]
    finally:
        stop.set()
        spinner.join()
    assert all(isinstance(own, int) and isinstance(others, int) and own >= 0 and others >= 0
               for own, others in looks)
    # the spinner holds the GIL only part of the time, but it is runnable throughout
    assert max(own for own, _ in looks) >= 1
    sampler = cpu_load.LoadSampler(every_s=0.01).start()
    time.sleep(0.1)
    sampler.stop()
    assert sampler.slowdown() >= 1.0


def test_a_child_process_of_the_build_is_its_own_work_not_other_work():
    """The build's drawing worker is a process of its own: spinning, it is counted with the
    build, not as other work slowing it."""
    if cpu_load.runnable_threads() is None:
        pytest.skip("no /proc run queue on this system: the machine counts as idle")
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        looks = [cpu_load.runnable_threads() for _ in range(20)]
    finally:
        child.kill()
        child.wait()
    assert sum(own for own, _ in looks) / len(looks) >= 0.8     # runnable throughout


def test_the_estimate_averages_the_looks_since_the_build_started():
    """One instant of a busy run queue says little: the looks a sampler took from the build's
    start count, and only as many more are taken as make SAMPLES."""
    taken = iter([(0, 0), (0, 8)] * 50)
    sampler = cpu_load.LoadSampler(look=lambda: next(taken))
    for _ in range(30):                             # taken in the background meanwhile
        sampler.add(sampler._look())
    assert sampler.expected_slowdown() == pytest.approx(cpu_load.slowdown(4.0))
    fresh = cpu_load.LoadSampler(look=lambda: (0, 6))
    assert fresh.expected_slowdown() == pytest.approx(cpu_load.slowdown(6.0))
    assert fresh._looks == cpu_load.SAMPLES        # no background looks yet: taken now


def test_the_processor_probe_counts_its_work_not_its_wait(monkeypatch):
    """On a busy machine the probe's runs wait for a core; that wait is the load, which the
    estimate counts once (Costs.busy): the probe counts this thread's CPU time only."""
    import time as clock

    real = clock.perf_counter
    monkeypatch.setattr(clock, "perf_counter", lambda: 10 * real())    # as if waiting 9/10
    slowed = build_time.probe_seconds(chunks=10, budget_s=0.05)
    monkeypatch.setattr(clock, "perf_counter", real)
    alone = build_time.probe_seconds(chunks=10, budget_s=0.05)
    assert slowed < 3 * alone


# --- the estimate counts what applies to the model ------------------------------------------

def _model_plan(name: str):
    """The build's own plan of a bundled model (reportgen.commands.build._plan, from the
    techniques' plan the build computes it with), for 5 steps, 16 inputs, default options."""
    from reportgen.commands.build import _plan as build_plan
    from reportgen.commands.build_settings import BuildOptions, settle
    from reportgen.engine import step as engine_step
    from reportgen.engine.model import ModelHandle
    from reportgen.settings.model_params import load_model_params
    from reportgen.techniques import get_technique

    settings = settle(BuildOptions())
    params = load_model_params(f"models/{name}/params.toml")
    chosen = engine_step.plan([get_technique(t) for t in settings.techniques],
                              ModelHandle(params, build=None))
    return build_plan(name, params, STEPS, settings, 16, chosen), chosen


def test_a_two_digit_models_estimate_leaves_out_the_analyses_that_do_not_apply():
    """MULTIMNIST_CapsNet runs four dataset analyses (its segmentation and its explanations'
    localisation, and routing entropy and dead units, which read no label) of the fourteen
    asked for: its estimate holds 4/14 of the reference costs' dataset work, the rest of its
    work whole."""
    plan, chosen = _model_plan("MULTIMNIST_CapsNet")
    runs = {t.name for t, _ in chosen.variants if t.scope == "dataset"}
    skipped = {t.name for t, _ in chosen.not_applicable if t.scope == "dataset"}
    assert runs == {"multimnist_segmentation", "explanation_localisation", "routing_entropy",
                    "dead_units"}
    # 10 not applicable: pose_space and the explanation analyses among them (they score one
    # class per image)
    assert len(skipped) == 10
    assert "pose_space" in skipped and "clrp_evaluation" in skipped
    assert plan.analyses == (4, 14)
    costs = Costs({}, slowness=1.0, busy=1.0)
    # the reference costs at its size, as build_time documents them, kind by kind
    scale = plan.trainable_params / DEMO_PARAMS
    per_unit = {kind: REFERENCE("capsnet", kind) / REFERENCE_SLOWDOWN
                * scale ** build_time.SIZE_EXPONENTS[kind] for kind in build_time.KINDS[1:]}
    work = plan.work()
    whole = {kind: work[kind] * per_unit[kind] for kind in work}
    expected = sum(whole.values()) - (10 / 14) * (whole["analysed_step"] + whole["eval_image"])
    assert plan.seconds(costs) == pytest.approx(expected)
    # every analysis counted (as before), the estimate was several times longer
    every = dataclasses.replace(plan, analyses=()).seconds(costs)
    assert every == pytest.approx(sum(whole.values())) and every > 1.5 * expected
    assert "(4 of 14 apply to it)" in plan.line(costs)
    # its measured costs are kept apart from a single-label model's of its size ...
    single, _ = _model_plan("MNIST40_CapsNet")
    assert build_time.size_class(single.trainable_params) == \
        build_time.size_class(plan.trainable_params)
    assert single.cost_group == "capsnet@1" and plan.cost_group.startswith("capsnet@1-")
    # ... and, measured, are its own work already: no share taken of them
    measured = Costs({plan.cost_group: {"eval_image": {"seconds": 0.4, "units": 10}}},
                     slowness=1.0, busy=1.0)
    assert plan.seconds(measured, {"eval_image": 10}) == pytest.approx(
        10 * 0.4 * scale ** build_time.SIZE_EXPONENTS["eval_image"])


def test_a_model_every_analysis_applies_to_keeps_its_estimate_and_group():
    plan, chosen = _model_plan("MNIST_Demo")
    assert plan.analyses[0] == plan.analyses[1] == len(
        {t.name for t, _ in chosen.variants if t.scope == "dataset"})
    assert plan.cost_group == "capsnet@0"        # the calibration files' key, as before
    costs = Costs({}, slowness=1.0, busy=1.0)
    assert "apply to it" not in plan.line(costs)
    assert plan.seconds(costs) == dataclasses.replace(plan, analyses=()).seconds(costs)
