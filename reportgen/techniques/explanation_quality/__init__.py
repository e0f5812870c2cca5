"""Explanation quality over an evaluation set: how far to trust the saliency maps a model's site
shows (its own explanation — RPV modified and original, or the map its family builds in — and
Grad-CAM++), each scored beside two baselines that explain nothing: a random map (i.i.d. uniform
noise, drawn afresh for every input) and a uniform (constant) map.

Per image, for the TARGET class (the true class by default) with f = that class's score
(reportgen.capsnet.compiled.encoder_scores) and Phi the map placed on the input as
explanation_fidelity places it (`saliency_maps`; pixels no grid cell reaches count as 0, every
channel of a pixel gets its relevance):

- faithfulness correlation (Bhatt et al. 2020, Eq. 2): the Pearson correlation over `subsets`
  random pixel subsets S of size round(subset_fraction * H * W) between sum_{i in S} Phi_i and
  f(x) - f(x with S set to 0);
- infidelity (Yeh et al. 2019, Def. 2.1) with Gaussian perturbations I ~ N(0, noise_sigma^2) per
  input value (`perturbations` of them), Phi scaled by the optimal beta first (Yeh et al.
  section 2.2; captum.metrics.infidelity's normalize=True): the maps' scales are arbitrary;
- max-sensitivity (Yeh et al. 2019, Def. 3.1): the max over `sensitivity_samples` perturbations
  delta uniform in the L-inf ball of radius `radius` of ||Phi(x + delta) - Phi(x)|| / ||Phi(x)||
  (Frobenius norms), every map recomputed on x + delta (a probe pass with gradients over the
  perturbed copies) for the same class;
- ROAD (Rong et al. 2022, RemOve And Debias; reportgen.techniques.explanation_quality.road): at
  each removal fraction p in `road_fractions` the round(p * H * W) most relevant (MoRF) or least
  relevant (LeRF) pixels by the map are removed, filled by noisy linear imputation (each the
  weighted mean of its 8 neighbours, plus N(0, road_noise^2) noise) and f read on the result (f,
  the target class's score, not the accuracy the authors also report). Per image: the mean of f
  over the fractions for each order ("road_morf": lower is more faithful, "road_lerf": higher
  is) and their gap LeRF - MoRF ("road_gap", higher is more faithful). Ties in a map (the
  uniform map is all ties) are broken by one seeded random key per pixel, the same for every
  map and both orders, so the uniform map's orderings are uniformly random; the imputation noise
  is drawn once per image, order and fraction and shared by every map. Cost: one sparse solve
  of up to 0.9 * H * W unknowns per image, fraction, order and map (the solves of `road.ROWS`
  images are one block-diagonal system), plus as many forward passes. Rong et al. use the nine
  fractions 10%, 20%, ..., 90%; measured on MNIST_Demo (50 images, five maps, 2 shared CPU
  cores) those 4,500 imputations and passes added 66 s to the analysis's 58 s, so the default
  is every other one, 10%, 30%, ..., 90% (half the cost; `road_fractions` restores theirs).

The perturbed scores do not depend on the map: every explanation and baseline is scored against
the same subsets, noise, deltas, tie keys and imputation noise (reportgen.techniques.explanation_quality.faithfulness). Each
headline number is a mean over the images with its BCa bootstrap interval; every explanation's
difference from each baseline is bootstrapped paired (the same images), and the verdict says
"above" / "below" a baseline only where that interval excludes 0 (numbers.verdict). The uniform
map has no faithfulness correlation (every subset gets the same relevance) and max-sensitivity 0
by construction; the random map's max-sensitivity is that of noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ReportgenError
from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_option, check_positive, rounded_number
from reportgen.techniques.explanation_fidelity import RPV_NEEDS, gradient_name, saliency_maps
from reportgen.techniques.explanation_quality import faithfulness as fq
from reportgen.techniques.explanation_quality import road
from reportgen.techniques.explanation_quality.numbers import BASELINES, METHODS, METRICS, key

NAME = "explanation_quality"
TARGETS = ("true", "predicted")


@dataclass(frozen=True)
class Params:
    images: int = 50                # images of the evaluation set (stratified subset)
    subsets: int = 50               # random pixel subsets per image (faithfulness correlation)
    subset_fraction: float = 0.1    # share of the pixels in each subset
    perturbations: int = 50         # Gaussian perturbations per image (infidelity)
    noise_sigma: float = 0.1        # their standard deviation per input value
    sensitivity_samples: int = 10   # perturbations per image (max-sensitivity; Captum's 10)
    radius: float = 0.02            # their L-inf radius (captum.metrics.sensitivity_max's 0.02)
    target: str = "true"            # class whose score is perturbed and whose maps are scored
    gradcam_layer: str = "conv1"    # conv layer of the Grad-CAM++ maps
    road_fractions: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)  # ROAD removal shares
    road_noise: float = 0.01        # sigma of the imputation noise (Rong et al.'s default 0.01)
    seed: int = 0                   # subset, perturbations, random maps, ties, imputation noise

    def __post_init__(self):
        for option in ("images", "subsets", "perturbations", "sensitivity_samples"):
            check_positive(NAME, option, getattr(self, option))
        for option in ("subset_fraction", "noise_sigma", "radius"):
            check_positive(NAME, option, getattr(self, option), kind=float)
        if self.subset_fraction > 1:
            raise ReportgenError(f"Invalid option 'subset_fraction' for technique '{NAME}'.",
                                 expected="a share of the pixels in (0, 1]",
                                 received=repr(self.subset_fraction),
                                 fix="Set 'subset_fraction' to at most 1.")
        check_option(NAME, "target", self.target, TARGETS)
        fractions = tuple(self.road_fractions)
        if not fractions or not all(0 < float(p) < 1 for p in fractions):
            raise ReportgenError(f"Invalid option 'road_fractions' for technique '{NAME}'.",
                                 expected="one or more shares of the pixels, each in (0, 1)",
                                 received=repr(self.road_fractions),
                                 fix="Set 'road_fractions' to e.g. [0.1, 0.5, 0.9].")
        object.__setattr__(self, "road_fractions", tuple(float(p) for p in fractions))
        if not self.road_noise >= 0:
            raise ReportgenError(f"Invalid option 'road_noise' for technique '{NAME}'.",
                                 expected="a standard deviation >= 0",
                                 received=repr(self.road_noise),
                                 fix="Set 'road_noise' to 0 or more (Rong et al.: 0.01).")


def variants(description) -> list[Params]:
    """Grad-CAM++ of conv1 when the model has it (as explanation_fidelity), else its default."""
    from reportgen.techniques.gradcam_pp import default_layer

    names = description.conv_layer_names
    return [Params() if "conv1" in names else Params(gradcam_layer=default_layer(description))]


def perturbed_needs(layer: str) -> frozenset[str]:
    """What the maps of the perturbed copies read: every map's tensors, the gradients against
    the copies' labels (their images' target classes)."""
    return RPV_NEEDS | {"lengths", "explanation", f"conv:{layer}", f"grad[true]:{layer}"}


def needs(params: Params | None) -> frozenset[str]:
    """The clean tensors of explanation_fidelity's maps (its gradients of the target class), the
    predictions, and what the perturbed copies' maps read."""
    params = params or Params()
    return perturbed_needs(params.gradcam_layer) | {"predicted", gradient_name(params)}


