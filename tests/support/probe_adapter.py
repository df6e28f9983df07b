"""Run inside a stack's env: build every model with one adapter, in every variant the stack declares, and save
what the driver-side tests compare: parameter counts, inference logits, engagement, the weights after one SGD
step on the same batch (dropout removed: its masks come from each framework's own generator), the MLP's weights
after three steps of each optimiser setting, and after three steps on one batch in each data placement, through
train_epoch and through fixed_batch_steps.

    PYTHONPATH=scripts <env python> tests/support/probe_adapter.py ADAPTER VARIANTS OUTDIR   (KERAS_BACKEND etc. too)
writes OUTDIR/probe.json, OUTDIR/<model>_<size>x<channels>_step.npz, OUTDIR/optimizer_<case>.npz and
OUTDIR/placement_<placement>_<epoch|fixed>.npz.
"""

import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from dlbench import mathmode, specs, variants
from dlbench.adapters import load
from dlbench.run import Run

CLASSES = 10
# A shallow net with every construct of the deep ones (conv + batch norm, padded max pool, option-A and projection
# shortcuts, global pooling): well conditioned, so one SGD step agrees to float32 rounding
# (tests/frameworks/test_adapters.py).
TEST_MODELS = {
    "constructs": lambda classes: [
        *specs.conv_bn(8, 3),
        specs.Pool("max", 3, stride=1, padding=1),
        specs.Residual((*specs.conv_bn(16, 3, 2), *specs.conv_bn(16, 3, activation=None)), "zero_pad"),
        specs.Residual(
            (*specs.conv_bn(32, 3, 2), *specs.conv_bn(32, 3, activation=None)),
            tuple(specs.conv_bn(32, 1, 2, activation=None)),
        ),
        specs.GlobalAvgPool(),
        specs.Dense(classes),
    ]
}


def model_spec(name, classes):
    return TEST_MODELS[name](classes) if name in TEST_MODELS else specs.model_spec(name, classes)


# The constructs, then every model of the registry at each small input it names (specs.Model.test_shapes): a model
# added to the registry is tested without a list here to edit.
CASES = [("constructs", (8, 8, 3))] + [
    (name, shape) for name, model in specs.MODELS.items() for shape in model.test_shapes
]
STEP_BATCH, STEP_RATE = 8, 0.1
SEED = 7  # of the initial weights every framework starts from
MATH_OFF = {"tf32": False, "autotune": False}
FRAMEWORK_MODULES = ("jax", "mxnet", "paddle", "tensorflow", "torch")


def scripted_oom():
    """This framework's own out-of-memory exception, as it raises it, and an ordinary error."""
    backend = os.environ.get("KERAS_BACKEND", sys.argv[1])
    if backend in ("pytorch", "torch"):
        import torch

        return torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), RuntimeError(
            "size mismatch"
        )
    if backend == "mxnet_gluon":
        import mxnet as mx

        return mx.base.MXNetError(
            "pooled_storage_manager.h:161: cudaMalloc retry failed: out of memory"
        ), mx.base.MXNetError("shape mismatch")
    if backend in ("jax", "flax_nnx"):
        import jax

        return jax.errors.JaxRuntimeError(
            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8.0GiB"
        ), ValueError("x")
    if backend == "paddle_dygraph":  # Paddle raises its error codes as Python's own exceptions
        return MemoryError(
            "(ResourceExhausted) Out of memory error on GPU 0. Cannot allocate 2.000000GB memory on GPU 0"
        ), ValueError("(InvalidArgument) The [1] dimension of Input(X) must be equal to the [0] dimension of Input(Y)")
    import tensorflow as tf

    return tf.errors.ResourceExhaustedError(
        None, None, "OOM when allocating tensor with shape[8192,8192]"
    ), tf.errors.InvalidArgumentError(None, None, "x")


def fresh_compiler():
    """torch.compile's caches emptied: Dynamo stops compiling (and runs eagerly) after 8 recompilations of one code
    object, which the probe's many models in one process would reach; a run builds one model."""
    if sys.argv[1] == "pytorch" or os.environ.get("KERAS_BACKEND") == "torch":
        import torch

        torch._dynamo.reset()


