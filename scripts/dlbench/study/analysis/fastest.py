"""The report's first answer, one row per comparison group: the fastest experiment that can be tested (at least
MIN_REPEATS ok repeats, where the group has any: as the comparisons' baseline is chosen), its throughput with interval,
its lead over the runner-up with the comparisons table's verdict and interval (at the level that verdict was tested at,
so the two agree), its cost per million images where the config sets a price, faster experiments with too few repeats to
test, the first to reach the target accuracy in every repeat where that is another experiment, the fastest at inference
(geometric means) and the lowest latency at batch 1 (means of the runs' medians; both untested: each is measured once a
run and not raced), the experiments that spend a tenth or more of a steady epoch on input, and how far the answer can be
trusted. Read from the summary and comparisons tables (pandas), so the verdict on page 1 is the one the comparisons
table holds.

The answer is decisive only where every other tested experiment of the group is proven slower than the fastest, not
the runner-up alone: a rival with a noisier measurement can stay unproven behind a runner-up that is proven slower,
and naming the fastest claims it beats them all. It is a tie where each rival is proven slower or equivalent and one
is equivalent. Those claims are the comparisons' own, made in the family of every pair of the group (and, raced,
over every look), so they hold together at 0.05: a raced rival judged against an earlier leader counts as slower
through a chain of proven "slower" claims, and naming the fastest holds the group's chance of a false claim at 0.05.

Beside it: the rounds the group ran, its race's outcome where the study raced, and for an inconclusive answer what
would decide it: the rounds its unproven rivals need at the ratio and spread they show (the comparisons'
`repeats_to_decide`), what those rounds would cost, at the median seconds of the runs so far, and the smallest lead
the study's rounds resolve at that spread (`resolvable_lead`).
"""

import math
from typing import NamedTuple

import pandas as pd

from dlbench.study.analysis.cost import COST_COLUMNS
from dlbench.study.analysis.race import AT_BUDGET
from dlbench.study.analysis.recommendation import (
    BUSY_GAP,
    FASTEST,
    OPEN,
    RUNNER_UP,
    TIED,
    decision_words,
    listed,
    name,
    recommendation,
    unequal_cores,
)
from dlbench.study.analysis.statistics import MIN_REPEATS, is_equivalence
from dlbench.study.analysis.summary import PARTLY_INPUT_BOUND
from dlbench.study.analysis.tables import GROUP

# A language model's throughput in tokens as well (empty for images): the same ratios, a reader's unit.
FASTEST_TOKENS = ["train_tokens_per_s_gmean", "train_tokens_per_s_ci95_low", "train_tokens_per_s_ci95_high"]
DECISIVE, EQUIVALENT, INCONCLUSIVE, UNTESTED = "decisive", "equivalent", "inconclusive", "untested"
FASTER, SLOWER = "faster", "slower"  # the comparisons' verdicts of a rival against its baseline
CONTENDED, ALONE, FAILED = "contended", "alone", "failed"
COLUMNS = [
    *GROUP,
    "experiments",
    "fastest_stack",
    "fastest_variant",
    "fastest_experiment_id",
    "train_images_per_s_gmean",  # the fastest's, under the summary's names: one name from the record to page 1
    "train_images_per_s_ci95_low",
    "train_images_per_s_ci95_high",
    *FASTEST_TOKENS,
    "runner_up_stack",
    "runner_up_variant",
    "lead",
    "lead_low",
    "lead_high",
    "lead_confidence",
    "lead_verdict",
    "differs",
    "confidence",
    "confidence_reason",
    "decision",
    "faster_untested",
    "to_target_stack",
    "to_target_variant",
    "to_target_s",
    "fastest_to_target_s",
    "rounds",
    "race_outcome",
    "rounds_to_decide",
    "more_rounds_to_decide",
    "minutes_to_decide",
    "resolvable_lead",
    "undecidable_rivals",
    "budget_to_decide",
    "inference_stack",
    "inference_variant",
    "inference_images_per_s",
    "fastest_inference_images_per_s",
    "latency_stack",
    "latency_variant",
    "latency_ms",
    "fastest_latency_ms",
    "input_heavy",
    "unequal_cores",
    "recommendation",
]
# What the runs measured beside throughput, read for what sets the fastest apart from the runner-up: (summary column,
# its words, how a figure prints, the smallest gap worth naming). Busy is the share of the machine's CPUs (or of the
# GPU) the run kept working: on a 2-core machine one thread against two shows as about 50% against 100%.
DIFFERENCES = [
    ("cpu_utilisation_mean_mean", "CPU busy", "{:.0f}%", BUSY_GAP),
    ("gpu_utilisation_mean_mean", "GPU busy", "{:.0f}%", BUSY_GAP),
    ("input_share_mean", "input share", "{:.0%}", 0.1),
]
# The fastest's cost per million images with its interval, where the summary has costs (a price is set).
FASTEST_COSTS = [column for column in COST_COLUMNS if column.startswith("cost_per_million_images")]


