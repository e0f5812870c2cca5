"""`reportgen import`: the command line, several checkpoints of one run on the step axis, the
model folder it writes (params.toml, source.json), what it refuses (one line, exit 2, nothing
written), and a site built from imported models of each layout."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from reportgen.cli import main
from reportgen.model_folder import ModelFolder, Step
from test_import_capsnet_keras import keras_weights, write_capsnet_keras_h5
from test_import_safetensors import gram_ai_state, write_safetensors


def run(tmp_path, *args):
    result = CliRunner().invoke(main, ["--models-dir", str(tmp_path / "models"), *args])
    return result.exit_code, result.output


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, output
    return lines[0]


@pytest.fixture
def keras_file(tmp_path):
    path = tmp_path / "trained_model.h5"
    write_capsnet_keras_h5(path, keras_weights())
    return path


def test_help_has_examples_and_imports_no_tensorflow():
    result = CliRunner().invoke(main, ["import", "--help"])
    assert result.exit_code == 0 and "Example" in result.output
    assert all(name in result.output for name in ("capsnet-keras", "gram-ai", "udacity"))
    code = ("import sys; from click.testing import CliRunner; from reportgen.cli import main; "
            "r = CliRunner().invoke(main, ['import', '--help']); "
            "print('tensorflow' in sys.modules, 'torch' in sys.modules, r.exit_code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "0"]


def test_checkpoints_of_one_run_become_steps(tmp_path, keras_file):
    code, out = run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras",
                    "--name", "Run", "--step", "5-600")
    assert code == 0, out
    assert "as step 5-600 of the new model Run" in out and "reportgen build --models Run" in out
    assert "Dataset 'mnist' chosen from the 28x28x1 input" in out
    code, out = run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras",
                    "--name", "Run")                              # next epoch by default
    assert code == 0 and "as step 6-0 of model Run" in out, out
    code, out = run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras",
                    "--name", "Run", "--step", "1-600")           # an earlier checkpoint
    assert code == 0, out
    folder = ModelFolder.at(tmp_path / "models" / "Run")
    assert folder.steps == [Step(1, 600), Step(5, 600), Step(6, 0)]

    source = json.loads((folder.path / "source.json").read_text())
    assert list(source["steps"]) == ["1-600", "5-600", "6-0"]
    record = source["steps"]["5-600"]
    assert record["file"] == "trained_model.h5" and record["layout"] == "capsnet-keras"
    assert len(record["sha256"]) == 64 and record["format"] == "keras-h5"

    params = tomllib.loads(folder.params_path.read_text())
    assert params["imported_from"].startswith("XifengGuo/CapsNet-Keras (Keras 2), layout of")
    assert "Imported from XifengGuo/CapsNet-Keras" in params["description"]
    text = folder.params_path.read_text()
    assert "# PrimaryCap's Conv2D has no activation" in text      # the source's choice, noted

    code, out = run(tmp_path, "models", "--json")
    row = next(r for r in json.loads(out) if r["name"] == "Run")
    assert row["params"] == 285_360 and row["steps"] == ["1-600", "5-600", "6-0"]


def test_the_model_page_names_each_steps_source_file_and_its_sha256(tmp_path, keras_file):
    import hashlib

    from reportgen.catalog import Catalog
    from reportgen.commands.site_assembly import imported_sources
    from reportgen.errors import ReportgenError
    from reportgen.pages.render import render_site
    from site_fixture import make_site

    other = tmp_path / "weights-02 <b>.h5"              # a file name is user text
    write_capsnet_keras_h5(other, keras_weights(seed=1))
    for path, step in ((keras_file, "1-100"), (other, "2-200")):
        code, out = run(tmp_path, "import", str(path), "--from", "capsnet-keras", "--name",
                        "Run", "--step", step)
        assert code == 0, out
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (keras_file, other)}
    entry = Catalog(tmp_path / "models").get("Run")
    sources = imported_sources(entry)
    assert [(s["step"], s["file"], s["sha256"], s["layout"]) for s in sources] == [
        ("1-100", "trained_model.h5", digests[keras_file], "capsnet-keras"),
        ("2-200", other.name, digests[other], "capsnet-keras")]
    assert imported_sources(Catalog(tmp_path / "models").get("Run")) == sources
    entry.weights_path(Step(2, 200)).unlink()          # a step no longer saved is not listed
    assert [s["step"] for s in imported_sources(entry)] == ["1-100"]

    docs = tmp_path / "docs"
    site = make_site(docs)
    site.models[0].description = entry.params.description
    site.models[0].sources = sources
    site.models[0].training = {}                       # a checkpoint records no run facts
    render_site(site, docs, theme="mkdocs")
    page = (docs / "models" / "MNIST_Demo" / "index.md").read_text()
    # what was not recorded is said of the project it came from, not of an older reportgen
    assert ("“not recorded”: this model was trained outside reportgen, by "
            f"{sources[0]['project']}'s code, and imported with <code>reportgen import</code>"
            ) in page
    assert "older reportgen" not in page
    assert "converted exactly into reportgen&#39;s CapsNet" in page
    assert (f'<p class="rg-provenance">Converted from <code>trained_model.h5</code> (SHA-256 '
            f'<code class="rg-digest">{digests[keras_file]}</code>) as step 1-100; '
            f'<code>weights-02 &lt;b&gt;.h5</code> (SHA-256 <code class="rg-digest">'
            f'{digests[other]}</code>) as step 2-200.</p>') in page
    assert "rg-provenance" not in (docs / "models").joinpath(
        next(p.name for p in (docs / "models").iterdir() if p.name != "MNIST_Demo"),
        "index.md").read_text()                        # a model reportgen trained: none

    (entry.path / "source.json").write_text("{not json")
    with pytest.raises(ReportgenError, match="source.json is unreadable"):
        imported_sources(entry)


def test_an_existing_step_is_never_overwritten(tmp_path, keras_file):
    assert run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras", "--name", "M")[0] == 0
    weights = tmp_path / "models" / "M" / Step(1, 0).filename
    before = weights.read_bytes()
    code, out = run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras", "--name", "M",
                    "--step", "1-0")
    assert code == 2 and "already has step 1-0" in error_line(out)
    assert weights.read_bytes() == before


def test_edits_to_an_imported_params_toml_are_kept(tmp_path, keras_file):
    run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras", "--name", "M")
    path = tmp_path / "models" / "M" / "params.toml"
    path.write_text(path.read_text().replace("detach_routing_votes = false",
                                             "detach_routing_votes = true"))
    edited = path.read_text()
    code, out = run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras", "--name", "M")
    assert code == 0, out
    assert path.read_text() == edited


def test_refusals_are_one_line_and_write_nothing(tmp_path, keras_file):
    models = tmp_path / "models"
    # a mismatched file: the tensor, the expected and the found shape
    w = keras_weights()
    w["primary_bias"] = w["primary_bias"][:-1]
    bad = tmp_path / "bad.h5"
    write_capsnet_keras_h5(bad, w)
    code, out = run(tmp_path, "import", str(bad), "--from", "capsnet-keras")
    line = error_line(out)
    assert code == 2 and "primarycap_conv2d/primarycap_conv2d/bias:0" in line
    assert "Expected shape (32,)" in line and "Received shape (31,)" in line
    assert not models.exists()

    # a file of another layout
    st = tmp_path / "epoch_1.safetensors"
    write_safetensors(st, gram_ai_state(units=()))
    code, out = run(tmp_path, "import", str(st), "--from", "udacity")
    assert code == 2 and "'conv_layer.conv.weight'" in error_line(out)

    # a model reportgen trained is never touched
    trained = models / "MNIST_CapsNetKeras"
    trained.mkdir(parents=True)
    (trained / "params.toml").write_text('dataset = "mnist"\ninput_shape = [28, 28, 1]\n')
    code, out = run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras")
    assert code == 2 and "trained by reportgen" in error_line(out)
    assert sorted(p.name for p in trained.iterdir()) == ["params.toml"]

    # another project, or another architecture, under an imported model's name
    assert run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras", "--name", "K")[0] == 0
    code, out = run(tmp_path, "import", str(st), "--from", "gram-ai", "--name", "K")
    assert code == 2 and "imported from another project" in error_line(out)
    small = tmp_path / "small.h5"
    write_capsnet_keras_h5(small, keras_weights(types=2))
    code, out = run(tmp_path, "import", str(small), "--from", "capsnet-keras", "--name", "K")
    assert code == 2 and "another architecture than model K: primary" in error_line(out)
    assert ModelFolder.at(models / "K").steps == [Step(1, 0)]

    # an input size reportgen cannot name a dataset for
    odd = tmp_path / "odd.h5"
    write_capsnet_keras_h5(odd, keras_weights(side=20))
    code, out = run(tmp_path, "import", str(odd), "--from", "capsnet-keras")
    assert code == 2 and "--dataset" in error_line(out)
    code, out = run(tmp_path, "import", str(odd), "--from", "capsnet-keras", "--dataset",
                    "digits.npz")
    assert code == 0 and "DIGITS_CapsNetKeras" in out, out


def test_a_failed_write_leaves_no_model_behind(tmp_path, keras_file, monkeypatch):
    import reportgen.importers.writer as writer

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(writer, "write_step", broken)
    code, out = run(tmp_path, "import", str(keras_file), "--from", "capsnet-keras", "--name", "M")
    assert code == 1 and "disk full" in out
    assert not (tmp_path / "models" / "M").exists()


@pytest.mark.slow
def test_imported_models_of_every_layout_build_into_a_site(tmp_path, keras_file):
    torch = pytest.importorskip("torch", reason="the udacity layout is built in torch here")
    from test_import_torch import UdacityCapsuleNetwork, _scaled

    udacity = tmp_path / "capsule_net.pt"
    torch.save(_scaled(UdacityCapsuleNetwork()).state_dict(), udacity)
    gram = tmp_path / "epoch_1.safetensors"
    write_safetensors(gram, gram_ai_state())
    for path, source in ((keras_file, "capsnet-keras"), (gram, "gram-ai"), (udacity, "udacity")):
        code, out = run(tmp_path, "import", str(path), "--from", source)
        assert code == 0, out
    site = tmp_path / "site"
    code, out = run(tmp_path, "build", "--models", "MNIST_*", "--steps", "last", "--images",
                    "test:0-3", "--analyses", "none", "--site-dir", str(site),
                    "--cache-dir", str(tmp_path / "cache"))
    assert code == 0, out
    for name in ("MNIST_CapsNetKeras", "MNIST_GramAI", "MNIST_Udacity"):
        page = (site / "models" / name / "index.html").read_text("utf-8")
        assert "Imported from" in page                       # where it came from
        [record] = json.loads((tmp_path / "models" / name / "source.json").read_text())[
            "steps"].values()
        assert f'(SHA-256 <code class="rg-digest">{record["sha256"]}</code>)' in page
        assert f"Converted from <code>{record['file']}</code>" in page
        assert list((site / "models" / name).glob("*.html"))
    assert any(p.suffix == ".png" for p in site.rglob("*"))


def test_a_file_that_is_no_pytorch_checkpoint_is_named_so(tmp_path):
    random_bytes = tmp_path / "epoch_1.pt"
    random_bytes.write_bytes(b"\x13" + np.random.default_rng(0).bytes(4095))
    other_zip = tmp_path / "epoch_2.pt"
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("notes.txt", "a zip, but not torch.save's")
    for path, words in ((random_bytes, "is not a PyTorch checkpoint: neither a zip archive"),
                        (other_zip, "a zip archive without torch.save's data.pkl")):
        code, out = run(tmp_path, "import", str(path), "--from", "gram-ai")
        line = error_line(out)
        assert code == 2 and str(path) in line and words in line, line
        assert "Python objects" not in line
    assert "Received first bytes 13 " in error_line(
        run(tmp_path, "import", str(random_bytes), "--from", "gram-ai")[1])
    assert not (tmp_path / "models").exists()


def test_a_damaged_pickle_is_not_called_python_objects(tmp_path):
    pytest.importorskip("torch", reason="telling a damaged pickle apart needs torch.load")
    path = tmp_path / "epoch_1.pt"
    path.write_bytes(b"\x80\x02" + np.random.default_rng(1).bytes(4094))
    code, out = run(tmp_path, "import", str(path), "--from", "gram-ai")
    line = error_line(out)
    assert code == 2 and "it is damaged, or not a state dict torch.save wrote" in line, line
    assert "Python objects" not in line


def _wrong_shape_file(tmp_path, kind: str):
    """A file of `kind` whose one tensor has a shape the layout refuses: (path, --from)."""
    if kind == "h5":
        w = keras_weights()
        w["primary_bias"] = w["primary_bias"][:-1]
        write_capsnet_keras_h5(tmp_path / "bad.h5", w)
        return tmp_path / "bad.h5", "capsnet-keras"
    state = gram_ai_state(units=())
    state["conv1.bias"] = state["conv1.bias"][:-1]
    if kind == "safetensors":
        write_safetensors(tmp_path / "bad.safetensors", state)
        return tmp_path / "bad.safetensors", "gram-ai"
    torch = pytest.importorskip("torch", reason="writing a .pt file needs torch")
    torch.save({k: torch.from_numpy(v) for k, v in state.items()}, tmp_path / "bad.pt")
    return tmp_path / "bad.pt", "gram-ai"


@pytest.mark.parametrize("kind", ["h5", "safetensors", "pt"])
def test_every_shape_is_checked_before_any_tensor_is_read(tmp_path, monkeypatch, kind):
    from reportgen.importers.tensors import StoredCheckpoint

    path, source = _wrong_shape_file(tmp_path, kind)

    def read_nothing(self):
        raise AssertionError("a tensor was read before the shapes were checked")

    monkeypatch.setattr(StoredCheckpoint, "load", read_nothing)
    code, out = run(tmp_path, "import", str(path), "--from", source)
    line = error_line(out)
    bias = "primarycap_conv2d/primarycap_conv2d/bias:0" if kind == "h5" else "conv1.bias"
    assert code == 2 and f"tensor '{bias}'" in line and "Received shape" in line, line
