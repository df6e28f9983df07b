"""What a config plans, without Snakemake's DAG: the experiment matrix (dlbench/plan.py, the module the workflow's
rules import) and, for retries, the runs whose record is not ok. Run with the driver from the repository root:

    .venv/bin/python scripts/plan.py experiments [--configfile config.yaml]   # ids, repeats, what is left out
    .venv/bin/python scripts/plan.py failed [--status error timeout]          # record paths of runs not ok

`failed` prints one record path per line for Snakemake's --forcerun, which reruns exactly those runs (and the
tables and report after them) and touches no ok record:

    snakemake --cores all --forcerun $(.venv/bin/python scripts/plan.py failed --status error)
"""

import argparse
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from dlbench import plan  # noqa: E402


def load_config(path):
    """The config with the schema's defaults filled, as the workflow sees it (the workflow also checks it further)."""
    config = yaml.safe_load(Path(path).read_text()) or {}
    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"), set_default=True)
    return config


def matrix(config):
    stacks = yaml.safe_load((REPO / "envs" / "stacks.yaml").read_text())
    registry = yaml.safe_load(Path(config["downloads"]["registry"]).read_text())
    return plan.experiment_table(config, stacks, plan.train_sizes(config, registry))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["experiments", "failed"])
    parser.add_argument("--configfile", default="config.yaml")
    parser.add_argument("--status", nargs="+", default=[], help="failed: only these statuses (error, oom, ...)")
    args = parser.parse_args()
    config = load_config(args.configfile)
    if args.what == "failed":
        found = list(plan.failed_runs(config, matrix(config)[0], args.status))
        for run in found:
            print(run["record"])
        print(f"{len(found)} run(s) not ok" + (f" with status {', '.join(args.status)}" if args.status else ""),
              file=sys.stderr)  # fmt: skip
        return
    experiments, skipped = matrix(config)
    for entry in skipped:
        print(plan.skipped_message(entry), file=sys.stderr)
    for experiment in experiments:
        print(experiment)
    print(f"{len(experiments)} experiments x {config['repeats']} repeats = "
          f"{len(plan.runs(config, experiments))} training runs", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