def race_leader(compared):
    """The experiment that led the group's race at its last look, None where the study did not race."""
    leaders = compared["race_leader"].dropna() if "race_leader" in compared else compared.iloc[0:0]
    return leaders.iloc[0] if len(leaders) else None


def page_leader(compared):
    """The experiment page 1 names first where the study raced: the race's leader at its last look, unless a live
    rival was proven faster than it (the leader is chosen on each side's own rounds, the test pairs their common ones):
    then the quickest of those rivals. None where the study did not race."""
    leader = race_leader(compared)
    beat = compared[(compared["baseline_experiment_id"] == leader) & (compared["verdict"] == FASTER)]
    return leader if beat.empty else beat.loc[beat["ratio"].idxmax(), "experiment_id"]


def ranked(part, leader=None):
    """The group's measured experiments, fastest first; `leader` first where the study raced (the race compared
    every rival with it, over the rounds it ran: a rival that left early may show a higher mean over fewer rounds),
    then those with enough ok repeats to be tested before the rest, as the comparisons' baseline is chosen."""
    measured = part[part["train_images_per_s_gmean"].notna()]
    testable = measured["runs_ok"] >= MIN_REPEATS
    return measured.assign(testable=testable, leads=measured["experiment_id"] == leader).sort_values(
        ["leads", "testable", "train_images_per_s_gmean"], ascending=[False, False, False]
    )


def flipped(verdict):
    """A pair's verdict read from the other side."""
    return {FASTER: SLOWER, SLOWER: FASTER}.get(verdict, verdict)


def tested_pairs(compared):
    """(rival, baseline, verdict) of each comparison that was tested."""
    tested = compared[~compared["verdict"].str.startswith("not tested")]
    return tested[["experiment_id", "baseline_experiment_id", "verdict"]].itertuples(False)


def claims(compared):
    """{(a, b): the verdict of a against b} for every tested pair of the group's comparisons, both ways round."""
    found = {}
    for rival, baseline, verdict in tested_pairs(compared):
        found[(rival, baseline)], found[(baseline, rival)] = verdict, flipped(verdict)
    return found


class Standing(NamedTuple):
    """A rival's standing against the fastest: the words a reader sees, whether it is out of the running (proven
    slower, directly or by a chain, or equivalent) and whether it ties (proven equivalent)."""

    text: str
    out: bool
    tied: bool = False


def against_fastest(fastest, compared, names):
    """{rival: its standing against the fastest}. A rival compared with the fastest reads its verdict. A raced rival
    judged against an earlier leader, or against the leader a rival was proven faster than, stands behind the fastest
    where proven slower than an experiment that is itself proven slower than the fastest ("slower") or equivalent to
    it ("slower than <that experiment>", out of the running beside a tie): every claim of the group holds together at
    the family's level, so the chain does too. A rival proven slower than one still open against the fastest is out
    of the running too ("slower than <that experiment>"): it cannot be the group's fastest, though it is not proven
    against it. Any other rival is not proven against the fastest: it reads "compared only with <its comparator>:
    <its own verdict>". `names`: {experiment: the name a reader sees}; returns {rival: Standing}."""
    found = claims(compared)
    standing = {
        rival: Standing(verdict, proven(verdict), is_equivalence(verdict))
        for (rival, other), verdict in found.items()
        if other == fastest
    }
    behind = True
    while behind:  # follow the chains of "slower" until no rival joins
        behind = False
        for (rival, other), verdict in found.items():
            if rival == fastest or rival in standing or verdict != SLOWER or other not in standing:
                continue
            if standing[other].out:
                directly = standing[other].text == SLOWER
                standing[rival] = Standing(SLOWER if directly else f"slower than {names.get(other, other)}", True)
                behind = True
    for rival, other, verdict in tested_pairs(compared):
        if rival != fastest and rival not in standing:  # its own verdict, never the flipped one of a rival's row
            # Proven slower than a rival still open against the fastest: not proven against the fastest, but out of
            # the running, for an experiment proven slower than another of the group cannot be its fastest.
            out = verdict == SLOWER
            words = f"slower than {names.get(other, other)}" if out else f"compared only with {names.get(other, other)}"
            standing[rival] = Standing(words if out else f"{words}: {verdict}", out)
    return standing


