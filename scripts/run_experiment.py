"""Run train.py in a fresh child process and guarantee a run record, even if the child dies.

A Python exception inside training is recorded by train.py itself; this wrapper covers what train.py
cannot: a crash in native code, a kill by the out-of-memory killer, an import that aborts. Its argv is
train.py's argv. Standard library only.
"""

import collections
import json
import signal
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
from dlbench.io import write_json_atomic, write_text_atomic  # noqa: E402
from dlbench.record import base_record, utc_now, write_epochs_csv  # noqa: E402
from dlbench.telemetry import TRACE_COLUMNS  # noqa: E402


def option(argv, name):
    return argv[argv.index(name) + 1]


def exit_description(code):
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exited with code {code}"


def main():
    argv = sys.argv[1:]
    child = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "train.py"), *argv], stderr=subprocess.PIPE, text=True, bufsize=1
    )
    last_lines = collections.deque(maxlen=15)
    for line in child.stderr:
        sys.stderr.write(line)
        last_lines.append(line.rstrip())
    code = child.wait()
    record_path = Path(option(argv, "--record"))
    if record_path.exists():  # written atomically by train.py; a crash while exiting must not discard it
        if code != 0:
            print(f"training process {exit_description(code)} after writing its record", file=sys.stderr)
        return
    experiment = json.loads(option(argv, "--experiment"))
    env_description = json.loads(Path(option(argv, "--env-description")).read_text())
    record = base_record(experiment, env_description, SCRIPTS.parent)
    tail = " | ".join(last_lines) or "it printed nothing"
    record["error"] = f"training process {exit_description(code)} before writing its record: {tail}"
    record["provenance"]["finished_at"] = utc_now()
    epochs_csv = Path(option(argv, "--epochs-csv"))
    if not epochs_csv.exists():
        write_epochs_csv(epochs_csv, [])
    telemetry_csv = Path(option(argv, "--telemetry-csv"))
    if not telemetry_csv.exists():
        write_text_atomic(telemetry_csv, ",".join(TRACE_COLUMNS) + "\n")
    write_json_atomic(record_path, record)
    print(f"FAILED: {record['error']}", file=sys.stderr)


if __name__ == "__main__":
    main()
