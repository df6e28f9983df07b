"""Each group's answer for the report's first page (dlbench/study/analysis/fastest.py), from summary and comparisons
rows: the fastest that can be tested, its lead over the runner-up read from the comparisons table, and the
confidence."""

import math

import pandas as pd
import pytest
from dlbench.study.analysis.cost import COST_COLUMNS, with_costs
from dlbench.study.analysis.fastest import differences, fastest_table
from dlbench.study.analysis.recommendation import decision_words, minutes_words
from dlbench.study.analysis.tables import GROUP

GROUP_VALUES = dict(zip(GROUP, ["cpu-model", "digits", "mlp", "cpu", 32, "adam", 0.001, 3, "device", 1, "weak"]))


def experiment(stack, images_per_s, runs_ok=3, to_target=None, low=None, high=None):
    return dict(
        GROUP_VALUES,
        stack=stack,
        variant="eager",
        experiment_id=f"{stack}_mlp",
        framework=stack.split("-")[0],
        runs_ok=runs_ok,
        statuses="ok" if runs_ok else "oom",
        train_images_per_s_gmean=images_per_s,
        train_images_per_s_ci95_low=low if low is not None else images_per_s and images_per_s * 0.99,
        train_images_per_s_ci95_high=high if high is not None else images_per_s and images_per_s * 1.01,
        time_to_target_s_mean=to_target,
        time_to_target_runs=runs_ok if to_target is not None else 0,
        measurement_note="",
    )


def compared(stack, baseline, ratio, verdict):
    return dict(
        GROUP_VALUES,
        stack=stack,
        variant="eager",
        experiment_id=f"{stack}_mlp",
        baseline_stack=baseline,
        baseline_variant="eager",
        baseline_experiment_id=f"{baseline}_mlp",
        ratio=ratio,
        ratio_low=ratio * 0.95,
        ratio_high=ratio * 1.05,
        ratio_confidence=0.95,
        verdict=verdict,
    )


COMPARISON_COLUMNS = [
    *GROUP,
    "stack",
    "variant",
    "experiment_id",
    "baseline_stack",
    "baseline_variant",
    "baseline_experiment_id",
    "ratio",
    "verdict",
]


def answer(experiments, comparisons):
    comparisons = pd.DataFrame(
        comparisons, columns=[*COMPARISON_COLUMNS, "ratio_low", "ratio_high", "ratio_confidence"]
    )
    table = fastest_table(pd.DataFrame(experiments), comparisons)
    assert len(table) == 1
    return table.iloc[0]


def test_the_margin_is_the_runner_ups_comparison_inverted_and_a_proven_gap_is_decisive():
    row = answer(
        [experiment("torch-2.13", 200.0, to_target=2.0), experiment("mxnet-1.9", 100.0, to_target=0.5)],
        [compared("mxnet-1.9", "torch-2.13", 0.5, "slower")],
    )
    assert (row["fastest_stack"], row["runner_up_stack"], row["confidence"]) == ("torch-2.13", "mxnet-1.9", "decisive")
    assert row["lead"] == pytest.approx(2.0) and row["lead_low"] == pytest.approx(1 / 0.525)
    assert row["to_target_stack"] == "mxnet-1.9" and row["fastest_to_target_s"] == 2.0  # compile time reverses it


@pytest.mark.parametrize(
    "verdict, flag",
    [("equivalent within 5 %", "equivalent"), ("inconclusive", "inconclusive"), ("not tested: x", "inconclusive")],
)
def test_an_unproven_gap_is_never_called_decisive(verdict, flag):
    row = answer(
        [experiment("torch-2.13", 101.0), experiment("mxnet-1.9", 100.0)],
        [compared("mxnet-1.9", "torch-2.13", 0.99, verdict)],
    )
    assert row["confidence"] == flag


