"""Explanation fidelity over an evaluation set: do the saliency maps point at
what the model uses, and do Routing Path Visualization and Grad-CAM++ agree?

Deletion and insertion curves (Petsiuk et al. 2018, "RISE"; AOPC of Samek et al. 2017). For each
image, the input is cut into patch x patch squares (edge patches may be smaller) and each patch's
relevance is the mean of the saliency map placed on the input (grid maps drawn at their cells'
receptive-field centres, `place_grid_at_centres`; pixels no cell owns count as 0). Patches are
perturbed in descending relevance (ties in random order, seeded):
    deletion:  x_k = x with its k most relevant patches replaced by uniform noise in [0, 1]
               (one seeded noise image per input, the same for every method);
    insertion: x_k = a start image (x blurred by a Gaussian of sigma `blur_sigma`, or all zeros)
               with its k most relevant patches restored from x.
f(x_k) is the length of the TARGET class capsule (the true class by default, or the predicted
one), for k = 0 … P (P patches). Headline numbers per method, averaged over images:
    deletion AOPC  = 1/(P+1) sum_k (f(x_0) - f(x_k))    (higher = the map found what matters)
    deletion AUC   = trapezoid area under f(x_k) over k/P in [0, 1]   (lower is better)
    insertion AUC  = trapezoid area under f(x_k) over k/P in [0, 1]   (higher is better)
Methods: RPV modified and original (rpv, the target class's map), Grad-CAM++ (gradcam_pp,
gradients of the target class's length, layer `gradcam_layer`) and a random order (baseline).

Agreement: Spearman's rank correlation (ties get their average rank) between the RPV map and the
Grad-CAM++ map of the target class at the PRIMARY-GRID resolution, one value per image. Grad-CAM++
of primary_conv is already on that grid; a finer map (conv1) is placed on the input at its cells'
receptive-field centres and averaged over each primary cell's centre tile (the stride x stride
input pixels nearest that cell's receptive-field centre), i.e. average-pooled onto the grid.
An image whose two maps are not both non-constant has no correlation (NaN, left out of means).
The thesis found the two maps comparable when the primary grid is large (MNIST_LPcaps, 18x18).

A model's built-in explanation is what its family declares (the "explanation" capability of
reportgen.contract: GraCapsNet's graph-pooling attention averaged over heads, E): it takes RPV's
place in the curves and in the agreement with Grad-CAM++ ("builtin_method" records which). Any
other model whose routing weights lead from its primary capsules to the classes (dynamic
routing, EM routing, Self-Routing, a plug-in's) is explained by RPV through every routed layer
(reportgen.techniques.rpv). The methods a model does not have are NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reportgen.techniques.explanation_fidelity.numbers import (METHODS, area_under_curve,
                                                               builtin_method, deletion_aopc,
                                                               own_methods)
from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_option, check_positive, rounded_number

MODES = ("deletion", "insertion")
TARGETS = ("true", "predicted")
STARTS = ("blur", "blank")
ROWS = 500            # rows per forward call of the perturbed images
EXAMPLES = 4          # images kept for the example figure


@dataclass(frozen=True)
class Params:
    images: int = 100             # images of the evaluation set (stratified subset)
    patch: int = 5                # side of the square patches, in input pixels
    target: str = "true"          # class whose capsule length is scored and explained
    gradcam_layer: str = "conv1"  # conv layer of the Grad-CAM++ maps
    insertion_start: str = "blur"  # "blur": Gaussian-blurred input; "blank": all zeros
    blur_sigma: float = 3.0       # Gaussian sigma (pixels) of the blurred start
    seed: int = 0                 # subset, noise and random order

    def __post_init__(self):
        check_positive("explanation_fidelity", "images", self.images)
        check_positive("explanation_fidelity", "patch", self.patch)
        check_option("explanation_fidelity", "target", self.target, TARGETS)
        check_option("explanation_fidelity", "insertion_start", self.insertion_start, STARTS)
        check_positive("explanation_fidelity", "blur_sigma", self.blur_sigma, kind=float)


def builtin_explanation(description) -> str | None:
    """The model's own explanation (a METHODS name): the map its family declares ("builtin",
    the "explanation" capability); else Routing Path Visualization ("rpv_modified", with
    "rpv_original" beside it) when its routing weights lead from its primary capsules to the
    classes ("own_explanation" without the capability); None otherwise."""
    if "explanation" in description.features:
        return "builtin"
    if "own_explanation" in description.features:
        return "rpv_modified"
    return None


def variants(description) -> list[Params]:
    """Grad-CAM++ of conv1 (the thesis's layer) when the model has it, else its default
    layer."""
    from reportgen.techniques.gradcam_pp import default_layer

    names = description.conv_layer_names
    return [Params() if "conv1" in names else Params(gradcam_layer=default_layer(description))]


def gradient_name(params: Params) -> str:
    """The probe's gradients of the target class's length at the Grad-CAM++ layer."""
    target = "grad:" if params.target == "predicted" else "grad[true]:"
    return target + params.gradcam_layer


# What RPV reads (reportgen.techniques.rpv), in the family-neutral names of the probe.
RPV_NEEDS = frozenset({"class_capsules", "activations", "activations:<capsules>",
                       "routing:<routed>"})


def needs(params: Params | None) -> frozenset[str]:
    """The clean tensors read: RPV's or the built-in explanation, the class scores, and the
    Grad-CAM++ layer's maps and gradients of the target class (the probe takes them in its one
    pass; a model has only some of them)."""
    params = params or Params()
    return RPV_NEEDS | {"lengths", "predicted", "explanation", f"conv:{params.gradcam_layer}",
                       gradient_name(params)}


# --- perturbation curves (model-free: the score is any callable) --------------------------------

def gaussian_blur(images: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur of (N, H, W, C) images over H and W only (kernel radius 3 sigma rounded,
    edge-padded)."""
    from scipy import ndimage   # here: scipy takes a second to import, most builds never blur

    blurred = ndimage.gaussian_filter(np.asarray(images, np.float64), sigma=(0, sigma, sigma, 0),
                                      mode="nearest", truncate=3.0)
    return blurred.astype(np.float32)


