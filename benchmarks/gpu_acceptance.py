"""GPU acceptance in one command: every GPU path a lent machine can run, each step bounded, logged and summarised.

A lent GPU machine has no package index and at most 64 MiB may travel beside the checkout (docs/gpu-and-slurm.md,
"On a lent, offline GPU machine"). So, on a machine with the index, fetch the wheels it lacks (Python 3.12):

    python3 benchmarks/gpu_acceptance.py fetch-wheels .gpu-wheels

then, on the GPU machine, with its own Python (torch and jax preinstalled), the wheels carried beside the checkout:

    /opt/torch/.venv/bin/python benchmarks/gpu_acceptance.py run --wheels .gpu-wheels --out "$OUT"

Each step runs in processes of its own under a time limit, its output in OUT/steps/<step>.log and its figures in
OUT/<step>.csv; OUT/summary.md (and .csv) and OUT/all.tgz (everything) are rewritten after every step, so a step that
is killed or times out still leaves the finished steps' results. Steps, in priority order: install (the wheels), parity-<stack> (benchmarks/
parity.py: ResNet-50 against each framework's own script), gpt2-<stack> (GPT-2 124M, fused attention, fp32 and AMP,
against the framework's own nanoGPT-style script, with tokens/s and MFU by nanoGPT's accounting), compile-modes (torch.compile's three modes, their compile
cost), one-replica-mechanisms (each data-parallel mechanism at one replica against the plain run), nvml (the energy
counter against integrated power, the idle draw, a foreign GPU process under each policy, throttle reasons), max-batch
(the largest batch that fits, found by a real out-of-memory error), workflow (a tiny study on the GPU through to its
tables; the report renders on a machine with pandoc and typst, which do not fit in 64 MiB). `--only` runs chosen
steps (the install always runs first), `--budget-s` bounds the whole: every step needs about 20 minutes of an H200, two
calls of a lent device.

`--cpu` runs the same steps on CPU with tiny sizes, the NVML checks against a scripted fake GPU and the workflow as a
dry run: the test suite's proof that the command still works between lent devices.
"""

import argparse
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import harness
from dlbench.process import run_child
from dlbench.variants import unsupported_reason

BENCHMARKS = Path(__file__).resolve().parent
WHEEL_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64")
# What the lent machine lacks (docs/gpu-and-slurm.md): the driver's and the Keras and Flax stacks' packages, and
# scikit-learn for the tools' jobs. Flax and optax go without their dependencies: those the machine needs are there
# (orbax's tensorstore alone would take a third of what may travel).
CARRIED = ("snakemake==9.27.1", "jsonschema==4.26.0", "keras==3.15.1", "scikit-learn==1.9.1")
CARRIED_WITHOUT_DEPENDENCIES = ("flax==0.12.8", "optax==0.2.8", "chex==0.1.91", "msgpack", "treescope")
# Preinstalled on the lent machine (and large): dropped from the wheels after the download.
PREINSTALLED = ("numpy", "scipy", "jax", "jaxlib", "h5py", "ml_dtypes", "pandas", "pyarrow", "pillow", "psutil")
# After the install: each module the steps import, its version or why it fails (printed on one line).
IMPORTS_CHECK = """
import importlib, os, sys
os.environ.setdefault("KERAS_BACKEND", "jax")  # Keras' default backend, TensorFlow, is not on the machine
found = {}
for name in ("snakemake", "jsonschema", "sklearn", "keras", "flax.nnx", "optax", "torch", "jax"):
    try:
        found[name] = getattr(importlib.import_module(name.split(".")[0]), "__version__", "?")
        importlib.import_module(name)
    except Exception as error:
        found[name] = f"FAILED {type(error).__name__}: {error}"
print("imports:", "; ".join(f"{name} {state}" for name, state in found.items()))
sys.exit(any(state.startswith("FAILED") for state in found.values()))
"""
SUMMARY_COLUMNS = ["step", "status", "seconds", "figures", "log"]


class Sizes:
    """What the steps train: ResNet-50 at 224 px on a GPU (the published references' size), LeNet on CPU."""

    def __init__(self, cpu):
        self.device = "cpu" if cpu else "gpu"
        self.model = "lenet" if cpu else "resnet50"
        self.image_size = 224
        self.images, self.batch_size = (128, 32) if cpu else (1536, 128)
        self.warmup, self.trials = 1, 1 if cpu else 3
        self.small_model = (
            "lenet" if cpu else "resnet20"
        )  # torch.compile's modes: max-autotune on ResNet-50 takes minutes
        self.max_batch_limit = 64 if cpu else 8192
        # GPT-2 124M at its context of 1024 (nanoGPT's 12 sequences a micro-batch), gpt-tiny on CPU.
        self.language_model = "gpt-tiny" if cpu else "gpt2-small"
        self.sequences, self.sequence_batch = (16, 8) if cpu else (240, 12)