def in_the_running(runner_up, verdict, standing):
    """{experiment: its role} of those a reader still weighs beside the fastest: every rival not proven against it
    (open) or proven within the margin of it (tied), or, where none is, the runner-up it was chosen over when that one
    is proven slower."""
    rivals = {rival: TIED if held.tied else OPEN for rival, held in standing.items() if held.tied or not held.out}
    return rivals or ({runner_up["experiment_id"]: RUNNER_UP} if verdict == SLOWER else {})


def judges(fastest, compared):
    """The experiments the fastest's rivals were judged against: the fastest, and the race's leader where the fastest
    is a live rival proven faster than it."""
    leader = race_leader(compared)
    beat = leader is not None and leader != fastest and claims(compared).get((fastest, leader)) == FASTER
    return {fastest, leader} if beat else {fastest}


def runner_up_of(order, compared):
    """The runner-up: the quickest other experiment compared with the fastest as their baseline, or the race's leader
    where the fastest is a rival proven faster than it, where any is (raced, a rival that left against an earlier
    leader was never compared with the last one), else the quickest other."""
    others, fastest = order.iloc[1:], order.iloc[0]["experiment_id"]
    judging = judges(fastest, compared)
    against = set(compared.loc[compared["baseline_experiment_id"].isin(judging), "experiment_id"]) | judging - {fastest}
    judged = others[others["experiment_id"].isin(against)]
    return judged.iloc[0] if len(judged) else others.iloc[0]


def lead_of(fastest, runner_up, compared):
    """(lead, low, high, confidence, verdict) of the fastest over the runner-up: their row of the group's comparisons,
    inverted where the runner-up was compared with the fastest (its interval is at the level its verdict was tested
    at), read as it is where the fastest was compared with the runner-up (a raced rival proven faster than the
    leader); else the ratio of geometric means, untested."""
    pair = compared[
        (compared["experiment_id"] == runner_up["experiment_id"])
        & (compared["baseline_experiment_id"] == fastest["experiment_id"])
    ]
    if len(pair):
        row = pair.iloc[0]
        return 1 / row["ratio"], 1 / row["ratio_high"], 1 / row["ratio_low"], row["ratio_confidence"], row["verdict"]
    pair = compared[
        (compared["experiment_id"] == fastest["experiment_id"])
        & (compared["baseline_experiment_id"] == runner_up["experiment_id"])
    ]
    if len(pair) and race_leader(compared) is not None:  # unraced, a named comparison_baseline stays untested
        row = pair.iloc[0]
        return row["ratio"], row["ratio_low"], row["ratio_high"], row["ratio_confidence"], flipped(row["verdict"])
    ratio = fastest["train_images_per_s_gmean"] / runner_up["train_images_per_s_gmean"]
    baseline = compared["baseline_stack"].iloc[0] if len(compared) else "another experiment"
    untested = f"{UNTESTED}: the group's baseline is {baseline} (comparison_baseline)"
    return ratio, float("nan"), float("nan"), float("nan"), untested


def proven(verdict):
    """Whether a comparison's verdict of a rival against the fastest puts it out of the running: slower or
    equivalent."""
    return verdict == SLOWER or is_equivalence(verdict)


