"""The statistics of racing (dlbench/study/analysis/race.py and its confidence sequence, sequential.py): a rival
proven slower eliminated, one proven equivalent retired, a group decided, tied, out of reach or stopped at the budget,
the cheapest decisions bought first, and the false claims of a race among equal experiments held to alpha however many
rounds it looks at."""

import math

import numpy as np
import pandas as pd
import pytest
from dlbench.study.analysis import sequential
from dlbench.study.analysis.race import (
    ALONE,
    AT_BUDGET,
    DECIDED,
    ELIMINATED,
    LIVE,
    OUT_OF_REACH,
    RETIRED,
    TIED,
    UNDECIDED,
    Budget,
    first_look_prior,
    noise_source,
    pair_level,
    plan_next,
    race,
    race_groups,
    race_study,
    reached,
    rounds_spent,
    schedule,
)
from dlbench.study.analysis.statistics import paired_log_ratio
from dlbench.study.analysis.student import t_critical
from dlbench.study.analysis.tables import GROUP

MARGIN = 0.05
LOOKS = schedule(3, 30)
NO_BUDGET = Budget(math.inf, math.inf)


def group(centres, noise, seed, rounds=30):
    """experiment -> {round: throughput}: each experiment's throughput times log-normal noise per run."""
    generator = np.random.default_rng(seed)
    return {
        name: {round_: centre * float(np.exp(generator.normal(0, noise))) for round_ in range(1, rounds + 1)}
        for name, centre in centres.items()
    }


def test_the_sequence_is_a_t_interval_widened_and_its_e_value_crosses_exactly_where_it_excludes():
    log_ratio = paired_log_ratio([1.0, 1.1, 0.95, 1.05, 1.2], [1.0, 1.0, 1.0, 1.0, 1.0])
    level = pair_level(4)
    assert level == pytest.approx(0.05 / 6)  # alpha shared among the 6 pairs of 4 experiments, at every look
    assert sequential.boundary(level, log_ratio.freedom, log_ratio.rounds) > t_critical(level / 2, log_ratio.freedom)
    low, high = sequential.interval(log_ratio, level)
    assert (low > 0) == (sequential.difference_p(log_ratio) < level)
    for shift in np.linspace(-0.3, 0.3, 25):
        moved = log_ratio._replace(estimate=log_ratio.estimate + shift)
        assert (sequential.interval(moved, level)[0] > 0) == (sequential.difference_p(moved) < level)
    # two rounds without a pooled prior cannot reach 1 / level however large the lead: no claim from one spread
    assert sequential.boundary(level, 1, 2) == math.inf
    assert sequential.boundary(level, 1 + 20, 2) < math.inf  # a prior's freedom lets them


def test_the_sequence_covers_the_truth_at_every_round_at_once():
    """Ville: among 2,000 paths of 40 rounds, those whose sequence ever misses 0 stay within the level."""
    generator = np.random.default_rng(0)
    level, misses = 0.05, 0
    for _ in range(2000):
        logs = generator.normal(0, 0.2, 40)
        for rounds in range(2, 41):
            log_ratio = paired_log_ratio(np.exp(logs[:rounds]), np.ones(rounds))
            low, high = sequential.interval(log_ratio, level)
            if low > 0 or high < 0:
                misses += 1
                break
    assert misses / 2000 <= level


def test_a_clearly_slower_rival_is_eliminated_at_the_first_look_and_the_group_is_decided():
    result = race(group({"fast": 200.0, "slow": 100.0}, 0.02, seed=1), LOOKS, MARGIN)
    assert (result.outcome, result.leader) == (DECIDED, "fast")
    assert result.states == {"fast": (LIVE, 3), "slow": (ELIMINATED, 3)}
    assert result.judgements["slow"].level == pytest.approx(0.05)  # one pair: all of the group's alpha
    assert rounds_spent(result) == 6


def test_a_rival_proven_within_the_margin_ties_the_group():
    centres = {"a": 100.0, "b": 99.8, "c": 80.0}
    result = race(group(centres, 0.002, seed=2), LOOKS, MARGIN)
    assert result.outcome == TIED and result.states["c"][0] == ELIMINATED
    assert {result.states["a"][0], result.states["b"][0]} == {LIVE, RETIRED}
    assert all(judgement.level == pytest.approx(0.05 / 3) for judgement in result.judgements.values())