def log(out, message):
    line = f"[{time.strftime('%H:%M:%S')}] {message}"
    print(line, flush=True)
    with open(out / "log.txt", "a") as handle:
        handle.write(line + "\n")


# -- Steps: each a list of commands, run in order in the step's time, and a reading of its figures -----------------


def stacks_for(args):
    """{role: stack name}: the stacks the steps run, PyTorch preinstalled on a GPU machine (torch-2.11)."""
    return {
        "torch": "torch-2.13" if args.cpu else "torch-2.11",
        "keras-jax": "keras-3-jax",
        "flax": "flax-0.12",
        "keras-torch": "keras-3-torch",
    }


def python_options(args, stacks):
    """parity.py's --python for every stack: the machine's interpreter on a GPU, the env files' venvs on CPU."""
    return [] if args.cpu else ["--python", *(f"{stack}={args.python}" for stack in stacks)]


def parity_step(args, sizes, role, precisions):
    return workload_parity_step(args, sizes, role, precisions, "parity", sizes.model, sizes.images, sizes.batch_size)


def gpt2_step(args, sizes, role):
    """GPT-2 124M (fused attention, the default) in fp32 and AMP against the framework's own nanoGPT-style script:
    parity, tokens/s and MFU by nanoGPT's accounting (6 N + 12 L T d per token) against the GPU's datasheet peak."""
    name, commands, ratios = workload_parity_step(
        args, sizes, role, ["fp32", "amp"], "gpt2", sizes.language_model, sizes.sequences, sizes.sequence_batch
    )

    def figures(out):
        return f"{ratios(out)}; {language_model_figures(args, sizes, out / f'{name}.csv')}"

    return name, commands, figures


def language_model_figures(args, sizes, table):
    """Each row's tokens/s and MFU (nanoGPT's accounting), from the parity table's sequences/s."""
    from dlbench import peaks, specs

    shape = harness.INPUT_SHAPES[sizes.language_model]
    spec = specs.model_spec(sizes.language_model, harness.classes(sizes.language_model))
    per_token = specs.training_flops_per_token(spec, shape)
    gpu = None if args.cpu else harness.gpu_description().split(",")[0]
    figures = []
    for row in read_rows(table):
        if not row["ratio"]:
            continue
        tokens = float(row["workflow_images_per_s"]) * shape[0]
        peak, _ = peaks.peak(gpu, "fp16" if row["precision"] == "amp" else "tf32")  # AMP is float16 on a GPU
        mfu = f", MFU {per_token * tokens / peak:.1%}" if peak else ""
        figures.append(f"{row['precision']} {tokens:,.0f} tokens/s{mfu}")
    return "; ".join(figures)


def workload_parity_step(args, sizes, role, precisions, kind, model, examples, batch_size):
    """benchmarks/parity.py for one stack on one model: the step's name, its commands and its ratios' figures."""
    stack = stacks_for(args)[role]
    name = f"{kind}-{stack}"

    def commands(out):
        return [
            [
                args.python,
                BENCHMARKS / "parity.py",
                "--device",
                sizes.device,
                "--stacks",
                stack,
                *python_options(args, [stack]),
                "--models",
                model,
                "--precisions",
                *(["fp32"] if args.cpu else precisions),
                f"--image-size={sizes.image_size}",
                f"--images={examples}",
                f"--batch-size={batch_size}",
                f"--warmup={sizes.warmup}",
                f"--trials={sizes.trials}",
                "--rounds=1",
                "--no-record",  # a lease's minutes: the record side (train.py's figure) is for a longer loan
                "--threads=framework",
                f"--venv-root={args.venv_root}",
                "--csv",
                out / f"{name}.csv",
            ]
        ]

    def figures(out):
        return "; ".join(
            f"{row['precision']} {row['ratio'][:5]}" if row["ratio"] else f"{row['precision']} not run"
            for row in read_rows(out / f"{name}.csv")
        )

    return name, commands, figures


