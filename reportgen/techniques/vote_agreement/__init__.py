"""Do the votes agree with the class capsule they build? (Sabour et al. 2017, Procedure 1:
dynamic routing raises the coupling of votes that agree with their parent.)

For the true class t and the strongest wrong class w of each image, the cosine between v_j and
every vote u_hat[j|i] = W_ij u_i, in equal bins over [-1, 1]; per bin the share of votes, their
mean length and mean routing weight into the class (coupling coefficient c_ij). Votes come from
the network's "votes" capability (reportgen.contract: `net.votes(images)`), a chunk of images at
a time (an LPcaps image has 10,368 x 10 votes of 16 values, 6.6 MB): the votes of the whole set
never exist at once. For any family that declares votes and routes them into class capsules
with a pose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.console import progress
from reportgen.errors import ReportgenError
from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import check_positive, finite_number, require_images

NAME = "vote_agreement"
ROLES = ("true", "wrong")                 # rows of the arrays
VOTE_BUDGET_BYTES = 128 * 2 ** 20         # votes of one chunk (float32) stay under this


@dataclass(frozen=True)
class Params:
    agreement_bins: int = 100             # cosine bins over [-1, 1]
    kept_images: int = 8                  # per-image histograms kept
    chunk: int = 50                       # images per vote computation (at most)

    def __post_init__(self):
        for option in ("agreement_bins", "chunk"):
            check_positive(NAME, option, getattr(self, option))
        if isinstance(self.kept_images, bool) or not isinstance(self.kept_images, int) \
                or self.kept_images < 0:
            raise ReportgenError(f"Invalid option 'kept_images' for technique '{NAME}'.",
                                 expected="an integer >= 0", received=repr(self.kept_images))


def cosine_bins(cosines: np.ndarray, bins: int) -> np.ndarray:
    """Bin index of each cosine among `bins` equal bins over [-1, 1] (1 lands in the last)."""
    index = np.floor((np.asarray(cosines, np.float64) + 1.0) * (bins / 2.0)).astype(np.int64)
    return np.clip(index, 0, bins - 1)


def vote_agreement(votes: np.ndarray, capsules: np.ndarray, coupling: np.ndarray, bins: int):
    """Per-bin sums for the votes (B, N, D) for one class capsule per image (B, D), c_ij (B, N).

    cos(v_j, u_hat[j|i]) of every vote (0 for a zero vector) falls in one of `bins` equal bins
    over [-1, 1]. Returns {"count", "length", "coupling"}: (bins,) vote counts and sums of the
    votes' lengths and c_ij per bin; "per_image": (B, bins) counts; and the scalars "cos" (sum
    of cosines), "cos_coupling" (sum of c_ij * cosine) and "coupling_total" (sum of c_ij),
    and the same three per image, "image_cos", "image_cos_coupling", "image_coupling" (B,).
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
            "image_cos": cos.sum(1), "image_cos_coupling": (cos * coupling).sum(1),
            "image_coupling": coupling.sum(1),
            "per_image": per_image.astype(np.float64)}


def voting_layer(description):
    """The capsule layer whose votes and routing weights lead into the class capsules."""
    layers = description.capsule_layers
    index = [c.name for c in layers].index(description.head.layer)
    return layers[index - 1] if index > 0 else None


