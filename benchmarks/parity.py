"""Parity: this workflow's steady training images/s against a hand-written script of the same framework.

For each stack it can run, each --models model and each precision, the adapter's epoch (built, staged and timed exactly
as scripts/train.py does) and the bare script of benchmarks/bare (that framework's own idioms: PyTorch tensors on the
device with autocast, GradScaler and channels_last; Keras `fit` on NumPy arrays, on TensorFlow on a tf.data pipeline;
MXNet hybridize + Trainer with mx.contrib.amp; TensorFlow tf.function; Flax NNX a jax.jit step with its state donated
and optax; Paddle the dynamic graph with paddle.amp) train the same network on the same synthetic images with Adam at
the same batch size, under the default math mode (TF32 and autotuning on, as practitioners run a GPU):

    fp32      the variant of the mode the bare script runs (PyTorch and Paddle eager; graph for tf.function and
              hybridize; XLA for Flax; Keras' `fit`: XLA on JAX, eager on torch, and on TensorFlow XLA on GPU and
              graph on CPU, as jit_compile="auto" picks)
    amp       that mode with mixed precision (float16 with loss scaling on GPU, bfloat16 on CPU)
    fastest   that mode channels-last with mixed precision, for stacks with an -nhwc variant on the device (PyTorch,
              MXNet on GPU); the others run NHWC natively, so their amp row is their fastest layout

Each side runs in its own fresh process, alternating sides over --rounds rounds; a process reports the median of
--trials epochs after --warmup epochs (the first compiles), and the ratio of the medians over rounds is printed:
target >= 0.97. A third side is the figure a study's report reads: scripts/train.py run as a study's job runs it,
with config.yaml's settings (its epochs and steady window; the measurements after training off), on synthetic data of
the model's input and the same number of examples, its record's train_images_per_s; it is set against the bare
script's rate over the sum of its timed epochs, the statistic of the record's steady window (target >= 0.97 too).
--paired adds, per round, one process that runs both the adapter's epoch and the bare script's, alternating epochs:
the median ratio of paired epochs, which resolves a difference of a percent or two where a shared VM's drift between
processes (tens of percent over minutes) hides it from the rounds. A precision a stack does not run on the device is
listed with the reason. Run from the repository root with the driver, e.g. on a GPU machine whose Python has torch
and jax preinstalled (docs/gpu-and-slurm.md, "In an environment that already exists"):

    .venv/bin/python benchmarks/parity.py --device gpu --stacks torch-2.11 keras-3-jax \
        --python torch-2.11=/opt/torch/.venv/bin/python keras-3-jax=/opt/torch/.venv/bin/python
    .venv/bin/python benchmarks/parity.py --device cpu --models lenet --images 1024 --batch-size 64

Stacks without --python run in their env file's venv under .venvs (built if needed).
"""

import argparse
import importlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

import harness
from dlbench import specs
from dlbench.process import run_child
from dlbench.variants import model_problem, parse, unsupported_reason

TARGET = 0.97
MODELS = [
    "gpt-tiny",
    "gpt2-small",
    "lenet",
    "resnet20",
    "resnet50",
]  # those the bare scripts build (GPT-2: torch, Keras)
PRECISIONS = ("fp32", "amp", "fastest")
COLUMNS = [
    "stack",
    "version",
    "model",
    "precision",
    "variant",
    "workflow_images_per_s",
    "bare_images_per_s",
    "ratio",
    "paired_ratio",
    "record_images_per_s",
    "bare_window_images_per_s",
    "record_ratio",
    "workflow_parameters",
    "bare_parameters",
    "reason",
]


