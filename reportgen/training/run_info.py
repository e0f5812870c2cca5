"""How a model was trained: the facts of its training run, as `reportgen train` records them in
history.json (its top-level "training" section) and, for runs of an older reportgen, as far as
its other files say (train_state.npz's settings, history.json's "dataset" and "batch_size").

A fact nothing recorded is None: the model's overview says "not recorded" instead of guessing.
No TensorFlow here.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np

from reportgen.data.held_out import MARKER, MARKER_KEY
from reportgen.model_folder import RUN_SECTION, ModelFolder

# What a run's facts hold (None = not recorded), in the order the overview shows them.
FIELDS = ("data", "dataset", "training_images", "limit", "epochs", "epochs_trained",
          "batch_size", "learning_rate", "save_every", "seed", "wall_seconds", "until_accuracy",
          "held_out", "optimizer", "momentum", "weight_decay")


def run_facts(settings: dict, source: str, training_images: int, epochs: int,
              until_accuracy: float | None = None, held_out: bool = True) -> dict:
    """The "training" section the trainer writes: the run's settings (data, seed, batch_size,
    limit, learning_rate, save_every; optimizer, momentum (None for Adam) and weight_decay,
    params.toml's [training]), the data set's description, the number of training
    images after --limit, the epochs asked for and the --until-accuracy target (None without
    one: "Capsules vs CNNs" matches models at the accuracy they were trained to). `held_out`:
    every step trained beside the one held-out split (reportgen.data.held_out), false for an
    older run resumed."""
    facts = {"data": settings.get("data"), "dataset": source, "training_images": training_images,
             "limit": settings.get("limit"), "epochs": epochs,
             "batch_size": settings.get("batch_size"),
             "learning_rate": settings.get("learning_rate"),
             "save_every": settings.get("save_every"), "seed": settings.get("seed"),
             "until_accuracy": until_accuracy}
    for key in ("optimizer", "momentum", "weight_decay"):
        if key in settings:
            facts[key] = settings[key]
    if held_out:
        facts[MARKER_KEY] = MARKER
    return facts


def _state_settings(folder: ModelFolder) -> dict:
    """train_state.npz's settings alone (not its optimizer arrays); {} when absent, of an
    older format or unreadable (the build reports a damaged state elsewhere)."""
    try:
        with open(folder.state_path, "rb") as handle, \
                np.load(handle, allow_pickle=False) as npz:
            return json.loads(str(npz["settings"])) if "settings" in npz.files else {}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return {}


def _document(folder: ModelFolder) -> dict:
    try:
        data = json.loads(folder.history_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def training_run(folder: ModelFolder) -> dict:
    """The facts of the model's training run ({field: value or None} over FIELDS): from
    history.json's "training" section, else from what an older run left (train_state.npz's
    settings; history.json's data set and batch size). `epochs_trained` is the last saved
    step's epoch, `wall_seconds` the last record's time over every session of the run (None
    for runs that did not record it)."""
    doc = _document(folder)
    recorded = doc.get(RUN_SECTION) if isinstance(doc.get(RUN_SECTION), dict) else {}
    older = _state_settings(folder) if not recorded else {}
    facts = {key: recorded.get(key, older.get(key)) for key in FIELDS}
    if facts["dataset"] is None:
        facts["dataset"] = doc.get("dataset")
    if facts["batch_size"] is None:
        facts["batch_size"] = doc.get("batch_size")
    records = doc.get("records") if isinstance(doc.get("records"), list) else []
    records = [r for r in records if isinstance(r, dict)]
    if records:
        facts["epochs_trained"] = records[-1].get("epoch")
        facts["wall_seconds"] = records[-1].get("wall_seconds")
    return facts
