"""The report's first answer, one row per comparison group: the fastest experiment that can be tested (at least
MIN_REPEATS ok repeats, where the group has any: as the comparisons' baseline is chosen), its throughput with
interval, its lead over the runner-up with the comparisons table's verdict and interval (at the level that verdict was
tested at, so the two agree), its cost per million images where the config sets a price, faster experiments with too
few repeats to test, the first to reach the target accuracy in every repeat where that is another experiment, and how far the answer
can be trusted. Read from the summary and comparisons tables (pandas), so the verdict on page 1 is the one the
comparisons table holds.

The answer is decisive only where every other tested experiment of the group is proven slower than the fastest, not
the runner-up alone: a rival with a noisier measurement can stay unproven behind a runner-up that is proven slower,
and naming the fastest claims it beats them all. Those claims are the comparisons' own, made in the family of every
pair of the group, so naming the fastest holds the group's chance of a false claim at 0.05 too.

Beside it: the rounds the group ran, its race's outcome where the study raced, and for an inconclusive answer what
would decide it: the rounds its unproven rivals need at the ratio and spread they show (the comparisons'
`repeats_to_decide`), what those rounds would cost, at the median seconds of the runs so far, and the smallest lead
the study's rounds resolve at that spread (`resolvable_lead`).
"""

import pandas as pd

from dlbench.analysis.cost import COST_COLUMNS
from dlbench.analysis.statistics import MIN_REPEATS
from dlbench.analysis.tables import GROUP

DECISIVE, EQUIVALENT, INCONCLUSIVE, UNTESTED = "decisive", "equivalent", "inconclusive", "untested"
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
    "lead",
    "lead_low",
    "lead_high",
    "lead_confidence",
    "lead_verdict",
    "confidence",
    "confidence_reason",
    "faster_untested",
    "to_target_stack",
    "to_target_variant",
    "to_target_s",
    "fastest_to_target_s",
    "rounds",
    "race_outcome",
    "rounds_to_decide",
    "minutes_to_decide",
    "resolvable_lead",
]
# The fastest's cost per million images with its interval, where the summary has costs (a price is set).
FASTEST_COSTS = [column for column in COST_COLUMNS if column.startswith("cost_per_million_images")]


def race_leader(compared):
    """The experiment that led the group's race at its last look, None where the study did not race."""
    leaders = compared["race_leader"].dropna() if "race_leader" in compared else compared.iloc[0:0]
    return leaders.iloc[0] if len(leaders) else None


def ranked(part, leader=None):
    """The group's measured experiments, fastest first; the race's leader first where it raced (the race compared
    every rival with it, over the rounds it ran: a rival that left early may show a higher mean over fewer rounds),
    then those with enough ok repeats to be tested before the rest, as the comparisons' baseline is chosen."""
    measured = part[part["train_images_per_s_gmean"].notna()]
    testable = measured["runs_ok"] >= MIN_REPEATS
    return measured.assign(testable=testable, leads=measured["experiment_id"] == leader).sort_values(
        ["leads", "testable", "train_images_per_s_gmean"], ascending=[False, False, False]
    )


def runner_up_of(order, compared):
    """The runner-up: the quickest other experiment compared with the fastest, where any is (raced, a rival that left
    against an earlier leader was never compared with the last one), else the quickest other."""
    others = order.iloc[1:]
    against = compared.loc[compared["baseline_experiment_id"] == order.iloc[0]["experiment_id"], "experiment_id"]
    judged = others[others["experiment_id"].isin(set(against))]
    return judged.iloc[0] if len(judged) else others.iloc[0]


def name(row):
    return f"{row['stack']} ({row['variant']})"


