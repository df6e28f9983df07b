"""Names the config may use for datasets, and what each dataset looks like. Standard library only (the driver imports it)."""

import re

SYNTHETIC = re.compile(r"synthetic-(?P<height>\d+)x(?P<width>\d+)x(?P<channels>\d+)")
DIGITS_SHAPE = (28, 28, 1)
DATASET_NAMES = ("digits", "synthetic-<H>x<W>x<C> (e.g. synthetic-28x28x1, synthetic-32x32x3)")


def dataset_info(name, synthetic_options):
    """{'shape': (h, w, c), 'classes': n} of a dataset name, or ValueError naming the allowed names."""
    if name == "digits":
        return {"shape": DIGITS_SHAPE, "classes": 10}
    match = SYNTHETIC.fullmatch(name)
    if match:
        shape = tuple(int(match[key]) for key in ("height", "width", "channels"))
        if min(shape) < 1 or shape[2] not in (1, 3):
            raise ValueError(f"dataset {name!r}: height and width must be positive and channels 1 or 3")
        return {"shape": shape, "classes": synthetic_options["classes"]}
    raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(DATASET_NAMES)}")
