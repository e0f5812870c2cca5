"""Import TensorFlow without the C++ start-up lines it prints straight to file descriptor 2.

TensorFlow 2.21 logs "All log messages before absl::InitializeLog()..." and a oneDNN notice at
load time, before TF_CPP_MIN_LOG_LEVEL takes effect; they bury reportgen's own first lines.
Only the import is silenced; a failing import still raises its Python exception.
"""

from __future__ import annotations

import os
import sys


def import_tensorflow_quietly() -> None:
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
