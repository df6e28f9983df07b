"""Contention for real: a busy loop beside a training job (torch, one thread) is caught, and the run redone clean or,
killed while it waits to redo it, leaves no record (the counters and limits themselves: tests/unit/test_contention.py)."""

import json
import subprocess
import sys
import threading

import jsonschema
from runs import LENIENT, RECORD_SCHEMA, experiment, prepare_synthetic, runner_command

LIMITS = dict(LENIENT, max_foreign_cpu_cores=0.1, max_steal_share=0.05, retries=2, settle_seconds=0)


def test_a_training_job_beside_a_busy_loop_ends_contended_and_is_redone_clean(tmp_path, env_python):
    """A real run (torch, one thread) while a busy loop holds a core: its first try is contended, the busy loop is
    stopped as soon as the runner says so, and the next try is clean. The record keeps the contended try."""
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 1024, 64)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    limits = dict(LIMITS, max_foreign_cpu_cores=0.7, retries=5, settle_seconds=1)
    row = experiment(min_steady_seconds=1.0, measure_input_share=False)
    runner = subprocess.Popen(
        runner_command(env_python("torch-2.13-cpu"), row, dataset, tmp_path, limits),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = []

    def read():
        for line in runner.stdout:
            output.append(line)
            if " contended (" in line:
                hog.kill()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        runner.wait(timeout=600)
    finally:
        hog.kill()
        reader.join()
    record = json.loads((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    first = record["contended_attempts"][0]
    assert first["status"] == "contended" and first["contention"]["foreign_cpu_cores"] > 0.7, "".join(output)[-3000:]
    assert first["contention"]["reasons"][0].startswith("other processes used the CPU")
    assert record["status"] == "ok" and record["attempt"] >= 2, "".join(output)[-3000:]
    assert record["contention"]["foreign_cpu_cores"] <= 0.7 and record["contention"]["reasons"] == []
    assert (tmp_path / "telemetry.attempt1.csv").exists() and not list(tmp_path.glob(".try*"))
    header = (tmp_path / "telemetry.csv").read_text().splitlines()[0].split(",")
    assert {"foreign_cpu_cores", "steal_pct"} <= set(header)


def test_a_kill_during_a_retry_leaves_no_record_and_the_next_run_starts_clean(tmp_path, env_python):
    """Killed while it waits to run a contended run again, the runner leaves no record (nothing claims a clean
    measurement); run again, it discards the unfinished tries and writes one record."""
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 256, 64)
    row = experiment(min_steady_seconds=0.2, measure_input_share=False)
    always = dict(LIMITS, max_foreign_cpu_cores=0.0, retries=1, settle_seconds=60)  # every try is contended
    command = runner_command(env_python("torch-2.13-cpu"), row, dataset, tmp_path, always)
    runner = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for line in runner.stdout:
            if " contended (" in line:
                runner.kill()
                break
    finally:
        hog.kill()
        runner.wait()
    assert not (tmp_path / "record.json").exists() and list(tmp_path.glob(".try-*"))
    result = subprocess.run(
        runner_command(env_python("torch-2.13-cpu"), row, dataset, tmp_path, LENIENT), capture_output=True, text=True
    )
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["status"] == "ok" and record["attempt"] == 1, result.stderr[-3000:]
    assert not list(tmp_path.glob(".try*")) and not list(tmp_path.glob("telemetry.attempt*.csv"))
