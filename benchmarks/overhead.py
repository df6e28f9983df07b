"""The telemetry sampler's overhead, measured as a ratio of steady training throughputs in one run.

The adapter trains --model (LeNet on 28x28x1 images, ResNet-20 on 32x32x3) on --images synthetic images in batches of
--batch-size with Adam, alternating epochs without and with the sampler at --rate Hz in ABBA order (which cancels
drift), and reports the median ratio of paired epoch times: run-to-run noise between processes, about +-4% on a
shared 2-core machine, would hide a sub-1% cost, so both sides run in one process. The sampler's own CPU time per
sample is printed first, a bound that does not drown in that noise. (The harness against hand-written loops is
benchmarks/parity.py.) Run from the repository root with the driver:

    .venv/bin/python benchmarks/overhead.py [--stacks torch-2.13 ...] [--trials 20] [--images 8192]

It builds (or reuses) each stack's CPU venv under .venvs and runs itself there with --inside.
"""

import argparse
import math
import statistics
import time
from pathlib import Path

import harness

WARMUP = 2


def measure(args):
    """Inside a stack's interpreter: the adapter's epochs alternating without and with the sampler."""
    from dlbench.telemetry import Sampler

    adapter = harness.import_adapter(args.inside, "cpu", args.threads, {})
    arrays = harness.synthetic_arrays(args.model, harness.INPUT_SHAPES[args.model], args.images, args.batch_size)
    experiment = {"device": "cpu", "variant": args.variant, "data_placement": "device"}
    epoch, _, _ = harness.harness_epoch(adapter, args.model, arrays, experiment, args.batch_size)
    seconds = harness.epoch_timer(adapter, "cpu", epoch, args.images, args.batch_size)

    def epoch_seconds(sampling):
        sampler = Sampler(args.rate).start() if sampling else None
        elapsed = seconds()
        if sampler:
            sampler.stop()
        return elapsed

    for _ in range(WARMUP):
        epoch_seconds(False)
    without, with_sampler = [], []
    for pair in range(args.trials):
        for sampling in (False, True) if pair % 2 == 0 else (True, False):
            (with_sampler if sampling else without).append(epoch_seconds(sampling))
    images = args.images // args.batch_size * args.batch_size
    return {
        "images_per_s": images / statistics.median(without),
        "sampling_images_per_s": images / statistics.median(with_sampler),
        "paired_ratios": sorted(a / b for a, b in zip(with_sampler, without)),
    }


def median_interval(values):
    """The median and a distribution-free 95% interval for it: the order statistics n/2 -+ 0.98 sqrt(n)."""
    ordered, half_width = sorted(values), 0.98 * math.sqrt(len(values))
    low = max(0, math.floor(len(values) / 2 - half_width))
    high = min(len(values) - 1, math.ceil(len(values) / 2 + half_width))
    return statistics.median(ordered), ordered[low], ordered[high]


def sampler_cost(rate, samples=5000):
    """The sampler's own cost: CPU seconds per sample, and the share of one core that costs at `rate` Hz (NVML reads,
    on a GPU machine, add their own cost to each sample)."""
    from dlbench.telemetry import Sampler

    sampler = Sampler(rate).start()
    start = time.process_time()
    for _ in range(samples):
        sampler.sample()
    per_sample = (time.process_time() - start) / samples
    sampler.stop()
    return per_sample, per_sample * rate


def compiled_variant(entry):
    """The framework's graph without XLA, XLA where that is the only graph (Keras on JAX), else eager."""
    return next(variant for variant in ("graph", "xla", "eager") if variant in entry["variants"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+")
    parser.add_argument("--trials", type=int, default=20, help="pairs of epochs per process")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per stack")
    parser.add_argument(
        "--threads",
        default="framework",
        help="CPU threads: 'framework' (each framework's default, the workflow's default) or a number",
    )
    parser.add_argument("--rate", type=float, default=10.0, help="telemetry sampling rate (Hz)")
    parser.add_argument("--model", choices=["lenet", "resnet20"], default="lenet")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--images", type=int, default=8192, help="training images per epoch")
    parser.add_argument("--venv-root", type=Path, default=harness.REPO / ".venvs", help="where stack venvs are built")
    parser.add_argument("--inside", help="adapter to measure in this interpreter (internal)")
    parser.add_argument("--variant", help="variant --inside measures (internal)")
    args = parser.parse_args()
    if args.inside:
        import json

        print(json.dumps(measure(args)))
        return
    per_sample, share = sampler_cost(args.rate)
    print(
        f"sampler without NVML: {per_sample * 1e6:.1f} us CPU per sample; at {args.rate:g} Hz {share:.4%} of one core"
    )
    print(
        f"{'stack':<20} {'variant':<8} {'without img/s':>14} {'sampling img/s':>15} "
        f"{'epoch time with / without: median of pairs [95% interval]':>58}"
    )
    stacks, pooled = harness.stacks(), []
    options = [
        "--model",
        args.model,
        "--batch-size",
        str(args.batch_size),
        "--images",
        str(args.images),
        "--trials",
        str(args.trials),
        "--threads",
        str(args.threads),
        "--rate",
        str(args.rate),
    ]
    for name in args.stacks or stacks:
        entry = stacks[name]
        python, problem = harness.interpreter(name, entry, "cpu", {}, args.venv_root)
        if problem:
            print(f"{name:<20} not run: {problem}")
            continue
        inside = ["--inside", entry["adapter"], "--variant", compiled_variant(entry)]
        for _ in range(args.rounds):
            result = harness.run_inside(python, entry["environment"], __file__, inside + options)
            pooled += result["paired_ratios"]
            print(
                f"{name:<20} {compiled_variant(entry):<8} {result['images_per_s']:>14,.1f} "
                f"{result['sampling_images_per_s']:>15,.1f} "
                f"{'%.4f [%.4f, %.4f]' % median_interval(result['paired_ratios']):>58}",
                flush=True,
            )
    print(f"all {len(pooled)} pairs: {'%.4f [%.4f, %.4f]' % median_interval(pooled)}")


if __name__ == "__main__":
    main()