def test_a_lead_over_the_runner_up_decides_only_when_every_other_tested_rival_is_proven_slower():
    """A noisier third experiment can stay unproven behind a runner-up proven slower: naming the fastest would claim
    it beats that one too."""
    experiments = [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 150.0), experiment("jax-0.9", 140.0)]
    row = answer(
        experiments,
        [compared("mxnet-1.9", "torch-2.13", 0.75, "slower"), compared("jax-0.9", "torch-2.13", 0.7, "inconclusive")],
    )
    assert row["lead_verdict"] == "slower" and row["confidence"] == "inconclusive"
    assert row["confidence_reason"] == "the runner-up is proven slower, but not jax-0.9 (eager): inconclusive"
    row = answer(
        experiments,
        [
            compared("mxnet-1.9", "torch-2.13", 0.75, "slower"),
            compared("jax-0.9", "torch-2.13", 0.7, "slower"),
            compared("old-1.0", "torch-2.13", 0.1, "not tested: fewer than 3 ok repeats"),
        ],
    )
    assert row["confidence"] == "decisive"


def test_a_quicker_experiment_with_too_few_repeats_is_named_apart_and_one_never_measured_makes_it_contended():
    experiments = [
        experiment("torch-2.13", 200.0),
        experiment("jax-0.9", 900.0, runs_ok=2),
        experiment("mxnet-1.9", 100.0),
    ]
    row = answer(experiments, [compared("mxnet-1.9", "torch-2.13", 0.5, "slower")])
    assert (row["fastest_stack"], row["runner_up_stack"]) == ("torch-2.13", "mxnet-1.9")
    assert row["faster_untested"] == "jax-0.9 (eager)" and row["confidence"] == "decisive"
    busy = dict(experiment("tensorflow-2.21", float("nan"), runs_ok=0), measurement_note="not measured: machine busy")
    row = answer([*experiments, busy], [compared("mxnet-1.9", "torch-2.13", 0.5, "slower")])
    assert row["confidence"] == "contended" and "1 experiment(s)" in row["confidence_reason"]


def test_time_to_target_counts_only_experiments_that_reached_it_in_every_repeat():
    once = dict(experiment("mxnet-1.9", 100.0, to_target=0.1), time_to_target_runs=1)  # 1 of 3 repeats reached it
    row = answer(
        [experiment("torch-2.13", 200.0, to_target=2.0), once], [compared("mxnet-1.9", "torch-2.13", 0.5, "slower")]
    )
    assert row["to_target_stack"] == "torch-2.13" and row["to_target_s"] == 2.0


def test_a_named_baseline_that_is_not_the_fastest_leaves_the_lead_untested():
    row = answer(
        [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 100.0), experiment("tensorflow-2.21", 50.0)],
        [
            compared("torch-2.13", "tensorflow-2.21", 4.0, "faster"),
            compared("mxnet-1.9", "tensorflow-2.21", 2.0, "faster"),
        ],
    )
    assert row["lead"] == pytest.approx(2.0) and math.isnan(row["lead_low"])
    assert row["confidence"] == "untested" and "tensorflow-2.21 (comparison_baseline)" in row["lead_verdict"]


def test_the_lead_is_read_from_the_groups_own_comparisons_not_another_machines():
    elsewhere = dict(compared("mxnet-1.9", "torch-2.13", 0.9, "equivalent within 5 %"), machine="other-cpu")
    row = answer(
        [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 100.0)],
        [elsewhere, compared("mxnet-1.9", "torch-2.13", 0.5, "slower")],
    )
    assert row["lead"] == pytest.approx(2.0) and row["confidence"] == "decisive"


def test_a_group_alone_or_without_a_finished_run_says_so():
    assert answer([experiment("torch-2.13", 200.0)], [])["confidence"] == "alone"
    failed = answer([experiment("torch-2.13", float("nan"), runs_ok=0)], [])
    assert failed["confidence"] == "failed" and failed["confidence_reason"] == "no run finished (oom)"
    assert failed["recommendation"] == "No answer: no run of the group finished (see Failed runs)."
    assert failed["decision"] == "failed"


