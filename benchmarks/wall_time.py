"""Where a run's wall time goes, per stack: each part of dlbench/walltime.py's PARTS as the run records hold it (the
median over the stack's runs), the harness's seconds per run (the wall less the framework's imports, build, first
epoch and first evaluation (each holding a compilation) and timed epochs), the measurement efficiency (the steady
window's seconds over the run's wall), then for the whole study Snakemake's gaps between one training job's end and
the next one's start and the share of the invocation spent in timed steady windows.

It runs a study in a copy of the workflow, reusing the stack venvs of --venv-root: by default a small one (lenet on
synthetic images, every default stack, two repeats, no race), so that both a repeat that measures the input share
(the first) and one that does not are in it; --config FILE runs that study config instead (layered over config.yaml,
as the workflow layers it: `--config config.yaml` is the default study); --results DIR reads the records of a study
that already ran (its results/ folder: a fresh clone's default study) and runs nothing. Run alone from the repository
root, and quote the foreign load with the figures:

    .venv/bin/python benchmarks/wall_time.py [--stacks torch-2.13 ...] [--models lenet] [--datasets synthetic-32x32x3]
        [--repeats 2] [--config FILE | --results DIR] [--keep DIR] [--csv FILE]
"""

import argparse
import collections
import datetime
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from dlbench import walltime
from harness import write_csv
from planning import copy_workflow

REPO = Path(__file__).resolve().parents[1]


def small_study(args, venv_root):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.update(
        datasets=args.datasets,
        models=args.models,
        repeats=args.repeats,
        race={"enabled": False},
        venv_root=str(venv_root),
    )
    if args.stacks:
        config["stacks"] = args.stacks
    return config


def records(results):
    return [json.loads(path.read_text()) for path in sorted((results / "runs").glob("*/rep*/record.json"))]


def finished(record):
    """When the run's final record was written: the training process's record, its exit and the wrapper's teardown."""
    written = datetime.datetime.fromisoformat(record["provenance"]["finished_at"])
    after = sum(record["wall_s"].get(part, 0.0) for part in ("exit", "wrapper_teardown"))
    return written.timestamp() + after


def spans(runs):
    """(start, end) of each run, in the order they ran."""
    return sorted((finished(run) - sum(run["wall_s"].values()), finished(run)) for run in runs)


def gaps(runs):
    """The seconds between each run's end and the next run's start, in the order they ran."""
    return [max(0.0, start - previous_end) for (_, previous_end), (start, _) in itertools.pairwise(spans(runs))]


def summed(parts):
    """The parts of several runs added part by part."""
    total = collections.Counter()
    for each in parts:
        total.update(each)
    return dict(total)


def stack_row(stack, runs):
    parts = [run["wall_s"] for run in runs]
    row = {"stack": stack, "runs": len(runs)}
    for part in walltime.PARTS:
        row[part] = statistics.median(each.get(part, 0.0) for each in parts)
    row["wall_s"] = statistics.median(sum(each.values()) for each in parts)
    row["harness_s"] = statistics.median(walltime.harness_seconds(each) for each in parts)
    row["harness_max_s"] = max(walltime.harness_seconds(each) for each in parts)
    row["efficiency"] = walltime.measurement_efficiency(summed(parts))
    return row


def print_table(rows):
    shown = [part for part in walltime.PARTS if any(row[part] >= 0.005 for row in rows)]
    columns = ["stack", "runs", *shown, "wall_s", "harness_s", "harness_max_s", "efficiency"]
    width = {column: max(len(column), 7) for column in columns}
    print("  ".join(column.rjust(width[column]) for column in columns))
    for row in rows:
        cells = [
            str(row[column])
            if column in ("stack", "runs")
            else f"{row[column]:.0%}"
            if column == "efficiency"
            else f"{row[column]:.2f}"
            for column in columns
        ]
        print("  ".join(cell.rjust(width[column]) for cell, column in zip(cells, columns)))


def run_study(args, root):
    """Run the study in a copy of the workflow at `root`; its wall seconds from Snakemake's start to its end."""
    venv_root = Path(args.venv_root).absolute()
    copy_workflow(root)
    if args.config:
        config = {"venv_root": str(venv_root)}
        command = ["--configfile", str(args.config.absolute()), str(root / "benchmark.yaml")]
    else:
        config, command = small_study(args, venv_root), ["--configfile", str(root / "benchmark.yaml")]
    (root / "benchmark.yaml").write_text(yaml.safe_dump(config))
    started = time.perf_counter()
    with open(root / "snakemake.log", "w") as log:
        code = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "all", *command],
            check=False,
            cwd=root,
            stdout=log,
            stderr=log,
        ).returncode
    invocation = time.perf_counter() - started
    if code:
        sys.exit(f"the study failed after {invocation / 60:.1f} min: see {root / 'snakemake.log'}")
    return invocation


def report(runs, invocation):
    """The per-stack table and the study's line; the table's rows."""
    stacks = sorted({run["stack"] for run in runs})
    rows = [stack_row(stack, [run for run in runs if run["stack"] == stack]) for stack in stacks]
    print(f"wall time per run, median seconds over each stack's runs ({len(runs)} runs)")
    print_table(rows)
    every = summed(run["wall_s"] for run in runs)
    wall, steady = sum(every.values()), sum(every.get(part, 0.0) for part in walltime.STEADY_PARTS)
    between, harness = gaps(runs), walltime.harness_seconds(every)
    ran = spans(runs)
    invocation = invocation or ran[-1][1] - ran[0][0]  # a study read back: its first run's start to its last end
    print(
        f"study: {invocation:.0f} s, {wall:.0f} s of it in {len(runs)} runs ({wall / invocation:.0%}); "
        f"harness {harness:.0f} s ({harness / len(runs):.2f} s a run); steady windows {steady:.0f} s: "
        f"{walltime.measurement_efficiency(every):.0%} of the runs' wall, {steady / invocation:.0%} of the study's; "
        f"Snakemake's gap "
        f"between runs median {statistics.median(between or [0]):.2f} s, max {max(between or [0]):.2f} s"
    )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+", help="default: config.yaml's")
    parser.add_argument("--models", nargs="+", default=["lenet"])
    parser.add_argument("--datasets", nargs="+", default=["synthetic-32x32x3"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--config", type=Path, help="run this study config instead of the small study")
    parser.add_argument("--results", type=Path, help="read this finished study's results folder; run nothing")
    parser.add_argument("--venv-root", default=str(REPO / ".venvs"))
    parser.add_argument("--keep", help="run in this folder (kept) instead of a temporary one")
    parser.add_argument("--csv", help="also write the per-stack table here")
    args = parser.parse_args()
    if args.results:
        invocation = None
        runs = [run for run in records(args.results) if run.get("wall_s")]
    else:
        with tempfile.TemporaryDirectory() as temporary:
            root = Path(args.keep or temporary)
            root.mkdir(parents=True, exist_ok=True)
            invocation = run_study(args, root)
            runs = [run for run in records(root / "results") if run.get("wall_s")]
    if not runs:
        sys.exit("no run record with its wall time (wall_s) to read")
    rows = report(runs, invocation)
    if args.csv:
        write_csv(args.csv, rows, list(rows[0]))


if __name__ == "__main__":
    main()
