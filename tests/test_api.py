"""The Python API: load a model at a step in one call; analyses callable without the site."""

import numpy as np
import pytest

import reportgen
from reportgen.errors import ReportgenError
from test_training import TINY_TOML, _tiny_data


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from reportgen.catalog import Catalog
    from reportgen.training.trainer import TrainOptions, train

    tmp = tmp_path_factory.mktemp("api")
    data = _tiny_data(tmp / "toy.npz")
    root = tmp / "models"
    (root / "Tiny").mkdir(parents=True)
    (root / "Tiny" / "params.toml").write_text(TINY_TOML.format(data=data))
    train(Catalog(root).get("Tiny"), TrainOptions(epochs=1))
    return root


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


def test_analyze_batches_like_item_by_item(trained):
    both = reportgen.analyze("Tiny", images="test:0-1", techniques=["rpv", "predictions"],
                             models_dir=trained)
    one = reportgen.analyze("Tiny", images="test:1", techniques=["rpv"], models_dir=trained)
    assert [i.key for i in both["inputs"]] == ["test-0", "test-1"]
    assert both["rpv/modified"]["maps"].shape == (2, 3, 4, 4)  # 12 -> conv 3 -> 10 -> primary 3/2 -> 4x4 grid
    np.testing.assert_allclose(both["rpv/modified"]["maps"][1], one["rpv/modified"]["maps"][0],
                               rtol=1e-5, atol=1e-7)
    assert both["predictions"]["lengths"].shape == (2, 3)