def test_an_undecided_answer_says_how_many_rounds_would_decide_it_and_their_minutes():
    """The unproven rivals need 12 rounds at the spread they show, 4 more than the 8 run; the fastest and the two
    rivals take 30 s a run: 4 rounds of 3 runs, 6 minutes."""
    experiments = [
        dict(experiment(stack, rate), runs=8, run_seconds_median=30.0)
        for stack, rate in (("torch-2.13", 200.0), ("mxnet-1.9", 190.0), ("jax-0.9", 185.0), ("tf-2.21", 100.0))
    ]
    rows = [
        dict(compared("mxnet-1.9", "torch-2.13", 0.95, "inconclusive"), repeats_to_decide=12, pairs=8),
        dict(compared("jax-0.9", "torch-2.13", 0.92, "inconclusive"), repeats_to_decide=10, pairs=8),
        dict(compared("tf-2.21", "torch-2.13", 0.5, "slower"), repeats_to_decide=None, pairs=3, race_outcome="x"),
    ]
    for row, resolvable in zip(rows, (1.1, 1.2, 1.05)):
        row.setdefault("race_outcome", "stopped at the budget")
        row["resolvable_ratio"] = resolvable
    race = {"budget_minutes": 10.0, "budget_runs": None}
    table = fastest_table(pd.DataFrame(experiments), pd.DataFrame(rows), race)
    row = table.iloc[0]
    assert (row["confidence"], row["rounds"], row["race_outcome"]) == ("inconclusive", 8, "stopped at the budget")
    assert row["rounds_to_decide"] == 12 and row["minutes_to_decide"] == pytest.approx(6.0)
    assert row["resolvable_lead"] == pytest.approx(1.2)  # the harder rival's
    assert row["budget_to_decide"] == "race.budget_minutes: 16"  # the budget raised by those 6 minutes
    assert row["decision"] == (
        "undecided after 8 rounds (resolves 1.20x); 12 rounds would decide it, about 6 minutes: the budget ran out; "
        "set `race.budget_minutes: 16` or more"
    )
    assert "set `race.budget_minutes: 16` or more (more where another group" in row["recommendation"]
    race = {"budget_minutes": None, "budget_runs": 100}  # 4 more rounds of the three runs still racing
    assert fastest_table(pd.DataFrame(experiments), pd.DataFrame(rows), race).iloc[0]["budget_to_decide"] == (
        "race.budget_runs: 112"
    )
    rows[1]["repeats_to_decide"] = None  # no count of rounds up to the most decides jax-0.9
    for row in rows:
        row["race_outcome"] = "out of reach"
    row = fastest_table(pd.DataFrame(experiments), pd.DataFrame(rows), race).iloc[0]
    assert pd.isna(row["rounds_to_decide"]) and pd.isna(row["minutes_to_decide"])
    assert pd.isna(row["budget_to_decide"])
    assert row["decision"] == (
        "out of reach after 8 rounds (resolves 1.20x): no count up to `race.max_rounds` would decide it against "
        f"{row['undecidable_rivals']}"
    )
    assert row["undecidable_rivals"] == "jax-0.9 (eager)", "the rival whose comparison no rounds would decide"


def priced_summary(prices):
    """Two CPU experiments and one on two GPUs, with energy per image beside which the costs go."""
    rows = [
        dict(
            experiment("torch-2.13", 200.0, to_target=36.0, low=160.0, high=250.0),
            time_to_target_s_ci95_low=30.0,
            time_to_target_s_ci95_high=42.0,
        ),
        experiment("mxnet-1.9", 100.0, to_target=72.0),
        dict(experiment("jax-0.9", 400.0, to_target=18.0), device="gpu", replicas=2),
    ]
    summary = pd.DataFrame(rows).assign(gpu_energy_per_image_j_mean=[None, None, 0.5], runs=3)
    return with_costs(summary, prices)


def test_a_price_costs_a_million_images_with_the_throughputs_interval_inverted_and_the_time_to_target():
    summary = priced_summary({"cpu": 3.6, "gpu": 7.2})
    at = list(summary.columns).index("gpu_energy_per_image_j_mean")
    assert list(summary.columns)[at + 1 : at + 1 + len(COST_COLUMNS)] == COST_COLUMNS  # beside energy per image
    torch, _, gpu = (row for _, row in summary.iterrows())
    # 3.6 an hour is 0.001 a second; a million images at 200/s take 5000 s
    assert torch["cost_per_million_images"] == pytest.approx(5.0)
    assert (torch["cost_per_million_images_ci95_low"], torch["cost_per_million_images_ci95_high"]) == (
        pytest.approx(4.0),  # from the throughput's upper bound
        pytest.approx(6.25),
    )
    assert torch["cost_to_target"] == pytest.approx(0.036)
    assert (torch["cost_to_target_ci95_low"], torch["cost_to_target_ci95_high"]) == (0.03, 0.042)  # the time's
    assert gpu["price_per_hour"] == pytest.approx(14.4)  # two GPUs
    assert gpu["cost_per_million_images"] == pytest.approx(10.0)
    row = fastest_table(summary[summary["device"] == "cpu"], pd.DataFrame(columns=COMPARISON_COLUMNS)).iloc[0]
    assert row["fastest_stack"] == "torch-2.13" and row["cost_per_million_images"] == pytest.approx(5.0)
    assert row["cost_per_million_images_ci95_high"] == pytest.approx(6.25)