def patch_grid(hw: tuple[int, int], patch: int) -> tuple[int, int]:
    return (math.ceil(hw[0] / patch), math.ceil(hw[1] / patch))


def patch_relevance(maps: np.ndarray, patch: int) -> np.ndarray:
    """(N, ph, pw) mean of input-sized maps (N, H, W) over each patch (NaN counts as 0)."""
    maps = np.nan_to_num(np.asarray(maps, np.float64), nan=0.0)
    n, height, width = maps.shape
    ph, pw = patch_grid((height, width), patch)
    padded = np.zeros((n, ph * patch, pw * patch))
    padded[:, :height, :width] = maps
    counts = np.zeros((ph * patch, pw * patch))
    counts[:height, :width] = 1.0
    sums = padded.reshape(n, ph, patch, pw, patch).sum(axis=(2, 4))
    return sums / counts.reshape(ph, patch, pw, patch).sum(axis=(1, 3))


def relevance_order(relevance: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(N, P) patch indices (row-major) in descending relevance; ties in random order."""
    flat = np.asarray(relevance, np.float64).reshape(len(relevance), -1)
    tie_break = rng.random(flat.shape)
    return np.stack([np.lexsort((t, -r)) for r, t in zip(flat, tie_break)]).astype(np.int64)


def random_order(n: int, patches: int, rng: np.random.Generator) -> np.ndarray:
    """(N, P) a random permutation of the patches per image."""
    return np.stack([rng.permutation(patches) for _ in range(n)]).astype(np.int64) \
        if n else np.zeros((0, patches), np.int64)


def perturbation_curves(images: np.ndarray, order: np.ndarray, fill: np.ndarray, patch: int,
                        mode: str, score, rows: int = ROWS, bar=None) -> np.ndarray:
    """(N, P+1) scores f(x_k), k = 0 … P, of images perturbed patch by patch in `order`.

    images, fill (N, H, W, C); order (N, P) patch indices (row-major on the patch grid).
    mode "deletion": x_k = images with the first k patches of `order` taken from `fill` (noise);
    mode "insertion": x_k = fill (the start image) with the first k patches taken from images.
    score(batch (M, H, W, C), image_index (M,)) -> (M,) scores; it is called with at most `rows`
    rows at a time (all images x all steps, in order), so a model runs a few big batches.
    """
    check_option("explanation_fidelity", "mode", mode, MODES)
    images = np.asarray(images, np.float32)
    fill = np.asarray(fill, np.float32)
    n, height, width = images.shape[:3]
    ph, pw = patch_grid((height, width), patch)
    patches = ph * pw
    order = np.asarray(order, np.int64)
    if order.shape != (n, patches):
        raise ValueError(f"order must be (N, {patches}). Received shape {order.shape}")
    # rank_pixels[i, y, x] = position of the pixel's patch in image i's order.
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(patches)[None, :], axis=1)
    rank = rank.reshape(n, ph, pw)
    rank_pixels = np.repeat(np.repeat(rank, patch, axis=1), patch, axis=2)[:, :height, :width]
    changed, kept = (fill, images) if mode == "deletion" else (images, fill)
    steps = patches + 1
    total = n * steps
    scores = np.empty(total, np.float64)
    for start in range(0, total, rows):
        index = np.arange(start, min(start + rows, total))
        image_index, k = np.divmod(index, steps)
        mask = (rank_pixels[image_index] < k[:, None, None])[..., None]
        batch = np.where(mask, changed[image_index], kept[image_index])
        scores[index] = np.asarray(score(batch, image_index), np.float64).reshape(-1)
        if bar is not None:
            bar.update(len(index))
    return scores.reshape(n, steps)


# --- Spearman rank correlation ------------------------------------------------------------------

def spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's rho between a and b along the last axis (Pearson correlation of the average
    ranks); NaN where either is constant."""
    # not scipy.stats.spearmanr: it correlates every row with every other, and warns (an error
    # under the tests) on a constant map, which is NaN here
    from scipy import stats

    ra = stats.rankdata(a, axis=-1)
    rb = stats.rankdata(b, axis=-1)
    ra -= ra.mean(axis=-1, keepdims=True)
    rb -= rb.mean(axis=-1, keepdims=True)
    numerator = (ra * rb).sum(axis=-1)
    denominator = np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))
    ok = denominator > 0
    rho = np.divide(numerator, np.where(ok, denominator, 1.0))
    return np.where(ok, np.clip(rho, -1.0, 1.0), np.nan)


