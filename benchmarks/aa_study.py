"""A real A/A study: each stack entered twice under two names, raced as the default study races, so that any
difference the comparisons claim is false. In a copy of the workflow, envs/stacks.yaml gains a twin of each named
stack (`<stack>-twin`: the same framework, env and adapter), and the study compares the two in every group of
--models x --datasets. Printed per group: the race's outcome, the verdict, the rounds and the ratio with its
interval, the standard deviation of the twins' paired log ratio over every round (what a race's decisions rest on)
and each twin's between-process share of its variance; then the groups with a false claim ("slower" between twins)
against the 5 % the tests are set to, and the ties proven. `--set KEY=VALUE` (a YAML value) changes a config key, to
measure a counter-measure's effect on the noise: `--set cpu_threads=1`. Run from the repository root with the stack
venvs built (no other work of yours beside it: quote the foreign load with the figures):

    .venv/bin/python benchmarks/aa_study.py [--stacks torch-2.13 mxnet-1.9] [--models mlp lenet]
        [--datasets digits synthetic-32x32x3] [--max-rounds 30] [--budget-minutes M] [--max-foreign-cores CORES] [--set KEY=VALUE ...]
        [--keep DIR]
"""

import argparse
import csv
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from dlbench.study.analysis.statistics import is_equivalence
from planning import copy_workflow

REPO = Path(__file__).resolve().parents[1]
TWIN = "{stack}-twin"


def with_twins(root, stacks):
    """The copy's envs/stacks.yaml with a twin of each stack: the same entry under another name."""
    path = root / "envs" / "stacks.yaml"
    entries = yaml.safe_load(path.read_text())
    for stack in stacks:
        entries[TWIN.format(stack=stack)] = entries[stack]
    path.write_text(yaml.safe_dump(entries, sort_keys=False))


def study(args, venv_root):
    names = [name for stack in args.stacks for name in (stack, TWIN.format(stack=stack))]
    return {
        "stacks": names,
        "datasets": args.datasets,
        "models": args.models,
        "variants": ["eager"],
        "race": {"max_rounds": args.max_rounds, "budget_minutes": args.budget_minutes},
        "ops": {"stacks": []},
        "max_batch": {"enabled": False},
        "venv_root": str(venv_root),
    }


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def twins(row):
    """Whether a comparison is between a stack and its twin."""
    return row["stack"].removesuffix("-twin") == row["baseline_stack"].removesuffix("-twin")


def paired_sd(runs, row):
    """The standard deviation of the twins' log throughput ratio, round by round, over every round both ran ok."""
    rounds = {}
    for run in runs:
        if run["status"] == "ok" and run["experiment_id"] in (row["experiment_id"], row["baseline_experiment_id"]):
            rounds.setdefault(run["rep"], {})[run["experiment_id"]] = math.log(float(run["train_images_per_s"]))
    ratios = [
        pair[row["experiment_id"]] - pair[row["baseline_experiment_id"]] for pair in rounds.values() if len(pair) == 2
    ]
    return (statistics.stdev(ratios) if len(ratios) > 1 else math.nan), len(ratios)


def shown(value, spec):
    """A figure of the tables formatted, or a dash where it is empty (a twin with no ok run has no throughput)."""
    return format(float(value), spec) if value else "–"


def setting(text):
    """KEY=VALUE, the value read as YAML: ("cpu_threads", 1)."""
    key, _, value = text.partition("=")
    return key, yaml.safe_load(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+", default=["torch-2.13", "mxnet-1.9"])
    parser.add_argument("--models", nargs="+", default=["mlp", "lenet"])
    parser.add_argument("--datasets", nargs="+", default=["digits", "synthetic-32x32x3"])
    parser.add_argument("--max-rounds", type=int, default=30, help="the race's race.max_rounds")
    parser.add_argument("--budget-minutes", type=float, help="the race's race.budget_minutes (default: none)")
    parser.add_argument("--venv-root", default=str(REPO / ".venvs"))
    parser.add_argument("--keep", help="run in this folder (kept) instead of a temporary one")
    parser.add_argument(
        "--max-foreign-cores",
        type=float,
        help="measure runs beside up to this much foreign CPU load (contention.max_foreign_cpu_cores): an A/A study "
        "under load, where the twins' noise is not stationary, tests the statistics harder",
    )
    parser.add_argument("--set", type=setting, action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(args.keep or temporary)
        root.mkdir(parents=True, exist_ok=True)
        copy_workflow(root)
        with_twins(root, args.stacks)
        base = yaml.safe_load((REPO / "config.yaml").read_text())
        config = {**base, **study(args, Path(args.venv_root).absolute()), "exclude": []}
        config.pop("grids", None)
        if args.max_foreign_cores is not None:
            config["contention"] = {"max_foreign_cpu_cores": args.max_foreign_cores}
        config.update(args.set)
        (root / "config.yaml").write_text(yaml.safe_dump(config))
        started = time.perf_counter()
        with open(root / "snakemake.log", "w") as log:
            code = subprocess.run(
                [sys.executable, "-m", "snakemake", "--cores", "all"], cwd=root, stdout=log, stderr=log
            ).returncode
        wall = time.perf_counter() - started
        tables = root / "results" / "tables"
        if code or not (tables / "comparisons.csv").exists():
            sys.exit(f"the study failed after {wall / 60:.1f} min: see {root / 'snakemake.log'}")
        rows = [row for row in read_csv(tables / "comparisons.csv") if twins(row)]
        runs, summary = read_csv(tables / "runs.csv"), read_csv(tables / "summary.csv")
        described = {
            row["experiment_id"]: f"{shown(row['train_images_per_s_gmean'], ',.0f')} img/s, between-process share "
            f"{shown(row['between_process_share'], '.2f')}"
            for row in summary
        }
        print(f"A/A study: {len(rows)} groups of twins, {wall / 60:.1f} min, settings {dict(args.set)}")
        for row in rows:
            sd, rounds = paired_sd(runs, row)
            each = "; ".join(described[row[key]] for key in ("experiment_id", "baseline_experiment_id"))
            print(
                f"  {row['stack']} vs {row['baseline_stack']} on {row['model']}/{row['dataset']}: "
                f"{row['race_outcome'] or 'unraced'}, {row['verdict']} after {row['pairs']} rounds, ratio "
                f"{shown(row['ratio'], '.3f')} [{shown(row['ratio_low'], '.3f')}, {shown(row['ratio_high'], '.3f')}]; "
                f"paired SD {sd:.3f} over {rounds} rounds; twins {each}"
            )
        false = sum(row["verdict"] in ("faster", "slower") for row in rows)
        ties = sum(is_equivalence(row["verdict"]) for row in rows)
        print(f"false claims: {false} of {len(rows)} groups (the tests hold them to 5 %); ties proven: {ties}")


if __name__ == "__main__":
    main()
