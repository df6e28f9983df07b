"""A script of the tools venv on a filesystem that refuses its write (an unwritable folder, a full disk) ends with one
line naming the path (scripts/dlbench/cli.py; the lines themselves: tests/unit/test_cli_errors.py)."""

import contextlib
import os
import subprocess

import pytest
from conftest import REPO
from filesystems import unwritable


def test_a_script_in_an_unwritable_folder_reports_one_line(tmp_path, env_python):
    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    with unwritable(tables):
        result = subprocess.run(
            [str(env_python("tools")), str(REPO / "scripts" / "aggregate_ops.py"), "--out", str(tables / "ops.csv")],
            capture_output=True,
            text=True,
        )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith(f"error: cannot write {tables / 'ops.csv'}: ")
    assert f"read-only folder: chmod u+w {tables}" in result.stderr


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs, filled: needs root and a kernel that lets this process mount."""
    folder = tmp_path / "full"
    folder.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        with contextlib.suppress(OSError), open(folder / "filler", "wb") as filler:
            filler.write(bytes(1 << 20))
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_script_on_a_full_disk_reports_one_line(full_disk, env_python):
    """pandas' to_csv fails at close() with no filename: the line still names the file."""
    result = subprocess.run(
        [str(env_python("tools")), str(REPO / "scripts" / "aggregate_ops.py"), "--out", str(full_disk / "ops.csv")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: cannot write {full_disk / 'ops.csv'}: No space left on device "
        f"(the disk holding {full_disk} is full: free space, then rerun)\n"
    )
