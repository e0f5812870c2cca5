"""Explanation fidelity results: the methods' order and labels, and the measures of the
deletion / insertion curves (AOPC: Samek et al. 2017; areas: Petsiuk et al. 2018)."""

from __future__ import annotations

import numpy as np

from reportgen.results.technique_numbers import METHOD_LABELS

# A model has the methods of its own explanation (reportgen.techniques.explanation_fidelity.
# builtin_explanation): RPV through its routing weights, or the explanation map its family
# builds in (GraCapsNet's attention E); the others' curves are NaN (and their summary numbers
# None).
METHODS = ("rpv_modified", "rpv_original", "gradcam_pp", "random", "builtin")
# METHOD_LABELS: in reportgen/results/technique_numbers.py (the findings read them too).


def builtin_method(arrays) -> str:
    """The explanation the agreement of a result measures (RPV modified unless recorded)."""
    index = arrays.get("builtin_method") if hasattr(arrays, "get") else None
    return METHODS[int(index)] if index is not None else "rpv_modified"


def own_methods(curves) -> tuple[str, ...]:
    """The METHODS a result has: those whose curves (methods, N, P+1) are finite; a model's
    other methods are NaN (RPV of GraCapsNet, its attention of a CapsNet)."""
    curves = np.asarray(curves, np.float64)
    return tuple(m for i, m in enumerate(METHODS)
                 if i < len(curves) and curves[i].size and np.isfinite(curves[i]).all())


def summarized_methods(summaries) -> tuple[str, ...]:
    """The METHODS with a number in any of `summaries` (summarize's dicts), in METHODS order:
    what a trend or comparison of them shows (a method no model has is left out)."""
    summaries = list(summaries)
    return tuple(m for m in METHODS
                 if any(s.get(f"deletion_aopc_{m}") is not None for s in summaries))


def deletion_aopc(curves: np.ndarray) -> np.ndarray:
    """(N,) AOPC of deletion curves (N, P+1): mean over k = 0 … P of f(x_0) - f(x_k)."""
    curves = np.asarray(curves, np.float64)
    return np.mean(curves[:, :1] - curves, axis=1)


def area_under_curve(curves: np.ndarray) -> np.ndarray:
    """(N,) trapezoid area under curves (N, P+1) over the fraction of patches k/P in [0, 1]."""
    curves = np.asarray(curves, np.float64)
    steps = curves.shape[1] - 1
    if steps < 1:
        return curves[:, 0].copy()
    return (curves[:, 1:] + curves[:, :-1]).sum(axis=1) / (2.0 * steps)
