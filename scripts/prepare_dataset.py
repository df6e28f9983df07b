"""Prepare one dataset into the common format (see dlbench/data.py), atomically.

    python scripts/prepare_dataset.py NAME OUT_FOLDER --options JSON [--archives FOLDER]

OPTIONS holds the config sections `synthetic`, `synthetic_tokens`, `synthetic_imagenet`, `imagenet`, `image_folders`
and, for a downloadable dataset, its registry `entry` (format, files with sha256). Archives are verified again before
parsing; a corrupt one is deleted (so the next run fetches it anew) and named in the error.
"""

import argparse
import gzip
import json
import os
import pickle
import shutil
import tarfile
import tempfile
from pathlib import Path

import numpy as np
from dlbench import data
from dlbench.cli import run_main
from dlbench.data import channel_stats
from dlbench.io import file_sha256, json_text
from dlbench.study import image_folder
from dlbench.study.catalog import IMAGE_FOLDER_KINDS, dataset_info, image_folder_options


def synthetic(shape, classes, train_size, test_size, seed):
    """Seeded images: a coarse random prototype per class (4x4-pixel blocks) plus noise, learnable but not trivial.

    Built in chunks, so 1000-class 256x256x3 sets need little memory.
    """
    rng = np.random.default_rng(seed)
    height, width, channels = shape
    coarse = rng.uniform(0, 255, size=(classes, -(-height // 4), -(-width // 4), channels)).astype(np.float32)

    def draw(count):
        labels = rng.integers(0, classes, size=count).astype(np.int32)
        images = np.empty((count, *shape), dtype=np.uint8)
        for start in range(0, count, 256):
            chunk = labels[start : start + 256]
            prototypes = coarse[chunk].repeat(4, axis=1).repeat(4, axis=2)[:, :height, :width]
            noise = rng.normal(0, 96, size=(len(chunk), *shape)).astype(np.float32)
            images[start : start + 256] = np.clip(prototypes + noise, 0, 255)
        return images, labels

    train_x, train_y = draw(train_size)
    test_x, test_y = draw(test_size)
    return train_x, train_y, test_x, test_y, {"kind": "synthetic", "seed": seed, "noise_std": 96}


SUCCESSORS = 4  # the tokens that may follow each token in synthetic sequences


def synthetic_tokens(vocabulary, context, train_size, test_size, seed):
    """Seeded sequences of a random Markov chain in which each token is followed by one of SUCCESSORS tokens
    (drawn per token, equally likely, repeats allowed): learnable, the best next-token loss at most ln(SUCCESSORS)
    against ln(vocabulary) for a guess. Inputs are each sequence's first `context` tokens, targets the same shifted by one."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, vocabulary, size=(vocabulary, SUCCESSORS))

    def draw(count):
        tokens = np.empty((count, context + 1), dtype=np.int32)
        tokens[:, 0] = rng.integers(0, vocabulary, size=count)
        for position in range(context):
            choice = rng.integers(0, SUCCESSORS, size=count)
            tokens[:, position + 1] = successors[tokens[:, position], choice]
        return tokens[:, :-1], tokens[:, 1:]

    train_x, train_y = draw(train_size)
    test_x, test_y = draw(test_size)
    source = {"kind": "synthetic-tokens", "seed": seed, "successors": SUCCESSORS}
    return train_x, train_y, test_x, test_y, source


def digits(seed):
    """scikit-learn's 8x8 digits (0..16), bilinearly upsampled to 28x28 grayscale, stratified 80/20 split."""
    import sklearn
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    small = bunch.images / 16.0 * 255.0
    large = np.stack([zoom(image, 28 / 8, order=1) for image in small])
    images = np.clip(large, 0, 255).round().astype(np.uint8)[..., np.newaxis]
    train_x, test_x, train_y, test_y = train_test_split(
        images, bunch.target.astype(np.int32), test_size=0.2, random_state=seed, stratify=bunch.target
    )
    source = {"kind": "sklearn.datasets.load_digits", "sklearn_version": sklearn.__version__, "split_seed": seed}
    return train_x, train_y, test_x, test_y, source


class DatasetError(Exception):
    """A dataset file that cannot be used; the message names the file and what was expected."""


def verify(path, expected):
    digest = file_sha256(path)
    if digest != expected:
        Path(path).unlink()
        raise DatasetError(f"{path}: sha256 {digest} but expected {expected}; removed, rerun to fetch it again")


def read_idx(path, dimensions):
    """An IDX array (gzip): magic 0x0000080N (unsigned bytes, N dimensions), big-endian sizes, then the data."""
    try:
        with gzip.open(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as error:
        raise DatasetError(f"{path}: not a readable gzip file ({error}); truncated or wrong format")
    magic = int.from_bytes(raw[:4], "big")
    if magic != 0x800 + dimensions:
        raise DatasetError(
            f"{path}: not an IDX file of {dimensions} dimension(s) (magic {magic:#010x}, "
            f"expected {0x800 + dimensions:#010x})"
        )
    sizes = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dimensions)]
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dimensions)
    if body.size != np.prod(sizes):
        raise DatasetError(f"{path}: header promises {sizes} values, found {body.size}; truncated")
    return body.reshape(sizes)


def idx_dataset(entry, archives):
    files = {role: Path(archives) / spec["name"] for role, spec in entry["files"].items()}
    for role, spec in entry["files"].items():
        verify(files[role], spec["sha256"])
    arrays = [
        read_idx(files["train_images"], 3)[..., np.newaxis],
        read_idx(files["train_labels"], 1),
        read_idx(files["test_images"], 3)[..., np.newaxis],
        read_idx(files["test_labels"], 1),
    ]
    for images, labels, role in ((arrays[0], arrays[1], "train"), (arrays[2], arrays[3], "test")):
        if len(images) != len(labels):
            raise DatasetError(f"{role}: {len(images)} images but {len(labels)} labels in {archives}")
    train_x, train_y, test_x, test_y = arrays
    return train_x, train_y.astype(np.int32), test_x, test_y.astype(np.int32), {"kind": "idx", "files": entry["files"]}


TRAIN_SHARE = 0.9  # of a text corpus: the first 90 % trains, the last 10 % tests (nanoGPT's shakespeare_char split)


def text_bytes_dataset(entry, archives):
    """A plain text file tokenized as bytes (a vocabulary of 256, no tokenizer to download), split in order into
    training and test text, each cut into whole sequences of the entry's context whose targets are the next bytes."""
    path = Path(archives) / entry["files"]["text"]["name"]
    verify(path, entry["files"]["text"]["sha256"])
    tokens = np.frombuffer(path.read_bytes(), dtype=np.uint8).astype(np.int32)
    (context,), cut = entry["shape"], int(len(tokens) * TRAIN_SHARE)

    def sequences(text, role):
        count = (len(text) - 1) // context
        if count < 1:
            raise DatasetError(
                f"{path}: its {role} text has {len(text)} bytes, too few for one sequence of the context {context} "
                "and its next token; set a shorter `shape` in the dataset's registry entry"
            )
        return text[: count * context].reshape(count, context), text[1 : count * context + 1].reshape(count, context)

    source = {"kind": "text-bytes", "files": entry["files"], "train_share": TRAIN_SHARE}
    return (*sequences(tokens[:cut], "training"), *sequences(tokens[cut:], "test"), source)


def cifar_dataset(entry, archives):
    """The CIFAR-10 python tarball: data_batch_1..5 and test_batch, pickles of 3072-byte CHW rows."""
    spec = entry["files"]["archive"]
    path = Path(archives) / spec["name"]
    verify(path, spec["sha256"])

    def batch(tar, member):
        try:
            handle = tar.extractfile(f"cifar-10-batches-py/{member}")
        except KeyError:
            raise DatasetError(f"{path}: no cifar-10-batches-py/{member} inside; not the CIFAR-10 python archive")
        content = pickle.load(handle, encoding="bytes")  # trusted: the archive's sha256 was verified above
        images = np.asarray(content[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return images, np.asarray(content[b"labels"], dtype=np.int32)

    try:
        with tarfile.open(path, "r:gz") as tar:
            parts = [batch(tar, f"data_batch_{index}") for index in range(1, 6)]
            test_x, test_y = batch(tar, "test_batch")
    except (tarfile.TarError, EOFError, OSError) as error:
        raise DatasetError(f"{path}: not a readable tar.gz archive ({error}); truncated or wrong format")
    train_x = np.concatenate([images for images, _ in parts])
    train_y = np.concatenate([labels for _, labels in parts])
    return train_x, train_y, test_x, test_y, {"kind": "cifar-python", "files": entry["files"]}


def imagenet_split(folder, resolution, max_per_class, classes):
    """Class folders of JPEGs -> uint8 images resized (shorter side) and centre-cropped to resolution."""
    from PIL import Image

    images, labels = [], []
    for label, wnid in enumerate(classes):
        files = sorted(path for path in (folder / wnid).iterdir() if path.suffix.lower() in (".jpeg", ".jpg", ".png"))
        for path in files[:max_per_class]:
            with Image.open(path) as image:
                image = image.convert("RGB")
                scale = resolution / min(image.size)
                image = image.resize(
                    (max(resolution, round(image.width * scale)), max(resolution, round(image.height * scale))),
                    Image.BILINEAR,
                )
                left, top = (image.width - resolution) // 2, (image.height - resolution) // 2
                images.append(np.asarray(image.crop((left, top, left + resolution, top + resolution))))
                labels.append(label)
        print(f"{folder.name}/{wnid}: {min(len(files), max_per_class or len(files))} images", flush=True)
    return np.stack(images), np.asarray(labels, dtype=np.int32)


def image_folder_dataset(options):
    """An image folder (ImageNet's layout) decoded into arrays at the configured resolution."""
    root = Path(options["path"])
    try:
        classes = image_folder.classes(root)
    except image_folder.ImageFolderError as error:
        raise DatasetError(str(error))
    size, limit = options["resolution"], options["max_images_per_class"]
    train_x, train_y = imagenet_split(root / "train", size, limit, classes)
    test_x, test_y = imagenet_split(root / "val", size, limit, classes)
    source = {"kind": "image-folder", "path": str(root), "classes": classes, "max_images_per_class": limit}
    return train_x, train_y, test_x, test_y, source


def write_dataset(folder, name, classes, train_x, train_y, test_x, test_y, source, generation=0):
    """Write arrays.npz and meta.json into a temporary sibling folder, then rename it into place, recording the
    generation it was given (dlbench.data.generation)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    staging.chmod(0o755)
    np.savez(staging / data.ARRAYS, train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y)
    # Images are uint8, token ids int32: the ids have no channel statistics.
    mean, std = channel_stats(train_x) if train_x.dtype == np.uint8 else (None, None)
    meta = {
        "name": name,
        "shape": list(train_x.shape[1:]),
        "classes": classes,
        "train_size": len(train_x),
        "test_size": len(test_x),
        "mean": mean,
        "std": std,
        "source": source,
        "files": {data.ARRAYS: data.fingerprint(staging / data.ARRAYS)},
        "generation": generation,
    }
    (staging / "meta.json").write_text(json_text(meta))  # the whole staging folder replaces the old one at once
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(staging, folder)
    examples = "images" if mean is not None else "sequences"
    print(f"{name}: {len(train_x)} train / {len(test_x)} test {examples} of shape {meta['shape']} -> {folder}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("folder")
    parser.add_argument(
        "--options",
        required=True,
        help="JSON: synthetic, synthetic_tokens, synthetic_imagenet, imagenet, image_folders, entry",
    )
    parser.add_argument("--archives", help="folder of the verified downloads of this dataset")
    parser.add_argument("--seed", type=int, default=0, help="digits: seed of the train/test split")
    parser.add_argument("--generation", type=int, default=0, help="the number to record (dlbench.data.generation)")
    args = parser.parse_args()
    options = json.loads(args.options)
    entry = options.get("entry")
    info = dataset_info(args.name, options, {args.name: entry} if entry else {})
    kind, shape, classes = info["kind"], info["shape"], info["classes"]
    try:
        if kind == "download":
            readers = {"idx": idx_dataset, "cifar-python": cifar_dataset, "text-bytes": text_bytes_dataset}
            reader = readers[entry["format"]]
            arrays = reader(entry, args.archives)
        elif kind == "synthetic":
            sizes = options["synthetic"]
            arrays = synthetic(shape, classes, sizes["train_size"], sizes["test_size"], sizes["seed"])
        elif kind == "synthetic-tokens":
            sizes = options["synthetic_tokens"]
            arrays = synthetic_tokens(classes, shape[0], sizes["train_size"], sizes["test_size"], sizes["seed"])
        elif kind == "synthetic-imagenet":
            sizes = options["synthetic_imagenet"]
            arrays = synthetic(shape, classes, sizes["train_size"], sizes["test_size"], sizes["seed"])
        elif kind in IMAGE_FOLDER_KINDS:
            arrays = image_folder_dataset(image_folder_options(args.name, options)[0])
            classes = len(arrays[4]["classes"])
        else:
            arrays = digits(args.seed)
    except DatasetError as error:
        raise SystemExit(f"dataset {args.name!r}: {error}")
    write_dataset(args.folder, args.name, classes, *arrays, generation=args.generation)


if __name__ == "__main__":
    run_main(main)
