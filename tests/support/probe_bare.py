"""Run inside a stack's env: build the benchmarks' hand-written networks of the models named, as parity.py's bare side
builds them (benchmarks/bare/<adapter>.py, make_epoch), without training them, and print as one JSON line each one's
trainable parameters beside its spec's. Their training loop is the same for every model (the parity tests run it).

    <env python> tests/support/probe_bare.py ADAPTER MODEL...   (the stack's variables set, scripts/ on PYTHONPATH)
"""

import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import harness  # noqa: E402 (after the path above)
from dlbench import specs  # noqa: E402

IMAGE_SIZE, EXAMPLES, BATCH_SIZE = 32, 16, 8  # ResNet-50's side: the parity tests' tiny inputs


def main():
    adapter, models = sys.argv[1], sys.argv[2:]
    harness.import_adapter(adapter, "cpu", "1", {})
    bare = importlib.import_module(f"bare.{adapter}")
    counts = {}
    for model in models:
        shape = harness.input_shape(model, IMAGE_SIZE)
        arrays = harness.synthetic_arrays(model, shape, EXAMPLES, BATCH_SIZE)
        _, parameters = bare.make_epoch(arrays, BATCH_SIZE, harness.LEARNING_RATE, model, "cpu", False, False)
        spec = specs.model_spec(model, harness.classes(model))
        counts[model] = {"bare": int(parameters), "spec": specs.parameter_count(spec, shape)}
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
