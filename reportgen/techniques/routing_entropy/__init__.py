"""How decided routing is, over the evaluation set, for any routing whose weights lead from
children to parents (RoutingWeights.paths: coupling coefficients of dynamic routing, Sabour et
al. 2017; EM assignments, Hinton et al. 2018; ...).

The entropy of each child's final routing weights over the parents it can route to,
H_i = -sum_j w_ij log w_ij: log(#parents) for uniform weights (what one iteration of dynamic or
EM routing gives), 0 when a child sends everything to one parent.

- Into the class capsules (the last routed layer): the distribution of H per class capsule,
  grouping children by the class they route to most ("argmax") or counting every child in
  every class with weight w_ij ("weighted"), and the distance from uniform log K - H on a log
  scale (trained dynamic routing often stays within 1e-2 of uniform).
- Every routed layer: H / H_uniform of each child against its own uniform log(#parents of the
  child) (a convolutional capsule layer's edge children see fewer parents), as a histogram and
  its means (plain and weighted by the child's activation; unweighted for pose-only capsules,
  which have none). Weights normalised per convolutional window (Tsai et al. 2020) are one
  distribution per window: H is their mean over the windows that see the child and H_uniform
  the log of one window's parent types, so H / H_uniform never exceeds 1.
Weights normalised over each parent's children are no distribution over a child's parents:
the analysis does not suit them (`unsuited`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reportgen.capsnet.description import routing_spread
from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import (check_option, check_positive, finite_number,
                                          require_images)

NAME = "routing_entropy"
GROUPINGS = ("argmax", "weighted")
DEFICIT_FLOOR = 1e-7                      # nats: float32 weights are uniform to ~1e-7
CHUNK = 50                                # images whose float64 weights are binned at once


@dataclass(frozen=True)
class Params:
    grouping: str = "argmax"              # class histograms: "argmax" or "weighted" by w_ij
    entropy_bins: int = 50                # bins over [0, log #classes] and over [0, 1]

    def __post_init__(self):
        check_option(NAME, "grouping", self.grouping, GROUPINGS)
        check_positive(NAME, "entropy_bins", self.entropy_bins)


def variants(description) -> list[Params]:
    return [Params()]


def entropy(weights: np.ndarray) -> np.ndarray:
    """H_i = -sum_j w_ij log w_ij over the last axis (0 log 0 = 0), float64."""
    w = np.asarray(weights, np.float64)
    return -np.sum(w * np.log(np.where(w > 0, w, 1.0)), axis=-1)


def deficit_edges(log_k: float, bins: int) -> np.ndarray:
    """Log-spaced edges of the entropy deficit log K - H, from DEFICIT_FLOOR to log K (nats)."""
    return np.geomspace(DEFICIT_FLOOR, log_k, bins + 1)


def deficit_bins(deficit: np.ndarray, log_k: float, bins: int) -> np.ndarray:
    """Bin index of log K - H among `deficit_edges` (at or below the floor: the first bin)."""
    low, high = np.log(DEFICIT_FLOOR), np.log(log_k)
    position = (np.log(np.maximum(deficit, DEFICIT_FLOOR)) - low) / (high - low) * bins
    return np.clip(np.floor(position).astype(np.int64), 0, bins - 1)


def needs(params, description) -> frozenset[str]:
    """Every routed layer's weights' entropies and its children's activations; the weights
    into the classes themselves (their entropy in float64, their argmax)."""
    from reportgen.probe.probe import routed_layers

    routed = routed_layers(description)
    into_classes = {f"routing:{routed[-1]}"} if routed else set()
    return frozenset({"routing_entropy:<routed>", "activations:<capsules>", *into_classes})


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """Aggregates over the evaluation set (no batch axis).

    Into the classes (K of them, from the last routed layer's N children):
    entropy_hist (K, E) counts of H in E bins over [0, log K] (w_ij-weighted for "weighted"),
    entropy_edges (E+1,), entropy_deficit_hist (K, E) the same of log K - H in log-spaced bins
    (entropy_deficit_edges, DEFICIT_FLOOR … log K nats), entropy_mean_class (K,),
    entropy_image_mean (images,), entropy_type_mean (child types,), entropy_mean,
    entropy_length_weighted_mean (weights: the children's activations, so inactive children,
    whose weights stay ~uniform, count little), entropy_max = log K.
    Every routed layer (L, in model order): layer_entropy_hist (L, E) counts of H / H_uniform
    in E bins over [0, 1] (children that can route to one parent or none left out),
    Per image (the intervals over images, float32): entropy_image_weighted (images,) and
    entropy_image_weight (images,), the sums of H x activation and of the activations;
    entropy_image_class_sum / entropy_image_class_weight (images, K) each image's share of
    entropy_mean_class's numerator and denominator; layer_entropy_image_h (L, images) mean H,
    layer_entropy_image_share (L, images) mean H / H_uniform, layer_entropy_image_weighted /
    layer_entropy_image_weight (L, images) the parts of layer_entropy_weighted_mean.
    layer_entropy_edges (E+1,), layer_entropy_mean (L,) mean H (nats),
    layer_entropy_uniform (L,) mean log(#parents), layer_entropy_normalized_mean (L,),
    layer_entropy_weighted_mean (L,) weighted by the children's activations, layer_children
    (L,), layer_entropy_image_mean (images,) each image's mean H / H_uniform over every routed
    child.
    """
    from reportgen.probe.probe import routed_layers

    params = params or Params()
    require_images(evaluation, NAME)
    description = evaluation.net.description
    routed = routed_layers(description)
    last = routed[-1]
    activated = [n for n in routed if description.layer(n).has_activation]
    tensors = dict(evaluation.tensors(*[f"routing_entropy:{n}" for n in routed],
                                      *[f"activations:{n}" for n in activated],
                                      f"routing:{last}"))
    for name in set(routed) - set(activated):       # pose-only children: every one counts 1
        tensors[f"activations:{name}"] = np.ones(tensors[f"routing_entropy:{name}"].shape,
                                                 np.float32)
    out = _into_classes(tensors[f"routing:{last}"], tensors[f"activations:{last}"],
                        description.layer(last).types, params)
    out.update(_per_layer(description, routed, tensors, params.entropy_bins))
    return out


def _into_classes(weights_all, activations_all, types: int, params: Params) -> dict:
    """The class-capsule arrays of `compute` from the weights (images, N, K) into the classes
    and the children's activations (images, ..., N in capsule order)."""
    n, caps, classes = weights_all.shape
    bins = params.entropy_bins
    log_k = math.log(classes)
    hist, deficit_hist = np.zeros((classes, bins)), np.zeros((classes, bins))
    class_sum, class_weight = np.zeros(classes), np.zeros(classes)
    image_mean, type_sum = np.zeros(n), np.zeros(types)
    image_weighted, image_weight = np.zeros(n, np.float32), np.zeros(n, np.float32)
    image_class_sum = np.zeros((n, classes), np.float32)
    image_class_weight = np.zeros((n, classes), np.float32)
    weighted_sum = weight_total = 0.0
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        weights = np.asarray(weights_all[start:stop], np.float64)              # (b, N, K)
        h = entropy(weights)                                                   # (b, N)
        image_mean[start:stop] = h.mean(1)
        type_sum += h.reshape(stop - start, -1, types).sum((0, 1))
        active = np.asarray(activations_all[start:stop], np.float64).reshape(stop - start, -1)
        weighted_sum += float((h * active).sum())
        weight_total += float(active.sum())
        image_weighted[start:stop] = (h * active).sum(1)
        image_weight[start:stop] = active.sum(1)
        hbin = np.clip(np.floor(h / log_k * bins).astype(np.int64), 0, bins - 1)
        dbin = deficit_bins(log_k - h, log_k, bins)
        if params.grouping == "argmax":
            owner = weights.argmax(-1)                                         # (b, N)
            for counts, index in ((hist, hbin), (deficit_hist, dbin)):
                counts += np.bincount((owner * bins + index).ravel(),
                                      minlength=classes * bins).reshape(classes, bins)
            class_sum += np.bincount(owner.ravel(), h.ravel(), classes)
            class_weight += np.bincount(owner.ravel(), minlength=classes)
            rows = (np.arange(stop - start)[:, None] * classes + owner).ravel()
            image_class_sum[start:stop] = np.bincount(
                rows, h.ravel(), (stop - start) * classes).reshape(-1, classes)
            image_class_weight[start:stop] = np.bincount(
                rows, minlength=(stop - start) * classes).reshape(-1, classes)
        else:
            for k in range(classes):
                hist[k] += np.bincount(hbin.ravel(), weights[..., k].ravel(), bins)
                deficit_hist[k] += np.bincount(dbin.ravel(), weights[..., k].ravel(), bins)
            class_sum += np.einsum("bn,bnk->k", h, weights)
            class_weight += weights.sum((0, 1))
            image_class_sum[start:stop] = np.einsum("bn,bnk->bk", h, weights)
            image_class_weight[start:stop] = weights.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "entropy_hist": hist,
            "entropy_edges": np.linspace(0.0, log_k, bins + 1),
            "entropy_deficit_hist": deficit_hist,
            "entropy_deficit_edges": deficit_edges(log_k, bins),
            "entropy_mean_class": np.where(class_weight > 0, class_sum / class_weight, np.nan),
            "entropy_image_mean": image_mean,
            "entropy_type_mean": type_sum / max(n * caps // types, 1),
            "entropy_mean": np.float64(image_mean.mean()),
            "entropy_length_weighted_mean": np.float64(weighted_sum / weight_total
                                                       if weight_total > 0 else np.nan),
            "entropy_max": np.float64(log_k),
            "entropy_image_weighted": image_weighted, "entropy_image_weight": image_weight,
            "entropy_image_class_sum": image_class_sum,
            "entropy_image_class_weight": image_class_weight,
        }


def _per_layer(description, routed, tensors, bins: int) -> dict:
    """The per-routed-layer arrays of `compute`."""
    n = len(tensors[f"routing_entropy:{routed[0]}"])
    hist = np.zeros((len(routed), bins))
    stats = {k: np.full(len(routed), np.nan) for k in
             ("mean", "uniform", "normalized_mean", "weighted_mean", "children")}
    image_sum, image_count = np.zeros(n), 0
    per_image = {k: np.full((len(routed), n), np.nan, np.float32)
                 for k in ("h", "share", "weighted", "weight")}
    for li, name in enumerate(routed):
        h = np.asarray(tensors[f"routing_entropy:{name}"], np.float64)          # (n, C)
        fan = routing_spread(description, name)
        uniform = np.log(np.maximum(fan, 1))
        usable = fan >= 2
        share = h[:, usable] / uniform[usable]                                  # (n, C')
        weight = np.asarray(tensors[f"activations:{name}"], np.float64).reshape(n, -1)[:, usable]
        index = np.clip(np.floor(share * bins).astype(np.int64), 0, bins - 1)
        hist[li] = np.bincount(index.ravel(), minlength=bins)
        stats["mean"][li] = h[:, fan > 0].mean() if n else np.nan
        stats["uniform"][li] = uniform[fan > 0].mean()
        stats["normalized_mean"][li] = share.mean() if share.size else np.nan
        total = weight.sum()
        stats["weighted_mean"][li] = (share * weight).sum() / total if total > 0 else np.nan
        stats["children"][li] = int(usable.sum())
        if (fan > 0).any():
            per_image["h"][li] = h[:, fan > 0].mean(1)
        if share.size:
            per_image["share"][li] = share.mean(1)
            per_image["weighted"][li] = (share * weight).sum(1)
            per_image["weight"][li] = weight.sum(1)
        image_sum += share.sum(1)
        image_count += share.shape[1]
    return {"layer_entropy_hist": hist, "layer_entropy_edges": np.linspace(0.0, 1.0, bins + 1),
            **{f"layer_entropy_{k}": v for k, v in stats.items() if k != "children"},
            "layer_children": stats["children"],
            **{f"layer_entropy_image_{k}": v for k, v in per_image.items()},
            "layer_entropy_image_mean": image_sum / max(image_count, 1)}


def summarize(arrays, params: Params | None = None) -> dict:
    """Headline numbers (JSON-ready; NaN becomes None): into the classes, and per routed layer
    ("layers" of them, in model order)."""
    entropy_max = float(np.asarray(arrays["entropy_max"]))
    entropy_mean = finite_number(arrays["entropy_mean"])
    per_layer = {key: [finite_number(v) for v in np.asarray(arrays[f"layer_entropy_{name}"])]
                 for key, name in (("entropy_mean_per_layer", "mean"),
                                   ("entropy_uniform_per_layer", "uniform"),
                                   ("entropy_normalized_per_layer", "normalized_mean"),
                                   ("entropy_weighted_normalized_per_layer", "weighted_mean"))}
    summary = {
        "images": int(np.asarray(arrays["entropy_image_mean"]).size),
        "entropy_mean": entropy_mean,
        "entropy_max": entropy_max,
        "entropy_mean_normalized": None if entropy_mean is None else entropy_mean / entropy_max,
        "entropy_length_weighted_mean": finite_number(arrays["entropy_length_weighted_mean"]),
        "entropy_mean_per_class": [finite_number(v) for v in arrays["entropy_mean_class"]],
        "layers": len(per_layer["entropy_mean_per_layer"]),
        **per_layer,
    }
    if "layer_entropy_image_h" in arrays and summary["images"]:
        _attach_intervals(summary, arrays)
    return summary


def _attach_intervals(summary: dict, arrays) -> None:
    """95% intervals over the images (summary["intervals"]): a BCa bootstrap of the per-image
    means for the means (entropy_mean, and its share of log K by the same scaling; per layer
    the mean H and H / H_uniform), and of the whole ratio for the pooled weighted means (the
    activation-weighted ones, and each class's mean over the children it owns). The uniform
    entropies are the architecture's: no interval."""
    entropy_max = summary["entropy_max"]
    if summary["entropy_mean"] is not None:
        mean = iv.bootstrap_mean(arrays["entropy_image_mean"])
        iv.attach(summary, "entropy_mean", mean)
        iv.attach(summary, "entropy_mean_normalized", iv.Interval(
            mean.value / entropy_max, mean.low / entropy_max, mean.high / entropy_max, mean.n,
            mean.method))
    if summary["entropy_length_weighted_mean"] is not None:
        iv.attach(summary, "entropy_length_weighted_mean",
                  iv.bootstrap_ratio(arrays["entropy_image_weighted"],
                                     arrays["entropy_image_weight"]))
    per_class = iv.bootstrap_ratio(arrays["entropy_image_class_sum"],
                                   arrays["entropy_image_class_weight"])
    iv.attach(summary, "entropy_mean_per_class",
              [i if v is not None else _none(i) for i, v in
               zip(per_class, summary["entropy_mean_per_class"])])
    for key, name in (("entropy_mean_per_layer", "h"), ("entropy_normalized_per_layer", "share")):
        rows = np.asarray(arrays[f"layer_entropy_image_{name}"])
        iv.attach(summary, key, [iv.bootstrap_mean(row) if v is not None else _none()
                                 for row, v in zip(rows, summary[key])])
    weighted = [iv.bootstrap_ratio(top, bottom) if v is not None else _none() for top, bottom, v
                in zip(np.asarray(arrays["layer_entropy_image_weighted"]),
                       np.asarray(arrays["layer_entropy_image_weight"]),
                       summary["entropy_weighted_normalized_per_layer"])]
    iv.attach(summary, "entropy_weighted_normalized_per_layer", weighted)


def _none(like=None) -> "iv.Interval":
    """No interval, for a score that is None (no children, no weight) in a list of them."""
    return iv.Interval(None, None, None, 0, like.method if like else iv.BOOTSTRAP)


def unsuited(description) -> str | None:
    """Weights normalised over each parent's children have no entropy per child."""
    over_children = [c.name for c in description.routed_layers
                     if c.routing.sums_over == "children"]
    if over_children:
        return (f"the routing weights of {over_children[0]} are normalised over each "
                f"parent's children, not over each child's parents, so a child's weights are "
                f"no distribution to take the entropy of")
    return None


TECHNIQUE = Technique(
    name=NAME,
    unsuited=unsuited,
    citations=cite('sabour2017dynamic'),
    title="Routing entropy",
    # reads no label: images of two digits (MultiMNIST) are analysed as any other
    labels=(1, 2),
    layer="class",
    scope="dataset",
    needs=needs,
    applies_to=frozenset({"primary_capsules", "class_capsules", "routing_paths"}),
    params_type=Params,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.routing_entropy.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.routing_entropy.figures", "render_trend", Params),
    render_compare=lazy("reportgen.techniques.routing_entropy.figures", "render_compare", Params),
    description="How decided routing is over the evaluation set, whatever the routing weights "
                "are (coupling coefficients of dynamic routing, EM assignments, ...): the "
                "entropy of every child capsule's final routing weights into the class capsules "
                "per class capsule (log #classes = uniform, 0 = all to one class) and its "
                "distance from uniform; and, for every routed layer, each child's entropy "
                "against the uniform entropy over the parents it can route to.",
)