def variants_to_build(model, spec, declared):
    """Every declared variant that means something for the model (variants.model_problem) for LeNet; all but
    torch.compile (minutes of compiling on CI's CPU) for ResNet-20; the base variant for the rest, and with attention
    its composed variant too, so that fused and composed attention both meet the reference."""
    meaningful = [variant for variant in declared if variants.model_problem(variant, spec) is None]
    if model == "lenet":
        return meaningful
    if model == "resnet20":
        return [variant for variant in meaningful if not variant.startswith("compile")]
    composed = f"{declared[0]}-composed"
    return declared[:1] + [composed] * (composed in meaningful)


def step_variant(declared):
    """The variant each model's one step trains in: the stack's base variant, but on JAX its jitted one (xla), the
    way JAX's users train; un-jitted JAX dispatches and compiles op by op, a debugging mode three to four times as
    slow on a CPU. The MLP's optimiser and placement steps below train in the base variant, so it is stepped too."""
    backend = os.environ.get("KERAS_BACKEND", sys.argv[1])
    return "xla" if backend in ("jax", "flax_nnx") and "xla" in declared else declared[0]


# Optimiser settings checked by three steps of the MLP: (optimizer, learning rate, momentum, weight decay).
OPTIMIZER_CASES = {
    "sgd-momentum-decay": ("sgd", 0.1, 0.9, 0.05),
    "adam-decay": ("adam", 0.01, 0.0, 0.05),
    "rmsprop": ("rmsprop", 0.01, 0.0, 0.0),
}


def experiment(variant, optimizer="sgd", rate=0.001, momentum=0.0, decay=0.0, data_placement="device"):
    return {
        "device": "cpu",
        "variant": variant,
        "optimizer": optimizer,
        "learning_rate": rate,
        "momentum": momentum,
        "weight_decay": decay,
        "data_placement": data_placement,
    }


def model_inputs(spec, shape, count, seed):
    """`count` inputs of a model: normal images, or token ids of its vocabulary (a language model)."""
    rng = np.random.default_rng(seed)
    if specs.reads_tokens(spec):
        return rng.integers(0, spec[0].vocabulary, (count, *shape)).astype(np.int32)
    return rng.normal(size=(count, *shape)).astype(np.float32)


def step_arrays(spec, shape):
    """One batch of STEP_BATCH examples, which is also the test split: a class per image, a next token per token."""
    if specs.reads_tokens(spec):  # the targets are the inputs shifted by one token
        tokens = model_inputs(spec, (STEP_BATCH * shape[0] + 1,), 1, 2)[0]
        arrays = {"train_x": tokens[:-1].reshape(STEP_BATCH, *shape), "train_y": tokens[1:].reshape(STEP_BATCH, *shape)}
    else:
        rng = np.random.default_rng(2)
        arrays = {
            "train_x": rng.normal(size=(STEP_BATCH, *shape)).astype(np.float32),
            "train_y": rng.integers(0, CLASSES, STEP_BATCH).astype(np.int32),
        }
    return dict(arrays, test_x=arrays["train_x"], test_y=arrays["train_y"])


def train_steps(adapter, spec, shape, setup, steps=1, fixed_batch=False):
    """The loss, the weights (neutral layout) and the evaluation after `steps` steps on one batch from the initial
    weights of SEED: through train_epoch over an order that repeats the batch, or through fixed_batch_steps."""
    run = Run(adapter, dict(setup, seed=SEED))
    model = run.build(spec, shape)
    staged, order = run.stage(step_arrays(spec, shape)), np.tile(np.arange(STEP_BATCH), steps)
    if fixed_batch:
        loss = adapter.fixed_batch_steps(model, staged, order, STEP_BATCH)(steps)
    else:
        loss = adapter.train_epoch(model, staged, order, STEP_BATCH)
    adapter.sync("cpu")
    return float(loss), adapter.weights(model, spec, shape), adapter.evaluate(model, staged, STEP_BATCH)


