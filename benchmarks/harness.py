"""What the benchmarks share: the stacks' interpreters, synthetic data, an adapter's epoch set up as scripts/train.py
sets it up, the clock, and running a measurement inside a stack's own interpreter."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The library without the driver's install of this checkout: an offline GPU machine runs the benchmarks with the
# Python it came with (docs/gpu-and-slurm.md).
sys.path.insert(1, str(REPO / "scripts"))

from dlbench import mathmode  # noqa: E402 (after the path above)
from dlbench.adapters import load  # noqa: E402
from dlbench.process import prepare_process, run_child, thread_count  # noqa: E402

LEARNING_RATE = 1e-3
INPUT_SHAPES = {
    "lenet": (28, 28, 1),
    "resnet20": (32, 32, 3),
    "resnet50": (256, 256, 3),
    "vit-tiny": (32, 32, 3),
    "gpt-tiny": (64,),  # a context of 64 tokens
    "gpt2-small": (1024,),
}
CLASSES = 10  # of the images
# Of the language models' tokens: bytes (as tiny-shakespeare's), GPT-2's BPE vocabulary for GPT-2 (its 124M).
VOCABULARIES = {"gpt-tiny": 256, "gpt2-small": 50257}


def stacks():
    from dlbench.study.configuration import load_stacks

    return load_stacks()


def interpreter(name, entry, device, existing, venv_root):
    """(python, None) for a stack on a device: the interpreter given for it in `existing` (validated as the workflow
    validates existing_envs), else its env file's venv under venv_root, built if needed; (None, reason) when neither."""
    from build_env import build_venv, check_existing, venv_prefix

    if name in existing:
        problem, _ = check_existing(existing[name], entry["framework"], entry["version"], entry["environment"])
        return (None, problem) if problem else (Path(existing[name]), None)
    env = entry["env"].get(device)
    if env is None:
        return None, f"no {device} env file: give its interpreter with --python {name}=PATH"
    env_file = REPO / "envs" / f"{env}.yaml"
    return build_venv(env_file, venv_prefix(venv_root, env_file)) / "bin" / "python", None


def chosen_stacks(parser, args, default):
    """(stacks.yaml entries, {stack: existing interpreter} from --python, the stacks to run: --stacks or `default`),
    refusing through the parser any stack that envs/stacks.yaml does not have."""
    existing = dict(item.split("=", 1) for item in args.python)
    entries = stacks()
    chosen = args.stacks or default(entries)
    unknown = sorted((set(chosen) | set(existing)) - set(entries))
    if unknown:
        parser.error(f"unknown stack(s) {', '.join(unknown)}; envs/stacks.yaml has {', '.join(entries)}")
    return entries, existing, chosen


def write_csv(path, rows, columns):
    """A benchmark's table of rows (dicts) as CSV, for --csv."""
    import csv

    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def input_shape(model, image_size):
    """A model's input (height, width, channels): ResNet-50 at `image_size`, the others at their own size."""
    return (image_size, image_size, 3) if model == "resnet50" else INPUT_SHAPES[model]


def classes(model):
    """A model's classes: the vocabulary of a language model."""
    return VOCABULARIES.get(model, CLASSES)


def synthetic_arrays(model, shape, images, batch_size):
    """`images` random examples of a model's input `shape` (a language model's: sequences of token ids whose targets
    are the next tokens) and one batch of test examples."""
    import numpy as np

    rng = np.random.default_rng(0)
    if model in VOCABULARIES:
        tokens = rng.integers(0, VOCABULARIES[model], (images + batch_size, shape[0] + 1)).astype(np.int32)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        return {
            "train_x": inputs[:images],
            "train_y": targets[:images],
            "test_x": inputs[images:],
            "test_y": targets[images:],
        }
    return {  # drawn in float32: ResNet-50's images in float64 first would take twice the memory and time
        "train_x": rng.standard_normal(size=(images, *shape), dtype=np.float32),
        "train_y": rng.integers(0, 10, images).astype(np.int32),
        "test_x": rng.standard_normal(size=(batch_size, *shape), dtype=np.float32),
        "test_y": rng.integers(0, 10, batch_size).astype(np.int32),
    }


def import_adapter(name, device, threads, environment):
    """The adapter, imported as train.py imports it: after the process set-up, configured with the default math mode
    and the thread policy `threads` ('framework' or a number, as config `cpu_threads`)."""
    threads = thread_count(threads)
    prepare_process(environment, threads, mathmode.DEFAULT)
    adapter = load(name)
    adapter.configure(device, threads, 0, mathmode.DEFAULT, 1)
    return adapter


def harness_epoch(adapter, model, arrays, experiment, batch_size):
    """(epoch(order), parameter count, engaged()): the adapter's staged data and model as train.py sets them up
    (dlbench/run.py), the initial weights of seed 0; engaged() reads back what ran (adapter.engaged)."""
    from dlbench import specs
    from dlbench.run import Run

    experiment = {
        "optimizer": "adam",
        "learning_rate": LEARNING_RATE,
        "momentum": 0.9,
        "weight_decay": 0.0,
        "seed": 0,
        **experiment,
    }
    run = Run(adapter, experiment)
    staged = run.stage(arrays)
    network = run.build(specs.model_spec(model, classes(model)), arrays["train_x"].shape[1:])
    return (
        (lambda order: adapter.train_epoch(network, staged, order, batch_size)),
        adapter.parameter_count(network),
        lambda: adapter.engaged(network),
    )


def epoch_timer(adapter, device, epoch, images, batch_size):
    """seconds() -> the synchronised duration of one more epoch, each over a fresh shuffle."""
    from dlbench.clock import timed
    from dlbench.data import epoch_order

    trial = iter(range(10**9))
    return lambda: timed(lambda: adapter.sync(device), epoch, epoch_order(images, batch_size, 0, next(trial)))[1]


def alternating(sides, rounds):
    """The sides of a paired measurement in the order they run: each round one fresh process a side, the order
    reversed every other round so that drift falls on both alike."""
    for round_index in range(rounds):
        yield from sides if round_index % 2 == 0 else reversed(sides)


def steady_rates(adapter, device, epoch, examples, batch_size, warmup, trials):
    """Examples/s of `epoch` over `examples` (whole batches) in `trials` epochs after `warmup` untimed ones (the first
    compiles): (over their median epoch, over their sum, as a run's record takes its steady window)."""
    import statistics

    seconds = epoch_timer(adapter, device, epoch, examples, batch_size)
    for _ in range(warmup):
        seconds()
    timed = [seconds() for _ in range(trials)]
    examples = examples // batch_size * batch_size
    return examples / statistics.median(timed), examples * trials / sum(timed)


def gpu_description():
    """The GPU's name and driver, as nvidia-smi gives them."""
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        return subprocess.run(query, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "no nvidia-smi"


def run_inside(python, environment, script, options):
    """The JSON line a benchmark's --inside measurement prints, run in `python` with the stack's variables and this
    checkout's library (the stack's venv has none of its own)."""
    child = run_child(
        [python, script, *options], environment=environment, pythonpath=[REPO / "scripts"], capture_stdout=True
    )
    if not child.ok:
        raise RuntimeError(child.stderr_tail(1) or "(no output)")
    return child.result()