def practitioner_mode(entry, device):
    """The mode the bare script of a stack runs in."""
    if entry["adapter"] in ("pytorch", "paddle_dygraph"):  # Paddle's guides train the dynamic graph
        return "eager"
    if entry["adapter"] == "keras3":  # fit's jit_compile="auto": on JAX, on TensorFlow off CPU only, not on torch
        if entry["backend"] == "torch":
            return "eager"
        return "xla" if entry["backend"] == "jax" or device == "gpu" else "graph"
    if entry["adapter"] == "flax_nnx":  # a jax.jit step, as Flax's guides write it
        return "xla"
    return "graph"


def variant_for(entry, device, precision):
    mode = practitioner_mode(entry, device)
    return {"fp32": mode, "amp": f"{mode}-amp", "fastest": f"{mode}-nhwc-amp"}[precision]


def data_placement(entry, variant, device):
    """Device placement, as the bare scripts hold the data, unless the stack refuses it (Keras on TensorFlow)."""
    return next(
        (
            placement
            for placement in ("device", "host")
            if unsupported_reason(entry, variant, device, placement) is None
        ),
        "device",
    )


def not_run_reason(entry, variant, device, model):
    """Why the stack does not run this variant of the model on the device; None when it does."""
    spec = specs.model_spec(model, harness.classes(model))
    reason = unsupported_reason(entry, variant, device, data_placement(entry, variant, device))
    reason = reason or model_problem(variant, spec)
    if reason and parse(variant).channels_last:
        return f"no channels-last variant here, so its amp row is its fastest layout ({reason})"
    return reason


def side_epoch(adapter, side, arrays, args):
    """(epoch(order), parameter count) of one side: the adapter's epoch as train.py sets it up, or the bare script's."""
    if side == "workflow":
        experiment = {"device": args.device, "variant": args.variant, "data_placement": args.placement}
        epoch, parameters, _ = harness.harness_epoch(adapter, args.model, arrays, experiment, args.batch_size)
        return epoch, parameters
    variant, bare = parse(args.variant), importlib.import_module(f"bare.{args.inside}")
    return bare.make_epoch(
        arrays,
        args.batch_size,
        harness.LEARNING_RATE,
        args.model,
        args.device,
        variant.mixed_precision,
        variant.channels_last,
    )


def paired_ratio(adapter, epochs, args):
    """Both sides' epochs in one process, after --warmup each, in --trials pairs whose order alternates: the median
    over pairs of the bare epoch's seconds over the workflow's (the workflow's throughput over the bare script's).
    Pairs an epoch apart share the machine's state, which fresh processes do not: on a shared VM, whose speed drifts
    by tens of percent over minutes, this resolves differences of a percent or two that rounds of processes cannot."""
    timers = {
        side: harness.epoch_timer(adapter, args.device, epoch, args.images, args.batch_size)
        for side, epoch in epochs.items()
    }
    for _ in range(args.warmup):
        for timer in timers.values():
            timer()
    ratios = []
    for pair in range(args.trials):
        order = ("workflow", "bare") if pair % 2 == 0 else ("bare", "workflow")
        seconds = {side: timers[side]() for side in order}
        ratios.append(seconds["bare"] / seconds["workflow"])
    return statistics.median(ratios)


def measure(args):
    """Inside a stack's interpreter: {images_per_s, window_images_per_s, parameters, framework_version} of one side
    (harness.steady_rates), or of side `paired` {paired_ratio, parameters, framework_version}."""
    adapter = harness.import_adapter(args.inside, args.device, args.threads, {})
    arrays = harness.synthetic_arrays(
        args.model, harness.input_shape(args.model, args.image_size), args.images, args.batch_size
    )
    if args.side == "paired":  # the workflow's first: it sets Keras' dtype policy, which the bare script leaves
        built = {side: side_epoch(adapter, side, arrays, args) for side in ("workflow", "bare")}
        ratio = paired_ratio(adapter, {side: epoch for side, (epoch, _) in built.items()}, args)
        return {"paired_ratio": ratio, "parameters": int(built["workflow"][1]), "framework_version": adapter.version()}
    epoch, parameters = side_epoch(adapter, args.side, arrays, args)
    median, window = harness.steady_rates(
        adapter, args.device, epoch, args.images, args.batch_size, args.warmup, args.trials
    )
    return {
        "images_per_s": median,
        "window_images_per_s": window,
        "parameters": int(parameters),
        "framework_version": adapter.version(),
    }


