"""Tidy tables from the run records: runs (one row per run), summary (per experiment, over repeats), epochs,
comparisons (between stacks and variants within each group of otherwise identical experiments), versions (each
framework's releases paired on otherwise identical experiments), telemetry (the trace of each experiment's first
finished repeat, on at most TRACE_POINTS time bins); and max_batch (one row per largest-batch search, empty when
none ran).

Failed runs (status error/oom) stay in the runs table and are counted in the summary; statistics use the runs with
status ok. An experiment is summarised per machine (`machine`: the GPU's name for GPU runs, and the CPU model), so
runs from different cluster nodes are never pooled and comparisons stay within one machine. Every statistic is
computed here, once; the report only prints them:

- Throughputs and times are positive and their spread multiplicative, so their centre is the geometric mean and
  their 95% interval Student's t on the logarithms, back-transformed: never a zero or negative bound. Fewer than
  3 ok repeats give no interval (`interval_note` says why); `_cv` is the coefficient of variation (std / mean).
- A comparison is the ratio of geometric-mean training throughputs against the group's baseline (the config's
  `comparison_baseline` stack where the group has it, else the fastest). Its method: paired by round where both
  sides have ok runs in at least 3 common rounds (`rep`: runs of one round ran side by side in time), else Welch's
  unpaired t on log throughput. Two tests, each Holm-adjusted within the comparison group (the family: the
  experiments that differ only in stack and variant), differences and equivalences apart: the t-test of no
  difference, with the ratio's 95% interval, and the equivalence test (TOST) against a ratio within
  [1 / (1 + margin), 1 + margin] (`--equivalence-margin`, default 5 %). Verdict: "faster" or "slower" where the
  adjusted difference p is below 0.05 and the interval excludes 1; "equivalent within 5 %" where the adjusted
  equivalence p is below 0.05; else "inconclusive", with `repeats_to_decide` (the rounds that would decide it at
  the observed ratio and spread; empty where no practical count would). dlbench.analysis.statistics says why.
- A version pair is the same comparison between two releases of one framework (same backend and variant), newer
  over older, Holm-adjusted within the versions of one experiment group: "slower" there is a regression. Beside it:
  the ratio of first-epoch times (compilation included) and the difference in mean final test accuracy.

    python scripts/aggregate.py --records results/runs/*/rep*/record.json [--max-batch results/max_batch/*.json] \
        [--baseline STACK] [--equivalence-margin 0.05] --out results/tables
"""

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from dlbench.analysis.statistics import MIN_REPEATS, compared, decisions, interval, log_interval
from dlbench import record as run_record
from dlbench.cli import run_main
from dlbench.contention import describe_gpu_processes
from dlbench.io import replacing, write_text_atomic
from dlbench.analysis.fastest import fastest_table
from dlbench.analysis.tables import GROUP, IDENTITY, TABLES

STATISTICS = {
    "train_images_per_s": "steady-epoch training throughput (images/s)",
    "steady_epoch_s": "mean training time of a steady epoch (s)",
    "first_epoch_s": "training time of the first epoch, compilation included (s)",
    "inference_images_per_s": "evaluation throughput (images/s)",
}


RESOURCES = [
    "input_share",
    "loader_images_per_s",
    "input_bound_share",
    "host_rss_peak_mb",
    "cpu_utilisation_mean",
    "gpu_utilisation_mean",
    "gpu_utilisation_p95",
    "gpu_memory_peak_mb",
    "allocator_peak_mb",
    "gpu_power_mean_w",
    "gpu_energy_per_image_j",
    "gpu_idle_power_w",
    "gpu_energy_above_idle_j",
    "cpu_energy_j",
    "train_flops_per_s",
    "model_flops_utilisation",
]


