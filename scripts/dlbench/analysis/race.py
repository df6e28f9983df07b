"""The statistics of racing: a group's experiments run in rounds, and at looks planned in advance each live rival of
the group's leader leaves once proven slower (eliminated) or proven equivalent within the margin (retired); the group
is decided when only its leader is left. Not wired into the workflow: this is its decision rule, which
benchmarks/race_simulation.py holds against today's fixed rounds.

- Looks are planned before the first round: the rounds after which the group is looked at, the last the maximum.
  Alpha is spent across them with the O'Brien-Fleming-type Lan-DeMets function alpha(t) = 2 - 2 Phi(z_{1-alpha/2} /
  sqrt(t)), t the share of the maximum rounds run: look k may spend alpha(t_k) - alpha(t_{k-1}), little at the first
  looks (where few rounds would make a claim cheap) and most at the last. The shares add up to alpha(1) = alpha at
  most, so spending each at its look, with a union bound over looks, holds any false claim to alpha however the race
  stops. (A group-sequential boundary that uses the correlation between looks would spend less conservatively; the
  union bound needs no assumption on it.)
- At a look each live rival is compared with the group's leader, the live experiment with the highest mean log
  throughput, paired by round (dlbench.analysis.statistics.paired_log_ratio: t on rounds - 1 degrees of freedom).
  The leader can change between looks, so a look's alpha is shared among every pair the group could compare:
  k (k - 1) / 2 for k experiments. Each pair can be wrong one way only (its true ratio is 1, beyond the margin, or
  neither), so its difference test and its equivalence test (two one-sided tests) both run at that share.
- Pooled variance: given a prior fitted over the study's paired comparisons (dlbench.analysis.pooling, limma's
  moderated t), each pair's variance is shrunk toward it and its t runs on the prior's degrees of freedom and its own.
- Eliminated: the two-sided interval at the pair's level lies wholly below 1 (slower than the leader). Retired: the
  two one-sided tests prove the ratio within [1 / (1 + margin), 1 + margin]. An eliminated or retired rival runs no
  more rounds; the leader and the live rivals do.
- Outcome: "alone" (one experiment: no race), "decided" (one live experiment left: the leader, with the others
  eliminated or retired), or "undecided" after the last look.
"""

from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from dlbench.analysis.pooling import pooled
from dlbench.analysis.statistics import (
    ALPHA,
    difference_interval,
    equivalence_p,
    paired_log_ratio,
)

LIVE, ELIMINATED, RETIRED = "live", "eliminated", "retired"
ALONE, DECIDED, UNDECIDED = "alone", "decided", "undecided"


class Look(NamedTuple):
    rounds: int  # the rounds run when the group is looked at
    alpha: float  # the share of alpha this look spends


class Race(NamedTuple):
    outcome: str  # alone, decided or undecided
    leader: str  # the leader at the last look the group had
    states: dict  # experiment -> (live, eliminated or retired; the rounds it ran)


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
    return max(sorted(live), key=lambda experiment: mean_log(groups[experiment], rounds))


def judged(rival, leader, rounds, level, margin, prior=None):
    """A live rival's state after a look: eliminated where proven slower than the leader at `level`, retired where
    proven within the margin, else still live; its variance pooled toward the prior where one is given."""
    common = sorted(key for key in set(rival) & set(leader) if key <= rounds)
    log_ratio = paired_log_ratio([rival[key] for key in common], [leader[key] for key in common])
    if prior is not None:
        log_ratio = pooled(log_ratio, prior)
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
        return Race(ALONE, experiments[0], {experiments[0]: (LIVE, looks[0].rounds)})
    pairs = len(experiments) * (len(experiments) - 1) // 2
    states = {experiment: (LIVE, looks[0].rounds) for experiment in experiments}
    leader = experiments[0]
    for look in looks:
        live = [experiment for experiment, (state, _) in states.items() if state == LIVE]
        for experiment in live:
            states[experiment] = (LIVE, look.rounds)
        leader = leader_of(groups, live, look.rounds)
        for rival in live:
            if rival != leader:
                state = judged(groups[rival], groups[leader], look.rounds, look.alpha / pairs, margin, prior)
                states[rival] = (state, look.rounds)
        if sum(state == LIVE for state, _ in states.values()) == 1:
            return Race(DECIDED, leader, states)
    return Race(UNDECIDED, leader, states)


def rounds_spent(result):
    """The runs a race took: each experiment's rounds, up to the look at which it left or the group stopped."""
    return sum(rounds for _, rounds in result.states.values())
