"""The comparisons' statistics (dlbench/study/analysis/statistics.py), the plain-Python Student's t under them
(student.py), at unit level: each held to SciPy or to a case worked by hand."""

import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import library_environment
from dlbench.study.analysis.statistics import (
    ALPHA,
    INCONCLUSIVE,
    NOT_TESTED,
    PAIRED,
    UNPAIRED,
    LogRatio,
    all_pairs,
    compared,
    decides_after,
    decisions,
    difference_p,
    equivalence_p,
    freedom_after,
    holm,
    interval,
    log_interval,
    mean_interval,
    paired_log_ratio,
    repeats_to_decide,
    verdict,
    welch_log_ratio,
)
from dlbench.study.analysis.student import t_critical, t_tail
from scipy import stats

FREEDOMS = [1, 1.5, 2, 2.7, 3, 4, 7.3, 12, 30, 200, 5000]


def test_students_t_tail_and_critical_values_match_scipy_for_whole_and_fractional_freedom():
    for freedom in FREEDOMS:
        for t in [0.0, 0.01, 0.5, 1.0, 2.0, 4.3, 10.0, 60.0, 1e4]:
            for signed in (t, -t):
                assert t_tail(signed, freedom) == pytest.approx(stats.t.sf(signed, freedom), rel=1e-9, abs=1e-300)
        for tail in [1e-9, 1e-5, 0.001, 0.0125, 0.025, 0.05, 0.2, 0.5, 0.8, 0.975]:
            assert t_critical(tail, freedom) == pytest.approx(stats.t.isf(tail, freedom), rel=1e-9, abs=1e-12)


def test_a_log_interval_is_students_t_on_the_logarithms_and_needs_three_values():
    values = np.array([100.0, 110.0, 120.0])
    logs = np.log(values)
    low, high = stats.t.interval(0.95, 2, loc=logs.mean(), scale=stats.sem(logs))
    assert log_interval(values) == pytest.approx((np.exp(logs.mean()), np.exp(low), np.exp(high)))
    centre, low, high = log_interval([100.0, 121.0])
    assert centre == pytest.approx(110.0) and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(value) for value in log_interval([]))


def test_a_paired_ratio_is_the_mean_log_difference_and_its_t_test():
    values, reference = np.array([210.0, 190.0, 205.0, 180.0]), np.array([100.0, 93.0, 99.0, 91.0])
    log_ratio = paired_log_ratio(values, reference)
    differences = np.log(values) - np.log(reference)
    low, high = stats.t.interval(0.95, 3, loc=differences.mean(), scale=stats.sem(differences))
    assert interval(log_ratio) == pytest.approx((np.exp(differences.mean()), np.exp(low), np.exp(high)))
    assert difference_p(log_ratio) == pytest.approx(stats.ttest_rel(np.log(values), np.log(reference)).pvalue)
    assert (log_ratio.freedom, log_ratio.rounds) == (3, 4)


def test_pairing_by_round_takes_the_drift_between_rounds_out_of_the_noise():
    """Both sides slow down alike from round to round (a warming machine): the unpaired test sees the drift as noise,
    the paired one sees a steady 10 %."""
    drift = np.array([1.0, 0.8, 1.2, 0.9])
    values, reference = 110.0 * drift * [1.0, 1.01, 0.99, 1.0], 100.0 * drift
    paired, unpaired = paired_log_ratio(values, reference), welch_log_ratio(values, reference)
    assert difference_p(paired) < 0.001 < 0.05 < difference_p(unpaired)
    assert interval(paired)[1] > 1 > interval(unpaired)[1]


def test_an_unpaired_ratio_is_welchs_t_test_on_log_throughput():
    values, reference = np.array([210.0, 190.0, 205.0]), np.array([100.0, 93.0, 99.0, 91.0, 97.0])
    log_ratio = welch_log_ratio(values, reference)
    assert difference_p(log_ratio) == pytest.approx(
        stats.ttest_ind(np.log(values), np.log(reference), equal_var=False).pvalue
    )
    assert log_ratio.rounds == 5


def test_the_equivalence_p_is_the_larger_of_two_one_sided_tests_against_symmetric_log_bounds():
    differences = np.log([1.01, 0.99, 1.02, 1.005, 0.995])
    log_ratio = paired_log_ratio(np.exp(differences), np.ones(5))
    bound = math.log(1.05)
    expected = max(
        stats.ttest_1samp(differences, -bound, alternative="greater").pvalue,
        stats.ttest_1samp(differences, bound, alternative="less").pvalue,
    )
    assert equivalence_p(log_ratio, 0.05) == pytest.approx(expected) and expected < 0.05
    assert equivalence_p(log_ratio, 0.001) > 0.5  # a margin inside the noise proves nothing


