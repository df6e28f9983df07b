"""The statistics of racing (dlbench/study/analysis/race.py): alpha spent across planned looks, elimination of a rival
proven slower, retirement of one proven equivalent, a group of one alone, and the false claims of a race among equal
experiments held to alpha."""

import numpy as np
import pandas as pd
import pytest
from dlbench.study.analysis.race import (
    ALONE,
    DECIDED,
    ELIMINATED,
    LIVE,
    RETIRED,
    UNDECIDED,
    Budget,
    first_look_prior,
    noise_source,
    plan_next,
    planned_looks,
    race,
    race_groups,
    race_study,
    reached,
    rounds_spent,
    schedule,
    spent,
)
from dlbench.study.analysis.tables import GROUP

MARGIN = 0.05
LOOKS = planned_looks([3, 5, 8])


def group(centres, noise, seed, rounds=8):
    """experiment -> {round: throughput}: each experiment's throughput times log-normal noise per run."""
    generator = np.random.default_rng(seed)
    return {
        name: {round_: centre * float(np.exp(generator.normal(0, noise))) for round_ in range(1, rounds + 1)}
        for name, centre in centres.items()
    }


@pytest.mark.parametrize("rounds", [[3, 5, 8], [2, 3], [4], [3, 4, 5, 6, 7, 8, 9, 10, 20], [5, 50]])
def test_the_alpha_spent_never_exceeds_alpha_across_looks(rounds):
    looks = planned_looks(rounds)
    assert all(look.alpha > 0 for look in looks)
    assert np.cumsum([look.alpha for look in looks]) == pytest.approx(
        [spent(look.rounds / rounds[-1]) for look in looks]
    )
    assert sum(look.alpha for look in looks) <= 0.05 + 1e-12


def test_obrien_fleming_spends_little_early_and_most_at_the_last_look():
    assert [round(look.alpha, 4) for look in LOOKS] == [0.0014, 0.0118, 0.0368]  # as gsDesign's sfLDOF gives
    assert spent(0) == 0 and spent(1) == pytest.approx(0.05)


@pytest.mark.parametrize("rounds", [[3, 3, 8], [8, 5], [1, 3]])
def test_looks_out_of_order_or_before_two_rounds_are_refused(rounds):
    with pytest.raises(ValueError, match="looks"):
        planned_looks(rounds)


def test_a_clearly_slower_rival_is_eliminated_at_the_first_look():
    result = race(group({"fast": 200.0, "slow": 100.0}, 0.02, seed=1), LOOKS, MARGIN)
    assert (result.outcome, result.leader) == (DECIDED, "fast")
    assert result.states == {"fast": (LIVE, 3), "slow": (ELIMINATED, 3)}
    assert rounds_spent(result) == 6


def test_a_rival_proven_within_the_margin_is_retired_and_the_rest_race_on():
    centres = {"a": 100.0, "b": 99.8, "c": 80.0}
    result = race(group(centres, 0.002, seed=2), LOOKS, MARGIN)
    assert result.outcome == DECIDED and result.states["c"][0] == ELIMINATED
    assert {result.states["a"][0], result.states["b"][0]} == {LIVE, RETIRED}


def test_a_group_of_one_is_alone_and_a_close_noisy_one_stays_undecided_to_the_maximum():
    assert race(group({"only": 100.0}, 0.1, seed=3), LOOKS, MARGIN).outcome == ALONE
    result = race(group({"a": 100.0, "b": 93.0}, 0.2, seed=4), LOOKS, MARGIN)
    assert result.outcome == UNDECIDED and result.states == {"a": (LIVE, 8), "b": (LIVE, 8)}


def test_among_equal_experiments_a_race_claims_a_difference_in_at_most_alpha_of_groups():
    """A/A: four equal experiments, log-normal noise 0.12 per run (a paired log-ratio SD near 0.17); any elimination
    is a false claim."""
    false_claims = sum(
        any(
            state == ELIMINATED
            for state, _ in race(group(dict.fromkeys("abcd", 100.0), 0.12, seed), LOOKS, MARGIN).states.values()
        )
        for seed in range(400)
    )
    assert false_claims / 400 <= 0.05


