"""The ops table: one row per stack x operator x device x dtype x size, from the operator benchmark records.

    python scripts/aggregate_ops.py --out results/tables/ops.csv --records results/ops/*/*/*.json
A job that failed as a whole gives one row with its status and error. Parquet is written beside the CSV.
"""

import argparse
import json
from pathlib import Path

import pandas as pd

COLUMNS = ["stack", "framework", "framework_version", "operator", "device", "dtype", "size", "status", "error",
           "median_s", "q1_s", "q3_s", "inner", "samples", "elements", "elements_per_s", "gb_per_s", "gflop_per_s",
           "fraction_of_ceiling", "ceiling_gemm_gflop_per_s", "ceiling_bandwidth_gb_per_s", "ceiling_source",
           "host", "cpu_model", "packages_sha256", "workflow_commit"]  # fmt: skip


def rows(record):
    common = {key: record[key] for key in ("stack", "framework", "framework_version", "operator", "device")}
    ceiling = record["ceiling"] or {}
    common.update({f"ceiling_{key}": ceiling.get(key) for key in ("gemm_gflop_per_s", "bandwidth_gb_per_s", "source")})
    common.update({key: record["provenance"][key] for key in ("host", "cpu_model", "packages_sha256", "workflow_commit")})
    if record["status"] != "ok":
        return [dict(common, status=record["status"], error=record["error"])]
    return [dict(common, **row) for row in record["rows"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--records", nargs="*", default=[])
    args = parser.parse_args()
    table = pd.DataFrame([row for path in args.records for row in rows(json.loads(Path(path).read_text()))],
                         columns=COLUMNS)  # fmt: skip
    table.to_csv(args.out, index=False)
    table.to_parquet(Path(args.out).with_suffix(".parquet"), index=False)
    print(f"{len(table)} operator rows from {len(args.records)} jobs -> {args.out}")


if __name__ == "__main__":
    main()
