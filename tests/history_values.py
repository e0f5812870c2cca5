"""Comparing training-history values between two runs."""

from __future__ import annotations

import pytest


def approx_or_none(value, rel: float = 1e-6, abs: float = 1e-9):
    """`value` as a float tolerance, or itself where a history value is legitimately None (a
    step 0-0 has seen no training batch, so it has no loss): pytest >= 9.2 rejects approx(None)."""
    if value is None:
        return None
    return pytest.approx(value, rel=rel, abs=abs)
