"""Parameters of the model families beside Sabour et al. 2017's CapsNet (`family` in
params.toml), after Gu 2022 (dissertation, Ch.4-5):

- "capsnet" (default): the CapsNet of `[[conv]]`, `[primary]`, `[class_caps]`, `[decoder]`. Gu's
  No-R (`class_caps.routing = "none"`: uniform coupling coefficients) and Aff-CapsNet
  (`class_caps.weight_sharing = "all"`: one transformation matrix per class, shared by all
  primary capsules) are settings of it.
- "gracapsnet": GraCapsNet (Gu, Wu & Tresp, AAAI 2021): routing replaced by multi-head graph
  pooling over the primary-capsule grid; `[graph]` holds its settings.
- "cnn": the CNN baselines of Gu's affine benchmark and of his component study; `[cnn]` holds
  the head, the conv layers are `[[conv]]`.
- "em": matrix capsules with EM routing (Hinton, Sabour & Frosst 2018); `[em]` holds its
  settings (reportgen.settings.em_params).
"""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("capsnet", "gracapsnet", "cnn", "em")
ROUTINGS = ("dynamic", "none")
WEIGHT_SHARING = ("none", "type", "all")
# The CNN heads (Gu 2022, Ch.5):
#   avg:   global average pooling of the last conv layer + FC(classes), softmax cross-entropy
#   fc:    flatten + FC(dense...) + FC(classes), softmax cross-entropy
#   r:     flatten + FC(classes*dims) + FC(classes); reconstruction from all classes*dims units
#   cr:    flatten + FC(classes*dims) seen as classes x dims; class score = sigmoid(sum of the
#          class's dims); reconstruction from the true (at evaluation: the top) class's dims only
#   cr_sf: cr with the squash: the last conv's channels squashed as vectors of `vector_dims`,
#          FC(classes*dims) without bias, each class's dims squashed; score = the length
#          (= a CapsNet with uniform coupling coefficients, No-R)
CNN_HEADS = ("avg", "fc", "r", "cr", "cr_sf")


@dataclass(frozen=True)
class GraphParams:
    """GraCapsNet's graph pooling: the Gaussian adjacency A_pq = exp(-|p - q|^2 / (2 sigma^2))
    over grid positions p, q (in grid cells). Gu, Wu & Tresp do not publish sigma."""

    sigma: float = 2.0


@dataclass(frozen=True)
class CNNParams:
    head: str = "avg"
    dense: tuple[int, ...] = ()       # hidden FC units of the "fc" head (Gu: [328, 192])
    vector_dims: int = 8              # "cr_sf": the squashed vectors' size (primary capsules)
