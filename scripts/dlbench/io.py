"""Atomic writes (a reader, aggregation or a rerun, never sees a half-written file) and file hashes. Standard library
only."""

import hashlib
import json
import os
import tempfile
from pathlib import Path


def write_text_atomic(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, prefix=f".{path.name}.") as handle:
        handle.write(text)
    os.chmod(handle.name, 0o644)  # NamedTemporaryFile creates 0600; results are meant to be shared
    os.replace(handle.name, path)


def write_json_atomic(path, payload):
    write_text_atomic(path, json.dumps(payload, indent=2, default=str) + "\n")


def file_sha256(path, chunk=1 << 24):
    """The file's SHA-256, read in 16 MiB chunks (prepared datasets can be gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
