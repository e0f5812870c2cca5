"""Pose space: where each evaluation image puts the class-capsule layer, seen on the layer's
first two principal components (PCA: Pearson 1901; Jolliffe 2002) and followed over training.

Each image is one point: all class capsules' poses laid end to end (K classes x pose size
dimensions; EM's 4x4 pose matrices flattened row-major, Hinton et al. 2018). A layer whose
class capsules have no pose (Self-Routing's, Hahn et al. 2019: its class layer exposes only
the K logistic activations) is analysed on what it exposes, its activations, and the caption
says so. The components are fitted anew at every analysed step, on that step's poses of the
same evaluation images. Beside each component's share of the variance: its 95% BCa bootstrap
interval over the images (along the fitted axes, held fixed as the chart draws them:
`numbers.axis_shares` says why) and the isotropic reference 1/D (numbers.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.results import intervals as iv
from reportgen.results.references import cite
from reportgen.techniques.base import Technique, lazy
from reportgen.techniques.compute import require_images
from reportgen.techniques.pose_space import numbers as nb


@dataclass(frozen=True)
class Params:
    """No options: the first two components of the whole class-capsule layer."""


def variants(description) -> list[Params]:
    return [Params()]


def has_poses(description) -> bool:
    """Whether the class capsules have a pose to analyse (else: their activations)."""
    return description.class_vectors == "class_capsules"


def needs(params, description) -> frozenset[str]:
    """The class poses where the class capsules have them; the class scores always (the
    prediction, and Self-Routing's points)."""
    return frozenset({"lengths", *(("class_capsules",) if has_poses(description) else ())})


def compute(evaluation, params: Params | None = None) -> dict[str, np.ndarray]:
    """Aggregates over the evaluation set (numbers.py names them): the projection (N, 2) on
    PC1 and PC2, the axes and the mean that give it, every component's share of the variance,
    the 95% BCa interval of PC1's and PC2's share, true and predicted classes, and the images
    as uint8 thumbnails (the chart's tooltips)."""
    require_images(evaluation, nb.NAME)
    description = evaluation.net.description
    poses = has_poses(description)
    tensors = evaluation.tensors(*sorted(needs(params, description)))
    points = nb.flat_poses(tensors["class_capsules"] if poses else tensors["lengths"])
    mean, components, projection, shares = nb.pca(points)
    basis = nb.rotated(points)
    intervals = iv.bootstrap_weighted(
        len(points), lambda w: nb.axis_shares(basis, w, diagonal=True))
    from reportgen.figures.encode import to_uint8

    return {nb.PROJECTION: projection.astype(np.float32),
            nb.COMPONENTS: components.astype(np.float32),
            nb.MEAN: mean.astype(np.float32),
            nb.SHARES: np.pad(shares, (0, max(0, nb.SHOWN - len(shares)))).astype(np.float32),
            nb.SHARE_LOW: np.array([i.low for i in intervals], np.float32),
            nb.SHARE_HIGH: np.array([i.high for i in intervals], np.float32),
            nb.LABELS: np.asarray(evaluation.labels, np.int64),
            nb.PREDICTED: np.argmax(np.asarray(tensors["lengths"]), axis=1).astype(np.int64),
            nb.THUMBNAILS: to_uint8(np.asarray(evaluation.images, np.float32)),
            nb.DIMENSIONS: np.asarray(points.shape[1], np.int64),
            nb.CLASS_POSES: np.asarray(int(poses), np.int64)}


def summarize(arrays, params: Params | None = None) -> dict:
    """PC1's and PC2's share of the pose variance with their 95% intervals, the isotropic
    reference 1/D, the chance level of an isotropic sample's top share, and the accuracy on
    the same images."""
    shares = np.asarray(arrays[nb.SHARES], np.float64)
    low = np.asarray(arrays[nb.SHARE_LOW], np.float64)
    high = np.asarray(arrays[nb.SHARE_HIGH], np.float64)
    images = int(len(arrays[nb.LABELS]))
    dims = int(np.asarray(arrays[nb.DIMENSIONS]))
    out = {"images": images, "dimensions": dims, "isotropic_share": 1.0 / dims,
           "isotropic_sample_top_share": nb.isotropic_top_share(dims, images),
           "class_poses": bool(int(np.asarray(arrays[nb.CLASS_POSES]))),
           "misclassified": int(np.sum(np.asarray(arrays[nb.LABELS])
                                       != np.asarray(arrays[nb.PREDICTED])))}
    for k in range(nb.SHOWN):
        iv.attach(out, f"pc{k + 1}_share", iv.Interval(float(shares[k]), float(low[k]),
                                                       float(high[k]), images,
                                                       iv.BOOTSTRAP_STATISTIC))
    return out


TECHNIQUE = Technique(
    name=nb.NAME,
    citations=cite("pearson1901lines", "sabour2017dynamic", "hinton2018matrix"),
    title="Pose space",
    layer="model",
    scope="dataset",
    needs=needs,
    # the class capsules' own poses (or, without a pose, their activations): a CNN has none
    applies_to=frozenset({"class_capsules"}),
    params_type=Params,
    variants=variants,
    version=2,
    compute=compute,
    summarize=summarize,
    render=lazy("reportgen.techniques.pose_space.figures", "render_pose_space"),
    render_trend=lazy("reportgen.techniques.pose_space.figures", "render_trend"),
    description="Each evaluation image as a point: the poses of all its class capsules laid "
                "end to end (4x4 pose matrices flattened), projected on their first two "
                "principal components, fitted at each analysed step; points coloured by true "
                "class, misclassified images marked. Hover a point for its image and values; "
                "the step slider follows training; a digit you draw in the draw panel (at the "
                "step it is built for) appears as a marked point, projected on the same axes. "
                "Each component's share of the variance is shown with its 95% BCa bootstrap "
                "interval over the images beside 1/D, the share of any component of an "
                "isotropic cloud of D dimensions. Self-Routing's class capsules have no pose: "
                "its points are the class layer's activations.",
)