def synthetic_dataset(model, args):
    """The workflow's name of synthetic data in the model's input: images, or a language model's token sequences."""
    shape = harness.input_shape(model, args.image_size)
    if model in harness.VOCABULARIES:
        return f"synthetic-tokens-{harness.VOCABULARIES[model]}x{shape[0]}"
    return "synthetic-{}x{}x{}".format(*shape)


def synthetic_options(args):
    """The config's synthetic sections for the benchmark's number of examples (a batch of them to evaluate)."""
    sizes = {"train_size": args.images, "test_size": args.batch_size, "seed": 0}
    return {"synthetic": {"classes": harness.CLASSES, **sizes}, "synthetic_tokens": sizes}


def record_experiment(stack, model, variant, placement, args):
    """The experiment row (repeat 1) a study of config.yaml with this one stack, model, variant and data placement
    gives its job (workflow/rules/common.smk), on the benchmark's data; a stack given with --python in that
    interpreter, as config `existing_envs` names it."""
    from dlbench.study import configuration, plan  # the driver's: a stack's interpreter, running --inside, has no YAML

    existing = {stack: str(Path(args.existing[stack]).absolute())} if stack in args.existing else {}
    overrides = {
        "stacks": [stack],
        "datasets": [synthetic_dataset(model, args)],
        "models": [model],
        "variants": [variant],
        "data_placements": [placement],
        "devices": [args.device],
        "batch_sizes": [args.batch_size],
        "existing_envs": existing,
        "exclude": [],
        "measure_input_share": False,
        "measure_latency": False,
        **synthetic_options(args),
    }
    try:
        config = configuration.load(command_line=overrides)
    except configuration.ConfigError as error:
        raise RuntimeError(f"the study's config: {error}") from error
    table, skipped = plan.experiment_table(config, harness.stacks())
    if len(table) != 1:
        raise RuntimeError(f"the study plans {len(table)} experiments, not one: {skipped}")
    return dict(*table.values(), rep=1, seed=config["seed"] + 1)


def env_description(stack, python, row, args):
    """The env's description a job reads (build_env.describe, as the workflow's env rule writes it), once per stack."""
    path = args.scratch / f"{stack}.env.json"
    if not path.exists():
        from build_env import describe

        env_file = None if stack in args.existing else harness.REPO / "envs" / f"{row['env']}.yaml"
        path.write_text(json.dumps(describe(env_file, python, "existing" if env_file is None else "venv")))
    return path


def prepared(model, args):
    """The synthetic dataset of the model's input, prepared (once) under args.scratch by scripts/prepare_dataset.py."""
    name = synthetic_dataset(model, args)
    folder = args.scratch / name
    if not folder.exists():
        command = [sys.executable, harness.REPO / "scripts" / "prepare_dataset.py", name, folder]
        command += ["--options", json.dumps(synthetic_options(args))]
        outcome = run_child(command, pythonpath=[harness.REPO / "scripts"])
        if not outcome.ok:
            raise RuntimeError(outcome.stderr_tail(1) or "(no output)")
    return folder


