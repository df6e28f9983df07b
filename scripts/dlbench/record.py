"""The run record: identity, outcome, timing, quality, resources, model and provenance of one run.

Standard library only: the runner writes a record for a process that died before writing its own. The fields are
typed in dlbench/record_fields.py, from which workflow/schemas/run_record.schema.yaml, the contract tests validate
records against, is generated.
"""

import dataclasses
import datetime
import hashlib
import json
import os
import platform
import re
import resource
import subprocess
from importlib import metadata
from pathlib import Path

from . import axes, parallel, record_check, record_fields
from .io import csv_cell, write_text_atomic

# What names a run: its experiment's id, stack, every axis (dlbench/axes.py), the settings its optimiser shares, and
# the repeat with its seed.
IDENTITY_KEYS = (
    "experiment_id",
    *axes.NAMES,
    "framework",
    "backend",
    "momentum",
    "weight_decay",
    "rep",
    "seed",
)
EPOCH_COLUMNS = ("epoch", "train_s", "eval_s", "train_loss", "test_loss", "test_accuracy", "images", "images_per_s")
NO_GPU_REASON = "device is cpu: GPU telemetry does not apply"


def utc_now():
    # Milliseconds: aggregation checks from these that no two timed runs overlapped.
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def experiment_sha256(experiment):
    """Hash of exactly the parameters that define the run (the slice of the config it depends on)."""
    return hashlib.sha256(json.dumps(experiment, sort_keys=True).encode()).hexdigest()


def cpuinfo():
    """/proc/cpuinfo as one {field: value} per logical CPU ([] where there is none: not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    return [
        dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
        for block in text.split("\n\n")
        if block.strip()
    ]


def field(cpu, name):
    """A /proc/cpuinfo field's value, its padding removed (None where the CPU lacks it)."""
    for key, value in cpu.items():
        if key.strip() == name:
            return value.strip()
    return None


def cpu_model():
    cpus = cpuinfo()
    name = field(cpus[0], "model name") if cpus else None
    return name or platform.processor() or platform.machine()


def cpu_generation():
    """The CPU's family, model and stepping: they tell its generation where the model name does not (a virtual
    machine's "AMD EPYC"). None where /proc/cpuinfo does not give them."""
    cpus = cpuinfo()
    numbers = [field(cpus[0], key) for key in ("cpu family", "model", "stepping")] if cpus else [None]
    return None if None in numbers else "family {}, model {}, stepping {}".format(*numbers)


def physical_cores():
    """The CPU cores as distinct (package, core) pairs: fewer than the logical CPUs where SMT runs two threads on a
    core (None where /proc/cpuinfo does not tell)."""
    pairs = {(field(cpu, "physical id"), field(cpu, "core id")) for cpu in cpuinfo()}
    return None if not pairs or (None, None) in pairs else len(pairs)


