"""A filesystem that refuses a write (read-only or immutable folder, read-only filesystem, full disk, a file where a
folder should be) ends a script with one line naming the path (scripts/dlbench/cli.py), not a traceback."""

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from dlbench import cli
from dlbench.io import write_text_atomic


def raised(function):
    try:
        function()
    except OSError as error:
        return error
    raise AssertionError("no OSError")


def fail(code, filename=None, filename2=None):
    def function():
        raise OSError(code, os.strerror(code), filename, None, filename2)

    return function


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        (errno.EROFS, "mounted read-only"),
        (errno.ENOSPC, "is full"),
        (errno.EDQUOT, "quota"),
        (errno.EACCES, "read-only folder"),
        (errno.EPERM, "read-only folder"),
    ],
)
def test_a_refused_write_is_one_line_naming_the_path(tmp_path, code, hint):
    target = tmp_path / "tables" / "runs.csv"
    line = cli.describe(raised(fail(code, str(target))))
    assert line.startswith(f"error: cannot write {target}: {os.strerror(code)} (") and "\n" not in line
    assert hint in line and str(target.parent) in line


def test_run_main_prints_the_line_and_exits_non_zero(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.run_main(fail(errno.ENOSPC, str(tmp_path / "runs.csv")))
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        f"error: cannot write {tmp_path / 'runs.csv'}: No space left on device "
        f"(the disk holding {tmp_path} is full: free space, then rerun)\n"
    )


def test_run_main_exits_with_mains_status():
    with pytest.raises(SystemExit) as exited:
        cli.run_main(lambda: 3)
    assert exited.value.code == 3


@pytest.mark.parametrize(
    "function", [fail(errno.ENOENT, "missing.json"), fail(errno.EPERM), fail(errno.ECONNREFUSED, "host")]
)
def test_other_errors_keep_their_traceback(function):
    """A missing input is a bug; EPERM without a path is a process's (os.kill), not a folder's."""
    with pytest.raises(OSError):
        cli.run_main(function)
    with pytest.raises(ValueError):
        cli.run_main(lambda: int("x"))


def test_a_rename_names_its_destination(tmp_path):
    error = raised(fail(errno.EPERM, str(tmp_path / "a"), str(tmp_path / "b")))
    assert cli.describe(error).startswith(f"error: cannot write {tmp_path / 'b'}: ")


def test_an_atomic_writes_temporary_file_stands_for_its_target(tmp_path):
    line = cli.describe(raised(fail(errno.EROFS, str(tmp_path / ".runs.csv.k2x_9qz0"))))
    assert line.startswith(f"error: cannot write {tmp_path / 'runs.csv'}: ")


def test_a_failed_write_names_the_file_open_for_writing(tmp_path):
    """write(), flush() and close() raise without a filename (ENOSPC at close is the usual full disk): the file
    object open for writing in the traceback names it."""
    target = tmp_path / "epochs.csv"

    def write():
        with open(target, "w") as handle:
            handle.write("x")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    assert cli.describe(raised(write)).startswith(f"error: cannot write {target}: No space left on device (")


def test_a_parent_that_is_a_file_is_one_line_naming_it(tmp_path):
    """Real NotADirectoryError: a file stands where a folder of the output should be."""
    (tmp_path / "tables").write_text("not a folder")
    error = raised(lambda: write_text_atomic(tmp_path / "tables" / "runs" / "x.json", "{}"))
    assert isinstance(error, NotADirectoryError)
    line = cli.describe(error)
    assert line.startswith(f"error: cannot open {tmp_path / 'tables'}") and "\n" not in line
    assert f"{tmp_path / 'tables'} is a file where a folder is expected" in line


@contextlib.contextmanager
def unwritable(folder):
    """The folder made unwritable: immutable (chattr +i) as root, whom permission bits do not stop; mode 0555
    otherwise. Skips where neither stops a write."""
    root = os.geteuid() == 0
    if root and shutil.which("chattr"):
        lock, unlock = ["chattr", "+i", str(folder)], ["chattr", "-i", str(folder)]
        if subprocess.run(lock, capture_output=True).returncode != 0:
            pytest.skip(f"chattr +i is not supported on the filesystem of {folder}")
    elif not root:
        lock, unlock = None, None
        folder.chmod(0o555)
    else:
        pytest.skip("running as root without chattr: nothing makes a folder unwritable")
    try:
        probe = folder / ".probe"
        try:
            probe.touch()
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip(f"{folder} is still writable")
        yield folder
    finally:
        if unlock:
            subprocess.run(unlock, check=True)
        else:
            folder.chmod(0o755)


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


def test_unwritable_output_names_the_first_output_it_cannot_write(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    outputs = [tmp_path / "ok.csv", tables / "runs.csv", tables / "new" / "x.csv"]
    assert cli.unwritable_output(outputs) is None
    with unwritable(tables):
        line = cli.unwritable_output(outputs)
    assert line.startswith(f"error: cannot write {tables / 'runs.csv'}: ") and f"chmod u+w {tables}" in line


SNAKEFILE = """
import sys
sys.path.insert(0, {scripts!r})
from dlbench.cli import unwritable_output

rule all:
    input: "tables/runs.csv"

rule aggregate:
    input: "record.json"
    output: "tables/runs.csv"
    shell: "cp {{input}} {{output}}"
"""
# What the workflow's Snakefile can add (Snakemake 9.27; workflow.dag is not a public API): Snakemake removes the old
# outputs and logs of every job it reruns before running it, and a folder that refuses it ends Snakemake with its own
# 50-line traceback, before any script of ours runs.
ONSTART = """
onstart:
    problem = unwritable_output(path for job in workflow.dag.needrun_jobs() for path in [*job.output, *job.log])
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(1)
"""


@pytest.mark.parametrize("hook", [False, True], ids=["snakemake-alone", "onstart-check"])
def test_snakemake_in_an_unwritable_output_folder(tmp_path, hook):
    """A finished study whose tables folder became read-only, rerun: Snakemake alone prints a traceback (its
    remove_existing_output does not catch PermissionError); the onstart check says it in one line first."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(scripts=str(REPO / "scripts")) + (ONSTART if hook else ""))
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "runs.csv").write_text("old\n")
    os.utime(tmp_path / "tables" / "runs.csv", (1, 1))
    (tmp_path / "record.json").write_text("{}\n")  # newer than the output: the rule reruns
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1"]
    with unwritable(tmp_path / "tables"):
        result = subprocess.run(snakemake, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    if hook:
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines()[-1] == (
            f"error: cannot write tables/runs.csv: Permission denied (read-only folder: chmod u+w tables, "
            f"or chattr -i tables if it is immutable)"
        )
    else:
        assert "Traceback" in result.stderr and "remove_existing_output" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("PermissionError: ")
