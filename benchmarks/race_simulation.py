"""Racing against fixed rounds, simulated: decided groups, false claims and runs spent.

Each simulated study is --groups groups of --arms experiments. A run's log throughput is its experiment's true
centre plus a round's drift (shared by every experiment of the round: pairing by round removes it) plus process noise
of standard deviation --noise (0.12 per run gives a paired log-ratio SD near 0.17, the default study's on a 2-core
VM). True centres: the A/A study has every experiment of a group equal (any difference claimed is false); the mixed
study draws each experiment's log centre from N(0, --spread), so leads range from ties to clear wins.

Two designs, each at alpha 0.05 per group:
- fixed: --rounds rounds of every experiment, then the aggregation's tests (dlbench.study.analysis.statistics.decisions:
  each experiment against the fastest, paired by round, Holm within the group over every pair of it); a group is
  decided when every other experiment is proven slower or equivalent.
- race: dlbench.study.analysis.race at looks --looks (the last the maximum), alpha spent O'Brien-Fleming-style across
  them; a group is decided when one experiment is left.
- fixed pooled, race pooled: the same, each comparison's variance pooled toward a prior fitted over the study's
  comparisons (dlbench.study.analysis.pooling, limma's moderated t): the fixed design's after its rounds, the race's
  after its first look.

Printed per study and design: groups decided, groups with a false claim (a "slower" for an experiment not truly
slower, or an "equivalent" for one truly beyond the margin), and runs spent per study. Run from the repository root:

    .venv/bin/python benchmarks/race_simulation.py [--studies 200] [--groups 9] [--arms 4] [--noise 0.12]
"""

import argparse
import math

import numpy as np
from dlbench.study.analysis.pooling import fit_prior, pooled
from dlbench.study.analysis.race import ELIMINATED, RETIRED, first_look_prior, planned_looks, race, rounds_spent
from dlbench.study.analysis.statistics import SLOWER, compared, decisions, equivalence_bound, is_equivalence

DRIFT = 0.05  # a round's shared drift (log scale): pairing removes it, so it only matters unpaired


def draw_group(generator, centres, noise, rounds):
    """experiment -> {round: throughput} for true log centres, with each round's drift shared by the group."""
    drifts = generator.normal(0, DRIFT, rounds)
    return {
        name: {r + 1: math.exp(centre + drifts[r] + generator.normal(0, noise)) for r in range(rounds)}
        for name, centre in centres.items()
    }


def wrongly_slower(centres, slower, than):
    return centres[slower] >= centres[than]


def wrongly_equivalent(centres, one, other, margin):
    return abs(centres[one] - centres[other]) > equivalence_bound(margin)


def against_fastest(runs, rounds):
    """(fastest, others, their log ratios against it) after `rounds` rounds: the fixed design's comparisons."""
    throughputs = {name: {r: value for r, value in by_round.items() if r <= rounds} for name, by_round in runs.items()}
    fastest = max(throughputs, key=lambda name: np.mean(np.log(list(throughputs[name].values()))))
    others = sorted(set(throughputs) - {fastest})
    return fastest, others, [compared(throughputs[name], throughputs[fastest])[2] for name in others]


def study_prior(comparisons):
    """The prior pooled variance over every comparison of a study (all paired here), as the aggregation fits it."""
    log_ratios = [(index, log_ratio) for index, (_, _, group) in enumerate(comparisons) for log_ratio in group]
    return fit_prior(
        [log_ratio.spread**2 for _, log_ratio in log_ratios],
        [log_ratio.freedom for _, log_ratio in log_ratios],
        [index for index, _ in log_ratios],  # a group's comparisons share its fastest
    )