def inside_step(name, args, runs):
    """A step whose measurements run in this script's `inside` mode, one fresh process each in the stack's
    interpreter, appending to OUT/<name>.csv; `runs` lists (stack, inside options, extra environment)."""

    def commands(out):
        entries = harness.stacks()
        # each stack's interpreter found (and, on a GPU, checked by importing its framework) once for all its runs
        pythons = {stack: stack_python(args, stack, entries[stack]) for stack in {stack for stack, _, _ in runs}}
        return [
            [pythons[stack], __file__, "inside", "--adapter", entries[stack]["adapter"], "--stack", stack]
            + ["--csv", out / f"{name}.csv", *env_options({**entries[stack]["environment"], **environment}), *options]
            for stack, options, environment in runs
        ]

    return name, commands


def stack_python(args, stack, entry):
    """The stack's interpreter: on a GPU the machine's (checked as config existing_envs is), on CPU its env file's
    venv (built if needed)."""
    existing = {} if args.cpu else {stack: args.python}
    python, problem = harness.interpreter(stack, entry, "cpu" if args.cpu else "gpu", existing, args.venv_root)
    if problem:
        raise RuntimeError(f"{stack}: {problem}")
    return python


def env_options(environment):
    return [f"--env={key}={value}" for key, value in environment.items()]


def epoch_options(sizes, variant, model=None, images=None):
    return [
        "epochs",
        f"--device={sizes.device}",
        f"--variant={variant}",
        f"--model={model or sizes.model}",
        f"--image-size={sizes.image_size}",
        f"--images={images or sizes.images}",
        f"--batch-size={sizes.batch_size}",
        f"--warmup={sizes.warmup}",
        f"--trials={sizes.trials}",
    ]


def compile_step(args, sizes):
    torch = stacks_for(args)["torch"]
    precision = "" if args.cpu else "-amp"
    modes = ["eager", "compile", "compile-reduce-overhead", "compile-max-autotune"]
    entry = harness.stacks()[torch]
    # The modes the stack runs on the device (on CPU, reduce-overhead's CUDA graphs are not there)
    variants = [
        f"{mode}{precision}"
        for mode in modes
        if unsupported_reason(entry, f"{mode}{precision}", sizes.device, "device") is None
    ]
    images = sizes.images * 4 if not args.cpu else None  # ResNet-20's epochs are short: more images per epoch
    runs = [(torch, epoch_options(sizes, variant, sizes.small_model, images), {}) for variant in variants]
    name, commands = inside_step("compile-modes", args, runs)

    def figures(out):
        return "; ".join(
            f"{row['variant']} {float(row['images_per_s']):,.0f} img/s, first epoch {float(row['first_epoch_s']):.1f} s"
            if row["images_per_s"]
            else f"{row['variant']} {row['error']}"
            for row in read_rows(out / f"{name}.csv")
        )

    return name, commands, figures


# Torch's process group at one replica, as torchrun would set it up for one process (init_process_group's env://).
ONE_PROCESS_GROUP = {
    "RANK": "0",
    "WORLD_SIZE": "1",
    "LOCAL_RANK": "0",
    "LOCAL_WORLD_SIZE": "1",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29531",
}


def mechanism_step(args, sizes):
    from dlbench import parallel

    stacks = stacks_for(args)
    mechanism = {parallel.ONE_REPLICA_MECHANISM_VARIABLE: "1"}
    runs = []
    for role, variant, group in (
        ("torch", "eager-amp", ONE_PROCESS_GROUP),
        ("flax", "xla-amp", {}),
        ("keras-jax", "xla-amp", {}),
    ):
        variant = variant.replace("-amp", "") if args.cpu else variant
        for environment in ({}, {**mechanism, **group}):
            runs.append((stacks[role], epoch_options(sizes, variant), environment))
    name, commands = inside_step("one-replica-mechanisms", args, runs)

    def figures(out):
        rows = read_rows(out / f"{name}.csv")
        plain = {row["stack"]: row for row in rows if row["through_mechanism"] == "False"}
        said = []
        for row in rows:
            if row["through_mechanism"] == "True" and row["stack"] in plain and row["images_per_s"]:
                ratio = float(row["images_per_s"]) / float(plain[row["stack"]]["images_per_s"])
                said.append(f"{row['stack']} {row['data_parallel'] or 'no mechanism read'}: {ratio:.3f} of plain")
        return "; ".join(said)

    return name, commands, figures