def test_without_a_price_no_cost_column_appears():
    summary = priced_summary({"cpu": None, "gpu": None})
    fastest = fastest_table(summary, pd.DataFrame(columns=COMPARISON_COLUMNS))
    assert not [column for column in [*summary, *fastest] if "cost" in column or "price" in column]


def test_raced_the_fastest_is_the_races_leader_and_the_runner_up_one_compared_with_it():
    """mxnet-1.9 left at the first look against an earlier leader and shows a higher mean over its 3 rounds than
    the leader's over 8: page 1 names the race's leader, and its lead is over a rival judged against it."""
    experiments = [
        dict(experiment("mxnet-1.9", 210.0), runs=3),
        dict(experiment("torch-2.13", 200.0, runs_ok=8), runs=8),
        dict(experiment("jax-0.9", 150.0, runs_ok=8), runs=8),
    ]
    rows = [
        dict(compared("mxnet-1.9", "jax-0.9", 0.9, "slower"), race_leader="torch-2.13_mlp"),
        dict(compared("jax-0.9", "torch-2.13", 0.75, "slower"), race_leader="torch-2.13_mlp"),
    ]
    for row in rows:
        row["race_outcome"] = "decided"
    row = fastest_table(pd.DataFrame(experiments), pd.DataFrame(rows)).iloc[0]
    assert (row["fastest_stack"], row["runner_up_stack"]) == ("torch-2.13", "jax-0.9")
    assert row["lead"] == pytest.approx(1 / 0.75) and row["confidence"] == "decisive"


def test_a_rival_proven_equivalent_behind_a_runner_up_proven_slower_makes_a_tie_not_a_win():
    experiments = [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 150.0), experiment("jax-0.9", 140.0)]
    row = answer(
        experiments,
        [
            compared("mxnet-1.9", "torch-2.13", 0.75, "slower"),
            compared("jax-0.9", "torch-2.13", 0.98, "equivalent within 5 %"),
        ],
    )
    assert row["lead_verdict"] == "slower" and row["confidence"] == "equivalent"
    assert row["confidence_reason"] == (
        "the runner-up is proven slower; jax-0.9 (eager) is proven equivalent within 5 %"
    )


def raced(experiments, rows, leader):
    for row in rows:
        row.update(race_leader=leader, race_outcome="undecided")
    return fastest_table(pd.DataFrame(experiments), pd.DataFrame(rows)).iloc[0]


def test_raced_a_live_rival_proven_faster_than_the_leader_is_named_and_the_others_chain_behind_it():
    """The leader is chosen on each side's own rounds, a test pairs common rounds: a rival can be proven faster than
    the leader. Page 1 names it, its lead is over the leader, and a rival proven slower than the leader is behind it."""
    experiments = [
        experiment("torch-2.13", 200.0, runs_ok=8),
        experiment("mxnet-1.9", 190.0, runs_ok=6),
        experiment("jax-0.9", 100.0, runs_ok=8),
    ]
    rows = [
        compared("mxnet-1.9", "torch-2.13", 1.2, "faster"),
        compared("jax-0.9", "torch-2.13", 0.5, "slower"),
    ]
    row = raced(experiments, rows, "torch-2.13_mlp")
    assert (row["fastest_stack"], row["runner_up_stack"]) == ("mxnet-1.9", "torch-2.13")
    assert row["lead"] == pytest.approx(1.2) and row["lead_low"] == pytest.approx(1.2 * 0.95)
    assert (row["lead_verdict"], row["confidence"]) == ("slower", "decisive")


