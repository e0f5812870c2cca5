"""Words from the declaration (reportgen/capsnet/model_words.py): every caption, finding and page
text that says how a model scores its classes, what it predicts by, what its gradients are of
or what its routing weights are names the model's own mechanism — never another family's. A
CapsNet predicts by its longest class capsule, matrix capsules by their most active one, a
capsule head with a learnt readout by the largest logit read out of its class capsules, a CNN
by its most probable class. The supplement cites the model's family beside each technique, and
"About the methods" and Home list only the techniques the site built. No TensorFlow here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pytest

from reportgen.capsnet import model_words as mw
from reportgen.figures.figure import RenderContext
from reportgen.techniques.activation_maximization.figures import render_activation_maximization
from reportgen.techniques.class_capsules.figures import render_class_capsules
from reportgen.techniques.gradcam_pp.figures import render_gradcam_pp
from reportgen.techniques.predictions.figures import render_predictions

# what only a model of another family may be said to do
CAPSNET_ONLY = ("longest", "class capsule's length", "capsules' lengths", "|v|")
CNN_ONLY = ("CNN",)
CLASSES = ("zero", "one", "two")


def _description(name: str):
    from conftest import TINY_PARAMS
    from em_fixture import TINY_EM
    from family_nets import TINY_SELF_ROUTING, tiny_cnn

    from reportgen.capsnet.description import describe
    from reportgen.settings.model_params import parse_model_params

    raw = {"capsnet": TINY_PARAMS, "em": TINY_EM, "self_routing": TINY_SELF_ROUTING,
           "cnn": tiny_cnn("avg")}[name]
    return describe(parse_model_params(raw))


def learnt(activation: str = "length"):
    """A toy capsule head whose class scores a learnt layer reads out of the class capsules
    into logits (a CapsNet's layers otherwise), the class capsules' activation `activation`."""
    from reportgen.capsnet.description import Head

    description = _description("capsnet")
    head = description.head
    layers = tuple(dataclasses.replace(c, activation=activation) if c.name == head.layer else c
                   for c in description.capsule_layers)
    return dataclasses.replace(description, capsule_layers=layers,
                               head=Head(kind="capsules", classes=head.classes,
                                         layer=head.layer, readout="learnt"))


@pytest.fixture(scope="module")
def families():
    from test_capsule_vocabulary import pose_only

    return {name: _description(name) for name in ("capsnet", "em", "self_routing", "cnn")} | \
        {"learnt": learnt(), "pose_only": pose_only()}


def _ctx(description, image=None) -> RenderContext:
    return RenderContext(model="M", step="1-1", class_names=CLASSES, description=description,
                         image=image)


def test_each_family_is_told_in_its_own_words(families):
    words = {name: mw.words_of(d) for name, d in families.items()}
    assert words["capsnet"]["prediction"] == "the longest class capsule"
    assert words["capsnet"]["gradient"] == "the class capsule's length"
    assert words["capsnet"]["routing"] == "coupling coefficients of dynamic routing"
    assert words["em"]["prediction"] == "the most active class capsule"
    assert words["em"]["gradient"] == "the class capsule's logistic activation"
    assert words["em"]["routing"] == "EM assignments" and words["em"]["routing_symbol"] == "R"
    assert words["self_routing"]["routing"] == "self-routing coupling coefficients"
    assert words["cnn"]["prediction"] == "the CNN's most probable class"
    assert words["cnn"]["gradient"] == "the CNN's logit of the class"
    assert words["cnn"]["routing"] == ""
    # a learnt readout's pages show the probabilities of its logits (the probe's scores)
    assert words["learnt"]["readout"] == "learnt"
    assert words["learnt"]["scores"] == "probabilities"
    assert words["learnt"]["prediction"] == "the largest logit read out of the class capsules"
    assert words["learnt"]["top2"] == "the two largest logits read out of the class capsules"
    assert "learnt layer" in words["learnt"]["gradient"]
    assert words["pose_only"] == {**words["learnt"], "routing": words["pose_only"]["routing"],
                                  "routing_symbol": words["pose_only"]["routing_symbol"],
                                  "primary_activation": "activation"}
    for name, record in words.items():
        text = " ".join(record.values())
        if name != "capsnet":
            assert not any(w in text for w in CAPSNET_ONLY), (name, text)
        if name != "cnn":
            assert not any(w in text for w in CNN_ONLY), (name, text)
    # the one description property that said it before reads the same place
    assert families["capsnet"].class_scores == "class-capsule lengths"
    assert families["learnt"].class_scores == \
        "logits read out of the class-capsule poses by a learnt layer"
    # a record of an older build has no words: neutral ones, of no family
    assert mw.word({}, "prediction") == "the highest class score"


def test_the_predictions_chart_names_the_models_own_scores(families):
    probabilities = np.array([0.05, 0.8, 0.15])
    for name in ("learnt", "pose_only"):
        png, svg = render_predictions({"lengths": probabilities}, None,
                                      _ctx(families[name]))
        caption = png.caption
        assert ("the probability of each of the 3 classes, from the logits a learnt layer reads "
                "out of the class capsules") in caption, caption
        assert "Predicted class one (probability 0.800)" in caption
        assert not any(w in caption for w in CAPSNET_ONLY + CNN_ONLY), caption
        texts = re.findall(r">([^<]*)</text>", svg.data.decode())
        assert "Class probabilities" in texts
    em, _ = render_predictions({"lengths": np.array([0.1, 0.7, 0.2])}, None,
                               _ctx(families["em"]))
    assert "logistic activation of each of the 3 class capsules" in em.caption
    cnn, _ = render_predictions({"lengths": np.array([0.1, 0.7, 0.2]),
                                 "probabilities": np.array([0.1, 0.7, 0.2])}, None,
                                _ctx(families["cnn"]))
    assert "the CNN's probability" in cnn.caption


def test_class_capsules_are_labelled_by_the_score_the_model_reads_from_them(families):
    result = {"capsules": np.random.default_rng(0).normal(size=(3, 16)),
              "lengths": np.array([-0.5, 3.0, 1.0])}
    fig, = render_class_capsules(result, None, _ctx(families["learnt"]))
    assert "the prediction is the largest logit read out of the class capsules" in fig.caption
    assert "each row's probability on the right" in fig.caption
    assert "longest" not in fig.caption and "|v|" not in fig.caption
    fig, = render_class_capsules(result, None, _ctx(families["capsnet"]))
    assert "the longest is the prediction" in fig.caption and "|v|" in fig.caption


def test_gradients_are_of_the_models_own_score(families):
    result = {"map": np.random.default_rng(1).random((10, 10))}
    captions = {name: render_gradcam_pp(result, NS(layer="conv1"), _ctx(d))[0].caption
                for name, d in families.items()}
    assert "gradients of the class capsule's length" in captions["capsnet"]
    assert "gradients of the class capsule's logistic activation" in captions["em"]
    assert "gradients of the CNN's logit of the class" in captions["cnn"]
    assert "gradients of the class's logit, read out of its class capsule by a learnt layer" \
        in captions["learnt"]
    for name in ("em", "cnn", "learnt"):
        assert "length" not in captions[name], (name, captions[name])


def test_activation_maximization_does_not_call_the_longest_capsule_the_prediction(families):
    images = np.random.default_rng(2).random((3, 12, 12, 1))
    result = {"images": images, "lengths": np.eye(3) * 0.5 + 0.1}
    own, = render_activation_maximization(result, None, _ctx(families["capsnet"]))
    assert "the model's prediction for it" in own.caption
    other, = render_activation_maximization(result, None, _ctx(families["learnt"]))
    assert "the model's prediction for it" not in other.caption
    assert "predicts by the largest logit read out of the class capsules" in other.caption


def test_affine_and_multimnist_captions_predict_by_the_models_rule(families):
    from reportgen.techniques.affine_robustness import figures as affine_robustness
    from reportgen.techniques.multimnist_pair import figures as multimnist

    arrays = {"clean_accuracy": 0.9, "class_counts": np.array([5, 5, 4]),
              "values_rotation": np.array([-20.0, 0.0, 20.0]),
              "accuracy_rotation": np.array([0.5, 0.9, 0.5])}
    captions = {name: affine_robustness.render(arrays, None, _ctx(d))[0].caption
                for name, d in families.items()}
    assert "accuracy (prediction = the longest class capsule)" in captions["capsnet"]
    assert "accuracy (prediction = the largest logit read out of the class capsules)" in \
        captions["learnt"]
    assert "accuracy (prediction = the most active class capsule)" in captions["em"]
    assert "longest class capsule = prediction" not in " ".join(captions.values())
    image = np.random.default_rng(3).random((12, 12, 1))
    recs = np.random.default_rng(4).random((3, 12, 12, 1))
    ctx = _ctx(families["learnt"], image)
    ctx = dataclasses.replace(ctx, true_classes=(0, 2))
    pair, = multimnist.render_input({"lengths": np.array([3.0, -1.0, 2.0]),
                                     "reconstructions": recs}, None, ctx)
    assert "top-2 prediction is the two largest logits read out of the class capsules" in \
        pair.caption and "longest" not in pair.caption


def test_explanation_fidelity_and_adversarial_captions_name_the_score(families):
    from reportgen.techniques.adversarial_robustness import figures as adversarial_robustness
    from reportgen.techniques.explanation_fidelity import figures as explanation_fidelity
    from reportgen.techniques import adversarial_robustness as ar

    learnt_score = explanation_fidelity._score(_ctx(families["learnt"]), NS(target="true"))
    text = explanation_fidelity.procedure(NS(target="true", patch=5, seed=0, start="blur"), 10,
                                          24, "6x6", "conv1", "rpv_modified", learnt_score)
    assert "Score f = the probability of the true class from the logits a learnt layer reads " \
           "out of the class capsules" in text and "length" not in text
    capsnet = explanation_fidelity._score(_ctx(families["capsnet"]), NS(target="true"))
    assert capsnet == "the length of the class capsule of the true class"
    params = ar.variants(families["learnt"])[0]
    text = adversarial_robustness.procedure(params, 10, families["learnt"])
    assert ("softmax of the logits read out of the class-capsule poses by a learnt layer with "
            "the true label") in text
    assert "log logits" not in text and "probabilit" not in text
    assert text.endswith("(the largest logit read out of the class-capsule poses by a learnt "
                         "layer).")


def test_findings_name_the_models_own_routing_weights_and_activations(families):
    from reportgen.results.findings import findings

    from reportgen.results.intervals import Interval, attach

    # its interval: a gap to uniform of 0.0005–0.0015 nats, well within 0.05
    routing = attach({"entropy_max": 1.0986}, "entropy_mean",
                     Interval(1.0976, 1.0971, 1.0981, 200, "BCa bootstrap over images"))
    dead = {"dead_type_count": 1, "type_count": 8, "dead_type_threshold": 0.01}
    em = findings({"routing_entropy": routing, "dead_units": dead}, 3,
                  words=mw.words_of(families["em"]))
    text = " ".join(f.text for f in em)
    assert "the EM assignments barely depart from 1/3" in text
    assert "coupling" not in text and "below length" not in text
    assert "an inactive type stays below logistic activation 0.01" in text.lower()
    capsnet = " ".join(f.text for f in findings({"routing_entropy": routing}, 3,
                                                words=mw.words_of(families["capsnet"])))
    assert "the coupling coefficients of dynamic routing barely depart" in capsnet
    # without words (an older record): no family's name for them
    plain = " ".join(f.text for f in findings({"routing_entropy": routing}, 3))
    assert "the routing weights barely depart" in plain


def test_the_overview_says_what_the_prediction_is_and_finds_in_its_words(tmp_path, families):
    from reportgen.pages.render import render_site
    from site_fixture import make_site
    from test_findings import _analysed

    docs = tmp_path / "docs"
    site = make_site(docs)
    model, _ = _analysed(site)
    model.words = mw.words_of(families["em"])
    render_site(site, docs, theme="mkdocs")
    overview = (docs / "models" / "MNIST_Demo" / "index.md").read_text()
    assert "columns: predicted class (the most active class capsule)" in overview
    findings = overview[overview.index('id="findings"'):overview.index('id="training-curves"')]
    assert "EM assignments" in findings and "coupling" not in findings


# --- the supplement cites each model's family ----------------------------------------------------

def _with_sources(site, docs: Path) -> None:
    """The fixture's files as the build's record gives them: each with its stored file."""
    panels = [*site.compare_panels]
    for model in site.models:
        panels += model.trend_panels
        for step in model.steps:
            panels += step.checkpoint_panels + step.dataset_panels
            panels += [p for ps in step.input_panels.values() for p in ps]
    for panel in panels:
        for f in panel.figures:
            f.source = str(docs / f.path)
    for model in site.models:
        for f in model.downloads:
            f.source = str(docs / f.path)


def test_every_figure_of_a_model_cites_its_family_and_every_key_is_in_the_bib(tmp_path):
    from reportgen import bibtex
    from reportgen.commands.captions_tex import captions_tex
    from reportgen.commands.supplement import _Names, collect
    from reportgen.settings.families import example_params, family
    from reportgen.settings.model_params import parse_model_params
    from site_fixture import make_site

    docs = tmp_path / "docs"
    site = make_site(docs)
    _with_sources(site, docs)
    chosen = ("em", "self_routing")
    for model, name in zip(site.models, chosen):
        model.citations = list(family(name).citations_for(
            parse_model_params(example_params(name))))
    own = {model.name: {bibtex.entry_key(e) for e in model.citations} for model in site.models}
    assert own[site.models[0].name] == {"hinton2018matrix"}
    supplement = collect(site, site.models, steps="all", inputs="all")
    tex = captions_tex(supplement.figures)
    bib = bibtex.bibliography(supplement.references.values())
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib, flags=re.M))
    cited = {k.strip() for group in re.findall(r"\\cite\{([^}]*)\}", tex)
             for k in group.split(",")}
    assert cited and cited <= keys, cited - keys
    names = _Names()
    folders = {names.part(m.name): m.name for m in site.models}
    environments = tex.split("\\begin{figure}")[1:]
    assert len(environments) == len(supplement.figures)
    for figure, environment in zip(supplement.figures, environments):
        folder = figure.stem.split("/")[1]
        found = re.findall(r"\\cite\{([^}]*)\}", environment)
        keys_here = {k for group in found for k in group.split(",")}
        if folder == "compare":          # every compared model's family
            assert set().union(*own.values()) <= keys_here, figure.stem
        else:
            assert own[folders[folder]] <= keys_here, figure.stem
            others = set().union(*(v for k, v in own.items() if k != folders[folder]))
            assert not (others & keys_here), figure.stem
    # a technique's own reference stays beside the family's
    cam = next(f for f in supplement.figures if "gradcam_pp" in f.stem)
    assert "chattopadhay2018gradcampp" in cam.cite and cam.cite[-1] in \
        own[folders[cam.stem.split("/")[1]]]


# --- About the methods and Home list what the site built -----------------------------------------

def test_methods_and_home_list_the_built_techniques_and_say_why_the_others_are_not(tmp_path):
    from reportgen.pages.render import render_site
    from site_fixture import make_site

    docs = tmp_path / "docs"
    site = make_site(docs)
    site.techniques += [
        {"name": "gracaps_attention", "title": "GraCapsNet attention", "layer": "class",
         "scope": "input", "description": "Only GraCapsNet's.", "citations": []},
        {"name": "affnist_benchmark", "title": "affNIST-like benchmark", "layer": "model",
         "scope": "dataset", "description": "40x40 digits only.", "citations": []}]
    for model in site.models:
        model.not_applicable.append({"technique": "gracaps_attention",
                                     "title": "GraCapsNet attention", "layer": "class",
                                     "reason": "it has no graph-pooling attention"})
    render_site(site, docs, theme="mkdocs")
    methods = (docs / "methods.md").read_text()
    assert 'id="gracaps_attention"' not in methods and 'id="affnist_benchmark"' not in methods
    assert 'id="rpv"' in methods and 'id="predictions"' in methods
    line = methods[methods.index("<b>GraCapsNet attention</b>"):]
    line = line[:line.index("</li>")]
    assert "(<code>gracaps_attention</code>): did not apply to MNIST_Demo, " in line
    assert line.endswith(": it has no graph-pooling attention.")
    assert "affNIST-like benchmark</b> (<code>affnist_benchmark</code>): not run at the built " \
           "steps" in methods
    home = (docs / "index.md").read_text()
    table = home[home.index('id="techniques"'):]
    assert "<code>gracaps_attention</code>" not in table
    assert "<code>affnist_benchmark</code>" not in table
    assert "<code>rpv</code>" in table


# --- the reported model: inverted dot-product attention routing, learnt readout into logits ----

@pytest.fixture(scope="module")
def idpa_captions():
    """{technique: captions} of every technique that applies to the idpa example family's model
    (examples/idpa_capsnet: Tsai et al. 2020), drawn as reportgen's contract table draws
    them (reportgen.sdk.testing.technique_table)."""
    from reportgen.settings.families import registered

    if "idpa" not in registered():
        pytest.skip("the idpa example family (examples/idpa_capsnet) is not installed")
    import reportgen.techniques as registry
    from reportgen.sdk.testing import technique_table

    captions: dict[str, list[str]] = {}

    def recording(technique):
        def render(item, params, ctx):
            figures = technique.render(item, params, ctx)
            captions.setdefault(technique.name, []).extend(f.caption for f in figures)
            return figures
        return dataclasses.replace(technique, render=render)

    patch = pytest.MonkeyPatch()
    get, every = registry.get_technique, registry.all_techniques
    patch.setattr(registry, "get_technique", lambda name: recording(get(name)))
    patch.setattr(registry, "all_techniques", lambda: [recording(t) for t in every()])
    try:
        rows = technique_table("idpa", ["predictions", "class_capsules", "gradcam_pp",
                                        "vote_agreement", "adversarial_robustness",
                                        "routing_entropy", "affine_robustness"])
    finally:
        patch.undo()
    assert all(row.ok for row in rows), [(r.technique, r.problem) for r in rows]
    return captions


def test_the_reported_model_is_told_in_its_own_words(idpa_captions):
    from reportgen.techniques.affine_robustness.numbers import AFFNIST_REFERENCE

    # the affNIST reference beside the affine sweeps is context, named as such
    every = " ".join(c for captions in idpa_captions.values() for c in captions)
    every = every.replace(AFFNIST_REFERENCE, "")
    for other in ("longest", "class capsule's length", "capsules' lengths", "|v|", "CNN",
                  "coupling coefficients of dynamic routing", "margin"):
        found = [c for cs in idpa_captions.values() for c in cs
                 if other in c.replace(AFFNIST_REFERENCE, "")]
        assert other not in every, (other, found)
    assert "the logits a learnt layer reads out of the class capsules" in \
        idpa_captions["predictions"][0]
    assert "the prediction is the largest logit read out of the class capsules" in \
        idpa_captions["class_capsules"][0]
    assert "gradients of the class's logit, read out of its class capsule by a learnt layer" \
        in idpa_captions["gradcam_pp"][0]
    assert "prediction = the largest logit read out of the class capsules" in \
        idpa_captions["affine_robustness"][0]
    assert "inverted dot-product attention routing weights" in \
        " ".join(idpa_captions["routing_entropy"])


def test_home_counts_capsule_networks_apart_from_a_cnn(tmp_path):
    """Home's lede names what the site holds: a CNN baseline is no capsule network."""
    from site_fixture import make_site

    from reportgen.pages.render import render_site

    words = {name: mw.words_of(_description(name)) for name in ("capsnet", "em", "cnn")}
    assert [words[n]["network"] for n in ("capsnet", "em", "cnn")] == [
        "capsule network", "capsule network", "convolutional network"]
    assert mw.networks_phrase([words["capsnet"], words["em"], words["cnn"]]) == \
        "2 capsule networks and 1 convolutional network"
    assert mw.networks_phrase([words["em"]]) == "1 capsule network"
    docs = tmp_path / "docs"
    site = make_site(docs)
    site.models[0].words, site.models[1].words = words["capsnet"], words["cnn"]
    render_site(site, docs, theme="mkdocs")
    home = (docs / "index.md").read_text()
    assert ("Every visualization of every built training step of 1 capsule network and 1 "
            "convolutional network.") in home


def test_the_input_card_and_gallery_name_the_predicted_score(tmp_path):
    """"predicted 7 (0.86)" said nothing of what 0.86 is: the card and the overview's gallery
    name the model's own score ("length" for a CapsNet, "probability" for a CNN), and carry
    the word for the script that rewrites them when the step changes."""
    from site_fixture import make_site

    from reportgen.pages.render import render_site

    docs = tmp_path / "docs"
    site = make_site(docs)
    site.models[0].words = mw.words_of(_description("capsnet"))
    site.models[1].words = mw.words_of(_description("cnn"))
    render_site(site, docs, theme="mkdocs")
    capsnet = docs / "models" / site.models[0].name
    cnn = next(p for p in (docs / "models").iterdir() if p != capsnet)
    for folder, score in ((capsnet, "length"), (cnn, "probability")):
        layer = next(p for p in folder.glob("*.md") if 'data-rg-input-card' in p.read_text())
        card = layer.read_text()
        assert re.search(rf'data-rg="prediction" data-rg-score-word="{score}">predicted '
                         rf'<b>[^<]+</b> \({score} \d\.\d\d\)', card), layer
        overview = (folder / "index.md").read_text()
        assert re.search(rf'data-rg-prediction data-rg-score-word="{score}">predicted <b>[^<]+'
                         rf'</b> \({score} \d\.\d\d\)', overview)
    script = Path(__file__).resolve().parents[1] / "templates" / "assets" / "reportgen.js"
    assert script.read_text().count('target.getAttribute("data-rg-score-word")') == 2


def test_analyses_at_two_steps_without_a_trend_say_so_not_that_trends_need_two(tmp_path):
    """A model analysed at 2 of 2 steps whose analyses draw no trend (MultiMNIST segmentation)
    read "Trends need the analyses at two or more steps" under "Computed at 2 of 2"."""
    from site_fixture import make_site

    from reportgen.pages.render import render_site

    docs = tmp_path / "docs"
    site = make_site(docs)
    demo = site.models[0]
    demo.trend_panels = []
    render_site(site, docs, theme="mkdocs")
    page = (docs / "models" / demo.name / "analyses.md").read_text()
    computed = re.search(r"Computed at (\d+) of \d+ built steps?", page)
    assert computed and int(computed.group(1)) >= 2
    assert "None of the analyses computed here draws a trend over training" in page
    assert "Trends need the analyses at two or more steps" not in page


def test_explanation_fidelitys_title_names_rpv_not_a_built_in_explanation_of_every_family():
    from reportgen.techniques import get_technique

    title = get_technique("explanation_fidelity").title
    assert "RPV" in title and "built-in" not in title
