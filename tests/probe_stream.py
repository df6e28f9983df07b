"""Run inside a stack's env: read a streamed image folder through the adapter's own loader, twice over the same
epoch and once over the evaluation split, and save the batches for tests/test_stream.py to compare across
frameworks.

    <env python> tests/probe_stream.py ADAPTER VARIANT META_JSON OUTDIR   (KERAS_BACKEND etc. set by the caller)
writes OUTDIR/stream.npz: train_images, train_labels (first pass), again_images (second pass), test_images,
test_labels.
"""

import importlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from dlbench import data  # noqa: E402

BATCH, WORKERS, SEED = 8, 2, 0


def gathered(batches):
    images, labels = zip(*batches)
    return np.concatenate(images), np.concatenate(labels)


def main():
    name, variant, meta_path, out = sys.argv[1:5]
    adapter = importlib.import_module(f"dlbench.adapters.{name}")
    adapter.configure("cpu", 1, SEED, {"tf32": False, "autotune": False})
    meta = json.loads(Path(meta_path).read_text())
    experiment = {"device": "cpu", "batch_size": BATCH, "variant": variant, "data_placement": "stream"}
    staged = adapter.stream(meta, experiment, WORKERS)
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
