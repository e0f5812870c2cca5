"""The models/ folder: which models exist (discovery, validation, matching by glob), and loading
one at a training step. What is inside one model folder is reportgen.model_folder's.

The catalog sits above training (it loads weights with reportgen.training.checkpoints); training
never imports it: the trainer takes a `ModelFolder` value.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from reportgen.capsnet.footprint import check_footprint
from reportgen.errors import ReportgenError
from reportgen.model_folder import PARAMS_FILE, ModelFolder, Step
from reportgen.settings.model_params import check_model_name, printable_name
from reportgen.training.checkpoints import load_weights

# The catalog's name for a model folder value (reportgen.commands.build imports it from here).
ModelEntry = ModelFolder


def default_models_dir() -> Path:
    return Path(os.environ.get("REPORTGEN_MODELS", "models"))


@dataclass(frozen=True)
class InvalidModel:
    """A model folder that cannot be used: an unsafe name or an unreadable / invalid
    params.toml. `name` is the folder name made printable; `reason` is one line."""

    name: str
    folder: str      # the raw folder name (globs match against it)
    path: Path
    reason: str


def matches(name: str, pattern: str) -> bool:
    """`name` matches the shell glob `pattern`, or one of its comma-separated globs (model names
    hold no commas: reportgen.settings.model_params.check_model_name)."""
    return any(fnmatchcase(name, part.strip()) for part in pattern.split(",") if part.strip())


def _validate(entry: ModelFolder) -> None:
    """params.toml valid (the error names the field) and a model this machine can hold (its
    trainable parameters and one image's activations: reportgen.capsnet.footprint)."""
    check_footprint(entry.params, str(entry.params_path))


class Catalog:
    """Every model directory (one with a params.toml) under the models folder.

    Folders are validated one by one: a folder with an unsafe name or a bad params.toml is
    listed apart (`invalid_models`) and never stops the others from being used.
    """

    def __init__(self, models_dir: str | Path | None = None):
        self.root = Path(models_dir) if models_dir is not None else default_models_dir()

    # -- the models folder ---------------------------------------------------------------------
    def _require_root(self) -> Path:
        root = self.root
        where = "" if root.is_absolute() else f" (looked in {printable_name(str(root.absolute()))})"
        fix = ("Pass --models-dir DIR or set REPORTGEN_MODELS to the folder that holds your model "
               "folders (each with a params.toml), or run reportgen from the folder that has "
               "models/.")
        if not root.exists():
            raise ReportgenError(f"Models folder {printable_name(str(root))} does not exist"
                                 f"{where}.", fix=fix)
        if not root.is_dir():
            raise ReportgenError(f"Models folder {printable_name(str(root))} is not a folder"
                                 f"{where}.", fix=fix)
        return root

    def _folders(self) -> list[Path]:
        """Sub-folders that hold a params.toml (of any kind: a broken one is still a model
        someone meant to define), sorted by name."""
        root = self._require_root()
        try:
            children = list(root.iterdir())
        except OSError as exc:
            raise ReportgenError(f"Cannot list the models folder {printable_name(str(root))}.",
                                 received=f"{type(exc).__name__}: {exc.strerror or exc}",
                                 fix="Check the folder's permissions.") from exc
        found = []
        for child in children:
            marker = child / PARAMS_FILE
            try:
                if child.is_dir() and (marker.exists() or marker.is_symlink()):
                    found.append(child)
            except OSError:  # a name the file system refuses to stat (too long, ...)
                continue
        return sorted(found, key=lambda p: p.name)

    def scan(self) -> tuple[list[ModelFolder], list[InvalidModel]]:
        """(valid models, invalid model folders), each sorted by folder name."""
        valid, invalid = [], []
        for folder in self._folders():
            try:
                check_model_name(folder.name, folder)
                entry = ModelFolder(folder.name, folder)
                _validate(entry)
            except ReportgenError as exc:
                invalid.append(InvalidModel(printable_name(folder.name), folder.name, folder,
                                            exc.message))
                continue
            valid.append(entry)
        return valid, invalid

    def names(self) -> list[str]:
        """Names of the valid models (see `invalid_models` for the others)."""
        return [e.name for e in self.scan()[0]]

    def invalid_models(self, pattern: str = "*") -> list[tuple[str, str]]:
        """(folder name, one-line reason) of every invalid model folder matching `pattern`."""
        return [(m.name, m.reason) for m in self.scan()[1] if matches(m.folder, pattern)]

    # -- one model -----------------------------------------------------------------------------
    def get(self, name: str) -> ModelFolder:
        """The named model; its params.toml is validated (the error names the field)."""
        check_model_name(name)
        path = self._require_root() / name
        marker = path / PARAMS_FILE
        if not (marker.exists() or marker.is_symlink()):
            known = ", ".join(self.names()) or "(none)"
            raise ReportgenError(f"Unknown model '{name}' (no {marker}).",
                                 expected=f"one of: {known}",
                                 fix=f"Pick a listed model or create {marker}.")
        entry = ModelFolder(name, path)
        _validate(entry)
        return entry

    def match(self, pattern: str) -> list[ModelFolder]:
        """Valid models whose names match a shell glob such as 'MNIST_*', or any of several
        separated by commas ('MNIST,MNIST_Demo,MNIST_EM').

        Invalid folders that match are left out (`invalid_models(pattern)` lists them). Every
        entry of the list must match some folder: one that matches none (a typo) is an error
        naming it, the closest model name and the models there are, before anything is done.
        """
        valid, invalid = self.scan()
        names = [e.name for e in valid] + [m.name for m in invalid]
        folders = [e.name for e in valid] + [m.folder for m in invalid]
        parts = [part.strip() for part in pattern.split(",") if part.strip()] or [pattern]
        for part in parts:
            if any(fnmatchcase(folder, part) for folder in folders):
                continue
            if not names:
                raise ReportgenError(
                    f"No model matches '{pattern}': the models folder "
                    f"{printable_name(str(self.root))} holds no model.",
                    expected="sub-folders with a params.toml (e.g. models/MNIST/params.toml)",
                    fix="Point --models-dir (or REPORTGEN_MODELS) at your models folder, or "
                        "create a model folder with a params.toml.")
            close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            if len(parts) == 1:
                raise ReportgenError(f"No model matches '{pattern}'.{hint}",
                                     expected=f"a glob over: {', '.join(names)}")
            rest = ",".join(p for p in parts if p != part)
            raise ReportgenError(
                f"No model matches '{part}', one entry of '{pattern}'; nothing was done.{hint}",
                expected=f"every entry a model name or glob over: {', '.join(names)}",
                fix=f"correct '{part}'" + (f" (e.g. '{close[0]}')" if close else "")
                    + f" or leave it out ('{rest}')")
        return [e for e in valid if matches(e.name, pattern)]

    def resolve_step(self, entry: ModelFolder, step: str | Step) -> Step | None:
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