def flatten(record):
    """One runs-table row: nested sections become prefixed columns, lists become JSON text."""
    row = {key: value for key, value in record.items() if not isinstance(value, (dict, list))}
    stream = record["stream"] or {}
    row.update({f"stream_{key}": stream.get(key) for key in ("workers", "loader", "skipped_images")})
    row.update({f"phase_{name}_s": seconds for name, seconds in record["phases_s"].items()})
    row.update({f"provenance_{key}": value for key, value in record["provenance"].items()})
    row["provenance_threads"] = str(record["provenance"]["threads"])  # a number or "framework": one column type
    row["engaged"] = json.dumps(record["engaged"], sort_keys=True)
    row["backend_version"] = record["engaged"].get("backend_version")  # where a stack has one (Keras: "jax 0.10.2")
    for key in ("epoch_train_s", "epoch_eval_s", "loss_curve"):
        row[key] = json.dumps(record[key])
    steady = record["epoch_train_s"][1:]
    row["first_epoch_s"] = record["epoch_train_s"][0] if record["epoch_train_s"] else None
    row["steady_epoch_s"] = sum(steady) / len(steady) if steady else None
    row.update(contention_columns(record.get("contention")))
    row["attempt"], row["final_try"] = record.get("attempt", 1), True
    return row


def contention_columns(contention):
    """The record's contention section as runs-table columns (a record from before it was measured: empty)."""
    contention = contention or {}
    columns = {
        f"contention_{key}": contention.get(key)
        for key in (
            "window_s",
            "foreign_cpu_cores",
            "foreign_cpu_peak_cores",
            "launcher_cpu_cores",
            "steal_share",
            "window_started_at",
            "window_finished_at",
        )
    }
    columns["contention_foreign_gpu_processes"] = describe_gpu_processes(contention.get("foreign_gpu_processes") or [])
    columns["contention_throttle_reasons"] = ", ".join(contention.get("throttle_reasons") or [])
    columns["contention_reasons"] = "; ".join(contention.get("reasons") or [])
    columns["contention_unavailable"] = "; ".join(
        f"{part}: {why}" for part, why in (contention.get("unavailable") or {}).items()
    )
    return columns


def with_contended_tries(runs, records):
    """The runs table with a row for each contended try kept inside a final record (final_try false, the machine
    of its run): listed with its figures, never in the statistics, which take status ok only."""
    tries = [
        dict(flatten(attempt), machine=machine, final_try=False)
        for (_, record), machine in zip(records, runs["machine"])
        for attempt in record.get("contended_attempts", [])
    ]
    return pd.concat([runs, pd.DataFrame(tries)], ignore_index=True) if tries else runs


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


