"""onnxruntime-web for the site, as one classic script a page opened from file:// can load.

Browsers block fetch() and module scripts of local files, so the runtime travels as data:
`assets/vendor/onnxruntime-web.js` sets window.reportgenOrt = {version, module, wasm}, where
`module` is the text of onnxruntime-web's ES-module bundle (ort.wasm.bundle.min.mjs: the API
and the WebAssembly glue in one file; the page imports it from a blob: URL) and `wasm` the
gzip-compressed, base64-encoded WebAssembly binary (ort-wasm-simd-threaded.wasm, 14.8 MB raw,
3.8 MB gzipped for 1.31; the page inflates it with DecompressionStream and hands it to
ort.env.wasm.wasmBinary, so nothing is fetched). The draw panel loads this script only when the
reader opens it.

The package comes from the npm registry at install time (`npm ci` in reportgen's folder reads
package.json and package-lock.json); without it the site is built without the runtime and the
panel says how to add it. No TensorFlow here.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

PACKAGE = "onnxruntime-web"
URL = "assets/vendor/onnxruntime-web.js"      # inside the site's docs folder
BUNDLE = "ort.wasm.bundle.min.mjs"
WASM = "ort-wasm-simd-threaded.wasm"


def package_dir() -> Path:
    """node_modules/onnxruntime-web of the source checkout reportgen runs from."""
    return Path(__file__).resolve().parents[3] / "node_modules" / PACKAGE


def installed_version() -> str | None:
    """The installed onnxruntime-web's version, or None when `npm ci` has not run."""
    folder = package_dir()
    try:
        version = json.loads((folder / "package.json").read_text("utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return None
    dist = folder / "dist"
    return version if (dist / BUNDLE).is_file() and (dist / WASM).is_file() else None


def missing_reason() -> str:
    """The one line a page shows when the runtime is not installed."""
    return (f"the in-browser runtime ({PACKAGE}) was not installed with this copy of "
            f"reportgen: run `npm ci` in {package_dir().parents[1]}, then build again")


_CACHE: dict[str, str] = {}


def runtime_script() -> str | None:
    """The classic script defining window.reportgenOrt, or None without the package."""
    version = installed_version()
    if version is None:
        return None
    if version not in _CACHE:
        dist = package_dir() / "dist"
        module = (dist / BUNDLE).read_text("utf-8")
        # mtime=0: the same bytes every build (the site's files are compared between builds)
        wasm = gzip.compress((dist / WASM).read_bytes(), compresslevel=6, mtime=0)
        body = json.dumps({"version": version, "module": module,
                           "wasm": base64.b64encode(wasm).decode("ascii")})
        _CACHE[version] = (f"/* {PACKAGE} {version} (MIT, Microsoft), from the npm registry; "
                           "bundled by reportgen (reportgen/techniques/draw_panel/runtime.py) */\n"
                           f"window.reportgenOrt = {body.replace('</', '<' + chr(92) + '/')};\n")
    return _CACHE[version]
