"""Adaptive repeats: after round r, the experiments that need round r + 1 (dlbench/analysis/rounds.py decides).

Reads every run record through round r, groups the experiments as the comparisons do, and writes
{"round": r, "next_round": [experiment ids], "groups": {...}}: one more round for every experiment of a comparison
that has neither decided (faster, slower, equivalent) nor narrowed its interval to the target half-width, until
`adaptive_repeats.max_repeats`. Runs that did not end ok (failed, contended) count as missing in their round.

    python scripts/plan_round.py --round R --records results/runs/*/rep*/record.json --options JSON --out FILE
"""

import argparse
import json
import sys

from dlbench.analysis.rounds import experiments_needing_a_round
from dlbench.cli import run_main
from dlbench import record as run_record
from dlbench.io import write_json_atomic
from dlbench.plan import comparison_group


def group_key(record):
    return "/".join(map(str, comparison_group(record)))


def grouped(records):
    """group key (as text) -> {experiment id: {round: steady throughput, None where the run was not ok}}."""
    groups = {}
    for record in records:
        throughput = record["train_images_per_s"] if record["status"] == "ok" else None
        groups.setdefault(group_key(record), {}).setdefault(record["experiment_id"], {})[record["rep"]] = throughput
    return groups


def baseline_experiments(records, stack):
    """group key -> the group's experiments on the config's comparison_baseline stack."""
    baselines = {}
    for record in records:
        if record["stack"] == stack:
            baselines.setdefault(group_key(record), set()).add(record["experiment_id"])
    return baselines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--records", nargs="+", required=True)
    parser.add_argument("--options", required=True, help="JSON: repeats, adaptive_repeats, equivalence_margin, ...")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    options = json.loads(args.options)
    adaptive = options["adaptive_repeats"]
    records = []
    for path in args.records:  # an unreadable record is a run without a figure, as a failed one
        try:
            records.append(run_record.read(path))
        except run_record.UnreadableRecord as error:
            print(f"left out: {error}", file=sys.stderr)
    groups = grouped(records)
    needed = experiments_needing_a_round(
        groups,
        options["repeats"],
        adaptive["max_repeats"],
        adaptive["target_half_width"],
        options["equivalence_margin"],
        baseline_experiments(records, options["comparison_baseline"]),
    )
    undecided = sorted({key for key, runs in groups.items() if set(runs) & set(needed)})
    write_json_atomic(args.out, {"round": args.round, "next_round": needed, "undecided_groups": undecided})
    print(
        f"after round {args.round}: {len(needed)} experiment(s) in {len(undecided)} of {len(groups)} group(s) run "
        f"round {args.round + 1}" + ("" if needed else ": every comparison decided or at its target")
    )


if __name__ == "__main__":
    run_main(main)
