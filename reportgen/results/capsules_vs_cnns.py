"""Capsules vs CNNs: the comparison of Gu 2022 (dissertation, Ch.5) as tables, from the stored
analyses' summaries, with his published figures beside ours.

Table 1 (his Ch.5 Table 1): per model of the 40x40 affine benchmark, trainable parameters, the
matched step (the first saved step whose validation accuracy reaches the target: Gu stops every
model at ≈ 99.22% before comparing; here the target is the accuracy the models were trained to
with `reportgen train --until-accuracy`, see `matched_target`, since the bundled digits do not
reach his), and at that step, over the same evaluation images, the clean accuracy, the
affNIST-like accuracy (technique affnist_benchmark: the same digits transformed) and the
adversarial accuracy (technique adversarial_robustness, through the model's output). Table 5 (his Ch.5 Table 5): compactness
of the class vectors under rotation (technique capsule_semantics) for ConvNet-R, -CR, -CR-SF
and the CapsNet. Every score comes with its baselines: chance (1/K for an accuracy; what an
isotropic random change gives for compactness) and the same measure at the untrained step
(0-0), or None with `untrained_analysed` False when this build did not analyse that step.

Nothing here imports TensorFlow, the pages or the techniques: a model comes as a ModelRecord
(name, parameters, history, summaries per step); `record_from_site` makes one from the site
data of a built model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.results.technique_numbers import CHANCE_POOLED
from reportgen.results.findings import UNTRAINED, accuracy_interval
from reportgen.results.intervals import interval_of

# Gu 2022, Ch.5 Table 1: parameters (as printed), MNIST and affNIST test accuracy (%).
TABLE1_REFERENCE = {
    "CapsNet": ("13.5M", 99.23, 79.0),
    "CapsNet-NoR": ("13.5M", 99.22, 81.81),
    "Aff-CapsNet-DR": ("7.5M", 99.22, 89.03),
    "Aff-CapsNet": ("7.5M", 99.23, 93.21),
    "ConvNet-Avg": ("5.3M", 99.22, 94.11),
    "ConvNet-FC": ("35.4M", 99.22, 66.0),
}
# Gu 2022, Ch.5 Table 5: compactness (KL of the normalised per-dimension variance to uniform)
# under rotation on MNIST. Ours beside it is capsule_semantics' "compactness_rotation": the KL
# of the shares averaged over images, the aggregation of the order of his table (the per-image
# KL averaged is ~0.1-0.5 for any network; reportgen/techniques/capsule_semantics/numbers.py).
TABLE5_REFERENCE = {"ConvNet-R": 0.0003, "ConvNet-CR": 0.0028, "ConvNet-CR-SF": 0.0325,
                    "CapsNet": 0.0031}
TABLE5_FACTOR = "rotation"
# GraCapsNet (Gu, Wu & Tresp 2021): 1.18M parameters, 99.50% on MNIST (no affNIST figure).
GRACAPS_REFERENCE = ("1.18M", 99.50, None)
MATCHED_ACCURACY = 0.9922          # Gu's matched MNIST test accuracy
# Where the page's target comes from (matched_target)
TARGET_TRAINED = "trained"         # the --until-accuracy the models' runs recorded
TARGET_GU = "gu"                   # no run recorded one: Gu's matched accuracy
# The adversarial column: accuracy under these attacks (through the model's output).
ATTACKS = (("fgsm", 0.1), ("pgd", 0.1))


def model_kind(params) -> str:
    """The name of a model's kind in Gu's tables, from its parameters (ModelParams): its
    family's display name (reportgen.settings.families; kinds his tables do not have, such as
    matrix capsules' "EM-CapsNet", are named likewise)."""
    from reportgen.settings.families import family_of

    return family_of(params).display_name(params)


@dataclass
class ModelRecord:
    name: str
    kind: str                                  # model_kind(params)
    parameters: int                            # trainable parameters
    history: list[dict]                        # training history records (val_accuracy per step)
    # step -> technique name -> its summary (the numbers of its dataset panel)
    summaries: dict[str, dict[str, dict]] = field(default_factory=dict)
    classes: int = 0                           # number of classes (chance = 1 / classes)
    # the --until-accuracy its training run recorded (None: trained without one)
    until_accuracy: float | None = None


