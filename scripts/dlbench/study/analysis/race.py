"""The statistics of racing: a group's experiments run in rounds, and at looks planned in advance each live rival of
the group's leader leaves once proven slower (eliminated) or proven equivalent within the margin (retired); the group
is decided when only its leader is left. The workflow's checkpoint after each look (scripts/plan_round.py) plans the
next rounds with plan_next, and the aggregation replays the same races (race_groups, race_study) for the comparisons
table, so that the verdicts printed are the ones the race stopped on; benchmarks/race_simulation.py holds the rule
against fixed rounds.

- Looks are planned before the first round: the rounds after which the group is looked at, the last the maximum.
  Alpha is spent across them with the O'Brien-Fleming-type Lan-DeMets function alpha(t) = 2 - 2 Phi(z_{1-alpha/2} /
  sqrt(t)), t the share of the maximum rounds run: look k may spend alpha(t_k) - alpha(t_{k-1}), little at the first
  looks (where few rounds would make a claim cheap) and most at the last. The shares add up to alpha(1) = alpha at
  most, so spending each at its look, with a union bound over looks, holds any false claim to alpha however the race
  stops. (A group-sequential boundary that uses the correlation between looks would spend less conservatively; the
  union bound needs no assumption on it.)
- At a look each live rival is compared with the group's leader, the live experiment with the highest mean log
  throughput among those with at least two ok rounds (one run has no spread to be tested with), paired by round
  (dlbench.study.analysis.statistics.paired_log_ratio: t on rounds - 1 degrees of freedom).
  The leader can change between looks, so a look's alpha is shared among every pair the group could compare:
  k (k - 1) / 2 for k experiments. Each pair can be wrong one way only (its true ratio is 1, beyond the margin, or
  neither), so its difference test and its equivalence test (two one-sided tests) both run at that share.
- Pooled variance: given a prior fitted over the study's paired comparisons at the first look
  (dlbench.study.analysis.pooling, limma's moderated t), one per noise source (a machine and device kind: a CPU's noise
  is not a GPU's), each pair's variance is shrunk toward its source's prior and its t runs on the prior's degrees of
  freedom and its own.
- Eliminated: the two-sided interval at the pair's level lies wholly below 1 (slower than the leader). Retired: the
  two one-sided tests prove the ratio within [1 / (1 + margin), 1 + margin]. An eliminated or retired rival runs no
  more rounds; the leader and the live rivals do.
- Outcome: "alone" (one experiment: no race), "decided" (one live experiment left: the leader, with the others
  eliminated or retired), or "undecided" after the last look the group reached (the maximum, or an earlier one where
  the budget stopped it).
- A group reaches a look when its live experiments have run that look's rounds: a group the budget stopped at look k
  is never looked at again on the same rounds. Each look spends its own share of alpha on each pair at most once
  (a rival whose later runs all failed is judged again on the rounds it has, at the later look's share, which the
  union bound over looks already counts).
- Grouping: race_groups keys a group by its machine and COMPARISON_GROUP (dlbench/axes.py; tables.GROUP), from the
  runs table, in the planner and the aggregation alike, so both replay the same races over the same runs.
- The budget (a most number of runs, or minutes of runs) gives the next rounds to the groups nearest a decision:
  those whose hardest live rival needs the fewest rounds to decide at the rate it shows (statistics.repeats_to_decide).
"""

from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from dlbench.study.analysis.pooling import fit_prior, pooled
from dlbench.study.analysis.statistics import (
    ALPHA,
    difference_interval,
    equivalence_p,
    paired_log_ratio,
    repeats_to_decide,
)
from dlbench.study.analysis.tables import GROUP

LIVE, ELIMINATED, RETIRED = "live", "eliminated", "retired"
ALONE, DECIDED, UNDECIDED = "alone", "decided", "undecided"


class Look(NamedTuple):
    rounds: int  # the rounds run when the group is looked at
    alpha: float  # the share of alpha this look spends


