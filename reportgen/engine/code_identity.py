"""What identifies the code of a model family or a technique in the artifact store's keys.

A result is keyed by the code that made it, so that editing a family or a technique, or
installing another version of the package declaring it, recomputes what that code touches and
nothing else. The code of a family or technique is the distribution declaring it (its plug-in
record's name and version; "registered in code" for one added with `register`) and the sha256
of the source of the modules that are its own:

- a family (`family_code`, in every model's digest, reportgen.engine.model.model_digest): the
  module declaring it, the modules of its `describe` and `build`, and `Family.modules`;
- a technique's arrays (`technique_code`, in reportgen.cache.keys.artifact_key): the module
  declaring it and that of its `compute`;
- a technique's figures (`drawing_code`, in the figures' keys, reportgen.pages.assemble): the
  modules of its renderers, `summarize`, `numbers` and `data` (a `lazy` one's: the module it
  imports) and, for a technique declared in a package, the package's `numbers` module
  (reportgen/techniques/<name>/numbers.py: the array orders, summary keys, labels and measures
  its figures read). A drawing change redraws and keeps the arrays.

What those modules import is not covered: reportgen's shared layers and drawing helpers are
covered by NUMERICS_VERSION, `Technique.version` and FIGURES_VERSION. reportgen's own families
and techniques follow the same rule (package "reportgen").

A module's source is read once per loaded module and process: a process keys its results by
the code it imported, not by a file edited under it; a module imported again
(importlib.reload) is read again. Nothing is imported to find a module's file.
"""

from __future__ import annotations

import importlib.util
import sys
import threading

from reportgen.cache.keys import hash_bytes, hash_json

REGISTERED_IN_CODE = "registered in code"
NUMBERS = "numbers"     # a technique package's module of what its figures read
_NO_SOURCE = "no source"

# module name -> (its spec when it was read: None when it was not imported, its digest)
_digests: dict[str, tuple[object, str]] = {}
_lock = threading.Lock()


def module_digest(name: str) -> str:
    """sha256 of the source bytes of module `name` (its file as found, imported or not), or
    "no source" when it has no file to read."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None) if module is not None else None
    held = _digests.get(name)
    if held is not None and held[0] is spec:
        return held[1]
    source = _source(name, module, spec if module is not None else _find(name))
    digest = _NO_SOURCE if source is None else hash_bytes(source)
    with _lock:
        _digests[name] = (spec, digest)
    return digest


def forget() -> None:
    """Read every module's source again at its next digest (tests that edit a module)."""
    with _lock:
        _digests.clear()


def family_code(family, origin) -> str:
    """The digest of a Family's code: its package, version and modules' sources. `origin`:
    its plug-in record (reportgen.settings.families.origin), None when registered in code."""
    modules = [_declaring(origin), _module_of(family.describe), _module_of(family.build),
               *family.modules]
    return _code(origin, modules)


def technique_code(technique, origin) -> str:
    """The digest of the code computing a Technique's arrays. `origin`: its plug-in record
    (reportgen.techniques.origin), None when registered in code."""
    return _code(origin, [_declaring(origin), _module_of(technique.compute)])


def drawing_code(technique, origin) -> str:
    """The digest of the code drawing a Technique's figures and what its panels hand on."""
    return _code(origin, [
        *(_module_of(getattr(technique, key)) for key in
          ("render", "render_trend", "render_compare", "summarize", "numbers", "data")),
        _package_numbers(technique, origin)])


def describe_origin(origin) -> dict[str, str]:
    """{"package", "version"} of a plug-in record, or who else registered it."""
    if origin is None:
        return {"package": REGISTERED_IN_CODE, "version": ""}
    return {"package": origin.package, "version": origin.version}


def _code(origin, modules) -> str:
    names = sorted({m for m in modules if m})
    return hash_json({**describe_origin(origin),
                      "modules": {name: module_digest(name) for name in names}})


def _declaring(origin) -> str | None:
    return origin.target.partition(":")[0] if origin is not None else None


def _package_numbers(technique, origin) -> str | None:
    """`<package>.numbers` when the technique is declared in a package (its `__init__`) that
    has a numbers module, else None."""
    package = _declaring(origin) or _module_of(technique.compute)
    if not package:
        return None
    module = sys.modules.get(package)
    if module is not None:
        is_package = hasattr(module, "__path__")
    else:
        spec = _find(package)
        is_package = bool(getattr(spec, "submodule_search_locations", None))
    if not is_package:
        return None
    name = f"{package}.{NUMBERS}"
    return name if module_digest(name) != _NO_SOURCE else None


def _module_of(function) -> str | None:
    """The module a function's code lives in: a `lazy` renderer's is the one it imports."""
    if function is None:
        return None
    lazy = getattr(function, "lazy_module", None)
    return lazy if isinstance(lazy, str) else getattr(function, "__module__", None)


def _source(name: str, module, spec) -> bytes | None:
    path = getattr(spec, "origin", None) if spec is not None and spec.has_location else None
    path = path or getattr(module, "__file__", None)
    if path:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            pass
    get_source = getattr(getattr(spec, "loader", None), "get_source", None)
    try:
        text = get_source(name) if get_source is not None else None
    except (ImportError, OSError):
        text = None
    return text.encode("utf-8") if isinstance(text, str) else None


def _find(name: str):
    """The spec of module `name`, importing nothing (a submodule of a package not imported
    yet is looked up in the package's folders by the import system's finders)."""
    parent = name.rpartition(".")[0]
    if not parent or parent in sys.modules:
        try:
            return importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
    locations = getattr(_find(parent), "submodule_search_locations", None)
    if not locations:
        return None
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(name, list(locations))
        except (ImportError, ValueError, TypeError):
            continue
        if spec is not None:
            return spec
    return None