def nvml_step(args, sizes):
    torch = stacks_for(args)["torch"]
    name, commands = inside_step("nvml", args, [(torch, ["nvml", f"--device={sizes.device}"], {})])

    def figures(out):
        return "; ".join(f"{row['check']}: {row['finding']}" for row in read_rows(out / f"{name}.csv"))

    return name, commands, figures


def max_batch_step(args, sizes):
    torch = stacks_for(args)["torch"]
    variant = "eager" if args.cpu else "eager-amp"
    options = ["max-batch", f"--device={sizes.device}", f"--variant={variant}", f"--model={sizes.model}"]
    options += [f"--image-size={sizes.image_size}", f"--limit={sizes.max_batch_limit}"]
    name, commands = inside_step("max-batch", args, [(torch, options, {})])

    def figures(out):
        rows = read_rows(out / f"{name}.csv")
        found = [row for row in rows if row["status"] == "result"]
        tried = ", ".join(f"{row['batch_size']} {row['status']}" for row in rows if row["status"] != "result")
        return f"largest {found[0]['batch_size']} ({found[0]['error']}); tried {tried}" if found else tried

    return name, commands, figures


def workflow_config(args, sizes):
    stacks = stacks_for(args)
    chosen = [stacks["torch"], stacks["flax"], stacks["keras-jax"]]
    config = {
        "stacks": chosen,
        "datasets": ["synthetic-32x32x3"],
        "models": ["resnet20"],
        "devices": [sizes.device],
        "batch_sizes": [128],
        "epochs": [3],
        "variants": ["eager", "xla"] if args.cpu else ["eager-amp", "xla-amp"],
        "repeats": 1,
        "race": {"enabled": False},
        "ops": {"stacks": []},
        "synthetic": {"classes": 10, "train_size": 1024 if args.cpu else 8192, "test_size": 256, "seed": 0},
        "venv_root": str(args.venv_root),
    }
    if not args.cpu:
        config["existing_envs"] = {stack: str(args.python) for stack in [*chosen, "tools"]}
    return config


def workflow_step(args, sizes):
    tables = "results/tables/summary.csv"

    def commands(out):
        import yaml

        (out / "workflow").mkdir(exist_ok=True)
        config = out / "workflow" / "config.yaml"
        config.write_text(yaml.safe_dump(workflow_config(args, sizes)))
        command = [args.python, "-m", "snakemake", tables, "--configfile", config, "--cores", str(os.cpu_count())]
        command += ["--resources", "gpu=1"]
        if args.cpu:
            return [command + ["--dry-run"]]
        # A step killed at its limit leaves Snakemake's lock behind: the next call's study would not start
        unlock = [args.python, "-m", "snakemake", "--unlock", "--configfile", config]
        return [unlock, command]

    def figures(out):
        if args.cpu:  # a dry run: the jobs it planned
            lines = (out / "steps" / "workflow.log").read_text().splitlines()
            planned = [line.split()[-1] for line in lines if line.startswith("total ")]
            return f"dry run, {planned[-1] if planned else 'no'} jobs planned"
        summary = harness.REPO / tables
        if not summary.exists():
            return "no tables (see the log)"
        for folder in ("tables", "runs"):  # the report renders from these where pandoc and typst are
            shutil.copytree(harness.REPO / "results" / folder, out / "workflow" / folder, dirs_exist_ok=True)
        rows = read_rows(summary)
        return "; ".join(
            f"{row['experiment_id']}: {float(row['train_images_per_s_gmean']):,.0f} img/s"
            if row["train_images_per_s_gmean"]
            else f"{row['experiment_id']}: {row['statuses']}"
            for row in rows
        )

    return "workflow", commands, figures


def install_step(args):
    def commands(out):
        pip = [args.python, "-m", "pip", "install", "-q", "--no-index", "--find-links", args.wheels]
        each = [pip + [requirement] for requirement in CARRIED]
        return [*each, pip + ["--no-deps", *CARRIED_WITHOUT_DEPENDENCIES], [args.python, "-c", IMPORTS_CHECK]]

    def figures(out):
        lines = (out / "steps" / "install.log").read_text().splitlines()
        return next((line for line in reversed(lines) if line.startswith("imports:")), f"wheels from {args.wheels}")

    return "install", commands, figures


