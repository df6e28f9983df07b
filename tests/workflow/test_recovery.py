"""Faults injected into a finished tiny run, end to end: a moved tree and another way of invoking Snakemake, data
corrupted in place (a loud failure, then a retry of exactly the failed runs), data changed on disk (rebuilt), a venv
deleted (built again), and kill -9 of the whole run mid-training (a stale lock, then a resume that reruns only the killed run). Finished ok
records must never change."""

import contextlib
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
from build_env import venv_prefix
from conftest import REPO, SHARED_MACHINE, SNAKEMAKE, STACKS, VENV_ROOT, copy_repository, planned_rules
from dlbench import data

CONFIG = {
    "stacks": ["torch-2.13"],
    "datasets": ["synthetic-12x12x1"],
    "models": ["mlp"],
    "batch_sizes": [32, 512],
    "epochs": [2],
    "variants": ["eager"],
    "repeats": 2,
    "race": {"enabled": False},
    "venv_root": str(VENV_ROOT),
    "ops": {"stacks": []},
    "contention": SHARED_MACHINE,
    "min_steady_seconds": 0,
    "synthetic": {"classes": 4, "train_size": 256, "test_size": 64, "seed": 0},
}
ARRAYS = "results/data/synthetic-12x12x1/arrays.npz"


def run(workdir, *arguments, python=None, check=True):
    command = [python, "-m", "snakemake"] if python else SNAKEMAKE
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
    assert planned_rules(output) == {}, output[-3000:]


