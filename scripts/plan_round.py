"""Racing: after a planned look, the experiments that run the rounds to the next look (dlbench/analysis/race.py
decides).

Reads every run record through the look's round, groups the experiments as the comparisons do, races each group
through the looks it reached and writes {"look": L, "rounds": [the rounds to the next look], "next_round": [experiment
ids], "groups": {group: its standing}}: the leader and the live rivals of each undecided group run on, the groups
nearest a decision first, within the budget. Runs that did not end ok (failed, contended) count as missing in their
round; they count against the budget all the same.

    python scripts/plan_round.py --look L --records results/runs/*/rep*/record.json --options JSON --out FILE
"""

import argparse
import json
import statistics
import sys

from dlbench import record as run_record
from dlbench.analysis.race import Budget, plan_next, schedule
from dlbench.cli import run_main
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


def run_seconds(record):
    """What one run cost: the phases it timed, summed (its process start and the driver's own work aside)."""
    return sum(record["phases_s"].values())


def costs(records):
    """experiment id -> the median seconds of its runs."""
    seconds = {}
    for record in records:
        seconds.setdefault(record["experiment_id"], []).append(run_seconds(record))
    return {experiment: statistics.median(values) for experiment, values in seconds.items()}


def budget(options):
    race = options["race"]
    runs, minutes = race["budget_runs"], race["budget_minutes"]
    return Budget(float("inf") if runs is None else runs, float("inf") if minutes is None else 60 * minutes)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--look", type=int, required=True, help="the round count of the look")
    parser.add_argument("--records", nargs="+", required=True)
    parser.add_argument("--options", required=True, help="JSON: repeats, race, equivalence_margin")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    options = json.loads(args.options)
    looks = schedule(options["repeats"], options["race"]["looks"])
    records = []
    for path in args.records:  # an unreadable record is a run without a figure, as a failed one
        try:
            records.append(run_record.read(path))
        except run_record.UnreadableRecord as error:
            print(f"left out: {error}", file=sys.stderr)
    seconds = sum(run_seconds(record) for record in records)
    chosen, standing = plan_next(
        grouped(records),
        costs(records),
        seconds,
        looks,
        options["equivalence_margin"],
        budget(options),
        options["race"]["pooled"],
    )
    later = [look.rounds for look in looks if look.rounds > args.look]
    rounds = list(range(args.look + 1, later[0] + 1)) if later and chosen else []
    write_json_atomic(
        args.out, {"look": args.look, "rounds": rounds, "next_round": chosen, "groups": dict(sorted(standing.items()))}
    )
    print(f"look after round {args.look}: {len(records)} runs, {seconds / 60:.1f} min of training so far")
    for key, state in sorted(standing.items()):
        print(f"  {key}: {state}")
    print(
        f"{len(chosen)} experiment(s) run rounds {rounds[0]}-{rounds[-1]}"
        if rounds
        else "no more rounds: every group decided, alone, at the maximum or stopped by the budget"
    )


if __name__ == "__main__":
    run_main(main)
