"""A script's entry point: a filesystem that refuses a write (read-only or immutable folder, read-only filesystem, full
disk, quota, a file where a folder should be) is reported in one line naming the path, not in a traceback whose last
line alone matters. Standard library only: the driver and every stack venv import it.

    if __name__ == "__main__":
        run_main(main)

Any other exception keeps its traceback (a bug reads best with one). ENOENT is not a filesystem state here: the write
helpers create missing folders, so a missing path is a missing input, which is a bug of the workflow.
"""

import errno
import io
import os
import re
import sys
import tempfile
import time
import types
from pathlib import Path

# States of the machine's filesystem that no line of code can fix: reported in one line, the run's exit status 1.
READ_ONLY = {errno.EACCES, errno.EPERM, errno.EROFS}
FULL = {errno.ENOSPC, errno.EDQUOT}
MISPLACED = {errno.ENOTDIR, errno.EISDIR}  # a file where a folder should be, or a folder where a file should be
# Errors that only the filesystem raises: reported even when no path can be found. EACCES and EPERM also come from
# processes and devices (os.kill, a counter the kernel withholds): without a path they keep their traceback.
FILESYSTEM_ONLY = {errno.EROFS, errno.ENOSPC, errno.EDQUOT}
EXIT_STATUS = 1
INTERRUPTED = 130  # the status a shell gives a process that SIGINT ended
INTERRUPTED_LINE = "interrupted (Ctrl-C); the next invocation runs this job again"  # a job's log's last line


def log(message, file=None):
    """A progress line of a script's log, with the time of day (stdout unless `file` is given)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=file or sys.stdout, flush=True)


def run_main(main):
    """Run main() and exit with its return value; a filesystem error ends the script with one line on stderr, and so
    does Ctrl-C (the terminal sends SIGINT to Snakemake's jobs too): a traceback of wherever the job was is noise."""
    try:
        status = main()
    except KeyboardInterrupt:
        print(INTERRUPTED_LINE, file=sys.stderr)
        sys.exit(INTERRUPTED)
    except OSError as error:
        line = describe(error)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(EXIT_STATUS)
    sys.exit(status)


def describe(error):
    """The one line for an OSError the filesystem's state caused, None for any other (which keeps its traceback)."""
    code = error.errno
    if code not in READ_ONLY | FULL | MISPLACED:
        return None
    path = failed_path(error)
    if path is None and code not in FILESYSTEM_ONLY:
        return None
    reason = os.strerror(code)
    if path is None:
        return f"error: cannot write: {reason} ({hint(code, None)})"
    return f"error: cannot {verb(code, path)} {path}: {reason} ({hint(code, path)})"


def failed_path(error):
    """The path the failed call named: the exception's (a rename's destination before its source), one quoted in
    its message (pyarrow's), else the file open for writing nearest to where it was raised (a failed write(),
    flush() or close() names none). The temporary file of an atomic write stands for the file it replaces."""
    for name in (error.filename2, error.filename):
        if isinstance(name, (str, bytes, os.PathLike)):
            return replaced_file(os.fsdecode(name))
    quoted = re.search(r"'([^']*/[^']*)'", error.strerror or "")
    if quoted:
        return quoted.group(1)
    name = open_file_in_traceback(error.__traceback__)
    if name is None and error.errno in FILESYSTEM_ONLY:  # only writes fail so: a path the writer was handed
        name = path_argument_in_traceback(error.__traceback__)
    return replaced_file(name) if name else None


# tempfile's names: prefix + 8 of [a-z0-9_]; dlbench.io's atomic writes use the prefix ".<name>."
ATOMIC_TEMPORARY = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}")


def replaced_file(path):
    """The file an atomic write's temporary file (.<name>.XXXXXXXX beside it) stands for; any other path as it is."""
    match = ATOMIC_TEMPORARY.fullmatch(os.path.basename(path))
    return os.path.join(os.path.dirname(path), match["name"]) if match else path


def frames_innermost_first(traceback):
    frames = []
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    return reversed(frames)


def open_file_in_traceback(traceback):
    """The name of a file object open for writing in the frames the exception passed, innermost frame first: a local
    or an attribute of a local (pandas and matplotlib keep theirs on a writer object)."""
    for frame in frames_innermost_first(traceback):
        values = [
            value.__self__ if isinstance(value, (types.MethodType, types.BuiltinMethodType)) else value
            for value in frame.f_locals.values()
        ]
        for value in [*values, *(attribute for value in values for attribute in attributes(value))]:
            name = written_file_name(value)
            if name is not None:
                return name
    return None


