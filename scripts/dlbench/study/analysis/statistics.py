"""The statistics of throughputs and of the comparisons between experiments, as small pure functions.

Throughputs are positive and their spread multiplicative, so every centre is a geometric mean and every ratio lives
on the log scale, back-transformed only for printing (never a zero or negative bound).

- A comparison's log ratio is paired by round where both experiments have ok runs in at least MIN_REPEATS rounds in
  common: runs of one round ran side by side in time, so the mean of the per-round log differences, with Student's t
  on pairs - 1 degrees of freedom, leaves the drift between rounds out of the noise. Otherwise it is unpaired:
  Welch's t on the two samples of log throughput. Fewer than MIN_REPEATS ok runs on either side: not tested.
- The aggregation pools a paired log ratio's variance over the study's (dlbench.study.analysis.pooling, limma's
  moderated t) before its tests: the LogRatio then carries the moderated error and freedom, and these functions test it
  alike.
- Difference: the two-sided t-test of a log ratio of 0.
- Equivalence: two one-sided tests (TOST) against symmetric bounds on the log scale, -log(1 + margin) and
  log(1 + margin), i.e. a ratio within [1 / (1 + margin), 1 + margin]; its p is the larger of the two one-sided p's.
- The multiple-testing family is one comparison group (the experiments that differ only in stack and variant:
  the question a reader asks is per group). Its experiments are compared with a baseline chosen from the same data
  (the fastest observed), which is the fastest partly by chance: among equal experiments the one that measured
  fastest lies furthest from the rest, so Holm over only its k - 1 comparisons claims a difference more often than
  ALPHA. The family is therefore every pair the group could compare, k (k - 1) / 2 for k tested experiments, of which
  the k - 1 against the baseline are tested: Holm's steps start at ALPHA / (k (k - 1) / 2) and go down one per
  rejection (holm_levels' `hypotheses`). That holds the error at ALPHA whichever pairs the data picked: the first
  true hypothesis rejected at step j follows j - 1 rejected false ones, so at most as many hypotheses as are false
  in the whole family, and it was tested at ALPHA over at least the number that are true (Holm's own argument, which
  never needed the untested pairs' p's). A family whose pairs are fixed in advance (a framework's consecutive
  releases) is just its comparisons. Holm runs over the difference tests and, separately, over the equivalence
  tests. A true ratio is 1, beyond the margin, or neither, so a comparison can only err one way, and each family
  holds its error rate at ALPHA.
- Verdict: "faster" or "slower" where the Holm-adjusted difference p is below ALPHA (a proven difference keeps that
  name when it is also within the margin: the ratio beside it tells its size); "equivalent within 5 %" (the margin)
  where the Holm-adjusted equivalence p is below ALPHA; otherwise "inconclusive", with the number of repeats that
  would decide it at the observed ratio and spread.
- The interval printed beside a verdict is at the level its tests were run at, so that it never contradicts the
  verdict (an unadjusted 95% interval would: it can exclude 1 where Holm's adjustment decides nothing). Holm tests
  the family's hypotheses one step at a time, the smallest p first at ALPHA / m, the next at ALPHA / (m - 1), and
  stops at the first it cannot reject: a rejected hypothesis was tested at its own step's level, the others at the
  level of the step where Holm stopped (holm_levels). The interval of a difference is the two-sided one at that
  level; the interval of an equivalence is the two one-sided tests' interval widened to take in 1 (Hsu, Hwang, Liu &
  Ruberg 1994: [min(0, low), max(0, high)] on the log scale, a 1 - level interval that lies inside the margin exactly
  when the tests prove equivalence); an inconclusive comparison prints the hull of both. So a reader can read the
  verdict off the interval: above 1, faster; below 1, slower; containing 1 inside the margin, equivalent;
  containing 1 and reaching past the margin, inconclusive. `ratio_confidence` is the interval's confidence (for a
  hull, the larger of the two it covers).

Student's t comes from dlbench.study.analysis.student (plain Python): the planner of repeats, which runs in Snakemake's
driver without SciPy, decides with these same functions.
"""

