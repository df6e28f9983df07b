"""Harness overhead: the adapter's steady training throughput vs a minimal hand-written loop, per framework.

Both train LeNet on the same 4,096 synthetic 28x28x1 images (64 batches of 64) with Adam on the same threads,
each in its own fresh process (as the workflow runs them), alternating sides over several rounds; each process
reports the median of its epochs after warm-up, and the ratio of the medians over rounds is printed
(1.00 = no overhead; above 1 the harness is faster). Two networks in one process disturb each other's speed. Run from the repository root with the driver:

    .venv/bin/python benchmarks/harness_vs_bare.py [--stacks torch-2.13 ...] [--trials 7]

It builds (or reuses) each stack's CPU venv under .venvs and runs itself there with --inside.
"""

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "benchmarks"))

BATCH, IMAGES, LEARNING_RATE, WARMUP = 64, 4096, 1e-3, 2


def measure(adapter_name, mode, trials, threads):
    """Median training images/s of `trials` epochs after warm-up, of the harness adapter or the bare loop."""
    import numpy as np
    from dlbench import specs
    from dlbench.clock import timed
    from dlbench.data import epoch_order

    adapter = importlib.import_module(f"dlbench.adapters.{adapter_name}")
    adapter.configure("cpu", threads, 0)
    rng = np.random.default_rng(0)
    arrays = {"train_x": rng.normal(size=(IMAGES, 28, 28, 1)).astype(np.float32),
              "train_y": rng.integers(0, 10, IMAGES).astype(np.int32),
              "test_x": rng.normal(size=(64, 28, 28, 1)).astype(np.float32),
              "test_y": rng.integers(0, 10, 64).astype(np.int32)}  # fmt: skip
    variant = "eager" if adapter_name == "pytorch" else "graph"
    if mode == "harness":
        spec = specs.model_spec("lenet", 10)
        experiment = {"device": "cpu", "variant": variant, "optimizer": "adam", "learning_rate": LEARNING_RATE,
                      "momentum": 0.9}  # fmt: skip
        model = adapter.build(spec, (28, 28, 1), specs.initial_weights(spec, (28, 28, 1), 0), experiment)
        staged = adapter.stage(arrays, "cpu")

        def epoch(order):
            return adapter.train_epoch(model, staged, order, BATCH)

    else:
        epoch = importlib.import_module(f"bare.{adapter_name}").make_epoch(arrays, BATCH, LEARNING_RATE)
    seconds = []
    for trial in range(WARMUP + trials):
        _, elapsed = timed(lambda: adapter.sync("cpu"), epoch, epoch_order(IMAGES, BATCH, 0, trial))
        seconds.append(elapsed)
    return {"framework_version": adapter.version(), "variant": variant,
            "images_per_s": IMAGES / statistics.median(seconds[WARMUP:])}  # fmt: skip


def run_inside(python, environment, adapter, mode, args):
    output = subprocess.run([str(python), __file__, "--inside", adapter, "--mode", mode, "--trials", str(args.trials),
                             "--threads", str(args.threads)], env=environment, capture_output=True, text=True)  # fmt: skip
    if output.returncode != 0:
        raise RuntimeError(output.stderr.strip().splitlines()[-1])
    return json.loads(output.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per side")
    parser.add_argument("--inside", help="adapter to measure in this interpreter (internal)")
    parser.add_argument("--mode", choices=["harness", "bare"], help="what --inside measures (internal)")
    args = parser.parse_args()
    if args.inside:
        print(json.dumps(measure(args.inside, args.mode, args.trials, args.threads)))
        return
    import yaml
    from build_env import build_venv, venv_prefix

    stacks = yaml.safe_load((REPO / "envs" / "stacks.yaml").read_text())
    print(f"{'stack':<20} {'variant':<8} {'harness img/s':>14} {'bare img/s':>12} {'ratio':>7}")
    for name in args.stacks or stacks:
        entry = stacks[name]
        env_file = REPO / "envs" / f"{entry['env']['cpu']}.yaml"
        python = build_venv(env_file, venv_prefix(REPO / ".venvs", env_file)) / "bin" / "python"
        environment = dict(os.environ, **entry["environment"], OMP_NUM_THREADS=str(args.threads))
        rates = {"harness": [], "bare": []}
        for round_index in range(args.rounds):
            for mode in ("harness", "bare") if round_index % 2 == 0 else ("bare", "harness"):
                result = run_inside(python, environment, entry["adapter"], mode, args)
                rates[mode].append(result["images_per_s"])
        harness, bare = statistics.median(rates["harness"]), statistics.median(rates["bare"])
        print(f"{name:<20} {result['variant']:<8} {harness:>14,.0f} {bare:>12,.0f} {harness / bare:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
