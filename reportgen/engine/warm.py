"""Networks kept between calls of `reportgen.analyze` in one Python session (a notebook).

Building a network and tracing its compiled passes (reportgen.capsnet.compiled) costs more
than the forward pass they then run: kept, a second call on the same model and step pays only
for the pass. A kept network serves every step of its model: loading another step's weights
assigns its variables in place, which retraces nothing. It is rebuilt when its params.toml
changes (the model's digest), and a step's weights are loaded again when the file changed.
The networks of the last MAX_KEPT models are kept.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from reportgen.engine.model import model_digest

MAX_KEPT = 2

_kept: OrderedDict = OrderedDict()      # (folder, digest, fresh) -> [network, loaded weights]
_lock = threading.Lock()


def network(catalog, name: str, step="last"):
    """Model `name` of `catalog` with the weights of `step` ("last", "E-B" or "init": fresh
    weights), built at most once per model in this session."""
    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.training.checkpoints import load_weights

    entry = catalog.get(name)
    chosen = catalog.resolve_step(entry, step)
    key = (str(entry.path.resolve()), model_digest(entry.params), chosen is None)
    with _lock:
        kept = _kept.pop(key, None)
        if kept is None:
            kept = [build_capsnet(entry.params), None]
        _kept[key] = kept                      # the newest last
        while len(_kept) > MAX_KEPT:
            _kept.popitem(last=False)
        net, loaded = kept
        if chosen is not None:
            path = entry.weights_path(chosen)
            identity = (str(path), *_identity(path))
            if identity != loaded:
                kept[1] = None                 # a failed load leaves no weights said loaded
                load_weights(net, path)
                kept[1] = identity
        return net


def forget() -> None:
    """Drop every kept network (their memory, and their compiled passes)."""
    with _lock:
        _kept.clear()


def _identity(path) -> tuple:
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns
