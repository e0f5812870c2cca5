"""Content-addressed cache keys: sha256 over everything that shapes a result.

A key covers the model's parameters and its family's code, the weights file's bytes, the input's
bytes and transform, the technique's name, version, options and code
(reportgen.engine.code_identity), and the versions of the libraries that shape the numbers.
Change any of these and the key changes; change nothing and it stays the same.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

CACHE_FORMAT = 1


def hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj) -> str:
    """JSON with sorted keys and no whitespace: equal objects give equal strings."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_default)


def _default(obj):
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"Cannot hash {type(obj).__name__} into a cache key")


def hash_json(obj) -> str:
    return hash_bytes(canonical_json(obj).encode("utf-8"))


@lru_cache(maxsize=4096)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (memoised on path, size and modification time)."""
    stat = Path(path).stat()
    return _file_digest(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=1)
def library_versions() -> dict[str, str]:
    """Versions of the libraries whose numerics shape cached arrays."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"cache_format": str(CACHE_FORMAT)}
    for package in ("tensorflow-cpu", "tensorflow", "keras", "numpy"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            pass
    return out


def artifact_key(*, model: str, weights: str, input: str, technique: str, version: int,
                 params: dict, code: str) -> str:
    """The key of one technique result for one (model digest, weights, input); `code` is the
    digest of the technique's code (reportgen.engine.code_identity.technique_code)."""
    return hash_json({"model": model, "weights": weights, "input": input,
                      "technique": technique, "version": version, "params": params,
                      "code": code, "libraries": library_versions()})