def runs_of(centres, noise, seed, rounds):
    """experiment -> {round: throughput} for the given rounds, as the planner reads a group's runs."""
    return group(centres, noise, seed, rounds)


def test_a_group_reaches_the_looks_its_runs_got_to_and_is_raced_through_those_alone():
    looks = schedule(3, [5, 8])
    runs = runs_of({"a": 100.0, "b": 93.0}, 0.2, seed=4, rounds=5)
    assert [look.rounds for look in reached(runs, looks)] == [3, 5]
    races, _ = race_study({"g": runs}, looks, MARGIN, pool=False)
    assert races["g"].outcome == UNDECIDED and races["g"].states == {"a": (LIVE, 5), "b": (LIVE, 5)}
    # a run that did not end ok counts as a round run, but never as a figure; an experiment without any is no rival
    runs["failed"] = {1: None, 2: None, 3: float("nan"), 4: None, 5: None}
    races, _ = race_study({"g": runs}, looks, MARGIN, pool=False)
    assert set(races["g"].states) == {"a", "b"}


def test_the_planner_runs_on_only_the_leader_and_live_rivals_of_undecided_groups():
    looks = schedule(3, [5, 8])
    groups = {
        "clear": runs_of({"fast": 200.0, "slow": 100.0}, 0.02, seed=1, rounds=3),
        "close": runs_of({"a": 100.0, "b": 97.0, "c": 50.0}, 0.1, seed=5, rounds=3),
        "alone": runs_of({"only": 100.0}, 0.1, seed=6, rounds=3),
    }
    chosen, standing = plan_next(groups, {}, 0.0, looks, MARGIN, Budget(float("inf"), float("inf")), pool=False)
    assert standing["clear"] == DECIDED and standing["alone"] == ALONE
    assert standing["close"].startswith("racing")
    assert set(chosen) <= {"a", "b", "c"} and {"a", "b"} <= set(chosen)
    # at the maximum, nothing more
    groups["close"] = runs_of({"a": 100.0, "b": 97.0}, 0.1, seed=5, rounds=8)
    chosen, standing = plan_next(groups, {}, 0.0, looks, MARGIN, Budget(float("inf"), float("inf")), pool=False)
    assert chosen == [] and standing["close"] == UNDECIDED


def test_the_budget_gives_the_next_rounds_to_the_group_nearest_a_decision_and_a_stopped_group_stays_stopped():
    looks = schedule(3, [5, 8])
    groups = {
        "near": runs_of({"a": 100.0, "b": 80.0}, 0.1, seed=9, rounds=3),  # a clear lead, not yet proven
        "far": runs_of({"c": 100.0, "d": 99.0}, 0.2, seed=8, rounds=3),  # a close, noisy pair
    }
    first = sum(len(by_round) for runs in groups.values() for by_round in runs.values())
    budget = Budget(first + 4, float("inf"))  # room for one group's two experiments over two rounds
    chosen, standing = plan_next(groups, {}, 0.0, looks, MARGIN, budget, pool=False)
    assert chosen == ["a", "b"] and standing["far"] == "stopped at the budget"
    # minutes: the same choice, costed at each experiment's run seconds
    costs = {"a": 10.0, "b": 10.0, "c": 10.0, "d": 10.0}
    chosen, _ = plan_next(groups, costs, 120.0, looks, MARGIN, Budget(float("inf"), 160.0), pool=False)
    assert chosen == ["a", "b"]
    # the next look: "far" never ran rounds 4-5, so it is not looked at again on the same rounds
    groups["near"] = runs_of({"a": 100.0, "b": 80.0}, 0.1, seed=9, rounds=5)
    chosen, standing = plan_next(groups, {}, 0.0, looks, MARGIN, Budget(float("inf"), float("inf")), pool=False)
    assert standing["far"] == "stopped at the budget" and "c" not in chosen and "d" not in chosen
    races, _ = race_study(groups, looks, MARGIN, pool=False)
    assert races["far"].states == {"c": (LIVE, 3), "d": (LIVE, 3)}


