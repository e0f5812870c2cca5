"""What a batch really holds against what the batch check estimates
(reportgen.capsnet.footprint.batch_bytes): the peak resident memory one training step and one
build-style pass (the probe's forward pass, then its forward with the gradients Grad-CAM++
takes) grow a process by, for a few families at two batch sizes.

    python bench/bench_batch_memory.py [--batches 4 16] [--wide-filters 4000]

Each measurement is a fresh process: it imports TensorFlow, reads its resident set (VmRSS),
builds the network (fresh weights), makes the step (the trainer's own `make_train_step` with
its optimizer, or the probe's compiled forward and gradient passes), resets the kernel's peak
counter (`/proc/self/clear_refs`, "5") and runs the step once on random images; measured = the
peak (VmHWM) less the resident set before the network was built, so it counts the weights, the
optimizer's state, the trace, XLA's compilation and the pass itself but not TensorFlow's
import. The estimate must be at least the measurement and not more than ~2.5x it. A second run
of the same step (the peak reset again, the trace already made) is shown too: what a pass
holds once traced and compiled.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _status(key: str) -> int:
    """Bytes of /proc/self/status's `key` (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def families(wide_filters: int) -> dict[str, dict]:
    """Family label -> the params.toml (as a dict) it is measured with."""
    def read(name):
        return tomllib.loads((ROOT / "models" / name / "params.toml").read_text())
    wide = read("MNIST_Demo")
    wide["conv"][0]["filters"] = wide_filters
    return {"CapsNet (MNIST_Demo)": read("MNIST_Demo"),
            "EM matrix capsules (MNIST_EM)": read("MNIST_EM"),
            "CNN (MNIST_ConvNet_R)": read("MNIST_ConvNet_R"),
            f"CapsNet, {wide_filters:,}-filter first conv": wide}


def measure(raw: dict, batch: int, mode: str) -> dict:
    """In this process: the peak growth of one `mode` ("train" or "build") pass of `batch`."""
    import numpy as np

    from reportgen.settings.model_params import parse_model_params
    from reportgen.tf_quiet import import_tensorflow_quietly

    params = parse_model_params(copy.deepcopy(raw))
    import_tensorflow_quietly()
    import tensorflow as tf

    from reportgen.capsnet.architecture import build_capsnet

    base = _status("VmRSS")
    net = build_capsnet(params)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.random((batch, *params.input_shape), dtype=np.float32))
    classes = rng.integers(0, params.num_classes, batch)
    if mode == "train":
        from reportgen.training.optimizers import make_optimizer
        from reportgen.training.trainer import make_train_step

        step = make_train_step(net, make_optimizer(params.training,
                                                   params.training.learning_rate))
        one_hot = tf.constant(np.eye(params.num_classes, dtype=np.float32)[classes])

        def run():
            return step(images, one_hot)[0].numpy()
    else:
        from reportgen.probe.probe import _forward_pass, _gradient_pass

        forward = _forward_pass(net)
        gradients = _gradient_pass(net, every_class=False)
        labels = tf.constant(classes, tf.int32)

        def run():          # as the probe runs them: every output, then the gradients
            outputs = {k: v.numpy() for k, v in forward(images).items()}
            return outputs, [g.numpy() for g in gradients(images, labels).values()]
    _reset_peak()
    run()
    first = _status("VmHWM") - base
    before = _status("VmRSS")
    _reset_peak()
    run()
    return {"measured": first, "again": _status("VmHWM") - before, "framework": base}


def _in_subprocess(raw: dict, batch: int, mode: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, __file__, "--worker",
                           json.dumps({"params": raw, "batch": batch, "mode": mode})],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", nargs="*", type=int, default=[4, 16])
    parser.add_argument("--wide-filters", type=int, default=4000)
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(measure(spec["params"], spec["batch"], spec["mode"])))
        return
    from reportgen.capsnet.footprint import batch_bytes
    from reportgen.settings.model_params import parse_model_params

    print(f"Peak memory growth of one pass in a fresh process; {os.cpu_count()} CPUs\n")
    print("| family | pass | batch | measured | estimated | estimate / measured | "
          "again (traced) |\n|---|---|---|---|---|---|---|")
    ratios, framework = [], []
    for label, raw in families(args.wide_filters).items():
        params = parse_model_params(copy.deepcopy(raw))
        for mode in ("train", "build"):
            for batch in args.batches:
                r = _in_subprocess(raw, batch, mode)
                estimate = batch_bytes(params, batch, training=mode == "train")
                ratios.append(estimate / r["measured"])
                framework.append(r["framework"])
                print(f"| {label} | {mode} | {batch} | {r['measured'] / 1e6:,.0f} MB | "
                      f"{estimate / 1e6:,.0f} MB | {ratios[-1]:.2f} | "
                      f"{r['again'] / 1e6:,.0f} MB |", flush=True)
    print(f"\nestimate / measured from {min(ratios):.2f} to {max(ratios):.2f} "
          f"(target: at least 1, at most ~2.5)")
    print(f"A process with TensorFlow imported, before any network: "
          f"{min(framework) / 1e9:.2f}-{max(framework) / 1e9:.2f} GB resident (not in the "
          f"estimate: the batch is checked before TensorFlow is imported; the margin kept "
          f"below available memory is at least 1 GiB)")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        main()
    else:
        from docs_tables import recorded

        with recorded("bench_batch_memory"):
            main()
