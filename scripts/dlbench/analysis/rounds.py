"""The planner of adaptive repeats: after a round, which experiments need one more.

Repeats run in rounds (round r runs repeat r of every experiment of a group before any r + 1). Every group runs at
least `minimum` rounds. After that, each comparison (an experiment against its group's baseline, as the aggregation
makes it) is finished when its verdict decides (faster, slower or equivalent, by dlbench.analysis.statistics, the
functions the aggregation uses) or when its ratio's 95% interval is within +-half_width on the log scale (as precise
as asked for: more rounds would only resolve a difference smaller than that). Both experiments of an unfinished
comparison get one more round, until `maximum` rounds. An experiment without any ok run is compared with nothing (its
failure is its result), so after the minimum it gets no more rounds.

Plain Python and NumPy only (Student's t included): Snakemake's driver, which has no SciPy, imports it.
"""

import math

import numpy as np

from dlbench.analysis.statistics import INCONCLUSIVE, MIN_REPEATS, NOT_TESTED, compared, decisions, half_width


def ok_runs(runs):
    """round -> throughput of the runs that ended ok (a run that did not is None or NaN there)."""
    return {key: value for key, value in runs.items() if value is not None and math.isfinite(value)}


def fastest(throughputs, candidates=()):
    """The baseline, as the aggregation picks it: the fastest (geometric mean) of the candidates that have ok runs
    (the config's comparison_baseline stack's experiments), else of the whole group; among those with enough ok
    runs to be tested where there are any."""
    present = [experiment for experiment in candidates if experiment in throughputs] or list(throughputs)
    present = [experiment for experiment in present if len(throughputs[experiment]) >= MIN_REPEATS] or present
    return max(present, key=lambda experiment: np.mean(np.log(list(throughputs[experiment].values()))))


def unfinished(log_ratio, called, target):
    """Whether a comparison needs more rounds: undecided and its interval wider than the target (log scale)."""
    if called not in (INCONCLUSIVE, NOT_TESTED):
        return False
    return log_ratio is None or half_width(log_ratio) > math.log1p(target)


def group_needs(runs, minimum, maximum, target, margin, candidates=()):
    """The experiments of one group (experiment -> {round: throughput, None where the run was not ok}) that need one
    more round."""
    rounds = max((max(by_round, default=0) for by_round in runs.values()), default=0)
    if rounds >= maximum:
        return set()
    if rounds < minimum:
        return set(runs)
    throughputs = {experiment: ok for experiment, by_round in runs.items() if (ok := ok_runs(by_round))}
    if len(throughputs) < 2:
        return set()
    baseline = fastest(throughputs, candidates)
    others = sorted(set(throughputs) - {baseline})
    log_ratios = [compared(throughputs[experiment], throughputs[baseline])[2] for experiment in others]
    needed = {
        experiment
        for experiment, log_ratio, outcome in zip(others, log_ratios, decisions(log_ratios, margin))
        if unfinished(log_ratio, outcome["verdict"], target)
    }
    return needed | {baseline} if needed else needed


def experiments_needing_a_round(groups, minimum, maximum, half_width_target, margin, baselines=None):
    """The sorted ids of the experiments that need one more round. groups: group key -> {experiment id: {round:
    throughput, None where the run was not ok}}; baselines: group key -> the ids of its experiments on the config's
    comparison_baseline stack (where it has that stack); half_width_target: relative, 0.05 for an interval within
    +-5 % on the log scale; margin: the equivalence margin."""
    baselines = baselines or {}
    needed = set()
    for key, runs in groups.items():
        needed |= group_needs(runs, minimum, maximum, half_width_target, margin, baselines.get(key, ()))
    return sorted(needed)
