"""LRP vs contrastive LRP over the evaluation images (Gu, Yang & Tresp, ACCV 2018, section 5):
are CLRP's maps of an image's two top classes more different than LRP's, and do the maps point
at the object?

Per model and analysed step, over a stratified subset of the evaluation images (the library:
reportgen.techniques.lrp_clrp.rules / contrastive / localisation):
- discriminativeness = 1 - cos(R(c1), R(c2)) of the maps of each image's two highest-scoring
  classes c1, c2, for LRP, CLRP1 and CLRP2; means with BCa intervals over the images, and the
  paired differences CLRP1 - LRP and CLRP2 - LRP (Gu et al.'s finding is that CLRP's top-2
  maps differ more: decided by that interval excluding 0);
- pointing game (Zhang et al. 2016): a hit when a map's maximum lies on the object of the
  image's TRUE class; on digits "the object" is the digit's pixels, those above `threshold`
  (the channels' mean, images in [0, 1]); hit rates with Wilson-type intervals, for a random
  map, the input gradient (|dS_y/dx|, the largest over the channels: Simonyan et al. 2014), LRP,
  CLRP1 and CLRP2 of the true class;
- patch ablation (Gu et al. 2018, section 5.3 and Table 1): the `patch` x `patch` square at a
  map's maximum replaced by the evaluation set's mean image; the score is the drop of the true
  class's logit (its clean value minus its ablated value), mean with a BCa interval; the random
  map's maximum is a uniformly random position. Gu et al.'s Table 1 ordering random < gradient <
  LRP < CLRP is reported as found, with the paired differences' intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.clrp_evaluation.numbers import (DISC_PAIRS, DISCRIMINATIVE, DROP_PAIRS,
                                                          LABELS, METHODS, disc_key, drop_key,
                                                          pointing_key)
from reportgen.techniques.compute import check_positive, rounded_number
from reportgen.techniques.lrp_clrp.numbers import unsuited


@dataclass(frozen=True)
class Params:
    images: int = 32          # evaluation images (stratified subset)
    patch: int = 9            # side of the ablated square (Gu et al.: 9 x 9)
    threshold: float = 0.5    # a pixel is on the digit when its value exceeds this
    seed: int = 0             # subset and the random map

    def __post_init__(self):
        check_positive("clrp_evaluation", "images", self.images)
        check_positive("clrp_evaluation", "patch", self.patch)
        if not 0.0 <= float(self.threshold) < 1.0:
            from reportgen.errors import ReportgenError

            raise ReportgenError("Invalid option 'threshold' for technique 'clrp_evaluation'.",
                                 expected="a number in [0, 1)", received=repr(self.threshold))


def variants(description) -> list[Params]:
    return [Params()]


def object_masks(images: np.ndarray, threshold: float) -> np.ndarray:
    """(N, H, W) bool: the pixels whose channels' mean exceeds `threshold` (a digit's strokes)."""
    return np.asarray(images, np.float64).mean(axis=-1) > threshold


def gradient_maps(steps, images, targets) -> np.ndarray:
    """(N, H, W) |d S_y / d x|, the largest over the channels (Simonyan et al. 2014)."""
    from reportgen.techniques.lrp_clrp import rules

    return np.abs(rules.input_gradient(steps, images, targets)).max(axis=-1).astype(np.float64)


def method_maps(steps, images, targets, rng) -> dict[str, np.ndarray]:
    """(N, H, W) maps of each image's target class per METHODS."""
    from reportgen.techniques.lrp_clrp import contrastive

    lrp = contrastive.relevance_maps(steps, images, targets)
    return {"random": rng.random(images.shape[:3]), "gradient": gradient_maps(steps, images,
                                                                               targets),
            "lrp": lrp["lrp"], "clrp1": lrp["clrp1"], "clrp2": lrp["clrp2"]}


