"""Trainable-parameter count from ModelParams by arithmetic alone (no TensorFlow import).

Used by `reportgen models`, which must stay fast; a test checks it against the Keras model.
"""

from __future__ import annotations

import math

from reportgen.capsnet.description import describe
from reportgen.settings.model_params import ModelParams


def primary_grid(params: ModelParams) -> tuple[int, int]:
    """(H, W) of the primary-capsule grid (reportgen.capsnet.description computes it)."""
    return describe(params).primary_capsules.grid


def count_trainable_params(params: ModelParams) -> int:
    if params.family != "capsnet":
        from reportgen.capsnet.cnn import count_cnn_params
        from reportgen.capsnet.em_description import count_em_params
        from reportgen.capsnet.gracapsnet import count_gracapsnet_params

        return {"gracapsnet": count_gracapsnet_params, "cnn": count_cnn_params,
                "em": count_em_params}[params.family](params)
    channels = params.input_shape[2]
    total = 0
    for c in params.conv:
        total += c.kernel_size ** 2 * channels * c.filters + c.filters
        channels = c.filters
    p = params.primary
    total += p.kernel_size ** 2 * channels * p.types * p.dims + p.types * p.dims
    h, w = primary_grid(params)
    sharing = params.class_caps.weight_sharing      # "all": one matrix per class (Gu 2022)
    matrices = 1 if sharing == "all" else p.types if sharing else h * w * p.types
    total += matrices * params.num_classes * params.class_caps.dims * p.dims
    if params.decoder.enabled:
        width = params.num_classes * params.class_caps.dims
        for units in (*params.decoder.units, math.prod(params.input_shape)):
            total += width * units + units
            width = units
    return total