def record_rate(python, stack, model, row, args):
    """The record side: scripts/train.py in a fresh process on the study's own experiment `row`, as a study's job runs
    it; its record's train_images_per_s."""
    folder = Path(tempfile.mkdtemp(dir=args.scratch, prefix=f"{stack}-"))
    files = {name: folder / name for name in ("record.json", "epochs.csv", "telemetry.csv", "train.log")}
    command = [python, harness.REPO / "scripts" / "train.py", "--experiment", json.dumps(row)]
    command += ["--dataset-dir", prepared(model, args), "--env-description", env_description(stack, python, row, args)]
    command += ["--threads", args.threads, "--record", files["record.json"], "--epochs-csv", files["epochs.csv"]]
    command += ["--telemetry-csv", files["telemetry.csv"]]
    outcome = run_child(command, pythonpath=[harness.REPO / "scripts"], capture_stdout=True)
    files["train.log"].write_text(outcome.stdout)  # its progress lines, off the table
    record = json.loads(files["record.json"].read_text()) if files["record.json"].exists() else {}
    if record.get("status") != "ok":
        raise RuntimeError(record.get("error") or outcome.stderr_tail(1) or f"no record ({outcome.description})")
    return record["train_images_per_s"]


def compare(python, entry, stack, model, precision, args):
    """The table row of one stack, model and precision: each side's median images/s over rounds (the bare script's
    also over its timed epochs' sum) and the ratios."""
    variant = variant_for(entry, args.device, precision)
    placement = data_placement(entry, variant, args.device)
    options = ["--inside", entry["adapter"], "--variant", variant, "--model", model, "--device", args.device]
    options += ["--placement", placement]
    options += [
        f"--{name.replace('_', '-')}={getattr(args, name)}"
        for name in ("image_size", "images", "batch_size", "warmup", "trials", "threads")
    ]
    rates = {"workflow": [], "bare": [], "bare_window": [], "record": [], "paired": []}
    parameters, version = {}, None
    sides = ("workflow", "bare") + ("paired",) * args.paired + ("record",) * (not args.no_record)
    experiment = None if args.no_record else record_experiment(stack, model, variant, placement, args)
    for side in harness.alternating(sides, args.rounds):
        if side == "record":
            rates[side].append(record_rate(python, stack, model, experiment, args))
            continue
        result = harness.run_inside(python, entry["environment"], __file__, options + ["--side", side])
        if side == "paired":
            rates[side].append(result["paired_ratio"])
            continue
        rates[side].append(result["images_per_s"])
        if side == "bare":
            rates["bare_window"].append(result["window_images_per_s"])
        parameters[side], version = result["parameters"], result["framework_version"]
    medians = {side: statistics.median(values) for side, values in rates.items() if values}
    record = {}
    if not args.no_record:
        record = {
            "record_images_per_s": medians["record"],
            "bare_window_images_per_s": medians["bare_window"],
            "record_ratio": medians["record"] / medians["bare_window"],
        }
    return {
        "stack": stack,
        "version": version,
        "model": model,
        "precision": precision,
        "variant": variant,
        "workflow_images_per_s": medians["workflow"],
        "bare_images_per_s": medians["bare"],
        "ratio": medians["workflow"] / medians["bare"],
        **({"paired_ratio": medians["paired"]} if args.paired else {}),
        **record,
        "workflow_parameters": parameters["workflow"],
        "bare_parameters": parameters["bare"],
    }


