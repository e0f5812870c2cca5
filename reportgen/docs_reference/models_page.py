"""The reference page of the models that come with reportgen: one row per folder of `models/`,
read from its params.toml (family, dataset, input, trainable parameters counted by arithmetic,
its description), so the table follows the files. No TensorFlow is imported."""

from __future__ import annotations

from pathlib import Path

from reportgen.docs_reference.markdown import table


def model_rows(models_dir: Path) -> list[list[str]]:
    from reportgen.capsnet.param_count import count_trainable_params
    from reportgen.settings.families import family_of
    from reportgen.settings.model_params import PARAMS_FILE, load_model_params

    rows = []
    for folder in sorted(p for p in Path(models_dir).iterdir() if (p / PARAMS_FILE).is_file()):
        params = load_model_params(folder / PARAMS_FILE)
        shape = "x".join(str(v) for v in params.input_shape)
        rows.append([f"`{folder.name}`", family_of(params).display_name(params),
                     f"`{params.family}`", f"`{params.dataset}`", shape,
                     f"{count_trainable_params(params):,}", params.description])
    return rows


def models_page(models_dir: Path) -> str:
    rows = model_rows(models_dir)
    return "\n".join([
        "# Bundled models", "",
        f"The {len(rows)} model folders of `models/`, read from their `params.toml` files "
        "(this page is generated from them). `reportgen train NAME` trains one; "
        "`reportgen models` lists them with their saved steps and accuracy. Every setting is "
        "explained in [params.toml](params.md); the kinds of network in "
        "[model families](families.md). Trainable parameters are counted by arithmetic from "
        "the settings (the tests check each count against Keras).", "",
        table(["model", "kind", "family", "dataset", "input", "trainable parameters",
               "description"], rows), ""]) + "\n"