def test_raced_a_rival_that_left_against_an_earlier_leader_counts_only_through_a_proven_chain():
    experiments = [
        experiment("torch-2.13", 200.0, runs_ok=8),
        experiment("mxnet-1.9", 195.0, runs_ok=8),
        experiment("jax-0.9", 100.0, runs_ok=3),
    ]
    eliminated_early = compared("jax-0.9", "mxnet-1.9", 0.5, "slower")
    tie = [compared("mxnet-1.9", "torch-2.13", 0.98, "equivalent within 5 %"), eliminated_early]
    row = raced(experiments, tie, "torch-2.13_mlp")  # jax is behind a tie member: out, and the answer is the tie
    assert (
        row["confidence"] == "equivalent"
        and row["confidence_reason"] == "the runner-up is proven equivalent within 5 %"
    )
    undecided = [compared("mxnet-1.9", "torch-2.13", 0.98, "inconclusive"), eliminated_early]
    row = raced(experiments, undecided, "torch-2.13_mlp")  # jax is slower than a rival still open: out of the running
    assert row["confidence"] == "inconclusive" and row["confidence_reason"] == "inconclusive"
    assert row["recommendation"].startswith("Undecided between torch-2.13 (eager) and mxnet-1.9 (eager) (")
    slower = [compared("mxnet-1.9", "torch-2.13", 0.9, "slower"), eliminated_early]
    row = raced(experiments, slower, "torch-2.13_mlp")  # slower than a rival proven slower: slower
    assert row["confidence"] == "decisive"
    unproven = [
        compared("mxnet-1.9", "torch-2.13", 0.9, "slower"),
        compared("jax-0.9", "mxnet-1.9", 0.9, "inconclusive"),
    ]
    row = raced(experiments, unproven, "torch-2.13_mlp")
    assert row["confidence_reason"] == (
        "the runner-up is proven slower, but not jax-0.9 (eager): compared only with mxnet-1.9 (eager): inconclusive"
    )


def test_the_fastest_at_inference_is_named_beside_the_fastest_to_train_with_both_throughputs():
    experiments = [
        dict(experiment("keras-3-jax", 200.0), inference_images_per_s_gmean=133_000.0),
        dict(experiment("torch-2.13", 150.0), inference_images_per_s_gmean=301_000.0),
    ]
    row = answer(experiments, [compared("torch-2.13", "keras-3-jax", 0.75, "slower")])
    assert (row["fastest_stack"], row["inference_stack"]) == ("keras-3-jax", "torch-2.13")
    assert (row["inference_images_per_s"], row["fastest_inference_images_per_s"]) == (301_000.0, 133_000.0)
    unmeasured = answer([experiment("keras-3-jax", 200.0)], [])
    assert pd.isna(unmeasured["inference_stack"])
    tied = [dict(row, inference_images_per_s_gmean=133_000.0) for row in experiments]
    row = answer(tied, [compared("torch-2.13", "keras-3-jax", 0.75, "slower")])
    assert row["inference_stack"] == "keras-3-jax"  # a tie at inference keeps the fastest to train


def test_the_lowest_latency_at_batch_1_is_named_beside_the_fastest_to_train_and_among_the_tie_breakers():
    experiments = [
        dict(experiment("keras-3-jax", 200.0), latency_ms_median_mean=0.6, first_epoch_s_median=3.0),
        dict(experiment("torch-2.13", 195.0), latency_ms_median_mean=0.3, first_epoch_s_median=0.5),
    ]
    row = answer(experiments, [compared("torch-2.13", "keras-3-jax", 0.98, "inconclusive")])
    assert (row["fastest_stack"], row["latency_stack"]) == ("keras-3-jax", "torch-2.13")
    assert (row["latency_ms"], row["fastest_latency_ms"]) == (0.3, 0.6)
    assert "lowest latency at batch 1 torch-2.13 (eager), 0.30 ms." in row["recommendation"]
    tied = [dict(each, latency_ms_median_mean=0.6) for each in experiments]
    assert answer(tied, [compared("torch-2.13", "keras-3-jax", 0.98, "inconclusive")])["latency_stack"] == "keras-3-jax"
    assert pd.isna(answer([experiment("keras-3-jax", 200.0)], [])["latency_stack"])


