"""Run inside a stack's env: build every model with one adapter and report parameter counts and logits.

    <env python> tests/probe_adapter.py ADAPTER > probe.json   (KERAS_BACKEND etc. set by the caller)
The driver-side tests compare the output with the neutral spec and across frameworks.
"""

import importlib
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from dlbench import specs  # noqa: E402

INPUT_SHAPES = [(28, 28, 1), (32, 32, 3)]
CLASSES = 10


def scripted_oom():
    """This framework's own out-of-memory exception, as it raises it, and an ordinary error."""
    backend = os.environ.get("KERAS_BACKEND", sys.argv[1])
    if backend == "pytorch":
        import torch

        return torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), RuntimeError("size mismatch")
    if backend == "mxnet_gluon":
        import mxnet as mx

        return mx.base.MXNetError("pooled_storage_manager.h:161: cudaMalloc retry failed: out of memory"), mx.base.MXNetError("shape mismatch")
    if backend == "jax":
        import jax

        return jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8.0GiB"), ValueError("x")
    import tensorflow as tf

    return tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[8192,8192]"), tf.errors.InvalidArgumentError(None, None, "x")


def main():
    adapter = importlib.import_module(f"dlbench.adapters.{sys.argv[1]}")
    adapter.configure("cpu", 1, 0)
    results = []
    for name in sorted(specs.MODELS):
        for shape in INPUT_SHAPES:
            spec = specs.model_spec(name, CLASSES)
            weights = specs.initial_weights(spec, shape, seed=7)
            images = np.random.default_rng(1).normal(size=(4, *shape)).astype(np.float32)
            for variant in ("eager", "graph"):
                experiment = {"device": "cpu", "variant": variant, "optimizer": "adam", "learning_rate": 0.001,
                              "momentum": 0.9}  # fmt: skip
                try:
                    model = adapter.build(spec, shape, weights, experiment)
                except ValueError as unsupported:
                    results.append({"model": name, "shape": shape, "variant": variant, "unsupported": str(unsupported)})
                    continue
                results.append({"model": name, "shape": shape, "variant": variant,
                                "parameters": adapter.parameter_count(model),
                                "logits": adapter.logits(model, images).tolist(), "engaged": adapter.engaged(model)})  # fmt: skip
    oom, other = scripted_oom()
    oom_detection = {"oom": adapter.is_oom(oom), "other": adapter.is_oom(other)}
    json.dump({"framework": adapter.FRAMEWORK, "version": adapter.version(), "results": results,
               "oom_detection": oom_detection}, sys.stdout)  # fmt: skip


if __name__ == "__main__":
    main()
