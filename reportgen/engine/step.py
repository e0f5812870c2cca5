"""Compute every missing result of one (model, training step) into the artifact store.

The plan is made from cache keys first; the checkpoint is loaded only if something is missing,
and then exactly once. Inputs that miss anything go through ONE probe pass per batch; every
input-scope technique reads that pass. Checkpoint-scope techniques (conv kernels) read the
weights. Dataset-scope analyses share one EvalBatch whose clean tensors are computed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reportgen import console
from reportgen.cache.keys import artifact_key, file_digest
from reportgen.techniques.compute import params_dict

EVALUATION = "evaluation"   # cache namespace of the step's accuracy / confusion-matrix lengths


@dataclass
class StepKeys:
    """Cache keys of every result of one step."""

    inputs: dict[tuple, str] = field(default_factory=dict)       # (tech, id(p), input key)
    checkpoint: dict[tuple, str] = field(default_factory=dict)   # (tech, id(p))
    dataset: dict[tuple, str] = field(default_factory=dict)      # (tech, id(p))
    evaluation: str = ""


@dataclass
class StepCounts:
    computed: int = 0
    reused: int = 0


def step_keys(model_digest, weights_path, variants, inputs, eval_digest,
              with_dataset: bool) -> StepKeys:
    weights = file_digest(weights_path)

    def key(tech, p, input_digest):
        return artifact_key(model=model_digest, weights=weights, input=input_digest,
                            technique=tech.name, version=tech.version, params=params_dict(p))

    keys = StepKeys(evaluation=artifact_key(model=model_digest, weights=weights,
                                            input=eval_digest, technique=EVALUATION, version=1,
                                            params={}))
    for t, p in variants:
        if t.scope == "input":
            for item in inputs:
                keys.inputs[(t.name, id(p), item.key)] = key(t, p, item.source_bytes_digest)
        elif t.scope == "checkpoint":
            keys.checkpoint[(t.name, id(p))] = key(t, p, "")
        elif with_dataset:
            keys.dataset[(t.name, id(p))] = key(t, p, eval_digest)
    return keys


def compute_step(net, weights_path, variants, inputs, eval_set, keys: StepKeys, store,
                 batch_size: int, meta: dict) -> StepCounts:
    """Fill the store with every result of `keys` that is missing; returns the counts."""
    from reportgen.probe.evaluation import EvalBatch
    from reportgen.probe.probe import empty_batch, run_probe, subset
    from reportgen.training.checkpoints import load_weights

    counts = StepCounts()
    present = {k for group in (keys.inputs, keys.checkpoint, keys.dataset)
               for k in group.values() if store.has_arrays(k)}
    counts.reused = len(present)
    input_variants = [(t, p) for t, p in variants if t.scope == "input"]
    missing_inputs = [i for i, item in enumerate(inputs)
                      if any(keys.inputs[(t.name, id(p), item.key)] not in present
                             for t, p in input_variants)]
    missing_ckpt = [(t, p) for t, p in variants if t.scope == "checkpoint"
                    and keys.checkpoint[(t.name, id(p))] not in present]
    missing_dataset = [(t, p) for t, p in variants if (t.name, id(p)) in keys.dataset
                       and keys.dataset[(t.name, id(p))] not in present]
    need_eval = not store.has_arrays(keys.evaluation)
    if not (missing_inputs or missing_ckpt or missing_dataset or need_eval):
        return counts
    load_weights(net, weights_path)     # at most once per (model, step) and build

    for t, p in missing_ckpt:
        store.put_arrays(keys.checkpoint[(t.name, id(p))],
                         _float32(t.compute(empty_batch(net), p)), {**meta, "technique": t.name})
        counts.computed += 1

    needs_grad = any(t.name == "gradcam_pp" for t, _ in input_variants)
    for start in range(0, len(missing_inputs), batch_size):
        chunk = missing_inputs[start:start + batch_size]
        batch = run_probe(net, np.stack([inputs[i].image for i in chunk]), gradients=needs_grad)
        for t, p in input_variants:
            todo = [j for j, i in enumerate(chunk)
                    if keys.inputs[(t.name, id(p), inputs[i].key)] not in present]
            if not todo:
                continue
            part = batch if len(todo) == len(chunk) else subset(batch, todo)
            result = _float32(t.compute(part, p))
            for row, j in enumerate(todo):
                item = inputs[chunk[j]]
                store.put_arrays(keys.inputs[(t.name, id(p), item.key)],
                                 {k: v[row] for k, v in result.items()},
                                 {**meta, "technique": t.name, "input": item.key})
                counts.computed += 1

    eval_x, eval_y, class_names = eval_set
    evaluation = EvalBatch(net, eval_x, eval_y, tuple(class_names))
    # one clean pass over the evaluation set for everything the analyses will read
    evaluation.prefetch({"lengths"}.union(*(t.needs for t, _ in missing_dataset)))
    if need_eval:
        store.put_arrays(keys.evaluation,
                         {"lengths": evaluation.tensors("lengths")["lengths"], "labels": eval_y},
                         {**meta, "technique": EVALUATION})
    for t, p in missing_dataset:
        console.notice(f"  {meta.get('model')} {meta.get('step')}: {t.title} "
                       f"over {len(eval_y)} images")
        store.put_arrays(keys.dataset[(t.name, id(p))], _float32(t.compute(evaluation, p)),
                         {**meta, "technique": t.name})
        counts.computed += 1
    return counts


def _float32(arrays: dict) -> dict:
    out = {}
    for k, v in arrays.items():
        v = np.asarray(v)
        out[k] = v.astype(np.float32) if v.dtype.kind == "f" else v
    return out
