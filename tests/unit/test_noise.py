"""Where the noise lives (dlbench/study/analysis/noise.py): the variance components of log epoch time within and between
processes against hand computations, the steady-state trend test against SciPy's regression, and the columns the
runs and summary tables get from them."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from dlbench.study.analysis.noise import (
    SLOWING_DOWN,
    STEADY,
    TOO_SHORT,
    WARMING_UP,
    between_process_share,
    measurement_quality,
    noise_columns,
    steadiness_columns,
    steady_window,
    trend,
    variance_components,
)
from scipy import stats


def seconds(logs):
    return list(np.exp(logs))


def test_balanced_variance_components_are_the_anova_worked_by_hand():
    """Two runs of three epochs, log times 1, 2, 3 and 4, 5, 6: within = (1 + 0 + 1 + 1 + 0 + 1) / (6 - 2) = 1;
    between: the means 2 and 5 about 3.5 give 3 * (1.5^2 + 1.5^2) / 1 = 13.5, so (13.5 - 1) / 3."""
    within, between, epochs = variance_components([seconds([1, 2, 3]), seconds([4, 5, 6])])
    assert (within, between, epochs) == pytest.approx((1.0, 12.5 / 3, 3.0))


def test_unbalanced_variance_components_use_the_effective_run_size():
    """Runs of 2 and 3 epochs, log times 0, 2 and 3, 4, 5: within = (1 + 1 + 1 + 0 + 1) / (5 - 2) = 4 / 3; between:
    the means 1 and 4 about 2.8 give 2 * 1.8^2 + 3 * 1.2^2 = 10.8 over 1, n0 = (5 - (4 + 9) / 5) / 1 = 2.4."""
    within, between, epochs = variance_components([seconds([0, 2]), seconds([3, 4, 5])])
    assert (within, between, epochs) == pytest.approx((4 / 3, (10.8 - 4 / 3) / 2.4, 2.5))


def test_runs_alike_have_no_variance_between_processes_and_too_few_have_none_at_all():
    within, between, _ = variance_components([seconds([1, 2, 1, 2]), seconds([2, 1, 2, 1])])
    assert within > 0 and between == 0.0  # the floor: the runs' means differ less than their epochs do
    assert all(math.isnan(value) for value in variance_components([seconds([1, 2, 3]), [0.5]]))
    assert between_process_share(0.04, 0.01, 4) == pytest.approx(0.01 / (0.01 + 0.01))


def test_the_trend_is_the_least_squares_slope_of_log_epoch_time_with_its_interval():
    window = [0.073, 0.070, 0.062, 0.060, 0.055, 0.050, 0.049, 0.045, 0.044, 0.041]
    fit = stats.linregress(np.arange(len(window)), np.log(window))
    reach = stats.t.ppf(0.975, len(window) - 2) * fit.stderr
    span = len(window) - 1
    expected = [math.expm1(value * span) for value in (fit.slope, fit.slope - reach, fit.slope + reach)]
    assert trend(window) == pytest.approx(expected)
    assert all(math.isnan(value) for value in trend([0.07, 0.06, 0.05]))


@pytest.mark.parametrize(
    "window, state",
    [
        ([0.073, 0.070, 0.062, 0.060, 0.055, 0.050, 0.049, 0.045, 0.044, 0.041], WARMING_UP),  # 73 -> 41 ms
        ([0.050, 0.051, 0.053, 0.055, 0.056, 0.058, 0.060, 0.061], SLOWING_DOWN),
        ([0.050, 0.052, 0.049, 0.051, 0.050, 0.052, 0.049, 0.051], STEADY),
        ([0.0500, 0.0501, 0.0502, 0.0503, 0.0504, 0.0505], STEADY),  # a proven trend, but under 5 % in all
        ([0.05, 0.04, 0.06], TOO_SHORT),
    ],
)
def test_a_run_is_steady_unless_a_proven_trend_moves_it_beyond_the_tolerance(window, state):
    run = pd.Series({"epoch_train_s": json.dumps([0.5, *window[:2]]), "extra_steady_epochs_s": json.dumps(window[2:])})
    assert steady_window(run) == window
    assert steadiness_columns(run)["steady_state"] == state


def test_an_experiments_noise_columns_and_the_studys_quality():
    generator = np.random.default_rng(1)
    runs = pd.DataFrame(
        [
            {"epoch_train_s": json.dumps([0.5, *np.exp(level + generator.normal(0, 0.01, 12)).tolist()])}
            for level in (np.log(0.05), np.log(0.06), np.log(0.055))
        ]
    )
    runs = runs.assign(**pd.DataFrame([steadiness_columns(run) for _, run in runs.iterrows()]))
    columns = noise_columns(runs)
    assert columns["epoch_log_sd_within"] == pytest.approx(0.01, rel=0.4)
    assert columns["epoch_log_sd_between"] == pytest.approx(np.std(np.log([0.05, 0.06, 0.055]), ddof=1), rel=0.2)
    assert columns["between_process_share"] > 0.95  # twelve epochs averaged: run-to-run noise is nearly all of it
    assert (columns["runs_steady"], columns["runs_warming_up"], columns["runs_slowing_down"]) == (3, 0, 0)
    summary = pd.DataFrame([dict(columns, train_images_per_s_cv=cv, tries_contended=1) for cv in (0.04, 0.12)])
    quality = measurement_quality(summary)
    assert quality["cv_median"] == pytest.approx(0.08) and quality["cv_10_percent_or_more"] == 1
    assert (quality["runs_steady"], quality["tries_contended"]) == (6, 2)