def test_the_experiments_that_spend_a_tenth_of_an_epoch_on_input_are_named_largest_share_first():
    experiments = [
        dict(experiment("keras-3-tensorflow", 100.0), input_share_mean=0.26),
        dict(experiment("torch-2.13", 200.0), input_share_mean=0.02),
        dict(experiment("tensorflow-2.21", 120.0), input_share_mean=0.43),
    ]
    row = answer(experiments, [])
    assert row["input_heavy"] == "tensorflow-2.21 (eager) 43%; keras-3-tensorflow (eager) 26%"
    assert pd.isna(answer([dict(experiment("torch-2.13", 200.0), input_share_mean=0.02)], [])["input_heavy"])


def test_a_rival_never_proven_against_the_fastest_is_not_out_whatever_its_ids_sort_as():
    """r beat the leader l and is named; x was judged only against l (inconclusive), and a retired against x at an
    earlier look. Read from x's side, a's row says "equivalent": x must not count as out, nor the group as a tie."""
    experiments = [
        experiment("r-1.0", 210.0, runs_ok=6),
        experiment("l-1.0", 200.0, runs_ok=8),
        experiment("x-1.0", 195.0, runs_ok=8),
        experiment("a-1.0", 190.0, runs_ok=3),
    ]
    rows = [
        compared("a-1.0", "x-1.0", 0.98, "equivalent within 5 %"),  # retired when x led
        compared("r-1.0", "l-1.0", 1.2, "faster"),
        dict(compared("x-1.0", "l-1.0", 0.97, "inconclusive"), repeats_to_decide=12, pairs=8),
    ]
    row = raced(experiments, rows, "l-1.0_mlp")
    assert (row["fastest_stack"], row["runner_up_stack"]) == ("r-1.0", "l-1.0")
    assert (
        row["confidence"] == "inconclusive"
        and "x-1.0 (eager): compared only with l-1.0 (eager)" in row["confidence_reason"]
    )
    assert row["rounds_to_decide"] == 12  # x's rounds against the leader r beat: the rounds that would decide it


def test_unraced_a_named_baseline_that_is_the_runner_up_leaves_the_lead_untested():
    row = answer(
        [experiment("torch-2.13", 200.0), experiment("tensorflow-2.21", 50.0)],
        [compared("torch-2.13", "tensorflow-2.21", 4.0, "faster")],
    )
    assert row["confidence"] == "untested"


def test_what_sets_the_fastest_apart_names_only_gaps_past_their_thresholds():
    """Beside the lead: the measures the runs took whose gap between the fastest and the runner-up reaches its
    threshold, the fastest's figure first; a GPU figure a CPU run lacks, or a small gap, is not named."""
    fastest = pd.Series(
        {"cpu_utilisation_mean_mean": 96.0, "gpu_utilisation_mean_mean": None, "input_share_mean": 0.03}
    )
    runner_up = pd.Series(
        {"cpu_utilisation_mean_mean": 62.0, "gpu_utilisation_mean_mean": None, "input_share_mean": 0.26}
    )
    assert differences(fastest, runner_up) == "CPU busy 96% vs 62%; input share 3% vs 26%"
    close = runner_up.copy()
    close["cpu_utilisation_mean_mean"], close["input_share_mean"] = 90.0, 0.1
    assert differences(fastest, close) is None


def test_a_decided_group_recommends_the_fastest_with_its_lead_and_confidence():
    row = answer(
        [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 100.0)],
        [compared("mxnet-1.9", "torch-2.13", 0.5, "slower")],
    )
    assert row["recommendation"] == (
        "Use torch-2.13 (eager): 2.00x [1.90, 2.11] (a 95 % interval) the throughput of the runner-up, mxnet-1.9 "
        "(eager); every other tested experiment is proven slower."
    )