def fixed_design(comparison, centres, runs_spent, margin, prior=None):
    """(decided, false claim, runs spent) of the fixed design: rounds of everything, each against the fastest; each
    variance pooled toward the study's prior where one is given."""
    fastest, others, log_ratios = comparison
    if prior is not None:
        log_ratios = [pooled(log_ratio, prior) for log_ratio in log_ratios]
    verdicts = [outcome["verdict"] for outcome in decisions(log_ratios, margin)]
    false_claim = any(  # no "faster": the baseline is the fastest observed
        (verdict == SLOWER and wrongly_slower(centres, name, fastest))
        or (is_equivalence(verdict) and wrongly_equivalent(centres, name, fastest, margin))
        for name, verdict in zip(others, verdicts)
    )
    decided = all(verdict == SLOWER or is_equivalence(verdict) for verdict in verdicts)
    return decided, false_claim, runs_spent


def race_design(runs, centres, looks, margin, prior=None):
    """(decided, false claim, runs spent) of the race."""
    result = race(runs, looks, margin, prior)
    false_claim = any(
        (state == ELIMINATED and wrongly_slower(centres, name, result.leader))
        or (state == RETIRED and wrongly_equivalent(centres, name, result.leader, margin))
        for name, (state, _) in result.states.items()
    )
    return result.outcome == "decided", false_claim, rounds_spent(result)


DESIGNS = ("fixed", "race", "fixed pooled", "race pooled")


def simulate(study, args, looks, generator):
    """Per design, the mean over studies of (groups decided, groups with a false claim, runs spent per study). Pooled
    designs fit their prior over the study's comparisons: the fixed design's after its rounds, the race's after its
    first look (every experiment runs that far), and keep it for every look."""
    totals = {design: np.zeros(3) for design in DESIGNS}
    names = [f"arm{index}" for index in range(args.arms)]
    spread = 0.0 if study == "A/A" else args.spread
    for _ in range(args.studies):
        groups = []
        for _ in range(args.groups):
            centres = dict(zip(names, generator.normal(0, spread, args.arms)))
            groups.append((centres, draw_group(generator, centres, args.noise, looks[-1].rounds)))
        fixed = [against_fastest(runs, args.rounds) for _, runs in groups]
        fixed_prior = study_prior(fixed)
        race_prior = first_look_prior(dict(enumerate(runs for _, runs in groups)), looks)
        for (centres, runs), comparison in zip(groups, fixed):
            spent = args.rounds * len(runs)
            totals["fixed"] += fixed_design(comparison, centres, spent, args.margin)
            totals["race"] += race_design(runs, centres, looks, args.margin)
            totals["fixed pooled"] += fixed_design(comparison, centres, spent, args.margin, fixed_prior)
            totals["race pooled"] += race_design(runs, centres, looks, args.margin, race_prior)
    return {design: total / args.studies for design, total in totals.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--groups", type=int, default=9)
    parser.add_argument("--arms", type=int, default=4)
    parser.add_argument("--noise", type=float, default=0.12, help="process noise per run, log scale")
    parser.add_argument("--spread", type=float, default=0.2, help="SD of the experiments' true log centres")
    parser.add_argument("--rounds", type=int, default=3, help="the fixed design's rounds")
    parser.add_argument("--looks", type=int, nargs="+", default=[3, 5, 8], help="the race's looks; last: maximum")
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    looks = planned_looks(args.looks)
    generator = np.random.default_rng(args.seed)
    print(
        f"{args.studies} studies of {args.groups} groups x {args.arms} experiments, noise {args.noise} per run "
        f"(paired log-ratio SD {args.noise * math.sqrt(2):.2f}), margin {args.margin:.0%}; fixed {args.rounds} "
        f"rounds, race looks {args.looks}"
    )
    print(f"{'study':<6} {'design':<12} {'decided':>14} {'false claims':>18} {'runs per study':>15}")
    for study in ("A/A", "mixed"):
        for design, (decided, false, runs) in simulate(study, args, looks, generator).items():
            print(
                f"{study:<6} {design:<12} {decided:>5.2f} of {args.groups} ({decided / args.groups:>4.0%}) "
                f"{false:>5.3f} ({false / args.groups:>5.1%} of groups) {runs:>15.1f}"
            )


if __name__ == "__main__":
    main()