def memory_mb():
    """The machine's memory (MiB, from /proc/meminfo; None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def workflow_commit(repo):
    try:
        return subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def cuda_libraries(distributions=None):
    """(CUDA runtime, cuDNN) versions of this env, from its installed wheels, None where unknown. The CUDA builds
    of torch, TensorFlow and JAX load pip's nvidia-cuda-runtime-cuXX and nvidia-cudnn-cuXX wheels; MXNet's wheel
    name (mxnet-cu112) carries its CUDA version, and the cuDNN it bundles is not exposed."""
    names = {
        re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower(): dist.version
        for dist in (distributions if distributions is not None else metadata.distributions())
    }

    def installed(pattern):
        """(name, version) of the first installed wheel whose name matches, or (None, None)."""
        return next(
            ((name, version) for name, version in sorted(names.items()) if re.fullmatch(pattern, name)), (None, None)
        )

    cuda, cudnn = installed(r"nvidia-cuda-runtime-cu\d+")[1], installed(r"nvidia-cudnn-cu\d+")[1]
    mxnet = installed(r"mxnet-cu\d+")[0]
    if cuda is None and mxnet:
        digits = mxnet.removeprefix("mxnet-cu")
        cuda = f"{digits[:-1]}.{digits[-1]}"
    return cuda, cudnn


def dotted_cuda_versions(cuda, cudnn):
    """(CUDA, cuDNN) as a framework reports them, written as the wheels write them: PyTorch reports cuDNN as one
    integer (91900 for 9.19.0, 8902 for 8.9.2) and JAX's CUDA plugin both (12080 for CUDA 12.8); dotted versions, a
    bare major version (TensorFlow's build info gives cuDNN "9") and None pass unchanged."""

    def number(value):
        """The integer a version is encoded as; None for any other form."""
        return int(value) if value is not None and str(value).isdigit() and int(value) >= 1000 else None

    runtime, dnn = number(cuda), number(cudnn)
    if runtime is not None:
        cuda = f"{runtime // 1000}.{runtime % 1000 // 10}"
    if dnn is not None:  # cuDNN 9 gave the minor version two digits: 91900 is 9.19.0 where 8902 was 8.9.2
        major, rest = divmod(dnn, 10000 if dnn >= 90000 else 1000)
        cudnn = f"{major}.{rest // 100}.{rest % 100}"
    return cuda, cudnn


def peak_rss_mb():
    """Peak resident set size of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def installed_version(distribution):
    """The version of an installed distribution in this env, None where it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def provenance(env_description, repo, threads):
    """Where and with what a run ran: machine, Python, env file and installed packages, workflow commit, times (the
    GPU's fields are filled by the telemetry on GPU jobs; experiment_sha256, a training run's only, by base_record)."""
    described = dataclasses.asdict(
        record_fields.Provenance(
            host=platform.node(),
            # The batch job this run ran in (Slurm sets it in every job's environment); None outside a scheduler.
            slurm_job_id=os.environ.get("SLURM_JOB_ID"),
            cpu_model=cpu_model(),
            cpu_generation=cpu_generation(),
            cpu_cores=os.cpu_count(),
            cpu_physical_cores=physical_cores(),
            cpus_usable=parallel.schedulable_cpus(),
            memory_mb=memory_mb(),
            threads=threads,
            python=platform.python_version(),
            numpy=installed_version("numpy"),
            platform=platform.platform(),
            env_file=env_description["env_file"],
            env_file_sha256=env_description["env_file_sha256"],
            lock_sha256=env_description["lock_sha256"],
            env_deployment=env_description["deployment"],
            packages_sha256=env_description["packages_sha256"],
            workflow_commit=workflow_commit(repo),
            started_at=utc_now(),
        )
    )
    del described["experiment_sha256"]
    return described


def keep_one_target(record, language_model):
    """The record's one target: a language model's test loss, else the test accuracy; the other made null."""
    record["target_accuracy" if language_model else "target_loss"] = None


def base_record(experiment, env_description, repo):
    """A record with identity and provenance filled and every measurement empty: each section's defaults
    (dlbench/record_fields.py), status 'error' until set; the identity's keys first, in the axes' order."""
    identity = {key: experiment[key] for key in IDENTITY_KEYS}
    record = identity | dataclasses.asdict(
        record_fields.Identity(**identity, **batch_sizes(experiment), framework_version=None)
    )
    for section in record_fields.SECTIONS[1:]:
        record.update(record_fields.empty(section))
    record.update(
        target_accuracy=experiment.get("target_accuracy"),
        target_loss=experiment.get("target_loss"),
        min_steady_seconds=experiment.get("min_steady_seconds"),
        telemetry_hz=experiment.get("telemetry_hz"),
        provenance=provenance(env_description, repo, experiment.get("threads")),
    )
    if experiment["device"] == "cpu":
        record["gpu_fields_reason"] = NO_GPU_REASON
    record["provenance"]["experiment_sha256"] = experiment_sha256(experiment)
    return record


def batch_sizes(experiment):
    """{global_batch_size, replica_batch_size}: images per step over all replicas and on each (None where the
    batch size is unknown: the stand-in of an unreadable record)."""
    known = experiment["batch_size"] is not None
    return {
        "global_batch_size": parallel.global_batch_size(experiment) if known else None,
        "replica_batch_size": parallel.replica_batch_size(experiment) if known else None,
    }


def add_epoch(record, rows, figures):
    """An epoch's figures (epoch, train_s, eval_s, train_loss, test_loss, test_accuracy, images) into the record's
    lists and a row of epochs.csv, and the time to the record's target (its test accuracy, or a language model's
    test loss) once the epoch reached it (never an epoch whose loss was not finite, which ends the run as diverged);
    returns the row."""
    row = dict(zip(EPOCH_COLUMNS, (*figures, figures[-1] / figures[1]), strict=True))
    record["epoch_train_s"].append(row["train_s"])
    record["epoch_eval_s"].append(row["eval_s"])
    record["loss_curve"].append(row["train_loss"])
    rows.append(row)
    reached = record_check.reached_target(row, record["target_accuracy"], record["target_loss"])
    if reached and record["time_to_target_s"] is None:
        record["time_to_target_s"] = sum(record["epoch_train_s"])
    return row


def write_epochs_csv(path, rows):
    """The per-epoch CSV beside the record (header only when no epoch finished); a loss that was not finite (a
    diverged run) is an empty cell, as the record's null is."""
    lines = [",".join(EPOCH_COLUMNS)] + [",".join(csv_cell(row[column]) for column in EPOCH_COLUMNS) for row in rows]
    write_text_atomic(path, "\n".join(lines) + "\n")


class UnreadableRecord(Exception):
    """A record.json that cannot stand for its run: not a JSON object (truncated, edited, a disk error), or
    contradicted by the tables its run wrote beside it (dlbench/record_check.py): its path and why."""


UNREADABLE, INCONSISTENT = "record unreadable", "record inconsistent"


def read(path):
    """The record at path, or UnreadableRecord naming the file and what is wrong with it."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise UnreadableRecord(f"{UNREADABLE}: {path}: {error}") from None
    if not isinstance(record, dict) or "status" not in record:
        raise UnreadableRecord(f"{UNREADABLE}: {path}: not a run record (no status)")
    try:
        problem = record_check.problem(path, record)
    except (OSError, KeyError, TypeError, ValueError) as error:  # a field of the wrong type or missing
        problem = f"cannot be checked ({type(error).__name__}: {error})"
    if problem:
        raise UnreadableRecord(f"{INCONSISTENT}: {path}: {problem}")
    return record


def stands_in(record):
    """Whether a record is the stand-in of one that cannot stand for its run (stand_in): it has no tables to read."""
    return (record["error"] or "").startswith((UNREADABLE, INCONSISTENT))


MACHINE_KEYS = ("host", "slurm_job_id", "cpu_model", "cpu_cores", "gpu")


def stand_in(path, reason, like=None):
    """The record an unreadable record.json counts as: status `error` with the reason, the identity and machine of
    `like` (a readable repeat of the same experiment) where there is one, else only the experiment id and repeat
    its path (results/runs/<experiment>/rep<N>/record.json) names. Nothing else is known of the run."""
    run_folder = Path(path).parent
    like = like or {"device": None, "provenance": {}}
    experiment = {key: like.get(key) for key in IDENTITY_KEYS}
    experiment.update(experiment_id=run_folder.parent.name, rep=int(run_folder.name.removeprefix("rep")))
    # Grouped on by every table: unknown without a readable repeat, so the defaults.
    experiment.update(replicas=experiment["replicas"] or 1, scaling=experiment["scaling"] or "weak")
    empty = {key: None for key in ("env_file", "env_file_sha256", "lock_sha256", "deployment", "packages_sha256")}
    record = base_record(dict(experiment, device=like.get("device")), empty, None)
    record["provenance"] = dict.fromkeys(record["provenance"]) | {
        key: like["provenance"].get(key) for key in MACHINE_KEYS
    }
    record.update(device=like.get("device"), error=reason, cpu_energy_reason=reason)
    return record
