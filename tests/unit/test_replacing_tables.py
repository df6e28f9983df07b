"""The tables are replaced all together or not at all: an error mid-write or a full disk leaves every previous table
as it was, and no temporary file behind. (The same in a real run, with the rules' outputs left in place by
Snakemake: tests/workflow/test_recovery.py.)"""

import errno
import importlib.util

import pandas as pd
import pytest
from conftest import SCRIPTS
from dlbench.io import replacing_all


def load_aggregate():
    spec = importlib.util.spec_from_file_location("aggregate", SCRIPTS / "aggregate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def previous_tables(folder, names):
    for name in names:
        (folder / f"{name}.csv").write_text(f"old {name}\n")
        (folder / f"{name}.parquet").write_bytes(f"old {name}".encode())
    return {path.name: path.read_bytes() for path in folder.iterdir()}


def test_an_error_mid_write_replaces_nothing(tmp_path):
    before = previous_tables(tmp_path, ["a", "b"])
    with pytest.raises(RuntimeError), replacing_all([tmp_path / "a.csv", tmp_path / "b.csv"]) as temporaries:
        for path, temporary in temporaries.items():
            with open(temporary, "w") as handle:
                handle.write("new\n")
            if path.name == "b.csv":
                raise RuntimeError("failed mid-write")
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_all_written_replaces_all(tmp_path):
    previous_tables(tmp_path, ["a", "b"])
    with replacing_all([tmp_path / "a.csv", tmp_path / "b.csv"]) as temporaries:
        for temporary in temporaries.values():
            with open(temporary, "w") as handle:
                handle.write("new\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.csv", "a.parquet", "b.csv", "b.parquet"]
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text() == "new\n"


def test_a_full_disk_while_aggregating_leaves_the_previous_tables(tmp_path, monkeypatch):
    """The third Parquet file finds the disk full: not one table changes."""
    aggregate = load_aggregate()
    names = ["runs", "summary", "comparisons", "fastest"]
    before = previous_tables(tmp_path, names)
    written = []

    def to_parquet(frame, path, index):
        written.append(path)
        if len(written) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        with open(path, "wb") as handle:
            handle.write(b"new parquet")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", to_parquet)
    frames = {name: pd.DataFrame({"x": [1, 2]}) for name in names}
    with pytest.raises(OSError) as full:
        aggregate.write_tables(frames, tmp_path)
    assert full.value.errno == errno.ENOSPC
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before

    monkeypatch.setattr(pd.DataFrame, "to_parquet", lambda frame, path, index: open(path, "wb").close())
    aggregate.write_tables(frames, tmp_path)  # with room again, every table is new
    assert all((tmp_path / f"{name}.csv").read_text() == "x\n1\n2\n" for name in names)
