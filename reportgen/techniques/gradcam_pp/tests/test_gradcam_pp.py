"""Grad-CAM++ (Chattopadhay et al. 2018) against a NumPy oracle (tests/reference/analyses.py)
and tf-keras-vis, on the tiny CapsNet's class-capsule lengths."""

from __future__ import annotations

import numpy as np
import pytest
from reference import analyses

from reportgen.errors import ReportgenError
from reportgen.probe.probe import run_probe
from reportgen.techniques import get_technique


def _technique():
    return get_technique("gradcam_pp")


def _params(**options):
    return _technique().params_type(**options)


def _run(batch, **options):
    return _technique().compute(batch, _params(**options))


@pytest.mark.parametrize("layer", ["conv1", "primary_conv"])
def test_gradcam_pp_matches_numpy_oracle(layer, probe):
    maps = _run(probe, layer=layer)["map"]
    features = probe[f"conv:{layer}"]
    assert maps.shape == features.shape[:3] and maps.dtype == np.float32
    scores = probe["lengths"][np.arange(len(probe)), probe["predicted"]]
    raw = np.stack([analyses.gradcam_plus_plus(a, g, s)
                    for a, g, s in zip(features, probe[f"grad:{layer}"], scores)])
    np.testing.assert_allclose(maps, analyses.minmax(raw), atol=1e-5)
    assert maps.min() >= 0 and maps.max() <= 1


def test_gradcam_pp_default_layer_is_conv1(probe):
    np.testing.assert_array_equal(_run(probe)["map"],
                                  _run(probe, layer="conv1")["map"])


@pytest.mark.parametrize("layer", ["conv1", "primary_conv"])
def test_gradcam_pp_matches_tf_keras_vis(layer, tiny_net, images, probe):
    import keras
    from tf_keras_vis.gradcam_plus_plus import GradcamPlusPlus
    from tf_keras_vis.utils.scores import CategoricalScore

    lengths_model = keras.Model(tiny_net.model.inputs,
                                tiny_net.model.get_layer("lengths").output)
    gradcam = GradcamPlusPlus(lengths_model, clone=False)
    predicted = [int(p) for p in probe["predicted"]]
    reference = gradcam(CategoricalScore(predicted), images, penultimate_layer=layer,
                        seek_penultimate_conv_layer=False, normalize_cam=False, expand_cam=False)
    reference = analyses.minmax(np.asarray(reference))
    ours = _run(probe, layer=layer)["map"]
    np.testing.assert_allclose(ours, reference, atol=5e-5)    # tf-keras-vis and ours agree to 5e-5
    for mine, theirs in zip(ours, reference):
        assert theirs.std() > 0
        assert np.corrcoef(mine.ravel(), theirs.ravel())[0, 1] >= 0.99


def test_gradcam_pp_needs_gradients(tiny_net, images):
    with pytest.raises(ReportgenError, match="gradients"):
        _run(run_probe(tiny_net, images, gradients=False))
