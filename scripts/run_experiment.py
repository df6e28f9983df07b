"""Run train.py in a fresh child process, judge the machine's contention over its timed window, and guarantee a run
record, even if the child dies.

A Python exception inside training is recorded by train.py itself; this wrapper covers what train.py cannot: a crash
in native code, a kill by the out-of-memory killer, an import that aborts. It is also the root of the job's process
tree, whose CPU time is the job's own (dlbench/contention.py): a run during which other processes used the machine
beyond the config's `contention` limits is `contended`, kept inside the final record, and run again in a fresh
process after a settle wait, up to `retries` times. Each try writes to a scratch folder; the outputs are moved into
place once, at the end, the record (the workflow's one declared output) last, so an interrupted job never leaves a
record that claims more than it measured, nor one beside tables of another run.

Its argv is train.py's argv plus --contention JSON (the config's `contention` section). Standard library only.
"""

import json
import os
import shutil
import sys
from pathlib import Path

from dlbench import cli, contention, parallel, record_check, walltime
from dlbench.cli import run_main
from dlbench.io import write_json_atomic, write_text_atomic
from dlbench.process import process_alive, run_child
from dlbench.record import base_record, utc_now, write_epochs_csv
from dlbench.telemetry import TRACE_COLUMNS, load_nvml, visible_gpus

SCRIPTS = Path(__file__).resolve().parent

OUTPUTS = ("--record", "--epochs-csv", "--telemetry-csv")
# The workflow's shell opens fd 3 on its own stderr, so a retry is said on the console, not only in the log.
CONSOLE_FD = 3


def log(message):
    cli.log(message, sys.stderr)  # stdout is the training's


def tell_console(message):
    """One line on the workflow's console (fd 3 where the shell opened it) as well as in the job's log."""
    log(message)
    try:
        os.write(CONSOLE_FD, f"{message}\n".encode())
    except OSError:  # not opened: run by hand or by a test
        pass


def option(argv, name):
    return argv[argv.index(name) + 1]


def replaced(argv, name, value):
    """argv with the value of option `name` replaced (or the option removed where value is None)."""
    index = argv.index(name)
    return argv[:index] + ([] if value is None else [name, value]) + argv[index + 2 :]


def failed_record(argv, error):
    """A record with status error for a run whose training process wrote none."""
    experiment = json.loads(option(argv, "--experiment"))
    env_description = json.loads(Path(option(argv, "--env-description")).read_text())
    record = base_record(experiment, env_description, SCRIPTS.parent)
    record["error"] = error
    record["provenance"]["finished_at"] = utc_now()
    log(f"FAILED: {error}")
    return record


def train_once(argv):
    """One try in fresh processes (one, one per replica under torchrun, or one per node of a process-per-node stack
    across nodes); its record (train.py's, or one made here if it died first)."""
    experiment = json.loads(option(argv, "--experiment"))
    command = parallel.training_command(sys.executable, SCRIPTS / "train.py", argv, experiment, os.environ)
    outcome = run_child(command, log=sys.stderr)
    return record_of_try(argv, outcome, parallel.processes(experiment, parallel.job_nodes(experiment, os.environ)))


def record_of_try(argv, outcome, processes):
    """The record of a try whose processes ended with `outcome`: rank 0's, unless another replica process failed
    first, whose error then names the run's failure (rank 0 only saw a collective break, or was stopped by torchrun or
    srun before it could write)."""
    record_path = Path(option(argv, "--record"))
    failed = [
        (rank, json.loads(path.read_text()))
        for rank in range(1, processes)
        if (path := parallel.rank_output(record_path, rank)).exists()
    ]
    failed = [(rank, record) for rank, record in failed if record["status"] != "ok"]
    if record_path.exists():  # written atomically by train.py; a crash while exiting must not discard it
        if not outcome.ok:
            log(f"training process {outcome.description} after writing its record")
        record = json.loads(record_path.read_text())
    else:
        tail = outcome.stderr_tail(15) or "it printed nothing"
        record = failed_record(argv, f"training process {outcome.description} before writing its record: {tail}")
    if record["status"] == "ok" or not failed:
        return record
    rank, first = failed[0]
    record["status"] = first["status"]
    record["error"] = f"replica process {rank} of {processes} failed: {first['error']} (rank 0: {record['error']})"
    log(f"FAILED: {record['error']}")
    return record


