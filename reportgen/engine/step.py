"""Compute every missing result of one (model, training step) into the artifact store.

The plan is made from the model's description and cache keys first: techniques that do not
apply to the model (Technique.applicable) are left out and reported; the checkpoint is loaded
only if something is missing, and then exactly once. Inputs that miss anything go through ONE
probe pass per batch, keeping only the tensors the missing techniques declared (`needs`); each
technique reads that pass through a view restricted to its own needs. Checkpoint-scope
techniques (conv kernels) read the weights. Dataset-scope analyses share one EvalBatch whose
clean tensors are computed once.

A technique that raises, computes past its time limit (reportgen.engine.time_limit), or whose
result breaks the rules of reportgen.engine.result_checks (a batch axis of one row per input,
numeric, finite), fails alone: its results at this step
are left out and recorded with the one-line reason (`StepKeys.failed`), every other
technique still computes, and the pages say so on its cards. Nothing is stored for it (an
input-scope result is checked whole before any input's slice is stored), so the next build
tries again.

The model may be a reportgen.engine.model.ModelHandle: planning and the store lookups read only
its description, and the Keras model is built only when something is missing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from reportgen import console
from reportgen.cache.keys import artifact_key, file_digest
from reportgen.engine.code_identity import technique_code
from reportgen.engine.model import LABELS_PER_IMAGE, materialise
from reportgen.engine.time_limit import TechniqueTooLong, default_seconds, watched
from reportgen.techniques.compute import params_dict

EVALUATION = "evaluation"   # cache namespace of the step's accuracy / confusion-matrix lengths


@dataclass(frozen=True)
class Plan:
    """What to compute for one model: (technique, params) pairs, and the techniques that do not
    apply to it with the model features they miss (for a "not applicable" note)."""

    variants: tuple[tuple, ...]
    # (technique, frozenset of missing features, or the plain clause of why it does not suit)
    not_applicable: tuple[tuple, ...]


def plan(techniques, model) -> Plan:
    """The variants of `techniques` for `model` (a CapsNet, a ModelHandle or a
    ModelDescription)."""
    from reportgen.data.label_arity import SINGLE, model_label_arity

    params = getattr(model, "params", None)
    arity = SINGLE if params is None else model_label_arity(params)
    variants, skipped = [], []
    for t in techniques:
        if arity not in t.labels:
            # a two-label analysis is no gap on a single-label model's pages: not named there
            if arity != SINGLE:
                skipped.append((t, frozenset({LABELS_PER_IMAGE[arity]})))
        elif t.applicable(model):
            variants.extend((t, p) for p in t.variants(model))
        else:
            missing = t.missing_features(model)
            skipped.append((t, missing if missing else t.unsuited_reason(model)))
    return Plan(tuple(variants), tuple(skipped))


@dataclass
class StepKeys:
    """Cache keys of every result of one step. Params are frozen dataclasses (hashable), so a
    result is found by what it is, not by which Python object asked for it."""

    inputs: dict[tuple, str] = field(default_factory=dict)       # (tech name, params, input key)
    checkpoint: dict[tuple, str] = field(default_factory=dict)   # (tech name, params)
    dataset: dict[tuple, str] = field(default_factory=dict)      # (tech name, params)
    evaluation: str = ""
    # result key -> why its technique failed at this step (one line): nothing stored for it
    failed: dict[str, str] = field(default_factory=dict)


@dataclass
class StepCounts:
    computed: int = 0
    reused: int = 0
    # seconds spent on the inputs' probe passes ("inputs") and on the evaluation set's pass and
    # dataset analyses ("dataset"): what the build's time estimate learns from
    seconds: dict[str, float] = field(default_factory=dict)


def step_keys(model_digest, weights_path, variants, inputs, eval_digest,
              with_dataset: bool, digest=file_digest, last: bool = False) -> StepKeys:
    """`digest(path)` gives the weights file's sha256 (a DigestMemo's remembers it between
    builds); `with_dataset`: the step has dataset analyses; `last`: it is the last of the
    model's chosen steps (where the `last_step_only` techniques compute)."""
    weights = digest(weights_path)
    from reportgen.techniques import origin

    codes = {tech.name: technique_code(tech, origin(tech)) for tech, _ in variants}

    def key(tech, p, input_digest):
        return artifact_key(model=model_digest, weights=weights, input=input_digest,
                            technique=tech.name, version=tech.version, params=params_dict(p),
                            code=codes[tech.name])

    # the evaluation is the engine's own pass: the model's digest holds its family's code
    keys = StepKeys(evaluation=artifact_key(model=model_digest, weights=weights,
                                            input=eval_digest, technique=EVALUATION, version=1,
                                            params={}, code=""))
    for t, p in variants:
        if t.last_step_only and not last:
            continue
        if t.scope == "input":
            if t.analysed_steps_only and not with_dataset:
                continue
            for item in inputs:
                keys.inputs[(t.name, p, item.key)] = key(t, p, item.source_bytes_digest)
        elif t.scope == "checkpoint":
            if with_dataset or not t.analysed_steps_only:
                keys.checkpoint[(t.name, p)] = key(t, p, "")
        elif with_dataset:
            keys.dataset[(t.name, p)] = key(t, p, eval_digest)
    return keys


