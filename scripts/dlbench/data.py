"""The common on-disk dataset format, read identically by every adapter.

A prepared dataset is a folder with `arrays.npz` (train_x, test_x: uint8 NHWC; train_y, test_y: int32) and
`meta.json` (shape, classes, sizes, per-channel mean/std of the training split, source, and the fingerprint of
arrays.npz written at preparation). Normalisation happens here, once, in NumPy, so every framework receives the
same float32 values.
"""

import json
from pathlib import Path

import numpy as np

from .io import file_sha256, write_json_atomic

ARRAYS = "arrays.npz"
VERIFIED = ".verified.json"  # size and modification time of arrays.npz when its hash last matched


class PreparedDataError(Exception):
    pass


def fingerprint(path):
    """What meta.json records of a prepared file: its SHA-256 and size."""
    return {"sha256": file_sha256(path), "bytes": Path(path).stat().st_size}


def changed(folder, always_hash):
    """Why arrays.npz no longer matches the fingerprint written when it was prepared ('' when it does, or when it was
    prepared before fingerprints existed). Without always_hash, a file whose size and modification time are those
    of its last successful check (VERIFIED, beside it) counts as unchanged, so that planning stays cheap; training
    always hashes. (Preparation's own modification time is no reference: Snakemake touches outputs after a job.)"""
    path, recorded = Path(folder) / ARRAYS, read_meta(folder).get("files", {}).get(ARRAYS)
    if not path.exists():
        return f"{path} is missing"
    if recorded is None:
        return ""
    stat, verified = path.stat(), Path(folder) / VERIFIED
    if stat.st_size != recorded["bytes"]:
        return f"{path} has {stat.st_size} bytes, {recorded['bytes']} when it was prepared"
    seen = {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if not always_hash and verified.exists() and json.loads(verified.read_text()) == seen:
        return ""
    digest = file_sha256(path)
    if digest != recorded["sha256"]:
        return f"{path} has SHA-256 {digest[:16]}..., {recorded['sha256'][:16]}... when it was prepared"
    write_json_atomic(verified, seen)
    return ""


def verify(folder):
    """Refuse prepared data that changed since preparation, naming the file and how to rebuild it."""
    problem = changed(folder, always_hash=True)
    if problem:
        raise PreparedDataError(f"{problem}: it is corrupted or was changed. The next `snakemake` run sets it aside "
                                f"and prepares it again (or: snakemake --forcerun {Path(folder) / 'meta.json'})")  # fmt: skip


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