def other_rivals(names, runner_up, standing):
    """[(name, Standing)] of the fastest's tested rivals other than the runner-up; experiments with too few repeats
    to test are named apart (faster_untested)."""
    return [(names.get(rival, rival), held) for rival, held in standing.items() if rival != runner_up["experiment_id"]]


def confidence(verdict, unmeasured, others=()):
    """(flag, why): decisive (the runner-up and every other tested rival proven slower), equivalent (a tie: each rival
    proven slower or within the equivalence margin, and one within it), inconclusive (a rival proven neither: the
    runner-up's verdict, else the unproven rivals), untested (the comparisons are against another baseline), alone
    (no runner-up: verdict None), or contended where an experiment of the group was never measured clean: a contender
    may be missing. `others`: [(name, Standing)] of the other tested rivals (other_rivals)."""
    if unmeasured:
        return CONTENDED, f"{unmeasured} experiment(s) of the group never measured clean (machine busy)"
    if verdict is None:
        return ALONE, "no other experiment of the group finished"
    if verdict.startswith(UNTESTED):
        return UNTESTED, verdict
    if not proven(verdict):
        return INCONCLUSIVE, verdict
    unproven = [f"{rival}: {held.text}" for rival, held in others if not held.out]
    if unproven:
        return INCONCLUSIVE, f"the runner-up is proven {verdict}, but not " + "; ".join(unproven)
    tied = [f"{rival} is proven {held.text}" for rival, held in others if held.tied]
    if verdict == SLOWER and not tied:
        return DECISIVE, "the runner-up and every other tested experiment are proven slower"
    return EQUIVALENT, "; ".join([f"the runner-up is proven {verdict}", *tied])


def open_rivals(fastest, compared, verdicts=(INCONCLUSIVE,)):
    """The comparisons of the fastest's rivals against the fastest or the leader it beat with one of `verdicts`: by
    default those that stayed inconclusive."""
    judged = compared["baseline_experiment_id"].isin(judges(fastest["experiment_id"], compared))
    return compared[judged & compared["verdict"].isin(verdicts)]


def what_would_decide(part, fastest, compared, rivals):
    """(rounds, more rounds, minutes, runs) that would decide an inconclusive answer: the most rounds any unproven
    rival of the fastest (`rivals`, open_rivals') needs, how many more than the fewest its rivals have run, and the
    minutes and runs those added rounds of the rivals and the fastest would take; Nones where no practical number
    would decide one of them."""
    beaten = (compared["baseline_experiment_id"] == fastest["experiment_id"]) & (compared["verdict"] == FASTER)
    if rivals.empty or beaten.any() or "repeats_to_decide" not in rivals or rivals["repeats_to_decide"].isna().any():
        return None, None, None, None  # more rounds do not decide for the fastest against a rival proven faster
    needed = int(rivals["repeats_to_decide"].max())
    more = max(needed - int(rivals["pairs"].min()), 0)
    racing = part[part["experiment_id"].isin([fastest["experiment_id"], *rivals["experiment_id"]])]
    seconds = racing["run_seconds_median"].sum() if "run_seconds_median" in racing else float("nan")
    return needed, more, more * seconds / 60, more * len(racing)


def budget_to_decide(race, minutes, runs):
    """The setting that buys a group stopped at the budget its decision: each budget key the study set, raised by
    what deciding the group would cost (`minutes` of runs, `runs` runs), as the config would hold it."""
    settings = []
    if race.get("budget_minutes") is not None and pd.notna(minutes):
        settings.append(f"race.budget_minutes: {math.ceil(race['budget_minutes'] + minutes)}")
    if race.get("budget_runs") is not None and pd.notna(runs):
        settings.append(f"race.budget_runs: {race['budget_runs'] + runs}")
    return ", ".join(settings) or None


def resolvable_lead(rivals):
    """The smallest lead over its unproven rivals (open_rivals') the study's rounds resolve at the spread they show
    (the largest of their comparisons' `resolvable_ratio`): a closer race than this stays undecided within the
    budget."""
    if rivals.empty or "resolvable_ratio" not in rivals:
        return None
    return rivals["resolvable_ratio"].max()