# --- maps ---------------------------------------------------------------------------------------

def place_on_input(maps: np.ndarray, input_hw, receptive_field) -> np.ndarray:
    """(N, H, W) grid maps (N, h, w) drawn at their cells' receptive-field centres (NaN outside)."""
    from reportgen.figures.placement import place_grid_at_centres

    maps = np.asarray(maps, np.float64)
    if len(maps) == 0:
        return np.zeros((0, *input_hw))
    placed = place_grid_at_centres(np.moveaxis(maps, 0, -1), input_hw, receptive_field)
    return np.moveaxis(placed, -1, 0)


def pool_to_grid(maps: np.ndarray, layer_field, primary_field, grid_shape, input_hw) -> np.ndarray:
    """(N, gh, gw) a conv layer's maps (N, h, w) average-pooled onto the primary grid.

    The maps are placed on the input at their cells' receptive-field centres; primary cell p
    gets the mean over its centre tile (the input pixels nearest p's receptive-field centre,
    `centre_matrix`), ignoring pixels the layer's map does not reach (0 if it reaches none).
    A map already on the primary grid (same receptive field) is returned unchanged.
    """
    from reportgen.figures.placement import centre_matrix

    maps = np.asarray(maps, np.float64)
    if tuple(layer_field) == tuple(primary_field) and maps.shape[1:] == tuple(grid_shape):
        return maps.copy()
    placed = place_on_input(maps, input_hw, layer_field)                  # (N, H, W)
    seen = ~np.isnan(placed)
    rows = centre_matrix(grid_shape[0], input_hw[0], *primary_field)      # (H, gh)
    cols = centre_matrix(grid_shape[1], input_hw[1], *primary_field)      # (W, gw)
    sums = np.einsum("yp,nyx,xq->npq", rows, np.where(seen, placed, 0.0), cols)
    counts = np.einsum("yp,nyx,xq->npq", rows, seen.astype(np.float64), cols)
    return np.divide(sums, np.where(counts > 0, counts, 1.0)) * (counts > 0)