def flip_a_byte_keeping_the_modification_time(path):
    """Bit rot: one byte flipped, same size and modification time (only the change time moves)."""
    stat, content = path.stat(), bytearray(path.read_bytes())
    content[len(content) // 2] ^= 0xFF
    path.write_bytes(bytes(content))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def tree(folder):
    """{path: (bytes, modification time)} of every file under folder."""
    return {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(folder.rglob("*")) if path.is_file()}


def test_data_changed_in_place_is_prepared_again_in_the_same_invocation_and_a_dry_run_changes_nothing(finished):
    arrays, before = finished / ARRAYS, records(finished)
    flip_a_byte_keeping_the_modification_time(arrays)
    results = tree(finished / "results")
    _, output = run(finished, "-n")
    assert f"{ARRAYS} has SHA-256" in output and "set aside and prepared again" in output
    assert planned_rules(output).get("prepare_dataset") == 1 and planned_rules(output).get("train") == len(before)
    assert tree(finished / "results") == results, "a dry run must change no file"
    _, output = run(finished)
    aside = list((finished / "results/data").glob("synthetic-12x12x1.changed-*/arrays.npz"))
    assert len(aside) == 1 and aside[0].read_bytes() == results[arrays][0]  # kept for inspection, not deleted
    assert json.loads((finished / "results/data/synthetic-12x12x1/meta.json").read_text())["generation"] == 1
    after = records(finished)
    assert after.keys() == before.keys() and all(json.loads(data)["status"] == "ok" for data in after.values())
    assert planned_rules(run(finished, "-n")[1]) == {}, "prepared again once: the generation then stays"


def test_data_that_changes_after_planning_fails_loudly_and_a_retry_reruns_exactly_the_failed_runs(finished):
    """Data corrupted where planning cannot see it (its cheap check remembers this very file as verified: a change
    between planning and the run) is caught by each run's own hash; the next invocation prepares it again."""
    before, arrays = records(finished), finished / ARRAYS
    original = arrays.read_bytes()
    flip_a_byte_keeping_the_modification_time(arrays)
    stat = arrays.stat()
    verified = finished / "results/data/synthetic-12x12x1" / data.VERIFIED
    verified.write_text(
        json.dumps(
            {"bytes": stat.st_size, "inode": stat.st_ino, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns}
        )
    )
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

    _, output = run(finished, "-n")  # the error's promise: the next invocation prepares it again
    assert f"{ARRAYS} has SHA-256" in output and planned_rules(output).get("prepare_dataset") == 1

    arrays.write_bytes(original)  # restored: the hash matches again, nothing is prepared again
    code, output = run(finished, check=False)  # nothing else to do: the failures are still listed
    assert code != 0 and "2 run(s) with status error:" in output and planned_rules(output) == {}
    listed = subprocess.run(
        [sys.executable, "scripts/plan.py", "failed", "--status", "error"],
        cwd=finished,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(Path(finished / path) for path in listed) == sorted(failed)
    run(finished, "--forcerun", *listed)
    after = records(finished)
    assert all(json.loads(after[path])["status"] == "ok" for path in failed)
    assert {path: data for path, data in after.items() if path in before} == before
    assert planned_rules(run(finished, "-n")[1]) == {}


def test_an_unreadable_record_is_an_error_run_the_tables_survive_and_every_invocation_lists_it(finished, tmp_path):
    """A truncated record: aggregation names it and counts the run as an error instead of dying; each invocation,
    also one with nothing else to do, lists it and exits non-zero, with a retry hint that repeats --configfile; a dry
    run lists it too."""
    record = sorted(records(finished))[0]
    whole = record.read_bytes()
    os.truncate(record, 500)
    study = tmp_path / "study.yaml"
    study.write_text("telemetry_hz: 10\n")  # a study config given on the command line, changing nothing
    for _ in range(2):  # the first invocation aggregates again, the second has nothing else to do
        code, output = run(finished, "--configfile", str(study), check=False)
        assert code != 0 and "1 run(s) with status error:" in output
        assert f"record unreadable: {record.relative_to(finished)}: " in output
        assert f"-m snakemake --configfile {os.path.relpath(study, finished)} --forcerun" in output
        assert f"scripts/plan.py failed --configfile {os.path.relpath(study, finished)})" in output
    _, output = run(finished, "-n")  # a dry run names it too, as it plans
    assert f"record unreadable: {record.relative_to(finished)}: " in output and "Retry them with: " in output
    runs = (finished / "results/tables/runs.csv").read_text()
    assert "record unreadable" in runs and (finished / "results/report/report.html").exists()
    assert "record unreadable" in (finished / "logs/aggregate.log").read_text()
    record.write_bytes(whole)
    run(finished)
    assert "record unreadable" not in (finished / "results/tables/runs.csv").read_text()


def test_a_table_lost_is_rebuilt_by_a_plain_rerun(finished):
    (finished / "results/tables/summary.csv").unlink()
    (finished / "results/tables/ops.parquet").unlink()
    _, output = run(finished)
    assert (finished / "results/tables/summary.csv").exists() and (finished / "results/tables/ops.parquet").exists()


@contextlib.contextmanager
def full_disk(folder):
    """The folder on a filesystem holding its files and almost nothing more (a tmpfs mounted over it, the files
    copied in): the next files written there find it full. Skips where mounting is not allowed."""
    kept = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    pages = sum(-(-len(content) // 4096) or 1 for content in kept.values())  # a tmpfs file takes whole pages
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={(pages + 2) * 4}k", "tmpfs", str(folder)],
        check=False,
        capture_output=True,
    )
    if mount.returncode:
        pytest.skip(f"cannot mount a small tmpfs (root only): {mount.stderr.decode().strip()}")
    try:
        for name, content in kept.items():
            (folder / name).write_bytes(content)
        yield kept
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_failed_aggregation_or_rendering_keeps_the_last_tables_and_report(finished):
    """Snakemake leaves the tables and the report in place while their jobs run (update()); a job that fails, here
    on a full disk, replaces none of them."""
    for folder, rule in (("results/tables", "aggregate"), ("results/report", "report")):
        with full_disk(finished / folder) as before:
            code, output = run(finished, "--forcerun", rule, check=False)
            after = {path.name: path.read_bytes() for path in (finished / folder).iterdir() if path.is_file()}
        assert code != 0 and f"Error in rule {rule}" in output, output[-3000:]
        assert after == before
    assert "No space left on device" in (finished / "logs/aggregate.log").read_text()
    run(finished)  # with room again, aggregation and the report run again


def test_kill_9_mid_training_then_resume_reruns_only_the_killed_run(finished):
    # Two long runs (20-30 s each on a 2-core VM, one at a time): the checks below, while they run, must not outlast
    # them; the resumed invocation runs both again (the killed one and the one not started), so no more than two.
    write_config(finished, batch_sizes=[32], epochs=[2, 1000])
    before = records(finished)
    process = subprocess.Popen(
        [*SNAKEMAKE, "--cores", "2"],
        cwd=finished,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    logs = finished / "logs/train"
    deadline = time.monotonic() + 300
    while not any("epoch 3/1000" in log.read_text() for log in logs.glob("*e1000*/rep*.log")):
        assert time.monotonic() < deadline and process.poll() is None, "the long run never reached epoch 3"
        time.sleep(0.5)
    # While it runs, another invocation (and --unlock) is told so, with no advice to remove the lock; a dry run works.
    for arguments in ((), ("--unlock",)):
        code, output = run(finished, *arguments, check=False)
        assert code != 0 and f"by pid {process.pid} is still going in this folder" in output, output[-3000:]
        assert "It can be removed with the --unlock argument" not in output
    assert run(finished, "-n")[0] == 0
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    code, output = run(finished, check=False)
    assert code != 0 and "--unlock" in output and "still going" not in output  # the stale lock, with its remedy
    run(finished, "--unlock")
    run(finished)
    after = records(finished)
    assert {path: text for path, text in after.items() if path in before} == before  # nothing finished was lost
    for text in after.values():
        json.loads(text)  # every record is whole
    assert len(after) == len(before) + 2 and all(
        json.loads(after[p])["status"] == "ok" for p in after if p not in before
    )


def test_a_venv_deleted_or_damaged_between_two_invocations_is_installed_again_before_its_runs(env_python, tmp_path):
    """docs/stacks.md's way to rebuild an env is to delete its venv: the next invocation, dry runs included, installs
    it again before the jobs that need it, which run again with it. A venv damaged (a locked package changed) is named
    and installed again the same way."""
    venvs, study = tmp_path / "venvs", tmp_path / "study"
    venvs.mkdir(), study.mkdir()
    mxnet_env = STACKS["mxnet-1.9"]["env"]["cpu"]
    for env in (mxnet_env, "tools"):  # this study's venv root: the shared venvs, linked
        shared = env_python(env).parents[1]
        (venvs / shared.name).symlink_to(shared)
    copy_repository(study)
    write_config(study, stacks=["mxnet-1.9"], batch_sizes=[32], repeats=1, venv_root=str(venvs))
    run(study)
    mxnet = venv_prefix(venvs, REPO / "envs" / f"{mxnet_env}.yaml")
    mxnet.unlink()
    _, output = run(study, "-n")
    planned = planned_rules(output)
    assert (planned["install_venv"], planned["build_env"], planned["train"]) == (1, 1, 1), output[-3000:]
    run(study)
    assert (mxnet / "bin" / "python").exists() and not mxnet.is_symlink()
    assert [json.loads(text)["status"] for text in records(study).values()] == ["ok"]
    assert planned_rules(run(study, "-n")[1]) == {}
    numpy = next(mxnet.glob("lib/python*/site-packages/numpy-*.dist-info"))
    numpy.rename(numpy.with_name("numpy-1.26.4.dist-info"))
    _, output = run(study, "-n")
    assert f"NOTE: {mxnet} holds numpy 1.26.4, where envs/{mxnet_env}.lock.txt pins numpy==1.23.5" in output
    assert planned_rules(output)["install_venv"] == 1, output[-3000:]