def steps(args):
    """The steps after the install, in the order they run: most value per second of a lent device first. PyTorch's
    fp32 and AMP parity rows come after its channels-last row; Keras on PyTorch's AMP row is last of its step."""
    sizes = Sizes(args.cpu)
    return [
        parity_step(args, sizes, "torch", ["fastest", "fp32", "amp"]),
        parity_step(args, sizes, "keras-jax", ["fp32", "amp"]),
        gpt2_step(args, sizes, "torch"),
        gpt2_step(args, sizes, "keras-jax"),
        parity_step(args, sizes, "flax", ["fp32", "amp"]),
        parity_step(args, sizes, "keras-torch", ["fp32", "amp"]),
        nvml_step(args, sizes),
        mechanism_step(args, sizes),
        max_batch_step(args, sizes),
        compile_step(args, sizes),
        workflow_step(args, sizes),
    ]


LIMITS_S = {  # each step's time on a GPU (three times as much on CPU, whose processes start slower)
    "install": 60,
    "parity-torch-2.11": 150,  # about 40 s a row on an H200: channels-last AMP, then fp32 and AMP
    "parity-keras-3-jax": 170,
    "gpt2-torch-2.11": 150,  # estimated: two rows of 240 sequences of 1024 tokens, one process a side
    "gpt2-keras-3-jax": 170,
    "parity-flax-0.12": 170,
    "parity-keras-3-torch": 240,  # on an H200 its fp32 row alone took most of 120 s (Keras fit feeds from the host)
    "nvml": 60,
    "one-replica-mechanisms": 200,
    "max-batch": 180,  # about 12 s a probe on an H200, 8 to 10 probes
    "compile-modes": 200,
    "workflow": 150,  # 13 of 15 jobs in 48 s on an H200
}


def read_rows(path):
    if not Path(path).exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def append_row(path, row):
    """One measurement's row, appended at once: a step killed later keeps it."""
    new = not Path(path).exists()
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def run_command(command, log_path, seconds):
    """Run one command of a step into its log, killing its whole process group at the deadline: 'ok', 'failed (exit
    N)' or 'timed out'."""
    with open(log_path, "a") as handle:
        handle.write(f"$ {' '.join(map(str, command))}\n")
        handle.flush()
        child = subprocess.Popen(
            [str(word) for word in command],
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=harness.REPO,
            start_new_session=True,
        )
        try:
            code = child.wait(timeout=max(seconds, 1))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return "timed out"
    return "ok" if code == 0 else f"failed (exit {code})"


def write_summary(out, rows):
    """summary.csv and summary.md, and everything under OUT packed in all.tgz: a device that hands back only a few
    files of OUT still brings every step's log and figures."""
    harness.write_csv(out / "summary.csv", rows, SUMMARY_COLUMNS)
    lines = ["| step | status | s | figures |", "|---|---|---:|---|"]
    lines += [f"| {row['step']} | {row['status']} | {row['seconds']} | {row['figures']} |" for row in rows]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    with tarfile.open(out / "all.tgz.part", "w:gz") as archive:
        for path in sorted(out.iterdir()):
            if not path.name.startswith("all.tgz"):
                archive.add(path, arcname=path.name)
    (out / "all.tgz.part").replace(out / "all.tgz")


def run_step(out, args, step, started):
    """One step's commands under its limit (cut to what the budget has left); its summary row."""
    name, commands, figures = step
    left = args.budget_s - (time.monotonic() - started)
    limit = min(LIMITS_S.get(name, 120) * (1 if not args.cpu else 3), left)
    row = {"step": name, "status": "not reached (budget spent)", "seconds": 0, "figures": "", "log": ""}
    if limit < 10:
        return row
    log(out, f"step {name}: up to {limit:.0f} s")
    step_started, log_path = time.monotonic(), out / "steps" / f"{name}.log"
    for stale in (log_path, out / f"{name}.csv"):  # a step run again starts afresh
        stale.unlink(missing_ok=True)
    status = "ok"  # a step with nothing to run
    try:
        planned = commands(out)
    except (RuntimeError, OSError) as error:  # e.g. an interpreter that cannot run the step's stack
        planned, status = [], f"failed: {error}"
    for command in planned:
        status = run_command(command, log_path, limit - (time.monotonic() - step_started))
        if status != "ok" and name != "install":  # a wheel that fails to install leaves the others to try
            break
    try:
        found = figures(out)
    except (OSError, KeyError, ValueError, IndexError) as error:
        found = f"figures unreadable: {error}"
    seconds = time.monotonic() - step_started
    row.update(status=status, seconds=f"{seconds:.0f}", figures=found, log=str(log_path.relative_to(out)))
    log(out, f"step {name}: {status} in {seconds:.0f} s; {found}")
    return row


