"""The statistics of racing: a group's experiments run in rounds, and after every round from the first look on each
live rival of the group's leader leaves once proven slower (eliminated) or proven equivalent within the margin
(retired); the group ends decided (its leader proven faster than every rival), tied (its leader proven within the
margin of one rival or more, faster than the rest), out of reach (no count of rounds up to the most a group may run
would decide it at the ratio and spread it shows) or stopped at the budget. The workflow's checkpoint after each round
(scripts/plan_round.py) plans the next round with plan_next, and the aggregation replays the same races (race_groups,
race_study) for the comparisons table, so that the verdicts printed are the ones the race stopped on;
benchmarks/race_simulation.py holds the rule against fixed rounds.

- Every look tests each pair with a confidence sequence (dlbench.study.analysis.sequential), valid at every round at
  once: looks cost no alpha, a race may run until it has its answer, and a study continued with a larger budget after
  it was read keeps its error rate. The group's ALPHA is shared among every pair it could compare, k (k - 1) / 2 for k
  experiments (the leader can change between looks), and each pair's interval decides both its claims.
- At a look each live rival is compared with the group's leader, the live experiment with the highest mean log
  throughput among those with at least two ok rounds (one run has no spread to be tested with), paired by round
  (dlbench.study.analysis.statistics.paired_log_ratio).
- Pooled variance: given a prior fitted over the study's paired comparisons at the first look
  (dlbench.study.analysis.pooling, limma's moderated t), one per noise source (a machine and device kind: a CPU's noise
  is not a GPU's), each pair's variance is shrunk toward its source's prior and the sequence runs on the prior's
  degrees of freedom and its own.
- Eliminated: the sequence lies wholly below 0 (slower than the leader). Retired: it lies within +-log(1 + margin). An
  eliminated or retired rival runs no more rounds; the leader and the live rivals do.
- Out of reach: at a look, the hardest live rival would need more rounds than `most` (the last look) to decide with
  80 % chance at the spread it shows, even at a ratio PLAUSIBLE_LEAN standard errors nearer a decision than the one
  it shows (sequential.rounds_to_decide); the group stops there (stopping for futility makes no claim, so it costs no
  error). The smallest lead the most rounds resolve is what the machine's noise allows.
- The budget (a most number of runs, or minutes of runs) buys the cheapest decisions first: at each look the
  undecided groups are ordered by their projected cost to a decision (the rounds their hardest rival needs, times the
  measured seconds of a round of their live experiments), and each runs on while the budget holds its projected cost
  beside the cheaper groups'; one whose projected cost does not fit runs its next round on what is left where that
  fits (projections from few rounds are noisy), and stops at the budget, undecided, with what deciding it would cost,
  where not even a round fits. A group stopped once stays stopped (its rounds would no longer line up with its
  rivals').
- Grouping: race_groups keys a group by its machine and COMPARISON_GROUP (dlbench/axes.py; tables.GROUP), from the
  runs table, in the planner and the aggregation alike, so both replay the same races over the same runs.
"""

import math
from typing import NamedTuple

import numpy as np

from dlbench.study.analysis import sequential
from dlbench.study.analysis.pooling import fit_prior, pooled
from dlbench.study.analysis.statistics import ALPHA, equivalence_bound, paired_log_ratio
from dlbench.study.analysis.tables import GROUP

LIVE, ELIMINATED, RETIRED = "live", "eliminated", "retired"
ALONE, DECIDED, TIED, UNDECIDED = "alone", "decided", "tied", "undecided"
OUT_OF_REACH, AT_BUDGET = "out of reach", "stopped at the budget"
# Out of reach only where even a ratio this many standard errors nearer a decision than the one shown would need more
# than the most rounds: a projection from three noisy rounds is itself noisy, and stopping on the ratio shown gave up
# half the decisions of simulated studies (benchmarks/race_simulation.py).
PLAUSIBLE_LEAN = 2.0


class Judgement(NamedTuple):
    against: str  # the leader a rival was last compared with
    rounds: int  # the rounds of that look
    level: float  # the level its confidence sequence ran at there


