"""Downloadable datasets: fetch from a local HTTP server, verify, parse the real formats, and fail clearly."""

import gzip
import json
import subprocess

import numpy as np
import pytest
from archives import JPEG_TREE, cifar_like, mnist_like, registry_entry, serve, sha256
from conftest import REPO

FETCH, PREPARE = REPO / "scripts/fetch_archive.py", REPO / "scripts/prepare_dataset.py"
OPTIONS = {
    "synthetic": {"classes": 10, "train_size": 8, "test_size": 4, "seed": 0},
    "synthetic_imagenet": {"train_size": 6, "test_size": 3, "seed": 0},
    "imagenet": {"path": None, "resolution": 16, "max_images_per_class": None},
    "image_folders": {},
}


CORPUS = "".join(f"{index}: Now is the winter of our discontent\n" for index in range(40)).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    mnist, mnist_files = mnist_like(root / "mnist")
    cifar, cifar_files = cifar_like(root / "cifar10")
    corpus = root / "corpus" / "input.txt"
    corpus.parent.mkdir()
    corpus.write_bytes(CORPUS)
    httpd, url = serve(root)
    yield {
        "root": root,
        "url": url,
        "mnist": mnist,
        "mnist_files": mnist_files,
        "cifar": cifar,
        "cifar_files": cifar_files,
        "corpus_files": {"text": {"name": "input.txt", "sha256": sha256(corpus)}},
    }
    httpd.shutdown()


