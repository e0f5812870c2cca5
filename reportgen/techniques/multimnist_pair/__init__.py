"""MultiMNIST segmentation of one input (Sabour, Frosst & Hinton 2017, section 6 and Fig. 5):
the decoder run once per class capsule, every other class capsule masked, so that the figure can
draw the reconstructions of the input's two true classes in two colours over each other, its
top-2 prediction, and for a wrong pair the reconstructions of the two predicted classes.

Which classes are true is the input's (a MultiMNIST test pair picked with `--images`), known to
the drawing, not to the computation: the arrays hold every class's reconstruction, so the same
result serves whatever the input is labelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import decode

NAME = "multimnist_pair"


@dataclass(frozen=True)
class Params:
    pass


def compute(batch, params: Params | None = None) -> dict[str, np.ndarray]:
    """{"lengths": (B, K), "reconstructions": (B, K, H, W, C)}: the class scores, and the
    decoder's image from each class capsule k alone (the others zero, as the Mask layer)."""
    capsules = np.asarray(batch["class_capsules"], np.float32)             # (B, K, D)
    b, k, d = capsules.shape
    one_class = np.eye(k, dtype=np.float32)[None, :, :, None] * capsules[:, None]   # (B, K, K, D)
    return {"lengths": np.asarray(batch["lengths"], np.float32),
            "reconstructions": decode(batch.net, one_class.reshape(b, k, k * d))}


TECHNIQUE = Technique(
    name=NAME,
    citations=cite('sabour2017dynamic'),
    title="MultiMNIST: the two digits pulled apart",
    layer="decoder",
    scope="input",
    needs=frozenset({"class_capsules", "lengths"}),
    applies_to=frozenset({"decoder", "class_capsules", "vector_capsules"}),
    params_type=Params,
    version=1,
    compute=compute,
    render=lazy("reportgen.techniques.multimnist_pair.figures", "render_input"),
    labels=(2,),
    description="Two overlapping digits pulled apart (Sabour et al. 2017, Fig. 5): the decoder "
                "reconstructs the input once from each true class's capsule, the other class "
                "capsules masked, and the two reconstructions are drawn over each other in blue "
                "and orange, with the top-2 prediction; for a wrong pair, the reconstructions "
                "of the two predicted classes beside them.",
)