class Judgement(NamedTuple):
    against: str  # the leader a rival was last compared with
    rounds: int  # the rounds of that look
    level: float  # the level its tests ran at there


class Race(NamedTuple):
    outcome: str  # alone, decided or undecided
    leader: str  # the leader at the last look the group had
    states: dict  # experiment -> (live, eliminated or retired; the rounds it ran)
    judgements: dict  # rival -> its last Judgement: where it left, or the last look for one still live


def spent(fraction, alpha=ALPHA):
    """The alpha an O'Brien-Fleming-type Lan-DeMets function has spent by `fraction` (0 to 1) of the maximum."""
    if fraction <= 0:
        return 0.0
    normal = NormalDist()
    return 2 - 2 * normal.cdf(normal.inv_cdf(1 - alpha / 2) / np.sqrt(min(fraction, 1.0)))


def planned_looks(rounds, alpha=ALPHA):
    """The looks after the given rounds (increasing; the last is the maximum), each with the alpha it spends."""
    if list(rounds) != sorted(set(rounds)) or rounds[0] < 2:
        raise ValueError(f"looks must be increasing round counts from 2 rounds: {rounds}")
    maximum = rounds[-1]
    fractions = [0.0, *(count / maximum for count in rounds)]
    return [
        Look(count, spent(now, alpha) - spent(before, alpha))
        for count, before, now in zip(rounds, fractions, fractions[1:])
    ]


def mean_log(throughputs, rounds):
    """An experiment's mean log throughput over its runs up to `rounds` rounds."""
    return np.mean([np.log(value) for key, value in throughputs.items() if key <= rounds])


def leader_of(groups, live, rounds):
    """The live experiment with the highest mean log throughput up to `rounds`, among those with at least two ok
    rounds there where any has (a single run may be fast by luck, and cannot be tested against)."""
    testable = [experiment for experiment in live if sum(key <= rounds for key in groups[experiment]) >= 2]
    return max(sorted(testable or live), key=lambda experiment: mean_log(groups[experiment], rounds))


def look_ratio(rival, leader, rounds, prior=None):
    """The rival's paired log ratio against the leader over their common rounds up to `rounds`, its variance pooled
    toward the prior where one is given; None with fewer than two common rounds (no spread to test with)."""
    common = sorted(key for key in set(rival) & set(leader) if key <= rounds)
    if len(common) < 2:
        return None
    log_ratio = paired_log_ratio([rival[key] for key in common], [leader[key] for key in common])
    return log_ratio if prior is None else pooled(log_ratio, prior)


def judged(rival, leader, rounds, level, margin, prior=None):
    """A live rival's state after a look: eliminated where proven slower than the leader at `level`, retired where
    proven within the margin, else still live; its variance pooled toward the prior where one is given."""
    log_ratio = look_ratio(rival, leader, rounds, prior)
    if log_ratio is None:
        return LIVE
    _, high = difference_interval(log_ratio, level)
    if high < 0:
        return ELIMINATED
    if equivalence_p(log_ratio, margin) < level:
        return RETIRED
    return LIVE


def race(groups, looks, margin, prior=None):
    """Race one group: groups maps experiment -> {round: throughput} (at least the rounds it would run: a left rival's
    later rounds are never read); looks from planned_looks; prior, where given, the study's (pooling.fit_prior).
    Returns the Race."""
    experiments = sorted(groups)
    if len(experiments) == 1:
        return Race(ALONE, experiments[0], {experiments[0]: (LIVE, looks[0].rounds)}, {})
    pairs = len(experiments) * (len(experiments) - 1) // 2
    states = {experiment: (LIVE, looks[0].rounds) for experiment in experiments}
    judgements, leader = {}, experiments[0]
    for look in looks:
        live = [experiment for experiment, (state, _) in states.items() if state == LIVE]
        for experiment in live:
            states[experiment] = (LIVE, look.rounds)
        leader = leader_of(groups, live, look.rounds)
        judgements.pop(leader, None)
        level = look.alpha / pairs
        for rival in live:
            if rival != leader:
                state = judged(groups[rival], groups[leader], look.rounds, level, margin, prior)
                states[rival] = (state, look.rounds)
                judgements[rival] = Judgement(leader, look.rounds, level)
        if sum(state == LIVE for state, _ in states.values()) == 1:
            return Race(DECIDED, leader, states, judgements)
    return Race(UNDECIDED, leader, states, judgements)


