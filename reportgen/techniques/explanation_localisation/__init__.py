"""Explanation localisation on MultiMNIST: does each explanation point at the right digit?
Every test pair holds two digits of different classes whose source images are known
(`Dataset.components`), so each class's digit mask is known too (masks.py: ink above
`ink_threshold`; pixels in both digits' masks excluded from both by default).

Per pair and for EACH of its two true classes, each explanation the site shows is computed for
that class (the capsule families: RPV modified and original, or the family's built-in map, and
Grad-CAM++ of `gradcam_layer`, placed on the input as explanation_fidelity places them, pixels
no cell reaches counting 0; a CNN: LRP and CLRP1, Gu, Yang & Tresp 2018) and scored against that
class's digit mask and against the OTHER digit's (pointing at the other digit is the failure):
- the pointing game (Zhang et al., ECCV 2016): a hit when the map's maximum is in the mask;
- relevance mass accuracy (Arras, Osman & Samek 2022, "CLEVR-XAI", eq. 6): the share of the
  map's positive relevance inside the mask.
Baselines that know nothing of the digits: a uniform map (relevance mass = the mask's area share;
pointing = the expected hit of a uniformly random pixel, the same share) and a random map (i.i.d.
uniform noise, seeded). Each score is the mean over the pairs (a pair's value: the mean over its
two classes) with its BCa bootstrap interval; each explanation's paired difference from the
uniform map on its own digit, and its own-digit minus other-digit difference, are bootstrapped
over the same pairs, and a verdict says "above" / "below" only where that interval excludes 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_option, check_positive, rounded_number
from reportgen.results.technique_numbers import LOCALISATION_BASELINES as BASELINES
from reportgen.results.technique_numbers import LOCALISATION_LABELS as LABELS
from reportgen.results.technique_numbers import LOCALISATION_METHODS as METHODS
from reportgen.results.technique_numbers import LOCALISATION_METRICS as METRICS
from reportgen.results.technique_numbers import localisation_key as key
from reportgen.results.technique_numbers import localisation_verdict as verdict
from reportgen.techniques.explanation_localisation import masks as lm

NAME = "explanation_localisation"
EXAMPLES = 3
NOT_EXPLAINED = ("it has no explanation of its own on capsules and no CNN logits for LRP, so "
                 "no map to localise")


@dataclass(frozen=True)
class Params:
    images: int = 50                # test pairs (a sample stratified by the first digit's class)
    ink_threshold: float = 0.5      # a digit's mask: its source image's ink above this
    overlap: str = "exclude"        # pixels in both masks: "exclude" from both, or "both"
    gradcam_layer: str = "conv1"    # conv layer of the Grad-CAM++ maps (capsule families)
    seed: int = 0                   # the pair sample and the random maps

    def __post_init__(self):
        check_positive(NAME, "images", self.images)
        check_option(NAME, "overlap", self.overlap, lm.OVERLAPS)
        if not 0.0 <= self.ink_threshold < 1.0:
            raise ReportgenError(f"Invalid option 'ink_threshold' for technique '{NAME}'.",
                                 expected="an ink level in [0, 1)",
                                 received=repr(self.ink_threshold),
                                 fix="Set 'ink_threshold' to e.g. 0.5.")


def variants(description) -> list[Params]:
    """Grad-CAM++ of conv1 when the model has it (as explanation_fidelity), else its default."""
    from reportgen.techniques.gradcam_pp import default_layer

    names = description.conv_layer_names
    return [Params() if "conv1" in names else Params(gradcam_layer=default_layer(description))]


def is_cnn(description) -> bool:
    return "logits" in description.features


def unsuited(description) -> str | None:
    if is_cnn(description):
        return None
    needed = {"capsule_maps", "class_capsules", "own_explanation"}
    return None if needed <= description.features else NOT_EXPLAINED


def capsule_maps(net, images, targets, layer: str, class_names) -> dict[str, np.ndarray]:
    """{method: (B, H, W)} the maps the site shows of each image's target class (one probe pass
    with gradients; the images' labels are the targets, so "grad[true]" is their gradient)."""
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.techniques.explanation_fidelity import saliency_maps
    from reportgen.techniques.explanation_quality import _available, perturbed_needs

    batch = EvalBatch(net, np.asarray(images, np.float32), np.asarray(targets, np.int64),
                      tuple(class_names))
    batch.tensors(*_available(perturbed_needs(layer), net.description))
    _, _, placed = saliency_maps(batch, np.arange(len(images)), batch.labels, layer, "true")
    return placed


