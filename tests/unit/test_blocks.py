"""Rounds as blocks (dlbench/study/analysis/blocks.py): a planted drift between rounds is recovered and taken out of
the throughputs of experiments that ran in different rounds."""

import math

import numpy as np
import pandas as pd
import pytest
from dlbench.study.analysis.blocks import adjusted_table, round_adjusted, rounds_table
from dlbench.study.analysis.tables import GROUP


def raced_runs(seed, speed_up=1.25, noise=0.03):
    """A race's incomplete blocks: the leader and a live rival run 8 rounds, a rival eliminated after 3 only the
    first; the machine runs 25 % faster from round 4 on."""
    generator = np.random.default_rng(seed)
    centres, last = {"leader": 200.0, "rival": 180.0, "eliminated": 100.0}, {"leader": 8, "rival": 8, "eliminated": 3}
    return {
        name: {
            round_: centre * (speed_up if round_ >= 4 else 1.0) * math.exp(generator.normal(0, noise))
            for round_ in range(1, last[name] + 1)
        }
        for name, centre in centres.items()
    }


def test_a_planted_drift_is_recovered_and_the_eliminated_experiment_meets_the_leader_at_the_average_round():
    runs = raced_runs(seed=0)
    blocks = round_adjusted(runs)
    assert blocks.freedom == 19 - 3 - 7
    late = np.mean([math.log(blocks.rounds[round_].centre) for round_ in range(4, 9)])
    early = np.mean([math.log(blocks.rounds[round_].centre) for round_ in range(1, 4)])
    assert math.exp(late - early) == pytest.approx(1.25, rel=0.05)  # the machine's speed-up, measured
    assert all(effect.low < effect.centre < effect.high for effect in blocks.rounds.values())
    # the plain geometric means set the early-only experiment against a leader measured mostly fast: biased
    plain = {name: math.exp(np.mean(np.log(list(by_round.values())))) for name, by_round in runs.items()}
    assert plain["eliminated"] / plain["leader"] < 0.5 * 0.9
    adjusted = {name: effect.centre for name, effect in blocks.experiments.items()}
    assert adjusted["eliminated"] / adjusted["leader"] == pytest.approx(0.5, rel=0.05)
    true_at_average_round = 100.0 * math.exp((3 * 0 + 5 * math.log(1.25)) / 8)
    effect = blocks.experiments["eliminated"]
    assert effect.low < true_at_average_round < effect.high


def test_the_planted_truth_lies_in_the_interval_about_as_often_as_its_confidence_says():
    true_at_average_round = 100.0 * math.exp(5 * math.log(1.25) / 8)
    covered = sum(
        round_adjusted(raced_runs(seed)).experiments["eliminated"].low
        < true_at_average_round
        < round_adjusted(raced_runs(seed)).experiments["eliminated"].high
        for seed in range(200)
    )
    assert covered / 200 >= 0.9


def test_without_residual_freedom_there_is_no_interval():
    blocks = round_adjusted({"a": {1: 100.0}, "b": {1: 50.0}})
    assert blocks.freedom == 0 and blocks.experiments["a"].centre == pytest.approx(100.0)
    assert math.isnan(blocks.experiments["a"].low)


def test_the_rounds_table_gives_each_machines_speed_by_round_and_its_drift():
    rows = [
        dict(machine="cpu", experiment_id=name, rep=round_, status="ok", final_try=True, train_images_per_s=value)
        for name, by_round in raced_runs(seed=1).items()
        for round_, value in by_round.items()
    ]
    rows.append(dict(rows[0], status="contended", final_try=False, train_images_per_s=1.0))  # a try run again
    rows.append(dict(machine="other", experiment_id="x", rep=1, status="ok", final_try=True, train_images_per_s=5.0))
    table = rounds_table(pd.DataFrame(rows))
    assert list(table["machine"].unique()) == ["cpu"]  # one round on "other": no drift to show
    assert list(table["round"]) == list(range(1, 9)) and list(table["experiments"]) == [3, 3, 3, 2, 2, 2, 2, 2]
    assert table["drift"].iloc[0] == pytest.approx(1.25, rel=0.1)
    assert (table["speed_low"] < table["speed"]).all() and (table["speed"] < table["speed_high"]).all()


def test_the_summary_columns_hold_each_experiment_at_its_groups_average_round_in_images_and_tokens():
    base = dict(zip(GROUP, ["cpu", "tokens", "gpt-tiny", "cpu", 64, "adam", 0.001, 3, "device", 1, "weak"]))
    rows = [
        dict(base, experiment_id=name, rep=round_, status="ok", final_try=True, train_images_per_s=value)
        | {"train_tokens_per_s": value * 64}
        for name, by_round in raced_runs(seed=2).items()
        for round_, value in by_round.items()
    ]
    table = adjusted_table(pd.DataFrame(rows)).set_index("experiment_id")
    centre = table["train_images_per_s_adjusted"]
    assert centre["eliminated"] / centre["leader"] == pytest.approx(0.5, rel=0.05)
    assert (table["train_tokens_per_s_adjusted"] / centre).to_numpy() == pytest.approx(64.0)
    assert (table["train_images_per_s_adjusted_low"] < centre).all()


def test_the_rounds_share_is_near_zero_without_drift_and_large_with_it():
    without = [round_adjusted(raced_runs(seed, speed_up=1.0)).round_share for seed in range(100)]
    assert np.median(without) < 0.05  # clipped at 0: about half the groups show none
    assert round_adjusted(raced_runs(seed=3, speed_up=1.25)).round_share > 0.7
