"""Names the config may use for datasets, and what each dataset looks like. Standard library only (the driver imports
it).

Kinds: `download` (files in the registry, workflow/resources/datasets.yaml), `digits` (ships with scikit-learn),
`synthetic` (synthetic-<H>x<W>x<C>), `synthetic-imagenet` (seeded 1000-class 256x256x3), `imagenet` (a local
ILSVRC2012 folder) and `image-folder` (any folder of ImageNet's layout named in config `image_folders`). Image
folders are the datasets that can stream (data placement `stream`). Datasets of tokens, for language models, hold
sequences of token ids whose shape is (context,) and whose classes are the vocabulary: `synthetic-tokens`
(synthetic-tokens-<vocabulary>x<context>) and a registry entry of format `text-bytes` (tiny-shakespeare).
"""

import re

SYNTHETIC = re.compile(r"synthetic-(?P<height>\d+)x(?P<width>\d+)x(?P<channels>\d+)")
SYNTHETIC_TOKENS = re.compile(r"synthetic-tokens-(?P<vocabulary>\d+)x(?P<context>\d+)")
MAX_VOCABULARY = 2**24  # token ids exact in float32 (MXNet feeds them so), beyond every tokenizer's vocabulary
DIGITS_SHAPE = (28, 28, 1)
DIGITS_TRAIN_SIZE = 1437  # 80% of scikit-learn's 1,797 digits (the test split is rounded up: 360)
IMAGENET_CLASSES = 1000
SYNTHETIC_IMAGENET_SHAPE = (256, 256, 3)
IMAGE_FOLDER_KINDS = ("imagenet", "image-folder")
IMAGE_FOLDER_DEFAULTS = {"resolution": 224, "max_images_per_class": None}  # as the config schema's `image_folders`
FIXED_NAMES = (
    "digits",
    "imagenet",
    "synthetic-imagenet",
    "synthetic-<H>x<W>x<C> (e.g. synthetic-28x28x1)",
    "synthetic-tokens-<vocabulary>x<context> (e.g. synthetic-tokens-256x64)",
)


def dataset_info(name, config, registry):
    """{'kind', 'shape': (h, w, c), 'classes', 'train_size'} of a dataset name (train_size None where only the
    prepared data can tell), or ValueError naming the allowed names."""
    if name in registry:
        entry = registry[name]
        return {
            "kind": "download",
            "shape": tuple(entry["shape"]),
            "classes": entry["classes"],
            "train_size": entry.get("train_size"),
        }
    if name == "digits":
        return {"kind": "digits", "shape": DIGITS_SHAPE, "classes": 10, "train_size": DIGITS_TRAIN_SIZE}
    if name == "synthetic-imagenet":
        return {
            "kind": "synthetic-imagenet",
            "shape": SYNTHETIC_IMAGENET_SHAPE,
            "classes": IMAGENET_CLASSES,
            "train_size": config["synthetic_imagenet"]["train_size"],
        }
    if name == "imagenet":
        if not config["imagenet"]["path"]:
            raise ValueError("dataset 'imagenet' needs `imagenet.path`: a local ILSVRC2012 folder with train/ and val/")
        size = config["imagenet"]["resolution"]
        return {"kind": "imagenet", "shape": (size, size, 3), "classes": IMAGENET_CLASSES, "train_size": None}
    if name in config.get("image_folders", {}):  # optional where a script is given some sections only
        size = image_folder_options(name, config)[0]["resolution"]
        return {"kind": "image-folder", "shape": (size, size, 3), "classes": IMAGENET_CLASSES, "train_size": None}
    match = SYNTHETIC_TOKENS.fullmatch(name)
    if match:
        vocabulary, context = int(match["vocabulary"]), int(match["context"])
        if not 2 <= vocabulary <= MAX_VOCABULARY or context < 1:
            raise ValueError(f"dataset {name!r}: the vocabulary must be 2 to {MAX_VOCABULARY} and the context positive")
        return {
            "kind": "synthetic-tokens",
            "shape": (context,),
            "classes": vocabulary,
            "train_size": config["synthetic_tokens"]["train_size"],
        }
    match = SYNTHETIC.fullmatch(name)
    if match:
        shape = tuple(int(match[key]) for key in ("height", "width", "channels"))
        if min(shape) < 1 or shape[2] not in (1, 3):
            raise ValueError(f"dataset {name!r}: height and width must be positive and channels 1 or 3")
        return {
            "kind": "synthetic",
            "shape": shape,
            "classes": config["synthetic"]["classes"],
            "train_size": config["synthetic"]["train_size"],
        }
    allowed = ", ".join([*sorted(registry), *sorted(config.get("image_folders", {})), *FIXED_NAMES])
    raise ValueError(f"unknown dataset {name!r}; allowed: {allowed}")


def holds_tokens(info):
    """Whether a dataset (its dataset_info) holds token sequences, a language model's data, rather than images."""
    return len(info["shape"]) == 1


def image_folder_options(name, config):
    """The config section of an image-folder dataset ({path, resolution, max_images_per_class}), and its key."""
    if name == "imagenet":
        return config["imagenet"], "imagenet"
    return {**IMAGE_FOLDER_DEFAULTS, **config["image_folders"][name]}, f"image_folders.{name}"


def is_image_folder(name, config):
    """Whether a dataset is an image folder, the kind that can stream."""
    return name == "imagenet" or name in config.get("image_folders", {})