def _available(names, description) -> list[str]:
    from reportgen.probe.probe import available, expand_needs

    return sorted(n for n in expand_needs(names, description) if available(n, description))


def perturbed_maps(eval_batch, images: np.ndarray, targets: np.ndarray, deltas: np.ndarray,
                   layer: str, bar=None) -> dict[str, np.ndarray]:
    """{method: (n, S, H, W)} the maps of every image's target class recomputed on its copies
    images + deltas (deltas (n, S, H, W, C)), a probe pass over a few images' copies at a time
    (their labels are the targets, so "grad[true]" is the target class's gradient)."""
    from reportgen.probe.evaluation import EvalBatch

    n, samples = deltas.shape[:2]
    per_pass = max(1, eval_batch.chunk_size() // samples)
    names = _available(perturbed_needs(layer), eval_batch.net.description)
    parts: dict[str, list[np.ndarray]] = {}
    for start in range(0, n, per_pass):
        rows = np.arange(start, min(start + per_pass, n))
        copies = (images[rows, None] + deltas[rows]).reshape(-1, *images.shape[1:])
        labels = np.repeat(targets[rows], samples)
        batch = EvalBatch(eval_batch.net, copies, labels, tuple(eval_batch.class_names))
        batch.tensors(*names)                                    # one pass with gradients
        _, _, placed = saliency_maps(batch, np.arange(len(copies)), labels, layer, "true")
        for method, maps in placed.items():
            parts.setdefault(method, []).append(maps.reshape(len(rows), samples, *maps.shape[1:]))
        if bar is not None:
            bar.update(len(copies))
    return {m: np.concatenate(p) for m, p in parts.items()}


def compute(eval_batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """Faithfulness correlation, infidelity, max-sensitivity and ROAD per image of every map
    (see the module docstring).

    Arrays: "faithfulness", "infidelity", "sensitivity", "road_morf", "road_lerf", "road_gap"
    (methods, N) in METHODS order (NaN for a method the model lacks, and where a score is
    undefined: a constant map's correlation, an all-zero map's sensitivity); "road_morf_curve",
    "road_lerf_curve" (methods, N, fractions) the score at each removal fraction;
    "road_fractions" (fractions,); "has" (methods,) 1 for the maps this model has; "index",
    "labels", "targets", "predicted" (N,); "subset_size" ().
    """
    from reportgen import console
    from reportgen.capsnet.compiled import encoder_scores
    from reportgen.probe.evaluation import stratified_sample
    from reportgen.techniques.compute import check_conv_layer

    params = params or Params()
    net = eval_batch.net
    layer = params.gradcam_layer
    check_conv_layer(net, NAME, layer)
    description = net.description
    eval_batch.tensors(*_available(needs(params), description))   # one clean probe pass
    index = stratified_sample(eval_batch.labels, params.images, seed=params.seed)
    images = np.asarray(eval_batch.images[index], np.float32)
    labels = np.asarray(eval_batch.labels[index], np.int64)
    predicted = np.asarray(eval_batch.tensors("predicted")["predicted"][index], np.int64)
    targets = labels if params.target == "true" else predicted
    n, height, width = images.shape[:3]
    size = max(1, int(round(params.subset_fraction * height * width)))

    _, _, maps = saliency_maps(eval_batch, index, targets, layer, params.target)
    rng = np.random.default_rng(params.seed)
    maps["random_map"] = rng.random((n, height, width))
    maps["uniform_map"] = np.ones((n, height, width))
    subsets = fq.random_subsets(n, (height, width), params.subsets, size, rng)
    noise = fq.gaussian_perturbations(images.shape, params.perturbations, params.noise_sigma, rng)
    deltas = fq.linf_ball(images.shape, params.sensitivity_samples, params.radius, rng)

    def score(batch, image_index):
        return np.take_along_axis(encoder_scores(net, batch), targets[image_index][:, None],
                                  axis=1)[:, 0]

    fractions = params.road_fractions
    road_rows = n * len(road.ORDERS) * len(fractions) * len(maps)
    total = n * (params.subsets + params.perturbations + 2 + params.sensitivity_samples) \
        + road_rows
    with console.progress(total, f"explanation quality ({n} images × {params.subsets} subsets, "
                          f"{params.perturbations} noises, {params.sensitivity_samples} "
                          f"sensitivity copies, {road_rows} ROAD imputations)",
                          unit="passes") as bar:
        drops = fq.subset_drops(images, score, subsets, 0.0, bar=bar)
        bar.update(n)
        changes = fq.perturbation_changes(images, score, noise, bar=bar)
        bar.update(n)
        moved = perturbed_maps(eval_batch, images, targets, deltas, layer, bar)
        moved["random_map"] = rng.random((n, params.sensitivity_samples, height, width))
        moved["uniform_map"] = np.ones((n, params.sensitivity_samples, height, width))
        # ROAD: one tie key per pixel and one noise draw per image, order and fraction, shared
        ties = rng.random((n, height, width))
        road_noise = params.road_noise * rng.standard_normal(
            (n, len(road.ORDERS), len(fractions), *images.shape[1:]))
        curves = {m: road.road_scores(images, maps[m], score, fractions, ties, road_noise,
                                      bar=bar) for m in METHODS if m in maps}

    scores = {m: np.full((len(METHODS), n), np.nan, np.float32) for m in METRICS}
    for i, method in enumerate(METHODS):
        if method not in maps:
            continue
        scores["faithfulness"][i] = fq.faithfulness_from_drops(maps[method], subsets, drops,
                                                               images.shape)
        scores["infidelity"][i] = fq.infidelity_from_changes(maps[method], noise, changes,
                                                             normalize=True)
        scores["sensitivity"][i] = fq.max_sensitivity_of(maps[method], moved[method])
        scores["road_morf"][i] = curves[method]["morf"].mean(axis=1)
        scores["road_lerf"][i] = curves[method]["lerf"].mean(axis=1)
        scores["road_gap"][i] = scores["road_lerf"][i] - scores["road_morf"][i]
    curve = {o: np.full((len(METHODS), n, len(fractions)), np.nan, np.float32)
             for o in road.ORDERS}
    for i, method in enumerate(METHODS):
        for o in road.ORDERS:
            if method in curves:
                curve[o][i] = curves[method][o]
    return {**scores,
            "road_morf_curve": curve["morf"], "road_lerf_curve": curve["lerf"],
            "road_fractions": np.asarray(fractions, np.float64),
            "has": np.asarray([m in maps for m in METHODS], np.int64),
            "index": index.astype(np.int64), "labels": labels,
            "targets": targets.astype(np.int64), "predicted": predicted,
            "subset_size": np.int64(size)}


def own_methods(arrays) -> tuple[str, ...]:
    """The explanations (not the baselines) a result has."""
    has = np.asarray(arrays["has"]).reshape(-1)
    return tuple(m for i, m in enumerate(METHODS) if has[i] and m not in BASELINES)


def summarize(arrays: dict, params: Params | None = None) -> dict:
    """Per map the model has and per baseline: faithfulness_*, infidelity_*, sensitivity_*,
    road_morf_*, road_lerf_*, road_gap_* (the mean over the images where defined), each with its BCa interval under summary["intervals"];
    every explanation's paired difference from each baseline it is compared with
    (numbers.METRICS) and the verdicts "verdict_<metric>_<method>" (numbers.verdict); the
    procedure (images, subset size, noise, radius, samples, layer, target, ROAD fractions and
    imputation noise)."""
    from reportgen.techniques.explanation_quality.numbers import verdict

    params = params or Params()
    has = np.asarray(arrays["has"]).reshape(-1)
    n = int(np.asarray(arrays["faithfulness"]).shape[1])
    out = {"images": n, "target": params.target, "gradcam_layer": params.gradcam_layer,
           "subsets": params.subsets, "subset_size": int(np.asarray(arrays["subset_size"])),
           "perturbations": params.perturbations, "noise_sigma": params.noise_sigma,
           "sensitivity_samples": params.sensitivity_samples, "radius": params.radius,
           "road_fractions": [float(p) for p in params.road_fractions],
           "road_noise": params.road_noise,
           "methods": [m for i, m in enumerate(METHODS) if has[i]]}
    own = own_methods(arrays)
    for metric, (_, _, baselines) in METRICS.items():
        values = np.asarray(arrays[metric], np.float64)
        for i, method in enumerate(METHODS):
            if not has[i]:
                continue
            valid = values[i][np.isfinite(values[i])]
            out[key(metric, method)] = rounded_number(valid.mean()) if valid.size else None
            if valid.size:
                iv.attach(out, key(metric, method), iv.bootstrap_mean(valid))
        for method in own:
            a = values[METHODS.index(method)]
            for baseline in baselines:
                b = values[METHODS.index(baseline)]
                if (np.isfinite(a) & np.isfinite(b)).any():
                    iv.attach_difference(out, key(metric, method), key(metric, baseline),
                                         iv.paired_difference(a, b))
                out[f"verdict_{metric}_{method}_{baseline}"] = verdict(out, metric, method,
                                                                       baseline)
    return out


TECHNIQUE = Technique(
    name=NAME,
    citations=cite("bhatt2020evaluating", "yeh2019fidelity", "rong2022consistent",
                   "chattopadhay2018gradcampp", "bhullar2020rpv"),
    title="How far to trust these explanations",
    layer="model",
    scope="dataset",
    needs=needs,
    applies_to=frozenset({"conv", "capsule_maps", "class_capsules", "own_explanation"}),
    params_type=Params,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.explanation_quality.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    may_hold_nan=(("faithfulness", "a map the model lacks; a constant map's correlation "
                                   "(the uniform map's always)"),
                  ("infidelity", "a map the model lacks"),
                  ("sensitivity", "a map the model lacks; an all-zero map's"),
                  *((name, "a map the model lacks") for name in (
                      "road_morf", "road_lerf", "road_gap", "road_morf_curve",
                      "road_lerf_curve"))),
    description="How far can the saliency maps this site shows be trusted? Four scores per "
                "map, each a mean over evaluation images beside a random map and a uniform map "
                "that explain nothing: the faithfulness correlation (Bhatt et al. 2020: does the "
                "relevance of a random pixel set predict the score's drop when it is removed?), "
                "infidelity (Yeh et al. 2019: how far the map's linear prediction misses the "
                "score's change under Gaussian noise) and max-sensitivity (Yeh et al. 2019: how "
                "much the map changes when the input moves slightly) and ROAD (Rong et al. 2022: the "
                "score after removing the most or the least relevant pixels and filling them "
                "in from their neighbours, and the gap between the two). The verdicts call a map "
                "better or worse than a baseline only where the 95% interval of their paired "
                "difference excludes zero.",
)