def save_weights(path, weights):
    np.savez(path, *[array for params in weights for array in params])


def progress(what, started):
    """A line of the probe's log: what it did and in how many seconds (which case holds the fixture up)."""
    print(f"probe: {what} in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def main():
    adapter = load(sys.argv[1])
    declared, out = sys.argv[2].split(","), Path(sys.argv[3])
    math_modes = {"default": adapter.configure("cpu", 1, 0, mathmode.DEFAULT, 1)}
    # Which frameworks the stack's process holds once configured: its own alone (an import of another is seconds of
    # every run's wall, and thread pools of its own beside the measured ones).
    frameworks_configured = sorted(name for name in FRAMEWORK_MODULES if name in sys.modules)
    results = []
    for name, shape in CASES:
        spec = model_spec(name, CLASSES)
        weights = specs.initial_weights(spec, shape, seed=SEED)
        images = model_inputs(spec, shape, 4, 1)
        for variant in variants_to_build(name, spec, declared):
            fresh_compiler()
            started = time.perf_counter()
            model = adapter.build(spec, shape, weights, experiment(variant))
            results.append(
                {
                    "model": name,
                    "shape": shape,
                    "variant": variant,
                    "parameters": adapter.parameter_count(model),
                    "logits": adapter.logits(model, images).tolist(),
                    "engaged": adapter.engaged(model),
                }
            )
            progress(f"{name} {shape} {variant}: built and inferred", started)
        stripped = specs.without_dropout(spec)
        setup = experiment(step_variant(declared), rate=STEP_RATE)
        started = time.perf_counter()
        loss, stepped, _ = train_steps(adapter, stripped, shape, setup)
        progress(f"{name} {shape}: one step", started)
        results[-1]["step_loss"] = loss
        save_weights(out / f"{name}_{shape[0]}x{shape[-1]}_step.npz", stepped)
    mlp, shape = specs.model_spec("mlp", CLASSES), (28, 28, 1)
    for case, (optimizer, rate, momentum, decay) in OPTIMIZER_CASES.items():
        setup = experiment(declared[0], optimizer, rate, momentum, decay)
        _, stepped, _ = train_steps(adapter, mlp, shape, setup, steps=3)
        save_weights(out / f"optimizer_{case}.npz", stepped)
    placements = {}
    for placement, fixed_batch in itertools.product(("device", "host"), (False, True)):
        setup = experiment(declared[0], rate=STEP_RATE, data_placement=placement)
        loss, stepped, evaluation = train_steps(adapter, mlp, shape, setup, steps=3, fixed_batch=fixed_batch)
        case = f"{placement}_{'fixed' if fixed_batch else 'epoch'}"
        placements[case] = {"loss": loss, "evaluation": list(evaluation)}
        save_weights(out / f"placement_{case}.npz", stepped)
    unsupported = {}
    for variant in ("graph", "xla", "compile", "eager-nhwc", "eager-amp"):
        if variant not in declared:
            try:
                adapter.build(mlp, shape, specs.initial_weights(mlp, shape, 0), experiment(variant))
                unsupported[variant] = None
            except ValueError as refusal:
                unsupported[variant] = str(refusal)
    # Last, as it changes this process: the policy switched off, its variables set as the runner sets them.
    os.environ.update(mathmode.environment(MATH_OFF))
    math_modes["off"] = adapter.configure("cpu", 1, 0, MATH_OFF, 1)
    oom, other = scripted_oom()
    oom_detection = {"oom": adapter.is_oom(oom), "other": adapter.is_oom(other)}
    (out / "probe.json").write_text(
        json.dumps(
            {
                "framework": adapter.FRAMEWORK,
                "version": adapter.version(),
                "cpu_kernels": adapter.cpu_kernels(),
                "results": results,
                "unsupported": unsupported,
                "oom_detection": oom_detection,
                "placements": placements,
                "input_work": adapter.INPUT_WORK,
                "math_modes": math_modes,
                "frameworks_configured": frameworks_configured,
            }
        )
    )


if __name__ == "__main__":
    main()
