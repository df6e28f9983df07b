"""Racing: after a round, the experiments that run the next one (dlbench/study/analysis/race.py decides).

Reads every run record through the look's round, groups the runs as the aggregation does (race.race_groups: by
machine and COMPARISON_GROUP), races each group through the looks it reached and writes {"look": L, "rounds": [the
next round, or none], "next_round": [experiment ids], "groups": {group: its standing}}: the leader and the live rivals
of each undecided group run on, the cheapest decisions first, within the budget. Runs that did not end ok (failed,
contended) count as missing in their round; they count against the budget all the same.

    python scripts/plan_round.py --look L --records results/runs/*/rep*/record.json --options JSON --out FILE
"""

import argparse
import json

from dlbench.cli import run_main
from dlbench.io import write_json_atomic
from dlbench.study.analysis.race import Budget, noise_source, plan_next, race_groups, schedule
from dlbench.study.analysis.records import read_records, record_machines, runs_table
from dlbench.study.analysis.summary import run_seconds


def group_label(key):
    """A group's key (machine and COMPARISON_GROUP) as text, for the decision file and the log."""
    return "/".join(map(str, key))


def costs(final):
    """experiment id -> the median seconds of its runs (final tries), as the summary's run_seconds_median."""
    return final.assign(seconds=run_seconds(final)).groupby("experiment_id")["seconds"].median().dropna().to_dict()


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
    looks = schedule(options["repeats"], options["race"]["max_rounds"])
    records = read_records(args.records)  # an unreadable record counts as a run without a figure, as a failed one
    runs = runs_table(records, record_machines(records))
    final = runs[runs["final_try"].astype(bool)]
    seconds = float(run_seconds(final).sum())
    chosen, standing = plan_next(
        race_groups(runs),
        costs(final),
        seconds,
        looks,
        options["equivalence_margin"],
        budget(options),
        options["race"]["pooled"],
        noise_source,
    )
    rounds = [args.look + 1] if chosen and args.look < looks[-1] else []
    standing = dict(sorted((group_label(key), state) for key, state in standing.items()))
    write_json_atomic(args.out, {"look": args.look, "rounds": rounds, "next_round": chosen, "groups": standing})
    print(f"look after round {args.look}: {len(final)} runs, {seconds / 60:.1f} min of runs so far (wall time)")
    for key, state in sorted(standing.items()):
        print(f"  {key}: {state}")
    print(
        f"{len(chosen)} experiment(s) run round {rounds[0]}"
        if rounds
        else "no more rounds: every group decided, tied, alone, out of reach or stopped at the budget"
    )


if __name__ == "__main__":
    run_main(main)