def record_from_site(model, params=None) -> ModelRecord:
    """A ModelRecord of a built model's site data (reportgen.pages.sitedata.ModelData: its
    history, its kind and the numbers of the dataset panels of the built steps that have them);
    `params` (ModelParams), when given, names the kind instead of `model.kind`. The matched step is then the first analysed step at or above the target:
    build with `--analyses all`, or train with `--until-accuracy` so that the last step is it."""
    summaries = {}
    for step in model.steps:
        numbers = {panel.technique: panel.numbers for panel in step.dataset_panels
                   if panel.numbers}
        if numbers:
            summaries[step.step] = numbers
    kind = model_kind(params) if params is not None else getattr(model, "kind", "")
    training = getattr(model, "training", None) or {}
    return ModelRecord(name=model.name, kind=kind, parameters=int(model.params),
                       history=list(model.history), summaries=summaries,
                       classes=len(getattr(model, "class_names", ())),
                       until_accuracy=_number(training.get("until_accuracy")))


def matched_target(records: list[ModelRecord]) -> tuple[float, str]:
    """(target, source): the clean accuracy at which the models are compared. The lowest
    --until-accuracy their training runs recorded (TARGET_TRAINED; a model trained to a higher
    one passed this one on its way), else Gu's 99.22% (TARGET_GU), which small runs do not
    reach: every model is then shown below target rather than at an accuracy nobody chose."""
    trained = [r.until_accuracy for r in records if r.until_accuracy is not None]
    return (min(trained), TARGET_TRAINED) if trained else (MATCHED_ACCURACY, TARGET_GU)


def matched_step(history: list[dict], target: float = MATCHED_ACCURACY,
                 built: set[str] | None = None) -> tuple[str | None, float | None, bool]:
    """(step, validation accuracy, reached): the first saved step whose validation accuracy is
    at least `target` (among the `built` steps when given), else the most accurate one."""
    records = [r for r in history if r.get("val_accuracy") is not None
               and (built is None or r["step"] in built)]
    for record in records:
        if record["val_accuracy"] >= target:
            return record["step"], float(record["val_accuracy"]), True
    if not records:
        return None, None, False
    best = max(records, key=lambda r: r["val_accuracy"])
    return best["step"], float(best["val_accuracy"]), False


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _get(summary: dict | None, key: str):
    return _number((summary or {}).get(key))


def _untrained(record: ModelRecord) -> dict[str, dict] | None:
    """The summaries at the untrained step, None when that step was not analysed."""
    return record.summaries.get(UNTRAINED)


def _clean(summaries: dict[str, dict] | None) -> tuple[float | None, int | None]:
    """(clean accuracy, images) over the evaluation set, as the analyses that attack or
    transform those images measured it: the same images as their own accuracies."""
    for technique in ("adversarial_robustness", "affnist_benchmark"):
        summary = (summaries or {}).get(technique)
        if _get(summary, "clean_accuracy") is not None:
            images = _get(summary, "images")
            return _get(summary, "clean_accuracy"), None if images is None else int(images)
    return None, None


def _images(summary: dict | None) -> int | None:
    images = _get(summary, "images")
    return None if images is None else int(images)


