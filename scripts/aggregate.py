"""Tidy tables from the run records, each as CSV with Parquet beside it (dlbench.study.analysis.tables names them): runs
(one row per run), summary (per experiment, over repeats; what results cost where the config prices a device-hour),
epochs, comparisons (between stacks and variants within each group of otherwise identical experiments), fastest (each
group's answer: the report's first page), relative (every stack in every group against one reference stack, and each
stack across groups), versions (each framework's releases paired on otherwise identical experiments), scaling (each
experiment on several data-parallel replicas against the same on one, and the stacks' scaling compared), telemetry
(the trace of each experiment's first finished repeat), workload (per group, the dataset, steps per epoch, when the
target accuracy was reached and how long whole trainings lasted), max_batch (one row per largest-batch search,
empty when none ran) and machines (every workload run on several machines, side by side: the study's own runs and
those of the bundles it imports, `--imports`).

Every statistic is computed here, once, by dlbench.study.analysis (records, summary, cost, comparisons, fastest,
statistics: each module says how); the report only prints them. Failed runs (status error/oom) stay in the runs table
and are counted in the summary; statistics use the runs with status ok. A record that cannot stand for its run
(unreadable, or contradicted by the epochs.csv and telemetry.csv its run wrote beside it: dlbench/record_check.py)
counts as an error run naming why. An experiment is summarised per machine, so runs from
different cluster nodes are never pooled and comparisons stay within one machine.

    python scripts/aggregate.py --records results/runs/*/rep*/record.json [--max-batch results/max_batch/*.json] \
        [--baseline STACK] [--equivalence-margin 0.05] [--price-per-hour '{"cpu": null, "gpu": 2.5}'] \
        --out results/tables
"""

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
from dlbench.cli import run_main
from dlbench.io import replacing_all
from dlbench.study.analysis.blocks import rounds_table
from dlbench.study.analysis.comparisons import comparisons, version_pairs
from dlbench.study.analysis.cost import with_costs
from dlbench.study.analysis.fastest import fastest_table
from dlbench.study.analysis.records import (
    MAX_BATCH_COLUMNS,
    epochs_table,
    max_batch_row,
    read_records,
    record_machines,
    runs_table,
    telemetry_table,
)
from dlbench.study.analysis.machines import machines_table
from dlbench.study.analysis.relative import relative_table
from dlbench.study.analysis.scaling import scaling_table
from dlbench.study.analysis.summary import summary_table
from dlbench.study.analysis.tables import TABLES
from dlbench.study.analysis.workload import workload_table
from dlbench.study.bundle import BundleError, imported_records, merged


def write_tables(tables, folder):
    """Both files of every table, replacing the previous ones together once all are written: a failed write (a full
    disk) leaves the previous tables, every one of them, as they were (the rule's outputs are `update()`, so that
    Snakemake does not remove them first)."""
    files = {(name, suffix): folder / f"{name}.{suffix}" for name in tables for suffix in ("csv", "parquet")}
    with replacing_all(files.values()) as temporaries:
        for name, frame in tables.items():
            frame.to_csv(temporaries[files[name, "csv"]], index=False)
            frame.to_parquet(temporaries[files[name, "parquet"]], index=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", nargs="+", required=True)
    parser.add_argument("--max-batch", nargs="*", default=[], help="results of scripts/max_batch.py")
    parser.add_argument(
        "--imports", nargs="*", default=[], help="folders of imported bundles, unpacked (scripts/bundle.py)"
    )
    parser.add_argument(
        "--baseline", help="stack each comparison is against where its group has it (default: the fastest)"
    )
    parser.add_argument(
        "--equivalence-margin",
        type=float,
        default=0.05,
        help="a ratio within [1 / (1 + margin), 1 + margin] is equivalent, where proven",
    )
    parser.add_argument(
        "--race", help="JSON: the config's `race` with `repeats` beside it, where the study raced its groups"
    )
    parser.add_argument(
        "--price-per-hour",
        default="{}",
        help='JSON: the price of a device-hour per device kind, e.g. {"cpu": null, "gpu": 2.5} (the tables cost '
        "results where one is set)",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    imported = read_records(sorted(str(path) for folder in args.imports for path in imported_records(folder)))
    own = read_records(args.records)
    try:
        records = merged(own, imported)
    except BundleError as error:
        print(f"import refused: {error}", file=sys.stderr)
        return 1
    machines = record_machines(records)
    own_machines = set(machines[: len(own)])  # merged() keeps the study's own records first
    runs = runs_table(records, machines)
    summary = with_costs(summary_table(runs), json.loads(args.price_per_hour))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    searches = [max_batch_row(json.loads(Path(path).read_text())) for path in args.max_batch]
    race = json.loads(args.race) if args.race else None
    raced = race if race is not None and race["enabled"] else None
    tables = {
        "runs": runs,
        "summary": summary,
        "epochs": epochs_table(records, machines),
        "max_batch": pd.DataFrame(searches, columns=MAX_BATCH_COLUMNS).astype(
            {"max_batch": "Int64", "first_failure": "Int64"}
        ),
        "comparisons": comparisons(runs, summary, args.baseline, args.equivalence_margin, race),
        "versions": version_pairs(runs, summary, args.equivalence_margin),
        "scaling": scaling_table(runs, summary, args.equivalence_margin),
        "telemetry": telemetry_table(records, machines),
        "workload": workload_table(runs),
        "rounds": rounds_table(runs),
    }
    tables["fastest"] = fastest_table(summary, tables["comparisons"], raced)
    tables["relative"] = relative_table(summary, tables["fastest"], args.baseline)
    tables["machines"] = machines_table(runs, summary, tables["fastest"], own_machines)
    write_tables({name: tables[name] for name in TABLES}, out)
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
