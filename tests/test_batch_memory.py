"""The batch check (reportgen.capsnet.footprint): what a pass over a batch holds, counted from
params.toml and checked against a real pass's measured peak, and the margin it keeps below the
memory available now."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reportgen.capsnet import footprint
from reportgen.capsnet.description import describe
from reportgen.settings.model_params import parse_model_params
from reportgen.sizes import size_text

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024 ** 3

# 12x12 -> conv 3x3, 8 filters -> 10x10x8 -> primary conv 3x3 stride 2, 2 types x 4 dims ->
# 4x4x8 (32 capsules) -> 10 class capsules of 16, 3 routing iterations; no decoder
SMALL = {"dataset": "mnist", "input_shape": [12, 12, 1], "num_classes": 10,
         "conv": [{"filters": 8, "kernel_size": 3}],
         "primary": {"types": 2, "dims": 4, "kernel_size": 3, "strides": 2},
         "class_caps": {"dims": 16, "routing_iterations": 3}, "decoder": {"enabled": False}}


def test_the_added_terms_equal_a_hand_count():
    d = describe(parse_model_params(copy.deepcopy(SMALL)))
    assert [c.grid for c in d.conv_layers] == [(10, 10), (4, 4)]
    # the conv outputs before their ReLU, and each iteration's copy of the 32 x 10 votes of 16
    # with their routing weights, the first of which activation_values counts already
    assert footprint.held_values(d) == (10 * 10 * 8 + 4 * 4 * 8) + (3 - 1) * 32 * 10 * 17
    values = footprint.activation_values(d)
    assert values == 12 * 12 + 800 + 128 + 32 * 5 + 10 * 17 + 32 * 10 * 17
    params = parse_model_params(copy.deepcopy(SMALL))
    assert footprint.image_bytes(params) == 4 * 2 * (values + footprint.held_values(d))
    # a CapsNet's training step is not XLA-compiled; a build's forward pass is, unrolling the
    # 3 routing iterations once (no gradients in it)
    assert footprint.compile_bytes(params, training=True) == 0
    assert footprint.compile_bytes(params, training=False) == \
        footprint.PASS_WORKSPACE + 3 * footprint.XLA_PER_ITERATION
    weights = footprint.count_trainable_params(params)
    assert footprint.batch_bytes(params, 5, training=True) == \
        weights * 20 + footprint.PASS_WORKSPACE + 5 * footprint.image_bytes(params)


def test_mem_available_is_read_from_meminfo_text():
    text = ("MemTotal:       24683648 kB\nMemFree:        21349000 kB\n"
            "MemAvailable:   22871220 kB\nBuffers:           12345 kB\n")
    assert footprint.meminfo_available(text) == 22871220 * 1024
    assert footprint.meminfo_available("MemTotal: 1 kB\nMemFree: 1 kB\n") is None


def _fake_machine(tmp_path, monkeypatch, available_kb: int, limit: int, usage: int,
                  inactive: int):
    (tmp_path / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable: {available_kb} kB\n")
    group = tmp_path / "cgroup"
    group.mkdir()
    (group / "memory.max").write_text(f"{limit}\n")
    (group / "memory.current").write_text(f"{usage}\n")
    (group / "memory.stat").write_text(f"anon 5\ninactive_file {inactive}\n")
    monkeypatch.setattr(footprint, "MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr(footprint, "_CGROUP_USAGE", ((group / "memory.max",
                                                      group / "memory.current",
                                                      "inactive_file"),))


def test_available_memory_is_the_lower_of_meminfo_and_the_control_groups_room(tmp_path,
                                                                              monkeypatch):
    _fake_machine(tmp_path, monkeypatch, available_kb=8 * 1024 ** 2, limit=6 * GIB,
                  usage=3 * GIB, inactive=GIB)
    assert footprint.available_memory() == 6 * GIB - (3 * GIB - GIB)     # 4 GiB < 8 GiB
    (tmp_path / "cgroup" / "memory.max").write_text("max\n")              # no limit
    assert footprint.available_memory() == 8 * GIB


def test_the_largest_batch_keeps_the_margin_below_available_memory(tmp_path, monkeypatch):
    """Against a fake 10 GiB available: the largest batch plus the margin fits, one more image
    does not; the refusal names the available memory, the margin and that batch."""
    _fake_machine(tmp_path, monkeypatch, available_kb=10 * 1024 ** 2, limit=2 ** 62,
                  usage=0, inactive=0)
    params = parse_model_params({"dataset": "mnist", "input_shape": [28, 28, 1],
                                 "conv": [{"filters": 4000, "kernel_size": 9}]})
    margin = footprint.headroom(10 * GIB)
    assert margin == int(0.15 * 10 * GIB) and footprint.headroom(2 * GIB) == GIB
    for training in (True, False):
        fits = footprint.largest_batch(params, training)
        assert fits == footprint.largest_batch(params, training, memory=10 * GIB) > 0
        assert footprint.batch_bytes(params, fits, training) <= 10 * GIB - margin \
            < footprint.batch_bytes(params, fits + 1, training)
    message = footprint.batch_refusal(params, 10 ** 4, "training X", "--batch-size").message
    assert message.startswith("Training X with batch 10,000 needs about")
    assert f"({size_text(10 * GIB)} available less a {size_text(margin)} margin;" in message
    assert (f"the largest batch that fits is {footprint.largest_batch(params, True):,}. "
            f"Fix: --batch-size") in message


def test_the_40000_filter_network_at_batch_10_counts_what_it_was_measured_holding():
    """Sabour's network with a 40,000-filter first conv held at least 7.64 GB building at
    batch 10 (against 4.7 GB estimated): the estimate is now at least that, so on the 25.3 GB
    machine it ran on (25.3 GB total), batch 10 fits with the margin kept, and one image more
    than the largest batch named would not."""
    params = parse_model_params({"dataset": "mnist", "input_shape": [28, 28, 1],
                                 "conv": [{"filters": 40_000, "kernel_size": 9}]})
    assert footprint.batch_bytes(params, 10, training=False) >= 7.64e9
    memory = int(25.3e9)
    fits = footprint.largest_batch(params, training=False, memory=memory)
    assert fits >= 10
    assert (footprint.batch_bytes(params, fits, False) + footprint.headroom(memory)
            <= memory < footprint.batch_bytes(params, fits + 1, False)
            + footprint.headroom(memory))


@pytest.mark.slow
def test_the_estimate_covers_a_measured_pass_of_a_wide_first_conv():
    """A real build-style pass (the probe's forward, then its gradients) and a training step
    of a CapsNet whose first conv has 2,000 filters, over 16 images, each in a fresh process
    measuring its own peak (bench/bench_batch_memory.py): the estimate is at least the
    measured growth and at most 2.5x it."""
    raw = {"dataset": "mnist", "input_shape": [28, 28, 1], "num_classes": 10,
           "conv": [{"filters": 2000, "kernel_size": 9}],
           "primary": {"types": 8, "dims": 8, "kernel_size": 9, "strides": 2},
           "class_caps": {"dims": 16, "routing_iterations": 3}}
    params = parse_model_params(copy.deepcopy(raw))
    for mode in ("build", "train"):
        done = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "bench_batch_memory.py"), "--worker",
             json.dumps({"params": raw, "batch": 16, "mode": mode})],
            capture_output=True, text=True, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr[-2000:]
        measured = json.loads(done.stdout.strip().splitlines()[-1])["measured"]
        estimate = footprint.batch_bytes(params, 16, training=mode == "train")
        assert measured <= estimate <= 2.5 * measured, (mode, measured, estimate)
