"""What a technique's result must be before anything of it is stored.

`compute` returns a dict {name: array}. Each array must be:
- numeric: a floating array (stored as float32, the dtype every renderer reads), or an integer
  or boolean one (class indices, counts, flags: exact, kept as they are). Complex, object,
  string and time arrays are refused.
- finite: no ±inf anywhere (nor a float64 beyond float32's range, which becomes inf when
  stored), and no NaN unless the technique declares that this array may hold one and why
  (`Technique.may_hold_nan`). reportgen's own techniques that have not declared it yet keep
  the NaN their modules document (a routing map's cell no window reaches, an absent class's
  accuracy); every other technique's undeclared NaN fails it.
- for an input-scope technique, per input: its first (batch) axis has one row per input of the
  batch, since row i is stored as input i's result.

A result that breaks a rule raises ReportgenError naming the technique, the array, what was
expected and what was received; the engine's failing-technique guard (reportgen.engine.step)
then leaves the whole result out, stored nowhere, so the next build computes it again.
"""

from __future__ import annotations

import numpy as np

from reportgen.errors import ReportgenError

_KEPT_KINDS = "iub"        # integer, unsigned, boolean: exact values, stored as they are


def nan_reasons(technique) -> dict[str, str]:
    """{array name or "*": why NaN may appear in it} of `technique`."""
    declared = getattr(technique, "may_hold_nan", None)
    if declared is None:
        return {"*": "as its module documents"} if _own(technique) else {}
    pairs = tuple(declared.items()) if isinstance(declared, dict) else tuple(declared)
    if not all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
               and isinstance(p[1], str) and p[1].strip() for p in pairs):
        raise ReportgenError(f"Technique '{technique.name}': may_hold_nan is malformed.",
                             expected="(array name, reason) pairs with a reason each",
                             received=repr(declared)[:200],
                             fix="declare e.g. may_hold_nan=(('accuracy', 'an absent class'),)")
    return dict(pairs)


def _own(technique) -> bool:
    """One of reportgen's own techniques: its compute is reportgen's code (so also a copy of
    one, `dataclasses.replace`), not a plug-in package's or a test's."""
    module = getattr(technique.compute, "__module__", None) or ""
    return module.split(".")[0] == "reportgen"


def checked_result(technique, arrays, rows: int | None = None) -> dict[str, np.ndarray]:
    """`arrays` as stored (floating arrays as float32) once every rule above holds; `rows`:
    the number of inputs an input-scope result must have one row each for."""
    name = technique.name
    if not isinstance(arrays, dict) or not all(isinstance(k, str) for k in arrays):
        raise ReportgenError(f"Technique '{name}' returned no dict of named arrays.",
                             expected="{name: array}", received=type(arrays).__name__,
                             fix="return a dict of numpy arrays from compute")
    may_hold_nan = nan_reasons(technique)
    out = {}
    for key, value in arrays.items():
        try:
            array = np.asarray(value)
        except Exception as exc:        # a ragged list, an object numpy cannot hold
            raise _error(name, key, "a numeric array", f"{type(value).__name__} ({exc})")
        if array.dtype.kind == "f":
            with np.errstate(over="ignore"):
                array = array.astype(np.float32)
        elif array.dtype.kind not in _KEPT_KINDS:
            raise _error(name, key, "a float32 array (or integers/booleans for indices)",
                         f"dtype {array.dtype} of shape {array.shape}")
        if rows is not None and (array.ndim == 0 or array.shape[0] != rows):
            raise _error(name, key, f"a batch axis of {rows} (one row per input): shape "
                                    f"({rows}, ...)",
                         f"shape {array.shape} ({array.dtype})")
        if array.dtype.kind == "f":
            bad = ~np.isfinite(array)
            if bad.any():
                nan = np.isnan(array)
                inf = int((bad & ~nan).sum())
                if inf or not ("*" in may_hold_nan or key in may_hold_nan):
                    raise _error(name, key, "finite values (NaN only in an array the "
                                            "technique's may_hold_nan names, ±inf nowhere)",
                                 f"{int(nan.sum()):,} NaN and {inf:,} infinite of "
                                 f"{array.size:,} values (shape {array.shape}, {array.dtype})")
        out[key] = array
    return out


def _error(technique: str, array: str, expected: str, received: str) -> ReportgenError:
    return ReportgenError(f"Technique '{technique}' returned an unusable array '{array}'.",
                          expected=expected, received=received,
                          fix=f"correct the technique's compute so '{array}' is as expected")