def three_way_tie(busy=(90.0, 88.0, 85.0), needs=(None, None)):
    """torch, mxnet and keras-3-jax within a few percent, neither rival proven against torch and no practical number
    of rounds deciding them: the undecided group a reader of page 1 must still be told what to do with."""
    experiments = [
        dict(
            experiment(stack, rate),
            runs=8,
            run_seconds_median=10.0,
            first_epoch_s_median=first,
            inference_images_per_s_gmean=inference,
            cpu_utilisation_mean_mean=cpu,
            train_images_per_busy_core_mean=rate / (cpu / 100 * 2),
            time_to_target_s_mean=None,
        )
        for (stack, rate, first, inference), cpu in zip(
            (("torch-2.13", 200.0, 0.5, 900.0), ("mxnet-1.9", 195.0, 0.3, 800.0), ("keras-3-jax", 190.0, 3.0, 950.0)),
            busy,
        )
    ]
    rows = [
        dict(compared("mxnet-1.9", "torch-2.13", 0.97, "inconclusive"), ratio_low=0.89, ratio_high=1.12),
        dict(compared("keras-3-jax", "torch-2.13", 0.95, "inconclusive"), ratio_low=0.84, ratio_high=1.09),
    ]
    for row, need in zip(rows, needs):
        row.update(repeats_to_decide=need, pairs=8, race_outcome="out of reach", resolvable_ratio=1.15)
        row["race_leader"] = "torch-2.13_mlp"
    return fastest_table(pd.DataFrame(experiments), pd.DataFrame(rows)).iloc[0]


def test_a_three_way_tie_names_its_rivals_what_this_machine_resolves_and_what_to_do_next():
    row = three_way_tie()
    assert row["confidence"] == "inconclusive"
    assert row["recommendation"] == (
        "Undecided between torch-2.13 (eager), mxnet-1.9 (eager) and keras-3-jax (eager) (mxnet-1.9 (eager) 0.97x "
        "[0.89, 1.12] of torch-2.13 (eager); keras-3-jax (eager) 0.95x [0.84, 1.09] of torch-2.13 (eager)). Within "
        "`race.max_rounds` rounds, this machine resolves a lead of 1.15x or more over each. No count of rounds up to `race.max_rounds` "
        "would decide it at the ratios and spread they show: it is out of reach here. Their intervals rule out a gap beyond 20%: if a smaller one does not matter "
        "to you, a next study with `equivalence_margin: 0.20` (chosen before it runs) can test them as a tie. A "
        "quieter machine (no other "
        "load, fixed clocks) narrows the spread that more rounds must beat. Meanwhile, choose on what was measured "
        "but not tested: quickest first epoch mxnet-1.9 (eager), 0.30 s median; fastest at inference keras-3-jax "
        "(eager), 950/s."
    )


def test_where_one_rival_is_out_of_reach_the_rounds_that_decide_the_others_are_named():
    row = three_way_tie(needs=(14, None))
    assert (
        "No count of rounds up to `race.max_rounds` would decide keras-3-jax (eager) at the ratio and spread shown; "
        "the rounds in all that would decide the others: mxnet-1.9 (eager) 14."
    ) in row["recommendation"]


def test_contenders_on_unequal_shares_of_the_cpu_are_compared_per_busy_core_beside_the_verdict():
    """mxnet's default of one OpenMP thread on two cores keeps half the machine busy: page 1 says the comparison is of
    defaults on unequal cores, with each one's images/s per busy core."""
    row = three_way_tie(busy=(97.0, 50.0, 90.0))
    assert row["recommendation"].endswith(
        "Caveat: they kept unequal shares of the CPU busy: torch-2.13 (eager) kept 97% of it busy, mxnet-1.9 (eager) 50%; per busy core 103 against 195 images/s."
    )
    assert "Caveat" not in three_way_tie()["recommendation"]


def test_a_tie_recommends_either_and_every_other_answer_a_next_step():
    experiments = [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 199.0)]
    tie = answer(experiments, [compared("mxnet-1.9", "torch-2.13", 0.995, "equivalent within 5 %")])
    assert tie["recommendation"].startswith(
        "Either torch-2.13 (eager) or mxnet-1.9 (eager): mxnet-1.9 (eager) is proven within the equivalence margin of "
        "torch-2.13 (eager)"
    )
    few = answer(experiments, [compared("mxnet-1.9", "torch-2.13", 0.995, "not tested: fewer than 3 ok repeats")])
    assert few["recommendation"].startswith("The lead is not tested: fewer than 3 ok repeats: raise `repeats`")
    assert answer(experiments[:1], [])["recommendation"].startswith("Nothing to choose between")


