"""The routing diagnostics as reportgen computed them in one technique before they were split
(routing_entropy, vote_agreement, dead_units): kept verbatim, TensorFlow-free apart from the
votes, as the reference the split techniques must reproduce on tiny nets."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reportgen.console import progress
from reportgen.errors import ReportgenError
from reportgen.techniques.dead_units.numbers import FILTER_PREFIX, dead_filter_summary, dead_units
from reportgen.techniques.base import model_description
from reportgen.techniques.compute import check_option, check_positive, finite_number, require_images

NAME = "routing_diagnostics"
GROUPINGS = ("argmax", "weighted")
ROLES = ("true", "wrong")                 # rows of the vote-agreement arrays
VOTE_BUDGET_BYTES = 128 * 2 ** 20         # votes of one chunk (float32) stay under this
DEFICIT_FLOOR = 1e-7                      # nats: float32 couplings are uniform to ~1e-7


@dataclass(frozen=True)
class Params:
    grouping: str = "argmax"              # entropy histograms: "argmax" or "weighted" by c_ij
    entropy_bins: int = 50                # bins over [0, log #classes]
    agreement_bins: int = 100             # cosine bins over [-1, 1]
    kept_images: int = 8                  # per-image vote-agreement histograms kept
    dead_type_threshold: float = 1e-3     # a capsule type never longer than this is inactive
    chunk: int = 50                       # images per vote computation (at most)

    def __post_init__(self):
        check_option(NAME, "grouping", self.grouping, GROUPINGS)
        for option in ("entropy_bins", "agreement_bins", "chunk"):
            check_positive(NAME, option, getattr(self, option))
        if isinstance(self.kept_images, bool) or not isinstance(self.kept_images, int) \
                or self.kept_images < 0:
            raise ReportgenError(f"Invalid option 'kept_images' for technique '{NAME}'.",
                                 expected="an integer >= 0", received=repr(self.kept_images))
        check_positive(NAME, "dead_type_threshold", self.dead_type_threshold, float)


def variants(description) -> list[Params]:
    return [Params()]


def relu_layers(model) -> list[str]:
    """The conv layers with a ReLU (the only ones where "dead" means never active)."""
    return [c.name for c in model_description(model).conv_layers if c.activation == "relu"]


def coupling_entropy(coupling: np.ndarray) -> np.ndarray:
    """H_i = -sum_j c_ij log c_ij over the last axis (0 log 0 = 0), float64."""
    c = np.asarray(coupling, np.float64)
    return -np.sum(c * np.log(np.where(c > 0, c, 1.0)), axis=-1)


def deficit_edges(log_k: float, bins: int) -> np.ndarray:
    """Log-spaced edges of the entropy deficit log K - H, from DEFICIT_FLOOR to log K (nats)."""
    return np.geomspace(DEFICIT_FLOOR, log_k, bins + 1)


def deficit_bins(deficit: np.ndarray, log_k: float, bins: int) -> np.ndarray:
    """Bin index of log K - H among `deficit_edges` (at or below the floor: the first bin)."""
    low, high = np.log(DEFICIT_FLOOR), np.log(log_k)
    position = (np.log(np.maximum(deficit, DEFICIT_FLOOR)) - low) / (high - low) * bins
    return np.clip(np.floor(position).astype(np.int64), 0, bins - 1)


def cosine_bins(cosines: np.ndarray, bins: int) -> np.ndarray:
    """Bin index of each cosine among `bins` equal bins over [-1, 1] (1 lands in the last)."""
    index = np.floor((np.asarray(cosines, np.float64) + 1.0) * (bins / 2.0)).astype(np.int64)
    return np.clip(index, 0, bins - 1)


def vote_agreement(votes: np.ndarray, capsules: np.ndarray, coupling: np.ndarray, bins: int):
    """Per-bin sums for the votes (B, N, D) for one class capsule per image (B, D), c_ij (B, N).

    cos(v_j, u_hat[j|i]) of every vote (0 for a zero vector) falls in one of `bins` equal bins
    over [-1, 1]. Returns {"count", "length", "coupling"}: (bins,) vote counts and sums of the
    votes' lengths and c_ij per bin; "per_image": (B, bins) counts; and the scalars "cos" (sum
    of cosines), "cos_coupling" (sum of c_ij * cosine) and "coupling_total" (sum of c_ij).
    """
    votes = np.asarray(votes, np.float64)
    capsules = np.asarray(capsules, np.float64)
    vote_len = np.linalg.norm(votes, axis=-1)                                  # (B, N)
    caps_len = np.linalg.norm(capsules, axis=-1)                               # (B,)
    dots = np.einsum("bnd,bd->bn", votes, capsules)
    denom = vote_len * caps_len[:, None]
    cos = np.where(denom > 0, dots / np.where(denom > 0, denom, 1.0), 0.0)
    index = cosine_bins(cos, bins)
    b = len(index)
    flat = (np.arange(b)[:, None] * bins + index).ravel()
    per_image = np.bincount(flat, minlength=b * bins).reshape(b, bins)
    coupling = np.asarray(coupling, np.float64)
    return {"count": per_image.sum(0).astype(np.float64),
            "length": np.bincount(index.ravel(), vote_len.ravel(), bins),
            "coupling": np.bincount(index.ravel(), coupling.ravel(), bins),
            "cos": float(cos.sum()),
            "cos_coupling": float((cos * coupling).sum()),
            "coupling_total": float(coupling.sum()),
            "per_image": per_image.astype(np.float64)}


def _chunk_size(net, params: Params) -> int:
    description = net.description
    per_image = (description.primary_capsules.capsules * description.classes
                 * description.class_capsules.pose_size * 4)
    return int(max(1, min(params.chunk, VOTE_BUDGET_BYTES // max(per_image, 1))))


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """Aggregates over the evaluation set (no batch axis), plus a few per-image arrays.

    entropy_hist (K, E) counts (c_ij-weighted for "weighted"), entropy_edges (E+1,),
    entropy_deficit_hist (K, E) the same counts of log K - H in log-spaced bins (edges
    entropy_deficit_edges, DEFICIT_FLOOR … log K nats; trained dynamic routing often stays within
    1e-2 of uniform, invisible on the linear histogram),
    entropy_mean_class (K,), entropy_image_mean (N,), entropy_type_mean (T,),
    entropy_mean / entropy_length_weighted_mean (weights: primary-capsule lengths, so short,
    inactive capsules, whose votes are ~0 and couplings ~uniform, count little) / entropy_max;
    agreement_count / agreement_share / agreement_length / agreement_coupling (2, A) for rows
    ROLES (true class, strongest wrong class; mean length and mean c_ij are NaN in empty bins),
    agreement_edges (A+1,), agreement_mean_cos / agreement_coupling_cos (2,),
    agreement_image_share (kept, 2, A), agreement_image_index (kept,);
    filter_max_<layer> (filters,) for every ReLU conv layer, type_max_length (T,),
    dead_type_threshold (scalar).
    """
    import keras

    params = params or Params()
    if "em_routing" in model_description(evaluation.net).features:
        return compute_em(evaluation, params)
    require_images(evaluation, NAME)
    net = evaluation.net
    layers = relu_layers(net)
    # One call: every name not yet held by the EvalBatch comes from the same probe pass.
    tensors = evaluation.tensors("routing:primary_caps", "class_capsules", "lengths",
                                 "primary_capsules",
                                 "primary_lengths", *[f"conv:{n}" for n in layers])
    coupling_all = tensors["routing:primary_caps"]
    capsules_all = tensors["class_capsules"]
    primary_all = tensors["primary_capsules"]
    labels = np.asarray(evaluation.labels, np.int64)
    n, caps, classes = coupling_all.shape
    types = net.description.primary_capsules.types
    lengths = np.asarray(tensors["lengths"], np.float64)
    wrong = np.where(np.eye(classes, dtype=bool)[labels], -np.inf, lengths).argmax(1)
    roles = np.stack([labels, wrong], 1)                                        # (N, 2)

    e_bins, a_bins = params.entropy_bins, params.agreement_bins
    log_k = math.log(classes)
    entropy_hist = np.zeros((classes, e_bins))
    deficit_hist = np.zeros((classes, e_bins))
    entropy_class_sum, entropy_class_weight = np.zeros(classes), np.zeros(classes)
    entropy_image = np.zeros(n)
    entropy_type_sum = np.zeros(types)
    weighted_sum = weight_total = 0.0
    sums = {k: np.zeros((2, a_bins)) for k in ("count", "length", "coupling")}
    cos_sum, cos_coupling, coupling_total = np.zeros(2), np.zeros(2), np.zeros(2)
    kept = min(params.kept_images, n)
    image_counts = np.zeros((kept, 2, a_bins))

    chunk = _chunk_size(net, params)
    with progress(n, "routing diagnostics", unit="img") as bar:
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            rows = np.arange(stop - start)
            coupling = np.asarray(coupling_all[start:stop], np.float64)        # (b, N, K)
            primary = np.asarray(primary_all[start:stop], np.float32)
            # Entropy of every input capsule's couplings.
            h = coupling_entropy(coupling)                                      # (b, N)
            entropy_image[start:stop] = h.mean(1)
            entropy_type_sum += h.reshape(len(rows), -1, types).sum((0, 1))
            plen = np.linalg.norm(primary.astype(np.float64), axis=-1)
            weighted_sum += float((h * plen).sum())
            weight_total += float(plen.sum())
            hbin = np.clip(np.floor(h / log_k * e_bins).astype(np.int64), 0, e_bins - 1)
            dbin = deficit_bins(log_k - h, log_k, e_bins)
            if params.grouping == "argmax":
                owner = coupling.argmax(-1)                                     # (b, N)
                for hist, index in ((entropy_hist, hbin), (deficit_hist, dbin)):
                    hist += np.bincount((owner * e_bins + index).ravel(),
                                        minlength=classes * e_bins).reshape(classes, e_bins)
                entropy_class_sum += np.bincount(owner.ravel(), h.ravel(), classes)
                entropy_class_weight += np.bincount(owner.ravel(), minlength=classes)
            else:
                for k in range(classes):
                    entropy_hist[k] += np.bincount(hbin.ravel(), coupling[..., k].ravel(), e_bins)
                    deficit_hist[k] += np.bincount(dbin.ravel(), coupling[..., k].ravel(), e_bins)
                entropy_class_sum += np.einsum("bn,bnk->k", h, coupling)
                entropy_class_weight += coupling.sum((0, 1))
            # Votes for this chunk only: (b, N, K, D), then the two classes of interest.
            votes = keras.ops.convert_to_numpy(net.class_caps.votes(primary))
            for r in range(2):
                cls = roles[start:stop, r]
                part = vote_agreement(votes[rows, :, cls], capsules_all[start:stop][rows, cls],
                                      coupling[rows, :, cls], a_bins)
                for key in sums:
                    sums[key][r] += part[key]
                cos_sum[r] += part["cos"]
                cos_coupling[r] += part["cos_coupling"]
                coupling_total[r] += part["coupling_total"]
                if start < kept:
                    take = min(kept, stop) - start
                    image_counts[start:start + take, r] = part["per_image"][:take]
            del votes
            bar.update(stop - start)

    count = sums["count"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "entropy_hist": entropy_hist,
            "entropy_edges": np.linspace(0.0, log_k, e_bins + 1),
            "entropy_deficit_hist": deficit_hist,
            "entropy_deficit_edges": deficit_edges(log_k, e_bins),
            "entropy_mean_class": np.where(entropy_class_weight > 0,
                                           entropy_class_sum / entropy_class_weight, np.nan),
            "entropy_image_mean": entropy_image,
            "entropy_type_mean": entropy_type_sum / max(n * caps // types, 1),
            "entropy_mean": np.float64(entropy_image.mean()),
            "entropy_length_weighted_mean": np.float64(weighted_sum / weight_total
                                                       if weight_total > 0 else np.nan),
            "entropy_max": np.float64(log_k),
            "agreement_count": count,
            "agreement_share": count / np.maximum(count.sum(1, keepdims=True), 1),
            "agreement_length": np.where(count > 0, sums["length"] / count, np.nan),
            "agreement_coupling": np.where(count > 0, sums["coupling"] / count, np.nan),
            "agreement_edges": np.linspace(-1.0, 1.0, a_bins + 1),
            "agreement_mean_cos": cos_sum / max(n * caps, 1),
            "agreement_coupling_cos": np.where(coupling_total > 0, cos_coupling / coupling_total,
                                               np.nan),
            "agreement_image_share": image_counts / max(caps, 1),
            "agreement_image_index": np.arange(kept, dtype=np.int64),
            "type_max_length": np.asarray(tensors["primary_lengths"]).max((0, 1, 2)),
            "dead_type_threshold": np.float64(params.dead_type_threshold),
        }
    for layer in layers:
        out[FILTER_PREFIX + layer] = np.asarray(tensors[f"conv:{layer}"]).max((0, 1, 2))
    return out


def needs(params, description) -> frozenset[str]:
    """Dynamic routing: the couplings, class capsules and primary capsules (the votes are
    recomputed from them); EM routing: each routed layer's assignment entropies and every grid
    layer's activations. Both: the conv maps (dead filters)."""
    if "em_routing" in description.features:
        return frozenset({"routing_entropy:<routed>", "activations:<capsules>", "conv:<layer>"})
    return frozenset({"routing:primary_caps", "class_capsules", "lengths", "primary_capsules",
                      "primary_lengths", "conv:<layer>"})


