"""A technique that computes too long fails alone: past --technique-seconds at one step it is
stopped, named in one line with the limit and how to raise it, nothing of it is stored and every
other technique is; while one computes for long a line names it, and none once it returned. The
timer's signal handler and any earlier timer are given back."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from reportgen import console
from reportgen.engine import time_limit
from reportgen.engine.step import compute_step, step_keys
from reportgen.errors import ReportgenError
from reportgen.figures.figure import Figure
from reportgen.techniques.base import Technique

SLEEP_S = 60.0          # far beyond the limits below: the test would take a minute if not stopped


@dataclass(frozen=True)
class Params:
    """No options."""


def _draw(arrays, params, ctx):
    return [Figure(name="x.json", data=b"{}", kind="json")]


SLEPT: dict[str, float] = {}     # technique -> how long its sleep lasted


def _sleep(name):
    started = time.monotonic()
    try:
        time.sleep(SLEEP_S)
    finally:
        SLEPT[name] = time.monotonic() - started


def _sleeps(batch, params=None):
    _sleep("sleeper")
    return {"mean": np.zeros(len(batch.images), np.float32)}


def _swallows(view, params=None):
    """Catches the interruption (as a technique with a broad `except` might) and returns."""
    try:
        _sleep("swallower")
    except Exception:
        pass
    return {"n": np.ones(1, np.float32)}


def _mean_image(batch, params=None):
    return {"mean": np.asarray(batch.images, np.float32).mean(axis=(1, 2, 3))}


def _counted(view, params=None):
    return {"n": np.asarray([len(view.tensors("lengths")["lengths"])], np.float32)}


def _technique(name, compute, scope="input", needs=frozenset()):
    return Technique(name=name, title=name.capitalize().replace("_", " "), layer="model",
                     scope=scope, needs=needs, applies_to=frozenset(), params_type=Params,
                     version=1, compute=compute, render=_draw)


SLEEPER = _technique("sleeper", _sleeps)
SWALLOWER = _technique("swallower", _swallows, scope="dataset", needs=frozenset({"lengths"}))
HEALTHY = (_technique("mean_image", _mean_image),
           _technique("counted", _counted, scope="dataset", needs=frozenset({"lengths"})))


class DictStore:
    def __init__(self):
        self.arrays = {}

    def has_arrays(self, key):
        return key in self.arrays

    def put_arrays(self, key, arrays, meta):
        self.arrays[key] = dict(arrays)


def _step(tmp_path, make_net, images, techniques, seconds):
    """compute_step over the tiny net, 3 inputs and a 5-image evaluation set: (keys, store)."""
    net = make_net(seed=1)
    weights = tmp_path / "1-1.weights.h5"
    net.model.save_weights(str(weights))
    inputs = [SimpleNamespace(key=f"test-{i}", image=images[i], true_class=i % 3,
                              source_bytes_digest=f"digest-{i}") for i in range(3)]
    variants = [(t, Params()) for t in techniques]
    keys = step_keys("model", weights, variants, inputs, "eval", with_dataset=True)
    store = DictStore()
    eval_set = (images, np.array([0, 1, 2, 0, 1]), ("a", "b", "c"))
    compute_step(net, weights, variants, inputs, eval_set, keys, store, 16,
                 {"model": "Tiny", "step": "1-1"}, None, seconds)
    return keys, store


def _keys_of(keys, name):
    return {k for (n, *_), k in [*keys.inputs.items(), *keys.dataset.items()] if n == name}


@pytest.mark.slow
def test_a_technique_past_its_limit_fails_alone_with_nothing_stored(tmp_path, make_net,
                                                                    images):
    def theirs(signum, frame):
        raise AssertionError("the build's timer reached the handler set before it")

    before = signal.signal(signal.SIGALRM, theirs)
    SLEPT.clear()
    try:
        keys, store = _step(tmp_path, make_net, images, (SLEEPER, *HEALTHY, SWALLOWER), 1)
        assert signal.getsignal(signal.SIGALRM) is theirs        # given back
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, before)
    # both were stopped at their 1 s (the one call over all 3 inputs), not slept out
    assert sorted(SLEPT) == ["sleeper", "swallower"]
    assert all(0.9 < s < 10 for s in SLEPT.values()), SLEPT
    sleeper, swallower = _keys_of(keys, "sleeper"), _keys_of(keys, "swallower")
    assert len(sleeper) == 3 and len(swallower) == 1
    # each of its results failed with the one line naming it, the limit and the option
    assert set(keys.failed) == sleeper | swallower
    for key in sleeper:
        assert keys.failed[key] == (
            "Technique 'sleeper' did not finish within 1 s at this step, the limit of one "
            "technique at one step, and was stopped. Fix: raise the limit with "
            "--technique-seconds N (technique_seconds = N in a --config file).")
    # one that caught the interruption and returned is failed all the same
    assert keys.failed[next(iter(swallower))].startswith(
        "Technique 'swallower' did not finish within 1 s")
    # nothing of either stored; the others stored, with their right values
    assert not (sleeper | swallower) & set(store.arrays)
    for i in range(3):
        key = keys.inputs[("mean_image", Params(), f"test-{i}")]
        np.testing.assert_allclose(store.arrays[key]["mean"], images[i].mean(), rtol=1e-6)
    assert store.arrays[keys.dataset[("counted", Params())]]["n"].tolist() == [5.0]


@pytest.mark.slow
def test_a_slow_technique_is_named_while_it_computes_and_never_after(tmp_path, make_net,
                                                                     images, capsys,
                                                                     monkeypatch):
    monkeypatch.setattr(console, "_shown", None)
    monkeypatch.setattr(time_limit, "SLOW_AFTER_SECONDS", 0.3)
    monkeypatch.setattr(time_limit, "REPEAT_SECONDS", 0.5)

    def slow(batch, params=None):
        time.sleep(1.6)
        return _mean_image(batch)

    _step(tmp_path, make_net, images, (_technique("slow_one", slow), HEALTHY[0]), 600)
    said = capsys.readouterr().err.splitlines()
    time.sleep(0.8)                  # past its next line, had the call not ended
    assert capsys.readouterr().err == ""
    slow_lines = [line for line in said if "still computing" in line]
    # at 0.3 s, 0.8 s and 1.3 s of its 1.6 s (one call over all 3 inputs; the last line may
    # miss it on a busy machine)
    assert 2 <= len(slow_lines) <= 3, said
    assert slow_lines[:2] == ["  Tiny 1-1: Slow one still computing (0 s so far, limit "
                              "10 min 00 s)",
                              "  Tiny 1-1: Slow one still computing (1 s so far, limit "
                              "10 min 00 s)"]
    assert not any("Mean image" in line for line in said)   # quick: not named


def test_the_limit_gives_back_an_earlier_timer_less_the_time_spent():
    fired = []
    before = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 30.0)
    try:
        with pytest.raises(time_limit.TechniqueTooLong, match="'sleepy' did not finish "
                                                              "within 0.3 s"):
            with time_limit.watched("Tiny 1-1: Sleepy", "sleepy", 0.3) as call:
                time.sleep(SLEEP_S)
        assert call.expired
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 29.0 < left < 29.8 and not fired
        # within its limit: nothing raised, nothing expired, the timer still runs
        with time_limit.watched("Tiny 1-1: Quick", "quick", 5) as call:
            time.sleep(0.05)
        assert not call.expired and 28.5 < signal.getitimer(signal.ITIMER_REAL)[0] < left
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_off_the_main_thread_there_is_no_hard_limit():
    seen = {}

    def work():
        with time_limit.watched("Tiny 1-1: Worker", "worker", 0.1) as call:
            time.sleep(0.4)
        seen["expired"] = call.expired

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == {"expired": False}


def test_the_default_grows_with_the_images_computed_over():
    assert time_limit.default_seconds(0) == time_limit.default_seconds(16) == 1800
    assert time_limit.default_seconds(1000) == 1000 * time_limit.DEFAULT_SECONDS_PER_IMAGE


@pytest.mark.parametrize("value", [0, -5, 2.5, "60", True])
def test_a_bad_limit_is_one_line_naming_it_and_the_fix(value):
    from reportgen.commands.build_settings import BuildOptions, settle

    with pytest.raises(ReportgenError) as err:
        settle(BuildOptions(technique_seconds=value))
    message = err.value.message
    assert "\n" not in message
    assert message.startswith("Invalid --technique-seconds.")
    assert f"Received {value!r}." in message and "Fix: give e.g. --technique-seconds 3600" \
        in message
    assert settle(BuildOptions(technique_seconds=90)).technique_seconds == 90
    assert settle(BuildOptions()).technique_seconds is None


@pytest.mark.slow
def test_the_command_line_and_a_config_file_refuse_it_alike(tmp_path):
    from click.testing import CliRunner

    from reportgen.cli import main
    from reportgen.commands.build_settings import load_build_config

    result = CliRunner().invoke(main, ["--models-dir", str(tmp_path), "build",
                                       "--technique-seconds", "0"])
    assert result.exit_code == 2
    assert "Invalid --technique-seconds. Expected a whole number of seconds >= 1" in \
        result.output
    config = tmp_path / "build.toml"
    config.write_text("[build]\ntechnique_seconds = 600\n")
    assert load_build_config(config) == {"technique_seconds": 600}
    config.write_text('[build]\ntechnique_seconds = "10 min"\n')
    with pytest.raises(ReportgenError, match="Invalid 'technique_seconds'"):
        load_build_config(config)


@pytest.mark.slow
def test_a_build_fails_a_too_slow_technique_alone_on_its_cards(tmp_path, monkeypatch):
    from conftest import TINY_PARAMS
    from family_nets import write_model
    from test_training import _tiny_data

    from reportgen import techniques
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.pages.input_scripts import read_index
    from reportgen.training.trainer import TrainOptions, train

    monkeypatch.setenv("REPORTGEN_DRAWING_PROCESSES", "0")   # our technique: this process's
    techniques.register(SLEEPER)
    try:
        data = _tiny_data(tmp_path / "toy.npz", n=30)
        models = tmp_path / "models"
        write_model(models, "Tiny", TINY_PARAMS, data)
        train(Catalog(models).get("Tiny"), TrainOptions(limit=10))
        site = tmp_path / "site"
        options = BuildOptions(steps="1-1", images="test:0-1", analyses="none",
                               techniques=("predictions", "sleeper"), technique_seconds=2,
                               cache_dir=str(tmp_path / "cache"), site_dir=str(site))
        summary = build(Catalog(models), options)
    finally:
        techniques.unregister(SLEEPER.name)
    assert summary.site == "built"
    assert [line for line in summary.failed if "step 1-1" in line] == [
        "Tiny step 1-1: Sleeper failed (for 2 inputs): Technique 'sleeper' did not finish "
        "within 2 s at this step, the limit of one technique at one step, and was stopped. "
        "Fix: raise the limit with --technique-seconds N (technique_seconds = N in a --config "
        "file)."]
    records = read_index(site / "models" / "Tiny")["steps"]["1-1"]["inputs"]["test-0"]
    assert records["sleeper"]["figures"] == []
    assert "--technique-seconds" in records["sleeper"]["failed"]
    assert records["predictions"]["figures"] and "failed" not in records["predictions"]


def test_a_line_said_while_a_bar_is_drawn_goes_above_the_bar(capsys, monkeypatch):
    """On a terminal the slow line (a notice from another thread) does not run into the
    progress bar's line: the bar is cleared, the line written whole and the bar drawn again."""
    monkeypatch.setattr(console, "_interactive", lambda: True)
    monkeypatch.setattr(console, "_shown", None)
    line = "  Tiny 1-1: Slow one still computing (30 s so far, limit 30 min 00 s)"
    with console.progress(4, "build Tiny", unit="step") as bar:
        bar.update(1)
        thread = threading.Thread(target=console.notice, args=(line,))
        thread.start()
        thread.join()
        bar.update(1)
    err = capsys.readouterr().err
    before, after = err.split(line + "\n")
    assert before.endswith("\r") and "build Tiny:  25%" in after     # cleared, then redrawn
