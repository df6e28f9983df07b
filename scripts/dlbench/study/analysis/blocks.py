"""Rounds as blocks: each experiment's throughput with the machine's drift between rounds taken out.

A round's runs ran back to back, so a round is a block: log throughput = experiment effect + round effect + noise. A
race gives later rounds only to the experiments still in the running, so an experiment eliminated at round 3 was
measured only in the early rounds and its leader in all of them; where the machine sped up or slowed down between them,
the two experiments' plain geometric means carry that drift, and their ratio with it. Least squares over the group's
incomplete blocks estimates each experiment's effect at the average round (the round effects sum to zero), which every
experiment shares, so that experiments that did not run in the same rounds meet on one footing; it needs each round to
hold an experiment that ran in others, which the race's leader gives. The paired log ratios the race tests with are the
two-experiment case of the same model.

Intervals are Student's t on the residual degrees of freedom (runs - experiments - rounds + 1), none where there are
none left (every experiment ran once, or one round). Plain numpy: the planner and the aggregation read it alike.
"""

from typing import NamedTuple

import numpy as np
import pandas as pd

from dlbench.study.analysis.statistics import ALPHA
from dlbench.study.analysis.student import t_critical
from dlbench.study.analysis.tables import GROUP

ROUNDS_COLUMNS = ["machine", "round", "speed", "speed_low", "speed_high", "experiments", "drift"]


class Effect(NamedTuple):
    centre: float  # back-transformed: a throughput for an experiment, a factor on it for a round
    low: float
    high: float


class Blocks(NamedTuple):
    experiments: dict  # experiment -> Effect: its throughput at the average round
    rounds: dict  # round -> Effect: the machine's speed in that round, as a factor on the average round's
    freedom: int  # the residual degrees of freedom
    round_share: float  # the share of the runs' variance about their experiments' means the rounds account for


def design(throughputs):
    """(experiments, rounds, design matrix, log throughputs) of experiment -> {round: throughput}: one column per
    experiment, then the rounds but the last in deviation coding (the last is minus their sum, so they sum to 0)."""
    experiments = sorted(throughputs)
    rounds = sorted({round_ for by_round in throughputs.values() for round_ in by_round})
    rows, logs = [], []
    for index, experiment in enumerate(experiments):
        for round_, value in sorted(throughputs[experiment].items()):
            row = np.zeros(len(experiments) + len(rounds) - 1)
            row[index] = 1.0
            position = rounds.index(round_)
            if position < len(rounds) - 1:
                row[len(experiments) + position] = 1.0
            else:
                row[len(experiments) :] = -1.0
            rows.append(row)
            logs.append(np.log(value))
    return experiments, rounds, np.array(rows), np.array(logs)


def interval(estimate, variance, critical):
    half = critical * np.sqrt(max(variance, 0.0))
    return Effect(float(np.exp(estimate)), float(np.exp(estimate - half)), float(np.exp(estimate + half)))


def round_adjusted(throughputs, alpha=ALPHA):
    """The Blocks of one group's ok runs (experiment -> {round: throughput}), intervals at 1 - alpha (NaN without
    residual freedom)."""
    experiments, rounds, matrix, logs = design(throughputs)
    coefficients, *_ = np.linalg.lstsq(matrix, logs, rcond=None)
    freedom = len(logs) - np.linalg.matrix_rank(matrix)  # rank: rounds no experiment shares add no information
    if freedom > 0:
        residual = float(np.sum((logs - matrix @ coefficients) ** 2)) / freedom
        covariance = residual * np.linalg.pinv(matrix.T @ matrix)
        critical = t_critical(alpha / 2, freedom)
    else:
        covariance, critical = np.zeros((matrix.shape[1], matrix.shape[1])), np.nan
    by_experiment = {
        experiment: interval(coefficients[index], covariance[index, index], critical)
        for index, experiment in enumerate(experiments)
    }
    first = len(experiments)
    contrasts = np.vstack([np.eye(len(rounds) - 1), -np.ones(len(rounds) - 1)]) if len(rounds) > 1 else np.zeros((1, 0))
    by_round = {}
    for round_, contrast in zip(rounds, contrasts):
        estimate = float(contrast @ coefficients[first:])
        variance = float(contrast @ covariance[first:, first:] @ contrast)
        by_round[round_] = interval(estimate, variance, critical)
    return Blocks(by_experiment, by_round, freedom, round_share(throughputs, residual if freedom > 0 else np.nan))