def cnn_maps(net, images, targets) -> dict[str, np.ndarray]:
    """{"lrp", "clrp1"}: (B, H, W) a CNN's LRP and CLRP1 maps (reportgen.techniques.lrp_clrp);
    none when a layer has no LRP rule."""
    from reportgen.techniques.lrp_clrp import chain_of
    from reportgen.techniques.lrp_clrp.contrastive import relevance_maps

    steps = chain_of(net)
    if steps is None:
        return {}
    maps = relevance_maps(steps, np.asarray(images, np.float32), targets)
    return {"lrp": maps["lrp"], "clrp1": maps["clrp1"]}


def score_all(maps: dict, masks: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """"pointing", "mass": (methods, 2N, 2) in METHODS order (NaN for a method not in `maps`),
    the last axis the explained digit's mask and the other's; the random map drawn from `rng`
    and added to `maps`."""
    own, other = lm.class_masks(masks)
    maps["random_map"] = rng.random(own.shape)
    out = {m: np.full((len(METHODS), *own.shape[:1], 2), np.nan) for m in METRICS}
    for i, method in enumerate(METHODS):
        if method == "uniform_map":
            got = lm.uniform_scores(own, other)
        elif method in maps:
            got = lm.scores(maps[method], own, other)
        else:
            continue
        for metric in METRICS:
            out[metric][i] = got[metric]
    return out


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """Arrays: "pointing", "mass" (methods, 2N, 2) per explanation of class k of pair i at row
    2i + k, against [own digit, other digit]; "has" (methods,); "labels" (N, 2); "area" (N, 2)
    each mask's share of the image; "example_images" (E, H, W, C), "example_masks"
    (E, 2, H, W), "example_maps" (methods, E, 2, H, W) (zeros for a method the model lacks)."""
    from reportgen.techniques.multimnist_segmentation import pair_sample

    params = params or Params()
    net = evaluation.net
    description = net.description
    x, labels, sources, _ = pair_sample(net.params.dataset, params.images, params.seed)
    masks = lm.digit_masks(sources, params.ink_threshold, params.overlap)
    images = np.repeat(x, 2, axis=0)                       # row 2i + k: pair i, its class k
    targets = labels.reshape(-1)
    if is_cnn(description):
        maps = cnn_maps(net, images, targets)
    else:
        from reportgen.techniques.compute import check_conv_layer

        check_conv_layer(net, NAME, params.gradcam_layer)
        maps = capsule_maps(net, images, targets, params.gradcam_layer,
                            evaluation.class_names)
    maps = {m: np.nan_to_num(np.asarray(v, np.float64), nan=0.0) for m, v in maps.items()}
    out = score_all(maps, masks, np.random.default_rng(params.seed))
    has = np.asarray([m in maps or m == "uniform_map" for m in METHODS], np.int64)
    shown = min(EXAMPLES, len(x))
    height, width = x.shape[1:3]
    example = np.zeros((len(METHODS), shown, 2, height, width), np.float32)
    for i, method in enumerate(METHODS):
        if method in maps:
            example[i] = maps[method][:2 * shown].reshape(shown, 2, height, width)
    return {**{m: v.astype(np.float32) for m, v in out.items()}, "has": has,
            "labels": labels.astype(np.int64), "area": lm.area_share(
                masks.reshape(-1, height, width)).reshape(-1, 2).astype(np.float32),
            "example_images": x[:shown], "example_masks": masks[:shown],
            "example_maps": example}


def per_pair(values) -> np.ndarray:
    """(N,) a pair's value: the mean of its two classes' (where defined), from (2N,)."""
    values = np.asarray(values, np.float64).reshape(-1, 2)
    with np.errstate(invalid="ignore"):
        count = np.isfinite(values).sum(axis=1)
        total = np.nansum(values, axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def own_methods(arrays) -> tuple[str, ...]:
    has = np.asarray(arrays["has"]).reshape(-1)
    return tuple(m for i, m in enumerate(METHODS) if has[i] and m not in BASELINES)


def summarize(arrays: dict, params: Params | None = None) -> dict:
    """Per map (the model's and the baselines) and metric, against the own and the other digit:
    the mean over the pairs with its BCa interval; for every explanation the paired differences
    own - uniform map (own) and own - other, and their verdicts "verdict_<metric>_<method>_
    <uniform_map|random_map|other>"; the procedure."""
    params = params or Params()
    has = np.asarray(arrays["has"]).reshape(-1)
    area = np.asarray(arrays["area"], np.float64)
    out = {"images": int(area.shape[0]), "ink_threshold": params.ink_threshold,
           "overlap": params.overlap, "gradcam_layer": params.gradcam_layer,
           "mask_area": rounded_number(area.mean()) if area.size else None,
           "methods": [m for i, m in enumerate(METHODS) if has[i]]}
    for metric in METRICS:
        values = np.asarray(arrays[metric], np.float64)
        pairs = {(m, t): per_pair(values[i, :, j]) for i, m in enumerate(METHODS) if has[i]
                 for j, t in enumerate(lm.TARGETS)}
        for (method, against), v in pairs.items():
            valid = v[np.isfinite(v)]
            name = key(metric, method, against)
            out[name] = rounded_number(valid.mean()) if valid.size else None
            if valid.size:
                iv.attach(out, name, iv.bootstrap_mean(valid))
        for method in own_methods(arrays):
            a = pairs[(method, "own")]
            for baseline, b in (("uniform_map", pairs[("uniform_map", "own")]),
                                ("random_map", pairs.get(("random_map", "own"))),
                                ("other", pairs[(method, "other")])):
                if b is None or not (np.isfinite(a) & np.isfinite(b)).any():
                    continue
                against = key(metric, method, "other") if baseline == "other" \
                    else key(metric, baseline)
                iv.attach_difference(out, key(metric, method), against,
                                     iv.paired_difference(a, b))
                out[f"verdict_{metric}_{method}_{baseline}"] = verdict(out, metric, method,
                                                                       baseline)
    return out


TECHNIQUE = Technique(
    name=NAME,
    citations=cite("zhang2016excitation", "arras2022clevr", "sabour2017dynamic"),
    title="Do the explanations point at the right digit?",
    layer="model",
    scope="dataset",
    needs=frozenset(),
    applies_to=frozenset({"conv"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.explanation_localisation.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    unsuited=unsuited,
    labels=(2,),
    may_hold_nan=(("pointing", "a map the model lacks; an empty digit mask"),
                  ("mass", "a map the model lacks; an empty mask; a map without positive "
                           "relevance")),
    description="On MultiMNIST the place of each class is known: its source digit. For each of "
                "a test pair's two classes, each explanation this site shows is computed for "
                "that class and scored against that digit's mask and against the other digit's: "
                "the pointing game (Zhang et al. 2016: is the map's maximum on the digit?) and "
                "relevance mass accuracy (Arras et al. 2022: the share of positive relevance on "
                "the digit), beside a uniform map (the mask's share of the image) and a random "
                "map. Verdicts call a map better than the uniform map, or better on its own "
                "digit than on the other, only where the 95% interval of the paired difference "
                "over the same pairs excludes zero.",
)
