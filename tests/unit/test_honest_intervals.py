"""Every interval the tables print agrees with its verdict (dlbench/study/analysis/statistics.py, verdict_interval):
above 1, faster; below 1, slower; containing 1 inside the equivalence margin, equivalent; containing 1 and reaching past
it, inconclusive. Checked on the report fixture's study and on random families of comparisons; the levels Holm tested at
and the equivalence interval are held to hand computations and to SciPy."""

import math

import numpy as np
import pytest
from dlbench.study.analysis.comparisons import comparisons, version_pairs
from dlbench.study.analysis.records import read_records, record_machines, runs_table
from dlbench.study.analysis.scaling import scaling_table
from dlbench.study.analysis.statistics import (
    ALPHA,
    FASTER,
    INCONCLUSIVE,
    SLOWER,
    LogRatio,
    decisions,
    equivalence_interval,
    equivalence_p,
    holm,
    holm_levels,
    interval,
)
from dlbench.study.analysis.summary import summary_table
from report_fixture import write_records
from scipy import stats

MARGIN = 0.05


def contradiction(ratio, low, high, verdict, margin):
    """What is wrong with a row whose interval says otherwise than its verdict (None where they agree)."""
    if math.isnan(low):
        return None if verdict.startswith("not tested") else "a tested row without an interval"
    inside = 1 / (1 + margin) < low and high < 1 + margin
    if not low <= ratio <= high:
        return "the ratio outside its own interval"
    reads = FASTER if low > 1 else SLOWER if high < 1 else "equivalent" if inside else INCONCLUSIVE
    if reads != verdict.split(" within")[0]:
        return f"interval [{low:.4f}, {high:.4f}] reads {reads}, verdict {verdict}"
    return None


def contradictions(table, ratio_column, margin):
    return [
        (row.get("experiment_id", index), problem)
        for index, row in table.iterrows()
        if isinstance(row["verdict"], str)
        and (problem := contradiction(row[ratio_column], row["ratio_low"], row["ratio_high"], row["verdict"], margin))
    ]


@pytest.fixture(scope="module")
def fixture_study(tmp_path_factory):
    records = read_records(write_records(tmp_path_factory.mktemp("runs")))
    runs = runs_table(records, record_machines(records))
    return runs, summary_table(runs)


@pytest.mark.parametrize("margin", [0.05, 0.2])
def test_no_interval_of_the_fixture_study_contradicts_its_verdict(fixture_study, margin):
    runs, summary = fixture_study
    compared = comparisons(runs, summary, "torch-2.13", margin)
    versions = version_pairs(runs, summary, margin)
    scaling = scaling_table(runs, summary, margin)
    assert set(compared["verdict"]) >= {FASTER, SLOWER}  # the fixture decides both ways
    assert not contradictions(compared, "ratio", margin)
    assert not contradictions(versions, "ratio", margin)
    assert not contradictions(scaling, "efficiency_ratio", margin)


@pytest.mark.parametrize("margin", [0.05, 0.2])
def test_no_interval_of_the_raced_fixture_study_contradicts_the_races_verdict(fixture_study, margin):
    runs, summary = fixture_study
    race = {"enabled": True, "repeats": 2, "max_rounds": 3, "pooled": True}
    compared = comparisons(runs, summary, None, margin, race)
    assert len(compared) and set(compared["race_state"]) <= {"live", "eliminated", "retired"}
    assert set(compared["race_outcome"]) <= {"decided", "tied", "out of reach", "stopped at the budget"}
    assert not contradictions(compared, "ratio", margin)
    eliminated = compared[compared["race_state"] == "eliminated"]
    assert (eliminated["verdict"] == SLOWER).all() and (eliminated["p_holm"] < ALPHA).all()
    live = compared[compared["race_state"] == "live"]
    assert live["verdict"].isin([INCONCLUSIVE, FASTER]).all()
    # a p scaled to the race's 0.05 reads as decided exactly where the verdict is a difference
    differences = compared[~compared["verdict"].str.startswith("equivalent")]
    assert ((differences["p_holm"] < ALPHA) == differences["verdict"].isin([SLOWER, FASTER])).all()


def random_family(generator):
    """A family of 1 to 6 comparisons with ratios near 1 and errors from tiny to wide, some not tested."""
    size = int(generator.integers(1, 7))
    return [
        None
        if generator.random() < 0.1
        else LogRatio(
            estimate=float(generator.normal(0, 0.08)),
            error=float(generator.choice([0.0, *np.exp(generator.uniform(np.log(0.002), np.log(0.2), 3))])),
            freedom=float(generator.choice([2, 3.4, 5, 9])),
            spread=0.1,
            rounds=3,
        )
        for _ in range(size)
    ]


@pytest.mark.parametrize("baseline_from_data", [True, False])  # Holm over every pair of the group, or its comparisons
@pytest.mark.parametrize("margin", [0.02, 0.05, 0.1])
def test_no_interval_of_random_families_contradicts_its_verdict(margin, baseline_from_data):
    generator = np.random.default_rng(40)
    problems, seen = [], set()
    for _ in range(1500):
        family = random_family(generator)
        for log_ratio, outcome in zip(family, decisions(family, margin, baseline_from_data)):
            ratio = math.nan if log_ratio is None else math.exp(log_ratio.estimate)
            seen.add(outcome["verdict"].split(" within")[0])
            problem = contradiction(ratio, outcome["ratio_low"], outcome["ratio_high"], outcome["verdict"], margin)
            if problem:
                problems.append((log_ratio, problem))
    assert {FASTER, SLOWER, "equivalent", INCONCLUSIVE} <= seen  # every verdict was drawn
    assert not problems, problems[:5]