import math
from typing import NamedTuple

import numpy as np

from dlbench.study.analysis.student import t_critical, t_tail

MIN_REPEATS = 3  # for an interval, and for a comparison's tests
ALPHA = 0.05
POWER = 0.8  # of the planned repeats: the chance that they decide, if the ratio and its spread stay as observed
MOST_REPEATS = 100  # beyond this, repeats_to_decide says none practical would
PAIRED, UNPAIRED = "paired by round", "unpaired (Welch)"
FASTER, SLOWER, INCONCLUSIVE = "faster", "slower", "inconclusive"
NOT_TESTED = f"not tested: fewer than {MIN_REPEATS} ok repeats"


class LogRatio(NamedTuple):
    """A ratio of two experiments' throughputs on the log scale, with what its tests need."""

    estimate: float  # the log of the ratio of geometric means (paired: the mean per-round log difference)
    error: float  # its standard error
    freedom: float  # degrees of freedom of its t distribution
    spread: float  # the standard deviation of one round's log ratio: the error there would be with one round
    rounds: int  # the rounds it rests on: pairs, or unpaired the larger side's runs


def log_interval(values):
    """(geometric mean, low, high) of positive values: Student's t on their logarithms, back-transformed (no
    interval, NaN, below MIN_REPEATS values)."""
    logs = np.log(np.asarray(values, dtype=float))
    if len(logs) == 0:
        return np.nan, np.nan, np.nan
    centre = np.exp(logs.mean())
    if len(logs) < MIN_REPEATS:
        return centre, np.nan, np.nan
    half = t_critical(ALPHA / 2, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs))
    return centre, np.exp(logs.mean() - half), np.exp(logs.mean() + half)


def mean_interval(values):
    """(mean, low, high) of non-negative values: Student's t on the values themselves, for a quantity added up and
    priced as it is (a time to target, its cost), whose mean, not geometric mean, is reported; the low bound floored
    at 0, which only a time's lumpy repeats would cross and which keeps the coverage (no interval, NaN, below
    MIN_REPEATS values)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return np.nan, np.nan, np.nan
    if len(values) < MIN_REPEATS:
        return values.mean(), np.nan, np.nan
    half = t_critical(ALPHA / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return values.mean(), max(0.0, values.mean() - half), values.mean() + half


def paired_log_ratio(values, reference):
    """The log ratio of two experiments' throughputs aligned by round (element i of each ran in the same round)."""
    differences = np.log(np.asarray(values, dtype=float)) - np.log(np.asarray(reference, dtype=float))
    spread = differences.std(ddof=1)
    return LogRatio(
        differences.mean(), spread / np.sqrt(len(differences)), len(differences) - 1, spread, len(differences)
    )


def welch_log_ratio(values, reference):
    """The log ratio of two independent samples of throughputs: Welch's standard error and Welch-Satterthwaite
    degrees of freedom (without any noise, the smaller side's runs - 1)."""
    a, b = np.log(np.asarray(values, dtype=float)), np.log(np.asarray(reference, dtype=float))
    variance_a, variance_b = a.var(ddof=1), b.var(ddof=1)
    share_a, share_b = variance_a / len(a), variance_b / len(b)
    error = np.sqrt(share_a + share_b)
    if error > 0:
        freedom = (share_a + share_b) ** 2 / (share_a**2 / (len(a) - 1) + share_b**2 / (len(b) - 1))
    else:
        freedom = min(len(a), len(b)) - 1
    return LogRatio(a.mean() - b.mean(), error, freedom, np.sqrt(variance_a + variance_b), max(len(a), len(b)))