def compute_step(model, weights_path, variants, inputs, eval_set, keys: StepKeys, store,
                 batch_size: int, meta: dict, analysed=None,
                 technique_seconds: int | None = None) -> StepCounts:
    """Fill the store with every result of `keys` that is missing; returns the counts.
    `model` is a CapsNet or a ModelHandle (built only if something is missing). `analysed`,
    if given, is called with (technique, params, key, arrays) as each dataset analysis is
    stored (the build starts drawing it while the next one computes; reportgen.pages.drawing_pool
    says why only these). `technique_seconds` limits each technique's compute at this step
    (None: time_limit.default_seconds of the images it computes over)."""
    counts = StepCounts()
    where = f"{meta.get('model')} {meta.get('step')}"

    def computed(t, p, compute, result_keys, images, rows=None):
        limit = technique_seconds or default_seconds(images)
        return _computed(t, p, compute, keys, result_keys, rows,
                         limit=limit, label=f"{where}: {t.title_of(p)}")

    keys.failed.clear()          # what is missing is tried again; a failure is said again
    present = {k for group in (keys.inputs, keys.checkpoint, keys.dataset)
               for k in group.values() if store.has_arrays(k)}
    counts.reused = len(present)
    variants = [(t, p) for t, p in variants if t.applicable(model)]
    input_variants = [(t, p) for t, p in variants if t.scope == "input"
                      and all((t.name, p, item.key) in keys.inputs for item in inputs)]
    missing_inputs = [i for i, item in enumerate(inputs)
                      if any(keys.inputs[(t.name, p, item.key)] not in present
                             for t, p in input_variants)]
    missing_ckpt = [(t, p) for t, p in variants if (t.name, p) in keys.checkpoint
                    and keys.checkpoint[(t.name, p)] not in present]
    missing_dataset = [(t, p) for t, p in variants if (t.name, p) in keys.dataset
                       and keys.dataset[(t.name, p)] not in present]
    need_eval = not store.has_arrays(keys.evaluation)
    if not (missing_inputs or missing_ckpt or missing_dataset or need_eval):
        return counts
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.probe.probe import empty_batch, run_probe, subset
    from reportgen.training.checkpoints import load_weights

    net = materialise(model)
    load_weights(net, weights_path)     # at most once per (model, step) and build

    for t, p in missing_ckpt:
        batch = empty_batch(net).restricted(t.needs_for(p, net), f"Technique '{t.name}'")
        result = computed(t, p, lambda: t.compute(batch, p), [keys.checkpoint[(t.name, p)]], 0)
        if result is not None:
            store.put_arrays(keys.checkpoint[(t.name, p)], result, {**meta, "technique": t.name})
            counts.computed += 1

    # Only what the techniques with something missing read (gradients only if one asks).
    started = time.perf_counter()
    probe_needs = frozenset().union(*(
        t.needs_for(p, net) for t, p in input_variants
        if any(keys.inputs[(t.name, p, inputs[i].key)] not in present for i in missing_inputs)))
    for start in range(0, len(missing_inputs), batch_size):
        chunk = missing_inputs[start:start + batch_size]
        truth = [getattr(inputs[i], "true_class", None) for i in chunk]
        batch = run_probe(net, np.stack([inputs[i].image for i in chunk]), needs=probe_needs,
                          labels=None if None in truth else np.asarray(truth, np.int64))
        for t, p in input_variants:
            todo = [j for j, i in enumerate(chunk)
                    if keys.inputs[(t.name, p, inputs[i].key)] not in present]
            if not todo:
                continue
            part = batch if len(todo) == len(chunk) else subset(batch, todo)
            part = part.restricted(t.needs_for(p, net), f"Technique '{t.name}'")
            rows = computed(t, p, lambda: t.compute(part, p),
                            [keys.inputs[(t.name, p, inputs[chunk[j]].key)] for j in todo],
                            len(todo), rows=len(todo))
            if rows is None:
                continue
            for arrays, j in zip(rows, todo):
                item = inputs[chunk[j]]
                store.put_arrays(keys.inputs[(t.name, p, item.key)], arrays,
                                 {**meta, "technique": t.name, "input": item.key})
                counts.computed += 1
    counts.seconds["inputs"] = time.perf_counter() - started

    if not (missing_dataset or need_eval):
        return counts       # the evaluation set's pass only when something reads it
    started = time.perf_counter()
    eval_x, eval_y, class_names = eval_set
    evaluation = EvalBatch(net, eval_x, eval_y, tuple(class_names))
    # one clean pass over the evaluation set for everything the analyses will read
    evaluation.prefetch({"lengths"}.union(*(t.needs_for(p, net) for t, p in missing_dataset)))
    if need_eval:
        store.put_arrays(keys.evaluation,
                         {"lengths": evaluation.tensors("lengths")["lengths"], "labels": eval_y},
                         {**meta, "technique": EVALUATION})
    for t, p in missing_dataset:
        console.notice(f"  {where}: {t.title_of(p)} over {len(eval_y)} images")
        view = evaluation.restricted(t.needs_for(p, net), f"Technique '{t.name}'")
        arrays = computed(t, p, lambda: t.compute(view, p), [keys.dataset[(t.name, p)]],
                          len(eval_y))
        if arrays is None:
            continue
        store.put_arrays(keys.dataset[(t.name, p)], arrays, {**meta, "technique": t.name})
        counts.computed += 1
        if analysed is not None:
            analysed(t, p, keys.dataset[(t.name, p)], arrays)
    counts.seconds["dataset"] = time.perf_counter() - started
    return counts


