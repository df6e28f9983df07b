"""The report's first answer, one row per comparison group: the fastest experiment, its throughput with interval, its
margin over the runner-up with the comparisons table's verdict, the fastest to target accuracy where that is another
experiment, and how far the answer can be trusted. Read from the summary and comparisons tables (pandas), so the
verdict on page 1 is the one the comparisons table holds.
"""

import pandas as pd

from dlbench.analysis.statistics import MIN_REPEATS
from dlbench.analysis.tables import GROUP

DECISIVE, EQUIVALENT, INCONCLUSIVE = "decisive", "equivalent", "inconclusive"
CONTENDED, ALONE, FAILED = "contended", "alone", "failed"
COLUMNS = [
    *GROUP,
    "experiments",
    "fastest_stack",
    "fastest_variant",
    "fastest_experiment_id",
    "images_per_s",
    "images_per_s_ci95_low",
    "images_per_s_ci95_high",
    "runner_up_stack",
    "runner_up_variant",
    "margin",
    "margin_ci95_low",
    "margin_ci95_high",
    "margin_verdict",
    "confidence",
    "confidence_reason",
    "to_target_stack",
    "to_target_variant",
    "to_target_s",
    "fastest_to_target_s",
]


def ranked(part):
    """The group's measured experiments, fastest first; those with enough ok repeats to be tested before the rest,
    as the comparisons' baseline is chosen."""
    measured = part[part["train_images_per_s_gmean"].notna()]
    testable = measured["runs_ok"] >= MIN_REPEATS
    return measured.assign(testable=testable).sort_values(
        ["testable", "train_images_per_s_gmean"], ascending=[False, False]
    )


def margin_of(fastest, runner_up, tested):
    """(margin, low, high, verdict) of the fastest over the runner-up: the runner-up's comparison row inverted where
    the group's baseline is the fastest, else the ratio of geometric means, untested."""
    row = tested[(tested["experiment_id"] == runner_up["experiment_id"])]
    if len(row) and row.iloc[0]["baseline_experiment_id"] == fastest["experiment_id"]:
        row = row.iloc[0]
        return 1 / row["ratio"], 1 / row["ratio_ci95_high"], 1 / row["ratio_ci95_low"], row["verdict"]
    ratio = fastest["train_images_per_s_gmean"] / runner_up["train_images_per_s_gmean"]
    return ratio, float("nan"), float("nan"), "not tested: the group's baseline is another experiment"


def confidence(verdict, unmeasured):
    """(flag, why): decisive (the runner-up proven slower), equivalent (proven within the margin), inconclusive
    (neither), alone (no runner-up: verdict None), or contended where some run of the group was never measured clean:
    a missing contender may change the answer."""
    if unmeasured:
        return CONTENDED, f"{unmeasured} run(s) of the group never measured clean (machine busy)"
    if verdict is None:
        return ALONE, "no other experiment of the group finished"
    if verdict == "slower":
        return DECISIVE, "the runner-up is proven slower"
    if verdict.startswith("equivalent"):
        return EQUIVALENT, f"the runner-up is proven {verdict}"
    return INCONCLUSIVE, verdict


def to_target(part):
    """The experiment that reached the target accuracy in the least training time, first epoch included; None
    where none reached it."""
    reached = part[part["time_to_target_s_mean"].notna()]
    if reached.empty:
        return None
    return reached.loc[reached["time_to_target_s_mean"].idxmin()]


def group_row(key, part, comparisons, unmeasured):
    order = ranked(part)
    if order.empty:
        statuses = ", ".join(sorted(set(",".join(part["statuses"]).split(","))))
        flag = CONTENDED if unmeasured else FAILED  # never measured clean, or failed outright
        return dict(
            zip(GROUP, key), experiments=len(part), confidence=flag, confidence_reason=f"no run finished ({statuses})"
        )
    fastest = order.iloc[0]
    row = dict(zip(GROUP, key), experiments=len(part), fastest_stack=fastest["stack"])
    row.update(
        fastest_variant=fastest["variant"],
        fastest_experiment_id=fastest["experiment_id"],
        images_per_s=fastest["train_images_per_s_gmean"],
        images_per_s_ci95_low=fastest["train_images_per_s_ci95_low"],
        images_per_s_ci95_high=fastest["train_images_per_s_ci95_high"],
    )
    verdict = None
    if len(order) > 1:
        runner_up = order.iloc[1]
        margin, low, high, verdict = margin_of(fastest, runner_up, comparisons)
        row.update(runner_up_stack=runner_up["stack"], runner_up_variant=runner_up["variant"])
        row.update(margin=margin, margin_ci95_low=low, margin_ci95_high=high, margin_verdict=verdict)
    row["confidence"], row["confidence_reason"] = confidence(verdict, unmeasured)
    quickest = to_target(part)
    if quickest is not None:
        row.update(to_target_stack=quickest["stack"], to_target_variant=quickest["variant"])
        row.update(to_target_s=quickest["time_to_target_s_mean"], fastest_to_target_s=fastest["time_to_target_s_mean"])
    return row


def fastest_table(summary, comparisons, runs):
    """One row per comparison group (COLUMNS); a group where nothing finished is there, failed, with its statuses."""
    never_clean = runs[runs["final_try"] & (runs["status"] == "contended")]
    unmeasured = never_clean.groupby(GROUP, dropna=False).size()
    rows = [
        group_row(key, part, comparisons, int(unmeasured.get(key, 0)))
        for key, part in summary.groupby(GROUP, dropna=False, sort=True)
    ]
    return pd.DataFrame(rows, columns=COLUMNS)