class Race(NamedTuple):
    outcome: str  # alone, decided, tied, out of reach, or undecided (within reach at its last look)
    leader: str  # the leader at the last look the group had
    states: dict  # experiment -> (live, eliminated or retired; the rounds it ran)
    judgements: dict  # rival -> its last Judgement: where it left, or the last look for one still live
    needed: float  # where undecided or out of reach, the rounds in all that would decide it (inf: none up to most)


def schedule(first, most):
    """The looks of a study: after its first `first` rounds (every experiment runs them), then after every round up
    to `most`, the most rounds a group may run."""
    if first < 2 or most < first:
        raise ValueError(f"looks need at least 2 first rounds and a most of at least those: {first}, {most}")
    return list(range(first, most + 1))


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
    """A live rival's state after a look: eliminated where its confidence sequence at `level` lies below 0 (slower
    than the leader), retired where it lies within the margin, else still live; its variance pooled toward the prior
    where one is given."""
    log_ratio = look_ratio(rival, leader, rounds, prior)
    if log_ratio is None:
        return LIVE
    low, high = sequential.interval(log_ratio, level)
    if high < 0:
        return ELIMINATED
    bound = equivalence_bound(margin)
    if -bound < low and high < bound:
        return RETIRED
    return LIVE


def pair_level(experiments):
    """The level of each pair's confidence sequence in a group of `experiments`: ALPHA shared among every pair."""
    return ALPHA / (experiments * (experiments - 1) // 2)


def race(groups, looks, margin, prior=None, most=None):
    """Race one group through `looks` (round counts, increasing; `most`, the most rounds a group may run, their last
    where not given): groups maps experiment -> {round: throughput} (at least the rounds it would run: a left rival's
    later rounds are never read); prior, where given, the study's (pooling.fit_prior). Returns the Race: decided or
    tied where one live experiment is left, out of reach where the most rounds would not decide it or it ran them,
    else undecided (with the rounds in all its hardest rival needs)."""
    experiments, most = sorted(groups), most or looks[-1]
    if len(experiments) == 1:
        return Race(ALONE, experiments[0], {experiments[0]: (LIVE, looks[0])}, {}, 0)
    level = pair_level(len(experiments))
    states = {experiment: (LIVE, looks[0]) for experiment in experiments}
    judgements, leader = {}, experiments[0]
    for rounds in looks:
        live = [experiment for experiment, (state, _) in states.items() if state == LIVE]
        for experiment in live:
            states[experiment] = (LIVE, rounds)
        leader = leader_of(groups, live, rounds)
        judgements.pop(leader, None)
        for rival in live:
            if rival != leader:
                states[rival] = (judged(groups[rival], groups[leader], rounds, level, margin, prior), rounds)
                judgements[rival] = Judgement(leader, rounds, level)
        if sum(state == LIVE for state, _ in states.values()) == 1:
            tied = any(state == RETIRED for state, _ in states.values())
            return Race(TIED if tied else DECIDED, leader, states, judgements, 0)
        result = Race(UNDECIDED, leader, states, judgements, math.inf)
        if rounds_needed(result, groups, margin, prior, most, PLAUSIBLE_LEAN) > most:
            return result._replace(outcome=OUT_OF_REACH)
    if looks[-1] >= most:
        return result._replace(outcome=OUT_OF_REACH)
    return result._replace(needed=min(rounds_needed(result, groups, margin, prior, most), most))


def rounds_spent(result):
    """The runs a race took: each experiment's rounds, up to the look at which it left or the group stopped."""
    return sum(rounds for _, rounds in result.states.values())


def reached(runs, looks):
    """The looks a group has reached: those whose rounds its runs (experiment -> {round: throughput or None}, every
    run that left a record) have got to."""
    last = max((max(by_round, default=0) for by_round in runs.values()), default=0)
    return [look for look in looks if look <= last]


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
    first = looks[0]
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
            races[key] = race(ok[key], looked, margin, priors[key], looks[-1])
    return races, priors


def live_experiments(result):
    return sorted(experiment for experiment, (state, _) in result.states.items() if state == LIVE)


def rounds_needed(result, runs, margin, prior, most, lean=0.0):
    """The rounds (round counts, as the looks count them) the group's hardest live rival needs to decide with 80 %
    chance at its last look's level, at the ratio and spread it shows, or at a ratio `lean` standard errors nearer a
    decision (sequential.rounds_to_decide, on the rounds it shares with its leader: rounds a failed run left out are
    added back); inf where one would need more than `most`. A rival with too few rounds in common to be tested yet
    (failed runs) needs one more round than its look, as far as the group can tell."""
    needs = []
    for rival in live_experiments(result):
        judgement = result.judgements.get(rival)
        if judgement is None:
            continue
        log_ratio = look_ratio(runs[rival], runs[judgement.against], judgement.rounds, prior)
        if log_ratio is None:
            needs.append(judgement.rounds + 1)
            continue
        missing = judgement.rounds - log_ratio.rounds
        needed = sequential.rounds_to_decide(
            log_ratio, equivalence_bound(margin), judgement.level, most - missing, lean
        )
        needs.append(math.inf if needed is None else needed + missing)
    return max(needs, default=math.inf)


class Budget(NamedTuple):
    runs: float  # the most training runs of the study, inf for no limit
    seconds: float  # the most seconds of runs (each its wall time), summed, inf for no limit


def plan_next(groups, costs, seconds_spent, looks, margin, budget, pool=True, source=None):
    """After the study's latest look (the last round its runs reached): (the experiments that run the next round,
    key -> the group's standing). groups: key -> experiment -> {round: throughput, None where not ok} of every run so
    far; costs: experiment -> seconds one of its runs takes; seconds_spent: the training runs' seconds so far. The
    undecided groups at this look, cheapest decision first (projected rounds to decide times the seconds of a round
    of their live experiments), each race on while the runs and seconds spent so far, plus the projected cost of it
    and of the cheaper groups, stay within the budget; where its projected cost does not fit but its next round does,
    it runs that round on what is left (a projection from few rounds is noisy); a group that fits neither stops at the
    budget, and a group stopped once stays stopped (its rounds would no longer line up with its rivals'). source: as
    race_study's."""
    races, priors = race_study(groups, looks, margin, pool, source)
    current = max((max(reached(runs, looks), default=0) for runs in groups.values()), default=0)
    runs_spent = sum(len(by_round) for runs in groups.values() for by_round in runs.values())
    standing = {key: result.outcome for key, result in races.items()}
    candidates = []
    for key, result in races.items():
        if result.outcome != UNDECIDED:
            continue
        if max(reached(groups[key], looks)) < current:
            standing[key] = AT_BUDGET
            continue
        runners = live_experiments(result)
        more = max(1, result.needed - current)
        per_round = len(runners), sum(costs.get(experiment, 0.0) for experiment in runners)
        candidates.append((more * per_round[1], more * per_round[0], str(key), key, runners, more, per_round))
    chosen = []
    for seconds, runs, _, key, runners, more, (round_runs, round_seconds) in sorted(candidates):
        if runs_spent + runs <= budget.runs and seconds_spent + seconds <= budget.seconds:
            runs_spent, seconds_spent = runs_spent + runs, seconds_spent + seconds
            standing[key] = f"racing: {len(runners)} live, about {more} more rounds to decide"
        elif runs_spent + round_runs <= budget.runs and seconds_spent + round_seconds <= budget.seconds:
            # Its projected cost does not fit, but a round does: the projection is noisy, and a round may decide it.
            runs_spent, seconds_spent = runs_spent + round_runs, seconds_spent + round_seconds
            standing[key] = f"racing on what is left of the budget: {len(runners)} live, about {more} more rounds"
        else:
            standing[key] = f"{AT_BUDGET}: about {more} more rounds, {seconds / 60:.1f} min of runs, would decide it"
            continue
        chosen += runners
    return sorted(chosen), standing
