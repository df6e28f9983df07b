"""Run inside a stack's env: read a streamed image folder through the adapter's own loader, twice over the same
epoch and once over the evaluation split, and save the batches for tests/frameworks/test_stream.py to compare across
frameworks.

    PYTHONPATH=scripts <env python> tests/support/probe_stream.py ADAPTER VARIANT META_JSON OUTDIR
    (KERAS_BACKEND etc. set)
writes OUTDIR/stream.npz: train_images, train_labels (first pass), again_images (second pass), test_images,
test_labels.
"""

import json
import sys
from pathlib import Path

import numpy as np

from dlbench import data
from dlbench.adapters import load
from dlbench.run import Run

BATCH, WORKERS, SEED = 8, 2, 0


def gathered(batches):
    images, labels = zip(*batches)
    return np.concatenate(images), np.concatenate(labels)


def main():
    name, variant, meta_path, out = sys.argv[1:5]
    adapter, meta = load(name), json.loads(Path(meta_path).read_text())
    experiment = {"device": "cpu", "batch_size": BATCH, "variant": variant, "data_placement": "stream", "seed": SEED}
    run = Run(adapter, dict(experiment, math_mode={"tf32": False, "autotune": False}))
    run.configure(1)
    staged = run.stream(meta, WORKERS)
    order = data.stream_order(data.stream_files(meta, "train")[2], BATCH, SEED, 0)
    train_images, train_labels = gathered(adapter.loader_batches(staged, order, BATCH))
    again_images, _ = gathered(adapter.loader_batches(staged, order, BATCH))
    test_images, test_labels = gathered(adapter.loader_batches(staged, None, BATCH))
    np.savez(
        Path(out) / "stream.npz",
        train_images=train_images,
        train_labels=train_labels,
        again_images=again_images,
        test_images=test_images,
        test_labels=test_labels,
    )


if __name__ == "__main__":
    main()
