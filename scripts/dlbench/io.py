"""Atomic writes (a reader, aggregation or a rerun, never sees a half-written file), strict JSON (a number that is not
finite is written as null: bare NaN or Infinity is not JSON) and file hashes. Standard library only."""

import hashlib
import json
import math
import numbers
import os
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path


@contextmanager
def replacing(path):
    """A temporary path beside `path` to write to: it replaces `path` in one step when the block ends, and is removed
    if the block fails, so that `path` is either the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(descriptor)
    try:
        yield temporary
        os.chmod(temporary, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


@contextmanager
def replacing_all(paths):
    """{path: temporary path beside it} to write to: all of them replace their paths when the block ends, and none
    does if it fails (a full disk, an error mid-write), so that the files are all old or all new, never a mix. The
    replacing renames need no space."""
    with ExitStack() as stack:
        yield {path: stack.enter_context(replacing(path)) for path in paths}


def write_text_atomic(path, text):
    with replacing(path) as temporary:
        Path(temporary).write_text(text)


def finite_or_null(value):
    """value with every number that is not finite (NaN, Infinity, also NumPy's) replaced by None, in dicts, lists and
    tuples at any depth; other numbers as Python ints and floats (NumPy scalars are not JSON)."""
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    number = float(value)
    return number if math.isfinite(number) else None


def json_text(payload, indent=2):
    """payload as strict JSON: numbers that are not finite become null, and anything that still is not JSON raises
    (allow_nan=False) instead of writing a file no strict parser reads. Objects JSON lacks are written as str()."""
    return json.dumps(finite_or_null(payload), indent=indent, default=str, allow_nan=False) + "\n"


def write_json_atomic(path, payload, indent=2):
    write_text_atomic(path, json_text(payload, indent))


def csv_cell(value):
    """A value as a CSV cell: empty for None and for a number that is not finite (pandas reads both as NaN)."""
    if value is None or (isinstance(value, numbers.Real) and not math.isfinite(value)):
        return ""
    return str(value)


def file_sha256(path, chunk=1 << 24):
    """The file's SHA-256, read in 16 MiB chunks (prepared datasets can be gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