def compute_em(evaluation, params: Params) -> dict[str, np.ndarray]:
    """EM routing (module docstring). Arrays, for the L routed layers in model order:
    layer_entropy_hist (L, E) counts of H / H_uniform in E bins over [0, 1] (children that can
    route to one parent or none are left out), layer_entropy_edges (E+1,),
    layer_entropy_mean (L,) mean H (nats), layer_entropy_uniform (L,) mean log(#parents),
    layer_entropy_normalized_mean (L,) mean H / H_uniform, layer_entropy_weighted_mean (L,) the
    same weighted by the children's activations, layer_children (L,); entropy_image_mean (N,)
    each image's mean H / H_uniform over every routed child; type_max_activation_<layer>
    (types,) for every grid layer, type_max_length = the primary capsules' (dead types);
    filter_max_<layer> for every ReLU conv layer; dead_type_threshold."""
    from reportgen.capsnet.description import parents_per_child
    from reportgen.probe.probe import grid_capsule_layers, routed_layers

    require_images(evaluation, NAME)
    description = evaluation.net.description
    routed, grids = routed_layers(description), grid_capsule_layers(description)
    conv = relu_layers(description)
    tensors = evaluation.tensors(*[f"routing_entropy:{n}" for n in routed],
                                 *[f"activations:{n}" for n in grids],
                                 *[f"conv:{n}" for n in conv])
    bins = params.entropy_bins
    n = len(evaluation.images)
    hist = np.zeros((len(routed), bins))
    stats = {k: np.full(len(routed), np.nan) for k in
             ("mean", "uniform", "normalized_mean", "weighted_mean", "children")}
    image_sum, image_count = np.zeros(n), 0
    for li, name in enumerate(routed):
        entropy = np.asarray(tensors[f"routing_entropy:{name}"], np.float64)      # (N, C)
        fan = parents_per_child(description, name)
        uniform = np.log(np.maximum(fan, 1))
        usable = fan >= 2
        share = entropy[:, usable] / uniform[usable]                              # (N, C')
        weight = np.asarray(tensors[f"activations:{name}"], np.float64).reshape(n, -1)[:, usable]
        index = np.clip(np.floor(share * bins).astype(np.int64), 0, bins - 1)
        hist[li] = np.bincount(index.ravel(), minlength=bins)
        stats["mean"][li] = entropy[:, fan > 0].mean() if n else np.nan
        stats["uniform"][li] = uniform[fan > 0].mean()
        stats["normalized_mean"][li] = share.mean() if share.size else np.nan
        total = weight.sum()
        stats["weighted_mean"][li] = (share * weight).sum() / total if total > 0 else np.nan
        stats["children"][li] = int(usable.sum())
        image_sum += share.sum(1)
        image_count += share.shape[1]
    out = {"layer_entropy_hist": hist, "layer_entropy_edges": np.linspace(0.0, 1.0, bins + 1),
           **{f"layer_entropy_{k}": v for k, v in stats.items() if k != "children"},
           "layer_children": stats["children"],
           "entropy_image_mean": image_sum / max(image_count, 1),
           "dead_type_threshold": np.float64(params.dead_type_threshold)}
    for name in grids:
        out[f"type_max_activation_{name}"] = np.asarray(tensors[f"activations:{name}"]).max(
            (0, 1, 2))
    out["type_max_length"] = out[f"type_max_activation_{grids[0]}"]
    for layer in conv:
        out[FILTER_PREFIX + layer] = np.asarray(tensors[f"conv:{layer}"]).max((0, 1, 2))
    return out


