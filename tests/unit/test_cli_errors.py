"""A filesystem that refuses a write (read-only or immutable folder, read-only filesystem, full disk, a file where a
folder should be) ends a script with one line naming the path (scripts/dlbench/cli.py), not a traceback. A script
of the tools venv so refused: tests/frameworks/test_script_errors.py; Snakemake: tests/workflow/test_snakemake_errors.py."""

import errno
import os

import pytest
from dlbench import cli
from dlbench.io import write_text_atomic
from filesystems import unwritable


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


def test_ctrl_c_ends_a_script_with_one_line_and_no_traceback(capsys):
    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exited:
        cli.run_main(interrupted)
    assert exited.value.code == 130
    assert capsys.readouterr().err == "interrupted (Ctrl-C); the next invocation runs this job again\n"


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


def test_unwritable_output_names_the_first_output_it_cannot_write(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    outputs = [tmp_path / "ok.csv", tables / "runs.csv", tables / "new" / "x.csv"]
    assert cli.unwritable_output(outputs) is None
    with unwritable(tables):
        line = cli.unwritable_output(outputs)
    assert line.startswith(f"error: cannot write {tables / 'runs.csv'}: ") and f"chmod u+w {tables}" in line


def test_a_driver_from_another_checkout_is_named(tmp_path):
    """`source .venv/bin/activate` in a copied checkout runs the original's driver: said, naming both venvs."""
    original, copy = tmp_path / "original", tmp_path / "copy"
    for checkout in (original, copy):
        (checkout / ".venv").mkdir(parents=True)
    line = cli.other_checkouts_driver(copy, original / ".venv")
    assert line.startswith(f"warning: Snakemake runs from the driver venv {original / '.venv'}, not this checkout's")
    assert f"run `{copy / '.venv'}/bin/python -m snakemake`" in line
    assert cli.other_checkouts_driver(copy, copy / ".venv") is None
    assert cli.other_checkouts_driver(tmp_path / "no-venv", original / ".venv") is None
