"""LRP and contrastive LRP (Gu, Yang & Tresp, ACCV 2018, "Understanding individual decisions of
CNNs via contrastive backpropagation") for the CNN baselines: per input, the LRP map of each of
its two highest-scoring classes beside their CLRP1 and CLRP2 maps, and how different the two
classes' maps are.

The library: rules.py (the LRP rules: z^beta on the first layer, z+ above, winner-takes-all max
pooling), contrastive.py (CLRP1: the dual is the other classes, S_y / (K - 1) each; CLRP2: the
class's last-layer weights negated; CLRP = max(0, R_y - R_dual), Gu et al. section 4) and
localisation.py (pointing game, patch ablation; used by reportgen.techniques.clrp_evaluation).

Per image, for its top-2 classes c1, c2 (by logit) and each variant v in (LRP, CLRP1, CLRP2),
the pixel map R_v(c) (relevance summed over the channels) and
    discriminativeness_v = 1 - cos(R_v(c1), R_v(c2))
(0: the two classes' maps are the same up to scale, as Gu et al. find LRP's; NaN where a map
is all zero). The relevance explained is the logit S_c, the layer the description names as
its head (`Head.layer`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.lrp_clrp.numbers import VARIANTS
from reportgen.techniques.lrp_clrp.numbers import unsuited

TOP = 2        # the two highest-scoring classes


@dataclass(frozen=True)
class Params:
    pass


def variants(description) -> list[Params]:
    return [Params()]


def chain_of(net):
    """The LRP chain from the image to the head's logits (rules.layer_chain), or None when a
    layer of it has no rule (rules.LRPUnsupported)."""
    from reportgen.techniques.lrp_clrp import rules

    try:
        return rules.layer_chain(net.model, net.description.head.layer)
    except rules.LRPUnsupported:
        return None


def top2_maps(steps, images) -> dict[str, np.ndarray]:
    """{"maps": (B, 2, 3, H, W) float64 per image, top-2 class and VARIANTS; "classes" (B, 2);
    "scores" (B, 2) their logits; "discriminativeness" (B, 3) 1 - cosine of the two classes'
    maps per variant}."""
    from reportgen.techniques.lrp_clrp import contrastive, rules

    images = np.asarray(images, np.float32)
    logits = rules.logits(steps, images)
    classes = contrastive.top_two(logits)
    per_class = [contrastive.relevance_maps(steps, images, classes[:, k]) for k in range(TOP)]
    maps = np.stack([np.stack([got[v] for v in VARIANTS], axis=1) for got in per_class], axis=1)
    disc = np.stack([contrastive.discriminativeness(maps[:, 0, v], maps[:, 1, v])
                     for v in range(len(VARIANTS))], axis=1)
    return {"maps": maps, "classes": classes,
            "scores": np.take_along_axis(logits, classes, axis=1), "discriminativeness": disc}


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"maps" (B, 2, 3, H, W), "classes" (B, 2) int64, "scores" (B, 2) logits,
    "discriminativeness" (B, 3), "supported" (B,) 1 (0 and NaN maps where the network has a
    layer without an LRP rule)}, all float32 but the classes."""
    images = np.asarray(batch["images"], np.float32)
    n, height, width = images.shape[:3]
    steps = chain_of(batch.net)
    if steps is None:
        nan = lambda *shape: np.full(shape, np.nan, np.float32)             # noqa: E731
        return {"maps": nan(n, TOP, len(VARIANTS), height, width),
                "classes": np.full((n, TOP), -1, np.int64), "scores": nan(n, TOP),
                "discriminativeness": nan(n, len(VARIANTS)),
                "supported": np.zeros(n, np.float32)}
    got = top2_maps(steps, images)
    return {"maps": got["maps"].astype(np.float32), "classes": got["classes"].astype(np.int64),
            "scores": got["scores"].astype(np.float32),
            "discriminativeness": got["discriminativeness"].astype(np.float32),
            "supported": np.ones(n, np.float32)}


TECHNIQUE = Technique(
    name="lrp_clrp",
    citations=cite("gu2018clrp", "bach2015lrp", "montavon2017dtd"),
    title="LRP and contrastive LRP (top-2 classes)",
    layer="model",
    scope="input",
    needs=frozenset({"images"}),
    applies_to=frozenset({"conv"}),
    # a CNN only: the reason a capsule network gets, and its costs never counted (unsuited)
    unsuited=unsuited,
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.lrp_clrp.figures", "render_lrp_clrp"),
    variants=variants,
    # six relevance propagations through the network per image (2 classes x LRP and the two
    # duals), measured on 2 shared cores: 0.83 s per 16 inputs on a 0.2 M-parameter 28x28 CNN,
    # 1.4 s per input on Gu's 8.2 M-parameter ConvNet-R; so only where the dataset analyses are
    analysed_steps_only=True,
    may_hold_nan=(("maps", "a network layer without an LRP rule (the figure says so)"),
                  ("scores", "a network layer without an LRP rule"),
                  ("discriminativeness", "an all-zero map (no cosine), or a layer without an "
                                         "LRP rule")),
    description="Which pixels speak for each of the image's two highest-scoring classes, by "
                "layer-wise relevance propagation (LRP: Bach et al. 2015; z^beta on the first "
                "layer, z+ above, Montavon et al. 2017) of the class's logit, beside contrastive "
                "LRP (Gu, Yang & Tresp 2018): CLRP1 subtracts the relevance of all the other "
                "classes, CLRP2 that of the class's negated weights, keeping what only the class "
                "has. Gu et al. found LRP's maps of different classes nearly the same; the "
                "discriminativeness 1 - cosine between the two classes' maps says how different "
                "they are, plain vs contrastive.",
)
