"""XLA per family: what `tf.function(jit_compile=True)` gains on each family's MNIST model, the
engine's forward against a bare XLA forward, and the CNN baseline's FLOP rate against this
machine's matmul peak, all in one run.

    python bench/bench_xla.py [--models MNIST_Demo MNIST ...] [--batch 64] [--grad-batch 8]
                              [--rounds 5] [--skip-engine] [--skip-peak]

Per model (untrained weights: the cost does not depend on their values), on random images:
images per second of the forward pass (the probe's `net.model(x, training=False)`) eager, as a
tf.function and as an XLA-compiled tf.function; of forward + backward (the gradient of the top
class scores with respect to every conv output, as the probe takes it, and every trainable
weight, as a training step does) as a tf.function and compiled, on a smaller batch (XLA's
backward of the large convolutions takes seconds per image); the first call's seconds (tracing
and compilation). The CPU is shared: every round runs each variant, alternating, and the
median of the rounds counts. A family's decision (Family.xla) is the XLA / best non-XLA ratio.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("MNIST_Demo", "MNIST", "MNIST_NoR", "MNIST_AffCaps", "MNIST_GraCaps",
          "MNIST_ConvNet_R", "MNIST_SelfRouting", "MNIST_EM")


def _net(model: str):
    import keras

    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.settings.model_params import load_model_params

    keras.utils.set_random_seed(0)
    return build_capsnet(load_model_params(ROOT / "models" / model / "params.toml"))


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def interleaved(variants: dict, rounds: int, seconds: float = 0.6,
                decisive: float | None = None) -> dict[str, float]:
    """Median seconds per call of each variant (name -> call returning when done): every
    round runs each variant, alternating, `calls` times (enough for ~`seconds` a round).
    With `decisive`, variants whose one warm call each differ by more than that factor are
    not run again: those calls are the answer (no load swings such a gap)."""
    once = {name: _timed(run) for name, run in variants.items()}
    if decisive is not None and max(once.values()) > decisive * min(once.values()):
        return once
    calls = {name: max(1, math.ceil(seconds / max(t, 1e-4))) for name, t in once.items()}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                run()
            times[name].append((time.perf_counter() - start) / calls[name])
    return {name: statistics.median(t) for name, t in times.items()}


def family_forward(model: str, batch: int, grad_batch: int, rounds: int) -> dict:
    """Images per second of the forward (eager, graph, XLA; `batch` images) and forward +
    backward (graph, XLA; `grad_batch` images) of `model`, and the first call's seconds of
    each compiled variant."""
    import numpy as np
    import tensorflow as tf

    from reportgen.probe.probe import score_output

    net = _net(model)
    score = score_output(net.description)
    conv_names, weights = net.description.conv_layer_names, net.model.trainable_variables
    images = np.random.default_rng(0).random((batch, *net.params.input_shape), dtype=np.float32)
    x, xg = tf.constant(images), tf.constant(images[:grad_batch])

    def forward(images):
        return net.model(images, training=False)

    def forward_backward(images):
        with tf.GradientTape() as tape:
            outputs = net.model(images, training=False)
            top = tf.reduce_sum(tf.reduce_max(outputs[score], axis=1))
        return tape.gradient(top, [outputs[name] for name in conv_names] + weights)

    def done(out):        # the values, not a pending computation
        return [np.asarray(v) for v in tf.nest.flatten(out)]

    compiled = {"graph": tf.function(forward), "xla": tf.function(forward, jit_compile=True),
                "graph_grad": tf.function(forward_backward),
                "xla_grad": tf.function(forward_backward, jit_compile=True)}
    inputs = {"graph": x, "xla": x, "graph_grad": xg, "xla_grad": xg}
    first = {name: _timed(lambda f=f, n=name: done(f(inputs[n])))
             for name, f in compiled.items()}
    seconds = interleaved({"eager": lambda: done(forward(x)),
                           "graph": lambda: done(compiled["graph"](x)),
                           "xla": lambda: done(compiled["xla"](x))}, rounds)
    seconds.update(interleaved({name: (lambda n=name: done(compiled[n](xg)))
                                for name in ("graph_grad", "xla_grad")}, rounds, decisive=3.0))
    rate = {name: (grad_batch if name.endswith("grad") else batch) / s
            for name, s in seconds.items()}
    return {"model": model, "family": net.params.family, "rate": rate, "first": first,
            "forward_ratio": rate["xla"] / max(rate["eager"], rate["graph"]),
            "backward_ratio": rate["xla_grad"] / rate["graph_grad"]}


def engine_forward(model: str, n: int, rounds: int) -> dict:
    """Seconds of the engine's forward over `n` images (the probe as `reportgen.analyze(model,
    techniques=["predictions"])` runs it) and of a bare XLA-compiled forward of the same model
    on the same images; the engine's first call (compilation) apart."""
    import numpy as np
    import tensorflow as tf

    from reportgen.probe.probe import run_probe
    from reportgen.techniques import get_technique

    net = _net(model)
    images = np.random.default_rng(2).random((n, *net.params.input_shape), dtype=np.float32)
    tech = get_technique("predictions")
    needs = frozenset().union(*(tech.needs_for(p, net) for p in tech.variants(net)))
    bare = tf.function(lambda x: net.model(x, training=False), jit_compile=True)

    def bare_call():
        [np.asarray(v) for v in bare(tf.constant(images)).values()]

    first_engine = _timed(lambda: run_probe(net, images, needs=needs))
    first_bare = _timed(bare_call)
    seconds = interleaved({"engine": lambda: run_probe(net, images, needs=needs),
                           "bare": bare_call}, rounds, seconds=2.0)
    return {"engine": seconds["engine"], "bare": seconds["bare"], "first_engine": first_engine,
            "first_bare": first_bare, "xla": net.uses_xla(gradients=False)}


def forward_flops(net) -> int:
    """Multiply-adds x 2 per image of every Conv2D and Dense layer of `net.model` (what a
    forward pass of a CNN costs; the rest is elementwise)."""
    import keras

    flops = 0
    for layer in net.model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            kh, kw = layer.kernel_size
            _, h, w, out = layer.output.shape
            flops += 2 * h * w * out * kh * kw * layer.input.shape[-1]
        elif isinstance(layer, keras.layers.Dense):
            flops += 2 * layer.input.shape[-1] * layer.units
    return flops


def baseline_flop_rate(model: str, batch: int, rounds: int, size: int = 2048) -> dict:
    """GFLOP/s of `model`'s XLA-compiled forward and of a float32 tf.matmul of two
    `size` x `size` matrices (this machine's peak), measured alternately."""
    import numpy as np
    import tensorflow as tf

    net = _net(model)
    x = tf.constant(np.random.default_rng(3).random((batch, *net.params.input_shape),
                                                    dtype=np.float32))
    forward = tf.function(lambda images: net.model(images, training=False), jit_compile=True)
    rng = np.random.default_rng(4)
    a, b = (tf.constant(rng.random((size, size), dtype=np.float32)) for _ in range(2))
    matmul = tf.function(lambda: tf.matmul(a, b))
    seconds = interleaved({"model": lambda: [np.asarray(v) for v in forward(x).values()],
                           "matmul": lambda: np.asarray(matmul())}, rounds, seconds=1.0)
    model_rate = forward_flops(net) * batch / seconds["model"] / 1e9
    peak = 2 * size ** 3 / seconds["matmul"] / 1e9
    return {"model": model_rate, "peak": peak, "share": model_rate / peak,
            "mflops_per_image": forward_flops(net) / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--grad-batch", type=int, default=8,
                        help="images of the forward + backward pass (XLA's is slow to run)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engine-model", default="MNIST")
    parser.add_argument("--engine-images", type=int, default=256)
    parser.add_argument("--baseline", default="MNIST_ConvNet_R")
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--skip-peak", action="store_true")
    args = parser.parse_args()
    from reportgen.tf_quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    started = time.perf_counter()
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"Batch {args.batch} (forward + backward: {args.grad_batch}), median of {args.rounds} "
          f"alternating rounds (one warm call each where the two differ over 3x); load "
          f"average {load} on {os.cpu_count()} CPUs\n")
    print("| model | family | fwd eager img/s | fwd graph | fwd XLA | XLA / best | "
          "fwd+bwd graph | fwd+bwd XLA | XLA / graph | first call s, graph / XLA: fwd; "
          "fwd+bwd |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        r = family_forward(model, args.batch, args.grad_batch, args.rounds)
        rate, first = r["rate"], r["first"]
        print(f"| {model} | {r['family']} | {rate['eager']:.0f} | {rate['graph']:.0f} | "
              f"{rate['xla']:.0f} | {r['forward_ratio']:.2f}x | {rate['graph_grad']:.0f} | "
              f"{rate['xla_grad']:.0f} | {r['backward_ratio']:.2f}x | "
              f"{first['graph']:.1f} / {first['xla']:.1f}; {first['graph_grad']:.1f} / "
              f"{first['xla_grad']:.1f} |", flush=True)
    if not args.skip_engine:
        e = engine_forward(args.engine_model, args.engine_images, args.rounds)
        print(f"\nEngine forward ({args.engine_model}, {args.engine_images} images, the probe as "
              f"`analyze(techniques=['predictions'])` runs it, XLA {'on' if e['xla'] else 'off'}"
              f"): {e['engine']:.2f} s; bare XLA forward {e['bare']:.2f} s: "
              f"{e['engine'] / e['bare']:.2f}x (target <= 1.15x); first calls "
              f"{e['first_engine']:.1f} s / {e['first_bare']:.1f} s", flush=True)
    if not args.skip_peak:
        f = baseline_flop_rate(args.baseline, args.batch, args.rounds)
        print(f"\n{args.baseline} XLA forward: {f['model']:.1f} GFLOP/s "
              f"({f['mflops_per_image']:.0f} MFLOP per image, conv + dense); float32 matmul "
              f"2048x2048: {f['peak']:.1f} GFLOP/s; {100 * f['share']:.0f}% of peak "
              "(target >= 70%)", flush=True)
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\n{time.perf_counter() - started:.0f} s; load average {load}")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_xla"):
        main()
