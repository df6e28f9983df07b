"""The common on-disk dataset format, read identically by every adapter.

A prepared dataset is a folder with `arrays.npz` (train_x, test_x: uint8 NHWC; train_y, test_y: int32) and
`meta.json` (shape, classes, sizes, per-channel mean/std of the training split, source, and the fingerprint of
arrays.npz written at preparation). Normalisation happens here, once, in NumPy, so every framework receives the
same float32 values.

A streamed dataset (data placement `stream`) is an image folder read by each framework's own loader. Its prepared
folder holds only `meta.json`, with the index of the JPEGs that decoded at preparation (`train`, `val`: [relative
path, label, width, height]) and those skipped. The transform is defined here once and applied by every loader
with its own image ops: training takes a random-resized crop (area share, aspect ratio and position drawn here
per example and epoch from the seed, so every framework crops the same boxes) resized to the model's input, and
a horizontal flip; evaluation resizes the shorter side to input/0.875 and takes the centre crop. The index holds
each image's size, so every box is computed here; the loaders hand over uint8 NHWC batches, made float and
normalised with the ImageNet channel statistics on the training device.
"""

import json
import time
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


def changed(folder, always_hash, remember=True):
    """Why arrays.npz no longer matches the fingerprint written when it was prepared ('' when it does, or when it was
    prepared before fingerprints existed). Without always_hash, a file whose size, inode and modification and change
    times are those of its last successful check (VERIFIED, beside it, written only with `remember`) counts as
    unchanged, so that planning stays cheap; training always hashes. The change time moves with any write, also one
    that puts the modification time back. (Preparation's own times are no reference: Snakemake touches outputs
    after a job.)"""
    path, recorded = Path(folder) / ARRAYS, read_meta(folder).get("files", {}).get(ARRAYS)
    if not path.exists():
        return f"{path} is missing"
    if recorded is None:
        return ""
    stat, verified = path.stat(), Path(folder) / VERIFIED
    if stat.st_size != recorded["bytes"]:
        return f"{path} has {stat.st_size} bytes, {recorded['bytes']} when it was prepared"
    seen = {"bytes": stat.st_size, "inode": stat.st_ino, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns}
    if not always_hash and remembered(verified) == seen:
        return ""
    digest = file_sha256(path)
    if digest != recorded["sha256"]:
        if remember:  # the next planning must hash it too, to prepare it again
            verified.unlink(missing_ok=True)
        return f"{path} has SHA-256 {digest[:16]}..., {recorded['sha256'][:16]}... when it was prepared"
    if remember:
        write_json_atomic(verified, seen)
    return ""


def remembered(verified):
    """The fingerprint a run last verified by hash, None where there is none (or it cannot be read)."""
    try:
        return json.loads(verified.read_text())
    except (OSError, ValueError):
        return None


def generation(folder):
    """(generation, problem): which preparation of a dataset its runs should read, and why it is not the one on
    disk ('' when it is). The generation is the number meta.json records, one more where the arrays changed since
    they were prepared, 0 where nothing is prepared yet. The prepare rule takes it as a parameter, so a changed
    dataset is prepared again (and what trained on it rerun) in the same invocation: Snakemake reruns a job whose
    parameters changed. Preparing records the number it was given, so the parameter then stays put. Changes no file
    (planning and dry runs run it)."""
    meta = Path(folder) / "meta.json"
    if not meta.exists():
        return 0, ""
    try:
        recorded = read_meta(folder).get("generation", 0)
    except (OSError, ValueError, AttributeError) as error:  # a number no preparation recorded; the next one records it
        return meta.stat().st_mtime_ns, f"{meta} is unreadable ({error})"
    problem = changed(folder, always_hash=False, remember=False)
    return (recorded + 1 if problem else recorded), problem


def set_aside_if_changed(folder):
    """Rename a prepared folder whose arrays or meta.json changed since preparation to <name>.changed-<time> beside
    it, kept for inspection rather than deleted; the new path, or None where nothing changed."""
    folder = Path(folder)
    if not folder.exists() or not generation(folder)[1]:
        return None
    aside = folder.with_name(f"{folder.name}.changed-{time.strftime('%Y%m%dT%H%M%S')}")
    folder.rename(aside)
    return aside


