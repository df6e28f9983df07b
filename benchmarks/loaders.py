"""Loader throughput: images/s of each stack's own loader for streamed image folders (data placement `stream`) with
the model removed, per worker count, so that docs/findings.md can state what decode rate a core gives.

Each measurement is a run's loader-alone pass (dlbench/measure/loader.py, adapter.loader_pass): an epoch's items
(random-resized crop to --resolution, flip) read, decoded, augmented, batched and placed on the device, in the stack's
own interpreter, its loader made once (workers started once, as training's persistent workers are); one untimed pass,
then the median of --trials passes, each over --images images of a fresh shuffle. Without --folder the images are
generated (scripts/make_image_folder.py in the tools env): JPEGs of ImageNet's size and bytes per pixel (sides drawn
from --sides, 450x450 on average; --noise gives them photo-like detail, about 0.6 bytes per pixel). Run from the
repository root with the driver:

    .venv/bin/python benchmarks/loaders.py                                   # this machine, 1 and 2 workers
    .venv/bin/python benchmarks/loaders.py --folder /data/ILSVRC2012 --images 4096 --workers 1 4 8 16 --device gpu

Stacks without --python run in their env file's venv under .venvs (built if needed).
"""

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

import harness
from dlbench.variants import compiled_variant

COLUMNS = ["stack", "version", "loader", "workers", "images_per_s", "images_per_s_per_worker", "reason"]


def measure(args):
    """Inside a stack's interpreter: {images_per_s, loader, framework_version} of its loader with args.workers."""
    from dlbench import data
    from dlbench.clock import timed

    adapter = harness.import_adapter(args.inside, args.device, args.threads, {})
    meta = data.read_meta(Path(args.index).parent)
    experiment = {
        "device": args.device,
        "batch_size": args.batch_size,
        "variant": args.variant,
        "data_placement": "stream",
    }
    staged = adapter.stream(meta, experiment, args.workers)
    sizes = data.stream_files(meta, "train")[2]

    def one_pass(epoch):
        order = data.stream_order(sizes, args.batch_size, 0, epoch)[: args.images]
        return (
            len(order)
            / timed(lambda: adapter.sync(args.device), adapter.loader_pass, staged, order, args.batch_size)[1]
        )

    one_pass(0)
    rates = [one_pass(epoch) for epoch in range(1, args.trials + 1)]
    return {"images_per_s": statistics.median(rates), "loader": adapter.LOADER, "framework_version": adapter.version()}


def tools_python(venv_root):
    from build_env import build_venv, venv_prefix

    env_file = harness.REPO / "envs" / "tools.yaml"
    return build_venv(env_file, venv_prefix(venv_root, env_file)) / "bin" / "python"


