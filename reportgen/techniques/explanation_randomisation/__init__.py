"""Randomisation sanity checks of the explanations a model's site shows (Adebayo, Gilmer,
Muelly, Goodfellow, Hardt & Kim 2018, "Sanity checks for saliency maps"): does a map depend on
what the network learned?

The maps are the site's own, for each image's true class, placed on the input as explanation
fidelity places them (`saliency_maps`: RPV modified and original or the family's built-in map,
and Grad-CAM++ of `gradcam_layer`), over a stratified subset of `images` evaluation images.

- Cascading model-parameter randomisation (Adebayo et al. 2018, section 3.1): on a copy of the
  network (reportgen.techniques.explanation_randomisation.cascade; the trained network is only
  read), the weighted layers of the encoder are re-initialised one at a time from the output
  side down, cumulatively, each with its own Keras initializers (seeded), and after each step
  every map is recomputed (one probe pass with gradients over the images per depth). Per image
  and depth, the similarity of the map to the trained network's over the pixels its grid
  covers: Spearman's rank correlation of |map| and of the signed map, and SSIM of |map| scaled
  to [0, 1] (Wang et al. 2004; similarity.py).
- Random-logit test (Sixt, Granz & Landgraf 2020; Adebayo et al. 2018's class sensitivity): the
  map of the true class against the map of a uniformly drawn other class, same measures.
- Baseline: a random map (uniform noise on the pixels the map covers) against the trained map:
  what no relation gives (about 0).

Each curve point is a mean over the images with its 95% BCa bootstrap interval. Verdict per
explanation: it passes when, with every layer randomised, the upper end of the interval of
every measure lies below `threshold`; otherwise its map stays similar when the weights are
random and it does not pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_positive
from reportgen.techniques.explanation_fidelity import RPV_NEEDS, saliency_maps
from reportgen.techniques.explanation_randomisation.similarity import MEASURES, similarities

NAME = "explanation_randomisation"
METHODS = ("rpv_modified", "rpv_original", "builtin", "gradcam_pp")


@dataclass(frozen=True)
class Params:
    images: int = 20                # images of the evaluation set (stratified subset)
    threshold: float = 0.5          # a map passes when its fully randomised similarity is below
    gradcam_layer: str = "conv1"    # conv layer of the Grad-CAM++ maps
    seed: int = 0                   # subset, random weights, random classes, random map

    def __post_init__(self):
        check_positive(NAME, "images", self.images)
        if not isinstance(self.threshold, (int, float)) or not -1 < self.threshold <= 1:
            raise ReportgenError(f"Invalid option 'threshold' for technique '{NAME}'.",
                                 expected="a similarity in (-1, 1]",
                                 received=repr(self.threshold),
                                 fix="Set 'threshold' to a number such as 0.5.")


def variants(description) -> list[Params]:
    """Grad-CAM++ of conv1 when the model has it (as explanation_fidelity), else its default."""
    from reportgen.techniques.gradcam_pp import default_layer

    names = description.conv_layer_names
    return [Params() if "conv1" in names else Params(gradcam_layer=default_layer(description))]


def map_needs(layer: str) -> frozenset[str]:
    """What the maps read: RPV's or the built-in map's tensors, the Grad-CAM++ layer's maps and
    the gradients of the labels' classes there."""
    return RPV_NEEDS | {"lengths", "explanation", f"conv:{layer}", f"grad[true]:{layer}"}


def needs(params: Params | None) -> frozenset[str]:
    params = params or Params()
    return map_needs(params.gradcam_layer)


def _available(names, description) -> list[str]:
    from reportgen.probe.probe import available, expand_needs

    return sorted(n for n in expand_needs(names, description) if available(n, description))


def maps_of(net, images: np.ndarray, targets: np.ndarray, layer: str,
            class_names) -> dict[str, np.ndarray]:
    """{method: (n, H, W)} every map of each image's target class from `net` as it is now, one
    probe pass with gradients (the batch's labels are the targets)."""
    from reportgen.probe.evaluation import EvalBatch

    batch = EvalBatch(net, images, np.asarray(targets, np.int64), tuple(class_names))
    batch.tensors(*_available(map_needs(layer), net.description))
    return saliency_maps(batch, np.arange(len(images)), np.asarray(targets), layer, "true")[2]


