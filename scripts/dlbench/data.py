"""The common on-disk dataset format, read identically by every adapter.

A prepared dataset is a folder with `arrays.npz` (train_x, test_x: uint8 NHWC; train_y, test_y: int32) and
`meta.json` (shape, classes, sizes, per-channel mean/std of the training split, source). Normalisation
happens here, once, in NumPy, so every framework receives the same float32 values.
"""

import json
from pathlib import Path

import numpy as np


def read_meta(folder):
    return json.loads((Path(folder) / "meta.json").read_text())


def load(folder):
    """(arrays, meta): arrays holds normalised float32 NHWC images and int32 labels for train and test."""
    meta = read_meta(folder)
    mean = np.asarray(meta["mean"], dtype=np.float32)
    std = np.asarray(meta["std"], dtype=np.float32)
    with np.load(Path(folder) / "arrays.npz") as raw:
        arrays = {
            "train_x": normalise(raw["train_x"], mean, std),
            "train_y": raw["train_y"].astype(np.int32),
            "test_x": normalise(raw["test_x"], mean, std),
            "test_y": raw["test_y"].astype(np.int32),
        }
    return arrays, meta


def normalise(images, mean, std):
    return ((images.astype(np.float32) / 255.0 - mean) / std).astype(np.float32)


def channel_stats(images):
    """Per-channel mean and std of uint8 NHWC images scaled to [0, 1]."""
    scaled = images.astype(np.float64) / 255.0
    std = scaled.std(axis=(0, 1, 2))
    return scaled.mean(axis=(0, 1, 2)).tolist(), np.where(std > 0, std, 1.0).tolist()


def batch_slices(count, batch_size):
    """The slices of `count` indices that make whole batches (every adapter's step loop walks these)."""
    return [slice(start, start + batch_size) for start in range(0, count - batch_size + 1, batch_size)]


def host_batches(images, labels, order, batch_size):
    """The batches of `order` gathered from host arrays, for data_placement `host`: the dataset stays in NumPy and
    each step hands its batch to the framework (as a loader does without worker processes)."""
    for batch in batch_slices(len(order), batch_size):
        yield images[order[batch]], labels[order[batch]]


def epoch_order(num_examples, batch_size, seed, epoch):
    """The shuffled example indices of one epoch, whole batches only (every step has the same shape)."""
    steps = num_examples // batch_size
    if steps == 0:
        raise ValueError(f"batch size {batch_size} is larger than the training set ({num_examples} examples)")
    rng = np.random.default_rng([seed, epoch])
    return rng.permutation(num_examples)[: steps * batch_size].astype(np.int64)