def compared(values, reference):
    """(method, pairs, LogRatio or None) of one experiment's ok throughputs against another's, each a mapping
    round -> throughput: paired by round with MIN_REPEATS rounds in common, else unpaired with MIN_REPEATS runs on
    each side, else none (not tested)."""
    common = sorted(set(values) & set(reference))
    if len(common) >= MIN_REPEATS:
        paired = paired_log_ratio([values[key] for key in common], [reference[key] for key in common])
        return PAIRED, len(common), paired
    if min(len(values), len(reference)) >= MIN_REPEATS:
        return UNPAIRED, 0, welch_log_ratio(list(values.values()), list(reference.values()))
    return None, 0, None


def one_sided_reach(log_ratio, tail):
    """How far the log ratio's interval reaches either side of its estimate where each side's tail is `tail`."""
    return 0.0 if log_ratio.error == 0 else t_critical(tail, log_ratio.freedom) * log_ratio.error


def half_width(log_ratio):
    """Half the width of the ratio's unadjusted 95% interval, on the log scale."""
    return one_sided_reach(log_ratio, ALPHA / 2)


def interval(log_ratio):
    """(ratio, low, high): the ratio and its unadjusted 95% interval, back-transformed (for a ratio no verdict is
    read from; a verdict's interval is verdict_interval's)."""
    half = half_width(log_ratio)
    return math.exp(log_ratio.estimate), math.exp(log_ratio.estimate - half), math.exp(log_ratio.estimate + half)


def difference_interval(log_ratio, level):
    """(low, high) on the log scale: the two-sided interval of the difference test run at `level`; it excludes 0
    exactly when that test rejects no difference."""
    reach = one_sided_reach(log_ratio, level / 2)
    return log_ratio.estimate - reach, log_ratio.estimate + reach


def equivalence_interval(log_ratio, level):
    """(low, high) on the log scale: the interval of the two one-sided tests run at `level` (the 1 - 2 level one)
    widened to take in 0, a 1 - level interval (Hsu, Hwang, Liu & Ruberg 1994) that lies inside the equivalence
    bounds exactly when those tests prove equivalence."""
    reach = one_sided_reach(log_ratio, level)
    return min(0.0, log_ratio.estimate - reach), max(0.0, log_ratio.estimate + reach)


def verdict_interval(log_ratio, called, difference_level, equivalence_level):
    """(low, high, confidence) of the ratio, back-transformed, at the levels its verdict was tested at: a proven
    difference's two-sided interval (excludes 1), a proven equivalence's interval (contains 1, inside the margin),
    else the hull of both (contains 1, reaches past the margin)."""
    if called in (FASTER, SLOWER):
        (low, high), level = difference_interval(log_ratio, difference_level), difference_level
    elif is_equivalence(called):
        (low, high), level = equivalence_interval(log_ratio, equivalence_level), equivalence_level
    else:
        (low_d, high_d), (low_e, high_e) = (
            difference_interval(log_ratio, difference_level),
            equivalence_interval(log_ratio, equivalence_level),
        )
        low, high, level = min(low_d, low_e), max(high_d, high_e), min(difference_level, equivalence_level)
    return math.exp(low), math.exp(high), 1 - level


def difference_p(log_ratio):
    """The two-sided p of the t-test of no difference; without noise, 1 for equal sides and 0 for any other."""
    if log_ratio.error == 0:
        return float(log_ratio.estimate == 0)
    return 2 * t_tail(abs(log_ratio.estimate) / log_ratio.error, log_ratio.freedom)


def equivalence_bound(margin):
    """The equivalence bound on the log scale: a ratio within [1 / (1 + margin), 1 + margin] is equivalent."""
    return math.log1p(margin)


def equivalence_p(log_ratio, margin):
    """The p of the two one-sided tests (TOST) that the log ratio lies within +-equivalence_bound(margin): the larger
    of the p's against "at or below the lower bound" and against "at or above the upper bound". Without noise: 0
    inside the bounds, else 1."""
    bound = equivalence_bound(margin)
    if log_ratio.error == 0:
        return float(abs(log_ratio.estimate) >= bound)
    above_lower = t_tail((log_ratio.estimate + bound) / log_ratio.error, log_ratio.freedom)
    below_upper = t_tail((bound - log_ratio.estimate) / log_ratio.error, log_ratio.freedom)
    return max(above_lower, below_upper)


