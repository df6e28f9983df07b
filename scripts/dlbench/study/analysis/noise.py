"""Where the noise of a measurement lives, from the epochs the runs already timed.

A run's steady window is its epochs 2..N and the extra steady epochs that lengthened it to `min_steady_seconds`, in the
order they ran. On the log scale (the spread of times is multiplicative):

- Variance components (Kalibera & Jones 2013): a one-way random-effects ANOVA with the runs (fresh processes) as
  groups and their steady epochs as observations. The within-process variance (epoch to epoch) is the mean square
  within runs; the between-process variance (run to run) is (mean square between - mean square within) / n0, n0 the
  runs' effective size (their mean size when all are equal), floored at 0. A run's mean epoch time varies as
  between + within / epochs: more epochs shrink only the second part, only more processes (repeats) the first, so
  `between_process_share`, the first part's share of a run's variance, says which of the two to buy.
- Steady state, per run: the least-squares slope of log epoch time on the epoch's position in the window, with its
  95% t interval. Why a trend test rather than a changepoint search (Barrett et al. 2017): a window holds 3 to 30
  epochs, too few for a changepoint method to place a break, while warm-up that has not finished and a slowdown
  (thermal, a neighbour) both show as a drift one way, which a slope tests directly and sizes. The drift is the
  fitted change of epoch time from the window's first epoch to its last (exp(slope * (n - 1)) - 1). A run is
  "warming up" where its epochs got faster and "slowing down" where they got slower, each only where the slope's
  interval excludes 0 and the drift exceeds STEADY_DRIFT (a smaller trend moves the window's mean by under half of
  it); "steady" otherwise; "too short" below MIN_TREND_EPOCHS epochs.
"""

import json
import math

import numpy as np

from dlbench.study.analysis.statistics import ALPHA
from dlbench.study.analysis.student import t_critical

STEADY_DRIFT = 0.05  # fitted change across the window beyond which a proven trend marks a run unsteady
MIN_TREND_EPOCHS = 4  # a slope with its interval needs 2 degrees of freedom at least
STEADY, WARMING_UP, SLOWING_DOWN, TOO_SHORT = "steady", "warming up", "slowing down", "too short"


def steady_window(run):
    """A runs-table row's steady epoch times, in the order they ran: epochs 2..N, then the extra steady epochs."""
    extra = run.get("extra_steady_epochs_s")
    return json.loads(run["epoch_train_s"])[1:] + (json.loads(extra) if isinstance(extra, str) else [])


def variance_components(windows):
    """(within, between, epochs) of the log epoch times of several runs' windows (lists of seconds): the variances
    epoch to epoch and run to run (one-way random-effects ANOVA, between floored at 0) and the runs' mean window
    length; NaN where there are fewer than two runs of two epochs."""
    logs = [np.log(np.asarray(window, dtype=float)) for window in windows if len(window) >= 2]
    if len(logs) < 2:
        return math.nan, math.nan, math.nan
    sizes = np.array([len(window) for window in logs])
    total, runs = sizes.sum(), len(logs)
    grand = np.concatenate(logs).mean()
    within = sum(((window - window.mean()) ** 2).sum() for window in logs) / (total - runs)
    between_square = sum(size * (window.mean() - grand) ** 2 for size, window in zip(sizes, logs)) / (runs - 1)
    effective_size = (total - (sizes**2).sum() / total) / (runs - 1)
    return float(within), float(max(0.0, (between_square - within) / effective_size)), float(sizes.mean())


def between_process_share(within, between, epochs):
    """The share of a run's mean (log) epoch time variance that lies between processes: more epochs leave it."""
    run_variance = between + within / epochs
    return between / run_variance if run_variance > 0 else math.nan


def trend(window):
    """(drift, low, high): the fitted relative change of epoch time across the window, first epoch to last, with its
    95% interval, from the least-squares slope of log epoch time on position (NaN below MIN_TREND_EPOCHS epochs)."""
    if len(window) < MIN_TREND_EPOCHS:
        return math.nan, math.nan, math.nan
    logs = np.log(np.asarray(window, dtype=float))
    position = np.arange(len(logs), dtype=float) - (len(logs) - 1) / 2
    slope = (position * logs).sum() / (position**2).sum()
    residuals = logs - logs.mean() - slope * position
    error = math.sqrt((residuals**2).sum() / (len(logs) - 2) / (position**2).sum())
    reach = t_critical(ALPHA / 2, len(logs) - 2) * error
    span = len(logs) - 1
    return tuple(math.expm1(value * span) for value in (slope, slope - reach, slope + reach))


def steady_state(drift, low, high):
    """A run's steady state from its trend: steady, warming up, slowing down, or too short to tell."""
    if math.isnan(drift):
        return TOO_SHORT
    if low > 0 and drift > STEADY_DRIFT:
        return SLOWING_DOWN
    if high < 0 and drift < -STEADY_DRIFT:
        return WARMING_UP
    return STEADY


def steadiness_columns(run):
    """A runs-table row's steady-state columns: its steady epochs, their trend and the verdict on it."""
    window = steady_window(run)
    drift, low, high = trend(window)
    return {
        "steady_epochs": len(window),
        "steady_drift": drift,
        "steady_drift_low": low,
        "steady_drift_high": high,
        "steady_state": steady_state(drift, low, high),
    }


def noise_columns(ok_runs):
    """An experiment's summary columns on its noise, from its ok runs (runs-table rows): the standard deviations of
    log epoch time within and between processes, the between-process share of a run's variance, and how many runs
    were steady, still warming up or slowing down."""
    within, between, epochs = variance_components([steady_window(run) for _, run in ok_runs.iterrows()])
    states = ok_runs["steady_state"].value_counts()
    return {
        "epoch_log_sd_within": math.sqrt(within),
        "epoch_log_sd_between": math.sqrt(between),
        "between_process_share": between_process_share(within, between, epochs),
        "runs_steady": int(states.get(STEADY, 0)),
        "runs_warming_up": int(states.get(WARMING_UP, 0)),
        "runs_slowing_down": int(states.get(SLOWING_DOWN, 0)),
    }


# pyperf's warning, "the benchmark seems to be unstable": a standard deviation across repeats of 10 % of the mean or
# more. The summary flags such an experiment (`unstable`) and the quality box counts them.
UNSTABLE_CV = 0.10


def measurement_quality(summary):
    """The study's noise in a few figures, over its experiments (the summary table): the median coefficient of
    variation of throughput across repeats and how many experiments reach 10 %, the median standard deviations of log
    epoch time within and between processes and the median between-process share, the runs steady out of those
    tested for it, and the tries that were contended and run again."""
    tested = summary[["runs_steady", "runs_warming_up", "runs_slowing_down"]].sum()
    spread = summary["train_images_per_s_cv"].dropna()
    return {
        "experiments": len(spread),
        "cv_median": spread.median(),
        "cv_10_percent_or_more": int((spread >= UNSTABLE_CV).sum()),
        "sd_within_median": summary["epoch_log_sd_within"].median(),
        "sd_between_median": summary["epoch_log_sd_between"].median(),
        "between_share_median": summary["between_process_share"].median(),
        "round_share_median": summary["round_share"].median() if "round_share" in summary else float("nan"),
        "runs_steady": int(tested["runs_steady"]),
        "runs_warming_up": int(tested["runs_warming_up"]),
        "runs_slowing_down": int(tested["runs_slowing_down"]),
        "tries_contended": int(summary["tries_contended"].sum()),
    }