def rounds_spent(result):
    """The runs a race took: each experiment's rounds, up to the look at which it left or the group stopped."""
    return sum(rounds for _, rounds in result.states.values())


def schedule(first, later):
    """The planned looks of a study: after its first `first` rounds (every experiment runs them), then after each of
    the `later` round counts (increasing; the last is the maximum)."""
    return planned_looks([first, *later])


def reached(runs, looks):
    """The looks a group has reached: those whose rounds its runs (experiment -> {round: throughput or None}, every
    run that left a record) have got to."""
    last = max((max(by_round, default=0) for by_round in runs.values()), default=0)
    return [look for look in looks if look.rounds <= last]


def ok_only(runs):
    """experiment -> {round: throughput} of the ok runs (a run that did not end ok is None or NaN), leaving out the
    experiments without any: an experiment that never ran ok is its failure's result, not a rival."""
    kept = {
        experiment: {key: value for key, value in by_round.items() if value is not None and np.isfinite(value)}
        for experiment, by_round in runs.items()
    }
    return {experiment: by_round for experiment, by_round in kept.items() if by_round}


def race_groups(runs):
    """GROUP key -> experiment id -> {round: steady throughput, None where the run was not ok} of the final tries of
    the runs table (dlbench.study.analysis.records.runs_table): the planner's and the aggregation's one grouping."""
    final = runs[runs["final_try"].astype(bool)]
    groups = {}
    for row in final[[*GROUP, "experiment_id", "rep", "status", "train_images_per_s"]].to_dict("records"):
        value = row["train_images_per_s"] if row["status"] == "ok" else None
        key = tuple(row[column] for column in GROUP)
        groups.setdefault(key, {}).setdefault(row["experiment_id"], {})[int(row["rep"])] = value
    return groups


def noise_source(key):
    """The noise process of a GROUP key's runs: its machine and device kind, over which one prior is fitted."""
    return key[GROUP.index("machine")], key[GROUP.index("device")]


def in_order(groups):
    """The groups' items in one order (their keys as text: keys may mix numbers and None), so that sums over them
    come out the same in the planner and the aggregation."""
    return sorted(groups.items(), key=lambda item: str(item[0]))


def first_look_prior(groups, looks):
    """The prior pooled variance (pooling.fit_prior) over the paired comparisons of groups of one noise source at
    the first look, each experiment against its group's leader there (every experiment runs that far), kept for
    every later look; None where too few comparisons fit one. groups: key -> experiment -> {round: throughput} of ok
    runs."""
    first = looks[0].rounds
    variances, freedoms, references = [], [], []
    for key, runs in in_order(groups):
        live = [experiment for experiment, by_round in runs.items() if any(round_ <= first for round_ in by_round)]
        if len(live) < 2:
            continue
        leader = leader_of(runs, live, first)
        for rival in live:
            log_ratio = look_ratio(runs[rival], runs[leader], first) if rival != leader else None
            if log_ratio is not None:
                variances.append(log_ratio.spread**2)
                freedoms.append(log_ratio.freedom)
                references.append(key)
    return fit_prior(variances, freedoms, references)


