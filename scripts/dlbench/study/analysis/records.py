"""The tables made straight from the run records: runs (one row per run, and per contended try kept inside a
record), epochs, telemetry (each experiment's first finished repeat, binned) and max_batch (one row per search).
A run's machine is the CPU model, and for a GPU run the GPU's name first: runs on different machines are never pooled.
"""

import dataclasses
import itertools
import json
import math
import sys
from pathlib import Path

import pandas as pd

from dlbench import record as run_record
from dlbench import record_fields, walltime
from dlbench.contention import describe_gpu_processes
from dlbench.record_fields import at_least
from dlbench.study.analysis.noise import steadiness_columns


@dataclasses.dataclass(kw_only=True)
class Derived:
    """Runs-table columns that flatten() derives from a record's fields, declared as the record's own are, so that
    the summary table reads how to take them over repeats from the same place (dlbench/record_fields.py)."""

    first_epoch_s: float | None = at_least(
        0, "training time of the first epoch, compilation included", "s", summary="interval"
    )
    steady_epoch_s: float | None = at_least(0, "mean training time of a steady epoch", "s", summary="interval")
    train_images_per_busy_core: float | None = at_least(
        0, "a CPU run's steady throughput per core it kept busy (per_busy_core)", "images/s", summary="mean"
    )


def flatten(record):
    """One runs-table row: nested sections become prefixed columns, lists become JSON text."""
    row = {key: value for key, value in record.items() if not isinstance(value, (dict, list))}
    stream = record["stream"] or {}
    row.update({f"stream_{key}": stream.get(key) for key in STREAM_CELLS})
    row.update({f"phase_{name}_s": seconds for name, seconds in record["phases_s"].items()})
    row.update(wall_columns(record.get("wall_s") or {}))
    row.update({f"provenance_{key}": value for key, value in record["provenance"].items()})
    row["provenance_threads"] = str(record["provenance"]["threads"])  # a number or "framework": one column type
    row["engaged"] = json.dumps(record["engaged"], sort_keys=True)
    row["backend_version"] = record["engaged"].get("backend_version")  # where a stack has one (Keras: "jax 0.10.2")
    for key in ("epoch_train_s", "epoch_eval_s", "loss_curve"):
        row[key] = json.dumps(record[key])
    row["extra_steady_epochs_s"] = json.dumps(record.get("extra_steady_epochs_s") or [])
    row.update(steadiness_columns(row))
    steady = record["epoch_train_s"][1:]
    row["first_epoch_s"] = record["epoch_train_s"][0] if record["epoch_train_s"] else None
    row["steady_epoch_s"] = sum(steady) / len(steady) if steady else None
    row["training_s"] = sum(record["epoch_train_s"]) if record["epoch_train_s"] else None
    row["target_epoch"] = target_epoch(record)
    row["train_images_per_busy_core"] = per_busy_core(record)
    row.update(dataset_columns(record.get("dataset_description")))
    row.update(contention_columns(record.get("contention")))
    row["attempt"], row["final_try"] = record.get("attempt", 1), True
    return row


def per_busy_core(record):
    """A CPU run's steady throughput per core it kept busy (its CPU time over wall time, in cores): frameworks left
    to their own thread defaults use unequal shares of the machine, and this sets them side by side per core. None
    on a GPU, where the CPU only feeds the device, and where a figure is missing."""
    busy, cores = record.get("cpu_utilisation_mean"), record["provenance"].get("cpu_cores")
    throughput = record.get("train_images_per_s")
    if record["device"] != "cpu" or not busy or not cores or throughput is None:
        return None
    return throughput / (busy / 100 * cores)


def wall_columns(parts):
    """The run's wall time (dlbench/walltime.py): each part, the whole and the harness's share of it; empty in records
    older than it."""
    if not parts:
        return {}
    return {
        **{f"wall_{part}_s": seconds for part, seconds in parts.items()},
        "run_wall_s": sum(parts.values()),
        "harness_s": walltime.harness_seconds(parts),
    }


def target_epoch(record):
    """The epoch after which the run first reached its target accuracy: its time to target is the training time of
    epochs 1 to this one. None where it never reached it."""
    if record["time_to_target_s"] is None:
        return None
    for epoch, trained in enumerate(itertools.accumulate(record["epoch_train_s"]), 1):
        if math.isclose(trained, record["time_to_target_s"], rel_tol=1e-9):
            return epoch
    return None


def dataset_columns(description):
    """The dataset as the run read it, as runs-table columns; empty where the run ended before reading it, or was
    recorded before datasets were described."""
    description = description or {}
    shape = description.get("image_shape")
    return {
        "dataset_train_images": description.get("train_images"),
        "dataset_test_images": description.get("test_images"),
        "dataset_classes": description.get("classes"),
        "dataset_image_shape": "x".join(map(str, shape)) if shape else None,
    }