# What writers call the path they are handed (pandas' to_parquet hands pyarrow a file object that keeps no name).
PATH_PARAMETERS = ("path", "filename", "fname", "path_or_buf", "where", "file")


def path_argument_in_traceback(traceback):
    """The path a writer was handed, from the innermost frame with a parameter so named that holds one."""
    for frame in frames_innermost_first(traceback):
        for parameter in PATH_PARAMETERS:
            value = frame.f_locals.get(parameter)
            if isinstance(value, (str, os.PathLike)) and value:
                return os.fspath(value)
    return None


def attributes(value):
    """An instance's attribute values, read from its __dict__: no property or __getattr__ runs."""
    if isinstance(value, (type, types.ModuleType)):
        return []
    try:
        return list(vars(value).values())
    except TypeError:  # no __dict__
        return []


def written_file_name(value):
    """The path of a file object opened for writing (by open() or tempfile), None for anything else. Only file types
    are asked for attributes: a local such as a DataFrame answers `.name` with a column."""
    if isinstance(value, tempfile._TemporaryFileWrapper):
        value = value.file
    if not isinstance(value, io.IOBase):
        return None
    try:
        name, mode = getattr(value, "name", None), getattr(value, "mode", None)
        if not isinstance(mode, str):  # a TextIOWrapper made around a buffer has no mode of its own
            mode = getattr(getattr(value, "buffer", None), "mode", None)
    except ValueError:  # a detached wrapper
        return None
    if isinstance(name, (str, bytes, os.PathLike)) and isinstance(mode, str) and set(mode) & set("wax+"):
        return os.fsdecode(name)
    return None


def verb(code, path):
    if code in MISPLACED:
        return "open"
    if code in READ_ONLY and os.path.exists(path) and not os.access(path, os.R_OK):
        return "read"
    return "write"


def hint(code, path, folder=None):
    """What the user can do, naming the folder (or file) to change: by default the path's folder."""
    folder = folder or (str(Path(path).parent) if path else None)
    disk = f"the disk holding {folder}" if folder else "the disk"
    if code == errno.EROFS:
        return f"{disk} is mounted read-only: remount it read-write or write the results elsewhere"
    if code == errno.ENOSPC:
        return f"{disk} is full: free space, then rerun"
    if code == errno.EDQUOT:
        return f"{disk} is over your quota: free space or raise the quota, then rerun"
    if code == errno.ENOTDIR:
        blocker = first_file_among_parents(path)
        return f"{blocker} is a file where a folder is expected: move it away" if blocker else "a parent is a file"
    if code == errno.EISDIR:
        return f"{path} is a folder where a file is expected: move it away"
    if verb(code, path) == "read":
        return f"make it readable: chmod u+r {path}"
    if os.path.exists(path) and os.access(folder, os.W_OK) and not os.path.isdir(path):
        return f"read-only file: chmod u+w {path}, or chattr -i {path} if it is immutable"
    return f"read-only folder: chmod u+w {folder}, or chattr -i {folder} if it is immutable"


def first_file_among_parents(path):
    """The first ancestor of path that exists and is not a folder (what NotADirectoryError is about), or None."""
    for parent in reversed(Path(path).parents):
        if parent.exists() and not parent.is_dir():
            return str(parent)
    return None


def unwritable_output(paths):
    """One line naming the first of these outputs whose folder (or, for one not made yet, nearest existing folder
    above it) the user cannot write, None when every one is writable: for a workflow's onstart, before Snakemake
    removes an old output or creates a folder and fails with its own traceback."""
    for path in paths:
        folder = Path(path).parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            code = errno.EROFS if is_read_only_mount(folder) else errno.EACCES
            return f"error: cannot write {path}: {os.strerror(code)} ({hint(code, str(path), str(folder))})"
    return None


def is_read_only_mount(folder):
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def other_checkouts_driver(workflow_folder, prefix):
    """A line saying that Snakemake runs from another folder's driver venv (`prefix`, sys.prefix) while this
    workflow's folder has its own .venv; None otherwise. A copied checkout's .venv/bin/activate still names the venv
    it was built at, so `source .venv/bin/activate` there runs the original checkout's driver without a word."""
    own = Path(workflow_folder) / ".venv"
    if not own.is_dir() or Path(prefix).resolve() == own.resolve():
        return None
    return (
        f"warning: Snakemake runs from the driver venv {prefix}, not this checkout's {own} (an activate script copied "
        f"with a checkout still names the venv it was built at): run `{own}/bin/python -m snakemake`, or rebuild the "
        "venv here if the copy's does not run"
    )