def source_priors(ok, looks, source):
    """group key -> the first_look_prior of its noise source (source: key -> its source; None: one source)."""
    source_of = source or (lambda key: None)
    by_source = {}
    for key, runs in ok.items():
        by_source.setdefault(source_of(key), {})[key] = runs
    fitted = {name: first_look_prior(members, looks) for name, members in by_source.items()}
    return {key: fitted[source_of(key)] for key in ok}


def race_study(groups, looks, margin, pool=True, source=None):
    """Every group's Race through the looks it reached, and the prior each group's comparisons were pooled toward
    (group key -> Prior or None). groups: key -> experiment -> {round: throughput, None where the run did not end
    ok}; pool: shrink each comparison's variance toward its noise source's first_look_prior; source: key -> noise
    source (noise_source for GROUP keys; None: the groups share one)."""
    ok = {key: ok_only(runs) for key, runs in groups.items()}
    priors = source_priors(ok, looks, source) if pool else dict.fromkeys(ok)
    races = {}
    for key, runs in groups.items():
        looked = reached(runs, looks)
        if ok[key] and looked:
            races[key] = race(ok[key], looked, margin, priors[key])
    return races, priors


def live_experiments(result):
    return sorted(experiment for experiment, (state, _) in result.states.items() if state == LIVE)


def rounds_needed(result, runs, margin, prior):
    """The rounds the group's hardest live rival needs to decide at its last look's level, at the ratio and spread
    it shows (statistics.repeats_to_decide): how near the group is to a decision."""
    needs = []
    for rival in live_experiments(result):
        judgement = result.judgements.get(rival)
        if judgement is None:
            continue
        log_ratio = look_ratio(runs[rival], runs[judgement.against], judgement.rounds, prior)
        needed = None if log_ratio is None else repeats_to_decide(log_ratio, margin, judgement.level)
        needs.append(float("inf") if needed is None else needed)
    return max(needs, default=float("inf"))


class Budget(NamedTuple):
    runs: float  # the most training runs of the study, inf for no limit
    seconds: float  # the most seconds of runs (each its wall time), summed, inf for no limit


def plan_next(groups, costs, seconds_spent, looks, margin, budget, pool=True, source=None):
    """After the study's latest look (the last its runs reached): (the experiments that run the rounds to the next
    look, key -> the group's standing). groups: key -> experiment -> {round: throughput, None where not ok} of every
    run so far; costs: experiment -> seconds one of its runs takes; seconds_spent: the training runs' seconds so far.
    A group races on while undecided at this look and short of the maximum, the groups nearest a decision first,
    while the runs and seconds spent so far plus theirs stay within the budget; a group stopped once stays stopped
    (its rounds would no longer line up with its rivals'). source: as race_study's."""
    races, priors = race_study(groups, looks, margin, pool, source)
    current = max((len(reached(runs, looks)) for runs in groups.values()), default=0)
    runs_spent = sum(len(by_round) for runs in groups.values() for by_round in runs.values())
    standing = {key: result.outcome for key, result in races.items()}
    candidates = []
    for key, result in races.items():
        if result.outcome != UNDECIDED:
            continue
        if len(reached(groups[key], looks)) < current:
            standing[key] = "stopped at the budget"
        elif current < len(looks):
            runners = live_experiments(result)
            ahead = looks[current].rounds - looks[current - 1].rounds
            cost = len(runners) * ahead, sum(costs.get(experiment, 0.0) for experiment in runners) * ahead
            need = rounds_needed(result, ok_only(groups[key]), margin, priors[key])
            candidates.append((need, key, runners, cost))
    chosen = []
    for _, key, runners, (runs, seconds) in sorted(candidates, key=lambda item: (item[0], str(item[1]))):
        if runs_spent + runs > budget.runs or seconds_spent + seconds > budget.seconds:
            standing[key] = "stopped at the budget"
            continue
        runs_spent, seconds_spent = runs_spent + runs, seconds_spent + seconds
        standing[key] = f"racing: {len(runners)} live to round {looks[current].rounds}"
        chosen += runners
    return sorted(chosen), standing