def verify(folder):
    """Refuse prepared data that changed since preparation, naming the file and how to rebuild it (a streamed
    folder: refuse it when its image folder is gone)."""
    meta = read_meta(folder)
    if is_stream(meta):
        if not Path(meta["root"]).is_dir():
            raise PreparedDataError(f"the image folder {meta['root']} indexed in {Path(folder) / 'meta.json'} is gone")
        return
    problem = changed(folder, always_hash=True)
    if problem:
        raise PreparedDataError(
            f"{problem}: it is corrupted or was changed. The next `snakemake` run sets it aside "
            f"and prepares it again (or: .venv/bin/python -m snakemake --forcerun "
            f"{Path(folder) / 'meta.json'})"
        )


def read_meta(folder):
    return json.loads((Path(folder) / "meta.json").read_text())


def load(folder):
    """(arrays, meta): arrays holds normalised float32 NHWC images (or int32 token ids: a dataset of tokens has no
    channel statistics) and int32 labels (per image, or per token: the next one) for train and test."""
    meta = read_meta(folder)
    with np.load(Path(folder) / "arrays.npz") as raw:
        arrays = {
            "train_x": model_inputs(raw["train_x"], meta),
            "train_y": raw["train_y"].astype(np.int32),
            "test_x": model_inputs(raw["test_x"], meta),
            "test_y": raw["test_y"].astype(np.int32),
        }
    return arrays, meta


def streaming_line(meta, loader, workers):
    """The log line of streamed data: the folder, its images, the loader and the files skipped at indexing."""
    return (
        f"streaming {meta['root']}: {meta['train_size']} train / {meta['test_size']} val images through {loader}, "
        f"{workers} workers ({len(meta['skipped'])} files skipped at indexing)"
    )


def holds_tokens(meta):
    """Whether a prepared dataset holds token ids (a language model's sequences: no channel statistics)."""
    return meta["mean"] is None


def model_inputs(stored, meta):
    """A split's stored inputs as models read them: uint8 images normalised with the dataset's channel statistics,
    token ids as int32."""
    if holds_tokens(meta):
        return stored.astype(np.int32)
    return normalise(stored, np.asarray(meta["mean"], dtype=np.float32), np.asarray(meta["std"], dtype=np.float32))


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


def epoch_order(num_examples, batch_size, seed, epoch, cap=None):
    """The shuffled example indices of one epoch, whole batches only (every step has the same shape); with `cap`
    (config `images_per_epoch`), at most that many: each epoch a fresh shuffle's first whole batches."""
    steps = min(num_examples, cap or num_examples) // batch_size
    if steps == 0:
        capped = cap is not None and cap < num_examples
        limit = f"images_per_epoch ({cap})" if capped else f"the training set ({num_examples} examples)"
        raise ValueError(f"batch size {batch_size} is larger than {limit}")
    rng = np.random.default_rng([seed, epoch])
    return rng.permutation(num_examples)[: steps * batch_size].astype(np.int64)


class Shuffles:
    """The epochs' example orders: order_of(epoch) (epoch_order or stream_order of the experiment) for the training
    epochs, then take(count) hands out epochs no one has read yet, in turn, to every pass after training (a loader
    timed on images just read would find them in the page cache)."""

    def __init__(self, order_of, read):
        self.order_of, self.next_unread = order_of, read

    def take(self, count=1):
        """The next `count` unread epochs' indices."""
        first, self.next_unread = self.next_unread, self.next_unread + count
        return list(range(first, first + count))


# Streamed image folders (data placement `stream`).
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # per channel, of images in [0, 1]
SCALE_RANGE, RATIO_RANGE = (0.08, 1.0), (3 / 4, 4 / 3)  # the random-resized crop's area share and aspect ratio
EVAL_CROP_FRACTION = 0.875  # evaluation: the shorter side resized to input / 0.875, then the centre crop (256 -> 224)
LOADER_TIMEOUT_S = 600  # a loader worker silent this long (a stuck filesystem) fails the run instead of hanging it
TRAIN_ITEM = [
    ("index", np.int64),
    ("left", np.int64),
    ("top", np.int64),
    ("width", np.int64),
    ("height", np.int64),
    ("flip", np.bool_),
]
EVAL_ITEM = [("index", np.int64), ("width", np.int64), ("height", np.int64), ("left", np.int64), ("top", np.int64)]


