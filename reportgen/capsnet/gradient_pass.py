"""Whether the pass being traced is one no gradient is taken of (reportgen.capsnet.compiled's
forward passes): a layer may then leave out work that only shapes gradients and gives the same
values (EM routing's E-step term that is exactly 0, reportgen.families.em.routing). One flag
per thread, set while such a pass is traced."""

from __future__ import annotations

import threading
from contextlib import contextmanager

_PASS = threading.local()


@contextmanager
def no_gradient_pass():
    """While a pass that no gradient is taken of is traced: `gradient_taken()` is False."""
    before = getattr(_PASS, "no_gradient", False)
    _PASS.no_gradient = True
    try:
        yield
    finally:
        _PASS.no_gradient = before


def gradient_taken() -> bool:
    """False while a pass traced under `no_gradient_pass` is; True otherwise."""
    return not getattr(_PASS, "no_gradient", False)
