"""Every registered technique draws: its result on a tiny net (the first of the contract's nets
it applies to, with the kit's small options) goes through `render`, and a dataset technique's
summary through `render_trend` and `render_compare`. The drawing modules are imported lazily
(reportgen.techniques.base.lazy), so without this a drawing module that no longer imports (a
syntax error, a renamed helper) would fail only the slow builds."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from reportgen.figures.figure import Figure, RenderContext
from reportgen.probe.evaluation import EvalBatch
from reportgen.probe.probe import empty_batch, run_probe
from reportgen.sdk.testing import SMALL_OPTIONS
from reportgen.techniques import get_technique, technique_names

IMAGES = 3          # input scope: probed images (the first one is drawn)
EVALUATED = 12      # dataset scope: the evaluation set (every class present)


def _net_params() -> list[dict]:
    """The tiny nets, the cheapest first: the default family's example, the other families',
    the CNN heads, then the nets of the data sets some analyses need."""
    import family_nets

    from reportgen.settings.families import example_params, registered

    return ([example_params(name) for name in registered()]
            + [family_nets.tiny_cnn(head) for head in family_nets.CNN_HEADS]
            + [family_nets.TINY_PAIR, family_nets.TINY_CNN40])


_NETS: dict = {}


def _nets():
    """Each built on first use, once per process (each net's compiled passes are kept on it),
    in order: a technique that applies to the first net builds no other."""
    import family_nets

    for i, raw in enumerate(_net_params()):
        if i not in _NETS:
            _NETS[i] = family_nets.build(raw)
        yield _NETS[i]


def _applicable(technique):
    """(net, first variant with the small options) of the first net the technique applies to."""
    for net in _nets():
        variants = technique.variants(net)
        if variants:
            params = variants[0]
            small = SMALL_OPTIONS.get(technique.name)
            if small and params is not None:
                params = dataclasses.replace(params, **small)
            return net, params
    pytest.fail(f"{technique.name} applies to none of the tiny nets")


def _result(technique, net, params, rng):
    """(arrays of one item, summary or None): computed as the build computes them."""
    description = net.description
    needs = technique.needs_for(params, net)
    images = rng.random((EVALUATED, *description.input_shape), dtype=np.float32)
    labels = np.arange(EVALUATED) % description.classes
    if technique.scope == "input":
        arrays = technique.compute(run_probe(net, images[:IMAGES], needs=needs,
                                             labels=labels[:IMAGES]).restricted(needs), params)
        return {k: np.asarray(v)[0] for k, v in arrays.items()}, images[0], None
    if technique.scope == "checkpoint":
        return technique.compute(empty_batch(net).restricted(needs), params), None, None
    names = tuple(str(k) for k in range(description.classes))
    arrays = technique.compute(EvalBatch(net, images, labels.astype(np.int64),
                                         names).restricted(needs), params)
    summary = technique.summarize(arrays, params) if technique.summarize else None
    return arrays, None, summary


def _check_figures(figures, what: str) -> None:
    assert figures, f"{what} drew no figure"
    for figure in figures:
        assert isinstance(figure, Figure), what
        assert figure.data and figure.name, (what, figure.name)


# Measured slowest to compute and draw (tens of seconds on a busy 2-core machine): slow here;
# test_every_drawing_module_imports keeps their drawing modules in the fast loop.
SLOW_TO_RENDER = {"adversarial_robustness", "explanation_fidelity", "capsule_semantics",
                  "routing_entropy", "vote_agreement"}


def _renderers(technique) -> dict:
    return {what: getattr(technique, what) for what in ("render", "render_trend", "render_compare")
            if getattr(technique, what, None) is not None}


@pytest.mark.parametrize("name", technique_names())
def test_every_drawing_module_imports(name):
    """The fast twin of the slow cases below: each lazily imported drawing function exists."""
    import importlib

    technique = get_technique(name)
    renderers = _renderers(technique)
    assert "render" in renderers, name
    for what, call in renderers.items():
        module = getattr(call, "lazy_module", None)
        if module is not None:      # lazy(module, function): the function the call will find
            function = call.__name__.removeprefix("lazy_")
            assert callable(getattr(importlib.import_module(module), function, None)), \
                f"{name}.{what}: {module}.{function}"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_TO_RENDER
                                  else n for n in technique_names()])
def test_every_technique_renders_a_tiny_result(name):
    technique = get_technique(name)
    net, params = _applicable(technique)
    arrays, image, summary = _result(technique, net, params, np.random.default_rng(5))
    names = tuple(str(k) for k in range(net.description.classes))
    ctx = RenderContext(model="tiny", step="1-1", class_names=names, input_label="noise #0",
                        image=image, description=net.description)
    _check_figures(technique.render(arrays, params, ctx), f"{name}.render")
    if summary is None:
        return
    # as reportgen.commands.site_assembly hands them on: the numbers through JSON, a trend
    # over two steps, a comparison of two models (with the first variant's params, None)
    summary = json.loads(json.dumps(summary))
    if technique.render_trend is not None:
        over = dataclasses.replace(ctx, step="all", input_label="", image=None)
        trend = technique.render_trend([("0-0", summary), ("1-1", summary)], params, over)
        _check_figures(trend, f"{name}.render_trend")
    if technique.render_compare is not None:
        across = RenderContext(model="all models", step="last", class_names=())
        compare = technique.render_compare([("tiny (1-1)", summary), ("other (1-1)", summary)],
                                           None, across)
        _check_figures(compare, f"{name}.render_compare")
