"""Which models a built site holds, and which of them the next build keeps.

A build of some models never silently drops a model the site showed: the site's marker
(reportgen.pages.site_files) records, per model, the steps it shows and a fingerprint of
the artifact-store keys of everything its pages are made from (`record`). The next build
keeps every recorded model it was not asked to build (`SiteModels`): each kept model goes
through the build as usual, at its recorded steps, and so is drawn from the stored results
(content-addressed keys, reportgen.engine.step: nothing is recomputed while its weights, its
parameters and reportgen's code are unchanged). A kept model whose fingerprint is unchanged but
whose results are gone from the store (the cache was cleared) is left out with one line that
names it and the command that builds it again (`cleared_line`), without failing the others.

Only `--drop-model NAME[,NAME]` (those models) or `--only` (every model `--models` does not
match) removes a model from the site; a name the site does not show is refused before
anything is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from reportgen.errors import ReportgenError


@dataclass
class SiteModels:
    """The models of the next site: built now (`--models`), kept from the previous build
    ({name: its record}), removed as asked, and recorded ones no longer in the models folder."""

    built: list[str] = field(default_factory=list)
    kept: dict[str, dict] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    unrecorded: bool = False        # an older reportgen's site: which models it held is unknown
    entries: dict = field(default_factory=dict)     # kept name -> its ModelEntry (the build's)

    def steps_of(self, name: str) -> list[str] | None:
        """The steps the site shows of kept model `name` (None: not a kept model)."""
        record = self.kept.get(name)
        return None if record is None else list(record.get("steps", []))


def previous_models(site_dir: str | Path, store=None) -> dict[str, dict] | None:
    """{model: its record} of the site in `site_dir`; {} when there is no site; None when the
    site is an older reportgen's whose marker records no models and whose site record the store
    no longer has."""
    from reportgen.pages.site_files import read_marker

    marker = read_marker(site_dir)
    if marker is None:
        return {}
    models = marker.get("models")
    if isinstance(models, dict):
        return {str(name): dict(record) for name, record in models.items()
                if isinstance(record, dict)}
    return _from_site_record(marker, store)


def _from_site_record(marker: dict, store) -> dict[str, dict] | None:
    """The models (and their steps) of the site data the build kept in the store
    (reportgen.commands.paper_figures), for a marker without them; no fingerprint, so such a
    model is built as usual."""
    from reportgen.commands.paper_figures import site_record_key

    digest = marker.get("digest")
    if store is None or not digest:
        return None
    figures = store.get_figures(site_record_key(digest, store))
    try:
        site = json.loads(Path(figures[0]["path"]).read_bytes()) if figures else None
        return {m["name"]: {"steps": [s["step"] for s in m.get("steps", [])]}
                for m in site["models"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def choose(site_dir: str | Path, store, matched: list[str], available: list[str],
           drop: tuple[str, ...], only: bool) -> SiteModels:
    """What the next site holds: `matched` (the models `--models` chose) built now, every other
    model of the previous site kept unless `drop` names it or `only` is set. ReportgenError
    (one line) when `drop` names a model the site does not show, or one being built."""
    site = str(site_dir).rstrip("/")
    previous = previous_models(site_dir, store)
    shown = previous or {}
    for name in drop:
        if name in matched:
            raise ReportgenError(
                f"--drop-model {name}: {name} is also chosen by --models, to be built",
                fix=f"leave {name} out of --models, or do not drop it")
        if name not in shown:
            listed = ", ".join(sorted(shown)) or "no model"
            raise ReportgenError(f"--drop-model {name}: {site}/ does not show {name}",
                                 expected=f"a model the site shows: {listed}",
                                 fix="name one of those (`--only` keeps just the models built "
                                     "now)")
    result = SiteModels(built=list(matched), unrecorded=previous is None)
    for name, record in sorted(shown.items()):
        if name in matched:
            continue
        if name in drop or only:
            result.dropped.append(name)
        elif name in available:
            result.kept[name] = record
        else:
            result.gone.append(name)
    return result


def fingerprint(step_keys) -> str:
    """The sha256 of every store key of one model's pages (a StepKeys per step)."""
    keys = sorted(k for keys in step_keys for k in _keys_of(keys))
    return hashlib.sha256(json.dumps(keys).encode()).hexdigest()


def _keys_of(keys) -> set[str]:
    return {*keys.inputs.values(), *keys.checkpoint.values(), *keys.dataset.values(),
            keys.evaluation}


def missing(step_keys, store, failed: list[str]) -> list[str]:
    """The store keys of one model's pages that the store no longer holds (a technique that
    failed at the recorded build, `failed`, is no loss: it had no result)."""
    skip = set(failed)
    return sorted(k for keys in step_keys for k in _keys_of(keys)
                  if k not in skip and not store.has_arrays(k))


def record(models, step_keys: dict) -> dict:
    """The marker's record of a site's `models` (ModelData): per model the steps it shows, the
    fingerprint of its results and the keys of its failed techniques. `step_keys` is
    {(model, step): StepKeys} (reportgen.pages.assemble.Assembler.step_keys)."""
    out = {}
    for model in models:
        keys = [step_keys[(model.name, s.step)] for s in model.steps
                if (model.name, s.step) in step_keys]
        out[model.name] = {"steps": [s.step for s in model.steps],
                           "results": fingerprint(keys),
                           "failed": sorted({k for ks in keys for k in ks.failed})}
    return out


def rebuild_command(names: list[str]) -> str:
    return f"reportgen build --models {','.join(names)}"


def cleared_line(name: str, site: str, store_root, names: list[str]) -> str:
    """The one line said of kept model `name` whose results the store no longer holds."""
    return (f"{name}, shown on {site}/ until now, is left out of it: its results are no longer "
            f"in the artifact store {store_root} (cleared since?); rebuild it with "
            f"`{rebuild_command(names)}`.")


def holding_line(site: str, built: list[str], kept: list[str], dropped: list[str]) -> str:
    """What the site now holds, e.g. "site/: 2 models (MNIST_Demo kept from the previous
    build, FASHION_X built now)"."""
    parts = [f"{', '.join(kept)} kept from the previous build"] if kept else []
    if built:
        parts.append(f"{', '.join(built)} built now")
    total = len(built) + len(kept)
    line = f"{site}/: {total} model{'' if total == 1 else 's'} ({', '.join(parts)})"
    if dropped:
        line += f"; removed as asked: {', '.join(dropped)}"
    return line
