"""The artifact store: arrays (.npz, no pickle) + a JSON sidecar, and rendered files.

Layout: ROOT/arrays/ab/<key>/{arrays.npz, meta.json} and ROOT/figures/ab/<key>/{files, meta.json}.
An entry is written in a private temporary folder and renamed into place in one step, so a
killed build never leaves a half-written entry and two builds sharing a store cannot corrupt
it (the second rename finds the entry there and drops its own copy).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

DEFAULT_CACHE_DIR = Path(".reportgen/cache")


class ArtifactStore:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else Path(
            os.environ.get("REPORTGEN_CACHE", DEFAULT_CACHE_DIR))

    # -- paths ------------------------------------------------------------------------------
    def _dir(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def _commit(self, kind: str, key: str, fill) -> Path:
        final = self._dir(kind, key)
        if final.is_dir():
            return final
        tmp_root = self.root / "tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{key[:12]}-", dir=tmp_root))
        try:
            fill(tmp)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():  # a real failure, not a concurrent writer's win
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return final

    # -- arrays -----------------------------------------------------------------------------
    def has_arrays(self, key: str) -> bool:
        return (self._dir("arrays", key) / "meta.json").is_file()

    def put_arrays(self, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
        def fill(tmp: Path) -> None:
            np.savez(tmp / "arrays.npz", **{k: np.asarray(v) for k, v in arrays.items()})
            (tmp / "meta.json").write_text(json.dumps({**meta, "created": time.time()},
                                                      indent=1, sort_keys=True))
        self._commit("arrays", key, fill)

    def get_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        path = self._dir("arrays", key)
        if not (path / "meta.json").is_file():
            return None
        try:
            with np.load(path / "arrays.npz", allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError, EOFError):
            shutil.rmtree(path, ignore_errors=True)   # damaged by hand: recompute
            return None

    # -- figures ----------------------------------------------------------------------------
    def get_figures(self, key: str) -> list[dict] | None:
        """[{name, kind, caption, width, height, path}] or None when not rendered yet."""
        path = self._dir("figures", key)
        meta = path / "meta.json"
        if not meta.is_file():
            return None
        figures = json.loads(meta.read_text())["figures"]
        for fig in figures:
            fig["path"] = str(path / fig["name"])
            if not Path(fig["path"]).is_file():
                return None
        return figures

    def put_figures(self, key: str, figures) -> list[dict]:
        def fill(tmp: Path) -> None:
            listing = []
            for fig in figures:
                (tmp / fig.name).write_bytes(fig.data)
                listing.append({"name": fig.name, "kind": fig.kind, "caption": fig.caption,
                                "width": fig.width, "height": fig.height})
            (tmp / "meta.json").write_text(json.dumps({"figures": listing}, indent=1))
        self._commit("figures", key, fill)
        return self.get_figures(key)

    # -- maintenance ------------------------------------------------------------------------
    def info(self) -> dict:
        out = {"root": str(self.root)}
        for kind in ("arrays", "figures"):
            entries, size = 0, 0
            base = self.root / kind
            if base.is_dir():
                for meta in base.glob("*/*/meta.json"):
                    entries += 1
                    size += sum(f.stat().st_size for f in meta.parent.iterdir())
            out[kind] = {"entries": entries, "bytes": size}
        return out

    def clear(self) -> int:
        """Remove the whole store; returns the number of bytes freed."""
        info = self.info()
        freed = info["arrays"]["bytes"] + info["figures"]["bytes"]
        if self.root.is_dir():
            shutil.rmtree(self.root)
        return freed
