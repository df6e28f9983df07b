"""Optimisation variants, one name per experiment: `<mode>[-nhwc][-amp]`.

Modes: `eager` (op by op), `graph` (the framework's own graph without XLA: MXNet hybridize with static_alloc and
static_shape, tf.function, Keras' compiled step on TensorFlow), `xla` (XLA: tf.function(jit_compile=True), Keras
jit_compile on TensorFlow or JAX), `compile` (torch.compile). Modifiers: `nhwc` runs a channels-first framework's
convolutions channels-last (MXNet layout NHWC, PyTorch channels_last memory format); `amp` is mixed precision,
float16 compute with loss scaling on GPU and bfloat16 on CPU (where float16 has no fast kernels), float32 weights.
Which stack implements which variant, and why a missing one is missing, is in envs/stacks.yaml.
"""

import re
from dataclasses import dataclass

MODES = ("eager", "graph", "xla", "compile")
PATTERN = re.compile(rf"({'|'.join(MODES)})(-nhwc)?(-amp)?")


@dataclass(frozen=True)
class Variant:
    mode: str
    channels_last: bool
    mixed_precision: bool

    @property
    def name(self):
        return self.mode + "-nhwc" * self.channels_last + "-amp" * self.mixed_precision


def parse(name):
    match = PATTERN.fullmatch(name)
    if match is None:
        raise ValueError(f"variant {name!r} is not <mode>[-nhwc][-amp] with mode one of {', '.join(MODES)}")
    return Variant(match.group(1), bool(match.group(2)), bool(match.group(3)))


def compute_dtype(variant, device):
    """The dtype matrix multiplications and convolutions run in."""
    if not variant.mixed_precision:
        return "float32"
    return "float16" if device == "gpu" else "bfloat16"


def unsupported_reason(stack, variant, device, data_placement="device"):
    """Why a stack (its envs/stacks.yaml entry) cannot run this variant with this data placement on this device;
    None when it can.

    `unsupported` keys are a whole variant (`eager-amp`), a mode or modifier (`xla`, `amp`, ...) or a data
    placement (`device-data`, `host-data`), optionally `<key> on <device>`."""
    reasons = stack.get("unsupported", {})
    parsed = parse(variant)
    keys = [variant, parsed.mode] + ["nhwc"] * parsed.channels_last + ["amp"] * parsed.mixed_precision
    keys.append(f"{data_placement}-data")
    for key in keys:
        for candidate in (f"{key} on {device}", key):
            if candidate in reasons:
                return reasons[candidate]
    if variant not in stack["variants"]:
        return "its adapter does not implement it"
    return None


def compiled_variant(entry):
    """A stack's compiled variant without modifiers: graph where it has one, else xla (Keras on JAX), else its
    first (PyTorch: eager, as its users run it)."""
    return next((variant for variant in ("graph", "xla") if variant in entry["variants"]), entry["variants"][0])
