"""A training run as it goes, for `reportgen serve`: what a model folder holds now (its saved
steps and history), read at each request, so the overview page of a built site follows a run of
`reportgen train` within seconds of each saved step, without a build.

The page (assets/reportgen/live-training.js) asks `/_live/NAME.json?classes=K&labels=L` every
few seconds when `reportgen serve` served it with a models folder (its cookie LIVE_COOKIE says
so; from file://, GitHub Pages or any other server the page asks nothing and stays as built); the answer carries the curves drawn by the same code
as the built page's (reportgen.pages.charts.history_charts), so the two cannot differ. Only
reads: no lock is taken (a poll must never make a starting `train` think another one runs),
and a history written while it is read is read again at the next poll.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from reportgen.errors import ReportgenError
from reportgen.model_folder import ModelFolder

PREFIX = "/_live/"
LIVE_COOKIE = "reportgen-live"    # set by `reportgen serve` with a models folder
POLL_SECONDS = 2                  # the page's interval between two requests
_NAME = re.compile(r"^[^/\\\0]+$")


def live_record(models_root: str | Path, name: str, classes: int = 10,
                labels_per_image: int = 1) -> dict | None:
    """What the page shows of model `name`'s run now: {"model", "records", "steps",
    "latest" (the newest history record's step, validation accuracy and images seen),
    "saved_at" (UTC ISO time of the history file), "charts" [{spec, label}]}, or
    {"model", "error"} when its history cannot be read; None when there is no such model
    folder (a name is one folder name: no separators, not "." or "..")."""
    if not _NAME.match(name) or name in (".", ".."):
        return None
    folder = ModelFolder.at(Path(models_root) / name)
    if not folder.params_path.is_file():
        return None
    try:
        history = folder.history()
    except ReportgenError as exc:             # half-written by hand, or damaged: say why
        return {"model": name, "error": exc.message}
    from reportgen.pages.charts import history_charts

    classes = max(2, int(classes))
    labels_per_image = 2 if labels_per_image == 2 else 1
    steps = [str(step) for step in folder.steps]
    latest = history[-1] if history else {}
    try:
        saved = datetime.fromtimestamp(folder.history_path.stat().st_mtime, timezone.utc)
        saved_at = saved.isoformat(timespec="seconds")
    except OSError:
        saved_at = None
    return {"model": name, "records": len(history), "steps": steps,
            "latest": {"step": str(latest.get("step", "")) if latest else None,
                       "val_accuracy": latest.get("val_accuracy"),
                       "images_seen": latest.get("images_seen")},
            "saved_at": saved_at,
            "charts": history_charts(history, classes, labels_per_image, None)}