def family_size(p_values, hypotheses):
    """The hypotheses of the family the tested p-values (not NaN) were drawn from: `hypotheses` where given (it
    counts untested ones too: never fewer than the tested), else the tested alone."""
    tested = int(np.count_nonzero(~np.isnan(np.asarray(p_values, dtype=float))))
    if hypotheses is None:
        return tested
    if hypotheses < tested:
        raise ValueError(f"a family of {hypotheses} hypotheses cannot hold {tested} tested ones")
    return hypotheses


def holm(p_values, hypotheses=None):
    """Holm's step-down adjustment of one family's p-values (NaN, a comparison not tested, stays NaN and is not
    counted) in a family of `hypotheses` (family_size: untested ones count, their p's taken as 1)."""
    p_values = np.asarray(p_values, dtype=float)
    adjusted = np.full(p_values.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    order = tested[np.argsort(p_values[tested], kind="stable")]
    size = family_size(p_values, hypotheses)
    steps = p_values[order] * np.arange(size, size - len(order), -1)
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted


def holm_levels(p_values, alpha=ALPHA, hypotheses=None):
    """The level at which Holm's step-down procedure tested each p-value of one family of `hypotheses`
    (family_size; NaN, a comparison not tested, gets NaN): the smallest at alpha / m, the next at alpha / (m - 1),
    ..., each rejected hypothesis at its own step's level, and every one from the first that is not rejected on at
    that step's level (the procedure stops there). A p is below its level exactly when its Holm-adjusted p is below
    alpha."""
    p_values = np.asarray(p_values, dtype=float)
    levels = np.full(p_values.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    order = tested[np.argsort(p_values[tested], kind="stable")]
    size = family_size(p_values, hypotheses)
    for step, position in enumerate(order):
        level = alpha / (size - step)
        if not p_values[position] < level:
            levels[order[step:]] = level
            break
        levels[position] = level
    return levels


def freedom_after(log_ratio, rounds):
    """The degrees of freedom the comparison's t would have after `rounds` rounds: those it has plus one per round
    added (exact for pairs; a pooled comparison keeps the prior's). Unpaired, a round adds a run to each side, and
    Welch's freedom, never below the smaller side's runs - 1, grows by at least one a round: `rounds` counts the
    larger side's runs, so rounds - 1 would overstate it where the sides differ."""
    return max(1, log_ratio.freedom + rounds - log_ratio.rounds)


def decides_after(log_ratio, margin, rounds, alpha, power):
    """Whether `rounds` rounds decide with probability `power`, if the log ratio and its spread stay as observed: a
    t-based sample size (normal-approximation form, t quantiles on freedom_after) of the difference test or of the
    equivalence test, whichever is nearer."""
    error, freedom = log_ratio.spread / math.sqrt(rounds), freedom_after(log_ratio, rounds)
    beyond_chance = t_critical(1 - power, freedom) * error
    distance = abs(log_ratio.estimate)
    differs = distance >= t_critical(alpha / 2, freedom) * error + beyond_chance
    return differs or equivalence_bound(margin) - distance >= t_critical(alpha, freedom) * error + beyond_chance


def resolvable_ratio(log_ratio, rounds, alpha=ALPHA, power=POWER):
    """The smallest ratio (a lead, above 1) that `rounds` rounds prove different from 1 at level `alpha` with
    probability `power`, at the observed spread: what the machine's noise lets a study of that size resolve (the
    difference half of decides_after)."""
    freedom = freedom_after(log_ratio, rounds)
    reach = t_critical(alpha / 2, freedom) + t_critical(1 - power, freedom)
    return math.exp(reach * log_ratio.spread / math.sqrt(rounds))


def repeats_to_decide(log_ratio, margin, alpha=ALPHA, power=POWER, most=MOST_REPEATS):
    """The fewest rounds, more than it rests on, that would decide the comparison at level `alpha` with probability
    `power` if its ratio and spread stay as observed; None where no count up to `most` would: a ratio midway
    between 1 and the margin with a wide spread, too near 1 to prove a difference and too near the margin to prove
    equivalence."""
    return fewest_rounds(
        log_ratio.rounds + 1, most, lambda rounds: decides_after(log_ratio, margin, rounds, alpha, power)
    )


def fewest_rounds(low, high, decides):
    """The fewest rounds from `low` to `high` for which `decides(rounds)` holds, None where not even `high` does:
    deciding only gets easier with more rounds, so a bisection finds the first count that does."""
    if low > high or not decides(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if decides(middle):
            high = middle
        else:
            low = middle + 1
    return low


EQUIVALENCE_VERDICT = "equivalent within"  # then the margin: equivalent()


def equivalent(margin):
    """The verdict of a proven equivalence, naming its margin."""
    return f"{EQUIVALENCE_VERDICT} {margin * 100:g} %"


def is_equivalence(verdict):
    """Whether a verdict is a proven equivalence, whatever its margin."""
    return verdict.startswith(EQUIVALENCE_VERDICT)


def verdict(log_ratio, p_holm, p_equivalence_holm, margin):
    """faster, slower, equivalent within the margin, inconclusive, or not tested (no log ratio)."""
    if log_ratio is None:
        return NOT_TESTED
    if p_holm < ALPHA:
        return FASTER if log_ratio.estimate > 0 else SLOWER
    if p_equivalence_holm < ALPHA:
        return equivalent(margin)
    return INCONCLUSIVE


def all_pairs(tested):
    """The pairs a group could compare: its `tested` comparisons' experiments and their baseline, two at a time."""
    return (tested + 1) * tested // 2


def decisions(log_ratios, margin, baseline_from_data=True):
    """Per comparison of one family (a comparison group, each against its baseline; None for a comparison not
    tested): its tests, Holm-adjusted within the family, its verdict, the ratio's interval at the levels the verdict
    was tested at (verdict_interval) and, where inconclusive, the repeats that would decide it (at the family's
    Bonferroni level, at which Holm's adjustment decides it whatever the other comparisons give). The family is
    every pair of the group (all_pairs) where the baseline was chosen from the data, else the comparisons alone."""
    p_values = [np.nan if log_ratio is None else difference_p(log_ratio) for log_ratio in log_ratios]
    p_equivalence = [np.nan if log_ratio is None else equivalence_p(log_ratio, margin) for log_ratio in log_ratios]
    tested = sum(log_ratio is not None for log_ratio in log_ratios)
    hypotheses = all_pairs(tested) if baseline_from_data else tested
    rows = []
    for log_ratio, p_value, p_holm, difference_level, p_same, p_same_holm, equivalence_level in zip(
        log_ratios,
        p_values,
        holm(p_values, hypotheses),
        holm_levels(p_values, hypotheses=hypotheses),
        p_equivalence,
        holm(p_equivalence, hypotheses),
        holm_levels(p_equivalence, hypotheses=hypotheses),
    ):
        called = verdict(log_ratio, p_holm, p_same_holm, margin)
        needed = repeats_to_decide(log_ratio, margin, ALPHA / hypotheses) if called == INCONCLUSIVE else None
        resolvable = None if log_ratio is None else resolvable_ratio(log_ratio, log_ratio.rounds, ALPHA / hypotheses)
        untested = (np.nan, np.nan, np.nan)
        low, high, confidence = (
            untested if log_ratio is None else verdict_interval(log_ratio, called, difference_level, equivalence_level)
        )
        rows.append(
            {
                "ratio_low": low,
                "ratio_high": high,
                "ratio_confidence": confidence,
                "p_value": p_value,
                "p_holm": p_holm,
                "p_equivalence": p_same,
                "p_equivalence_holm": p_same_holm,
                "equivalence_margin": margin,
                "verdict": called,
                "repeats_to_decide": needed,
                "resolvable_ratio": resolvable,
            }
        )
    return rows
