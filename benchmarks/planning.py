"""Planning cost: wall time of `snakemake -n` on a fresh copy of the workflow for growing experiment matrices.

Each matrix is one stack, dataset and model with N batch sizes (N experiments) x --repeats repeats, so the train
jobs are N x repeats plus the few env, code, data, aggregate and report jobs. Beside each figure, Snakemake's own floor
for as many jobs (a one-rule workflow with one input per job, dry-run the same way) and their ratio, the figure to hold
at most 1.5; each time is the best of --tries dry runs, as a busy moment only ever adds time. Last, Snakemake's startup
(the floor for one job), paid by both: on a machine with Slurm's client tools but no reachable controller the Slurm
executor plugin waits seconds for `scontrol` at every start, which shrinks the ratio.
Run from the repository root, alone on the machine:

    .venv/bin/python benchmarks/planning.py [--experiments 1000 10000] [--repeats 3] [--tries 3]
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def copy_workflow(root):
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)


FLOOR = """
rule all:
    input: expand("out/{{i}}.txt", i=range({jobs}))
rule one:
    input: "in.txt"
    output: "out/{{i}}.txt"
    log: "logs/{{i}}.log"
    shell: "touch {{output}}"
"""


def timed_dry_run(root, tries):
    """The best of `tries` dry runs' wall times."""
    snakemake = [sys.executable, "-m", "snakemake"]  # the venv's bin/snakemake names the path it was installed at
    times = []
    for _ in range(tries):
        start = time.perf_counter()
        result = subprocess.run(
            [*snakemake, "-n", "--cores", "2", "--quiet", "rules"], cwd=root, capture_output=True, text=True
        )
        times.append(time.perf_counter() - start)
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-3000:])
    return min(times)


def floor_seconds(jobs, tries):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "Snakefile").write_text(FLOOR.format(jobs=jobs))
        (root / "in.txt").touch()
        return timed_dry_run(root, tries)


def dry_run_seconds(experiments, repeats, tries):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        copy_workflow(root)
        config = {
            "stacks": ["torch-2.13"],
            "datasets": ["synthetic-8x8x1"],
            "models": ["mlp"],
            "devices": ["cpu"],
            "batch_sizes": list(range(1, experiments + 1)),
            "epochs": [2],
            "variants": ["eager"],
            "repeats": repeats,
            "synthetic": {"classes": 4, "train_size": experiments, "test_size": 8},
            "ops": {"stacks": []},
            "max_batch": {"enabled": False},
        }
        (root / "config.yaml").write_text(yaml.safe_dump(config))
        return timed_dry_run(root, tries)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tries", type=int, default=3, help="dry runs per figure, the best kept")
    args = parser.parse_args()
    if args.tries < 1:
        parser.error(f"--tries {args.tries}: at least 1 dry run per figure")
    print(f"{'experiments':>11} {'train jobs':>10} {'snakemake -n (s)':>17} {'floor (s)':>10} {'ratio':>6}", end="")
    print(f" {'ms per job':>11} {'startup (s)':>12}")
    startup = floor_seconds(1, args.tries)
    for experiments in args.experiments:
        jobs = experiments * args.repeats
        seconds, floor = dry_run_seconds(experiments, args.repeats, args.tries), floor_seconds(jobs, args.tries)
        print(
            f"{experiments:>11,} {jobs:>10,} {seconds:>17.2f} {floor:>10.2f} {seconds / floor:>6.2f}"
            f" {seconds / jobs * 1000:>11.2f} {startup:>12.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
