"""Run inside a stack's env: build every model with one adapter and report parameter counts and logits.

    <env python> tests/probe_adapter.py ADAPTER > probe.json   (KERAS_BACKEND etc. set by the caller)
The driver-side tests compare the output with the neutral spec and across frameworks.
"""

import importlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from dlbench import specs  # noqa: E402

INPUT_SHAPES = [(28, 28, 1), (32, 32, 3)]
CLASSES = 10


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
    json.dump({"framework": adapter.FRAMEWORK, "version": adapter.version(), "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