def lead_of(fastest, runner_up, compared):
    """(lead, low, high, confidence, verdict) of the fastest over the runner-up: the runner-up's row of the group's
    comparisons, inverted (its interval is at the level its verdict was tested at), where the group's baseline is the
    fastest; else the ratio of geometric means, untested."""
    row = compared[compared["experiment_id"] == runner_up["experiment_id"]]
    if len(row) and row.iloc[0]["baseline_experiment_id"] == fastest["experiment_id"]:
        row = row.iloc[0]
        return 1 / row["ratio"], 1 / row["ratio_high"], 1 / row["ratio_low"], row["ratio_confidence"], row["verdict"]
    ratio = fastest["train_images_per_s_gmean"] / runner_up["train_images_per_s_gmean"]
    baseline = compared["baseline_stack"].iloc[0] if len(compared) else "another experiment"
    untested = f"{UNTESTED}: the group's baseline is {baseline} (comparison_baseline)"
    return ratio, float("nan"), float("nan"), float("nan"), untested


def proven(verdict):
    return verdict == "slower" or verdict.startswith("equivalent")


def unproven_rivals(fastest, runner_up, compared):
    """The other rivals of the fastest (the runner-up aside) that its comparisons test but prove neither slower nor
    equivalent, as "stack (variant): verdict"; experiments with too few repeats to test are named apart
    (faster_untested)."""
    rivals = compared[
        (compared["baseline_experiment_id"] == fastest["experiment_id"])
        & (compared["experiment_id"] != runner_up["experiment_id"])
        & ~compared["verdict"].str.startswith("not tested")
    ]
    return [f"{name(rival)}: {rival['verdict']}" for _, rival in rivals.iterrows() if not proven(rival["verdict"])]


def confidence(verdict, unmeasured, unproven=()):
    """(flag, why): decisive (the runner-up and every other tested rival proven slower), equivalent (each proven
    slower or within the equivalence margin, the runner-up within it), inconclusive (a rival proven neither: the
    runner-up's verdict, else the unproven rivals), untested (the comparisons are against another baseline), alone
    (no runner-up: verdict None), or contended where an experiment of the group was never measured clean: a contender
    may be missing."""
    if unmeasured:
        return CONTENDED, f"{unmeasured} experiment(s) of the group never measured clean (machine busy)"
    if verdict is None:
        return ALONE, "no other experiment of the group finished"
    if verdict.startswith(UNTESTED):
        return UNTESTED, verdict
    if not proven(verdict):
        return INCONCLUSIVE, verdict
    if unproven:
        return INCONCLUSIVE, f"the runner-up is proven {verdict}, but not " + "; ".join(unproven)
    if verdict == "slower":
        return DECISIVE, "the runner-up and every other tested experiment are proven slower"
    return EQUIVALENT, f"the runner-up is proven {verdict}"


def open_rivals(fastest, compared):
    """The comparisons of the fastest's rivals that stayed inconclusive."""
    return compared[
        (compared["baseline_experiment_id"] == fastest["experiment_id"]) & (compared["verdict"] == INCONCLUSIVE)
    ]


def what_would_decide(part, fastest, compared):
    """(rounds, minutes) that would decide an inconclusive answer: the most rounds any unproven rival of the fastest
    needs, and the minutes the added rounds of those rivals and the fastest would take; (None, None) where no
    practical number would decide one of them."""
    rivals = open_rivals(fastest, compared)
    if rivals.empty or "repeats_to_decide" not in rivals or rivals["repeats_to_decide"].isna().any():
        return None, None
    needed = int(rivals["repeats_to_decide"].max())
    more = max(needed - int(rivals["pairs"].min()), 0)
    racing = part[part["experiment_id"].isin([fastest["experiment_id"], *rivals["experiment_id"]])]
    seconds = racing["run_seconds_median"].sum() if "run_seconds_median" in racing else float("nan")
    return needed, more * seconds / 60


def resolvable_lead(fastest, compared):
    """The smallest lead over its unproven rivals the study's rounds resolve at the spread they show (the largest of
    their comparisons' `resolvable_ratio`): a closer race than this stays undecided within the budget."""
    rivals = open_rivals(fastest, compared)
    if rivals.empty or "resolvable_ratio" not in rivals:
        return None
    return rivals["resolvable_ratio"].max()