def run(args):
    out = args.out.resolve()
    (out / "steps").mkdir(parents=True, exist_ok=True)
    # XLA's compilations kept across the steps' processes: a program measured again (the mechanisms' plain runs are
    # parity's workflow side) skips its half-minute build. Steady epochs, the figures compared, are not affected.
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(tempfile.gettempdir()) / "dlbench-acceptance-xla"))
    started, rows = time.monotonic(), []
    log(out, f"on {harness.gpu_description() if not args.cpu else 'cpu'}, budget {args.budget_s} s")
    if not args.cpu:  # first, whatever --only says: planning the other steps imports what the wheels bring
        rows.append(run_step(out, args, install_step(args), started))
        write_summary(out, rows)
    chosen = [step for step in steps(args) if not args.only or step[0] in args.only]
    log(out, f"{len(chosen)} steps: {', '.join(step[0] for step in chosen)}")
    for step in chosen:
        rows.append(run_step(out, args, step, started))
        write_summary(out, rows)
    log(out, f"done in {time.monotonic() - started:.0f} s: {out / 'summary.md'}")


# -- Inside a stack's interpreter: one measurement per process ----------------------------------------------------


def inside(args):
    os.environ.update(dict(item.split("=", 1) for item in args.env))  # the stack's variables, before its imports
    measured = {"epochs": measure_epochs, "nvml": check_nvml, "max-batch": search_max_batch}[args.measurement]
    for row in measured(args):
        append_row(args.csv, {"stack": args.stack, **row})


def epoch_setup(args, images, batch_size):
    """(adapter, epoch(order), parameters, engaged()) of the harness's epoch of the adapter (benchmarks/harness.py)."""
    adapter = harness.import_adapter(args.adapter, args.device, "framework", {})
    arrays = harness.synthetic_arrays(args.model, harness.input_shape(args.model, args.image_size), images, batch_size)
    experiment = {"device": args.device, "variant": args.variant, "data_placement": "device"}
    return adapter, *harness.harness_epoch(adapter, args.model, arrays, experiment, batch_size)


def measure_epochs(args):
    """Steady images/s (median of --trials epochs) and the first epoch's seconds (compilation included) of one
    variant; with the one-replica switch set, through the stack's data-parallel mechanism."""
    from dlbench import parallel

    row = {"variant": args.variant, "through_mechanism": parallel.through_mechanism(1), "data_parallel": ""}
    try:
        adapter, epoch, parameters, engaged = epoch_setup(args, args.images, args.batch_size)
        seconds = harness.epoch_timer(adapter, args.device, epoch, args.images, args.batch_size)
        first = seconds()
        steady = statistics.median(seconds() for _ in range(args.warmup - 1 + args.trials))
    except Exception as error:  # a failed variant is a finding of the step, not the end of it
        yield {**row, "images_per_s": "", "first_epoch_s": "", "parameters": "", "error": repr(error)[:300]}
        return
    images = args.images // args.batch_size * args.batch_size
    row["data_parallel"] = engaged().get("data_parallel", "")
    yield {**row, "images_per_s": images / steady, "first_epoch_s": first, "parameters": parameters, "error": ""}


def search_max_batch(args):
    """The largest batch that trains a step, doubling then bisecting (max_batch.largest_fitting), each size in a
    fresh process whose outcome is written as it comes; the first out-of-memory error is kept."""
    from max_batch import largest_fitting

    first_error = []

    def fits(batch):
        probe = [sys.executable, __file__, "inside", "--adapter", args.adapter, "--stack", args.stack, "probe"]
        probe += [f"--batch-size={batch}", f"--device={args.device}", f"--variant={args.variant}"]
        probe += [f"--model={args.model}", f"--image-size={args.image_size}"]
        child = run_child(probe, capture_stdout=True)
        result = child.result() or {"status": "error", "error": f"probe {child.description}: {child.stderr_tail(3)}"}
        status = result.get("status", "error")
        if status == "oom" and not first_error:
            first_error.append(result["error"])
        append_row(
            args.csv,
            {"stack": args.stack, "batch_size": batch, "status": status, "error": result.get("error", "")[:300]},
        )
        if status == "error":
            raise RuntimeError(result.get("error"))
        return status == "ok"

    good, bad = largest_fitting(
        fits, 256 if args.device == "gpu" else 16, args.limit, 64 if args.device == "gpu" else 8
    )
    reason = f"first out of memory at {bad}: {first_error[0][:200]}" if bad else f"no out of memory up to {args.limit}"
    return [{"batch_size": good, "status": "result", "error": reason}]