def gradcam_maps(eval_batch, index: np.ndarray, targets: np.ndarray, layer: str,
                 gradients: str = "all") -> np.ndarray:
    """(n, h, w) Grad-CAM++ maps (gradcam_pp.gradcam_plus_plus + normalize_maps) of the TARGET
    class at `layer` for the images `index` of the evaluation set.

    The gradients come from the shared probe pass: `gradients` says which of its tensors hold
    the targets' — "predicted" (targets are the predicted classes: "grad:<layer>"), "true" (the
    labels: "grad[true]:<layer>") or "all" (any targets: "grad[all]:<layer>", every class).
    """
    from reportgen.techniques.gradcam_pp import gradcam_plus_plus, normalize_maps

    name = {"predicted": "grad:", "true": "grad[true]:", "all": "grad[all]:"}[gradients] + layer
    tensors = eval_batch.tensors(f"conv:{layer}", name, "lengths")
    features = tensors[f"conv:{layer}"][index]
    grads = tensors[name][index]
    if gradients == "all":
        grads = grads[np.arange(len(index)), targets]
    lengths = tensors["lengths"][index]
    scores = np.take_along_axis(lengths, targets[:, None], axis=1)[:, 0]
    return normalize_maps(gradcam_plus_plus(features, grads, scores))


def rpv_maps(eval_batch, index: np.ndarray, targets: np.ndarray, method: str) -> np.ndarray:
    """(n, gh, gw) RPV maps (rpv.compute) of each image's target class."""
    from reportgen.probe.probe import ProbeBatch, available, expand_needs
    from reportgen.techniques import rpv

    description = eval_batch.net.description
    names = sorted(n for n in expand_needs(RPV_NEEDS, description) if available(n, description))
    tensors = eval_batch.tensors(*names)
    batch = ProbeBatch(net=eval_batch.net, images=eval_batch.images[index],
                       tensors={n: tensors[n][index] for n in names})
    maps = rpv.compute(batch, rpv.Params(method=method))["maps"]          # (n, K, gh, gw)
    return maps[np.arange(len(index)), targets]


