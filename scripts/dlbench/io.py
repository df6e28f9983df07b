"""Atomic writes: a reader (aggregation, a rerun) never sees a half-written file. Standard library only."""

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