def race_columns(part, fastest, compared, flag, unsettled, race):
    """The rounds the group ran, its race's outcome (None unraced) and, where inconclusive, what would decide it
    (`unsettled`: the comparisons of the fastest's rivals neither slower nor equivalent, open_rivals'), with the
    budget setting that buys it where the race stopped at the budget (race: the config's `race`, None unraced)."""
    outcomes = compared["race_outcome"].dropna() if "race_outcome" in compared else compared.iloc[0:0]
    columns = {
        "rounds": int(part["runs"].max()) if "runs" in part else None,
        "race_outcome": outcomes.iloc[0] if len(outcomes) else None,
    }
    if flag == INCONCLUSIVE:
        rivals = unsettled[unsettled["verdict"] == INCONCLUSIVE]
        needed, more, minutes, runs = what_would_decide(part, fastest, compared, rivals)
        columns.update(rounds_to_decide=needed, more_rounds_to_decide=more, minutes_to_decide=minutes)
        if columns["race_outcome"] == AT_BUDGET and race is not None:
            columns["budget_to_decide"] = budget_to_decide(race, minutes, runs)
        columns["resolvable_lead"] = resolvable_lead(rivals)
        undecidable = rivals[rivals["repeats_to_decide"].isna()] if "repeats_to_decide" in rivals else rivals
        names = [name(row) for _, row in undecidable.iterrows()]
        columns["undecidable_rivals"] = listed(names) if names else None
    return columns


def reached_target(part):
    """The experiments that reached the target accuracy in every ok repeat: only their times to target compare."""
    return part[(part["runs_ok"] > 0) & (part["time_to_target_runs"] == part["runs_ok"])]


def to_target(part):
    """The experiment that reached the target accuracy in every ok repeat in the least training time (first epoch
    included); None where none did."""
    reached = reached_target(part)
    return None if reached.empty else reached.loc[reached["time_to_target_s_mean"].idxmin()]


def best_untested(part, fastest, column, lowest=False):
    """The experiment with the best `column` (the highest, or with `lowest` the lowest), a figure measured beside
    training and never raced or tested, the fastest to train where it ties; None where no run measured it."""
    if column not in part or part[column].isna().all():
        return None
    best = part.loc[part[column].idxmin() if lowest else part[column].idxmax()]
    mine = fastest.get(column, float("nan"))
    ties = best[column] >= mine if lowest else best[column] <= mine
    return fastest if ties else best


def input_heavy(part):
    """The group's experiments whose input work, not hidden by compute, took PARTLY_INPUT_BOUND or more of a steady
    epoch (mean over repeats), the largest share first, as "stack (variant) 31%"; None where none did: part of why
    they lost, or of what the fastest could still gain."""
    if "input_share_mean" not in part:
        return None
    heavy = part[part["input_share_mean"] >= PARTLY_INPUT_BOUND].sort_values("input_share_mean", ascending=False)
    return "; ".join(f"{name(row)} {row['input_share_mean']:.0%}" for _, row in heavy.iterrows()) or None


def differences(fastest, runner_up):
    """What the runs measured beside throughput that sets the fastest apart from the runner-up, the fastest's figure
    first: each measure of DIFFERENCES whose gap reaches its threshold ("CPU busy 96% vs 62%; input share 3% vs 26%");
    None where none does. Untested: where to look for why it won, not a proven cause."""
    found = []
    for column, words, shown, gap in DIFFERENCES:
        ours, theirs = fastest.get(column), runner_up.get(column)
        if pd.notna(ours) and pd.notna(theirs) and round(abs(ours - theirs), 9) >= gap:  # 0.13 - 0.03 is 0.1
            found.append(f"{words} {shown.format(ours)} vs {shown.format(theirs)}")
    return "; ".join(found) or None