def builtin_maps(eval_batch, index: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(n, gh, gw) the model's built-in explanation of each image's target class."""
    maps = np.asarray(eval_batch.tensors("explanation")["explanation"][index], np.float64)
    return maps[np.arange(len(index)), targets]


def saliency_maps(eval_batch, index: np.ndarray, targets: np.ndarray, layer: str,
                  gradients: str) -> tuple[dict[str, np.ndarray], np.ndarray,
                                           dict[str, np.ndarray]]:
    """The maps a model's site shows for each image's TARGET class, for the images `index`:
    (grid maps {method: (n, gh, gw)} of its own explanation — RPV modified and original, or the
    built-in map (`builtin_explanation`) —, the Grad-CAM++ maps (n, h, w) of `layer` from the
    probe's `gradients` ("predicted", "true" or "all", as `gradcam_maps`), and every one placed
    on the input {method: (n, H, W)}: grid cells drawn at their receptive-field centres, NaN
    where no cell reaches)."""
    description = eval_batch.net.description
    input_hw = tuple(int(v) for v in eval_batch.images.shape[1:3])
    primary_field = description.primary_capsules.receptive_field.rows
    layer_field = description.receptive_field(layer).rows
    if builtin_explanation(description) == "rpv_modified":
        grid_maps = {m: rpv_maps(eval_batch, index, targets, m.split("_")[1])
                     for m in ("rpv_modified", "rpv_original")}
    else:
        grid_maps = {"builtin": builtin_maps(eval_batch, index, targets)}
    cam = gradcam_maps(eval_batch, index, targets, layer, gradients)      # (n, h, w)
    placed = {m: place_on_input(g, input_hw, primary_field) for m, g in grid_maps.items()}
    placed["gradcam_pp"] = place_on_input(cam, input_hw, layer_field)
    return grid_maps, cam, placed


# --- the analysis -------------------------------------------------------------------------------

def compute(eval_batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """Deletion/insertion curves per method and RPV/Grad-CAM++ agreement (see module docstring).

    Arrays: "deletion", "insertion" (methods, N, P+1) per-image curves in METHODS order;
    "fractions" (P+1,) k/P; "agreement", "agreement_original" (N,) Spearman rho of RPV
    modified / original vs Grad-CAM++ (NaN = undefined); "index", "labels", "targets",
    "predicted" (N,); "grid_shape", "patch_grid" (2,); "example_*" for the example figure.
    """
    from reportgen import console
    from reportgen.capsnet.compiled import encoder_scores
    from reportgen.probe.evaluation import stratified_sample
    from reportgen.probe.probe import available
    from reportgen.techniques.compute import check_conv_layer

    params = params or Params()
    net = eval_batch.net
    layer = params.gradcam_layer
    check_conv_layer(net, "explanation_fidelity", layer)
    height, width = eval_batch.images.shape[1:3]
    input_hw = (int(height), int(width))
    description = net.description
    primary = description.primary_capsules
    primary_field = primary.receptive_field.rows
    layer_field = description.receptive_field(layer).rows
    grid_shape = tuple(int(g) for g in primary.grid)

    # One probe pass over the shared set gives every clean tensor used below (asking piecemeal
    # would run it twice: once without and once with gradients).
    eval_batch.tensors(*sorted(n for n in needs(params) if available(n, description)))
    index = stratified_sample(eval_batch.labels, params.images, seed=params.seed)
    images = np.asarray(eval_batch.images[index], np.float32)
    labels = np.asarray(eval_batch.labels[index], np.int64)
    predicted = np.asarray(eval_batch.tensors("predicted")["predicted"][index], np.int64)
    targets = labels if params.target == "true" else predicted
    n = len(index)

    builtin = builtin_explanation(description)
    grid_maps, cam, placed = saliency_maps(eval_batch, index, targets, layer, params.target)
    cam_grid = pool_to_grid(cam, layer_field, primary_field, grid_shape, input_hw)
    flat = lambda maps: maps.reshape(n, -1)                                # noqa: E731
    agreement = spearman(flat(grid_maps[builtin]), flat(cam_grid))
    agreement_original = spearman(flat(grid_maps["rpv_original"]), flat(cam_grid)) \
        if "rpv_original" in grid_maps else np.full(n, np.nan)

    rng = np.random.default_rng(params.seed)
    ph, pw = patch_grid(input_hw, params.patch)
    orders = {m: relevance_order(patch_relevance(placed[m], params.patch), rng) for m in placed}
    orders["random"] = random_order(n, ph * pw, rng)
    noise = rng.random(images.shape, dtype=np.float32)
    start = gaussian_blur(images, params.blur_sigma) if params.insertion_start == "blur" \
        else np.zeros_like(images)

    def score(batch, image_index):
        return np.take_along_axis(encoder_scores(net, batch), targets[image_index][:, None],
                                  axis=1)

    curves = {mode: np.full((len(METHODS), n, ph * pw + 1), np.nan, np.float32)
              for mode in MODES}
    with console.progress(len(MODES) * len(orders) * n * (ph * pw + 1),
                          f"explanation fidelity ({n} images × {len(MODES) * len(orders)} curves "
                          f"× {ph * pw + 1} points)", unit="passes") as bar:
        for mode in MODES:
            fill = noise if mode == "deletion" else start
            for m, method in enumerate(METHODS):
                if method in orders:
                    curves[mode][m] = perturbation_curves(images, orders[method], fill,
                                                          params.patch, mode, score, bar=bar)

    shown = _example_rows(labels, EXAMPLES)
    return {
        "deletion": curves["deletion"],
        "insertion": curves["insertion"],
        "fractions": (np.arange(ph * pw + 1) / (ph * pw)).astype(np.float32),
        "agreement": agreement.astype(np.float32),
        "agreement_original": agreement_original.astype(np.float32),
        "index": index.astype(np.int64),
        "labels": labels,
        "targets": targets.astype(np.int64),
        "predicted": predicted,
        "grid_shape": np.asarray(grid_shape, np.int64),
        "patch_grid": np.asarray((ph, pw), np.int64),
        "example_images": images[shown],
        "example_rpv": placed[builtin][shown].astype(np.float32),
        "example_gradcam": placed["gradcam_pp"][shown].astype(np.float32),
        "example_rpv_grid": grid_maps[builtin][shown].astype(np.float32),
        "builtin_method": np.int64(METHODS.index(builtin)),
        "example_gradcam_grid": cam_grid[shown].astype(np.float32),
        "example_agreement": agreement[shown].astype(np.float32),
        "example_targets": targets[shown].astype(np.int64),
    }


def _example_rows(labels: np.ndarray, count: int) -> np.ndarray:
    """Up to `count` rows, one per class where possible (the first image of each class)."""
    _, first = np.unique(labels, return_index=True)
    rows = list(np.sort(first)[:count])
    rows += [i for i in range(len(labels)) if i not in rows][:max(0, count - len(rows))]
    return np.asarray(sorted(rows), np.int64)


def _nan_stats(values: np.ndarray) -> dict:
    values = np.asarray(values, np.float64)
    valid = values[~np.isnan(values)]
    if len(valid) == 0:
        return {"mean": None, "median": None, "std": None, "valid": 0}
    return {"mean": rounded_number(valid.mean()), "median": rounded_number(np.median(valid)),
            "std": rounded_number(valid.std()), "valid": int(len(valid))}


def summarize(arrays: dict, params: Params | None = None) -> dict:
    """Flat JSON-ready headline numbers: per method the model has (`own_methods`)
    deletion_aopc_*, deletion_auc_*, insertion_auc_*; agreement_* (Spearman of RPV modified vs Grad-CAM++) and
    agreement_original_*; the procedure (images, patches, grid, layer, target, start).

    Under summary["intervals"]: every per-method score and the agreements' means with a BCa
    bootstrap over the images, their medians and spreads by the bootstrap of the whole
    statistic, the accuracy by Wilson; and the paired differences (the same images) of the
    model's own explanation against Grad-CAM++ and of each against the random order, for the
    deletion AOPC and the insertion AUC."""
    params = params or Params()
    deletion = np.asarray(arrays["deletion"], np.float64)
    insertion = np.asarray(arrays["insertion"], np.float64)
    grid = [int(g) for g in np.asarray(arrays["grid_shape"]).reshape(-1)]
    correct = np.asarray(arrays["predicted"]) == np.asarray(arrays["labels"])
    out = {
        "images": int(deletion.shape[1]),
        "patch": int(params.patch),
        "patches": int(deletion.shape[2] - 1),
        "target": params.target,
        "gradcam_layer": params.gradcam_layer,
        "insertion_start": (f"blur sigma {params.blur_sigma:g}"
                            if params.insertion_start == "blur" else "blank"),
        "grid": f"{grid[0]}x{grid[1]}",
        "grid_cells": grid[0] * grid[1],
        "accuracy": rounded_number(np.mean(correct)) if deletion.shape[1] else None,
        "builtin_method": builtin_method(arrays),
    }
    if deletion.shape[1]:
        iv.attach(out, "accuracy", iv.proportion(correct))
    per_image = {}                        # (key -> (N,) per-image score) for the differences
    for method in own_methods(deletion):              # only the methods this model has
        m = METHODS.index(method)
        for key, values in ((f"deletion_aopc_{method}", deletion_aopc(deletion[m])),
                            (f"deletion_auc_{method}", area_under_curve(deletion[m])),
                            (f"insertion_auc_{method}", area_under_curve(insertion[m]))):
            out[key] = rounded_number(values.mean())
            if values.size:
                per_image[key] = values
    own = out["builtin_method"]
    pairs = [(f"{score}_{a}", f"{score}_{b}") for score in ("deletion_aopc", "insertion_auc")
             for a, b in ((own, "gradcam_pp"), (own, "random"), ("gradcam_pp", "random"))]
    pairs = [(a, b) for a, b in pairs if a in per_image and b in per_image]
    if per_image:                        # every score and difference: one resampling
        got = iv.bootstrap_means(np.column_stack(
            [*per_image.values(), *(per_image[a] - per_image[b] for a, b in pairs)]))
        for key, interval in zip(per_image, got):
            iv.attach(out, key, interval)
        for (a, b), interval in zip(pairs, got[len(per_image):]):
            iv.attach_difference(out, a, b, interval)
    for name in ("agreement", "agreement_original"):
        values = np.asarray(arrays[name], np.float64)
        for key, value in _nan_stats(values).items():
            out[f"{name}_{key}"] = value
        valid = values[np.isfinite(values)]
        if valid.size:
            iv.attach(out, f"{name}_mean", iv.bootstrap_mean(valid))
            iv.attach(out, f"{name}_median", iv.bootstrap_median(valid))
            # the spread sqrt(E x² - (E x)²), a function of two means over the images
            iv.attach(out, f"{name}_std", iv.bootstrap_of_means(
                np.stack([valid, valid ** 2], 1),
                lambda m: np.sqrt(np.maximum(m[..., 1] - m[..., 0] ** 2, 0.0))))
    return out


TECHNIQUE = Technique(
    name="explanation_fidelity",
    citations=cite('petsiuk2018rise', 'samek2017evaluating', 'chattopadhay2018gradcampp', 'bhullar2020rpv'),
    # the model's own explanation: RPV along its routing paths, or the map its family declares
    title="Explanation fidelity (deletion / insertion: RPV or the family's own map vs Grad-CAM++)",
    layer="model",
    scope="dataset",
    needs=needs,
    applies_to=frozenset({"conv", "capsule_maps", "class_capsules", "own_explanation"}),
    params_type=Params,
    version=3,
    compute=compute,
    render=lazy("reportgen.techniques.explanation_fidelity.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.explanation_fidelity.figures", "render_trend", Params),
    render_compare=lazy("reportgen.techniques.explanation_fidelity.figures",
                        "render_compare", Params),
    description="Do the saliency maps point at what the network uses? Deletion and insertion "
                "curves (Petsiuk et al. 2018) perturb each image patch by patch in the order of "
                "a map's relevance and follow the target class's score, for the model's own "
                "explanation (Routing Path Visualization, modified and original, through its "
                "routing weights; or the explanation map its family builds in, as "
                "GraCapsNet's attention E), Grad-CAM++ and a random order; AOPC (Samek et al. 2017) and areas under the curves summarise "
                "them. The Spearman rank correlation of the built-in and Grad-CAM++ maps on the "
                "primary-capsule grid measures how far the two explanations agree (the thesis "
                "found RPV and Grad-CAM++ comparable when the primary grid is large).",
)