def other_classes(labels: np.ndarray, classes: int, rng: np.random.Generator) -> np.ndarray:
    """A class other than each label, uniform over the other classes."""
    return (labels + rng.integers(1, classes, len(labels))) % classes


def encode_names(names) -> np.ndarray:
    """Layer names as UTF-8 bytes joined by newlines (results hold numbers only)."""
    return np.frombuffer("\n".join(names).encode(), np.uint8).copy()


def decode_names(array) -> list[str]:
    data = bytes(np.asarray(array, np.uint8).reshape(-1)).decode()
    return data.split("\n") if data else []


def compute(eval_batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """The randomisation checks of every map (see the module docstring).

    Arrays: "cascade" (methods, L + 1, measures, N): similarity to the trained map after
    randomising the d top weighted layers, d = 0 … L (d = 0: the copy as trained, 1 up to
    float error); "random_logit", "baseline" (methods, measures, N): the other class's map,
    and a random map, against the trained map; METHODS and MEASURES order, NaN for a method
    the model lacks and where Spearman is undefined (a constant map); "has" (methods,);
    "layers" the weighted layers' names, output side first (encode_names); "index", "labels",
    "others" (N,).
    """
    from reportgen import console
    from reportgen.probe.evaluation import stratified_sample
    from reportgen.techniques.compute import check_conv_layer
    from reportgen.techniques.explanation_randomisation.cascade import (cascade_maps,
                                                                        randomised_copy)

    params = params or Params()
    net = eval_batch.net
    layer = params.gradcam_layer
    check_conv_layer(net, NAME, layer)
    description = net.description
    eval_batch.tensors(*_available(needs(params), description))   # the shared clean pass
    index = stratified_sample(eval_batch.labels, params.images, seed=params.seed)
    images = np.asarray(eval_batch.images[index], np.float32)
    labels = np.asarray(eval_batch.labels[index], np.int64)
    n, height, width = images.shape[:3]
    _, _, trained = saliency_maps(eval_batch, index, labels, layer, "true")
    rng = np.random.default_rng(params.seed)
    others = other_classes(labels, description.classes, rng)
    random_map = {m: np.where(np.isfinite(maps), rng.random(maps.shape), np.nan)
                  for m, maps in trained.items()}      # noise on the pixels each map covers

    copy = randomised_copy(net, params.seed)
    depths = len(copy.cascade.layers) + 1
    names = eval_batch.class_names
    with console.progress(depths + 1, f"explanation randomisation ({n} images × {depths} "
                          f"depths + the random class)", unit="passes") as bar:
        def explain():
            maps = maps_of(copy.net, images, labels, layer, names)
            bar.update(1)
            return maps
        per_depth = cascade_maps(copy.cascade, explain)
        other = maps_of(copy.net, images, others, layer, names)
        bar.update(1)

    shape = (len(METHODS), len(MEASURES), n)
    cascade = np.full((len(METHODS), depths, len(MEASURES), n), np.nan, np.float32)
    random_logit = np.full(shape, np.nan, np.float32)
    baseline = np.full(shape, np.nan, np.float32)
    stack = lambda found: np.stack([found[m] for m in MEASURES])       # noqa: E731
    for i, method in enumerate(METHODS):
        if method not in trained:
            continue
        for d, maps in enumerate(per_depth):
            cascade[i, d] = stack(similarities(trained[method], maps[method]))
        random_logit[i] = stack(similarities(trained[method], other[method]))
        baseline[i] = stack(similarities(trained[method], random_map[method]))
    return {"cascade": cascade, "random_logit": random_logit, "baseline": baseline,
            "has": np.asarray([m in trained for m in METHODS], np.int64),
            "layers": encode_names(copy.cascade.names),
            "index": index.astype(np.int64), "labels": labels,
            "others": others.astype(np.int64)}


def own_methods(arrays) -> tuple[str, ...]:
    has = np.asarray(arrays["has"]).reshape(-1)
    return tuple(m for i, m in enumerate(METHODS) if has[i])


def key(measure: str, method: str, test: str = "cascade") -> str:
    """A summary's key of a mean similarity ("cascade": a list over the depths)."""
    return f"{test}_{measure}_{method}"


def _mean_interval(values: np.ndarray):
    valid = values[np.isfinite(values)]
    return iv.bootstrap_mean(valid) if valid.size else None


def summarize(arrays: dict, params: Params | None = None) -> dict:
    """Per map the model has and per measure: "cascade_<measure>_<method>" the mean similarity
    over the images at every depth (a list, depth 0 = trained), "random_logit_…" and
    "baseline_…" (the random map's), each with its BCa interval under summary["intervals"];
    "verdict_<method>" ("passes" / "does not pass") and "verdict_text_<method>" in words; the
    procedure (images, threshold, layer, layers randomised in order)."""
    params = params or Params()
    cascade = np.asarray(arrays["cascade"], np.float64)
    layers = decode_names(arrays["layers"])
    out = {"images": int(cascade.shape[-1]), "threshold": float(params.threshold),
           "gradcam_layer": params.gradcam_layer, "layers": layers,
           "methods": list(own_methods(arrays))}
    for method in own_methods(arrays):
        m = METHODS.index(method)
        failing = []
        for s, measure in enumerate(MEASURES):
            points = [_mean_interval(cascade[m, d, s]) for d in range(cascade.shape[1])]
            if all(p is not None for p in points):
                iv.attach(out, key(measure, method), points)
            else:
                out[key(measure, method)] = [None if p is None else p.value for p in points]
            last = points[-1]
            if last is None or not last.high < params.threshold:
                failing.append(measure)
            for test in ("random_logit", "baseline"):
                found = _mean_interval(np.asarray(arrays[test], np.float64)[m, s])
                if found is None:
                    out[key(measure, method, test)] = None
                else:
                    iv.attach(out, key(measure, method, test), found)
        out[f"verdict_{method}"] = "does not pass" if failing else "passes"
        out[f"verdict_text_{method}"] = verdict_text(method, failing, params.threshold)
    return out


def verdict_text(method: str, failing: list[str], threshold: float) -> str:
    from reportgen.results.technique_numbers import METHOD_LABELS
    from reportgen.techniques.explanation_randomisation.similarity import LABELS

    label = METHOD_LABELS[method]
    if not failing:
        return (f"{label} passes the randomisation test: with every layer randomised, the 95% "
                f"interval of each similarity lies below {threshold:g}")
    return (f"{label} does not pass the randomisation test: its map stays similar when the "
            f"weights are random ({', '.join(LABELS[f] for f in failing)}: the 95% interval "
            f"with every layer randomised reaches {threshold:g} or more)")


TECHNIQUE = Technique(
    name=NAME,
    citations=cite("adebayo2018sanity", "sixt2020explanations", "wang2004ssim",
                   "chattopadhay2018gradcampp", "bhullar2020rpv"),
    title="Randomisation sanity checks of the explanations",
    layer="model",
    scope="dataset",
    needs=needs,
    applies_to=frozenset({"conv", "capsule_maps", "class_capsules", "own_explanation"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.explanation_randomisation.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    may_hold_nan=(("cascade", "a map the model lacks; a constant map's rank correlation"),
                  ("random_logit", "a map the model lacks; a constant map's rank correlation"),
                  ("baseline", "a map the model lacks; a constant map's rank correlation")),
    description="Do the saliency maps this site shows depend on what the network learned? "
                "Adebayo et al. 2018's sanity checks: the network's weighted layers are "
                "re-initialised one by one from the output side down (on a copy), and after "
                "each step the maps are recomputed and compared with the trained network's "
                "(Spearman rank correlation of the absolute and signed maps, SSIM); and the map "
                "of a random other class is compared with the true class's. A map that stays "
                "similar when every layer is random explains the architecture, not the "
                "training: it does not pass. Means over evaluation images with 95% intervals, "
                "beside a random map's similarity.",
)
