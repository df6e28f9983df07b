"""Run inside a stack's env (under torchrun for a torchrun stack, parallel.launch): one SGD step on one global batch
with REPLICAS data-parallel replicas, through Run and train_epoch as train.py calls them, for each of CASES
(`<model>:<variant>`): model `mlp` (no batch norm, no dropout) or `bn` (a convolution with batch norm).
tests/frameworks/test_replicas.py compares the weights of REPLICAS 2 with those of REPLICAS 1.

    PYTHONPATH=scripts <env python> tests/support/probe_replicas.py ADAPTER CASES REPLICAS OUTDIR  (stack variables set)
CASES comma-separated, each `<model>:<variant>` with the data staged on the device, or `<model>:<variant>:host` with
each batch handed over from the host; writes, from rank 0, OUTDIR/<case's stem>.npz (the weights, neutral layout,
batch-norm running statistics included) and OUTDIR/<case's stem>.json (loss, evaluation, engaged), the stem
`<model>_<variant>_replicas<N>` (then `_host` for a host case).
"""

import json
import sys
from pathlib import Path

import numpy as np
from dlbench import parallel, specs
from dlbench.adapters import load
from dlbench.run import Run

GLOBAL_BATCH, RATE, SEED, CLASSES, SHAPE = 16, 0.1, 7, 10, (28, 28, 1)
MODELS = {
    "mlp": specs.without_dropout(specs.model_spec("mlp", CLASSES)),
    "bn": [*specs.conv_bn(4, 3), specs.GlobalAvgPool(), specs.Dense(CLASSES)],
}


def arrays():
    rng = np.random.default_rng(3)
    train = {
        "train_x": rng.normal(size=(GLOBAL_BATCH, *SHAPE)).astype(np.float32),
        "train_y": rng.integers(0, CLASSES, GLOBAL_BATCH).astype(np.int32),
    }
    return dict(train, test_x=train["train_x"], test_y=train["train_y"])


def experiment(variant, replicas, placement="device"):
    return {
        "device": "cpu",
        "variant": variant,
        "optimizer": "sgd",
        "learning_rate": RATE,
        "momentum": 0.0,
        "weight_decay": 0.0,
        "data_placement": placement,
        "seed": SEED,
        "math_mode": {"tf32": False, "autotune": False},
        "replicas": replicas,
        "scaling": "strong",  # the same global batch whatever the replicas
        "batch_size": GLOBAL_BATCH,
    }


def main():
    adapter, cases = load(sys.argv[1]), [case.split(":") for case in sys.argv[2].split(",")]
    replicas, out = int(sys.argv[3]), Path(sys.argv[4])
    configured = Run(adapter, experiment(cases[0][1], replicas)).configure(1)  # once per process, as train.py does
    for model_name, variant, *placement in cases:
        setup, spec = experiment(variant, replicas, *placement), MODELS[model_name]
        run = Run(adapter, setup)
        model = run.build(spec, SHAPE)
        staged = run.stage(arrays())
        loss = adapter.train_epoch(model, staged, np.arange(GLOBAL_BATCH), parallel.global_batch_size(setup))
        adapter.sync("cpu")
        weights = adapter.weights(model, spec, SHAPE)
        evaluation = adapter.evaluate(model, staged, GLOBAL_BATCH)
        engaged = dict(configured, **adapter.engaged(model))
        if parallel.process_rank() == 0:
            stem = out / f"{model_name}_{variant}_replicas{replicas}{''.join(f'_{p}' for p in placement)}"
            np.savez(f"{stem}.npz", *[array for leaf in weights for array in leaf])
            result = {"loss": float(loss), "evaluation": [float(value) for value in evaluation], "engaged": engaged}
            Path(f"{stem}.json").write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
