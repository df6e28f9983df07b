"""A run still going in the folder is named, never answered with advice to remove its lock; a run that ended (a
crash, kill -9) is not (dlbench/study/runlock.py). End to end: tests/workflow/test_recovery.py's kill -9 test."""

import json
import socket
import subprocess
import sys
import time

import pytest
from dlbench.process import process_alive
from dlbench.study import runlock


@pytest.fixture
def snakemake_like():
    """A process whose command line names snakemake, as a live run's does."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "snakemake"])
    deadline = time.monotonic() + 30
    while not process_alive(process.pid, "snakemake"):  # until it runs Python, not the forked test's command line
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield process
    process.kill()
    process.wait()


def test_a_live_run_is_named_with_its_start_and_pid(tmp_path, snakemake_like):
    marker = tmp_path / "run.json"
    runlock.note_run(snakemake_like.pid, "2026-01-02 03:04:05", marker)
    run = runlock.live_run(marker)
    assert runlock.still_going(run).startswith(
        f"a run started at 2026-01-02 03:04:05 by pid {snakemake_like.pid} is still going in this folder"
    )
    assert "do not remove its lock" in runlock.still_going(run)
    snakemake_like.kill()
    snakemake_like.wait()
    assert runlock.live_run(marker) is None  # ended: Snakemake's own advice holds
    runlock.forget_run(marker)
    assert not marker.exists() and runlock.live_run(marker) is None


def test_a_run_of_another_host_or_program_or_a_broken_marker_is_not_live(tmp_path, snakemake_like):
    marker = tmp_path / "run.json"
    marker.write_text(json.dumps({"pid": snakemake_like.pid, "host": socket.gethostname() + "-x", "started": ""}))
    assert runlock.live_run(marker) is None
    assert process_alive(snakemake_like.pid, "snakemake") and not process_alive(snakemake_like.pid, "quarto")
    marker.write_text("{half")
    assert runlock.live_run(marker) is None


@pytest.mark.parametrize(
    ("argv", "takes"),
    [([], True), (["--cores", "2", "--forcerun", "train"], True), (["--unlock"], True), (["-n"], False)]
    + [(["-np", "--cores", "2"], False), (["--dry-run"], False), (["--lint"], False)],
)
def test_only_invocations_that_write_or_unlock_take_the_folder(argv, takes):
    assert runlock.takes_the_folder(argv) is takes