def cells(cls):
    """The fields of a record object (dlbench/record_fields.py) that a table cell holds as they are: a number or a
    string, not a list or an object."""
    properties = record_fields.object_schema(cls)["properties"]
    return [name for name, schema in properties.items() if not {"array", "object"} & record_fields.schema_types(schema)]


CONTENTION_CELLS, STREAM_CELLS = cells(record_fields.Contention), cells(record_fields.Stream)


def contention_columns(contention):
    """The record's contention section as runs-table columns (a record from before it was measured: empty)."""
    contention = contention or {}
    columns = {f"contention_{key}": contention.get(key) for key in CONTENTION_CELLS}
    columns["contention_foreign_gpu_processes"] = describe_gpu_processes(contention.get("foreign_gpu_processes") or [])
    columns["contention_throttle_reasons"] = ", ".join(contention.get("throttle_reasons") or [])
    columns["contention_reasons"] = "; ".join(contention.get("reasons") or [])
    columns["contention_unavailable"] = "; ".join(
        f"{part}: {why}" for part, why in (contention.get("unavailable") or {}).items()
    )
    return columns


def contended_try(attempt):
    """A contended try's row: its wall time is its training process's parts alone (the wrapper joins only the final
    try's), so it has no wall columns; the final record's `retries` part holds the try's whole time."""
    wall = wall_columns(attempt.get("wall_s") or {})
    return {key: value for key, value in flatten(attempt).items() if key not in wall}


def with_contended_tries(runs, records):
    """The runs table with a row for each contended try kept inside a final record (final_try false, the machine
    of its run): listed with its figures, never in the statistics, which take status ok only."""
    tries = [
        dict(contended_try(attempt), machine=machine, final_try=False)
        for (_, record), machine in zip(records, runs["machine"])
        for attempt in record.get("contended_attempts", [])
    ]
    return pd.concat([runs, pd.DataFrame(tries)], ignore_index=True) if tries else runs


def machines(runs):
    """Per run, the machine it ran on: the CPU model, and for a GPU run the GPU's name first. A GPU run that failed
    before naming its GPU takes the name that other runs on its host recorded."""
    named = runs.dropna(subset=["provenance_gpu"])
    gpu_of_host = named.groupby("provenance_host")["provenance_gpu"].first()
    gpus = runs["provenance_gpu"].fillna(runs["provenance_host"].map(gpu_of_host)).where(runs["device"] == "gpu")
    return [f"{gpu} / {cpu}" if isinstance(gpu, str) else cpu for gpu, cpu in zip(gpus, cpu_names(runs))]


def cpu_names(runs):
    """Per run, its CPU: the model's name, and where runs of one model could use different numbers of CPUs (machines
    of several sizes, or a study narrowed by taskset or Slurm), that number with the machine's own, since a run on 2
    of a machine's CPUs is not a run on 8."""
    usable = runs.get("provenance_cpus_usable", pd.Series(None, index=runs.index, dtype=object))
    counts = pd.DataFrame(
        {
            "model": runs["provenance_cpu_model"],
            "usable": usable.fillna(runs["provenance_cpu_cores"]),
            "cores": runs["provenance_cpu_cores"],
        }
    )
    sizes = counts.dropna().drop_duplicates().groupby("model")["usable"].nunique()
    return [
        cpu_name(model, usable, cores) if sizes.get(model, 1) > 1 else model
        for model, usable, cores in zip(runs["provenance_cpu_model"], counts["usable"], counts["cores"])
    ]


def cpu_name(model, usable, cores):
    if pd.isna(usable) or pd.isna(cores):
        return model
    return f"{model} ({int(usable)} of {int(cores)} CPUs)" if usable < cores else f"{model} ({int(usable)} CPUs)"


def overlapping_runs(runs):
    """Per run, how many other runs on the same host ran at the same time, from the recorded start and end
    times. Every timed job takes all cores (and GPU jobs the GPU), so anything above 0 is a flaw."""
    start = pd.to_datetime(runs["provenance_started_at"], utc=True)
    end = pd.to_datetime(runs["provenance_finished_at"], utc=True)
    counts = []
    for index in runs.index:
        same_host = runs["provenance_host"] == runs.at[index, "provenance_host"]
        overlaps = same_host & (start < end[index]) & (start[index] < end) & (runs.index != index)
        counts.append(int(overlaps.sum()))
    return counts


