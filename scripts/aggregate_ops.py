"""The ops table: one row per stack x operator x device x dtype x size, from the operator benchmark records.

    python scripts/aggregate_ops.py --out results/tables/ops.csv --records results/ops/*/*/*.json
A job that failed as a whole gives one row with its status and error. A job whose timed window was shared with other
processes beyond the config's `contention` limits was run again; its contended tries keep their rows, with status
`contended` and what contended them, and are never drawn. A row above its ceiling gets its cause
(dlbench.study.analysis.operators). Parquet is written beside the CSV.
"""

import argparse
import json
from pathlib import Path

import pandas as pd
from dlbench.cli import run_main
from dlbench.io import replacing_all
from dlbench.study.analysis.operators import over_ceiling_causes

COLUMNS = [
    "stack",
    "framework",
    "framework_version",
    "operator",
    "device",
    "dtype",
    "size",
    "status",
    "error",
    "median_s",
    "q1_s",
    "q3_s",
    "inner",
    "samples",
    "elements",
    "elements_per_s",
    "gb_per_s",
    "gflop_per_s",
    "fraction_of_ceiling",
    "ceiling_gemm_gflop_per_s",
    "ceiling_bandwidth_gb_per_s",
    "ceiling_source",
    "ceiling_cache_bytes",
    "over_ceiling_cause",
    "attempt",
    "contention_foreign_cpu_cores",
    "contention_steal_share",
    "contention_reasons",
    "host",
    "cpu_model",
    "packages_sha256",
    "workflow_commit",
]


def rows(record):
    """The job's rows: one per size and dtype, or one for a job that failed as a whole."""
    common = {key: record[key] for key in ("stack", "framework", "framework_version", "operator", "device")}
    ceiling = record["ceiling"] or {}
    common.update(
        {
            f"ceiling_{key}": ceiling.get(key)
            for key in ("gemm_gflop_per_s", "bandwidth_gb_per_s", "source", "cache_bytes")
        }
    )
    common.update(
        {key: record["provenance"][key] for key in ("host", "cpu_model", "packages_sha256", "workflow_commit")}
    )
    contention = record.get("contention") or {}
    common.update(
        attempt=record.get("attempt", 1),
        contention_foreign_cpu_cores=contention.get("foreign_cpu_cores"),
        contention_steal_share=contention.get("steal_share"),
        contention_reasons="; ".join(contention.get("reasons") or []),
    )
    if record["status"] not in ("ok", "contended"):
        return [dict(common, status=record["status"], error=record["error"])]
    # A contended job's figures are kept under its status; a size that failed inside a clean job keeps its own.
    return [
        dict(common, **row, **({"status": "contended"} if record["status"] == "contended" else {}))
        for row in record["rows"]
    ]


def job_rows(record):
    """The rows of the job's final try and of each contended try before it."""
    return [row for attempt in [*record.get("contended_attempts", []), record] for row in rows(attempt)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--records", nargs="*", default=[])
    args = parser.parse_args()
    table = pd.DataFrame(
        [row for path in args.records for row in job_rows(json.loads(Path(path).read_text()))], columns=COLUMNS
    )
    table["over_ceiling_cause"] = over_ceiling_causes(table)
    # together or not at all: a failed write leaves the previous table (the rule's outputs are `update()`)
    csv, parquet = Path(args.out), Path(args.out).with_suffix(".parquet")
    with replacing_all([csv, parquet]) as temporaries:
        table.to_csv(temporaries[csv], index=False)
        table.to_parquet(temporaries[parquet], index=False)
    print(f"{len(table)} operator rows from {len(args.records)} jobs -> {args.out}")


if __name__ == "__main__":
    run_main(main)