def test_a_group_of_one_is_alone_and_a_close_noisy_pair_is_out_of_reach():
    assert race(group({"only": 100.0}, 0.1, seed=3), LOOKS, MARGIN).outcome == ALONE
    result = race(group({"a": 100.0, "b": 97.0}, 0.3, seed=4), LOOKS, MARGIN)
    assert result.outcome == OUT_OF_REACH and result.needed == math.inf
    assert rounds_spent(result) < 2 * 30  # stopped for futility before the most rounds


def test_a_group_that_reaches_the_most_rounds_undecided_is_out_of_reach():
    result = race(group({"a": 100.0, "b": 96.0}, 0.08, seed=7, rounds=6), schedule(3, 6), MARGIN)
    assert result.outcome == OUT_OF_REACH and max(rounds for _, rounds in result.states.values()) <= 6


@pytest.mark.parametrize(
    "noise",
    [
        lambda generator, size: generator.normal(0, 0.12, size),
        lambda generator, size: 0.07 * generator.standard_t(3, size),  # heavy tails
        lambda generator, size: np.where(generator.random(size) < 0.2, 0.25, 0.0) + generator.normal(0, 0.05, size),
    ],
    ids=["gaussian", "heavy-tailed", "bimodal"],
)
def test_among_equal_experiments_a_race_to_30_rounds_claims_in_at_most_alpha_of_groups(noise):
    """A/A: four equal experiments; rounds drift together (pairing removes it); any elimination or retirement of an
    equal rival within the margin is allowed, an elimination is a false claim."""
    false_claims = 0
    for seed in range(200):
        generator = np.random.default_rng(seed)
        drift = np.cumsum(generator.normal(0, 0.05, 30))
        runs = {
            name: dict(zip(range(1, 31), 100.0 * np.exp(drift + noise(generator, 30)), strict=True)) for name in "abcd"
        }
        result = race(runs, LOOKS, MARGIN)
        false_claims += any(state == ELIMINATED for state, _ in result.states.values())
    assert false_claims / 200 <= 0.05


def runs_of(centres, noise, seed, rounds):
    """experiment -> {round: throughput} for the given rounds, as the planner reads a group's runs."""
    return group(centres, noise, seed, rounds)


def test_a_group_reaches_the_looks_its_runs_got_to_and_is_raced_through_those_alone():
    runs = runs_of({"a": 100.0, "b": 85.0}, 0.1, seed=4, rounds=5)
    assert reached(runs, LOOKS) == [3, 4, 5]
    races, _ = race_study({"g": runs}, LOOKS, MARGIN, pool=False)
    assert races["g"].outcome == UNDECIDED and races["g"].states == {"a": (LIVE, 5), "b": (LIVE, 5)}
    assert 5 < races["g"].needed <= 30
    # a run that did not end ok counts as a round run, but never as a figure; an experiment without any is no rival
    runs["failed"] = {1: None, 2: None, 3: float("nan"), 4: None, 5: None}
    races, _ = race_study({"g": runs}, LOOKS, MARGIN, pool=False)
    assert set(races["g"].states) == {"a", "b"}


def test_the_planner_runs_on_only_the_leader_and_live_rivals_of_undecided_groups():
    groups = {
        "clear": runs_of({"fast": 200.0, "slow": 100.0}, 0.02, seed=1, rounds=3),
        "close": runs_of({"a": 100.0, "b": 80.0}, 0.1, seed=9, rounds=3),
        "alone": runs_of({"only": 100.0}, 0.1, seed=6, rounds=3),
    }
    chosen, standing = plan_next(groups, {}, 0.0, LOOKS, MARGIN, NO_BUDGET, pool=False)
    assert standing["clear"] == DECIDED and standing["alone"] == ALONE
    assert standing["close"].startswith("racing")
    assert chosen == ["a", "b"]
    # at the most rounds, nothing more: out of reach
    groups["close"] = runs_of({"a": 100.0, "b": 99.0}, 0.1, seed=5, rounds=30)
    chosen, standing = plan_next(groups, {}, 0.0, LOOKS, MARGIN, NO_BUDGET, pool=False)
    assert chosen == [] and standing["close"] == OUT_OF_REACH


