"""Overheads of the harness, each measured as a ratio of steady training throughputs in one run.

    --against bare       the adapter's training loop vs a minimal hand-written loop in the same framework
                         (benchmarks/bare/): is the harness as fast as the code a user would write?
    --against telemetry  the adapter with the telemetry sampler at --rate Hz vs without it: what does sampling cost?

Both sides train the same model (--model: LeNet on 28x28x1 images, or ResNet-20 on 32x32x3) on the same --images
synthetic images in batches of --batch-size with Adam on the same threads. Against bare, each side runs in its own
fresh process (as the workflow runs them; two networks in one process disturb each other's speed), alternating
sides over --rounds rounds; each process reports the median of its epochs after warm-up, and the ratio of the
medians over rounds is printed (1.00 = no overhead; above 1 the first side is faster). Against telemetry, the two
sides are the same network, so each process alternates epochs without and with the sampler (in ABBA order, which
cancels drift) and reports the median ratio of paired epoch times: run-to-run noise between processes, about +-4%
on a shared 2-core machine, would hide a sub-1% cost. Run from the repository root with the driver:

    .venv/bin/python benchmarks/overhead.py --against bare [--stacks torch-2.13 ...] [--rounds 3] [--trials 7]
    .venv/bin/python benchmarks/overhead.py --against bare --model resnet20 --batch-size 128 --images 2048
    .venv/bin/python benchmarks/overhead.py --against telemetry --trials 20 --images 8192

It builds (or reuses) each stack's CPU venv under .venvs and runs itself there with --inside.
"""

import argparse
import importlib
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "benchmarks"))

LEARNING_RATE, WARMUP = 1e-3, 2
INPUT_SHAPES = {"lenet": (28, 28, 1), "resnet20": (32, 32, 3)}


def measure(adapter_name, variant, mode, args):
    """Median training images/s of `trials` epochs after warm-up: the adapter (`harness`) or the bare loop
    (`bare`); or (`telemetry`) the adapter's epochs alternating without and with the sampler, with the median
    ratio of paired epoch times."""
    import numpy as np
    from dlbench import specs
    from dlbench.clock import timed
    from dlbench.data import epoch_order
    from dlbench.telemetry import Sampler

    adapter = importlib.import_module(f"dlbench.adapters.{adapter_name}")
    adapter.configure("cpu", args.threads, 0, mathmode.DEFAULT)
    rng, shape, batch = np.random.default_rng(0), INPUT_SHAPES[args.model], args.batch_size
    arrays = {"train_x": rng.normal(size=(args.images, *shape)).astype(np.float32),
              "train_y": rng.integers(0, 10, args.images).astype(np.int32),
              "test_x": rng.normal(size=(batch, *shape)).astype(np.float32),
              "test_y": rng.integers(0, 10, batch).astype(np.int32)}  # fmt: skip
    if mode in ("harness", "telemetry"):
        spec = specs.model_spec(args.model, 10)
        experiment = {"device": "cpu", "variant": variant, "optimizer": "adam", "learning_rate": LEARNING_RATE,
                      "momentum": 0.9, "weight_decay": 0.0, "data_placement": "device"}  # fmt: skip
        model = adapter.build(spec, shape, specs.initial_weights(spec, shape, 0), experiment)
        staged = adapter.stage(arrays, experiment)

        def epoch(order):
            return adapter.train_epoch(model, staged, order, batch)

    else:
        epoch = importlib.import_module(f"bare.{adapter_name}").make_epoch(arrays, batch, LEARNING_RATE, args.model)
    images, trial = len(epoch_order(args.images, batch, 0, 0)), itertools.count()

    def epoch_seconds(sampling=False):
        sampler = Sampler(args.rate).start() if sampling else None
        _, elapsed = timed(lambda: adapter.sync("cpu"), epoch, epoch_order(args.images, batch, 0, next(trial)))
        if sampler:
            sampler.stop()
        return elapsed

    for _ in range(WARMUP):
        epoch_seconds()
    result = {"framework_version": adapter.version()}
    if mode != "telemetry":
        return result | {"images_per_s": images / statistics.median(epoch_seconds() for _ in range(args.trials))}
    without, with_sampler = [], []
    for pair in range(args.trials):
        for sampling in (False, True) if pair % 2 == 0 else (True, False):
            (with_sampler if sampling else without).append(epoch_seconds(sampling))
    ratios = sorted(a / b for a, b in zip(with_sampler, without))
    return result | {"images_per_s": images / statistics.median(without),
                     "sampling_images_per_s": images / statistics.median(with_sampler),
                     "paired_ratios": ratios}  # fmt: skip


