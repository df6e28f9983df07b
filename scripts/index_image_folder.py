"""Index an image folder for data placement `stream` (see dlbench/data.py and dlbench/study/image_folder.py).

    python scripts/index_image_folder.py NAME OUT_META --options JSON [--workers N]

OPTIONS holds the config sections `imagenet` and `image_folders`. Every JPEG is decoded once (reduced size);
files that do not decode are named in the log and in meta.json's `skipped`, and left out.
"""

import argparse
import json
import time

from dlbench.cli import run_main
from dlbench.io import write_json_atomic
from dlbench.study import image_folder
from dlbench.study.catalog import image_folder_options


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("out", help="the meta.json to write")
    parser.add_argument("--options", required=True, help="JSON: the config sections imagenet and image_folders")
    parser.add_argument("--workers", type=int, default=None, help="decoding processes (default: the cores)")
    args = parser.parse_args()
    options, key = image_folder_options(args.name, json.loads(args.options))
    start = time.perf_counter()
    try:
        meta = image_folder.index(options["path"], options["resolution"], options["max_images_per_class"], args.workers)
    except image_folder.ImageFolderError as error:
        raise SystemExit(f"dataset {args.name!r} (`{key}`): {error}")
    meta.update(name=args.name, source={"kind": "image-folder", "config_key": key, **options})
    write_json_atomic(args.out, meta, indent=None)  # compact: ImageNet indexes 1.33 million files
    print(
        f"{args.name}: indexed {meta['train_size']} train / {meta['test_size']} val images, "
        f"{len(meta['skipped'])} skipped, in {time.perf_counter() - start:.1f}s -> {args.out}"
    )


if __name__ == "__main__":
    run_main(main)