def test_holm_tests_each_hypothesis_at_its_step_and_the_rest_where_it_stopped():
    # sorted: 0.01 at 0.05 / 3 (rejected), 0.03 at 0.05 / 2 (not: Holm stops), so 0.04 is left at 0.05 / 2 too
    levels = holm_levels([0.04, 0.01, np.nan, 0.03])
    assert levels[[1, 3, 0]] == pytest.approx([0.05 / 3, 0.05 / 2, 0.05 / 2]) and math.isnan(levels[2])
    assert holm_levels([0.001, 0.002]) == pytest.approx([0.025, 0.05])


def test_holm_tests_a_family_of_every_pair_from_its_size_down():
    # 3 comparisons of 4 experiments, 6 pairs: 0.005 at 0.05 / 6 (rejected), 0.01 at 0.05 / 5 (not), 0.04 left there
    levels = holm_levels([0.04, 0.005, 0.01], hypotheses=6)
    assert levels == pytest.approx([0.05 / 5, 0.05 / 6, 0.05 / 5])


def test_a_p_is_below_its_holm_level_exactly_when_its_adjusted_p_is_below_alpha():
    generator = np.random.default_rng(7)
    for _ in range(2000):
        p_values = generator.uniform(0, 0.1, int(generator.integers(1, 8)))
        assert list(p_values < holm_levels(p_values)) == list(holm(p_values) < ALPHA)
        pairs = len(p_values) * (len(p_values) + 1) // 2  # the family of every pair, the baseline among them
        assert list(p_values < holm_levels(p_values, hypotheses=pairs)) == list(holm(p_values, pairs) < ALPHA)


def test_the_equivalence_interval_is_the_one_sided_tests_interval_widened_to_take_in_1():
    """Hsu et al.'s interval: the 1 - 2 level interval (SciPy's) widened to 0 on the log scale; inside the bounds
    exactly when the two one-sided tests prove equivalence at that level."""
    log_ratio = LogRatio(0.03, 0.01, 4, 0.02, 5)
    low, high = stats.t.interval(0.9, 4, loc=0.03, scale=0.01)
    assert equivalence_interval(log_ratio, 0.05) == pytest.approx((0.0, high))
    assert low > 0  # the plain interval would exclude 1 and read "faster" where nothing but equivalence is tested
    bound = math.log1p(MARGIN)
    assert (high < bound) == (equivalence_p(log_ratio, MARGIN) < 0.05)


def test_an_interval_that_excluded_1_unadjusted_now_says_what_holm_decided():
    """A 1.15x lead whose unadjusted 95% interval excludes 1 but which Holm, in a family of three comparisons (six
    pairs), does not decide:
    its printed interval contains 1."""
    lead = LogRatio(math.log(1.15), 0.055, 8, 0.16, 9)
    family = [lead, LogRatio(0.02, 0.05, 8, 0.15, 9), LogRatio(-0.01, 0.05, 8, 0.15, 9)]
    assert interval(lead)[1] > 1
    outcome = decisions(family, MARGIN)[0]
    assert outcome["verdict"] == INCONCLUSIVE
    assert outcome["ratio_low"] < 1 < outcome["ratio_high"] and outcome["ratio_confidence"] > 0.95


def test_the_summary_flags_a_spread_of_a_tenth_unstable_and_sets_cpu_runs_per_busy_core(fixture_study):
    """pyperf's warning, a standard deviation of 10 % of the mean or more, as a flag; and a CPU run's throughput per
    core it kept busy (CPU % of all cores times their count), none on a GPU."""
    runs, summary = fixture_study
    assert (summary["unstable"] == (summary["train_images_per_s_cv"] >= 0.10)).all()
    cpu = runs[(runs["device"] == "cpu") & (runs["status"] == "ok") & runs["cpu_utilisation_mean"].gt(0)]
    expected = cpu["train_images_per_s"] / (cpu["cpu_utilisation_mean"] / 100 * cpu["provenance_cpu_cores"])
    assert len(cpu) and np.allclose(cpu["train_images_per_busy_core"].astype(float), expected)
    assert runs.loc[runs["device"] == "gpu", "train_images_per_busy_core"].isna().all()


def test_each_pooled_comparison_names_the_prior_its_variance_was_shrunk_toward(fixture_study):
    """The prior that turns overlapping per-experiment intervals into verdicts is a column of the comparison it
    served: one per machine and device, absent where a comparison was not paired."""
    runs, summary = fixture_study
    compared = comparisons(runs, summary, "torch-2.13", 0.05)
    paired = compared[compared["method"] == "paired by round"]
    assert len(paired) and (paired["pooled_prior_sd"] > 0).all() and (paired["pooled_prior_freedom"] > 0).all()
    assert (paired.groupby(["machine", "device"])["pooled_prior_sd"].nunique() == 1).all()
    assert compared.loc[compared["method"] != "paired by round", "pooled_prior_sd"].isna().all()
