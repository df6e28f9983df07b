"""A folder made unwritable for a test, the way the machine allows it."""

import contextlib
import os
import shutil
import subprocess

import pytest


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
