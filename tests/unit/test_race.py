"""The statistics of racing (dlbench/analysis/race.py): alpha spent across planned looks, elimination of a rival
proven slower, retirement of one proven equivalent, a group of one alone, and the false claims of a race among equal
experiments held to alpha."""

import numpy as np
import pytest
from dlbench.analysis.race import (
    ALONE,
    DECIDED,
    ELIMINATED,
    LIVE,
    RETIRED,
    UNDECIDED,
    planned_looks,
    race,
    rounds_spent,
    spent,
)

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
