"""Import CapsNets trained elsewhere (`reportgen import`): read another implementation's
checkpoint, describe its architecture as a params.toml and save its weights, converted into
reportgen's CapsNet, as a training step of `models/NAME/`. The imported model then goes through
every analysis and page like one reportgen trained.

One module per source layout (what its files hold, how its network computes, the conversion),
a shared reader for .h5 / .pt / .safetensors (reportgen.importers.tensors) and the writer of
the model folder (reportgen.importers.writer). To add a format, see CONTRIBUTING.md.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from types import ModuleType

from reportgen.errors import ReportgenError
from reportgen.model_folder import ModelFolder, Step
from reportgen.settings.model_params import (ModelParams, check_model_name, parse_model_params,
                                             suggest_model_name)

# --from NAME -> the module of that layout.
LAYOUTS = {"capsnet-keras": "capsnet_keras", "gram-ai": "gram_ai", "udacity": "udacity"}
# Input shapes whose dataset reportgen can guess: the sources' own data sets.
DEFAULT_DATASETS = {(28, 28, 1): "mnist", (32, 32, 3): "cifar10"}


def layout(name: str) -> ModuleType:
    if name not in LAYOUTS:
        raise ReportgenError("Unknown import layout.", expected=f"one of {sorted(LAYOUTS)}",
                             received=repr(name))
    return import_module(f"reportgen.importers.{LAYOUTS[name]}")


@dataclass
class ImportResult:
    name: str
    folder: ModelFolder
    step: Step
    params: ModelParams
    parameters: int
    created: bool                 # a new model folder (else a step added to an imported model)
    dataset_guessed: bool = False  # the dataset was chosen from the input shape


def provenance(source: ModuleType) -> str:
    """The `imported_from` value: the project, the supported versions and the framework."""
    return f"{source.PROJECT} ({source.FRAMEWORK}), layout of {source.VERSIONS}"


def _dataset(raw: dict, dataset: str | None) -> str:
    if dataset:
        return dataset
    shape = tuple(raw["input_shape"])
    if shape in DEFAULT_DATASETS:
        return DEFAULT_DATASETS[shape]
    raise ReportgenError(
        f"Cannot tell which dataset a {shape[0]}x{shape[1]}x{shape[2]} model was trained on.",
        fix="Pass --dataset with a dataset name or a path to your data (an .npz file or an image "
            "folder), as for `reportgen train --data`.")


def _project(imported_from: str) -> str:
    return imported_from.split(" (", 1)[0]


def _architecture(params: ModelParams) -> dict:
    """What the weights fix: shapes and sizes (not the choices a user may edit afterwards)."""
    p, c = params.primary, params.class_caps
    return {"input_shape": list(params.input_shape), "num_classes": params.num_classes,
            "conv": [[v.filters, v.kernel_size, v.strides] for v in params.conv],
            "primary": [p.types, p.dims, p.kernel_size, p.strides],
            "class_caps.dims": c.dims, "decoder": list(params.decoder.units)
            if params.decoder.enabled else None}


def _existing(folder: ModelFolder, params: ModelParams, checkpoint: Path) -> ModelParams | None:
    """The params of an earlier import into `folder` that these weights fit, None for a new
    folder; anything else in the way is an error."""
    if not folder.path.exists():
        return None
    if not folder.params_path.exists():
        if folder.path.is_dir() and not any(folder.path.iterdir()):
            return None
        raise ReportgenError(f"{folder.path} exists and is not a model folder.",
                             fix="Choose another --name, or move that folder aside.")
    old = folder.params
    if not old.imported_from:
        raise ReportgenError(f"Model {folder.name} was trained by reportgen, not imported; an "
                             "import never adds steps to it.",
                             fix="Choose another --name for the imported model.")
    if _project(old.imported_from) != _project(params.imported_from):
        raise ReportgenError(f"Model {folder.name} was imported from another project.",
                             expected=old.imported_from, received=params.imported_from,
                             fix="Choose another --name for this checkpoint.")
    before, now = _architecture(old), _architecture(params)
    for key in before:
        if before[key] != now[key]:
            raise ReportgenError(
                f"{checkpoint.name} has another architecture than model {folder.name}: {key}",
                expected=f"{before[key]} (its {folder.params_path.name})", received=str(now[key]),
                fix="Import it under another --name.")
    return old


def import_checkpoint(models_dir: str | Path, source_file: str | Path, source: str,
                      name: str | None = None, step: str | Step | None = None,
                      dataset: str | None = None,
                      routing_iterations: int | None = None) -> ImportResult:
    """Import `source_file`, saved by the project `source` (a LAYOUTS key), as a step of
    models_dir/NAME. Checks everything before writing anything; never overwrites a step."""
    from reportgen.capsnet.footprint import check_footprint
    from reportgen.importers.common import check_numbers
    from reportgen.importers.tensors import open_checkpoint
    from reportgen.importers.writer import (file_sha256, params_toml, record_source, write_step)

    module = layout(source)
    path = Path(source_file)
    iterations = routing_iterations or module.ROUTING_ITERATIONS
    with open_checkpoint(path) as stored:
        # Every shape and dtype the layout needs is checked on data-free placeholders of the
        # declared tensors, and the model they make against this machine, before any tensor
        # is read: a small file declaring a huge tensor costs nothing.
        planned = module.convert(stored.placeholders(), iterations)
        raw = dict(planned.raw_params)
        raw["dataset"] = _dataset(raw, dataset)
        raw["imported_from"] = provenance(module)
        raw["description"] = (
            f"Imported from {raw['imported_from']}, converted exactly into reportgen's CapsNet. "
            f"Where it differs from reportgen's defaults: {module.DIFFERENCES}; "
            f"{raw['class_caps']['routing_iterations']} routing iterations (not stored in the "
            f"file).")
        header = (f"Imported by `reportgen import --from {module.NAME}` from {module.PROJECT}: "
                  f"the source's architecture\n(layout of {module.VERSIONS}). source.json "
                  "records which file each step came from.")
        text = params_toml(raw, planned.notes, header)
        params = parse_model_params(tomllib.loads(text), source=f"the imported {path.name}")
        check_footprint(params, f"the imported {path.name}")
        if name is None:
            known = raw["dataset"] in DEFAULT_DATASETS.values()
            stem = raw["dataset"].upper() if known else Path(raw["dataset"]).stem.upper()
            name = suggest_model_name(f"{stem}_{module.MODEL_SUFFIX}")
        check_model_name(name)
        folder = ModelFolder.at(Path(models_dir) / name)
        existing = _existing(folder, params, path)
        if existing is not None:
            params = existing           # the user's edits to params.toml (e.g. routing) stay
        chosen = Step.parse(step) if isinstance(step, str) else step
        if chosen is None:
            steps = folder.steps if folder.path.exists() else []
            chosen = Step(steps[-1].epoch + 1, 0) if steps else Step(1, 0)
        if folder.weights_path(chosen).exists():
            raise ReportgenError(f"Model {name} already has step {chosen}.",
                                 received=str(folder.weights_path(chosen)),
                                 fix="Pass another --step E-B, or delete that weights file "
                                     "first.")
        checkpoint = stored.load()
    check_numbers(checkpoint)
    converted = module.convert(checkpoint, iterations)
    if converted.weights.parameter_count != checkpoint.parameter_count:
        raise ReportgenError(f"Converting {path.name} lost parameters (a reportgen bug).",
                             expected=f"{checkpoint.parameter_count:,}",
                             received=f"{converted.weights.parameter_count:,}")

    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()     # only now: a refused file is reported without waiting for it
    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.training.checkpoints import atomic_write_text
    from reportgen.training.run_state import training_lock

    net = build_capsnet(params)
    new_folder = not folder.path.exists()
    folder.path.mkdir(parents=True, exist_ok=True)
    created = False
    try:
        with training_lock(folder):
            created = existing is None and not folder.params_path.exists()
            if created:
                atomic_write_text(folder.params_path, text)
            if folder.weights_path(chosen).exists():   # another import won the race
                raise ReportgenError(f"Model {name} already has step {chosen}.",
                                     fix="Pass another --step E-B.")
            write_step(folder, chosen, net, converted.weights)
            record_source(folder, chosen, path, module, checkpoint.format, file_sha256(path))
    except BaseException as exc:
        if created and not folder.steps:   # leave no model without weights behind
            folder.params_path.unlink(missing_ok=True)
            if new_folder and not any(folder.path.iterdir()):
                folder.path.rmdir()
        if isinstance(exc, ReportgenError) and "Another `reportgen train" in exc.message:
            raise ReportgenError(f"Model {name} is in use by another `reportgen train` or "
                                 "`reportgen import`.", fix="Wait for it to finish.") from exc
        raise
    return ImportResult(name=name, folder=folder, step=chosen, params=params,
                        parameters=net.trainable_params(), created=created,
                        dataset_guessed=created and not dataset)