def read_records(paths):
    """(path, record) of every record. An unreadable one is named on stderr and counts as an `error` run of its
    experiment (dlbench.record.stand_in), with the identity and machine of a readable repeat where there is one."""
    readable, unreadable = {}, {}
    for path in paths:
        try:
            readable[path] = run_record.read(path)
        except run_record.UnreadableRecord as error:
            print(f"counted as error: {error}", file=sys.stderr)
            unreadable[path] = str(error)
    like = {Path(path).parent.parent: record for path, record in readable.items()}
    return [
        (
            path,
            readable[path]
            if path in readable
            else run_record.stand_in(path, unreadable[path], like.get(Path(path).parent.parent)),
        )
        for path in paths
    ]


def epoch_rows(record_path, record, machine):
    epochs = pd.read_csv(Path(record_path).with_name("epochs.csv"))
    # A run that finished no epoch leaves a header only, which reads as text: numbers in every table all the same.
    epochs = epochs.astype({column: "int64" if column == "epoch" else "float64" for column in epochs.columns})
    epochs.insert(0, "rep", record["rep"])
    epochs.insert(0, "machine", machine)
    epochs.insert(0, "experiment_id", record["experiment_id"])
    return epochs


TRACE_POINTS = 400  # per run: enough for a figure, small enough for hours-long GPU runs at 10 Hz
# The narrowest bin: 5 samples at the sampler's 10 Hz, so that a utilisation reads as a level, not as the 0-100 %
# flicker of single samples on a run of a few seconds.
TRACE_MIN_BIN_S = 0.5
TRACE_VALUES = ["gpu_util_pct", "gpu_memory_mb", "power_w", "cpu_util_pct", "rss_mb"]


def trace_rows(record_path, record, machine):
    """The run's telemetry trace averaged over at most TRACE_POINTS equal time bins, each at least TRACE_MIN_BIN_S
    wide (each bin keeps the phase it starts in)."""
    trace = pd.read_csv(Path(record_path).with_name("telemetry.csv"))
    if trace.empty:
        return trace
    width = max(trace["t_s"].max() / TRACE_POINTS, TRACE_MIN_BIN_S)
    bins = (trace["t_s"] // width).astype(int)
    binned = trace.groupby(bins).agg(
        t_s=("t_s", "first"), phase=("phase", "first"), **{name: (name, "mean") for name in TRACE_VALUES}
    )
    binned.insert(0, "rep", record["rep"])
    binned.insert(0, "machine", machine)
    binned.insert(0, "experiment_id", record["experiment_id"])
    return binned.reset_index(drop=True)


def telemetry_table(records, machines):
    """Binned traces of the first finished repeat of every experiment on each machine (records and their
    machines in the same order)."""
    first = {}
    for (path, record), machine in sorted(zip(records, machines), key=lambda item: item[0][1]["rep"]):
        if record["status"] == "ok":
            first.setdefault((record["experiment_id"], machine), (path, record, machine))
    traces = [trace_rows(*run) for run in first.values()]
    columns = ["experiment_id", "machine", "rep", "t_s", "phase", *TRACE_VALUES]
    return pd.concat([trace for trace in traces if len(trace)] or [pd.DataFrame(columns=columns)], ignore_index=True)


MAX_BATCH_COLUMNS = [
    "search_id",
    "stack",
    "framework",
    "dataset",
    "model",
    "device",
    "optimizer",
    "variant",
    "data_placement",
    "status",
    "max_batch",
    "first_failure",
    "limit_reached",
    "limit",
    "probes",
    "allocator_peak_mb",
    "error",
]


def max_batch_row(result):
    """One search: the largest batch that fit, the first that did not, and the allocator peak at the largest."""
    at_largest = [probe for probe in result["probes"] if probe["batch_size"] == result["max_batch"]]
    return dict(
        {key: result.get(key) for key in MAX_BATCH_COLUMNS},
        probes=len(result["probes"]),
        allocator_peak_mb=at_largest[0].get("allocator_peak_mb") if at_largest else None,
    )


def epochs_table(records, machines):
    """Every run's epochs (the runs table's machines, in the records' order); an unreadable record has none."""
    return pd.concat(
        [
            epoch_rows(path, record, machine)
            for (path, record), machine in zip(records, machines)
            if not run_record.stands_in(record)
        ]
        or [pd.DataFrame(columns=["experiment_id", "machine", "rep", *run_record.EPOCH_COLUMNS])],
        ignore_index=True,
    )


def record_machines(records):
    """The machine of each record, in the records' order."""
    return machines(pd.DataFrame([flatten(record) for _, record in records]))


def runs_table(records, machines):
    """One row per run and per contended try, with its machine and the count of runs it overlapped."""
    runs = pd.DataFrame([flatten(record) for _, record in records])
    runs.insert(1, "machine", machines)
    runs = with_contended_tries(runs, records).sort_values(["experiment_id", "machine", "rep", "attempt"])
    runs["overlapping_runs"] = overlapping_runs(runs)
    return runs