def prepare_index(args, work):
    """The meta.json of the folder to read (generated unless --folder), indexed as the workflow indexes it."""
    python, folder = tools_python(args.venv_root), args.folder
    if folder is None:
        folder = work / "images"
        per_class = -(-args.images // args.classes)
        subprocess.run(
            [
                str(python),
                str(harness.REPO / "scripts" / "make_image_folder.py"),
                str(folder),
                "--classes",
                str(args.classes),
                "--train",
                str(per_class),
                "--val",
                "1",
                "--sides",
                *map(str, args.sides),
                "--noise",
                str(args.noise),
            ],
            check=True,
        )
    options = {
        "imagenet": {"path": None},
        "image_folders": {"bench": {"path": str(folder), "resolution": args.resolution, "max_images_per_class": None}},
    }
    subprocess.run(
        [
            str(python),
            str(harness.REPO / "scripts" / "index_image_folder.py"),
            "bench",
            str(work / "index" / "meta.json"),
            "--options",
            json.dumps(options),
        ],
        check=True,
    )
    return work / "index" / "meta.json"


def default_config_stacks(stacks):
    """The default config's stacks (the version study's earlier releases run the same loaders)."""
    import yaml

    return yaml.safe_load((harness.REPO / "config.yaml").read_text())["stacks"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+", help="default: the default config's stacks")
    parser.add_argument(
        "--python",
        nargs="+",
        default=[],
        metavar="STACK=PATH",
        help="run STACK in this existing interpreter (validated like config existing_envs)",
    )
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="worker counts to measure")
    parser.add_argument("--folder", type=Path, help="an image folder in ImageNet's layout (default: generated)")
    parser.add_argument("--images", type=int, default=256, help="images per timed pass (and generated)")
    parser.add_argument("--classes", type=int, default=8, help="classes of the generated folder")
    parser.add_argument("--sides", type=int, nargs=2, default=(350, 550), help="generated images' side range, px")
    parser.add_argument("--noise", type=float, default=12, help="generated images' pixel noise (ImageNet-like bytes)")
    parser.add_argument("--resolution", type=int, default=224, help="the crop's side, the model's input")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--trials", type=int, default=3, help="timed passes per measurement")
    parser.add_argument("--threads", default="1", help="the framework's CPU threads in the main process")
    parser.add_argument("--csv", type=Path, help="also write the table here")
    parser.add_argument("--venv-root", type=Path, default=harness.REPO / ".venvs", help="where stack venvs are built")
    parser.add_argument("--inside", help="adapter to measure in this interpreter (internal)")
    parser.add_argument("--index", help="(internal)")
    parser.add_argument("--variant", help="(internal)")
    args = parser.parse_args()
    if args.inside:
        args.workers = args.workers[0]
        print(json.dumps(measure(args)))
        return
    stacks, existing, chosen = harness.chosen_stacks(parser, args, default=default_config_stacks)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        index = prepare_index(args, Path(work))
        meta = json.loads(index.read_text())
        kib = statistics.mean((Path(meta["root"]) / entry[0]).stat().st_size / 1024 for entry in meta["train"])
        pixels = statistics.mean(entry[2] * entry[3] for entry in meta["train"])
        print(f"{meta['root']}: JPEGs of {kib:.0f} KiB and {pixels / 1e3:.0f} kilopixels on average")
        print(
            f"device {args.device}; {meta['root']}: {meta['train_size']} images, crops to {args.resolution}x"
            f"{args.resolution}, batch {args.batch_size}; median of {args.trials} passes of {args.images} images "
            f"after one untimed pass"
        )
        print(f"{'stack':<20} {'workers':>7} {'img/s':>9} {'img/s per worker':>16}  loader")
        for stack in chosen:
            entry = stacks[stack]
            python, problem = harness.interpreter(stack, entry, args.device, existing, args.venv_root)
            for workers in args.workers:
                row = {"stack": stack, "workers": workers}
                try:
                    if problem:
                        raise RuntimeError(problem)
                    options = [
                        "--inside",
                        entry["adapter"],
                        "--index",
                        str(index),
                        "--variant",
                        compiled_variant(entry),
                        "--workers",
                        str(workers),
                        "--device",
                        args.device,
                        "--threads",
                        args.threads,
                        "--images",
                        str(args.images),
                        "--batch-size",
                        str(args.batch_size),
                        "--trials",
                        str(args.trials),
                    ]
                    result = harness.run_inside(python, entry["environment"], __file__, options)
                    row.update(
                        version=result["framework_version"],
                        loader=result["loader"].split(" (")[0],
                        images_per_s=result["images_per_s"],
                        images_per_s_per_worker=result["images_per_s"] / workers,
                    )
                    print(
                        f"{stack:<20} {workers:>7} {row['images_per_s']:>9,.0f} "
                        f"{row['images_per_s_per_worker']:>16,.0f}  {row['loader']}",
                        flush=True,
                    )
                except RuntimeError as error:
                    row["reason"] = f"failed: {error}"
                    print(f"{stack:<20} {workers:>7} not run: {row['reason']}", flush=True)
                rows.append(row)
    if args.csv:
        harness.write_csv(args.csv, rows, COLUMNS)


if __name__ == "__main__":
    main()
