"""What a config plans, without Snakemake's DAG: the experiment matrix (dlbench/study/plan.py, the module the workflow's
rules import) and, for retries, the runs whose record is not ok. Run with the driver from the repository root, with
the config arguments Snakemake was given (layered over config.yaml as Snakemake does):

    .venv/bin/python scripts/plan.py experiments [--configfile study.yaml] [--config key=value ...]
    .venv/bin/python scripts/plan.py failed [--status error timeout] [--configfile study.yaml]

`failed` prints one record path per line for Snakemake's --forcerun, which reruns exactly those runs (and the
tables and report after them) and touches no ok record:

    .venv/bin/python -m snakemake --forcerun $(.venv/bin/python scripts/plan.py failed --status error)
"""

import argparse
import sys

from dlbench.cli import run_main
from dlbench.study import configuration, plan
from snakemake.cli import parse_config


def checked_config(configfiles, config_arguments):
    """The config exactly as the workflow would plan it, or the workflow's own refusal."""
    command_line = parse_config(config_arguments)
    config = configuration.load(configfiles, command_line)
    stacks, registry = configuration.load_stacks(), configuration.load_registry(config)
    configuration.check(config, stacks, registry, configuration.this_machine())
    return config, stacks, registry


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["experiments", "failed"])
    parser.add_argument("--configfile", nargs="+", default=[], help="as given to snakemake, layered over config.yaml")
    parser.add_argument("--config", nargs="+", default=[], help="key=value, as given to snakemake")
    parser.add_argument("--status", nargs="+", default=[], help="failed: only these statuses (error, oom, ...)")
    args = parser.parse_args()
    try:
        config, stacks, registry = checked_config(args.configfile, args.config)
    except configuration.ConfigError as error:
        sys.exit(str(error))
    for line in configuration.warnings(config):
        print(line, file=sys.stderr)
    sizes, tokens = plan.train_sizes(config, registry), plan.token_datasets(config, registry)
    experiments, skipped = plan.experiment_table(config, stacks, sizes, tokens)
    if not experiments:
        sys.exit(plan.nothing_planned(config, stacks, sizes, skipped, tokens))
    try:
        configuration.race_budget(config, experiments)
    except configuration.ConfigError as error:
        sys.exit(str(error))
    if args.what == "failed":
        found = list(plan.failed_runs(config, experiments, args.status))
        for run in found:
            print(run["record"])
        print(
            f"{len(found)} run(s) not ok" + (f" with status {', '.join(args.status)}" if args.status else ""),
            file=sys.stderr,
        )
        return
    for entry in skipped:
        print(plan.skipped_message(entry), file=sys.stderr)
    for experiment in experiments:
        print(experiment)
    first = len(experiments) * config["repeats"]
    print(f"{len(experiments)} experiments x {config['repeats']} repeats = {first} training runs", file=sys.stderr)
    if config["race"]["enabled"]:
        raced = len(plan.runs(config, experiments)) - first
        print(f"racing: {plan.race_summary(config, len(experiments))}; {raced} more planned so far", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
