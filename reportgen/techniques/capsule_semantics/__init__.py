"""What the class-capsule dimensions encode, over the evaluation set.

1. Per-dimension variance of the predicted class capsule over the set: how many of the D pose
   dimensions the network actually uses.
2. Decoder dimension perturbation in units of each dimension's spread: dimension d of a
   representative image's predicted class capsule is shifted by m·σ_d, m = -k … k, instead of
   the fixed δ = ±0.25 of decoder_perturbation (a dimension with σ = 0.01 does nothing at δ = 0.25 steps
   while one with σ = 0.3 is pushed off its range). σ_d is the standard deviation of that class
   capsule over the images predicted as that class (option sigma="per_class", default; the
   pooled σ over all predicted capsules when fewer than 2 images are predicted as it), or the
   pooled σ of the variance chart (sigma="pooled"). Skipped for models without a decoder.
3. Compactness per affine factor z (rotation, x/y translation, scale, x/y shear): each image is
   transformed over a grid of z values (reportgen.probe.affine), the TRUE class's capsule vectors
   (n_z, D) are collected, their per-dimension variance is normalised to p_d = var_d / Σ var, and
   the score is KL(p ‖ uniform) = Σ_d p_d log(p_d · D): log D when one dimension carries all the
   change, 0 when every dimension changes alike. Aggregated over images in two ways
   (reportgen/techniques/capsule_semantics/numbers.py): each image's KL averaged, and the KL of p
   averaged over images; only the second is of the order of Gu 2022's Ch.5 Table 5 (CapsNet,
   rotation: 0.0031), and each is shown beside what an isotropic random change gives (its chance
   level).

A CNN with feature units before its logits (Gu 2022's ConvNet-R, -CR, -CR-SF) is read the same
way: its classes x dims units play the class capsules (ConvNet-R's 160 units, not split by
class, are one vector of 160 dimensions), and the decoder perturbation (CR, CR-SF) shifts a
dimension by absolute amounts over [-feature_range, +feature_range] (Gu: [-8, 8]) instead of
multiples of σ, since CNN units have no bounded length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.console import progress
from reportgen.errors import ReportgenError
from reportgen.probe.affine import FACTORS
from reportgen.results import intervals as iv
from reportgen.techniques.capsule_semantics.numbers import (CHANCE_PER_IMAGE, CHANCE_POOLED,
                                                            DIMENSION_STD, DIMENSION_VARIANCE,
                                                            IMAGES, PER_IMAGE, POOLED,
                                                            chance_levels, dimension_shares,
                                                            kl_to_uniform, pooled_compactness)
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import (check_option, check_positive, decode, finite_number,
                                          masked_inputs, require_images)

NAME = "capsule_semantics"
REPRESENTATIVES = ("per_class", "first")
SIGMAS = ("per_class", "pooled")


def _pair(name: str, value) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise ReportgenError(f"Invalid option '{name}' for technique '{NAME}'.",
                             expected="[low, high], two numbers", received=repr(value)) from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ReportgenError(f"Invalid option '{name}' for technique '{NAME}'.",
                             expected="two finite numbers, low < high", received=repr(value))
    return lo, hi


@dataclass(frozen=True)
class Params:
    sigmas: float = 2.0                        # perturbation range ±k standard deviations
    perturbation_steps: int = 11               # multiples of σ from -k to +k
    representatives: str = "per_class"         # one image per class, or the first few images
    first_images: int = 4                      # how many, for representatives="first"
    sigma: str = "per_class"                   # σ_d of the class, or pooled over the set
    images: int = 100                          # images for compactness (stratified sample)
    steps: int = 11                            # grid values per affine factor
    rotation_range: tuple[float, float] = (-30.0, 30.0)     # degrees
    translation_range: tuple[float, float] = (-3.0, 3.0)    # pixels (x and y)
    scale_range: tuple[float, float] = (0.8, 1.2)
    shear_range: tuple[float, float] = (-0.3, 0.3)          # x and y
    chunk: int = 200                           # transformed images per forward call (max)
    feature_range: float = 8.0                 # a CNN's perturbation range ±(Gu 2022: 8)

    def __post_init__(self):
        check_positive(NAME, "sigmas", self.sigmas, float)
        check_positive(NAME, "feature_range", self.feature_range, float)
        for option in ("perturbation_steps", "first_images", "images", "steps", "chunk"):
            check_positive(NAME, option, getattr(self, option))
        check_option(NAME, "representatives", self.representatives, REPRESENTATIVES)
        check_option(NAME, "sigma", self.sigma, SIGMAS)
        for option in ("rotation_range", "translation_range", "scale_range", "shear_range"):
            object.__setattr__(self, option, _pair(option, getattr(self, option)))
        if self.scale_range[0] <= 0:
            raise ReportgenError(f"Invalid option 'scale_range' for technique '{NAME}'.",
                                 expected="scales > 0", received=repr(self.scale_range))

    def grids(self) -> dict[str, np.ndarray]:
        """The z values of every affine factor (FACTORS order)."""
        ranges = {"rotation": self.rotation_range, "translation_x": self.translation_range,
                  "translation_y": self.translation_range, "scale": self.scale_range,
                  "shear_x": self.shear_range, "shear_y": self.shear_range}
        return {f: np.linspace(*ranges[f], self.steps) for f in FACTORS}


def variants(description) -> list[Params]:
    return [Params()]


def compactness_scores(vectors: np.ndarray) -> np.ndarray:
    """KL(p ‖ uniform) per item of vectors (B, n_z, D); p_d = var_d / Σ var (NaN if Σ var = 0)."""
    return kl_to_uniform(dimension_shares(vectors))


def _representatives(params, labels, predicted, lengths) -> np.ndarray:
    if params.representatives == "first":
        return np.arange(min(params.first_images, len(labels)))
    chosen = []
    for k in range(lengths.shape[1]):
        members = np.flatnonzero(labels == k)
        correct = members[predicted[members] == k]
        if len(correct):       # the most confident correct image of the class
            chosen.append(correct[np.argmax(lengths[correct, k])])
        elif len(members):
            chosen.append(members[0])
    return np.asarray(chosen, np.int64)


def _perturbation(net, params, vectors, predicted, dim_std, class_std, counts, units: bool):
    """Images (R, D, S, H, W, C), σ (R, D) and the multiples (S,) for vectors (R, D); for a CNN's
    feature units (`units`) σ = feature_range / sigmas, so that the offsets m·σ span
    ±feature_range."""
    multiples = np.linspace(-params.sigmas, params.sigmas, params.perturbation_steps)
    if units:
        sigma = np.full(vectors.shape, params.feature_range / params.sigmas)
    elif params.sigma == "per_class":
        sigma = np.where((counts[predicted] >= 2)[:, None], class_std[predicted], dim_std)
    else:
        sigma = np.broadcast_to(dim_std, vectors.shape)
    sigma = np.nan_to_num(sigma).astype(np.float64)
    dims = vectors.shape[-1]
    offsets = np.eye(dims)[None, :, None, :] * (sigma[:, :, None, None]
                                                * multiples[None, None, :, None])
    perturbed = (vectors[:, None, None, :] + offsets).astype(np.float32)      # (R, D, S, D)
    inputs = masked_inputs(perturbed, predicted, net.description.classes)
    return decode(net, inputs), sigma, multiples


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """dim_variance (D,), class_dim_variance (K, D) (NaN below 2 images), predicted_counts (K,);
    with a decoder: perturbation_images (R, D, S, H, W, C), perturbation_sigma (R, D),
    perturbation_multiples (S,), representative_index (R,), representative_class (R,);
    compactness (F,), compactness_per_image (F, B), compactness_dim_share (F, D) mean p_d,
    factor_values (F, Z), true_length (F, Z) mean true-class length, compactness_index (B,),
    compactness_image_share (F, B, D) float32 each image's p_d (the intervals over images)
    (F = the factors of reportgen.probe.affine.FACTORS, in order)."""
    from reportgen.probe.evaluation import stratified_sample
    from reportgen.techniques.affine_robustness import sweep

    params = params or Params()
    require_images(evaluation, NAME)
    net = evaluation.net
    vectors_name = net.description.class_vectors
    cnn = vectors_name == "features"         # a CNN's units: no bounded length
    tensors = evaluation.tensors(vectors_name, "lengths")
    capsules = np.asarray(tensors[vectors_name], np.float64)                # (N, G, D)
    lengths = np.asarray(tensors["lengths"], np.float64)
    labels = np.asarray(evaluation.labels, np.int64)
    n, dims = capsules.shape[0], capsules.shape[2]
    classes = lengths.shape[1]
    predicted = lengths.argmax(1)
    chosen = capsules[np.arange(n), _slot(predicted, capsules.shape[1])]   # (N, D)
    counts = np.bincount(predicted, minlength=classes)
    class_var = np.full((classes, dims), np.nan)
    for k in range(classes):
        if counts[k] >= 2:
            class_var[k] = chosen[predicted == k].var(0)
    dim_var = chosen.var(0) if n else np.full(dims, np.nan)
    out = {"dim_variance": dim_var, "class_dim_variance": class_var,
           "predicted_counts": counts.astype(np.float64)}

    if net.decoder is not None and n:      # a class-conditional decoder (not ConvNet-R's)
        reps = _representatives(params, labels, predicted, lengths)
        images, sigma, multiples = _perturbation(net, params, chosen[reps], predicted[reps],
                                                 np.sqrt(dim_var), np.sqrt(class_var), counts,
                                                 cnn)
        if cnn:                # offsets in absolute units (the drawing says so)
            out["perturbation_absolute"] = np.float64(params.feature_range)
        out.update(perturbation_images=images, perturbation_sigma=sigma,
                   perturbation_multiples=multiples, representative_index=reps,
                   representative_class=predicted[reps].astype(np.int64))

    index = stratified_sample(labels, params.images)
    subset, truth = np.asarray(evaluation.images, np.float32)[index], labels[index]
    grids = params.grids()
    scores, shares, image_shares, true_length = [], [], [], []
    with progress(len(index) * params.steps * len(grids), f"capsule semantics ({len(index)} "
                  f"images × {len(grids)} factors × {params.steps} steps)", unit="passes") as bar:
        for factor, values in grids.items():
            caps, lens = sweep(net, subset, factor, values, params.chunk, bar)   # (Z, B, G, D)
            vectors = caps[:, np.arange(len(index)), _slot(truth, caps.shape[2])]
            vectors = vectors.transpose(1, 0, 2)                                  # (B, Z, D)
            share = dimension_shares(vectors)
            image_shares.append(share.astype(np.float32))
            scores.append(kl_to_uniform(share))
            shares.append(np.nanmean(share, 0) if np.isfinite(share).any()
                          else np.full(dims, np.nan))
            true_length.append(lens[:, np.arange(len(index)), truth].mean(1)
                               if len(index) else np.full(len(values), np.nan))
    scores = np.asarray(scores).reshape(len(grids), len(index))
    # Images whose true-class capsule does not move at all (Σ var = 0) have no score.
    mean_scores = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan
                            for row in scores])
    out.update(compactness=mean_scores, compactness_per_image=scores,
               compactness_dim_share=np.asarray(shares),
               factor_values=np.stack(list(grids.values())),
               true_length=np.asarray(true_length), compactness_index=index.astype(np.int64),
               compactness_image_share=np.asarray(image_shares, np.float32).reshape(
                   len(grids), len(index), dims))
    return out


def _slot(classes: np.ndarray, vectors: int) -> np.ndarray:
    """The vector of each class: its own when there is one per class, else the only one."""
    return classes if vectors > 1 else np.zeros_like(classes)


def summarize(arrays, params: Params | None = None) -> dict:
    """Variance use of the D dimensions and the compactness per factor (JSON-ready). Its keys
    that other modules read are named in reportgen/techniques/capsule_semantics/numbers.py."""
    var = np.asarray(arrays["dim_variance"], np.float64)
    total = float(np.nansum(var))
    summary = {
        IMAGES: int(np.asarray(arrays["predicted_counts"]).sum()),
        "dims": int(var.size),
        "variance_total": total,
        "variance_max_share": float(np.nanmax(var) / total) if total > 0 else None,
        # participation ratio: D for equal variances, 1 when one dimension holds all of it
        "effective_dims": total ** 2 / float(np.nansum(var ** 2)) if total > 0 else None,
        DIMENSION_VARIANCE: [finite_number(v) for v in var],
        DIMENSION_STD: [finite_number(np.sqrt(v)) if v >= 0 else None for v in var],
        "compactness_images": int(np.asarray(arrays["compactness_index"]).size),
    }
    # Two aggregations over images (reportgen/techniques/capsule_semantics/numbers.py): the
    # per-image KL averaged (the arrays' "compactness"), and the KL of the image-averaged shares,
    # which is the one of the order of Gu's Table 5 and is what "compactness_<factor>" holds.
    scores = np.asarray(arrays["compactness"], np.float64)
    shares = np.asarray(arrays.get("compactness_dim_share", np.full((scores.size, 1), np.nan)),
                        np.float64)                                        # (F, D) mean p_d
    pooled = np.array([pooled_compactness(row) for row in shares])
    for factor, score, gu in zip(FACTORS, scores, pooled):
        summary[f"{POOLED}{factor}"] = finite_number(gu)
        summary[f"{PER_IMAGE}{factor}"] = finite_number(score)
    summary["compactness_mean"] = _mean(pooled)
    summary["compactness_per_image_mean"] = _mean(scores)
    values = np.asarray(arrays.get("factor_values", np.zeros((0, 0))))
    chance = chance_levels(summary["compactness_images"], int(values.shape[-1]),
                           int(shares.shape[-1])) \
        if summary["compactness_images"] and values.size and np.isfinite(pooled).any() else None
    summary[CHANCE_POOLED] = chance["pooled"] if chance else None
    summary[CHANCE_PER_IMAGE] = chance["per_image"] if chance else None
    if "compactness_image_share" in arrays:
        _attach_intervals(summary, np.asarray(arrays["compactness_image_share"], np.float64),
                          np.asarray(arrays["compactness_per_image"], np.float64))
    return summary


def _attach_intervals(summary: dict, image_shares: np.ndarray, per_image: np.ndarray) -> None:
    """BCa bootstraps over the images (summary["intervals"]) of the compactness scores from
    each image's shares p (F, B, D) and per-image KL (F, B). The pooled score is no mean over
    images: the whole statistic is bootstrapped (the images resampled, p̄ and its KL taken
    again; an image with no p left out of that factor's p̄), all factors and their mean in one
    resampling (intervals.bootstrap_of_means). The per-image score is a mean over images. The
    variance figures (effective_dims, …) describe the set's spread and the chance levels are
    simulated: no interval."""
    factors = list(FACTORS)[:len(per_image)]
    pooled = [f for f, name in enumerate(factors) if summary.get(f"{POOLED}{name}") is not None]
    means = [f for f, name in enumerate(factors)
             if summary.get(f"{PER_IMAGE}{name}") is not None]
    for f in means:
        iv.attach(summary, f"{PER_IMAGE}{factors[f]}", iv.bootstrap_mean(per_image[f]))
    if pooled:
        valid = np.isfinite(image_shares).all(-1, keepdims=True)                # (F, B, 1)
        parts = np.concatenate([np.where(valid, image_shares, 0.0), valid], -1)[pooled]
        dims = image_shares.shape[-1]

        def scores(means):                 # (..., F', D + 1) -> each factor's KL, their mean
            means = means.reshape(*means.shape[:-1], len(pooled), dims + 1)
            kl = kl_to_uniform(means[..., :dims] / means[..., dims:])
            return np.concatenate([kl, kl.mean(-1, keepdims=True)], -1)

        got = iv.bootstrap_of_means(np.moveaxis(parts, 1, 0).reshape(parts.shape[1], -1),
                                    scores)
        for f, interval in zip(pooled, got):
            iv.attach(summary, f"{POOLED}{factors[f]}", interval)
        iv.attach(summary, "compactness_mean", got[-1])
    if means:
        valid = np.isfinite(per_image[means])                                   # (F', B)
        parts = np.concatenate([np.where(valid, per_image[means], 0.0), valid]).T

        def mean_of_means(m):              # (..., 2F') -> the mean over factors of their means
            k = len(means)
            return (m[..., :k] / m[..., k:]).mean(-1)

        iv.attach(summary, "compactness_per_image_mean",
                  iv.bootstrap_of_means(parts, mean_of_means))


def _mean(values: np.ndarray) -> float | None:
    return finite_number(np.nanmean(values)) if np.isfinite(values).any() else None


TECHNIQUE = Technique(
    name=NAME,
    citations=cite('sabour2017dynamic', 'gu2022explainability'),
    title="Capsule semantics",
    layer="class",
    scope="dataset",
    needs=frozenset({"class_capsules", "features", "lengths"}),
    applies_to=frozenset({"class_vectors"}),
    params_type=Params,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.capsule_semantics.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.capsule_semantics.figures", "render_trend", Params),
    render_compare=lazy("reportgen.techniques.capsule_semantics.figures", "render_compare", Params),
    description="What the class-capsule dimensions encode over the evaluation set: the variance "
                "of each dimension of the predicted class capsule; decoder reconstructions with "
                "one dimension shifted by -2σ … +2σ of its own spread (instead of a fixed "
                "±0.25); and, per affine factor (rotation, translation, scale, shear), a "
                "compactness score telling whether the change of pose lands in one dimension "
                "(log D) or spreads over all of them (0).",
)