def median_interval(values):
    """The median and a distribution-free 95% interval for it: the order statistics n/2 -+ 0.98 sqrt(n)."""
    ordered, half_width = sorted(values), 0.98 * math.sqrt(len(values))
    low = max(0, math.floor(len(values) / 2 - half_width))
    high = min(len(values) - 1, math.ceil(len(values) / 2 + half_width))
    return statistics.median(ordered), ordered[low], ordered[high]


def sampler_cost(rate, samples=5000):
    """The sampler's own cost: CPU seconds per sample, and the share of one core that costs at `rate` Hz.

    A bound on its overhead that does not drown in the run-to-run noise of throughput (NVML reads, on a GPU
    machine, add their own cost to each sample)."""
    from dlbench.telemetry import Sampler

    sampler = Sampler(rate).start()
    start = time.process_time()
    for _ in range(samples):
        sampler.sample()
    per_sample = (time.process_time() - start) / samples
    sampler.stop()
    return per_sample, per_sample * rate


def compiled_variant(entry):
    """The variant the bare loops match: the framework's graph without XLA, XLA where that is the only graph
    (Keras on JAX), eager for PyTorch (its bare loop is eager)."""
    return next(variant for variant in ("graph", "xla", "eager") if variant in entry["variants"])


def run_inside(python, environment, entry, mode, args):
    options = ["--model", args.model, "--batch-size", str(args.batch_size), "--images", str(args.images),
               "--trials", str(args.trials), "--threads", str(args.threads), "--rate", str(args.rate)]  # fmt: skip
    command = [str(python), __file__, "--inside", entry["adapter"], "--variant", compiled_variant(entry), "--mode", mode]
    output = subprocess.run(command + options, env=environment, capture_output=True, text=True)
    if output.returncode != 0:
        raise RuntimeError(output.stderr.strip().splitlines()[-1])
    return json.loads(output.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--against", choices=["bare", "telemetry"], default="bare")
    parser.add_argument("--rate", type=float, default=10.0, help="telemetry sampling rate (Hz)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes (per side, against bare)")
    parser.add_argument("--model", choices=sorted(INPUT_SHAPES), default="lenet")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--images", type=int, default=4096, help="training images per epoch")
    parser.add_argument("--inside", help="adapter to measure in this interpreter (internal)")
    parser.add_argument("--variant", help="variant --inside measures (internal)")
    parser.add_argument("--mode", choices=["harness", "bare", "telemetry"], help="what --inside measures (internal)")
    args = parser.parse_args()
    if args.inside:
        print(json.dumps(measure(args.inside, args.variant, args.mode, args)))
        return
    import yaml
    from build_env import build_venv, venv_prefix

    stacks = yaml.safe_load((REPO / "envs" / "stacks.yaml").read_text())
    if args.against == "telemetry":
        per_sample, share = sampler_cost(args.rate)
        print(f"sampler without NVML: {per_sample * 1e6:.1f} us CPU per sample; at {args.rate:g} Hz "
              f"{share:.4%} of one core")  # fmt: skip
        print(f"{'stack':<20} {'variant':<8} {'without img/s':>14} {'sampling img/s':>15} "
              f"{'epoch time with / without: median of pairs [95% interval]':>58}")  # fmt: skip
        pooled = []
    else:
        print(f"{'stack':<20} {'variant':<8} {'harness img/s':>16} {'bare img/s':>16} {'ratio':>7}")
    for name in args.stacks or stacks:
        entry = stacks[name]
        env_file = REPO / "envs" / f"{entry['env']['cpu']}.yaml"
        python = build_venv(env_file, venv_prefix(REPO / ".venvs", env_file)) / "bin" / "python"
        environment = dict(os.environ, **entry["environment"], OMP_NUM_THREADS=str(args.threads))
        if args.against == "telemetry":
            for _ in range(args.rounds):
                result = run_inside(python, environment, entry, "telemetry", args)
                pooled += result["paired_ratios"]
                print(f"{name:<20} {compiled_variant(entry):<8} {result['images_per_s']:>14,.1f} "
                      f"{result['sampling_images_per_s']:>15,.1f} "
                      f"{'%.4f [%.4f, %.4f]' % median_interval(result['paired_ratios']):>58}", flush=True)  # fmt: skip
            continue
        rates = {"harness": [], "bare": []}
        for round_index in range(args.rounds):
            for mode in ("harness", "bare") if round_index % 2 == 0 else ("bare", "harness"):
                rates[mode].append(run_inside(python, environment, entry, mode, args)["images_per_s"])
        a, b = statistics.median(rates["harness"]), statistics.median(rates["bare"])
        print(f"{name:<20} {compiled_variant(entry):<8} {a:>16,.1f} {b:>16,.1f} {a / b:>7.3f}", flush=True)
    if args.against == "telemetry":
        print(f"all {len(pooled)} pairs: {'%.4f [%.4f, %.4f]' % median_interval(pooled)}")


if __name__ == "__main__":
    main()