def probe(args):
    """Train one epoch of one batch of --batch-size in this process: ok, oom (the framework's own error, adapter.is_oom,
    or a MemoryError) or error."""
    adapter = None
    try:
        adapter, epoch, _, _ = epoch_setup(args, args.batch_size, args.batch_size)
        harness.epoch_timer(adapter, args.device, epoch, args.batch_size, args.batch_size)()
        outcome = {"status": "ok"}
    except Exception as error:  # the probe's outcome, reported to the search
        out_of_memory = isinstance(error, MemoryError) or (adapter is not None and adapter.is_oom(error))
        outcome = {"status": "oom" if out_of_memory else "error", "error": f"{type(error).__name__}: {error}"[:2000]}
    print(json.dumps(outcome))


def check_nvml(args):
    """The NVML paths of the run record on this GPU (or a scripted fake on CPU): energy counter against power
    integrated over the samples during a load, the idle draw before it, the throttle reasons seen, and a process
    started on the GPU outside this job's tree under each foreign_gpu_process policy."""
    from dlbench import contention, telemetry

    nvml = telemetry.load_nvml()[0] if args.device == "gpu" else fake_nvml()
    if nvml is None:
        yield {"check": "nvml", "finding": f"unusable: {telemetry.load_nvml()[1]}"}
        return
    sampler = telemetry.Sampler(rate_hz=20, nvml=nvml).start()
    sampler.mark(telemetry.IDLE_PHASE)
    time.sleep(3)
    sampler.mark("load")
    load_device(args.device, seconds=6)
    sampler.mark("after")
    sampler.stop()
    counted = telemetry.counter_growth(sampler.rows, {"load"}, "gpu_energy_mj")
    integrated = telemetry.energy_j(sampler.rows, {"load"})
    energy = telemetry.energy_summary(sampler.rows, {"load"}, 1)
    counter = f"{counted / 1000:.0f} J counted ({counted / 1000 / integrated:.3f} of" if counted else "no counter ("
    yield {"check": "energy", "finding": f"{counter} {integrated:.0f} J integrated over {len(sampler.rows)} samples)"}
    yield {"check": "idle draw", "finding": f"{energy['gpu_idle_power_w']:.0f} W"}
    found = telemetry.gpu_contention(sampler, {"load"})
    yield {"check": "throttle reasons", "finding": ", ".join(found["throttle_reasons"] or []) or "none seen"}
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    yield {"check": "provenance", "finding": json.dumps(telemetry.gpu_provenance(nvml, handle))}
    yield from foreign_process_checks(args.device, nvml, handle, contention)


def foreign_process_checks(device, nvml, handle, contention):
    def applied(policy, timeout_s, tree):
        try:
            beside = contention.wait_for_free_gpu(nvml, handle, tree, policy, timeout_s, print)
            return f"ran beside {contention.describe_gpu_processes(beside)}" if beside else "ran (nothing beside)"
        except contention.GpuBusy as busy:
            return f"stopped: {busy}"

    holder = start_foreign_holder(device)
    try:
        tree = contention.tree_members(contention.job_root())
        for policy, timeout_s in (("refuse", 0), ("wait", 3), ("record", 0)):
            yield {"check": f"foreign process, {policy}", "finding": applied(policy, timeout_s, tree)}
    finally:
        holder.kill()
    if device == "cpu":  # the fake lists the holder no more
        nvml.scripts["processes"], nvml.calls["processes"] = [()], 0
    tree = contention.tree_members(contention.job_root())
    yield {"check": "foreign process gone, wait", "finding": applied("wait", 20, tree)}


def start_foreign_holder(device):
    """A process holding GPU memory outside this job's tree: started through a shell that exits at once, so its
    parent is no process of ours (a job's own children are in its tree)."""
    code = (
        "import time, torch; x = torch.ones(2**28, device='cuda'); torch.cuda.synchronize(); time.sleep(60)"
        if device == "gpu"
        else "import time; time.sleep(60)"
    )
    shell = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "{code}" >/dev/null 2>&1 & echo $!'], capture_output=True, text=True
    )
    holder = Holder(int(shell.stdout))
    time.sleep(8 if device == "gpu" else 0.2)  # until it holds the memory
    return holder


class Holder:
    def __init__(self, pid):
        self.pid = pid

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        time.sleep(1)


