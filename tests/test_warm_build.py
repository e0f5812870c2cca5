"""A rebuild with nothing to compute: build options checked once into frozen settings, weights
digests remembered between builds (and forgotten when a file changes), and a real `reportgen
build` process that finds everything stored imports neither TensorFlow nor Keras and leaves the
site byte for byte, while a rewritten weights file is computed again."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from reportgen.commands.build_settings import BuildOptions, StepChoice, settle
from reportgen.engine import digests
from reportgen.errors import ReportgenError
from reportgen.model_folder import Step
from trained_tiny import copy_trained_tiny

# ------------------------------------------------------------------ settings


def test_settings_are_parsed_once_and_frozen():
    settings = settle(BuildOptions(models="MNIST_*", steps="1-2,0-0", images="test:3,1-2",
                                   transforms="invert,rotate:90", techniques=("rpv", "predictions"),
                                   analyses="all", eval_images=20, batch_size=4))
    assert settings.steps == StepChoice("list", listed=(Step(1, 2), Step(0, 0)))
    assert settings.steps.choose([Step(0, 0), Step(1, 2), Step(1, 4)]) == [Step(0, 0), Step(1, 2)]
    assert settings.images == (3, 1, 2)
    assert [t.label() for t in settings.transforms] == ["orig", "inv", "rot90"]
    assert settings.techniques == ("rpv", "predictions")
    assert settings.analysed(Step(0, 0), [Step(0, 0), Step(1, 2)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.models = "*"
    from reportgen.techniques import get_technique

    every = settle(BuildOptions(experimental=True)).techniques
    assert {"activation_maximization", "draw_panel"} <= set(every)
    assert "draw_panel" in settle(BuildOptions()).techniques
    assert settle(BuildOptions()).techniques == tuple(
        t for t in every if not get_technique(t).experimental)
    last = settle(BuildOptions(analyses="last"))
    assert [last.analysed(s, [Step(0, 0), Step(1, 1), Step(1, 2)])
            for s in (Step(0, 0), Step(1, 1), Step(1, 2))] == [True, False, True]
    # the untrained step joins the chosen ones for the analyses, unless there are none
    saved = [Step(0, 0), Step(1, 2), Step(1, 4)]
    only_last = settle(BuildOptions(steps="last"))
    assert only_last.chosen_steps(saved) == [Step(0, 0), Step(1, 4)]
    assert settle(BuildOptions(steps="last", analyses="none")).chosen_steps(saved) == [Step(1, 4)]
    assert only_last.chosen_steps(saved[1:]) == [Step(1, 4)]


@pytest.mark.parametrize("option, value, message", [
    ("steps", "every:0", "every:N with N >= 1"),
    ("steps", "1-x", "Invalid training step"),
    ("steps", "", "Invalid --steps"),
    ("analyses", "some", "last, all or none"),
    ("eval_images", 5, "Invalid --eval-images"),
    ("batch_size", 0, "Invalid --batch-size"),
    ("techniques", ("rpv", "nope"), "Unknown technique 'nope'"),
    ("images", "test:a", "test"),
    ("transforms", "rotate:x", "rotate"),
    ("models", " ", "Invalid --models"),
    ("files", ("missing.png",), "missing.png"),
])
def test_each_bad_option_is_one_line(tmp_path, monkeypatch, option, value, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ReportgenError, match=message) as err:
        settle(BuildOptions(**{option: value}))
    assert "\n" not in err.value.message


# ------------------------------------------------------------------ remembered digests


def test_digests_are_remembered_until_the_file_changes(tmp_path, monkeypatch):
    hashed = []
    real = digests.hash_file
    monkeypatch.setattr(digests, "hash_file", lambda path: (hashed.append(path), real(path))[1])
    monkeypatch.setattr(digests, "RACY_SECONDS", 0.0)
    memo_file = tmp_path / "memo" / "digests.json"
    weights = tmp_path / "1-2.weights.h5"
    weights.write_bytes(b"a" * 4096)
    expected = hashlib.sha256(b"a" * 4096).hexdigest()

    first = digests.DigestMemo(memo_file)
    assert first.digest(weights) == expected and len(hashed) == 1
    first.save()
    assert digests.DigestMemo(memo_file).digest(weights) == expected and len(hashed) == 1

    # rewritten in place, same size, modification time put back: still seen as changed
    stat = weights.stat()
    with open(weights, "r+b") as f:
        f.write(b"b" * 4096)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.stat().st_mtime_ns == stat.st_mtime_ns
    again = digests.DigestMemo(memo_file)
    assert again.digest(weights) == hashlib.sha256(b"b" * 4096).hexdigest() and len(hashed) == 2
    again.save()

    # replaced by a rename (as training writes): a new file
    replacement = tmp_path / "new"
    replacement.write_bytes(b"c" * 4096)
    os.replace(replacement, weights)
    assert digests.DigestMemo(memo_file).digest(weights) == hashlib.sha256(
        b"c" * 4096).hexdigest() and len(hashed) == 3


def test_a_file_changed_just_now_is_not_remembered(tmp_path, monkeypatch):
    """Within the file system's timestamp granularity a second change could keep the same
    identity, so a digest is remembered only for files that have been still for a while."""
    hashed = []
    real = digests.hash_file
    monkeypatch.setattr(digests, "hash_file", lambda path: (hashed.append(path), real(path))[1])
    weights = tmp_path / "w.h5"
    weights.write_bytes(b"x" * 100)
    memo = digests.DigestMemo(tmp_path / "digests.json")
    memo.digest(weights)
    memo.digest(weights)
    memo.save()
    assert len(hashed) == 2 and not (tmp_path / "digests.json").exists()


def test_an_unreadable_memo_is_ignored(tmp_path):
    memo_file = tmp_path / "digests.json"
    memo_file.write_text("{not json")
    weights = tmp_path / "w.h5"
    weights.write_bytes(b"y")
    assert digests.DigestMemo(memo_file).digest(weights) == hashlib.sha256(b"y").hexdigest()


def test_a_memo_that_cannot_be_written_costs_only_the_memo(tmp_path, monkeypatch):
    """`.reportgen` a file, not a folder: the build goes on, digests are just not remembered."""
    (tmp_path / ".reportgen").write_text("a file where the project folder's state would go")
    weights = tmp_path / "w.h5"
    weights.write_bytes(b"z" * 100)
    later = time.time() + 60              # the weights still for a minute: remembered
    monkeypatch.setattr(digests.time, "time", lambda: later)
    memo = digests.DigestMemo(tmp_path / ".reportgen" / "digests.json")
    assert memo.digest(weights) == hashlib.sha256(b"z" * 100).hexdigest()
    memo.save()                           # no raise
    assert (tmp_path / ".reportgen").read_text().startswith("a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".reportgen", "w.h5"]


# ------------------------------------------------------------------ real processes

WRAPPER = textwrap.dedent("""
    import json, sys
    from reportgen.cli import main
    code = 0
    try:
        main(sys.argv[1:], standalone_mode=False)
    except SystemExit as exc:
        code = exc.code
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras"})
    print("RESULT " + json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
""")


def _run(tmp_path, *args):
    """`reportgen ARGS` in a fresh process; (exit code, stdout, TF/Keras modules imported)."""
    script = tmp_path / "wrapper.py"
    script.write_text(WRAPPER)
    env = {k: v for k, v in os.environ.items()
           if k not in ("REPORTGEN_MODELS", "REPORTGEN_CACHE", "REPORTGEN_DEBUG")}
    proc = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    return result["code"], proc.stdout + proc.stderr, result["heavy"]


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_rebuild_with_nothing_to_compute_imports_no_tensorflow(tmp_path, tmp_path_factory):
    from reportgen.catalog import Catalog

    models = tmp_path / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    base = ["--models-dir", str(models), "build", "--models", "Tiny", "--steps", "all",
            "--images", "test:0-1", "--analyses", "none", "--cache-dir", "cache"]

    # the site folder is refused before TensorFlow is imported
    code, out, heavy = _run(tmp_path, *base, "--site-dir", "notes")
    assert code == 2 and "Refusing to write the site into 'notes'" in out and heavy == []

    code, out, heavy = _run(tmp_path, *base)
    assert code == 0 and heavy == ["keras", "tensorflow"], out
    before = _tree(tmp_path / "site")

    code, out, heavy = _run(tmp_path, *base)
    assert code == 0 and heavy == [], out
    assert "computed 0" in out and "figures drawn 0" in out and "up to date" in out
    assert _tree(tmp_path / "site") == before

    # a weights file rewritten in place with new weights (same size), its modification time
    # put back: computed again
    from reportgen.training.checkpoints import load_weights, save_weights

    step = Catalog(models).get("Tiny").steps[1]
    changed = models / "Tiny" / step.filename
    net = Catalog(models).load("Tiny", str(step))
    for weight in net.model.weights:
        weight.assign(weight * 0.5)
    save_weights(net, tmp_path / "new.weights.h5")
    new = (tmp_path / "new.weights.h5").read_bytes()
    assert len(new) == changed.stat().st_size and new != changed.read_bytes()
    stat = changed.stat()
    with open(changed, "r+b") as f:
        f.write(new)
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code, out, heavy = _run(tmp_path, *base)
    assert code == 0 and heavy == ["keras", "tensorflow"], out
    assert "computed 0" not in out and "reused" in out
    assert _tree(tmp_path / "site") != before
    load_weights(net, changed)              # still a valid weights file