def _computed(t, p, compute, keys: StepKeys, result_keys: list[str],
              rows: int | None = None, limit: float | None = None,
              label: str = "") -> dict | list[dict] | None:
    """`compute()`'s arrays as stored (checked: reportgen.engine.result_checks), or with
    `rows` (input scope) the list of each input's slice of them; None when the technique
    raised, ran past `limit` seconds or its result broke a rule: the reason goes to
    `keys.failed` for each of `result_keys` (said in one line on its cards and in the build's
    summary; the traceback with --debug) and nothing of it is stored. While it computes for
    long, a line names it (`label`: time_limit.watched). The store's own errors stop the
    step: they are no technique's fault."""
    from reportgen.engine.result_checks import checked_result
    from reportgen.errors import StoreError

    try:
        with watched(label or t.name, t.name, limit) as call:
            result = compute()
        if call.expired:        # the technique caught the interruption and went on
            raise TechniqueTooLong(t.name, limit)
        arrays = checked_result(t, result, rows)
        if rows is None:
            return arrays
        return [{k: v[row] for k, v in arrays.items()} for row in range(rows)]
    except (StoreError, KeyboardInterrupt):
        raise
    except Exception as exc:        # a failing technique fails alone
        console.failure_traceback(exc)
        reason = failure_reason(exc)
        for key in result_keys:
            keys.failed[key] = reason
        return None


def failure_reason(exc: BaseException) -> str:
    """One line: a ReportgenError's message, else the exception's type and text."""
    from reportgen.errors import ReportgenError

    if isinstance(exc, ReportgenError):
        return exc.message
    return " ".join(f"{type(exc).__name__}: {exc}".split())

