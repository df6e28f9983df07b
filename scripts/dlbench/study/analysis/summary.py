"""The summary table: per experiment and machine, over its repeats, the statistics of throughput and times (the
geometric mean with its 95% interval from Student's t on the logarithms, back-transformed, never a zero or negative
bound; none below MIN_REPEATS ok repeats), the means of the resources, the input-pipeline verdict, where its noise
lives (dlbench.study.analysis.noise: epoch to epoch against run to run, and how many runs were steady), and what an
experiment that never measured clean reports instead. Failed and contended runs are counted, never averaged.
"""

import numpy as np
import pandas as pd

from dlbench import record_fields
from dlbench.study.analysis.blocks import adjusted_table
from dlbench.study.analysis.noise import UNSTABLE_CV, noise_columns
from dlbench.study.analysis.records import Derived
from dlbench.study.analysis.statistics import MIN_REPEATS, log_interval, mean_interval
from dlbench.study.analysis.tables import IDENTITY

# What the table takes over an experiment's ok repeats, as each field declares it (summary="interval" or "mean"):
# the record's fields and the runs table's derived columns.
SUMMARISED = (*record_fields.SECTIONS, Derived)
STATISTICS = record_fields.summarised("interval", SUMMARISED)
MEANS = record_fields.summarised("mean", SUMMARISED)
REACHED = record_fields.summarised("reached", SUMMARISED)


# Streamed data: training is input-bound where it runs at INPUT_BOUND_SHARE or more of its loader's own rate (the
# loader sets the pace), or where input work compute does not hide takes INPUT_BOUND_EPOCH_SHARE or more of a steady
# epoch (the loader shares the cores with compute); partly input-bound from PARTLY_INPUT_BOUND of the epoch.
INPUT_BOUND_SHARE, INPUT_BOUND_EPOCH_SHARE, PARTLY_INPUT_BOUND = 0.9, 0.5, 0.1


def input_bound(loader_share, input_share):
    """The verdict on a streamed experiment's input pipeline ('' without streamed data or its measurements)."""
    if pd.isna(loader_share):
        return ""
    if loader_share >= INPUT_BOUND_SHARE or (not pd.isna(input_share) and input_share >= INPUT_BOUND_EPOCH_SHARE):
        return "input-bound"
    if not pd.isna(input_share) and input_share >= PARTLY_INPUT_BOUND:
        return "partly input-bound"
    return "compute-bound"


def not_measured(contended):
    """What an experiment without a clean run reports instead of a number: the foreign load of its tries."""
    load = contended["contention_foreign_cpu_cores"].astype(float)
    steal = contended["contention_steal_share"].astype(float)
    gpu = sorted(set(contended["contention_foreign_gpu_processes"].dropna()) - {""})
    parts = [
        f"other processes used {load.min():.2f}-{load.max():.2f} CPU cores" if load.notna().any() else "",
        f"steal up to {steal.max():.0%}" if steal.notna().any() and steal.max() > 0 else "",
        f"GPU shared with {', '.join(gpu)}" if gpu else "",
    ]
    return f"not measured: machine busy in all {len(contended)} tries (" + "; ".join(filter(None, parts)) + ")"


def run_seconds(runs):
    """What each run cost (as the race's planner and page 1's minutes to decide cost a run): its wall seconds from
    its wrapper's start to its final record, the harness's own and any contended tries' included; in records older
    than that measurement, the seconds of the phases it timed, summed."""
    phases = [column for column in runs.columns if column.startswith("phase_") and column.endswith("_s")]
    timed = runs[phases].astype(float).sum(axis=1, min_count=1)
    return runs["run_wall_s"].astype(float).fillna(timed) if "run_wall_s" in runs else timed


def summarise(group):
    ok = group[group["status"] == "ok"]
    versions, backends = group["framework_version"].dropna(), group["backend_version"].dropna()
    contended = group[group["status"] == "contended"]
    row = {
        "framework_version": versions.iloc[0] if len(versions) else None,
        "backend_version": backends.iloc[0] if len(backends) else None,
        "runs": int(group["final_try"].sum()),
        "runs_ok": len(ok),
        "run_seconds_median": run_seconds(group[group["final_try"]]).median(),
        "tries_contended": len(contended),
        "statuses": ",".join(sorted(set(group["status"]))),
        "errors": " | ".join(sorted(set(group["error"].dropna()))),
        "measurement_note": not_measured(contended) if len(ok) == 0 and len(contended) else "",
    }
    for column in STATISTICS:
        values = ok[column].dropna().astype(float)
        centre, low, high = log_interval(values)
        std = values.std(ddof=1) if len(values) > 1 else np.nan
        row.update(
            {
                f"{column}_mean": values.mean(),
                f"{column}_std": std,
                f"{column}_cv": std / values.mean(),
                f"{column}_min": values.min(),
                f"{column}_median": values.median(),
                f"{column}_gmean": centre,
                f"{column}_ci95_low": low,
                f"{column}_ci95_high": high,
            }
        )
    row["unstable"] = bool(row["train_images_per_s_cv"] >= UNSTABLE_CV)  # NaN (one repeat) compares False
    epochs = ok["images_per_epoch"].dropna() if "images_per_epoch" in ok else ok.iloc[0:0]
    row["images_per_epoch"] = int(epochs.iloc[0]) if len(epochs) else None
    sizes = group["global_batch_size"].dropna()
    row["global_batch_size"] = int(sizes.iloc[0]) if len(sizes) else None
    row["interval_note"] = (
        "" if len(ok) >= MIN_REPEATS else f"{len(ok)} ok repeat(s): an interval needs at least {MIN_REPEATS}"
    )
    for column in MEANS:  # a field newer than some records is a column only where one of them has it
        row[f"{column}_mean"] = ok[column].astype(float).mean() if column in ok else np.nan
    loaders = group[["stream_loader", "stream_workers"]].dropna()
    row["stream_loader"], row["stream_workers"] = loaders.iloc[0] if len(loaders) else (None, None)
    row["input_bound"] = input_bound(row["input_bound_share_mean"], row["input_share_mean"])
    row.update(noise_columns(ok))
    for column in REACHED:  # over the repeats that have it: a time to target, those that reached the target
        reached = ok[column].dropna().astype(float)
        row[f"{column}_mean"], row[f"{column}_ci95_low"], row[f"{column}_ci95_high"] = mean_interval(reached)
        row[f"{column.removesuffix('_s')}_runs"] = len(reached)
    return pd.Series(row)


def summary_table(runs):
    """One row per experiment and machine (IDENTITY), over its runs, with its throughput at the average round of its
    group beside the plain geometric mean (blocks.adjusted_table)."""
    summary = runs.groupby(IDENTITY, dropna=False, sort=True).apply(summarise, include_groups=False).reset_index()
    return summary.merge(adjusted_table(runs), on=["experiment_id", "machine"], how="left")
