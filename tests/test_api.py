"""The Python API: load a model at a step in one call; analyses callable without the site."""

import numpy as np
import pytest

import reportgen
from reportgen.errors import ReportgenError
from trained_tiny import copy_trained_tiny


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("api") / "models"
    copy_trained_tiny(tmp_path_factory, root / "Tiny")
    return root


@pytest.mark.slow
def test_load_model_at_a_step_matches_the_saved_weights(trained):
    last = reportgen.load_model("Tiny", "last", models_dir=trained)
    same = reportgen.load_model("Tiny", "1-5", models_dir=trained)
    first = reportgen.load_model("Tiny", "0-0", models_dir=trained)
    x = np.random.default_rng(0).random((2, 12, 12, 1), dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(last.model(x)["lengths"]),
                                  np.asarray(same.model(x)["lengths"]))
    assert not np.allclose(np.asarray(last.model(x)["lengths"]),
                           np.asarray(first.model(x)["lengths"]))
    with pytest.raises(ReportgenError, match="no step 9-9"):
        reportgen.load_model("Tiny", "9-9", models_dir=trained)


@pytest.mark.slow
def test_analyze_batches_like_item_by_item(trained):
    both = reportgen.analyze("Tiny", images="test:0-1", techniques=["rpv", "predictions"],
                             models_dir=trained)
    one = reportgen.analyze("Tiny", images="test:1", techniques=["rpv"], models_dir=trained)
    assert [i.key for i in both["inputs"]] == ["test-0", "test-1"]
    assert both["rpv/modified"]["maps"].shape == (2, 3, 4, 4)  # 12 -> conv 3 -> 10 -> primary 3/2 -> 4x4 grid
    np.testing.assert_allclose(both["rpv/modified"]["maps"][1], one["rpv/modified"]["maps"][0],
                               rtol=1e-5, atol=1e-7)
    assert both["predictions"]["lengths"].shape == (2, 3)


@pytest.mark.slow
def test_repeated_analyze_calls_reuse_the_network_and_its_compiled_passes(trained, tmp_path):
    import shutil

    from reportgen.catalog import Catalog
    from reportgen.engine import warm

    models = tmp_path / "models"
    shutil.copytree(trained, models)
    warm.forget()
    first = reportgen.analyze("Tiny", step="1-5", images="test:0-2", techniques=["predictions"],
                              models_dir=models)
    net = warm.network(Catalog(models), "Tiny", "1-5")
    passes = dict(net.compiled_passes)
    traced = {key: f.experimental_get_tracing_count() for key, f in passes.items()}
    assert traced                                    # the probe ran through compiled passes
    again = reportgen.analyze("Tiny", step="1-5", images="test:0-2",
                              techniques=["predictions"], models_dir=models)
    assert warm.network(Catalog(models), "Tiny", "1-5") is net      # not built again
    assert net.compiled_passes == passes                              # nor compiled again
    assert {key: f.experimental_get_tracing_count() for key, f in passes.items()} == traced
    np.testing.assert_array_equal(again["predictions"]["lengths"],
                                  first["predictions"]["lengths"])
    # another step of the same model: its weights, in the same network
    untrained = reportgen.analyze("Tiny", step="0-0", images="test:0-2",
                                  techniques=["predictions"], models_dir=models)
    assert warm.network(Catalog(models), "Tiny", "0-0") is net
    assert not np.allclose(untrained["predictions"]["lengths"], first["predictions"]["lengths"])
    # a step's file replaced (e.g. by training again) is read again
    shutil.copyfile(models / "Tiny" / "0-0.weights.h5", models / "Tiny" / "1-5.weights.h5")
    replaced = reportgen.analyze("Tiny", step="1-5", images="test:0-2",
                                 techniques=["predictions"], models_dir=models)
    np.testing.assert_array_equal(replaced["predictions"]["lengths"],
                                  untrained["predictions"]["lengths"])
    # an edited params.toml is another network
    params = models / "Tiny" / "params.toml"
    params.write_text(params.read_text().replace("[class_caps]\n",
                                                 "[class_caps]\nrouting_iterations = 2\n"))
    assert warm.network(Catalog(models), "Tiny", "1-5") is not net
    warm.forget()
