"""Data placement `stream`: indexing an image folder, every stack's own loader on the same generated folder, a
streamed run's record, and bad input (missing folder, no split, an empty class, a truncated JPEG, a file gone after
indexing). The epoch's items: tests/unit/test_stream_items.py; the workflow end to end:
tests/workflow/test_stream_study.py."""

import json
import os
import shutil
import subprocess

import jsonschema
import numpy as np
import pytest
from archives import make_image_folder
from conftest import REPO, SUPPORT, STACKS, library_environment, read_csv
from dlbench import data
from dlbench.variants import compiled_variant
from runs import RECORD_SCHEMA, experiment, runner_command

RESOLUTION, BATCH = 32, 8
TRAIN, VAL, CLASSES = 8, 4, 3  # per class


def index(env_python, root, out, name="tiny", max_per_class=None):
    """(exit code, output) of indexing `root` as image folder `name` into out/meta.json."""
    options = {
        "imagenet": {"path": None},
        "image_folders": {name: {"path": str(root), "resolution": RESOLUTION, "max_images_per_class": max_per_class}},
    }
    result = subprocess.run(
        [
            str(env_python("tools")),
            str(REPO / "scripts" / "index_image_folder.py"),
            name,
            str(out / "meta.json"),
            "--options",
            json.dumps(options),
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
    )
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def folder(env_python, tmp_path_factory):
    """A generated image folder with a truncated JPEG, a PNG and a CMYK JPEG among its training images, and its
    index."""
    root = tmp_path_factory.mktemp("stream")
    make_image_folder(
        env_python("tools"),
        root / "images",
        "--classes",
        str(CLASSES),
        "--train",
        str(TRAIN),
        "--val",
        str(VAL),
        "--sides",
        "24",
        "64",
        "--bad",
    )
    code, output = index(env_python, root / "images", root / "index")
    assert code == 0, output
    return {"images": root / "images", "index": root / "index", "output": output}


def test_indexing_names_and_skips_the_files_no_loader_could_read(folder):
    meta = data.read_meta(folder["index"])
    assert data.is_stream(meta) and meta["train_size"] == CLASSES * TRAIN and meta["test_size"] == CLASSES * VAL
    assert {entry["path"]: entry["reason"].split(" (")[0] for entry in meta["skipped"]} == {
        "train/n00000000/truncated.JPEG": "undecodable",
        "train/n00000001/png_content.JPEG": "not a JPEG",
        "train/n00000002/cmyk.JPEG": "a CMYK JPEG, which not every framework's decoder reads",
    }
    assert f"skipping {folder['images'] / 'train/n00000000/truncated.JPEG'}: undecodable" in folder["output"]
    assert sorted({entry[1] for entry in meta["train"]}) == [0, 1, 2]
    assert all(24 <= side <= 64 for entry in meta["train"] for side in entry[2:4])


@pytest.mark.parametrize(
    "layout, message",
    [
        ("missing", "does not exist or is not a folder"),
        ("no-val", "no val/ folder (found: train); expected train/<class>/*.JPEG and val/<class>/*.JPEG"),
        ("empty-class", "class folder(s) n00000001 hold no decodable JPEG; add images or remove the class"),
        ("val-differs", "train/ and val/ hold different class folders (n00000002 in only one)"),
    ],
)
def test_a_bad_layout_is_refused_naming_what_is_wrong(env_python, tmp_path, layout, message):
    root = tmp_path / "images"
    if layout != "missing":
        make_image_folder(env_python("tools"), root, "--classes", "3", "--train", "2", "--val", "1")
    if layout == "no-val":
        shutil.rmtree(root / "val")
    if layout == "empty-class":
        for image in (root / "train" / "n00000001").iterdir():
            image.write_bytes(image.read_bytes()[:200])  # every image of the class truncated
    if layout == "val-differs":
        shutil.rmtree(root / "val" / "n00000002")
    code, output = index(env_python, root, tmp_path / "index")
    assert code != 0 and message in output, output
    assert not (tmp_path / "index" / "meta.json").exists()


@pytest.fixture(scope="module")
def loader_probes(env_python, folder, tmp_path_factory):
    """stack -> the batches its own loader made of the folder (tests/support/probe_stream.py), probes run side by
    side."""
    running = {}
    for stack, entry in STACKS.items():
        out = tmp_path_factory.mktemp(f"stream-{stack}")
        command = [
            str(env_python(entry["env"]["cpu"])),
            str(SUPPORT / "probe_stream.py"),
            entry["adapter"],
            entry["variants"][0],
            str(folder["index"] / "meta.json"),
            str(out),
        ]
        log = open(out / "probe.log", "w")
        running[stack] = (
            subprocess.Popen(command, env=library_environment(entry["environment"]), stdout=log, stderr=log),
            out,
        )
    results = {}
    for stack, (process, out) in running.items():
        assert process.wait(timeout=600) == 0, f"{stack}:\n{(out / 'probe.log').read_text()[-3000:]}"
        results[stack] = dict(np.load(out / "stream.npz"))
    return results


def test_every_loader_crops_the_same_boxes_with_the_same_labels(loader_probes, folder):
    """Decoders and resamplers differ between frameworks by a few levels; a box, a flip or an image of its own
    differs by tens (a flipped image of the folder: about 40)."""
    meta = data.read_meta(folder["index"])
    order = data.stream_order(data.stream_files(meta, "train")[2], BATCH, 0, 0)
    reference = loader_probes["torch-2.13"]
    for stack, batches in loader_probes.items():
        assert batches["train_images"].shape == (CLASSES * TRAIN, RESOLUTION, RESOLUTION, 3), stack
        assert batches["train_images"].dtype == np.uint8 and batches["test_images"].shape[0] == CLASSES * VAL
        assert (batches["train_labels"] == data.stream_files(meta, "train")[1][order["index"]]).all(), stack
        assert (batches["test_labels"] == data.stream_files(meta, "val")[1]).all(), stack
        assert (batches["again_images"] == batches["train_images"]).all(), f"{stack}: augmentation not deterministic"
        for split in ("train_images", "test_images"):
            difference = np.abs(batches[split].astype(int) - reference[split].astype(int)).mean(axis=(1, 2, 3))
            assert difference.max() < 6, f"{stack} {split}: per-image mean difference {difference.max():.1f} levels"


def streamed_row(stack, **changes):
    entry = STACKS[stack]
    row = {
        "stack": stack,
        "framework": entry["framework"],
        "backend": entry["backend"],
        "adapter": entry["adapter"],
        "environment": entry["environment"],
        "dataset": "tiny",
        "model": "lenet",
        "batch_size": BATCH,
        "epochs": 2,
        "variant": compiled_variant(entry),
        "data_placement": "stream",
        "images_per_epoch": 16,
        "stream": {"workers": 2, "loader_batches": 2},
    }
    return experiment(**(row | changes))


def run(env_python, stack, row, index_folder, out):
    out.mkdir(parents=True, exist_ok=True)
    command = runner_command(env_python(STACKS[stack]["env"]["cpu"]), row, index_folder, out)
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env=dict(os.environ, **STACKS[stack]["environment"])
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out / "record.json").read_text()), result.stdout


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_streamed_run_finishes_with_its_loader_figures_in_the_record(env_python, folder, tmp_path, stack):
    record, output = run(env_python, stack, streamed_row(stack), folder["index"], tmp_path)
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "ok", output[-3000:]
    assert (
        record["images_per_epoch"] == 16 and [row["images"] for row in read_csv(tmp_path / "epochs.csv")] == ["16"] * 2
    )
    assert record["stream"]["workers"] == 2 and record["stream"]["skipped_images"] == 3
    assert record["stream"]["loader"].startswith(
        ("torch.utils.data.DataLoader", "tf.data", "gluon.data.DataLoader", "paddle.io.DataLoader")
    )
    assert record["loader_images_per_s"] > 0 and record["input_bound_share"] > 0
    assert record["input_share_covers"].startswith("the loader's reading, decoding")
    assert record["phases_s"]["data_loading"] >= 0 and 0 <= record["final_test_accuracy"] <= 1


@pytest.mark.parametrize("stack", ["torch-2.13", "mxnet-1.9", "tensorflow-2.21"])
def test_a_file_gone_after_indexing_ends_the_run_naming_it(env_python, folder, tmp_path, stack):
    """Worker processes must not hang on a read error: the run ends with the file named in its record."""
    images = tmp_path / "images"
    shutil.copytree(folder["images"], images)
    meta = dict(data.read_meta(folder["index"]), root=str(images))
    gone = images / meta["train"][0][0]
    gone.unlink()
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "meta.json").write_text(json.dumps(meta))
    row = streamed_row(stack, images_per_epoch=None, measure_input_share=False)
    record, output = run(env_python, stack, row, tmp_path / "index", tmp_path / "run")
    assert record["status"] == "error", output[-2000:]
    assert gone.name in record["error"], record["error"]