def test_a_fastest_that_starts_slower_says_from_what_training_length_it_finishes_first():
    """keras-3-jax trains twice as fast in steady state but compiles for 2.5 s more in its first epoch: at 0.005 s
    saved an image it catches up 500 images after that epoch of 1,000."""
    row = answer(
        [
            dict(experiment("keras-3-jax", 200.0), first_epoch_s_median=3.0, images_per_epoch=1000),
            dict(experiment("torch-2.13", 100.0), first_epoch_s_median=0.5, images_per_epoch=1000),
        ],
        [compared("torch-2.13", "keras-3-jax", 0.5, "slower")],
    )
    assert row["recommendation"].endswith(
        "Its first epoch takes 2.50 s longer (compilation, warm-up): it finishes a training before torch-2.13 "
        "(eager) from about 1,500 images (1.5 epochs of this dataset), a shorter one after it (medians and geometric "
        "means, untested)."
    )


def test_a_rival_proven_faster_on_the_shared_rounds_is_named_not_left_undecided_for_want_of_rounds():
    """mxnet-1.9 has the lower geometric mean over all its repeats but is proven faster on the rounds both ran: page 1
    says so, rather than that no number of rounds would decide it."""
    row = answer(
        [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 190.0)],
        [compared("mxnet-1.9", "torch-2.13", 1.04, "faster")],
    )
    assert row["confidence"] == "inconclusive"
    assert (
        "Proven faster on the rounds both ran: mxnet-1.9 (eager) 1.04x [0.99, 1.09] of torch-2.13"
        in row["recommendation"]
    )
    assert "No practical number" not in row["recommendation"]


def test_a_group_of_one_and_a_decided_group_with_a_faster_untested_experiment_say_so():
    assert answer([experiment("torch-2.13", 200.0)], [])["recommendation"] == (
        "Nothing to choose between: the group has one experiment."
    )
    row = answer(
        [experiment("torch-2.13", 200.0), experiment("mxnet-1.9", 100.0), experiment("jax-0.9", 900.0, runs_ok=2)],
        [compared("mxnet-1.9", "torch-2.13", 0.5, "slower")],
    )
    assert row["recommendation"].endswith("Faster, but too few repeats to test: jax-0.9 (eager).")


def test_an_interval_bound_beside_1_keeps_the_digits_that_show_which_side_it_is_on():
    from dlbench.study.analysis.recommendation import ratio_words

    assert ratio_words(0.83, 0.6925, 1.004) == "0.83x [0.69, 1.004]"
    assert ratio_words(1.05, 0.9996, 1.12) == "1.05x [0.9996, 1.12]"
    assert ratio_words(1.2, 1.0, 1.3) == "1.20x [1.00, 1.30]"


def test_an_answer_stopped_at_the_budget_names_the_setting_that_buys_its_decision():
    undecided = dict(
        confidence="inconclusive",
        rounds=8,
        resolvable_lead=1.29,
        rounds_to_decide=26,
        minutes_to_decide=3.0,
        race_outcome="stopped at the budget",
        budget_to_decide="race.budget_minutes: 13",
        confidence_reason="",
    )
    raced, unraced, decided = (
        decision_words(pd.Series({**undecided, **change}))
        for change in (
            {},
            dict(race_outcome=None, rounds=3, rounds_to_decide=6, budget_to_decide=None),
            dict(confidence="decisive"),
        )
    )
    assert raced == (
        "undecided after 8 rounds (resolves 1.29x); 26 rounds would decide it, about 3 minutes: the budget ran out; "
        "set `race.budget_minutes: 13` or more"
    )
    assert unraced.endswith("; 6 rounds would decide it, about 3 minutes") and decided == "decided after 8 rounds"


def test_minutes_to_decide_read_as_words_in_number():
    assert [minutes_words(minutes) for minutes in (0.4, 1.13, 1.6, 12.0)] == [
        "under a minute",
        "about a minute",
        "about 2 minutes",
        "about 12 minutes",
    ]