def run(python, script, *arguments):
    result = subprocess.run([str(python), str(script), *map(str, arguments)], capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def fetch(python, dataset, spec, urls, folder, offline):
    url_arguments = [argument for url in urls for argument in ("--url", url + spec["name"])]
    return run(
        python,
        FETCH,
        "--dataset",
        dataset,
        "--name",
        spec["name"],
        "--sha256",
        spec["sha256"],
        *url_arguments,
        "--offline-dir",
        offline,
        "--out",
        folder / spec["name"],
        "--retries",
        "2",
        "--backoff",
        "0",
    )


def prepare(python, name, out, entry=None, archives=None, **overrides):
    options = dict(OPTIONS, entry=entry, **overrides)
    return run(python, PREPARE, name, out, "--options", json.dumps(options), "--archives", archives or out)


def load(folder):
    with np.load(folder / "arrays.npz") as arrays:
        return {key: arrays[key] for key in arrays.files}, json.loads((folder / "meta.json").read_text())


def test_mnist_is_downloaded_verified_and_parsed(server, env_python, tmp_path):
    python = env_python("tools")
    entry = registry_entry("idx", (28, 28, 1), server["mnist_files"], server["url"] + "/mnist/")
    for spec in entry["files"].values():
        code, output = fetch(python, "mnist", spec, entry["urls"], tmp_path / "archives", tmp_path / "offline")
        assert code == 0, output
        assert f"verified {tmp_path / 'archives' / spec['name']}" in output
    code, output = prepare(python, "mnist", tmp_path / "data", entry, tmp_path / "archives")
    assert code == 0, output
    arrays, meta = load(tmp_path / "data")
    np.testing.assert_array_equal(arrays["train_x"][..., 0], server["mnist"]["train_images"])
    np.testing.assert_array_equal(arrays["test_y"], server["mnist"]["test_labels"])
    assert (meta["shape"], meta["train_size"], meta["test_size"]) == ([28, 28, 1], 64, 16)
    assert len(meta["mean"]) == 1 and 0.4 < meta["mean"][0] < 0.6


def test_cifar_tarball_is_parsed_into_nhwc(server, env_python, tmp_path):
    python = env_python("tools")
    entry = registry_entry("cifar-python", (32, 32, 3), server["cifar_files"], server["url"] + "/cifar10/")
    code, output = fetch(python, "cifar10", entry["files"]["archive"], entry["urls"], tmp_path, tmp_path / "none")
    assert code == 0, output
    code, output = prepare(python, "cifar10", tmp_path / "data", entry, tmp_path)
    assert code == 0, output
    arrays, meta = load(tmp_path / "data")
    first_row, first_labels = server["cifar"]["data_batch_1"]
    np.testing.assert_array_equal(arrays["train_x"][0], first_row[0].reshape(3, 32, 32).transpose(1, 2, 0))
    assert arrays["train_y"][:6].tolist() == first_labels
    assert arrays["train_x"].shape == (30, 32, 32, 3) and arrays["test_x"].shape == (6, 32, 32, 3)
    assert len(meta["mean"]) == 3


def test_a_text_corpus_is_tokenized_as_bytes_into_next_token_sequences(server, env_python, tmp_path):
    python = env_python("tools")
    entry = dict(registry_entry("text-bytes", (16,), server["corpus_files"], server["url"] + "/corpus/"), classes=256)
    code, output = fetch(python, "corpus", entry["files"]["text"], entry["urls"], tmp_path, tmp_path / "none")
    assert code == 0, output
    code, output = prepare(python, "corpus", tmp_path / "data", entry, tmp_path)
    assert code == 0, output
    arrays, meta = load(tmp_path / "data")
    tokens, cut = np.frombuffer(CORPUS, dtype=np.uint8), int(len(CORPUS) * 0.9)
    assert arrays["train_x"].shape == ((cut - 1) // 16, 16) and arrays["test_x"].shape == (
        (len(CORPUS) - cut - 1) // 16,
        16,
    )
    np.testing.assert_array_equal(arrays["train_x"][1], tokens[16:32])
    np.testing.assert_array_equal(arrays["train_y"][1], tokens[17:33])
    np.testing.assert_array_equal(arrays["test_x"][0], tokens[cut : cut + 16])
    assert (meta["shape"], meta["classes"], meta["mean"]) == ([16], 256, None)


def test_a_context_longer_than_a_corpus_split_is_refused_naming_it(server, env_python, tmp_path):
    (tmp_path / "input.txt").write_bytes(CORPUS)
    entry = dict(registry_entry("text-bytes", (400,), server["corpus_files"], "unused"), classes=256)
    code, output = prepare(env_python("tools"), "corpus", tmp_path / "data", entry, tmp_path)
    assert code != 0
    assert f"{tmp_path / 'input.txt'}: its test text has {len(CORPUS) - int(len(CORPUS) * 0.9)} bytes" in output
    assert "too few for one sequence of the context 400" in output and not (tmp_path / "data").exists()


def test_no_network_names_dataset_url_and_offline_folder(server, env_python, tmp_path):
    spec = server["mnist_files"]["train_labels"]
    code, output = fetch(env_python("tools"), "mnist", spec, ["http://127.0.0.1:9/mnist/"], tmp_path, tmp_path / "drop")
    assert code != 0
    assert "mnist: could not fetch train-labels-idx1-ubyte.gz" in output
    assert "http://127.0.0.1:9/mnist/train-labels-idx1-ubyte.gz" in output
    assert f"place the file at {tmp_path / 'drop' / 'mnist' / spec['name']}" in output
    assert not list(tmp_path.glob("*ubyte*")) and not list(tmp_path.glob(".*partial"))


def test_checksum_mismatch_removes_the_download(server, env_python, tmp_path):
    spec = dict(server["mnist_files"]["train_labels"], sha256="0" * 64)
    code, output = fetch(env_python("tools"), "mnist", spec, [server["url"] + "/mnist/"], tmp_path, tmp_path / "x")
    assert code != 0
    assert f"checksum mismatch for {tmp_path / ('.' + spec['name'] + '.partial')}: expected sha256 {'0' * 64}" in output
    assert not list(tmp_path.iterdir())


def test_offline_folder_is_used_first(server, env_python, tmp_path):
    spec = server["mnist_files"]["test_labels"]
    (tmp_path / "drop" / "mnist").mkdir(parents=True)
    (tmp_path / "drop" / "mnist" / spec["name"]).write_bytes((server["root"] / "mnist" / spec["name"]).read_bytes())
    code, output = fetch(
        env_python("tools"), "mnist", spec, ["http://127.0.0.1:9/"], tmp_path / "out", tmp_path / "drop"
    )
    assert code == 0, output
    assert "using the offline copy" in output and "downloading" not in output


def test_truncated_archive_is_named_and_never_parsed(server, env_python, tmp_path):
    files = {role: dict(spec) for role, spec in server["mnist_files"].items()}
    for spec in files.values():
        (tmp_path / spec["name"]).write_bytes((server["root"] / "mnist" / spec["name"]).read_bytes())
    cut = tmp_path / files["train_images"]["name"]
    cut.write_bytes(cut.read_bytes()[:300])
    entry = registry_entry("idx", (28, 28, 1), files, "unused")
    code, output = prepare(env_python("tools"), "mnist", tmp_path / "data", entry, tmp_path)
    assert code != 0
    assert f"{cut}: sha256" in output and f"but expected {files['train_images']['sha256']}; removed" in output
    assert not cut.exists() and not (tmp_path / "data").exists()


def test_wrong_format_is_named(server, env_python, tmp_path):
    files = {role: dict(spec) for role, spec in server["mnist_files"].items()}
    for spec in files.values():
        (tmp_path / spec["name"]).write_bytes((server["root"] / "mnist" / spec["name"]).read_bytes())
    labels = tmp_path / files["train_labels"]["name"]
    labels.write_bytes(gzip.compress(b"<html>not found</html>"))  # pinned as if it were right: parsing must refuse it
    files["train_labels"]["sha256"] = sha256(labels)
    entry = registry_entry("idx", (28, 28, 1), files, "unused")
    code, output = prepare(env_python("tools"), "mnist", tmp_path / "data", entry, tmp_path)
    assert code != 0
    assert f"{labels}: not an IDX file of 1 dimension(s)" in output


def test_imagenet_folder_is_resized_and_subset(env_python, tmp_path):
    python = env_python("tools")
    subprocess.run([str(python), "-c", JPEG_TREE, str(tmp_path / "ilsvrc")], check=True)
    imagenet = {"path": str(tmp_path / "ilsvrc"), "resolution": 16, "max_images_per_class": 3}
    code, output = prepare(python, "imagenet", tmp_path / "data", imagenet=imagenet)
    assert code == 0, output
    arrays, meta = load(tmp_path / "data")
    assert arrays["train_x"].shape == (9, 16, 16, 3) and arrays["test_x"].shape == (6, 16, 16, 3)
    assert sorted(set(arrays["train_y"].tolist())) == [0, 1, 2] and meta["classes"] == 3
    assert meta["source"]["classes"] == ["n01440764", "n01443537", "n01484850"]


def test_imagenet_without_class_folders_is_refused(env_python, tmp_path):
    (tmp_path / "flat" / "train").mkdir(parents=True)
    (tmp_path / "flat" / "val").mkdir()
    (tmp_path / "flat" / "train" / "a.JPEG").write_bytes(b"")
    imagenet = {"path": str(tmp_path / "flat"), "resolution": 16, "max_images_per_class": None}
    code, output = prepare(env_python("tools"), "imagenet", tmp_path / "data", imagenet=imagenet)
    assert code != 0
    assert f"{tmp_path / 'flat' / 'train'}: no class folders; expected train/<class>/*.JPEG" in output


def test_synthetic_imagenet_shape(env_python, tmp_path):
    code, output = prepare(env_python("tools"), "synthetic-imagenet", tmp_path / "data")
    assert code == 0, output
    arrays, meta = load(tmp_path / "data")
    assert arrays["train_x"].shape == (6, 256, 256, 3) and meta["classes"] == 1000
