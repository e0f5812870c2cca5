"""Shared fixtures of every test folder (tests/ and the packages' own tests/ under reportgen/):
tiny CapsNets (built in well under a second) and seeded random images."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Tests send Ctrl-C (SIGINT) to reportgen subprocesses. A shell starting pytest in the
# background without job control (`cmd &`, nohup) sets SIGINT to "ignore", which every child
# inherits, so reportgen would never see it: give this process Python's handler, so children
# start with the default disposition.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# tests/ holds the NumPy oracles (tests/reference/) and shared test helpers; make `import
# reference` and `import family_nets` work from every test folder, in every import mode.
_TESTS = str(Path(__file__).resolve().parent / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

# The versions this run resolved, printed in pytest's header: a fresh virtual environment takes
# the newest releases the bounds in pyproject.toml allow, and a failure is read against them.
_REPORTED_DISTRIBUTIONS = ("tensorflow-cpu", "keras", "numpy", "h5py", "jinja2", "matplotlib",
                           "pillow", "click", "mkdocs", "mkdocs-material", "mlxtend", "dask",
                           "fsspec", "filelock", "scipy", "pytest", "pytest-xdist", "playwright",
                           "tf-keras-vis", "moto", "s3fs", "safetensors", "torch")


def pytest_report_header(config):
    from importlib.metadata import PackageNotFoundError, version

    def found(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return [f"python: {sys.executable} ({sys.version.split()[0]})",
            "resolved: " + ", ".join(f"{n} {found(n)}" for n in _REPORTED_DISTRIBUTIONS)]


TINY_PARAMS = {
    "dataset": "mnist",
    "input_shape": [12, 12, 1],
    "num_classes": 3,
    "conv": [{"filters": 8, "kernel_size": 3}],
    # 12x12 -> conv 10x10 -> primary (kernel 3, stride 2) 4x4 grid x 4 types = 64 capsules.
    "primary": {"types": 4, "dims": 4, "kernel_size": 3, "strides": 2},
    "class_caps": {"dims": 4},
    "decoder": {"units": [16]},
}


def build_tiny_net(seed: int = 0, **overrides):
    """A freshly initialised tiny CapsNet; `overrides` replace top-level TINY_PARAMS entries."""
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import parse_model_params

    keras.utils.set_random_seed(seed)
    return build_capsnet(parse_model_params({**TINY_PARAMS, **overrides}))


@pytest.fixture(scope="session")
def tiny_net():
    """Tiny CapsNet with a decoder (treat as read-only: it is shared by the whole session)."""
    return build_tiny_net(seed=0)


@pytest.fixture(scope="session")
def make_net():
    """Factory for private tiny nets (to hand-set weights or change the architecture)."""
    return build_tiny_net


@pytest.fixture(scope="session")
def images():
    """Five seeded random 12x12x1 images in [0, 1]."""
    return np.random.default_rng(1234).random((5, 12, 12, 1), dtype=np.float32)


@pytest.fixture(scope="session")
def probe(tiny_net, images):
    """The probe batch of `images` through `tiny_net` (forward and gradients)."""
    from reportgen.probe.probe import run_probe

    return run_probe(tiny_net, images)


# ---- The fast loop's guard: `pytest -m "not slow"` must neither train nor build a site. ------
# A test without the slow mark (or one of its fixtures, whatever their scope: a module fixture
# is set up inside its first test's protocol) that reaches the training loop or a site build
# fails at once, instead of silently making the fast loop minutes long. In-process calls are
# caught where every caller passes (trainer.train -> _train_loop, build.build / run_build ->
# _build, looked up as module globals at call time); a `reportgen train|build|demo` subprocess by
# its command line.
FAST_GUARD_MESSAGE = "marked fast but trains/builds: mark it @pytest.mark.slow"
_REAL_WORK_COMMANDS = frozenset({"train", "build", "demo"})
_running = {"item": None}


def _fast_item():
    item = _running["item"]
    return item if item is not None and item.get_closest_marker("slow") is None else None


def _refuse(what: str):
    item = _fast_item()
    if item is not None:
        pytest.fail(f"{item.nodeid} {FAST_GUARD_MESSAGE} (it {what})", pytrace=True)


def _guarded(function, what: str):
    import functools

    @functools.wraps(function)
    def guarded(*args, **kwargs):
        _refuse(what)
        return function(*args, **kwargs)

    guarded.__fast_guard__ = True
    return guarded


def _reportgen_command(args) -> str | None:
    """The subcommand of a `python -m reportgen ...` / `reportgen ...` command line, if any."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return None     # shell strings and bare programs: not how the tests start reportgen
    argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]
    for i, arg in enumerate(argv):
        if (arg == "reportgen" and i > 0 and argv[i - 1] == "-m") or \
                (i == 0 and Path(arg).name == "reportgen"):
            rest = iter(argv[i + 1:])
            for word in rest:
                if word == "--models-dir":      # the group's one option with a separate value
                    next(rest, None)
                elif not word.startswith("-"):
                    return word
            return None
    return None


def _install_fast_guard() -> None:
    import subprocess

    from reportgen.commands import build as build_module
    from reportgen.training import trainer

    if getattr(trainer._train_loop, "__fast_guard__", False):
        return
    trainer._train_loop = _guarded(trainer._train_loop, "reached the training loop")
    build_module._build = _guarded(build_module._build, "ran a site build")
    real_init = subprocess.Popen.__init__

    def popen_init(self, args, *rest, **kwargs):
        command = _reportgen_command(args)
        if command in _REAL_WORK_COMMANDS:
            _refuse(f"started `reportgen {command}` in a subprocess")
        real_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = popen_init


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _install_fast_guard()
    _running["item"] = item
    try:
        yield
    finally:
        _running["item"] = None
