"""Small datasets in exactly the real formats (IDX gzip, CIFAR-10 python tarball, ILSVRC class folders) and a
local HTTP server for them, so the real download + verify + parse path runs without the internet; image folders made
by scripts/make_image_folder.py."""

import functools
import gzip
import hashlib
import http.server
import io
import pickle
import subprocess
import tarfile
import threading
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_idx(path, array):
    """IDX: magic 0x0000080N (unsigned bytes, N dimensions), big-endian int32 sizes, then the bytes; gzipped."""
    header = (0x800 + array.ndim).to_bytes(4, "big") + b"".join(size.to_bytes(4, "big") for size in array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def mnist_like(folder, train=64, test=16, seed=0):
    """The four MNIST files of a small random set; returns {role: array} of what was written."""
    rng = np.random.default_rng(seed)
    arrays = {
        "train_images": rng.integers(0, 256, (train, 28, 28)),
        "train_labels": rng.integers(0, 10, train),
        "test_images": rng.integers(0, 256, (test, 28, 28)),
        "test_labels": rng.integers(0, 10, test),
    }
    names = {
        "train_images": "train-images-idx3-ubyte.gz",
        "train_labels": "train-labels-idx1-ubyte.gz",
        "test_images": "t10k-images-idx3-ubyte.gz",
        "test_labels": "t10k-labels-idx1-ubyte.gz",
    }
    folder.mkdir(parents=True, exist_ok=True)
    for role, array in arrays.items():
        write_idx(folder / names[role], array)
    files = {role: {"name": name, "sha256": sha256(folder / name)} for role, name in names.items()}
    return arrays, files


def cifar_like(folder, per_batch=6, seed=0):
    """cifar-10-python.tar.gz with five training batches and a test batch of CHW rows, as the real archive."""
    rng = np.random.default_rng(seed)
    batches = {}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for member in [f"data_batch_{index}" for index in range(1, 6)] + ["test_batch"]:
            data = rng.integers(0, 256, (per_batch, 3072)).astype(np.uint8)
            labels = rng.integers(0, 10, per_batch).tolist()
            batches[member] = (data, labels)
            payload = pickle.dumps({b"batch_label": member.encode(), b"labels": labels, b"data": data})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{member}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return batches, {"archive": {"name": path.name, "sha256": sha256(path)}}


def registry_entry(format_name, shape, files, base_url):
    return {
        "format": format_name,
        "shape": list(shape),
        "classes": 10,
        "licence": "test data",
        "urls": [base_url],
        "files": files,
    }


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(folder):
    """An HTTP server for folder on 127.0.0.1 (a free port), in a daemon thread; returns (server, base URL)."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


JPEG_TREE = """
import sys
from pathlib import Path
import numpy as np
from PIL import Image
root, layout = Path(sys.argv[1]), {"train": 4, "val": 2}
rng = np.random.default_rng(0)
for split, count in layout.items():
    for wnid in ("n01440764", "n01443537", "n01484850"):
        (root / split / wnid).mkdir(parents=True)
        for index in range(count):
            size = (int(rng.integers(20, 40)), int(rng.integers(20, 40)))
            pixels = rng.integers(0, 256, (size[1], size[0], 3)).astype("uint8")
            Image.fromarray(pixels).save(root / split / wnid / f"{wnid}_{index}.JPEG", quality=90)
"""


def make_image_folder(python, root, *arguments):
    """A generated image folder of ImageNet's layout at root (scripts/make_image_folder.py, run by `python`, the tools
    env's interpreter: it needs Pillow)."""
    subprocess.run(
        [str(python), str(REPO / "scripts" / "make_image_folder.py"), str(root), *map(str, arguments)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