def group_row(key, part, compared, race):
    row = dict(zip(GROUP, key), experiments=len(part))
    unmeasured = int((part["measurement_note"].fillna("") != "").sum())
    order = ranked(part, page_leader(compared))
    if order.empty:
        statuses = ", ".join(sorted(set(",".join(part["statuses"]).split(","))))
        flag = CONTENDED if unmeasured else FAILED  # never measured clean, or failed outright
        row.update(confidence=flag, confidence_reason=f"no run finished ({statuses})")
        row.update(decision=decision_words(row), unequal_cores=False)
        return dict(row, recommendation=recommendation(row, part.iloc[0:0], compared.iloc[0:0], None))
    fastest = order.iloc[0]
    row.update(
        fastest_stack=fastest["stack"],
        fastest_variant=fastest["variant"],
        fastest_experiment_id=fastest["experiment_id"],
        train_images_per_s_gmean=fastest["train_images_per_s_gmean"],
        train_images_per_s_ci95_low=fastest["train_images_per_s_ci95_low"],
        train_images_per_s_ci95_high=fastest["train_images_per_s_ci95_high"],
    )
    row.update({column: fastest[column] for column in [*FASTEST_TOKENS, *FASTEST_COSTS] if column in fastest})
    quicker = order[~order["testable"] & (order["train_images_per_s_gmean"] > fastest["train_images_per_s_gmean"])]
    row["faster_untested"] = ", ".join(name(late) for _, late in quicker.iterrows()) or None
    verdict, others, contenders = None, [], {fastest["experiment_id"]: FASTEST}
    if len(order) > 1:
        names = {row["experiment_id"]: name(row) for _, row in part.iterrows()}
        standing = against_fastest(fastest["experiment_id"], compared, names)
        runner_up = runner_up_of(order, compared)
        lead, low, high, level, verdict = lead_of(fastest, runner_up, compared)
        others = other_rivals(names, runner_up, standing)
        row.update(runner_up_stack=runner_up["stack"], runner_up_variant=runner_up["variant"])
        row.update(lead=lead, lead_low=low, lead_high=high, lead_confidence=level, lead_verdict=verdict)
        row["differs"] = differences(fastest, runner_up)
        contenders.update(in_the_running(runner_up, verdict, standing))
    row["confidence"], row["confidence_reason"] = confidence(verdict, unmeasured, others)
    unsettled = open_rivals(fastest, compared, (INCONCLUSIVE, FASTER))
    row.update(race_columns(part, fastest, compared, row["confidence"], unsettled, race))
    row["input_heavy"] = input_heavy(part)
    serving = best_untested(part, fastest, "inference_images_per_s_gmean")
    if serving is not None:
        row.update(inference_stack=serving["stack"], inference_variant=serving["variant"])
        row.update(inference_images_per_s=serving["inference_images_per_s_gmean"])
        row["fastest_inference_images_per_s"] = fastest.get("inference_images_per_s_gmean")
    replying = best_untested(part, fastest, "latency_ms_median_mean", lowest=True)
    if replying is not None:
        row.update(latency_stack=replying["stack"], latency_variant=replying["variant"])
        row.update(latency_ms=replying["latency_ms_median_mean"])
        row["fastest_latency_ms"] = fastest.get("latency_ms_median_mean")
    quickest = to_target(part)
    if quickest is not None:
        row.update(to_target_stack=quickest["stack"], to_target_variant=quickest["variant"])
        row.update(to_target_s=quickest["time_to_target_s_mean"], fastest_to_target_s=fastest["time_to_target_s_mean"])
    running = part.set_index("experiment_id").loc[list(contenders)].reset_index()
    running["role"] = list(contenders.values())
    caveat = unequal_cores(running)
    row["decision"] = decision_words(row)
    row["unequal_cores"] = caveat is not None
    row["recommendation"] = recommendation(row, running, unsettled, caveat)
    return row


def fastest_table(summary, comparisons, race=None):
    """One row per comparison group (COLUMNS, and FASTEST_COSTS where the summary has costs); a group where nothing
    finished is there too, failed or contended. race: the config's `race` where the study raced (its budget keys)."""
    compared = {key: part for key, part in comparisons.groupby(GROUP, dropna=False, sort=False)}
    empty = comparisons.iloc[0:0]
    rows = [
        group_row(key, part, compared.get(key, empty), race)
        for key, part in summary.groupby(GROUP, dropna=False, sort=True)
    ]
    costs = [column for column in FASTEST_COSTS if column in summary]
    integers = dict.fromkeys(["rounds", "rounds_to_decide", "more_rounds_to_decide"], "Int64")
    return pd.DataFrame(rows, columns=COLUMNS + costs).astype(integers)