def summarize_em(arrays, params: Params | None = None) -> dict:
    """Headline numbers of EM routing (JSON-ready): per routed layer (in order, "layers"
    names them by index) the mean entropy, its uniform value and their ratio; the entropy of
    the last layer (into the classes) under the keys dynamic routing uses, so models of both
    families compare; dead filters and inactive types."""
    dead = dead_units(arrays)
    means = np.asarray(arrays["layer_entropy_mean"], np.float64)
    uniform = np.asarray(arrays["layer_entropy_uniform"], np.float64)
    normalized = np.asarray(arrays["layer_entropy_normalized_mean"], np.float64)
    weighted = np.asarray(arrays["layer_entropy_weighted_mean"], np.float64)
    types = [k for k in arrays if k.startswith("type_max_activation_")]
    threshold = float(np.asarray(arrays["dead_type_threshold"]))
    inactive = {k[len("type_max_activation_"):]:
                np.flatnonzero(np.asarray(arrays[k]) < threshold).tolist() for k in types}
    type_total = sum(np.asarray(arrays[k]).size for k in types)
    summary = {
        "images": int(np.asarray(arrays["entropy_image_mean"]).size),
        "layers": len(means),
        "entropy_mean_per_layer": [finite_number(v) for v in means],
        "entropy_uniform_per_layer": [finite_number(v) for v in uniform],
        "entropy_normalized_per_layer": [finite_number(v) for v in normalized],
        "entropy_weighted_normalized_per_layer": [finite_number(v) for v in weighted],
        "entropy_mean": finite_number(means[-1]),
        "entropy_max": finite_number(uniform[-1]),
        "entropy_mean_normalized": finite_number(normalized[-1]),
        **dead_filter_summary(dead),
        "dead_type_count": sum(len(v) for v in inactive.values()),
        "type_count": type_total,
        "dead_type_fraction": sum(len(v) for v in inactive.values()) / type_total
        if type_total else 0.0,
        "dead_types": dead["types"],
    }
    for layer, indices in inactive.items():
        summary[f"dead_types_{layer}"] = indices
    return summary