def test_the_budget_buys_the_cheapest_decision_first_and_a_stopped_group_stays_stopped():
    groups = {
        "few": runs_of({"a": 100.0, "b": 80.0}, 0.1, seed=9, rounds=3),  # a clear lead: few rounds to decide it
        "many": runs_of({"c": 100.0, "d": 88.0}, 0.06, seed=8, rounds=3),  # a closer one: more rounds
    }
    races, _ = race_study(groups, LOOKS, MARGIN, pool=False)
    assert races["few"].needed < races["many"].needed <= 30
    # runs: room for the cheaper group's decision only
    first = sum(len(by_round) for runs in groups.values() for by_round in runs.values())
    budget = Budget(first + 2 * (races["few"].needed - 3), math.inf)
    chosen, standing = plan_next(groups, {}, 0.0, LOOKS, MARGIN, budget, pool=False)
    assert chosen == ["a", "b"] and standing["many"].startswith(AT_BUDGET)
    assert "more rounds" in standing["many"]
    # minutes: the group that needs more rounds is the cheaper one where its runs are quick enough
    costs = {"a": 60.0, "b": 60.0, "c": 1.0, "d": 1.0}
    chosen, standing = plan_next(groups, costs, 0.0, LOOKS, MARGIN, Budget(math.inf, 2 * 30.0), pool=False)
    assert chosen == ["c", "d"] and standing["few"].startswith(AT_BUDGET)
    # the next look: "many" never ran round 4, so it is not looked at again on the same rounds
    groups["few"] = runs_of({"a": 100.0, "b": 80.0}, 0.1, seed=9, rounds=4)
    chosen, standing = plan_next(groups, {}, 0.0, LOOKS, MARGIN, NO_BUDGET, pool=False)
    assert standing["many"] == AT_BUDGET and "c" not in chosen and "d" not in chosen
    races, _ = race_study(groups, LOOKS, MARGIN, pool=False)
    assert races["many"].states == {"c": (LIVE, 3), "d": (LIVE, 3)}


def test_the_study_prior_is_fitted_at_the_first_look_and_lends_a_pair_its_freedom():
    groups = {f"g{index}": runs_of({"a": 100.0, "b": 90.0}, 0.05, seed=index, rounds=3) for index in range(6)}
    prior = first_look_prior(groups, LOOKS)
    assert prior is not None and prior.variance > 0
    assert first_look_prior({"g": groups["g0"]}, LOOKS) is None  # one comparison cannot fit a prior


def test_a_single_lucky_run_does_not_lead_a_look():
    runs = {"steady": {1: 100.0, 2: 101.0, 3: 99.0}, "once": {1: 300.0}, "slow": {1: 60.0, 2: 61.0, 3: 59.0}}
    result = race(runs, schedule(3, 5), MARGIN)
    assert result.leader == "steady" and result.judgements["once"].against == "steady"


@pytest.mark.parametrize(("first", "most"), [(1, 5), (4, 3)])
def test_looks_before_two_rounds_or_past_the_most_are_refused(first, most):
    with pytest.raises(ValueError, match="looks"):
        schedule(first, most)


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
    looks = schedule(3, 5)
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


def test_a_group_still_live_at_the_most_rounds_is_out_of_reach_even_where_a_kinder_ratio_would_decide():
    """Undecided after its last allowed round, a group has no budget left to be stopped by: it is out of reach."""
    runs = group({"a": 100.0, "b": 85.0}, 0.1, seed=4, rounds=5)
    assert race(runs, schedule(3, 5), MARGIN).outcome == OUT_OF_REACH
    assert race(runs, schedule(3, 5), MARGIN, most=30).outcome == UNDECIDED  # with room to go on, within reach


def test_what_is_left_of_the_budget_buys_a_round_of_the_cheapest_group_whose_decision_does_not_fit():
    groups = {"few": runs_of({"a": 100.0, "b": 80.0}, 0.1, seed=9, rounds=3)}
    races, _ = race_study(groups, LOOKS, MARGIN, pool=False)
    assert races["few"].needed - 3 >= 2  # its decision costs two rounds or more
    costs = {"a": 10.0, "b": 10.0}
    chosen, standing = plan_next(groups, costs, 100.0, LOOKS, MARGIN, Budget(math.inf, 100.0 + 20.0), pool=False)
    assert chosen == ["a", "b"] and standing["few"].startswith("racing on what is left of the budget")
    chosen, standing = plan_next(groups, costs, 100.0, LOOKS, MARGIN, Budget(math.inf, 100.0 + 19.0), pool=False)
    assert chosen == [] and standing["few"].startswith(AT_BUDGET)


def test_a_pair_without_spread_claims_only_where_its_rounds_could_claim_at_all():
    """Identical per-round ratios: no spread, yet two unpooled rounds cannot reach 1 / level (the evidence's limit)."""
    flat = paired_log_ratio([90.0, 90.0], [100.0, 100.0])
    level = pair_level(4)
    assert sequential.reach(flat, level) == math.inf and sequential.difference_p(flat) > level
    more = paired_log_ratio([90.0] * 6, [100.0] * 6)
    assert sequential.reach(more, level) == 0.0 and sequential.difference_p(more) < level