def load_device(device, seconds):
    """Keep the device busy for `seconds`: matrix products on the GPU, NumPy's on CPU."""
    end = time.monotonic() + seconds
    if device == "gpu":
        import torch

        a = torch.randn(8192, 8192, device="cuda")
        while time.monotonic() < end:
            for _ in range(20):
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()
        return
    import numpy as np

    a = np.random.default_rng(0).normal(size=(256, 256))
    while time.monotonic() < end:
        a = np.tanh(a @ a)


def fake_nvml():
    """The scripted GPU of the test suite (tests/support/fake_nvml.py): 300 W under load, an energy counter, the power
    cap's throttle bit, and a foreign process listed until the check kills it."""
    sys.path.insert(0, str(harness.REPO / "tests" / "support"))
    from fake_nvml import FakeNVML

    listed = [((os.getpid() + 10**6, 1024),)]
    fake = FakeNVML(
        utilisation=[90],
        memory_mb=[2048],
        power_mw=[300_000],
        processes=listed,
        throttle=[0x4],
        energy_mj=[1000 * step for step in range(10**6)],
    )
    fake.nvmlInit()
    return fake


# -- Wheels for the offline GPU machine ----------------------------------------------------------------------------


def fetch_wheels(args):
    """Download CARRIED (with their dependencies) and CARRIED_WITHOUT_DEPENDENCIES for CPython 3.12 on x86-64 Linux
    into DIR, then drop what the lent machine has preinstalled; prints DIR's size (at most 64 MiB may travel)."""
    folder = args.folder
    folder.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    # connection_pool (a Snakemake dependency) ships no wheel: build its pure-Python one here.
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", folder, "connection_pool>=0.0.3"], check=True)
    download = [*pip, "download", "-q", "--only-binary=:all:", "--python-version", "3.12", "-d", folder]
    download += [option for platform in (*WHEEL_PLATFORMS, "any") for option in ("--platform", platform)]
    download += ["--find-links", folder]
    subprocess.run([*download, *CARRIED], check=True)
    subprocess.run([*download, "--no-deps", *CARRIED_WITHOUT_DEPENDENCIES], check=True)
    for wheel in folder.glob("*.whl"):
        if wheel.name.split("-")[0].lower() in PREINSTALLED:
            wheel.unlink()
    size = sum(wheel.stat().st_size for wheel in folder.glob("*.whl"))
    print(f"{folder}: {size / 2**20:.1f} MiB of wheels")


def parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch-wheels", help="download the wheels the lent GPU machine lacks")
    fetch.add_argument("folder", type=Path, nargs="?", default=harness.REPO / ".gpu-wheels")
    go = commands.add_parser("run", help="run the acceptance steps")
    go.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-acceptance")))
    go.add_argument("--cpu", action="store_true", help="tiny sizes on CPU, a fake NVML, the workflow as a dry run")
    go.add_argument("--budget-s", type=float, default=550, help="the whole run's seconds; steps past it are skipped")
    go.add_argument("--only", nargs="+", help="run only these steps")
    go.add_argument("--python", type=Path, default=Path(sys.executable), help="the stacks' interpreter on a GPU")
    go.add_argument("--wheels", type=Path, default=harness.REPO / ".gpu-wheels")
    go.add_argument(
        "--venv-root", type=Path, default=Path(os.environ.get("DLBENCH_VENV_ROOT", harness.REPO / ".venvs"))
    )
    within = commands.add_parser("inside", help="(internal) one measurement in a stack's interpreter")
    within.add_argument("--stack", required=True)
    within.add_argument("--adapter", required=True)
    within.add_argument("--csv", type=Path)
    within.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    measurements = within.add_subparsers(dest="measurement", required=True)
    for name in ("epochs", "probe", "max-batch", "nvml"):
        measurement = measurements.add_parser(name)
        measurement.add_argument("--device", default="gpu")
        measurement.add_argument("--variant", default="eager")
        measurement.add_argument("--model", default="resnet50")
        measurement.add_argument("--image-size", type=int, default=224)
        measurement.add_argument("--images", type=int, default=1536)
        measurement.add_argument("--batch-size", type=int, default=128)
        measurement.add_argument("--warmup", type=int, default=1)
        measurement.add_argument("--trials", type=int, default=3)
        measurement.add_argument("--limit", type=int, default=8192)
    return parser


def main():
    args = parser().parse_args()
    if args.command == "fetch-wheels":
        fetch_wheels(args)
    elif args.command == "run":
        run(args)
    elif args.measurement == "probe":
        probe(args)
    else:
        inside(args)


if __name__ == "__main__":
    main()
