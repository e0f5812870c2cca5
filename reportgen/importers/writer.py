"""Write an imported checkpoint into a model folder: params.toml (with a comment on each choice
the source made), the converted weights as one training step, and `source.json`, which records
which file each imported step came from.

The folder's layout (file names, `Step` <-> weights file) is reportgen.model_folder's; the
weights are written atomically by reportgen.training.checkpoints, like a trained step's.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from reportgen.errors import ReportgenError
from reportgen.importers.common import ConvertedWeights
from reportgen.model_folder import ModelFolder, Step
from reportgen.training.checkpoints import atomic_write_text

SOURCE_FILE = "source.json"     # provenance of the imported steps, beside params.toml
SOURCE_FORMAT = 1

_TOP_KEYS = ("description", "imported_from", "dataset", "input_shape", "num_classes")
_TABLES = ("primary", "class_caps", "decoder", "loss", "training")


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)   # a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _comment(text: str) -> list[str]:
    return [f"# {line}" for line in text.splitlines()]


def params_toml(raw: dict, notes: dict[str, str], header: str) -> str:
    """A params.toml document for the table `raw`, each key with its note as a comment."""
    lines = _comment(header) + [""]

    def keys(table: dict, prefix: str) -> None:
        for key, value in table.items():
            note = notes.get(f"{prefix}{key}")
            if note:
                lines.extend(_comment(note))
            lines.append(f"{key} = {_value(value)}")

    keys({k: raw[k] for k in _TOP_KEYS if k in raw}, "")
    for i, conv in enumerate(raw.get("conv", [])):
        lines += ["", "[[conv]]"]
        keys(conv, f"conv[{i}].")
    for table in _TABLES:
        if table in raw:
            lines += ["", f"[{table}]"]
            keys(raw[table], f"{table}.")
    return "\n".join(lines) + "\n"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_sources(folder: ModelFolder) -> dict:
    """source.json of the folder ({} when absent); a damaged one is an error naming it."""
    path = folder.path / SOURCE_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportgenError(f"{path} is unreadable.", received=str(exc).splitlines()[0],
                             fix=f"Move {path} aside; the next import writes a new one.") from exc
    if not isinstance(data, dict) or not isinstance(data.get("steps", {}), dict):
        raise ReportgenError(f"{path} is not an import record.",
                             expected="an object with a 'steps' object",
                             fix=f"Move {path} aside; the next import writes a new one.")
    return data


def record_source(folder: ModelFolder, step: Step, source: Path, layout, file_format: str,
                  sha256: str) -> None:
    """Add `step`'s provenance to source.json (written atomically)."""
    data = read_sources(folder)
    steps = dict(data.get("steps", {}))
    steps[str(step)] = {
        "file": source.name, "sha256": sha256, "bytes": source.stat().st_size,
        "format": file_format, "layout": layout.NAME, "project": layout.PROJECT,
        "imported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    data = {"format": SOURCE_FORMAT, **data,
            "steps": dict(sorted(steps.items(), key=lambda kv: Step.parse(kv[0])))}
    atomic_write_text(folder.path / SOURCE_FILE, json.dumps(data, indent=1) + "\n")


def set_weights(net, weights: ConvertedWeights) -> None:
    """Put converted weights into reportgen's CapsNet `net` (layers named by its description)."""
    import keras

    plain = [c.name for c in net.description.plain_conv_layers]
    for name, (kernel, bias) in zip(plain, weights.conv, strict=True):
        net.model.get_layer(name).set_weights([kernel, bias])
    net.primary_conv.set_weights(list(weights.primary))
    net.class_caps.set_weights([weights.class_caps])
    dense = [layer for layer in (net.decoder.layers if net.decoder is not None else [])
             if isinstance(layer, keras.layers.Dense)]
    for layer, (kernel, bias) in zip(dense, weights.decoder, strict=True):
        layer.set_weights([kernel, bias])


def write_step(folder: ModelFolder, step: Step, net, weights: ConvertedWeights) -> Path:
    """Save the converted weights as `step` of the model, atomically."""
    from reportgen.training.checkpoints import save_weights

    set_weights(net, weights)
    path = folder.weights_path(step)
    save_weights(net, path)
    return path