def summarize(arrays, params: Params | None = None) -> dict:
    """Headline numbers (JSON-ready; NaN becomes None)."""
    if "layer_entropy_mean" in arrays:
        return summarize_em(arrays, params)
    dead = dead_units(arrays)
    entropy_max = float(np.asarray(arrays["entropy_max"]))
    entropy_mean = finite_number(arrays["entropy_mean"])
    summary = {
        "images": int(np.asarray(arrays["entropy_image_mean"]).size),
        "entropy_mean": entropy_mean,
        "entropy_max": entropy_max,
        "entropy_mean_normalized": None if entropy_mean is None else entropy_mean / entropy_max,
        "entropy_length_weighted_mean": finite_number(arrays["entropy_length_weighted_mean"]),
        "entropy_mean_per_class": [finite_number(v) for v in arrays["entropy_mean_class"]],
        "agreement_true_mean_cos": finite_number(arrays["agreement_mean_cos"][0]),
        "agreement_wrong_mean_cos": finite_number(arrays["agreement_mean_cos"][1]),
        "agreement_true_coupling_weighted_cos": finite_number(arrays["agreement_coupling_cos"][0]),
        "agreement_wrong_coupling_weighted_cos": finite_number(arrays["agreement_coupling_cos"][1]),
        **dead_filter_summary(dead),
        "dead_type_count": len(dead["types"]),
        "type_count": dead["type_total"],
        "dead_type_fraction": len(dead["types"]) / dead["type_total"] if dead["type_total"]
        else 0.0,
        "dead_types": dead["types"],
    }
    return summary