def test_the_study_prior_is_fitted_at_the_first_look_and_lends_a_pair_its_freedom():
    looks = schedule(3, [5, 8])
    groups = {f"g{index}": runs_of({"a": 100.0, "b": 90.0}, 0.05, seed=index, rounds=3) for index in range(6)}
    prior = first_look_prior(groups, looks)
    assert prior is not None and prior.variance > 0
    assert first_look_prior({"g": groups["g0"]}, looks) is None  # one comparison cannot fit a prior


def test_a_single_lucky_run_does_not_lead_a_look():
    runs = {"steady": {1: 100.0, 2: 101.0, 3: 99.0}, "once": {1: 300.0}, "slow": {1: 60.0, 2: 61.0, 3: 59.0}}
    result = race(runs, planned_looks([3, 5]), MARGIN)
    assert result.leader == "steady" and result.judgements["once"].against == "steady"


def runs_frame(rows):
    """A runs table (records.runs_table's columns the race reads) from (machine, experiment, rep, status, rate)."""
    base = dict(zip(GROUP, ["", "digits", "mlp", "cpu", 64, "adam", 0.001, 3, "device", 1, "weak"]))
    return pd.DataFrame(
        [
            dict(base, machine=machine, experiment_id=experiment, rep=rep, status=status, train_images_per_s=rate)
            | {"final_try": True}
            for machine, experiment, rep, status, rate in rows
        ]
    )


def test_the_planner_and_the_aggregation_group_runs_by_machine_and_pool_per_noise_source():
    rows = [
        (machine, experiment, rep, "ok", centre * (1 + 0.01 * rep * (-1) ** rep))
        for machine, scale in (("cpu-a", 1.0), ("cpu-b", 3.0))
        for experiment, centre in (("a", 100.0 * scale), ("b", 90.0 * scale), ("c", 80.0 * scale))
        for rep in (1, 2, 3)
    ]
    runs = runs_frame([*rows, ("cpu-a", "a", 4, "error", float("nan"))])
    runs.loc[len(runs)] = runs.iloc[0].to_dict() | {"final_try": False, "rep": 1, "train_images_per_s": 1.0}
    groups = race_groups(runs)
    assert len(groups) == 2 and {noise_source(key)[0] for key in groups} == {"cpu-a", "cpu-b"}
    on_a = next(runs for key, runs in groups.items() if noise_source(key) == ("cpu-a", "cpu"))
    assert on_a["a"] == {1: pytest.approx(100.0 * 0.99), 2: pytest.approx(102.0), 3: pytest.approx(97.0), 4: None}


def test_each_noise_source_gets_its_own_prior():
    """Groups on a quiet and on a noisy machine: pooled per machine and device, each is shrunk toward its own."""
    looks = schedule(3, [5])
    base = dict(zip(GROUP, ["", "digits", "mlp", "cpu", 64, "adam", 0.001, 3, "device", 1, "weak"]))

    def key(machine, model):
        return tuple({**base, "machine": machine, "model": model}[column] for column in GROUP)

    groups = {
        key(machine, model): runs_of({"a": 100.0, "b": 90.0, "c": 80.0}, noise, seed=seed, rounds=3)
        for seed, (machine, noise, model) in enumerate(
            [(m, n, model) for m, n in (("quiet", 0.01), ("noisy", 0.2)) for model in ("mlp", "lenet", "cnn")]
        )
    }
    _, priors = race_study(groups, looks, MARGIN, pool=True, source=noise_source)
    quiet = {priors[k].variance for k in groups if k[0] == "quiet"}
    noisy = {priors[k].variance for k in groups if k[0] == "noisy"}
    assert len(quiet) == len(noisy) == 1 and max(quiet) * 20 < min(noisy)
    _, shared = race_study(groups, looks, MARGIN, pool=True)
    assert len({prior.variance for prior in shared.values()}) == 1