def summarise(group):
    ok = group[group["status"] == "ok"]
    versions, backends = group["framework_version"].dropna(), group["backend_version"].dropna()
    contended = group[group["status"] == "contended"]
    row = {
        "framework_version": versions.iloc[0] if len(versions) else None,
        "backend_version": backends.iloc[0] if len(backends) else None,
        "runs": int(group["final_try"].sum()),
        "runs_ok": len(ok),
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
    row["interval_note"] = (
        "" if len(ok) >= MIN_REPEATS else f"{len(ok)} ok repeat(s): an interval needs at least {MIN_REPEATS}"
    )
    for column in RESOURCES:
        row[f"{column}_mean"] = ok[column].astype(float).mean()
    loaders = group[["stream_loader", "stream_workers"]].dropna()
    row["stream_loader"], row["stream_workers"] = loaders.iloc[0] if len(loaders) else (None, None)
    row["input_bound"] = input_bound(row["input_bound_share_mean"], row["input_share_mean"])
    row["final_test_accuracy_mean"] = ok["final_test_accuracy"].astype(float).mean()
    row["time_to_target_s_mean"] = ok["time_to_target_s"].astype(float).mean()
    return pd.Series(row)


def baseline_of(part, named):
    """The group's baseline experiment and why: the named stack's fastest variant where the group has it, else the
    fastest experiment, so that each ratio says how far an experiment is from the group's best. Among experiments
    with enough ok repeats to be tested where there are any: a baseline that cannot be tested decides nothing."""
    candidates = part[part["stack"] == named] if named in set(part["stack"]) else part
    testable = candidates[candidates["runs_ok"] >= MIN_REPEATS]
    candidates = testable if len(testable) else candidates
    rule = f"{named} (config comparison_baseline)" if named in set(part["stack"]) else "the fastest"
    return candidates.loc[candidates["train_images_per_s_gmean"].idxmax()], rule


TEST_COLUMNS = ["method", "pairs", "ratio", "ratio_ci95_low", "ratio_ci95_high"]
DECISION_COLUMNS = [
    "p_value",
    "p_holm",
    "p_equivalence",
    "p_equivalence_holm",
    "equivalence_margin",
    "verdict",
    "repeats_to_decide",
]
COMPARISON_COLUMNS = [
    *GROUP,
    "stack",
    "variant",
    "experiment_id",
    "runs_ok",
    "baseline_stack",
    "baseline_variant",
    "baseline_experiment_id",
    "baseline_runs_ok",
    "baseline_rule",
    *TEST_COLUMNS,
    *DECISION_COLUMNS,
]


def machines(runs):
    """Per run, the machine it ran on: the CPU model, and for a GPU run the GPU's name first. A GPU run that failed
    before naming its GPU takes the name that other runs on its host recorded."""
    named = runs.dropna(subset=["provenance_gpu"])
    gpu_of_host = named.groupby("provenance_host")["provenance_gpu"].first()
    gpus = runs["provenance_gpu"].fillna(runs["provenance_host"].map(gpu_of_host)).where(runs["device"] == "gpu")
    return [f"{gpu} / {cpu}" if isinstance(gpu, str) else cpu for gpu, cpu in zip(gpus, runs["provenance_cpu_model"])]


def ok_throughputs(runs):
    """(experiment id, machine) -> {round (rep): steady throughput} of its ok runs: a run of any other status (an
    error, or one contended by other load) never enters a statistic."""
    ok = runs[(runs["status"] == "ok") & runs["train_images_per_s"].notna()]
    return {
        key: dict(zip(group["rep"].astype(int), group["train_images_per_s"].astype(float)))
        for key, group in ok.groupby(["experiment_id", "machine"])
    }


def on_machine(row):
    return row["experiment_id"], row["machine"]


def ratio_columns(values, reference, row, reference_row):
    """The method, pairs, ratio and 95% interval of one experiment's throughputs (round -> value) against another's,
    and the log ratio its tests take (None, and only the ratio of geometric means, with too few repeats)."""
    method, pairs, log_ratio = compared(values, reference)
    if log_ratio is None:
        ratio = row["train_images_per_s_gmean"] / reference_row["train_images_per_s_gmean"]
        return dict(zip(TEST_COLUMNS, (method, pairs, ratio, np.nan, np.nan))), None
    return dict(zip(TEST_COLUMNS, (method, pairs, *interval(log_ratio)))), log_ratio


def with_verdicts(rows, log_ratios, columns, margin):
    """The table of rows (each with its log ratio), tested and given its verdict, Holm-adjusted within each
    experiment group (GROUP): the family of comparisons a reader reads together."""
    table = pd.DataFrame(rows, columns=columns)
    outcomes = [None] * len(rows)
    for positions in table.groupby(GROUP, dropna=False, sort=False).indices.values():
        for position, outcome in zip(positions, decisions([log_ratios[index] for index in positions], margin)):
            outcomes[position] = outcome
    table[DECISION_COLUMNS] = pd.DataFrame(outcomes, columns=DECISION_COLUMNS, index=table.index)
    return table.astype({"pairs": "int64", "repeats_to_decide": "Int64"})


def comparisons(runs, summary, named_baseline, margin):
    """One row per experiment against its group's baseline (groups: experiments equal but for stack and variant)."""
    throughputs = ok_throughputs(runs)
    rows, log_ratios = [], []
    measured = summary[summary["train_images_per_s_gmean"].notna()]
    for key, part in measured.groupby(GROUP, dropna=False, sort=True):
        if len(part) < 2:
            continue
        baseline, rule = baseline_of(part, named_baseline)
        for _, row in part[part["experiment_id"] != baseline["experiment_id"]].iterrows():
            values, reference = throughputs[on_machine(row)], throughputs[on_machine(baseline)]
            tests, log_ratio = ratio_columns(values, reference, row, baseline)
            rows.append(
                dict(
                    zip(GROUP, key),
                    stack=row["stack"],
                    variant=row["variant"],
                    experiment_id=row["experiment_id"],
                    runs_ok=len(values),
                    baseline_stack=baseline["stack"],
                    baseline_variant=baseline["variant"],
                    baseline_experiment_id=baseline["experiment_id"],
                    baseline_runs_ok=len(reference),
                    baseline_rule=rule,
                    **tests,
                )
            )
            log_ratios.append(log_ratio)
    return with_verdicts(rows, log_ratios, COMPARISON_COLUMNS, margin)


def release(version):
    """A version string as a sortable tuple of its numbers ("2.13.0+cpu" -> (2, 13, 0))."""
    return tuple(int(number) for number in re.findall(r"\d+", str(version).split("+")[0]))


def stack_release(row):
    """(sortable release, name) of an experiment's stack: the framework's release, then its backend's where the
    stack reports one, so that Keras 3.15 on JAX 0.9 and on JAX 0.10 are two releases of one stack."""
    backend = row["backend_version"] if isinstance(row["backend_version"], str) else None
    name = row["framework_version"] + (f" ({backend})" if backend else "")
    return (release(row["framework_version"]), release(backend or "")), name


VERSION_IDENTITY = ["framework", "backend", "variant", *GROUP]
VERSION_COLUMNS = [
    *VERSION_IDENTITY,
    "older_stack",
    "older_version",
    "older_packages_sha256",
    "older_runs_ok",
    "newer_stack",
    "newer_version",
    "newer_packages_sha256",
    "newer_runs_ok",
    *TEST_COLUMNS,
    *DECISION_COLUMNS,
    "regression",
    "first_epoch_ratio",
    "accuracy_difference",
]


def version_pairs(runs, summary, margin):
    """One row per pair of releases of one framework (consecutive releases, by version number) on otherwise
    identical experiments: newer over older throughput, tested as the comparisons are (Holm within each experiment
    group); first-epoch time ratio and accuracy difference beside it."""
    throughputs = ok_throughputs(runs)
    packages = runs[runs["status"] == "ok"].groupby(["experiment_id", "machine"])["provenance_packages_sha256"].first()
    rows, log_ratios = [], []
    measured = summary[summary["train_images_per_s_gmean"].notna() & summary["framework_version"].notna()]
    for key, part in measured.groupby(VERSION_IDENTITY, dropna=False, sort=True):
        releases = [stack_release(row) for _, row in part.iterrows()]
        part = part.assign(release=[key for key, _ in releases], release_name=[name for _, name in releases])
        part = part.sort_values("release")
        for (_, older), (_, newer) in zip(part.iterrows(), part.iloc[1:].iterrows()):
            if older["release"] == newer["release"]:
                continue  # two stacks of one release: a stack comparison, not a version one
            values, reference = throughputs[on_machine(newer)], throughputs[on_machine(older)]
            tests, log_ratio = ratio_columns(values, reference, newer, older)
            rows.append(
                dict(
                    zip(VERSION_IDENTITY, key),
                    older_stack=older["stack"],
                    older_version=older["release_name"],
                    older_packages_sha256=packages.get(on_machine(older)),
                    older_runs_ok=len(reference),
                    newer_stack=newer["stack"],
                    newer_version=newer["release_name"],
                    newer_packages_sha256=packages.get(on_machine(newer)),
                    newer_runs_ok=len(values),
                    **tests,
                    first_epoch_ratio=newer["first_epoch_s_gmean"] / older["first_epoch_s_gmean"],
                    accuracy_difference=newer["final_test_accuracy_mean"] - older["final_test_accuracy_mean"],
                )
            )
            log_ratios.append(log_ratio)
    table = with_verdicts(rows, log_ratios, VERSION_COLUMNS, margin)
    table["regression"] = table["verdict"] == "slower"
    return table


TRACE_POINTS = 400  # per run: enough for a figure, small enough for hours-long GPU runs at 10 Hz
TRACE_VALUES = ["gpu_util_pct", "gpu_memory_mb", "power_w", "cpu_util_pct", "rss_mb"]


def trace_rows(record_path, record, machine):
    """The run's telemetry trace averaged over at most TRACE_POINTS equal time bins (each bin keeps the phase it
    starts in)."""
    trace = pd.read_csv(Path(record_path).with_name("telemetry.csv"))
    if trace.empty:
        return trace
    width = max(trace["t_s"].max() / TRACE_POINTS, 1e-9)
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


RUN_TABLES = ("epochs.csv", "telemetry.csv")  # beside each record, written before it (run_experiment.py)


def missing_run_tables(paths):
    """The message for records whose epochs.csv or telemetry.csv is gone (Snakemake tracks a run by its record
    alone, so a table deleted by hand is not remade by itself): which, and the command that runs them again; None
    when every table is there."""
    missing = [path for path in paths if not all(Path(path).with_name(name).exists() for name in RUN_TABLES)]
    if not missing:
        return None
    return (
        f"error: {len(missing)} run(s) lack their {' or '.join(RUN_TABLES)} beside the record, first "
        f"{Path(missing[0]).parent}; run them again: .venv/bin/python -m snakemake --forcerun {' '.join(missing)}"
    )


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


def write_table(frame, folder, name):
    """Both files of a table, each replaced in one step (a failed write leaves the previous table, never half)."""
    write_text_atomic(folder / f"{name}.csv", frame.to_csv(index=False))
    with replacing(folder / f"{name}.parquet") as temporary:
        frame.to_parquet(temporary, index=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", nargs="+", required=True)
    parser.add_argument("--max-batch", nargs="*", default=[], help="results of scripts/max_batch.py")
    parser.add_argument(
        "--baseline", help="stack each comparison is against where its group has it (default: the fastest)"
    )
    parser.add_argument(
        "--equivalence-margin",
        type=float,
        default=0.05,
        help="a ratio within [1 / (1 + margin), 1 + margin] is equivalent, where proven",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    problem = missing_run_tables(args.records)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    records = read_records(args.records)
    runs = pd.DataFrame([flatten(record) for _, record in records])
    runs.insert(1, "machine", machines(runs))
    epochs = pd.concat(
        [
            epoch_rows(path, record, machine)
            for (path, record), machine in zip(records, runs["machine"])
            if not (record["error"] or "").startswith(run_record.UNREADABLE)
        ]
        or [pd.DataFrame(columns=["experiment_id", "machine", "rep", *run_record.EPOCH_COLUMNS])],
        ignore_index=True,
    )
    telemetry = telemetry_table(records, runs["machine"])
    runs = with_contended_tries(runs, records).sort_values(["experiment_id", "machine", "rep", "attempt"])
    runs["overlapping_runs"] = overlapping_runs(runs)
    summary = runs.groupby(IDENTITY, dropna=False, sort=True).apply(summarise, include_groups=False).reset_index()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    searches = [max_batch_row(json.loads(Path(path).read_text())) for path in args.max_batch]
    tables = {
        "runs": runs,
        "summary": summary,
        "epochs": epochs,
        "max_batch": pd.DataFrame(searches, columns=MAX_BATCH_COLUMNS).astype(
            {"max_batch": "Int64", "first_failure": "Int64"}
        ),
        "comparisons": comparisons(runs, summary, args.baseline, args.equivalence_margin),
        "versions": version_pairs(runs, summary, args.equivalence_margin),
        "telemetry": telemetry,
    }
    tables["fastest"] = fastest_table(summary, tables["comparisons"], runs)
    for name in TABLES:
        write_table(tables[name], out, name)
    final = runs[runs["final_try"]]
    print(f"{len(final)} runs ({int((final['status'] != 'ok').sum())} not ok) in {len(summary)} experiments -> {out}")
    redone = runs[~runs["final_try"]]
    if len(redone):
        print(
            f"{len(redone)} contended tries kept apart and run again; {int((final['status'] == 'contended').sum())} "
            "runs never measured clean (summary.csv measurement_note)"
        )
    spread = summary.dropna(subset=["train_images_per_s_cv"])
    if len(spread):
        worst = spread.loc[spread["train_images_per_s_cv"].idxmax()]
        print(
            f"steady throughput across repeats: coefficient of variation median "
            f"{spread['train_images_per_s_cv'].median():.1%}, max {worst['train_images_per_s_cv']:.1%} "
            f"({worst['experiment_id']}); {int((spread['train_images_per_s_cv'] >= 0.05).sum())} of {len(spread)} "
            "experiments at 5% or more"
        )
    versions = tables["versions"]
    for _, pair in versions[versions["regression"]].iterrows():
        print(
            f"REGRESSION: {pair['framework']} {pair['newer_version']} trains at {pair['ratio']:.2f}x of "
            f"{pair['older_version']} on {pair['model']}/{pair['dataset']} ({pair['variant']}), beyond noise"
        )
    if runs["overlapping_runs"].any():
        print(
            f"WARNING: {int((runs['overlapping_runs'] > 0).sum())} timed runs overlapped another run on the same "
            "host: their timings are not trustworthy (were jobs run with --resources gpu=1 and all cores?)"
        )


if __name__ == "__main__":
    run_main(main)