def test_without_noise_the_tests_decide_by_the_ratio_alone():
    same, double = LogRatio(0.0, 0.0, 2, 0.0, 3), LogRatio(math.log(2), 0.0, 2, 0.0, 3)
    assert (difference_p(same), equivalence_p(same, 0.05)) == (1.0, 0.0)
    assert (difference_p(double), equivalence_p(double, 0.05)) == (0.0, 1.0)
    assert interval(double) == pytest.approx((2.0, 2.0, 2.0))


def test_holm_adjusts_step_down_and_leaves_untested_comparisons_out():
    adjusted = holm([0.01, np.nan, 0.04, 0.03, 0.5])
    assert adjusted[1] != adjusted[1]  # NaN: not tested, not counted
    assert adjusted[[0, 3, 2, 4]] == pytest.approx([0.04, 0.09, 0.09, 0.5])  # 4 x 0.01, 3 x 0.03, max(2 x 0.04, .09)
    assert holm([]).size == 0 and holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_holm_in_a_family_larger_than_its_tested_comparisons_starts_at_the_familys_size():
    """Three comparisons with a baseline picked from the data, four experiments in all: six pairs, so the smallest p
    is multiplied by 6, the next by 5, the next by 4 (the untested pairs' p's taken as 1)."""
    adjusted = holm([0.01, np.nan, 0.04, 0.005], hypotheses=6)
    assert adjusted[[3, 0, 2]] == pytest.approx([0.03, 0.05, 0.16]) and math.isnan(adjusted[1])
    assert holm([0.01, 0.04]) == pytest.approx(holm([0.01, 0.04], hypotheses=2))  # by default, the tested alone
    with pytest.raises(ValueError, match="2 hypotheses cannot hold 3"):
        holm([0.1, 0.2, 0.3], hypotheses=2)


def test_a_baseline_fixed_in_advance_keeps_the_family_to_its_comparisons():
    """p about 0.018 beside one rival: decided against a baseline fixed in advance (a family of 2); the same p against
    a baseline picked from the data of 3 experiments (3 pairs) is not."""
    edge = paired_log_ratio([106.0, 102.0, 107.0, 105.0], [100.0, 100.0, 100.0, 100.0])
    other = paired_log_ratio([100.0, 90.0, 112.0, 99.0], [100.0, 100.0, 100.0, 100.0])
    assert 0.05 / 3 < difference_p(edge) < 0.05 / 2
    assert decisions([edge, other], 0.01, baseline_from_data=False)[0]["verdict"] == "faster"
    assert decisions([edge, other], 0.01)[0]["verdict"] == INCONCLUSIVE
    assert all_pairs(0) == 0 and all_pairs(1) == 1 and all_pairs(3) == 6


def test_among_equal_experiments_the_observed_fastest_is_called_faster_in_at_most_alpha_of_groups():
    """A/A: four equal experiments, three rounds, each compared with the one that measured fastest. Holm over the
    three comparisons alone claims a difference in about 6 % of groups; over the six pairs, in about 3 %."""
    generator = np.random.default_rng(40)
    groups, claims, claims_unselected = 3000, 0, 0
    for _ in range(groups):
        logs = generator.normal(0, 0.12, (4, 3)) + generator.normal(0, 0.05, 3)
        fastest = int(np.argmax(logs.mean(axis=1)))
        log_ratios = [
            paired_log_ratio(np.exp(logs[other]), np.exp(logs[fastest])) for other in range(4) if other != fastest
        ]
        p_values = [difference_p(log_ratio) for log_ratio in log_ratios]  # decisions' difference tests, as Holm
        claims += bool((holm(p_values, all_pairs(3)) < ALPHA).any())  # adjusts them there
        claims_unselected += bool((holm(p_values) < ALPHA).any())
    assert claims / groups <= ALPHA < claims_unselected / groups


def test_comparisons_pair_rounds_in_common_and_fall_back_to_welch():
    both = {1: 100.0, 2: 101.0, 3: 99.0, 4: 100.0}
    method, pairs, log_ratio = compared({1: 200.0, 2: 203.0, 4: 199.0}, both)
    assert (method, pairs) == (PAIRED, 3) and log_ratio.rounds == 3
    method, pairs, log_ratio = compared({5: 200.0, 6: 203.0, 1: 199.0}, both)  # one round in common
    assert (method, pairs, log_ratio.rounds) == (UNPAIRED, 0, 4)
    assert compared({1: 200.0, 2: 203.0}, both) == (None, 0, None)


def rounds_of(*values):
    return dict(enumerate(values, 1))