class EpochBatches:
    """A streaming DataLoader's batch sampler (MXNet's, Paddle's): the batches of an epoch's items (`items`, set
    before each epoch, as the workers persist), whole batches only or, for evaluation, the last one short."""

    def __init__(self, items, batch_size, whole_batches):
        self.items, self.batch_size, self.whole_batches = items, batch_size, whole_batches

    def __iter__(self):
        items, step = self.items.tolist(), self.batch_size
        starts = range(0, len(items) - step + 1 if self.whole_batches else len(items), step)
        return iter([items[start : start + step] for start in starts])

    def __len__(self):
        return len(self.items) // self.batch_size if self.whole_batches else -(-len(self.items) // self.batch_size)


def is_stream(meta):
    return meta.get("kind") == "stream"


def stream_files(meta, split):
    """(absolute paths, int32 labels, int64 (width, height) per image) of a streamed split, in index order. The
    paths are one NumPy string array, not a list of objects: forked loader workers reading a list would touch
    every object's reference count and copy the pages of all of them (a million paths for ImageNet)."""
    root, entries = Path(meta["root"]), meta[split]
    return (
        np.asarray([str(root / entry[0]) for entry in entries]),
        np.asarray([entry[1] for entry in entries], np.int32),
        np.asarray([entry[2:4] for entry in entries], np.int64).reshape(-1, 2),
    )


def stream_order(sizes, batch_size, seed, epoch, cap=None):
    """One training epoch of a streamed split: epoch_order's examples, each with its random-resized crop box in the
    original image (an area share of SCALE_RANGE at an aspect ratio of RATIO_RANGE, clipped to the image, at a
    uniform position) and its flip, as a structured array of TRAIN_ITEM. Drawn here from the seed, so every
    framework's loader crops the same boxes and only decodes, crops and resizes."""
    indices = epoch_order(len(sizes), batch_size, seed, epoch, cap)
    rng = np.random.default_rng([seed, epoch, 1])
    width, height = sizes[indices, 0], sizes[indices, 1]
    area = rng.uniform(*SCALE_RANGE, len(indices)) * width * height
    ratio = np.exp(rng.uniform(*np.log(RATIO_RANGE), len(indices)))
    order = np.empty(len(indices), dtype=TRAIN_ITEM)
    order["index"] = indices
    order["width"] = np.clip(np.floor(np.sqrt(area * ratio)), 1, width)
    order["height"] = np.clip(np.floor(np.sqrt(area / ratio)), 1, height)
    order["left"] = np.floor(rng.uniform(size=len(indices)) * (width - order["width"]))
    order["top"] = np.floor(rng.uniform(size=len(indices)) * (height - order["height"]))
    order["flip"] = rng.uniform(size=len(indices)) < 0.5
    return order


def eval_order(sizes, size):
    """The evaluation items of a streamed split, in index order, as a structured array of EVAL_ITEM: each image
    resized to width x height (shorter side size / EVAL_CROP_FRACTION, aspect ratio kept) and the top-left
    corner of its centre crop of size x size."""
    short = np.floor(size / EVAL_CROP_FRACTION)
    scale = short / sizes.min(axis=1)
    order = np.empty(len(sizes), dtype=EVAL_ITEM)
    order["index"] = np.arange(len(sizes))
    order["width"] = np.maximum(short, np.floor(sizes[:, 0] * scale))
    order["height"] = np.maximum(short, np.floor(sizes[:, 1] * scale))
    order["left"], order["top"] = (order["width"] - size) // 2, (order["height"] - size) // 2
    return order


def pillow_crop(path, item, size, train):
    """One streamed image as uint8 HWC, decoded and cropped with Pillow in a loader worker, as torchvision's
    ImageFolder and transforms do (the PyTorch and Paddle loaders): a training item (a row of stream_order) is
    its crop box resized to size x size and flipped as drawn; an evaluation item (a row of eval_order) the image
    resized, then its centre crop."""
    from PIL import Image  # in the envs whose loaders decode with Pillow

    with Image.open(path) as image:
        image = image.convert("RGB")
        if train:
            _, left, top, width, height, flip = item
            image = image.resize((size, size), Image.BILINEAR, box=(left, top, left + width, top + height))
            image = image.transpose(Image.FLIP_LEFT_RIGHT) if flip else image
        else:
            _, width, height, left, top = item
            image = image.resize((width, height), Image.BILINEAR).crop((left, top, left + size, top + size))
        return np.asarray(image).copy()
