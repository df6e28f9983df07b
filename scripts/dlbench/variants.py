"""Optimisation variants, one name per experiment: `<mode>[-<compile mode>][-nhwc][-syncbn][-composed][-amp]`.

Modes: `eager` (op by op), `graph` (the framework's own graph without XLA: MXNet hybridize with static_alloc and
static_shape, tf.function, Keras' compiled step on TensorFlow), `xla` (XLA: tf.function(jit_compile=True), Keras
jit_compile on TensorFlow or JAX, a jitted Flax step), `compile` (torch.compile; Keras jit_compile on PyTorch), in
torch.compile's default mode or, named after it, `compile-reduce-overhead` (CUDA graphs) or `compile-max-autotune`
(autotuned kernels, CUDA graphs). Modifiers: `nhwc` runs a channels-first framework's
convolutions channels-last (MXNet layout NHWC, PyTorch channels_last memory format); `syncbn`, with data-parallel
replicas, computes batch-norm statistics over the global batch, all-reducing them between the replicas (PyTorch's
SyncBatchNorm, Keras' synchronized BatchNormalization, a replica-context all-reduce in tf.nn, Gluon's SyncBatchNorm;
without it each replica normalises its own slice); `composed` runs attention as matmul, softmax, matmul written out
instead of the framework's fused attention kernel (the default); `amp` is mixed precision,
float16 compute with loss scaling on GPU and bfloat16 on CPU (where float16 has no fast kernels), float32 weights.
Which stack implements which variant, and why a missing one is missing, is in envs/stacks.yaml.
"""

import re
from dataclasses import dataclass

from . import specs

MODES = ("eager", "graph", "xla", "compile")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile(mode=...)
PATTERN = re.compile(rf"({'|'.join(MODES)})(?:-({'|'.join(COMPILE_MODES[1:])}))?(-nhwc)?(-syncbn)?(-composed)?(-amp)?")


@dataclass(frozen=True)
class Variant:
    mode: str
    channels_last: bool
    mixed_precision: bool
    compile_mode: str = "default"  # torch.compile's mode; "default" for every other mode
    sync_batch_norm: bool = False  # batch-norm statistics over the replicas' global batch
    composed_attention: bool = False  # attention written out (matmul, softmax, matmul), not the fused kernel

    @property
    def name(self):
        named_mode = self.mode if self.compile_mode == "default" else f"{self.mode}-{self.compile_mode}"
        modifiers = "-nhwc" * self.channels_last + "-syncbn" * self.sync_batch_norm
        modifiers += "-composed" * self.composed_attention + "-amp" * self.mixed_precision
        return named_mode + modifiers


def parse(name):
    match = PATTERN.fullmatch(name)
    if match is None or (match.group(2) and match.group(1) != "compile"):
        raise ValueError(
            f"variant {name!r} is not <mode>[-<compile mode>][-nhwc][-syncbn][-composed][-amp] with mode one of "
            f"{', '.join(MODES)} and, for compile only, compile mode one of {', '.join(COMPILE_MODES[1:])}"
        )
    mode, compile_mode, channels_last, sync_batch_norm, composed, mixed_precision = match.groups()
    return Variant(
        mode,
        bool(channels_last),
        bool(mixed_precision),
        compile_mode or "default",
        bool(sync_batch_norm),
        bool(composed),
    )


def compute_dtype(variant, device):
    """The dtype matrix multiplications and convolutions run in."""
    if not variant.mixed_precision:
        return "float32"
    return "float16" if device == "gpu" else "bfloat16"


def unsupported_reason(stack, variant, device, data_placement="device", replicas=1):
    """Why a stack (its envs/stacks.yaml entry) cannot run this variant with this data placement on this device
    with this many data-parallel replicas; None when it can.

    `unsupported` keys are a whole variant (`eager-amp`), a mode, compile mode or modifier (`xla`,
    `compile-max-autotune`, `composed`, `amp`, ...), a data placement (`device-data`, `host-data`) or, above one
    replica, `replicas` and `<variant or mode> with replicas`, optionally `<key> on <device>`."""
    reasons = stack.get("unsupported", {})
    parsed = parse(variant)
    compile_mode = [f"compile-{parsed.compile_mode}"] * (parsed.compile_mode != "default")
    if parsed.sync_batch_norm and replicas == 1:
        return "synchronised batch norm shares statistics between data-parallel replicas: it needs `replicas` above 1"
    keys = [variant, parsed.mode, *compile_mode] + ["nhwc"] * parsed.channels_last
    keys += ["syncbn"] * parsed.sync_batch_norm + ["composed"] * parsed.composed_attention
    keys += ["amp"] * parsed.mixed_precision
    keys.append(f"{data_placement}-data")
    if replicas > 1:
        keys += [
            "replicas",
            f"{variant} with replicas",
            f"{parsed.mode} with replicas",
            f"{data_placement}-data with replicas",
        ]
    for key in keys:
        for candidate in (f"{key} on {device}", key):
            if candidate in reasons:
                return reasons[candidate]
    if variant not in stack["variants"]:
        return "its adapter does not implement it"
    if replicas > 1 and "data_parallel" not in stack:
        return "its adapter has no data-parallel mechanism (envs/stacks.yaml `data_parallel`)"
    return None


def compiled_variant(entry):
    """A stack's compiled variant without modifiers: graph where it has one, else xla (Keras on JAX), else its
    first (PyTorch: eager, as its users run it)."""
    return next((variant for variant in ("graph", "xla") if variant in entry["variants"]), entry["variants"][0])


def model_problem(variant, spec):
    """Why a variant means nothing for a model (its neutral spec); None where it does: composed attention needs
    attention layers, a channels-last layout an image input."""
    parsed = parse(variant)
    if parsed.composed_attention and not specs.attention_layers(spec):
        return "composed attention: the model has no attention layers"
    if parsed.channels_last and specs.reads_tokens(spec):
        return "a channels-last layout: the model reads token ids, not images"
    return None