def test_verdicts_decide_where_the_data_do_and_say_what_would_decide_the_rest():
    baseline = rounds_of(100.0, 102.0, 98.0, 101.0)
    cases = {
        "faster": rounds_of(150.0, 151.0, 148.0, 152.0),
        "slower": rounds_of(70.0, 71.5, 68.0, 71.0),
        "same": rounds_of(100.5, 102.2, 98.3, 101.0),
        "unsure": rounds_of(103.0, 96.0, 104.0, 108.0),
        "few": rounds_of(100.0, 101.0),
    }
    log_ratios = [compared(values, baseline)[2] for values in cases.values()]
    outcomes = dict(zip(cases, decisions(log_ratios, 0.05)))
    assert {name: outcome["verdict"] for name, outcome in outcomes.items()} == {
        "faster": "faster",
        "slower": "slower",
        "same": "equivalent within 5 %",
        "unsure": INCONCLUSIVE,
        "few": NOT_TESTED,
    }
    assert [outcome["repeats_to_decide"] for outcome in outcomes.values()] == [
        None,
        None,
        None,
        outcomes["unsure"]["repeats_to_decide"],
        None,
    ]
    assert 4 < outcomes["unsure"]["repeats_to_decide"] <= 100
    assert math.isnan(outcomes["few"]["p_holm"]) and outcomes["few"]["equivalence_margin"] == 0.05
    p_values = [outcome["p_value"] for outcome in outcomes.values()][:4]
    # the baseline was picked from the data: the family is all 10 pairs of its 5 tested experiments
    assert [outcome["p_holm"] for outcome in outcomes.values()][:4] == pytest.approx(holm(p_values, 10))
    assert verdict(log_ratios[2], 1.0, 0.01, 0.025) == "equivalent within 2.5 %"


def test_holm_runs_within_the_family_so_a_lone_comparison_decides_what_a_crowd_would_not():
    """p about 0.03 decides alone; beside nine comparisons with no difference Holm needs 0.005."""
    edge = paired_log_ratio([106.0, 101.0, 108.0, 104.0], [100.0, 100.0, 100.0, 100.0])
    assert 0.01 < difference_p(edge) < 0.05
    (alone,) = decisions([edge], 0.01)
    crowd = decisions([edge] + [paired_log_ratio([100.0, 90.0, 112.0], [100.0, 100.0, 100.0])] * 9, 0.01)
    assert alone["verdict"] == "faster" and crowd[0]["verdict"] == INCONCLUSIVE


def test_repeats_to_decide_are_the_fewest_rounds_that_would_decide_at_the_observed_spread():
    unsure = LogRatio(math.log(1.03), 0.02, 3, 0.04, 4)  # 3 % apart, 4 % spread a round: neither test decides yet
    needed = repeats_to_decide(unsure, 0.05)
    assert decides_after(unsure, 0.05, needed, 0.05, 0.8) and not decides_after(unsure, 0.05, needed - 1, 0.05, 0.8)
    assert needed < repeats_to_decide(unsure._replace(spread=0.06), 0.05)  # noisier: more rounds
    assert needed < repeats_to_decide(unsure, 0.05, alpha=0.01)  # a larger family: more rounds
    # Midway between 1 and the margin, with a 10 % spread a round: neither test decides at any practical count.
    midway = LogRatio(math.log(1.05) / 2, 0.05, 3, 0.1, 4)
    assert repeats_to_decide(midway, 0.05) is None
    assert repeats_to_decide(midway._replace(estimate=math.log(1.05)), 0.05) < 100  # on the margin: it differs
    # With little noise a clear difference needs few rounds, but always one more than there were.
    assert repeats_to_decide(LogRatio(math.log(1.5), 0.3, 2, 0.5, 3), 0.05) >= 4


def test_the_race_imports_no_scipy():
    """The race's planner decides with plain Python and NumPy, as the comparisons' tests it shares."""
    code = (
        "import sys, dlbench.study.analysis.race; "
        "assert not [name for name in sys.modules if name.split('.')[0] == 'scipy']"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=library_environment())


def test_welchs_freedom_after_more_rounds_never_passes_what_the_smaller_side_would_give():
    """Three runs against eight, one side noisy: each added round adds a run to both sides, so after ten rounds (five
    against ten) Welch's freedom is the one those sides would give, not the ten per side that rounds - 1 assumes."""
    rng = np.random.default_rng(3)
    noisy, steady = list(np.exp(rng.normal(0, 0.2, 3))), list(np.exp(rng.normal(0, 0.01, 8)))
    now = welch_log_ratio(noisy, steady)
    later = welch_log_ratio([*noisy, *np.exp(rng.normal(0, 0.2, 2))], [*steady, *np.exp(rng.normal(0, 0.01, 2))])
    assert now.rounds == 8 and now.freedom < 3
    assert freedom_after(now, 10) == pytest.approx(now.freedom + 2) and freedom_after(now, 10) < 9
    assert later.freedom < 9  # what ten rounds would give, as the estimate says, not rounds - 1
    paired = paired_log_ratio([1.0, 1.1, 0.9], [1.0, 1.0, 1.0])
    assert freedom_after(paired, 10) == 9  # exact for pairs


def test_the_interval_of_a_mean_time_never_reaches_below_zero():
    mean, low, high = mean_interval([10.0, 12.0, 30.0])  # t(2) = 4.30 on lumpy times: the bound would be -10 s
    assert mean == pytest.approx(52 / 3) and low == 0.0 and high > 2 * mean
