"""Tidy tables from the run records: runs (one row per run), summary (per experiment, over repeats), epochs;
and max_batch (one row per largest-batch search, empty when none ran).

Failed runs (status error/oom) stay in the runs table and are counted in the summary; statistics use the
runs with status ok. The 95% interval is Student's t over repeats (empty with fewer than 2 ok runs).

    python scripts/aggregate.py --records results/runs/*/rep*/record.json [--max-batch results/max_batch/*.json] \
        --out results/tables
"""

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

IDENTITY = ["experiment_id", "stack", "framework", "backend", "dataset", "model", "device", "batch_size",
            "optimizer", "learning_rate", "epochs", "variant", "data_placement"]  # fmt: skip
STATISTICS = {
    "train_images_per_s": "steady-epoch training throughput (images/s)",
    "steady_epoch_s": "mean training time of a steady epoch (s)",
    "first_epoch_s": "training time of the first epoch, compilation included (s)",
    "inference_images_per_s": "evaluation throughput (images/s)",
}


RESOURCES = ["input_share", "host_rss_peak_mb", "cpu_utilisation_mean", "gpu_utilisation_mean", "gpu_utilisation_p95",
             "gpu_memory_peak_mb", "allocator_peak_mb", "gpu_power_mean_w", "gpu_energy_per_image_j",
             "train_flops_per_s", "model_flops_utilisation"]  # fmt: skip


def flatten(record):
    """One runs-table row: nested sections become prefixed columns, lists become JSON text."""
    row = {key: value for key, value in record.items() if not isinstance(value, (dict, list))}
    row.update({f"phase_{name}_s": seconds for name, seconds in record["phases_s"].items()})
    row.update({f"provenance_{key}": value for key, value in record["provenance"].items()})
    row["engaged"] = json.dumps(record["engaged"], sort_keys=True)
    for key in ("epoch_train_s", "epoch_eval_s", "loss_curve"):
        row[key] = json.dumps(record[key])
    steady = record["epoch_train_s"][1:]
    row["first_epoch_s"] = record["epoch_train_s"][0] if record["epoch_train_s"] else None
    row["steady_epoch_s"] = sum(steady) / len(steady) if steady else None
    return row


def interval95(values):
    if len(values) < 2:
        return np.nan, np.nan
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return values.mean() - half, values.mean() + half


def summarise(group):
    ok = group[group["status"] == "ok"]
    versions = group["framework_version"].dropna()
    row = {"framework_version": versions.iloc[0] if len(versions) else None, "runs": len(group), "runs_ok": len(ok),
           "statuses": ",".join(sorted(set(group["status"]))),
           "errors": " | ".join(sorted(set(group["error"].dropna())))}  # fmt: skip
    for column in STATISTICS:
        values = ok[column].dropna().astype(float)
        low, high = interval95(values)
        row.update({f"{column}_mean": values.mean(), f"{column}_std": values.std(ddof=1) if len(values) > 1 else np.nan,
                    f"{column}_min": values.min(), f"{column}_median": values.median(),
                    f"{column}_ci95_low": low, f"{column}_ci95_high": high})  # fmt: skip
    for column in RESOURCES:
        row[f"{column}_mean"] = ok[column].astype(float).mean()
    row["final_test_accuracy_mean"] = ok["final_test_accuracy"].astype(float).mean()
    row["time_to_target_s_mean"] = ok["time_to_target_s"].astype(float).mean()
    return pd.Series(row)


def epoch_rows(record_path, record):
    epochs = pd.read_csv(Path(record_path).with_name("epochs.csv"))
    epochs.insert(0, "rep", record["rep"])
    epochs.insert(0, "experiment_id", record["experiment_id"])
    return epochs


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


MAX_BATCH_COLUMNS = ["search_id", "stack", "framework", "dataset", "model", "device", "optimizer", "variant",
                     "data_placement", "status", "max_batch", "first_failure", "limit_reached", "limit", "probes",
                     "allocator_peak_mb", "error"]  # fmt: skip


def max_batch_row(result):
    """One search: the largest batch that fit, the first that did not, and the allocator peak at the largest."""
    at_largest = [probe for probe in result["probes"] if probe["batch_size"] == result["max_batch"]]
    return dict({key: result.get(key) for key in MAX_BATCH_COLUMNS}, probes=len(result["probes"]),
                allocator_peak_mb=at_largest[0].get("allocator_peak_mb") if at_largest else None)  # fmt: skip


def write_table(frame, folder, name):
    frame.to_csv(folder / f"{name}.csv", index=False)
    frame.to_parquet(folder / f"{name}.parquet", index=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", nargs="+", required=True)
    parser.add_argument("--max-batch", nargs="*", default=[], help="results of scripts/max_batch.py")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    records = [(path, json.loads(Path(path).read_text())) for path in args.records]
    runs = pd.DataFrame([flatten(record) for _, record in records]).sort_values(["experiment_id", "rep"])
    runs["overlapping_runs"] = overlapping_runs(runs)
    summary = runs.groupby(IDENTITY, dropna=False, sort=True).apply(summarise, include_groups=False).reset_index()
    epochs = pd.concat([epoch_rows(path, record) for path, record in records], ignore_index=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_table(runs, out, "runs")
    write_table(summary, out, "summary")
    write_table(epochs, out, "epochs")
    searches = [max_batch_row(json.loads(Path(path).read_text())) for path in args.max_batch]
    write_table(pd.DataFrame(searches, columns=MAX_BATCH_COLUMNS).astype({"max_batch": "Int64", "first_failure": "Int64"}),
                out, "max_batch")  # fmt: skip
    failed = runs[runs["status"] != "ok"]
    print(f"{len(runs)} runs ({len(failed)} not ok) in {len(summary)} experiments -> {out}")
    if runs["overlapping_runs"].any():
        print(f"WARNING: {int((runs['overlapping_runs'] > 0).sum())} timed runs overlapped another run on the same "
              "host: their timings are not trustworthy (were jobs run with --resources gpu=1 and all cores?)")


if __name__ == "__main__":
    main()
