"""Write a synthetic image folder in ImageNet's layout (train/<class>/*.JPEG, val/<class>/*.JPEG): smooth seeded
images of varied sizes (colour ramps and a low-frequency wave, class-tinted), to try data placement `stream`
without ImageNet, and for the tests and the loader benchmark. Needs Pillow (the tools env).

    python scripts/make_image_folder.py OUT [--classes 3] [--train 8] [--val 4] [--sides 24 64] [--noise 0] [--bad]

--bad adds three files every loader must be spared: a truncated JPEG, a PNG named .JPEG and a CMYK JPEG (in train/).
"""

import argparse
import io
from pathlib import Path

import numpy as np
from PIL import Image

from dlbench.cli import run_main


def smooth_image(rng, label, classes, width, height, noise=0.0):
    """uint8 HWC: a red ramp left to right, a green ramp top to bottom, a blue wave; the class sets the tint;
    Gaussian pixel noise of standard deviation `noise` (photos' detail: JPEGs of ImageNet's size per pixel)."""
    x, y = np.meshgrid(np.linspace(0, 1, width), np.linspace(0, 1, height))
    frequency = rng.uniform(0.5, 2, size=2)
    red = 40 + 180 * x
    green = 40 + 180 * y
    blue = 128 + 90 * np.sin(2 * np.pi * (frequency[0] * x + frequency[1] * y) + rng.uniform(0, 2 * np.pi))
    tint = 60 * (label / max(1, classes - 1) - 0.5)
    pixels = np.stack([red + tint, green - tint, blue], axis=-1)
    if noise:
        pixels = pixels + rng.normal(0, noise, pixels.shape)
    return np.clip(pixels, 0, 255).astype(np.uint8)


def write_folder(root, classes, per_split, sides, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    names = [f"n{index:08d}" for index in range(classes)]
    for split, count in per_split.items():
        for label, name in enumerate(names):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for index in range(count):
                width, height = (int(side) for side in rng.integers(sides[0], sides[1] + 1, size=2))
                pixels = smooth_image(rng, label, classes, width, height, noise)
                Image.fromarray(pixels).save(root / split / name / f"{name}_{index}.JPEG", quality=95)
    return names


def write_bad_files(root, names):
    """A JPEG cut in half, a PNG under a .JPEG name and a CMYK JPEG, in the first training classes."""
    good = sorted((root / "train" / names[0]).iterdir())[0].read_bytes()
    (root / "train" / names[0] / "truncated.JPEG").write_bytes(good[: len(good) // 2])
    png = io.BytesIO()
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(png, format="PNG")
    (root / "train" / names[min(1, len(names) - 1)] / "png_content.JPEG").write_bytes(png.getvalue())
    cmyk = Image.fromarray(np.full((16, 16, 3), 128, np.uint8)).convert("CMYK")
    cmyk.save(root / "train" / names[min(2, len(names) - 1)] / "cmyk.JPEG", quality=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--train", type=int, default=8, help="images per class in train/")
    parser.add_argument("--val", type=int, default=4, help="images per class in val/")
    parser.add_argument("--sides", type=int, nargs=2, default=(24, 64), help="smallest and largest side, pixels")
    parser.add_argument("--noise", type=float, default=0.0, help="pixel noise std (15: about ImageNet's bytes/pixel)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bad", action="store_true", help="add a truncated JPEG, a PNG named .JPEG and a CMYK JPEG")
    args = parser.parse_args()
    root = Path(args.out)
    names = write_folder(root, args.classes, {"train": args.train, "val": args.val}, args.sides, args.noise, args.seed)
    if args.bad:
        write_bad_files(root, names)
    print(f"{root}: {args.classes} classes, {args.train} train and {args.val} val images each, sides {args.sides}")


if __name__ == "__main__":
    run_main(main)