def print_row(row):
    if "reason" in row:
        print(
            f"{row['stack']:<20} {row['model']:<9} {row['precision']:<8} {row['variant']:<16} not run: {row['reason']}"
        )
        return
    ratios = ("ratio", "paired_ratio", "record_ratio")
    flags = [f"{name} below {TARGET}" for name in ratios if row.get(name, TARGET) < TARGET]
    if row["workflow_parameters"] != row["bare_parameters"]:
        flags.append(f"parameters differ: {row['workflow_parameters']:,} vs {row['bare_parameters']:,}")
    paired = f"{row['paired_ratio']:.3f}" if "paired_ratio" in row else ""
    record = ""
    if "record_ratio" in row:
        record = f"{row['record_images_per_s']:>13,.1f} {row['bare_window_images_per_s']:>13,.1f} "
        record += f"{row['record_ratio']:>6.3f}"
    print(
        f"{row['stack']:<20} {row['model']:<9} {row['precision']:<8} {row['variant']:<16} "
        f"{row['workflow_images_per_s']:>13,.1f} {row['bare_images_per_s']:>13,.1f} {row['ratio']:>6.3f} "
        f"{paired:>6} {record:>34}  "
        f"{'; '.join(flags)}",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+", help="default: every stack in envs/stacks.yaml")
    parser.add_argument(
        "--python",
        nargs="+",
        default=[],
        metavar="STACK=PATH",
        help="run STACK in this existing interpreter (validated like config existing_envs)",
    )
    parser.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=["resnet50", "resnet20"])
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--image-size", type=int, default=256, help="ResNet-50's input height and width")
    parser.add_argument("--images", type=int, default=5120, help="training images per epoch")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=1, help="untimed epochs per process (the first compiles)")
    parser.add_argument("--trials", type=int, default=3, help="timed epochs per process")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per side")
    parser.add_argument(
        "--threads",
        default="framework",
        help="CPU threads: 'framework' (each framework's default, the workflow's default) or a number",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="also both sides in one process, epochs alternating: the median ratio of paired epochs (per round)",
    )
    parser.add_argument(
        "--no-record", action="store_true", help="leave out the record side (scripts/train.py's own figure)"
    )
    parser.add_argument("--csv", type=Path, help="also write the table here")
    parser.add_argument("--venv-root", type=Path, default=harness.REPO / ".venvs", help="where stack venvs are built")
    parser.add_argument("--inside", help="adapter to measure in this interpreter (internal)")
    parser.add_argument("--side", choices=["workflow", "bare", "paired"], help="(internal)")
    parser.add_argument("--variant", help="(internal)")
    parser.add_argument("--model", help="(internal)")
    parser.add_argument("--placement", help="(internal)")
    args = parser.parse_args()
    if args.inside:
        print(json.dumps(measure(args)))
        return
    stacks, existing, chosen = harness.chosen_stacks(parser, args, default=list)
    print(
        f"device {args.device} ({harness.gpu_description() if args.device == 'gpu' else f'threads: {args.threads}'}); "
        f"batch {args.batch_size}, {args.images} examples"
        f"{f', ResNet-50 at {args.image_size}x{args.image_size}' if 'resnet50' in args.models else ''}; "
        f"median of {args.trials} epochs after {args.warmup}, {args.rounds} processes per side; target {TARGET}"
    )
    print(
        f"{'stack':<20} {'model':<9} {'precision':<8} {'variant':<16} {'workflow img/s':>13} {'bare img/s':>13} "
        f"{'ratio':>6} {'paired':>6} {'record img/s':>13} {'bare window':>13} {'ratio':>6}"
    )
    with tempfile.TemporaryDirectory(prefix="parity-") as scratch:
        args.scratch, args.existing = Path(scratch), existing  # the record side's data, runs and interpreters
        for row in compared_rows(args, stacks, chosen):
            print_row(row)


def compared_rows(args, stacks, chosen):
    """Each stack's, model's and precision's row as it is measured (and written to --csv with those before it)."""
    rows = []
    for stack in chosen:
        entry = stacks[stack]
        python, problem = harness.interpreter(stack, entry, args.device, args.existing, args.venv_root)
        for model in args.models:
            for precision in args.precisions:
                variant = variant_for(entry, args.device, precision)
                reason = problem or not_run_reason(entry, variant, args.device, model)
                row = {"stack": stack, "model": model, "precision": precision, "variant": variant}
                if reason is None:
                    try:
                        row = compare(python, entry, stack, model, precision, args)
                    except RuntimeError as error:
                        reason = f"failed: {error}"
                if reason:
                    row["reason"] = reason
                rows.append(row)
                if args.csv:  # after every row: a run stopped early keeps the rows it finished
                    harness.write_csv(args.csv, rows, COLUMNS)
                yield row


if __name__ == "__main__":
    main()