def table1(records: list[ModelRecord], target: float = MATCHED_ACCURACY) -> list[dict]:
    """One row per model (Gu's Ch.5 Table 1 layout): model, kind, parameters, matched step
    (the first whose validation accuracy, `validation_accuracy` over the held-out images
    training validated on, reaches the target), whether it was reached, and over the
    evaluation set at that step — the same images for every score — the clean accuracy, the
    affNIST-like accuracy (the same digits transformed) and the adversarial accuracies, with
    the images each counted (`*_images`), and the reference; each accuracy beside chance (1/K)
    and its value at the untrained step (`untrained_<key>`, from the 0-0 analyses)."""
    rows = []
    for record in records:
        step, accuracy, reached = matched_step(record.history, target,
                                               set(record.summaries) or None)
        at_step = record.summaries.get(step, {}) if step else {}
        affnist = at_step.get("affnist_benchmark")
        adversarial = at_step.get("adversarial_robustness")
        before = _untrained(record)
        reference = TABLE1_REFERENCE.get(record.kind) or \
            (GRACAPS_REFERENCE if record.kind == "GraCapsNet" else None)
        clean, clean_images = _clean(at_step)
        row = {"model": record.name, "kind": record.kind, "parameters": record.parameters,
               "step": step, "target": target, "reached": reached,
               "validation_accuracy": accuracy,
               "validation_images": next((_images({"images": r.get("val_images")})
                                          for r in record.history if r.get("step") == step),
                                         None),
               "clean_accuracy": clean, "clean_images": clean_images,
               "affnist_accuracy": _get(affnist, "affnist_accuracy"),
               "affnist_images": _images(affnist),
               "attack_images": _images(adversarial),
               "reference_parameters": reference[0] if reference else None,
               "reference_mnist": reference[1] if reference else None,
               "reference_affnist": reference[2] if reference else None,
               "chance": 1 / record.classes if record.classes else None,
               "untrained_analysed": before is not None,
               "untrained_clean_accuracy": _clean(before)[0],
               "untrained_affnist_accuracy": _get((before or {}).get("affnist_benchmark"),
                                                  "affnist_accuracy")}
        for attack, epsilon in ATTACKS:
            key = f"accuracy_capsules_{attack}_{epsilon:g}"
            row[f"{attack}_{epsilon:g}_accuracy"] = _get(adversarial, key)
            row[f"untrained_{attack}_{epsilon:g}_accuracy"] = _get(
                (before or {}).get("adversarial_robustness"), key)
        _with_intervals(row)
        rows.append(row)
    return rows


def accuracy_columns() -> list[tuple[str, str]]:
    """(accuracy column, its images column) of a Table 1 row."""
    return [("validation_accuracy", "validation_images"), ("clean_accuracy", "clean_images"),
            ("affnist_accuracy", "affnist_images"),
            *((f"{a}_{e:g}_accuracy", "attack_images") for a, e in ATTACKS)]


def _with_intervals(row: dict) -> None:
    """`<accuracy>_low` / `_high`: each accuracy's 95% interval over the images it counted
    (Wilson, reportgen.results.intervals), None where either is missing."""
    for key, images in accuracy_columns():
        value, count = row.get(key), row.get(images)
        found = accuracy_interval(value, int(count)) if value is not None and count else None
        row[f"{key}_low"] = found.low if found else None
        row[f"{key}_high"] = found.high if found else None


def table5(records: list[ModelRecord], target: float = MATCHED_ACCURACY) -> list[dict]:
    """Compactness under rotation (Gu's Ch.5 Table 5) of the models with class vectors, ours
    (capsule_semantics at the matched step) beside his, with what an isotropic random change
    gives (`chance_mean`, and `chance`: its 95th percentile, the bar a score must clear) and
    the untrained step's score."""
    rows = []
    for record in records:
        step, _, reached = matched_step(record.history, target, set(record.summaries) or None)
        semantics = record.summaries.get(step, {}).get("capsule_semantics") if step else None
        if semantics is None and record.kind not in TABLE5_REFERENCE:
            continue
        before = _untrained(record)
        chance = (semantics or {}).get(CHANCE_POOLED)          # [mean, 95th percentile]
        chance = chance if isinstance(chance, list) and len(chance) == 2 else [None, None]
        interval = interval_of(semantics or {}, f"compactness_{TABLE5_FACTOR}")
        rows.append({"model": record.name, "kind": record.kind, "step": step,
                     "reached": reached, "factor": TABLE5_FACTOR,
                     "compactness": _get(semantics, f"compactness_{TABLE5_FACTOR}"),
                     "compactness_low": interval.low if interval else None,
                     "compactness_high": interval.high if interval else None,
                     "reference": TABLE5_REFERENCE.get(record.kind),
                     "chance_mean": _number(chance[0]), "chance": _number(chance[1]),
                     "untrained_analysed": before is not None,
                     "untrained": _get((before or {}).get("capsule_semantics"),
                                       f"compactness_{TABLE5_FACTOR}")})
    return rows


def compares(records: list[ModelRecord]) -> bool:
    """Whether Gu's comparison has something to show: a model on the affine benchmark (its
    affNIST-like numbers) or a CNN baseline of his tables."""
    return any(r.kind.startswith("ConvNet") or any("affnist_benchmark" in s
                                                   for s in r.summaries.values())
               for r in records)