def _chunk_size(net, params: Params) -> int:
    description = net.description
    per_image = (voting_layer(description).capsules * description.classes
                 * description.class_capsules.pose_size * 4)
    return int(max(1, min(params.chunk, VOTE_BUDGET_BYTES // max(per_image, 1))))


def needs(params, description) -> frozenset[str]:
    """The routing weights into the classes, the class capsules and their scores (the votes
    come from the network's `votes`)."""
    layer = voting_layer(description) if description.class_capsules is not None else None
    return frozenset({"class_capsules", "lengths"}
                     | ({f"routing:{layer.name}"} if layer is not None else set()))


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """agreement_count / agreement_share / agreement_length / agreement_coupling (2, A) for
    rows ROLES (true class, strongest wrong class; mean length and mean c_ij are NaN in empty
    bins), agreement_edges (A+1,), agreement_mean_cos / agreement_coupling_cos (2,),
    agreement_image_share (kept, 2, A), agreement_image_index (kept,), images; per image (the
    intervals over images, float32): agreement_image_cos (2, N) the mean cosine of its votes,
    agreement_image_cos_coupling / agreement_image_coupling (2, N) the sums of c_ij * cosine
    and of c_ij."""
    import keras

    params = params or Params()
    require_images(evaluation, NAME)
    net = evaluation.net
    routing = f"routing:{voting_layer(net.description).name}"
    # One call: every name not yet held by the EvalBatch comes from the same probe pass.
    tensors = evaluation.tensors(routing, "class_capsules", "lengths")
    coupling_all, capsules_all = tensors[routing], tensors["class_capsules"]
    images = np.asarray(evaluation.images, np.float32)
    labels = np.asarray(evaluation.labels, np.int64)
    n, caps, classes = coupling_all.shape
    lengths = np.asarray(tensors["lengths"], np.float64)
    wrong = np.where(np.eye(classes, dtype=bool)[labels], -np.inf, lengths).argmax(1)
    roles = np.stack([labels, wrong], 1)                                        # (N, 2)
    bins = params.agreement_bins
    sums = {k: np.zeros((2, bins)) for k in ("count", "length", "coupling")}
    cos_sum, cos_coupling, coupling_total = np.zeros(2), np.zeros(2), np.zeros(2)
    kept = min(params.kept_images, n)
    image_counts = np.zeros((kept, 2, bins))
    image_sums = {k: np.zeros((2, n), np.float32) for k in ("cos", "cos_coupling", "coupling")}

    chunk = _chunk_size(net, params)
    with progress(n, "vote agreement", unit="img") as bar:
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            rows = np.arange(stop - start)
            coupling = np.asarray(coupling_all[start:stop], np.float64)        # (b, N, K)
            # Votes for this chunk only: (b, N, K, D), then the two classes of interest.
            votes = keras.ops.convert_to_numpy(net.votes(images[start:stop]))
            for r in range(2):
                cls = roles[start:stop, r]
                part = vote_agreement(votes[rows, :, cls], capsules_all[start:stop][rows, cls],
                                      coupling[rows, :, cls], bins)
                for key in sums:
                    sums[key][r] += part[key]
                cos_sum[r] += part["cos"]
                cos_coupling[r] += part["cos_coupling"]
                coupling_total[r] += part["coupling_total"]
                for key in image_sums:
                    image_sums[key][r, start:stop] = part[f"image_{key}"]
                if start < kept:
                    take = min(kept, stop) - start
                    image_counts[start:start + take, r] = part["per_image"][:take]
            del votes
            bar.update(stop - start)

    count = sums["count"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "agreement_count": count,
            "agreement_share": count / np.maximum(count.sum(1, keepdims=True), 1),
            "agreement_length": np.where(count > 0, sums["length"] / count, np.nan),
            "agreement_coupling": np.where(count > 0, sums["coupling"] / count, np.nan),
            "agreement_edges": np.linspace(-1.0, 1.0, bins + 1),
            "agreement_mean_cos": cos_sum / max(n * caps, 1),
            "agreement_coupling_cos": np.where(coupling_total > 0, cos_coupling / coupling_total,
                                               np.nan),
            "agreement_image_share": image_counts / max(caps, 1),
            "agreement_image_index": np.arange(kept, dtype=np.int64),
            "images": np.int64(n),
            "agreement_image_cos": image_sums["cos"] / np.float32(max(caps, 1)),
            "agreement_image_cos_coupling": image_sums["cos_coupling"],
            "agreement_image_coupling": image_sums["coupling"],
        }


def summarize(arrays, params: Params | None = None) -> dict:
    """Headline numbers (JSON-ready; NaN becomes None), with their 95% intervals over the
    images (summary["intervals"]): a BCa bootstrap of each image's mean cosine for the mean
    cosines (every image has as many votes), and of the whole ratio for the coupling-weighted
    ones (sum of c_ij * cosine over sum of c_ij, pooled over the images)."""
    mean, weighted = arrays["agreement_mean_cos"], arrays["agreement_coupling_cos"]
    summary = {"images": int(np.asarray(arrays["images"])),
               "agreement_true_mean_cos": finite_number(mean[0]),
               "agreement_wrong_mean_cos": finite_number(mean[1]),
               "agreement_true_coupling_weighted_cos": finite_number(weighted[0]),
               "agreement_wrong_coupling_weighted_cos": finite_number(weighted[1])}
    if "agreement_image_cos" not in arrays or not summary["images"]:
        return summary
    for r, role in enumerate(ROLES):
        if summary[f"agreement_{role}_mean_cos"] is not None:
            iv.attach(summary, f"agreement_{role}_mean_cos",
                      iv.bootstrap_mean(np.asarray(arrays["agreement_image_cos"])[r]))
        if summary[f"agreement_{role}_coupling_weighted_cos"] is not None:
            iv.attach(summary, f"agreement_{role}_coupling_weighted_cos", iv.bootstrap_ratio(
                np.asarray(arrays["agreement_image_cos_coupling"])[r],
                np.asarray(arrays["agreement_image_coupling"])[r]))
    return summary


def variants(description) -> list[Params]:
    return [Params()]


TECHNIQUE = Technique(
    name=NAME,
    citations=cite('sabour2017dynamic'),
    title="Vote agreement",
    layer="class",
    scope="dataset",
    needs=needs,
    applies_to=frozenset({"votes", "class_capsules", "class_vectors", "routing_paths"}),
    params_type=Params,
    variants=variants,
    version=2,
    compute=compute,
    render=lazy("reportgen.techniques.vote_agreement.figures", "render", Params),
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.vote_agreement.figures", "render_trend", Params),
    render_compare=lazy("reportgen.techniques.vote_agreement.figures", "render_compare", Params),
    description="How well the votes agree with the class capsule they build, over the "
                "evaluation set: for the true and the strongest wrong class, the cosine "
                "between the class capsule and every vote into it (histogram with the votes' "
                "mean length and routing weight per bin), "
                "and the same for single images.",
)
