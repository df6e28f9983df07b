"""Racing against fixed rounds, simulated: decided groups, false claims and runs spent, under several noise models.

Each simulated study is --groups groups of --arms experiments. A run's log throughput is its experiment's true
centre plus its round's drift (shared by every experiment of the round: pairing by round removes it; the machine
speeds up by --step from round 4 on, as a 2-core VM was seen to, plus a random walk) plus process noise of scale
--noise drawn from one of three models: gaussian; heavy-tailed (Student's t on 3 degrees of freedom, scaled to the
same standard deviation); bimodal (a run lands in a slow mode, --noise * 2.5 below, one time in five, the rest
Gaussian: the same standard deviation). 0.12 per run gives a paired log-ratio SD near 0.17, the default study's on a
2-core VM. True centres: the A/A study has every experiment of a group equal (any difference claimed is false); the
mixed study draws each experiment's log centre from N(0, --spread), so leads range from ties to clear wins.

Designs, each at alpha 0.05 per group:
- fixed: --rounds rounds of every experiment, then the aggregation's tests (dlbench.study.analysis.statistics.decisions:
  each experiment against the fastest, paired by round, Holm within the group over every pair of it); a group is
  decided when every other experiment is proven slower or equivalent.
- race: dlbench.study.analysis.race after every round from --rounds up to --max-rounds, each pair judged by its
  confidence sequence; a group is decided (or tied) when one experiment is left, and stops out of reach where its
  projected rounds pass the most.
- fixed pooled, race pooled: the same, each comparison's variance pooled toward a prior fitted over the study's
  comparisons (dlbench.study.analysis.pooling, limma's moderated t): the fixed design's after its rounds, the race's
  after its first look.

Printed per noise model, study and design: groups decided (a fastest proven, or a tie), groups with a false claim (a
"slower" for an experiment not truly slower, or an "equivalent" for one truly beyond the margin), and runs spent per
study. Run from the repository root:

    .venv/bin/python benchmarks/race_simulation.py [--studies 100] [--groups 9] [--arms 4] [--noise 0.12]
"""

import argparse
import math

import numpy as np
from dlbench.study.analysis.pooling import fit_prior, pooled
from dlbench.study.analysis.race import (
    DECIDED,
    ELIMINATED,
    RETIRED,
    TIED,
    first_look_prior,
    race,
    rounds_spent,
    schedule,
)
from dlbench.study.analysis.statistics import SLOWER, compared, decisions, equivalence_bound, is_equivalence

WALK = 0.03  # a round's random-walk step of the machine's speed (log scale), shared by the round's runs


def process_noise(generator, model, scale, size):
    """Per-run log noise of standard deviation `scale` from the named model."""
    if model == "gaussian":
        return generator.normal(0, scale, size)
    if model == "heavy-tailed":
        return scale / math.sqrt(3) * generator.standard_t(3, size)  # t3 has variance 3
    slow = generator.random(size) < 0.2  # bimodal: a slow mode one run in five, centred so the mean is 0
    gap = 2.5 * scale
    spread = math.sqrt(max(scale**2 - 0.16 * gap**2, 0.0))
    return np.where(slow, -gap * 0.8, gap * 0.2) + generator.normal(0, spread, size)


def draw_group(generator, centres, args, rounds):
    """experiment -> {round: throughput} for true log centres, with each round's drift shared by the group."""
    drifts = np.cumsum(generator.normal(0, WALK, rounds)) + np.where(np.arange(1, rounds + 1) >= 4, args.step, 0.0)
    return {
        name: dict(
            zip(
                range(1, rounds + 1), np.exp(centre + drifts + process_noise(generator, args.model, args.noise, rounds))
            )
        )
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
    false_claim = any(  # each claim against the leader it was judged against, which may have changed since
        (state == ELIMINATED and wrongly_slower(centres, name, result.judgements[name].against))
        or (state == RETIRED and wrongly_equivalent(centres, name, result.judgements[name].against, margin))
        for name, (state, _) in result.states.items()
    )
    return result.outcome in (DECIDED, TIED), false_claim, rounds_spent(result)


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
            groups.append((centres, draw_group(generator, centres, args, looks[-1])))
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
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--groups", type=int, default=9)
    parser.add_argument("--arms", type=int, default=4)
    parser.add_argument("--noise", type=float, default=0.12, help="process noise per run (SD, log scale)")
    parser.add_argument("--models", nargs="+", default=["gaussian", "heavy-tailed", "bimodal"])
    parser.add_argument("--step", type=float, default=math.log(1.2), help="the machine's speed-up from round 4 (log)")
    parser.add_argument("--spread", type=float, default=0.2, help="SD of the experiments' true log centres")
    parser.add_argument("--rounds", type=int, default=3, help="the fixed design's rounds, the race's first look")
    parser.add_argument("--max-rounds", type=int, default=30, help="the race's most rounds")
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    looks = schedule(args.rounds, args.max_rounds)
    print(
        f"{args.studies} studies of {args.groups} groups x {args.arms} experiments, noise {args.noise} per run "
        f"(paired log-ratio SD {args.noise * math.sqrt(2):.2f}), drift x{math.exp(args.step):.2f} from round 4, "
        f"margin {args.margin:.0%}; fixed {args.rounds} rounds, race from {args.rounds} to {args.max_rounds} rounds"
    )
    print(f"{'noise':<13} {'study':<6} {'design':<12} {'decided':>14} {'false claims':>18} {'runs per study':>15}")
    for model in args.models:
        args.model = model
        generator = np.random.default_rng(args.seed)
        for study in ("A/A", "mixed"):
            for design, (decided, false, runs) in simulate(study, args, looks, generator).items():
                print(
                    f"{model:<13} {study:<6} {design:<12} {decided:>5.2f} of {args.groups} "
                    f"({decided / args.groups:>4.0%}) {false:>5.3f} ({false / args.groups:>5.1%} of groups) "
                    f"{runs:>15.1f}"
                )


if __name__ == "__main__":
    main()
