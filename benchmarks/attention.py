"""Fused against composed attention: each stack's training throughput with its framework's fused attention kernel
(the default) over the same stack with attention written out (its -composed variant), a finding, not a target.

Per stack and --models model, the two variants of the mode its practitioners train in (benchmarks/parity.py) run in
fresh processes, alternating sides over --rounds rounds; a process reports the median of --trials epochs after
--warmup epochs (the first compiles). Each round's ratio fused / composed is one paired observation; the table
gives their geometric mean with its 95% interval (Student's t on the logarithms, dlbench.study.analysis.statistics), and
names a stack that has no composed variant (TensorFlow, whose attention is always written out) with its reason.
Run from the repository root with the driver:

    .venv/bin/python benchmarks/attention.py --device cpu --models gpt-tiny vit-tiny --rounds 5

Stacks without --python run in their env file's venv under .venvs (built if needed).
"""

import argparse
import statistics
from pathlib import Path

import harness
from dlbench.study.analysis.statistics import log_interval
from dlbench.variants import unsupported_reason
from parity import data_placement, practitioner_mode

COLUMNS = ["stack", "version", "model", "fused", "composed", "fused_per_s", "composed_per_s", "ratio", "low", "high"]
ATTENTION_MODELS = ("gpt-tiny", "vit-tiny", "gpt2-small")


def measure(args):
    """Inside a stack's interpreter: {per_s, engaged attention, framework_version} of one variant's epochs."""
    adapter = harness.import_adapter(args.inside, args.device, args.threads, {})
    arrays = harness.synthetic_arrays(args.model, harness.INPUT_SHAPES[args.model], args.examples, args.batch_size)
    experiment = {"device": args.device, "variant": args.variant, "data_placement": args.placement}
    epoch, _, engaged = harness.harness_epoch(adapter, args.model, arrays, experiment, args.batch_size)
    return {
        "per_s": harness.steady_rates(
            adapter, args.device, epoch, args.examples, args.batch_size, args.warmup, args.trials
        )[0],
        "attention": engaged()["attention"],
        "framework_version": adapter.version(),
    }


def compare(python, entry, stack, model, args):
    """The table row of one stack and model: both variants' median examples/s and the rounds' ratio with its interval."""
    fused = practitioner_mode(entry, args.device)
    sides = {"fused": fused, "composed": f"{fused}-composed"}
    common = ["--inside", entry["adapter"], "--model", model, "--device", args.device]
    common += [
        f"--{name.replace('_', '-')}={getattr(args, name)}"
        for name in ("examples", "batch_size", "warmup", "trials", "threads")
    ]
    rates, kernels, version = {"fused": [], "composed": []}, {}, None
    for side in harness.alternating(("fused", "composed"), args.rounds):
        variant = sides[side]
        options = common + ["--variant", variant, "--placement", data_placement(entry, variant, args.device)]
        result = harness.run_inside(python, entry["environment"], __file__, options)
        rates[side].append(result["per_s"])
        kernels[side], version = result["attention"], result["framework_version"]
    ratio, low, high = log_interval([f / c for f, c in zip(rates["fused"], rates["composed"])])
    return {
        "stack": stack,
        "version": version,
        "model": model,
        "fused": kernels["fused"],
        "composed": kernels["composed"],
        "fused_per_s": statistics.median(rates["fused"]),
        "composed_per_s": statistics.median(rates["composed"]),
        "ratio": ratio,
        "low": low,
        "high": high,
    }


def print_row(row):
    if "reason" in row:
        print(f"{row['stack']:<20} {row['model']:<10} not run: {row['reason']}", flush=True)
        return
    print(
        f"{row['stack']:<20} {row['model']:<10} {row['fused_per_s']:>10,.1f} {row['composed_per_s']:>10,.1f} "
        f"{row['ratio']:>6.3f} [{row['low']:.3f}, {row['high']:.3f}]  fused: {row['fused']}",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+", help="default: every stack in envs/stacks.yaml with a CPU env file")
    parser.add_argument("--python", nargs="+", default=[], metavar="STACK=PATH", help="run STACK in this interpreter")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--models", nargs="+", choices=ATTENTION_MODELS, default=["gpt-tiny"])
    parser.add_argument("--examples", type=int, default=512, help="training examples (sequences, images) per epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=1, help="untimed epochs per process (the first compiles)")
    parser.add_argument("--trials", type=int, default=3, help="timed epochs per process")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per side (at least 3 for an interval)")
    parser.add_argument("--threads", default="framework", help="CPU threads: 'framework' or a number")
    parser.add_argument("--csv", type=Path, help="also write the table here")
    parser.add_argument("--venv-root", type=Path, default=harness.REPO / ".venvs", help="where stack venvs are built")
    parser.add_argument("--inside", help="adapter to measure in this interpreter (internal)")
    parser.add_argument("--variant", help="(internal)")
    parser.add_argument("--model", help="(internal)")
    parser.add_argument("--placement", help="(internal)")
    args = parser.parse_args()
    if args.inside:
        import json

        print(json.dumps(measure(args)))
        return
    stacks, existing, chosen = harness.chosen_stacks(
        parser, args, default=lambda entries: [name for name, entry in entries.items() if entry["env"].get("cpu")]
    )
    print(
        f"device {args.device} (threads: {args.threads}); batch {args.batch_size}, {args.examples} examples; median "
        f"of {args.trials} epochs after {args.warmup}, {args.rounds} processes per side"
    )
    print(f"{'stack':<20} {'model':<10} {'fused/s':>10} {'composed/s':>10} {'ratio':>6} [95% interval]")
    rows = []
    for stack in chosen:
        entry = stacks[stack]
        python, problem = harness.interpreter(stack, entry, args.device, existing, args.venv_root)
        composed = f"{practitioner_mode(entry, args.device)}-composed"
        for model in args.models:
            row = {"stack": stack, "model": model}
            reason = problem or unsupported_reason(entry, composed, args.device)
            if reason is None:
                try:
                    row = compare(python, entry, stack, model, args)
                except RuntimeError as error:
                    reason = f"failed: {error}"
            if reason:
                row["reason"] = reason
            print_row(row)
            rows.append(row)
            if args.csv:  # after every row: a run stopped early keeps the rows it finished
                harness.write_csv(args.csv, rows, [*COLUMNS, "reason"])


if __name__ == "__main__":
    main()