def gpu_check(argv, thresholds):
    """Before a GPU job's timed part: wait for (or refuse) another process on its GPU, as the config says; the
    error to record, or None."""
    experiment = json.loads(option(argv, "--experiment"))
    if experiment["device"] != "gpu":
        return None
    nvml, _ = load_nvml()
    if nvml is None:  # train.py records why there is no GPU telemetry
        return None
    try:
        on_this_node = parallel.replicas(experiment) // parallel.job_nodes(experiment, os.environ)
        for _, handle in visible_gpus(nvml, on_this_node):  # every GPU the run uses here
            contention.wait_for_free_gpu(
                nvml,
                handle,
                contention.tree_members(os.getpid()),
                thresholds["foreign_gpu_process"],
                thresholds["gpu_wait_seconds"],
                log,
            )
    except contention.GpuBusy as error:
        return str(error)
    return None


def move_tables(argv, scratch):
    """Move the final try's tables into place (empty ones where it wrote none): before the record, which is last and
    holds their digests."""
    epochs, telemetry = Path(option(argv, "--epochs-csv")), Path(option(argv, "--telemetry-csv"))
    if (scratch / "epochs.csv").exists():
        os.replace(scratch / "epochs.csv", epochs)
    else:
        write_epochs_csv(epochs, [])
    if (scratch / "telemetry.csv").exists():
        os.replace(scratch / "telemetry.csv", telemetry)
    else:
        write_text_atomic(telemetry, ",".join(TRACE_COLUMNS) + "\n")
    return {"epochs.csv": epochs, "telemetry.csv": telemetry}


def scratch_folder(run_dir):
    """This job's own folder for its tries, beside its record and named by its process: two invocations that run the
    same job (one whose lock was removed while it ran) never read each other's tries. Those of jobs that no longer
    run (killed, interrupted) are removed."""
    for old in run_dir.glob(".try*"):
        pid = old.name.removeprefix(".try-")
        if not (pid.isdigit() and process_alive(int(pid), "run_experiment")):
            shutil.rmtree(old, ignore_errors=True)
    scratch = run_dir / f".try-{os.getpid()}"
    scratch.mkdir(parents=True)
    return scratch


def main():
    timeline = walltime.Timeline.of_this_process()
    timeline.mark("wrapper_start")
    argv = sys.argv[1:]
    thresholds = json.loads(option(argv, "--contention"))
    argv = replaced(argv, "--contention", None)
    os.environ[contention.ROOT_VARIABLE] = str(os.getpid())  # train.py counts this process tree as the job's
    run_dir = Path(option(argv, "--record")).parent
    scratch = scratch_folder(run_dir)
    for stale in run_dir.glob("telemetry.attempt*.csv"):
        stale.unlink()
    try_argv = argv
    for name, file in zip(OUTPUTS, ("record.json", "epochs.csv", "telemetry.csv")):
        try_argv = replaced(try_argv, name, str(scratch / file))
    experiment = json.loads(option(argv, "--experiment"))

    final_try = {}

    def try_once():
        busy = gpu_check(argv, thresholds)
        timeline.mark("retries" if final_try else "wrapper_setup")
        final_try["launched"] = walltime.CLOCK()
        record = failed_record(argv, busy) if busy else train_once(try_argv)
        final_try["ended"] = walltime.CLOCK()
        return record

    def set_aside(attempt):
        """A contended try's trace stays beside the record; its record goes inside the final one."""
        os.replace(scratch / "telemetry.csv", run_dir / f"telemetry.attempt{attempt}.csv")
        (scratch / "record.json").unlink()
        (scratch / "epochs.csv").unlink(missing_ok=True)  # a next try that dies before its first epoch has none
        for replica_output in scratch.glob("rank*.*"):  # other replica processes' own outputs
            replica_output.unlink()

    record = contention.until_clean(
        try_once, thresholds, f"{experiment['experiment_id']} rep {experiment['rep']}", tell_console, set_aside
    )
    record["tables_sha256"] = record_check.tables_sha256(move_tables(argv, scratch))
    teardown = walltime.CLOCK() - final_try["ended"]
    record["wall_s"] = walltime.joined(
        timeline.parts, record["wall_s"], final_try["launched"], final_try["ended"], teardown
    )
    write_json_atomic(option(argv, "--record"), record)
    shutil.rmtree(scratch, ignore_errors=True)
    log(f"wall {walltime.summary(record['wall_s'])}")
    log(f"status {record['status']} (try {record['attempt']}): record written to {option(argv, '--record')}")


if __name__ == "__main__":
    run_main(main)