# --- differences on the same images, and seed groups ---------------------------------------

# (score column of a Table 1 row, its words, [(technique, summary key)] where its per-image
# outcomes may be kept, the first that has them)
DIFFERENCE_SCORES = (
    ("clean_accuracy", "clean accuracy",
     (("adversarial_robustness", "clean_accuracy"), ("affnist_benchmark", "clean_accuracy"))),
    ("affnist_accuracy", "affNIST-like accuracy", (("affnist_benchmark", "affnist_accuracy"),)),
    *((f"{a}_{e:g}_accuracy", f"{a.upper()} ε = {e:g} accuracy",
       (("adversarial_robustness", f"accuracy_capsules_{a}_{e:g}"),)) for a, e in ATTACKS),
)


def is_cnn(kind: str) -> bool:
    """Whether a Table 1 kind is one of the CNN baselines (Gu's ConvNet-*)."""
    return kind.startswith("ConvNet")


def _outcomes(record: ModelRecord, step: str | None, sources):
    from reportgen.results.per_image import outcomes_of

    at_step = record.summaries.get(step, {}) if step else {}
    for technique, key in sources:
        found = outcomes_of(at_step.get(technique), key)
        if found is not None:
            return found
    return None


def differences(records: list[ModelRecord], target: float = MATCHED_ACCURACY) -> list[dict]:
    """Each difference the page shows, paired on the same images: per score column, model a's
    accuracy minus model b's at their matched steps, with the paired 95% interval (a BCa
    bootstrap over the images, resampled together: reportgen.results.per_image) and McNemar's
    exact p-value, where both kept their per-image outcomes of the same evaluation images.
    The pairs are every capsule model against every CNN baseline when both are present (the
    page's question), else every pair. Rows: {a, b, score, words, value, low, high, n,
    p_value, only_a, only_b, decided, sentence}."""
    from reportgen.results.per_image import compare, pairable

    steps = {r.name: matched_step(r.history, target, set(r.summaries) or None)[0]
             for r in records}
    capsules = [r for r in records if not is_cnn(r.kind)]
    cnns = [r for r in records if is_cnn(r.kind)]
    if capsules and cnns:
        pairs = [(a, b) for a in capsules for b in cnns]
    else:
        pairs = [(a, b) for i, a in enumerate(records) for b in records[i + 1:]]
    rows = []
    for score, words, sources in DIFFERENCE_SCORES:
        for a, b in pairs:
            first = _outcomes(a, steps[a.name], sources)
            second = _outcomes(b, steps[b.name], sources)
            if not pairable(first, second):
                continue
            found = compare(first[1], second[1])
            d = found.difference
            rows.append({"a": a.name, "b": b.name, "score": score, "words": words,
                         "value": d.value, "low": d.low, "high": d.high, "n": d.n,
                         "method": d.method, "p_value": found.p_value,
                         "only_a": found.only_a, "only_b": found.only_b,
                         "decided": found.decided,
                         "sentence": found.words(a.name, b.name, words)})
    return rows


def group_rows(rows: list[dict], runs) -> list[dict]:
    """One row per seed group among `runs` (anything with .name and .group, as
    reportgen.results.seed_groups reads them) whose runs have Table 1 rows: each accuracy
    column as the mean over the seeds with Student's t interval over them (`<key>_low`,
    `_high`), the seeds counted (`seeds`) and the runs named (`members`). A group's
    interval is that of training itself: how far the score moves from one seed to the next."""
    from reportgen.results.seed_groups import seed_groups, seed_interval

    by_name = {row["model"]: row for row in rows}
    out = []
    for group in seed_groups(runs):
        members = [by_name[m.name] for m in group.members if m.name in by_name]
        if len(members) < 2:
            continue
        row = {"model": group.name, "kind": members[0]["kind"], "seeds": len(members),
               "members": [m["model"] for m in members]}
        for key, _ in accuracy_columns():
            found = seed_interval([m.get(key) for m in members])
            row[key] = found.value if found else None
            row[f"{key}_low"] = found.low if found else None
            row[f"{key}_high"] = found.high if found else None
            row[f"{key}_seeds"] = found.n if found else 0
        out.append(row)
    return out
