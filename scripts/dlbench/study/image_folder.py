"""Image folders in the ImageNet layout, train/<class>/*.JPEG and val/<class>/*.JPEG: their classes, and the
index a streamed dataset is read from (data.py). Standard library at import (the driver counts classes at
planning); indexing needs Pillow (the tools env).

Indexing decodes every image once (at reduced size, JPEG's own DCT scaling, so a pass costs a fraction of a full
decode), so that a truncated or non-JPEG file is named and left out before training: no loader worker meets it.
"""

import multiprocessing
from pathlib import Path

from .. import data, parallel

SPLITS = ("train", "val")
JPEG_SUFFIXES = (".jpeg", ".jpg")
DECODED_MODES = ("RGB", "L")  # colour and greyscale; ImageNet's few CMYK JPEGs are left out


class ImageFolderError(Exception):
    pass


def classes(root):
    """The sorted class folder names of an image folder, or ImageFolderError saying what is wrong with its layout."""
    root = Path(root)
    if not root.is_dir():
        raise ImageFolderError(f"{root} does not exist or is not a folder")
    for split in SPLITS:
        if not (root / split).is_dir():
            found = sorted(path.name for path in root.iterdir())[:5]
            raise ImageFolderError(
                f"{root}: no {split}/ folder (found: {', '.join(found) or 'nothing'}); expected "
                f"train/<class>/*.JPEG and val/<class>/*.JPEG, val sorted into class folders"
            )
    names = {split: sorted(path.name for path in (root / split).iterdir() if path.is_dir()) for split in SPLITS}
    if not names["train"]:
        raise ImageFolderError(f"{root / 'train'}: no class folders; expected train/<class>/*.JPEG (e.g. n01440764/)")
    if names["train"] != names["val"]:
        differ = sorted(set(names["train"]) ^ set(names["val"]))
        raise ImageFolderError(
            f"{root}: train/ and val/ hold different class folders ({', '.join(differ[:5])} in "
            f"only one); val/ must be sorted into the same <class>/ folders as train/"
        )
    return names["train"]


def jpeg_files(folder, max_per_class):
    files = sorted(path for path in folder.iterdir() if path.suffix.lower() in JPEG_SUFFIXES)
    return files[:max_per_class]


def decode_problem(path, size=64):
    """('', (width, height)) when `path` is a JPEG that decodes, else (why not, None). Pillow's draft mode decodes
    at 1/2..1/8 scale; the size is the full image's."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            if image.format != "JPEG":
                return f"not a JPEG ({image.format} content)", None
            if image.mode not in DECODED_MODES:
                return f"a {image.mode} JPEG, which not every framework's decoder reads", None
            full = image.size
            image.draft("RGB", (size, size))
            image.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        return f"undecodable ({error})", None
    return "", full


def index(root, resolution, max_per_class=None, workers=None, log=print):
    """The meta.json of a streamed image folder (data.py): every JPEG that decodes, per split, as [path relative
    to root, label, width, height]; the files left out with the reason. A class left without images is refused."""
    root = Path(root).absolute()
    names = classes(root)
    files = {
        split: [
            (path, label) for label, name in enumerate(names) for path in jpeg_files(root / split / name, max_per_class)
        ]
        for split in SPLITS
    }
    with multiprocessing.Pool(workers or parallel.schedulable_cpus()) as pool:
        problems = {
            split: pool.map(decode_problem, [path for path, _ in files[split]], chunksize=64) for split in SPLITS
        }
    meta = {
        "kind": "stream",
        "root": str(root),
        "shape": [resolution, resolution, 3],
        "classes": len(names),
        "class_names": names,
        "mean": list(data.IMAGENET_MEAN),
        "std": list(data.IMAGENET_STD),
        "skipped": [],
    }
    for split in SPLITS:
        kept = []
        for (path, label), (problem, size) in zip(files[split], problems[split]):
            relative = str(path.relative_to(root))
            if problem:
                meta["skipped"].append({"path": relative, "reason": problem})
                log(f"skipping {path}: {problem}")
            else:
                kept.append([relative, label, *size])
        empty = sorted(set(names) - {names[entry[1]] for entry in kept})
        if empty:
            raise ImageFolderError(
                f"{root / split}: class folder(s) {', '.join(empty[:5])} hold no decodable JPEG; "
                f"add images or remove the class from both train/ and val/"
            )
        meta[split] = kept
        log(f"{split}: {len(kept)} images in {len(names)} classes ({len(files[split]) - len(kept)} skipped)")
    meta["train_size"], meta["test_size"] = len(meta["train"]), len(meta["val"])
    return meta
