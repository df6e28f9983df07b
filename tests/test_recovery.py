"""Faults injected into a finished tiny run, end to end: a moved tree and another way of invoking Snakemake, data
corrupted in place (a loud failure, then a retry of exactly the failed runs), data changed on disk (rebuilt), and
kill -9 of the whole run mid-training (a stale lock, then a resume that reruns only the killed run). Finished ok
records must never change."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import SHARED_MACHINE, SNAKEMAKE, VENV_ROOT, copy_repository

CONFIG = {"stacks": ["torch-2.13"], "datasets": ["synthetic-12x12x1"], "models": ["mlp"], "batch_sizes": [32, 512],
          "epochs": [2], "variants": ["eager"], "repeats": 2, "venv_root": str(VENV_ROOT), "ops": {"stacks": []},
          "contention": SHARED_MACHINE,
          "min_steady_seconds": 0,
          "synthetic": {"classes": 4, "train_size": 256, "test_size": 64, "seed": 0}}  # fmt: skip
ARRAYS = "results/data/synthetic-12x12x1/arrays.npz"


def run(workdir, *arguments, python=None, check=True):
    command = [python, "-m", "snakemake"] if python else [SNAKEMAKE]
    result = subprocess.run([*command, "--cores", "2", *arguments], cwd=workdir, capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert not check or result.returncode == 0, output[-6000:]
    return result.returncode, output


def records(workdir):
    """{record path: its bytes} of every run."""
    return {path: path.read_bytes() for path in sorted((workdir / "results/runs").glob("*/rep*/record.json"))}


def write_config(workdir, **changes):
    (workdir / "config.yaml").write_text(yaml.safe_dump(dict(CONFIG, **changes)))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("recovery")
    copy_repository(root)
    write_config(root)
    run(root)
    return root


def test_a_moved_tree_run_through_another_interpreter_path_plans_nothing(finished, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(finished, moved, symlinks=True)  # copy2: contents and modification times, as `mv` keeps them
    python3 = Path(sys.executable).with_name("python3")  # the same venv by another path: sys.executable differs
    _, output = run(moved, "-n", python=str(python3))
    assert "Nothing to be done" in output, output[-3000:]


def test_corrupted_data_fails_loudly_and_a_retry_reruns_exactly_the_failed_runs(finished):
    before, arrays = records(finished), finished / ARRAYS
    original, stat = arrays.read_bytes(), arrays.stat()
    corrupted = bytearray(original)
    corrupted[len(corrupted) // 2] ^= 0xFF  # one flipped byte, same size and modification time: bit rot
    arrays.write_bytes(bytes(corrupted))
    os.utime(arrays, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    write_config(finished, batch_sizes=[32, 64, 512])
    code, output = run(finished, check=False)
    assert code != 0, "a run with failed training runs must not exit 0"
    failed = {path: json.loads(data) for path, data in records(finished).items() if path not in before}
    assert len(failed) == 2 and all(record["status"] == "error" for record in failed.values())
    for record in failed.values():
        assert ARRAYS in record["error"] and "corrupted" in record["error"] and "snakemake" in record["error"]
    assert "2 run(s) with status error:" in output and "logs/train/" in output and "plan.py failed" in output
    assert "ERROR" in (finished / "results/report/report.html").read_text()  # the report is still rebuilt
    assert {path: data for path, data in records(finished).items() if path in before} == before

    arrays.write_bytes(original)  # restored (a new modification time: the hash decides)
    listed = subprocess.run([sys.executable, "scripts/plan.py", "failed", "--status", "error"], cwd=finished,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert sorted(Path(finished / path) for path in listed) == sorted(failed)
    run(finished, "--forcerun", *listed)
    after = records(finished)
    assert all(json.loads(after[path])["status"] == "ok" for path in failed)
    assert {path: data for path, data in after.items() if path in before} == before
    _, output = run(finished, "-n")
    assert "Nothing to be done" in output


def test_changed_data_is_set_aside_and_prepared_again(finished):
    arrays = finished / ARRAYS
    arrays.write_bytes(arrays.read_bytes()[:-10])  # truncated: another size
    _, output = run(finished, "-n")
    assert "bytes" in output and "set aside as" in output and "prepare_dataset" in output
    assert list((finished / "results/data").glob("synthetic-12x12x1.changed-*/arrays.npz"))
    run(finished)
    assert json.loads((finished / "results/data/synthetic-12x12x1/meta.json").read_text())["files"]


def test_kill_9_mid_training_then_resume_reruns_only_the_killed_run(finished):
    write_config(finished, batch_sizes=[32, 64, 512], epochs=[2, 400])
    before = records(finished)
    process = subprocess.Popen([SNAKEMAKE, "--cores", "2"], cwd=finished, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    logs = finished / "logs/train"
    deadline = time.monotonic() + 300
    while not any("epoch 3/400" in log.read_text() for log in logs.glob("*e400*/rep*.log")):
        assert time.monotonic() < deadline and process.poll() is None, "the long run never reached epoch 3"
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    code, output = run(finished, check=False)
    assert code != 0 and "--unlock" in output  # the stale lock, named with its remedy
    run(finished, "--unlock")
    run(finished)
    after = records(finished)
    assert {path: data for path, data in after.items() if path in before} == before  # nothing finished was lost
    for data in after.values():
        json.loads(data)  # every record is whole
    assert len(after) == len(before) + 4 and all(json.loads(after[p])["status"] == "ok" for p in after if p not in before)
