"""What the pose-space chart's computation and its drawing both read: the principal component
analysis of the class capsules' poses (Pearson 1901; Jolliffe 2002, ch. 1-3), its array names
and the isotropic reference.

PCA of n points x_i in R^D: centre them (X - mean), take the SVD X_c = U S V^T; the principal
axes are the rows of V^T, the i-th image's coordinates x_c,i V, and the variance along axis k
is lambda_k = s_k^2 / n, so PC k explains lambda_k / sum_j lambda_j of the total (the
"explained variance ratio"). An axis's sign is arbitrary: each is turned so that its loading
of largest magnitude is positive (the first in dimension order among equals), which keeps the
picture from flipping between training steps when the axes barely move.

Reference: a cloud with the same variance in every direction (isotropic) spreads it evenly, so
each of its D components explains 1/D (D = the pose dimensions analysed, all class capsules'
poses laid end to end). A share above 1/D says the poses vary more along that axis than a
shapeless cloud would; the interval says whether the evaluation images can tell.
"""

from __future__ import annotations

import numpy as np

NAME = "pose_space"
SHOWN = 2                       # components drawn (the chart's x and y)
THUMBNAIL_DTYPE = np.uint8      # the evaluation images as stored, 0..255

# array names of a result
PROJECTION = "projection"       # (N, 2) coordinates of each image on PC1, PC2
COMPONENTS = "components"       # (2, D) the principal axes (unit rows), sign-aligned
MEAN = "mean"                   # (D,) the mean pose, subtracted before projecting
SHARES = "shares"               # (r,) every component's share of the variance, largest first
SHARE_LOW = "share_low"         # (2,) the 95% BCa interval of PC1's and PC2's share
SHARE_HIGH = "share_high"
LABELS = "labels"               # (N,) true class
PREDICTED = "predicted"         # (N,) predicted class
THUMBNAILS = "thumbnails"       # (N, H, W, C) uint8 images
DIMENSIONS = "dimensions"       # () D, the pose dimensions
CLASS_POSES = "class_poses"     # () 1 when the points are class-capsule poses, 0 when the
                                #    class layer's activations (its capsules have no pose)


def flat_poses(poses) -> np.ndarray:
    """(N, classes, pose) poses — vectors, or 4x4 matrices already flattened row-major by the
    probe — as (N, classes * pose) float64: each image's class-capsule layer as one point."""
    poses = np.asarray(poses, np.float64)
    return poses.reshape(len(poses), -1)


def align_signs(components: np.ndarray) -> np.ndarray:
    """Each row turned so that its entry of largest magnitude is positive."""
    components = np.asarray(components, np.float64)
    if components.size == 0:
        return components
    top = np.argmax(np.abs(components), axis=1)
    signs = np.sign(components[np.arange(len(components)), top])
    return components * np.where(signs == 0, 1.0, signs)[:, None]


def pca(points: np.ndarray, count: int = SHOWN):
    """(mean (D,), components (count, D), projection (N, count), shares (r,)) of `points`
    (N, D): the first `count` principal axes (zero rows beyond the data's rank), the points'
    coordinates on them, and every component's share of the total variance (all 0 for points
    that do not vary)."""
    points = np.asarray(points, np.float64)
    mean = points.mean(0)
    centred = points - mean
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    variance = singular ** 2 / len(points)
    total = variance.sum()
    shares = variance / total if total > 0 else np.zeros_like(variance)
    components = np.zeros((count, points.shape[1]))
    rank = int(np.sum(singular > singular[:1].max(initial=0.0) * 1e-12)) if total > 0 else 0
    keep = min(count, rank)
    components[:keep] = align_signs(vt[:keep])
    return mean, components, centred @ components.T, shares


def project(points, mean, components) -> np.ndarray:
    """New points (M, D) on stored axes: (points - mean) components^T (a drawn digit's)."""
    return (np.asarray(points, np.float64) - np.asarray(mean, np.float64)) @ \
        np.asarray(components, np.float64).T


def rotated(points: np.ndarray) -> np.ndarray:
    """(N, r) the centred points on their own principal axes (U S of the SVD, r the rank):
    the same cloud, with diagonal covariance."""
    points = np.asarray(points, np.float64)
    u, singular, _ = np.linalg.svd(points - points.mean(0), full_matrices=False)
    keep = singular > singular[:1].max(initial=0.0) * 1e-12
    return u[:, keep] * singular[keep]


def axis_shares(points: np.ndarray, weights: np.ndarray, count: int = SHOWN,
                diagonal: bool = False) -> np.ndarray:
    """(R, count) the share of variance along the first `count` principal axes of `points`
    (N, D) — the chart's axes, held fixed — under each row of image weights (R, N) (rows >= 0
    summing to 1: a bootstrap resample's counts / N): v_k^T C_w v_k / tr C_w with
    C_w = sum_i w_i (x_i - m_w)(x_i - m_w)^T, m_w = sum_i w_i x_i. At uniform weights it is
    each component's share. `rotated(points)` (`diagonal`) may be passed instead, so that the
    SVD is taken once: there the axes are the coordinate axes.

    Why the axes are held fixed rather than refitted on every resample: the top eigenvalue of
    a resample is biased upwards (a resample repeats images, which concentrates variance), so
    intervals of refitted shares can lie wholly above the share they are about (seen on
    MNIST_Demo's 160 pose dimensions at 50 images; Beran & Srivastava 1985 on why the
    bootstrap of leading eigenvalues fails). Along fixed axes the share is a ratio of weighted
    means, for which the BCa interval is sound (Efron & Tibshirani 1993, ch. 14)."""
    basis = np.asarray(points, np.float64)
    if not diagonal:
        basis = rotated(basis)
    weights = np.asarray(weights, np.float64)
    if basis.shape[1] == 0:
        return np.zeros((len(weights), count))
    mean = weights @ basis                                      # (R, r)
    total = weights @ np.sum(basis ** 2, 1) - np.sum(mean ** 2, 1)
    lead = basis[:, :count]
    along = weights @ lead ** 2 - mean[:, :count] ** 2            # (R, <= count)
    shares = along / np.where(total > 0, total, np.inf)[:, None]
    if shares.shape[1] < count:
        shares = np.pad(shares, ((0, 0), (0, count - shares.shape[1])))
    return shares


def isotropic_top_share(dims: int, images: int) -> float:
    """About the largest share an isotropic cloud's SAMPLE of `images` points shows by chance
    in `dims` dimensions: the Marchenko-Pastur upper edge (1 + sqrt(D/N))^2 over the trace D
    (Marchenko & Pastur 1967), capped at 1 — the sample's top component exceeds 1/D even when
    no direction is preferred, so a share should be read against this as well."""
    if dims <= 0 or images <= 0:
        return 1.0
    return float(min(1.0, (1 + np.sqrt(dims / images)) ** 2 / dims))