def race_columns(part, fastest, compared, flag):
    """The rounds the group ran, its race's outcome (None unraced) and, where inconclusive, what would decide it."""
    outcomes = compared["race_outcome"].dropna() if "race_outcome" in compared else compared.iloc[0:0]
    columns = {
        "rounds": int(part["runs"].max()) if "runs" in part else None,
        "race_outcome": outcomes.iloc[0] if len(outcomes) else None,
    }
    if flag == INCONCLUSIVE:
        columns["rounds_to_decide"], columns["minutes_to_decide"] = what_would_decide(part, fastest, compared)
        columns["resolvable_lead"] = resolvable_lead(fastest, compared)
    return columns


def reached_target(part):
    """The experiments that reached the target accuracy in every ok repeat: only their times to target compare."""
    return part[(part["runs_ok"] > 0) & (part["time_to_target_runs"] == part["runs_ok"])]


def to_target(part):
    """The experiment that reached the target accuracy in every ok repeat in the least training time (first epoch
    included); None where none did."""
    reached = reached_target(part)
    return None if reached.empty else reached.loc[reached["time_to_target_s_mean"].idxmin()]


def group_row(key, part, compared):
    row = dict(zip(GROUP, key), experiments=len(part))
    unmeasured = int((part["measurement_note"].fillna("") != "").sum())
    order = ranked(part, race_leader(compared))
    if order.empty:
        statuses = ", ".join(sorted(set(",".join(part["statuses"]).split(","))))
        flag = CONTENDED if unmeasured else FAILED  # never measured clean, or failed outright
        return dict(row, confidence=flag, confidence_reason=f"no run finished ({statuses})")
    fastest = order.iloc[0]
    row.update(
        fastest_stack=fastest["stack"],
        fastest_variant=fastest["variant"],
        fastest_experiment_id=fastest["experiment_id"],
        images_per_s=fastest["train_images_per_s_gmean"],
        images_per_s_ci95_low=fastest["train_images_per_s_ci95_low"],
        images_per_s_ci95_high=fastest["train_images_per_s_ci95_high"],
    )
    row.update({column: fastest[column] for column in FASTEST_COSTS if column in fastest})
    quicker = order[~order["testable"] & (order["train_images_per_s_gmean"] > fastest["train_images_per_s_gmean"])]
    row["faster_untested"] = ", ".join(name(late) for _, late in quicker.iterrows()) or None
    verdict, unproven = None, []
    if len(order) > 1:
        runner_up = runner_up_of(order, compared)
        lead, low, high, level, verdict = lead_of(fastest, runner_up, compared)
        unproven = unproven_rivals(fastest, runner_up, compared)
        row.update(runner_up_stack=runner_up["stack"], runner_up_variant=runner_up["variant"])
        row.update(lead=lead, lead_low=low, lead_high=high, lead_confidence=level, lead_verdict=verdict)
    row["confidence"], row["confidence_reason"] = confidence(verdict, unmeasured, unproven)
    row.update(race_columns(part, fastest, compared, row["confidence"]))
    quickest = to_target(part)
    if quickest is not None:
        row.update(to_target_stack=quickest["stack"], to_target_variant=quickest["variant"])
        row.update(to_target_s=quickest["time_to_target_s_mean"], fastest_to_target_s=fastest["time_to_target_s_mean"])
    return row


def fastest_table(summary, comparisons):
    """One row per comparison group (COLUMNS, and FASTEST_COSTS where the summary has costs); a group where nothing
    finished is there too, failed or contended."""
    compared = {key: part for key, part in comparisons.groupby(GROUP, dropna=False, sort=False)}
    empty = comparisons.iloc[0:0]
    rows = [
        group_row(key, part, compared.get(key, empty)) for key, part in summary.groupby(GROUP, dropna=False, sort=True)
    ]
    costs = [column for column in FASTEST_COSTS if column in summary]
    return pd.DataFrame(rows, columns=COLUMNS + costs).astype({"rounds": "Int64", "rounds_to_decide": "Int64"})