def compute(eval_batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"discriminativeness" (N, 3) per DISCRIMINATIVE, "pointing" (M, N) 1 hit / 0 miss / NaN
    (no object pixel), "drop" (M, N) the target logit's drop, "pointed" (M, N) 1 where the map
    has a maximum (not constant), per METHODS; "index", "labels", "predicted" (N,), "top2"
    (N, 2), "object_pixels" (N,), "supported" () 1 (0 and NaN where a layer has no LRP
    rule)}."""
    from reportgen.probe.evaluation import stratified_sample
    from reportgen.techniques.lrp_clrp import chain_of, localisation, rules, top2_maps

    params = params or Params()
    index = stratified_sample(eval_batch.labels, params.images, seed=params.seed)
    images = np.asarray(eval_batch.images[index], np.float32)
    labels = np.asarray(eval_batch.labels[index], np.int64)
    n, m = len(index), len(METHODS)
    steps = chain_of(eval_batch.net)
    base = {"index": index.astype(np.int64), "labels": labels,
            "object_pixels": object_masks(images, params.threshold).reshape(n, -1)
            .sum(axis=1).astype(np.int64)}
    if steps is None:
        nan = lambda *shape: np.full(shape, np.nan, np.float32)             # noqa: E731
        return {**base, "discriminativeness": nan(n, len(DISCRIMINATIVE)),
                "pointing": nan(m, n), "drop": nan(m, n), "pointed": nan(m, n),
                "predicted": np.full(n, -1, np.int64), "top2": np.full((n, 2), -1, np.int64),
                "supported": np.float32(0.0)}
    top = top2_maps(steps, images)
    maps = method_maps(steps, images, labels, np.random.default_rng(params.seed))
    masks = object_masks(images, params.threshold)
    fill = np.asarray(eval_batch.images, np.float32).mean(axis=0)        # the mean image
    score = lambda x: rules.logits(steps, x)                               # noqa: E731
    pointing = np.stack([localisation.pointing_game(maps[k], masks) for k in METHODS])
    ablations = [localisation.ablation_drop(score, images, maps[k], labels, fill, params.patch)
                 for k in METHODS]
    return {**base, "discriminativeness": top["discriminativeness"].astype(np.float32),
            "pointing": pointing.astype(np.float32),
            "drop": np.stack([a["drop"] for a in ablations]).astype(np.float32),
            "pointed": np.stack([a["pointed"] for a in ablations]).astype(np.float32),
            "predicted": np.argmax(score(images), axis=1).astype(np.int64),
            "top2": top["classes"].astype(np.int64), "supported": np.float32(1.0)}


def _means(out: dict, keys, columns, pairs, key_of) -> None:
    """BCa means of `columns` {method: (N,)} under key_of(method), and the paired differences
    of `pairs`, from one resampling over the images finite in every column."""
    names = list(columns)
    stacked = np.column_stack([columns[k] for k in names] +
                              [columns[a] - columns[b] for a, b in pairs])
    finite = np.isfinite(stacked).all(axis=1)
    out[keys] = int(finite.sum())
    if not finite.any():
        for k in names:
            out[key_of(k)] = None
        return
    got = iv.bootstrap_means(stacked[finite])
    for k, interval in zip(names, got):
        iv.attach(out, key_of(k), interval)
    for (a, b), interval in zip(pairs, got[len(names):]):
        iv.attach_difference(out, key_of(a), key_of(b), interval)


def summarize(arrays: dict, params: Params | None = None) -> dict:
    """Headline numbers: discriminativeness_{lrp,clrp1,clrp2} (BCa; differences CLRP - LRP),
    pointing_<method> (hit rates, Wilson-type), ablation_drop_<method> (BCa; differences along
    Table 1's order), the ordering found and the verdicts the intervals decide."""
    params = params or Params()
    disc = np.asarray(arrays["discriminativeness"], np.float64)
    out = {"images": int(len(disc)), "patch": int(params.patch),
           "threshold": float(params.threshold),
           "supported": bool(np.asarray(arrays["supported"]).reshape(-1)[0])}
    if not out["supported"] or not len(disc):
        return out
    _means(out, "discriminativeness_images",
           {k: disc[:, i] for i, k in enumerate(DISCRIMINATIVE)}, DISC_PAIRS, disc_key)
    pointing = np.asarray(arrays["pointing"], np.float64)
    for i, k in enumerate(METHODS):
        valid = pointing[i][np.isfinite(pointing[i])]
        out[pointing_key(k)] = rounded_number(valid.mean()) if valid.size else None
        if valid.size:
            iv.attach(out, pointing_key(k), iv.proportion(valid > 0.5))
    out["pointing_images"] = int(np.isfinite(pointing[0]).sum())
    drop = np.asarray(arrays["drop"], np.float64)
    _means(out, "ablation_images", {k: drop[i] for i, k in enumerate(METHODS)}, DROP_PAIRS,
           drop_key)
    out.update(verdicts(out))
    return out


def _excludes_zero(out: dict, a: str, b: str) -> bool | None:
    """True when the paired difference a - b's interval lies above 0, False when it holds 0 or
    lies below, None when not recorded."""
    got = iv.difference_of(out, a, b)
    return None if got is None else bool(got.low > 0)


def verdicts(out: dict) -> dict:
    """What the intervals decide: "clrp_more_discriminative" (CLRP1 - LRP's interval above 0),
    "ablation_order" (the methods by mean drop, smallest first, as found), "table1_order" (the
    means in Gu et al.'s order random < gradient < LRP < CLRP1, CLRP2) and
    "table1_order_separated" (every step of it by a paired interval above 0)."""
    found = {}
    found["clrp_more_discriminative"] = _excludes_zero(out, disc_key("clrp1"), disc_key("lrp"))
    means = {k: out.get(drop_key(k)) for k in METHODS}
    if all(v is not None for v in means.values()):
        order = sorted(METHODS, key=lambda k: means[k])
        found["ablation_order"] = " < ".join(LABELS[k] for k in order)
        found["table1_order"] = bool(means["random"] < means["gradient"] < means["lrp"]
                                     < min(means["clrp1"], means["clrp2"]))
        steps = [_excludes_zero(out, drop_key(a), drop_key(b)) for a, b in DROP_PAIRS]
        found["table1_order_separated"] = bool(all(steps))
    return found


TECHNIQUE = Technique(
    name="clrp_evaluation",
    citations=cite("gu2018clrp", "bach2015lrp", "montavon2017dtd", "zhang2016excitation",
                   "simonyan2014deep"),
    title="LRP vs contrastive LRP (discriminativeness, pointing game, patch ablation)",
    layer="model",
    scope="dataset",
    needs=frozenset(),
    applies_to=frozenset({"conv"}),
    # a CNN only: the reason a capsule network gets, and its costs never counted (unsuited)
    unsuited=unsuited,
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.clrp_evaluation.figures", "render", Params),
    variants=variants,
    summarize=summarize,
    render_trend=lazy("reportgen.techniques.clrp_evaluation.figures", "render_trend", Params),
    render_compare=lazy("reportgen.techniques.clrp_evaluation.figures", "render_compare",
                        Params),
    may_hold_nan=(("discriminativeness", "an all-zero map has no cosine; every value where a "
                                         "layer has no LRP rule"),
                  ("pointing", "an image without a pixel above the threshold"),
                  ("drop", "a network layer without an LRP rule"),
                  ("pointed", "a network layer without an LRP rule")),
    description="Are contrastive LRP's maps more class-discriminative than LRP's, and do they "
                "point at the object? Over the evaluation images (Gu, Yang & Tresp 2018): the "
                "discriminativeness 1 - cosine between the maps of each image's two top "
                "classes for LRP, CLRP1 and CLRP2, with the paired difference CLRP1 - LRP; the "
                "pointing game (Zhang et al. 2016: is the map's maximum on the digit's pixels?) "
                "and the drop of the true class's logit when the 9x9 patch at the map's maximum "
                "is replaced by the mean image, for a random map, the input gradient (Simonyan "
                "et al. 2014), LRP, CLRP1 and CLRP2. Gu et al.'s ordering random < gradient < "
                "LRP < CLRP is reported as found, with 95% intervals.",
)
