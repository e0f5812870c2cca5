"""The models/ folder: which models exist, their parameters, saved steps and history."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from reportgen.errors import ReportgenError
from reportgen.settings.model_params import (PARAMS_FILE, ModelParams, check_model_name,
                                             load_model_params)
from reportgen.training.checkpoints import Step, list_steps, load_weights

HISTORY_FILE = "history.json"


def default_models_dir() -> Path:
    return Path(os.environ.get("REPORTGEN_MODELS", "models"))


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: Path

    @property
    def params(self) -> ModelParams:
        return load_model_params(self.path / PARAMS_FILE)

    @property
    def steps(self) -> list[Step]:
        return list_steps(self.path)

    def weights_path(self, step: Step) -> Path:
        return self.path / step.filename

    def history(self) -> list[dict]:
        """The training history (one record per saved step), or [] before training."""
        path = self.path / HISTORY_FILE
        if not path.is_file():
            return []
        try:
            return json.loads(path.read_text(encoding="utf-8"))["records"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ReportgenError(f"Training history {path} is corrupt.", received=str(exc),
                                 fix=f"Delete {path}; it is rewritten by the next training run."
                                 ) from exc


class Catalog:
    """Every model directory (one with a params.toml) under the models folder."""

    def __init__(self, models_dir: str | Path | None = None):
        self.root = Path(models_dir) if models_dir is not None else default_models_dir()

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / PARAMS_FILE).is_file())

    def get(self, name: str) -> ModelEntry:
        check_model_name(name)
        path = self.root / name
        if not (path / PARAMS_FILE).is_file():
            known = ", ".join(self.names()) or "(none)"
            raise ReportgenError(f"Unknown model '{name}' (no {path / PARAMS_FILE}).",
                                 expected=f"one of: {known}",
                                 fix=f"Pick a listed model or create {path / PARAMS_FILE}.")
        return ModelEntry(name, path)

    def match(self, pattern: str) -> list[ModelEntry]:
        """Models whose names match a shell glob such as 'MNIST_*'."""
        from fnmatch import fnmatchcase

        names = [n for n in self.names() if fnmatchcase(n, pattern)]
        if not names:
            raise ReportgenError(f"No model matches '{pattern}'.",
                                 expected=f"a glob over: {', '.join(self.names()) or '(none)'}")
        return [self.get(n) for n in names]

    def resolve_step(self, entry: ModelEntry, step: str | Step) -> Step | None:
        """'last' -> latest saved step; 'init' -> None (fresh weights); 'E-B' -> that step."""
        if isinstance(step, Step):
            chosen = step
        elif step == "init":
            return None
        elif step == "last":
            steps = entry.steps
            if not steps:
                raise ReportgenError(f"Model {entry.name} has no saved training steps.",
                                     fix=f"Train it first: reportgen train {entry.name}")
            return steps[-1]
        else:
            chosen = Step.parse(step)
        if chosen not in entry.steps:
            listed = ", ".join(map(str, entry.steps)) or "(none)"
            raise ReportgenError(f"Model {entry.name} has no step {chosen}.",
                                 expected=f"one of: {listed}")
        return chosen

    def load(self, name: str, step: str | Step = "last"):
        """Build the model from params.toml and load the weights of `step`."""
        from reportgen.capsnet.architecture import build_capsnet

        entry = self.get(name)
        chosen = self.resolve_step(entry, step)
        net = build_capsnet(entry.params)
        if chosen is not None:
            load_weights(net, entry.weights_path(chosen))
        return net
