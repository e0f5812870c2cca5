"""Capsule networks: descriptions (no TensorFlow), Keras layers, routing.

`reportgen.capsnet.em_routing` (Hinton, Sabour & Frosst 2018) and `self_routing` (Hahn, Pyeon &
Kim 2019; NumPy in and out) are importable from here for notebooks; they are loaded on first
use, so `import reportgen.capsnet.description` stays free of TensorFlow.
"""

from __future__ import annotations

__all__ = ["em_routing", "self_routing"]


def __getattr__(name: str):
    if name == "em_routing":
        from reportgen.capsnet.em_routing import em_routing

        return em_routing
    if name == "self_routing":
        from reportgen.capsnet.self_routing_capsnet import self_routing

        return self_routing
    raise AttributeError(f"module 'reportgen.capsnet' has no attribute {name!r}")
