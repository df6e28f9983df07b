"""Prepare one dataset into the common format (see dlbench/data.py), atomically.

    python scripts/prepare_dataset.py digits results/data/digits
    python scripts/prepare_dataset.py synthetic-32x32x3 results/data/synthetic-32x32x3 --train-size 2048 ...
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from dlbench.catalog import SYNTHETIC, dataset_info  # noqa: E402
from dlbench.data import channel_stats  # noqa: E402


def synthetic(shape, classes, train_size, test_size, seed):
    """Seeded images: a random prototype per class plus noise, so the task is learnable but not trivial."""
    rng = np.random.default_rng(seed)
    prototypes = rng.uniform(0, 255, size=(classes, *shape))

    def draw(count):
        labels = rng.integers(0, classes, size=count)
        noise = rng.normal(0, 96, size=(count, *shape))
        return np.clip(prototypes[labels] + noise, 0, 255).astype(np.uint8), labels.astype(np.int32)

    train_x, train_y = draw(train_size)
    test_x, test_y = draw(test_size)
    source = {"kind": "synthetic", "seed": seed, "noise_std": 96}
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


def write_dataset(folder, name, classes, train_x, train_y, test_x, test_y, source):
    """Write arrays.npz and meta.json into a temporary sibling folder, then rename it into place."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    staging.chmod(0o755)
    np.savez(staging / "arrays.npz", train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y)
    mean, std = channel_stats(train_x)
    meta = {
        "name": name,
        "shape": list(train_x.shape[1:]),
        "classes": classes,
        "train_size": len(train_x),
        "test_size": len(test_x),
        "mean": mean,
        "std": std,
        "source": source,
    }
    (staging / "meta.json").write_text(json.dumps(meta, indent=2))
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(staging, folder)
    print(f"{name}: {len(train_x)} train / {len(test_x)} test images of shape {meta['shape']} -> {folder}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("folder")
    parser.add_argument("--classes", type=int, default=10, help="synthetic: number of classes")
    parser.add_argument("--train-size", type=int, default=2048, help="synthetic: training images")
    parser.add_argument("--test-size", type=int, default=512, help="synthetic: test images")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    info = dataset_info(args.name, {"classes": args.classes})
    if SYNTHETIC.fullmatch(args.name):
        arrays = synthetic(info["shape"], info["classes"], args.train_size, args.test_size, args.seed)
    else:
        arrays = digits(args.seed)
    write_dataset(args.folder, args.name, info["classes"], *arrays)


if __name__ == "__main__":
    main()