def round_share(throughputs, residual):
    """The share of the variance of log throughput about each experiment's mean that the rounds' effects account
    for, corrected for the freedom they use (1 - the residual variance with rounds over the variance without them,
    each on its own degrees of freedom; 0 where rounds explain no more than chance): the machine's drift, apart from
    the processes' own noise. NaN without freedom on either side."""
    logs = [np.log(list(by_round.values())) for by_round in throughputs.values()]
    within = sum(float(np.sum((values - values.mean()) ** 2)) for values in logs)
    freedom = sum(len(values) for values in logs) - len(logs)
    if freedom <= 0 or within == 0 or np.isnan(residual):
        return np.nan
    return float(max(0.0, 1 - residual / (within / freedom)))


def adjusted(stem):
    """The summary columns of a throughput at the average round: centre, low, high."""
    return [f"{stem}_adjusted", f"{stem}_adjusted_low", f"{stem}_adjusted_high"]


STEMS = ("train_images_per_s", "train_tokens_per_s")  # a language model's tokens as well as its sequences


def adjusted_table(runs):
    """Per experiment and machine, its steady throughput (images, and a language model's tokens) at the average round
    of its comparison group (adjusted(stem): round_adjusted's centre and 95 % interval), and its group's
    `round_share` (Blocks.round_share), from the runs table's final ok tries, grouped as the race groups them."""
    final = runs[runs["final_try"].astype(bool) & (runs["status"] == "ok")]
    table = pd.DataFrame(columns=["experiment_id", "machine"])
    for stem in (stem for stem in STEMS if stem in final):
        rows = []
        for key, part in final[final[stem].notna()].groupby(GROUP, dropna=False, sort=True):
            by_experiment = {}
            for experiment, rep, value in part[["experiment_id", "rep", stem]].itertuples(index=False):
                by_experiment.setdefault(experiment, {})[int(rep)] = float(value)
            machine, blocks = key[GROUP.index("machine")], round_adjusted(by_experiment)
            rows += [
                [experiment, machine, *effect, blocks.round_share] for experiment, effect in blocks.experiments.items()
            ]
        columns = [*adjusted(stem), "round_share" if stem == STEMS[0] else f"{stem}_round_share"]
        found = pd.DataFrame(rows, columns=["experiment_id", "machine", *columns]).astype(dict.fromkeys(columns, float))
        table = table.merge(found, on=["experiment_id", "machine"], how="outer")
    return table.drop(columns=[f"{stem}_round_share" for stem in STEMS[1:]], errors="ignore")


def side_by_side(summary):
    """Each experiment's throughput where experiments meet side by side: at the average round of its group where the
    summary has it (adjusted_table), else its geometric mean (a summary from before that column)."""
    centre = adjusted("train_images_per_s")[0]
    if centre not in summary:
        return summary["train_images_per_s_gmean"]
    return summary[centre].fillna(summary["train_images_per_s_gmean"])


def rounds_table(runs):
    """Per machine and round, the machine's speed in that round as a factor on its average round (ROUNDS_COLUMNS:
    round_adjusted over every experiment of the machine, each its own effect, from the final ok tries, with its 95 %
    interval), the experiments that ran it, and the machine's `drift`: its fastest round's speed over its slowest's.
    A machine with one round has no drift to show (none)."""
    final = runs[runs["final_try"].astype(bool) & (runs["status"] == "ok") & runs["train_images_per_s"].notna()]
    rows = []
    for machine, part in final.groupby("machine", sort=True):
        by_experiment = {}
        for experiment, rep, value in part[["experiment_id", "rep", "train_images_per_s"]].itertuples(index=False):
            by_experiment.setdefault(experiment, {})[int(rep)] = float(value)
        counts = part.groupby("rep")["experiment_id"].nunique()
        if len(counts) < 2:
            continue
        effects = round_adjusted(by_experiment).rounds
        drift = max(effect.centre for effect in effects.values()) / min(effect.centre for effect in effects.values())
        rows += [
            dict(zip(ROUNDS_COLUMNS, [machine, round_, *effect, int(counts[round_]), drift]))
            for round_, effect in sorted(effects.items())
        ]
    return pd.DataFrame(rows, columns=ROUNDS_COLUMNS)
