"""Analysis engine cost per image: batched engine vs a naive request-per-visualization pipeline,
cold vs warm build, peak memory on MNIST_LPcaps.

    python bench/bench_engine.py [--models MNIST_Demo MNIST] [--images 16] [--naive-images 4]

Models without trained weights are benchmarked with their initial weights saved as step 0-0 in a
temporary models folder (the cost does not depend on the weights' values).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def models_folder(name: str, tmp: Path) -> Path:
    """A models folder holding `name` with at least one saved step."""
    from reportgen.capsnet.architecture import build_capsnet
    from reportgen.catalog import Catalog
    from reportgen.training.checkpoints import Step, save_weights

    target = tmp / "models"
    shutil.copytree(ROOT / "models" / name, target / name,
                    ignore=shutil.ignore_patterns("archive", "train_state.npz"))
    entry = Catalog(target).get(name)
    if not entry.steps:
        save_weights(build_capsnet(entry.params), entry.weights_path(Step(0, 0)))
    else:  # keep the last step only
        for step in entry.steps[:-1]:
            entry.weights_path(step).unlink()
    return target


def input_variants(net):
    from reportgen.techniques import all_techniques

    return [(t, p) for t in all_techniques() if t.scope == "input" and not t.experimental
            for p in t.variants(net)]


def bench_model_work(name: str, n: int, naive_n: int, tmp: Path) -> dict:
    """Model work only (no drawing): engine batch vs naive per-technique-per-image requests."""
    import numpy as np
    import tensorflow as tf

    from reportgen.catalog import Catalog
    from reportgen.data.datasets import load_dataset
    from reportgen.probe.probe import run_probe

    folder = models_folder(name, tmp)
    catalog = Catalog(folder)
    net = catalog.load(name)
    images = np.asarray(load_dataset(net.params.dataset).x_test[:n])
    variants = input_variants(net)

    def engine():
        batch = run_probe(net, images)
        for t, p in variants:
            t.compute(batch, p)

    engine()  # warm-up (tracing)
    start = time.perf_counter()
    for _ in range(3):
        engine()
    engine_s = (time.perf_counter() - start) / 3

    # compute limit: one forward + backward over the batch and the decoder sweep in one call
    x = tf.convert_to_tensor(images)
    k, d = net.params.num_classes, net.params.class_caps.dims
    sweep = np.zeros((n * (11 + 16 * 11), k * d), np.float32)

    def bare():
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = net.model(x)
            score = tf.reduce_sum(tf.reduce_max(out["lengths"], axis=1))
        tape.gradient(score, x)
        if net.decoder is not None:
            net.decoder(sweep)

    bare()
    start = time.perf_counter()
    for _ in range(3):
        bare()
    bare_s = (time.perf_counter() - start) / 3

    # naive: rebuild + load the model and run one forward per technique per image
    start = time.perf_counter()
    for i in range(naive_n):
        for t, p in variants:
            fresh = catalog.load(name)
            t.compute(run_probe(fresh, images[i:i + 1]), p)
    naive_s = (time.perf_counter() - start) / naive_n
    return {"engine_ms_per_image": 1000 * engine_s / n, "bare_ms_per_image": 1000 * bare_s / n,
            "naive_ms_per_image": 1000 * naive_s, "variants": len(variants)}


def bench_build(name: str, n: int, tmp: Path) -> dict:
    """A cold build (empty store) and a warm rebuild of the same site, per image."""
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build

    folder = models_folder(name, tmp / "b")
    options = BuildOptions(models=name, steps="last", images=f"test:0-{n - 1}",
                           analyses="none", cache_dir=str(tmp / "cache"),
                           project_dir=str(tmp / "mkdocs"), site_dir=str(tmp / "site"))
    out = {}
    for label in ("cold", "warm"):
        start = time.perf_counter()
        summary = build(Catalog(folder), options)
        out[label] = time.perf_counter() - start
        out[f"{label}_computed"] = summary.computed
    options.render_site = False
    start = time.perf_counter()
    build(Catalog(folder), options)
    out["warm_no_site"] = time.perf_counter() - start
    return out


def peak_memory_lpcaps(n: int) -> float:
    """Peak RSS (MB) of a process building MNIST_LPcaps (10,368 primary capsules) analyses."""
    code = (f"import sys, tempfile, resource; sys.path.insert(0, {str(ROOT)!r}); "
            "from pathlib import Path; sys.argv=['x']; import bench.bench_engine as b; "
            "from reportgen.catalog import Catalog; "
            "from reportgen.commands.build import BuildOptions, build; "
            "tmp = Path(tempfile.mkdtemp()); folder = b.models_folder('MNIST_LPcaps', tmp); "
            f"build(Catalog(folder), BuildOptions(models='MNIST_LPcaps', images='test:0-{n - 1}', "
            "analyses='none', render_site=False, cache_dir=str(tmp/'c'), "
            "project_dir=str(tmp/'m'))); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["MNIST_Demo", "MNIST"])
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--naive-images", type=int, default=4)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    print("| model | naive ms/img | engine ms/img (model work) | speed-up | bare fwd+bwd+decoder "
          "ms/img | engine / bare | cold build s | warm build s (site / no site) | warm/cold |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models:
        with tempfile.TemporaryDirectory() as tmp:
            work = bench_model_work(name, args.images, args.naive_images, Path(tmp))
            b = bench_build(name, args.images, Path(tmp))
        print(f"| {name} | {work['naive_ms_per_image']:.0f} | {work['engine_ms_per_image']:.1f} | "
              f"{work['naive_ms_per_image'] / work['engine_ms_per_image']:.0f}x | "
              f"{work['bare_ms_per_image']:.1f} | "
              f"{work['engine_ms_per_image'] / work['bare_ms_per_image']:.2f} | "
              f"{b['cold']:.1f} | {b['warm']:.2f} / {b['warm_no_site']:.2f} | "
              f"{100 * b['warm'] / b['cold']:.1f}% ({100 * b['warm_no_site'] / b['cold']:.1f}% "
              f"without the MkDocs step) |", flush=True)
    if not args.skip_memory:
        print(f"\nPeak RSS building MNIST_LPcaps analyses for {args.images} images: "
              f"{peak_memory_lpcaps(args.images):.0f} MB")


if __name__ == "__main__":
    from docs_tables import recorded

    with recorded("bench_engine"):
        main()
