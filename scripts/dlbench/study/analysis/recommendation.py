"""What a reader of page 1 should do with each group's answer: one recommendation per group, built here from the
group's row of the fastest table (dlbench.study.analysis.fastest) and its experiments, so that page 1 only lays it out
and the tests read it without rendering.

- decided: use the fastest, by how much over the runner-up, with the interval's level, and where its first epoch is
  the slower one, from what training length it finishes before the runner-up (its compile time paid back); a faster
  experiment with too few repeats to test is named beside it;
- tie: either of the experiments proven within the margin of the fastest;
- undecided: the rivals still in the running named with their ratios, the smallest lead this machine resolves in the
  rounds run, and what would resolve it: the rounds that would decide it with their minutes, the setting that runs
  them, a quieter machine; where the intervals already rule out a gap beyond some size, that size, as a margin to
  choose for the next study (a margin chosen after seeing these intervals would test nothing); where a rival is
  proven faster than the fastest on the rounds they share, that disagreement;
- untested, alone, contended, failed: what to do next.

A tie or an undecided group ends in the tie-breakers the runs measured beside throughput, each marked untested (no test
compares them): the quickest first epoch among the contenders (median over repeats, compilation included), the group's
first to the target, its fastest at inference and its lowest latency at batch 1 (the fastest table's,
dlbench.study.analysis.fastest). Beside any verdict, a caveat where the experiments it rests on kept unequal shares of
the CPU busy: their images/s per busy core.
"""

import math

import pandas as pd

FASTEST, OPEN, TIED, RUNNER_UP = "fastest", "open", "tied", "runner-up"  # a contender's role beside the fastest
UNEQUAL_CORES = "Caveat: they kept unequal shares of the CPU busy"
# Points of CPU busy (% of all cores) apart that make a caveat here, and a "what differs" on page 1.
BUSY_GAP = 15
WIDEST_USEFUL_MARGIN = 0.25  # a margin past which "a tie" tells a reader little: one stack may be a quarter faster


def name(row):
    return f"{row['stack']} ({row['variant']})"


def listed(names, conjunction="and"):
    """["a", "b", "c"] -> "a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {conjunction} {names[-1]}"


def minutes_words(minutes):
    if minutes < 1:
        return "under a minute"
    return "about a minute" if round(minutes) == 1 else f"about {minutes:.0f} minutes"


def bound_words(bound):
    """An interval's bound at 2 decimals, or at as many more (up to 4) as keep one beside 1 from printing as 1.00: an
    interval [0.69, 1.004] holds 1, which "[0.69, 1.00]" hides."""
    for digits in (2, 3, 4):
        text = f"{bound:.{digits}f}"
        if float(text) != 1 or bound == 1:
            break
    return text


def ratio_words(ratio, low, high):
    """A ratio and its interval where it has one: "1.15x [1.02, 1.30]" (the report prints every ratio so)."""
    interval = "" if pd.isna(low) else f" [{bound_words(low)}, {bound_words(high)}]"
    return f"{ratio:.2f}x{interval}"


def percent_words(level):
    """An interval's confidence as a percentage with the digits that tell Holm's levels apart ("98.3 %"), and as many
    more as keep a level below 1 from printing as 100 % ("99.986 %"): the report prints every level so."""
    digits = 3
    while level < 1 and float(f"{level * 100:.{digits}g}") >= 100:
        digits += 1
    return f"{level * 100:.{digits}g} %"


def decided(row, contenders):
    level = "" if pd.isna(row["lead_confidence"]) else f" (a {percent_words(row['lead_confidence'])} interval)"
    advice = (
        f"Use {row['fastest_stack']} ({row['fastest_variant']}): "
        f"{ratio_words(row['lead'], row['lead_low'], row['lead_high'])}{level} the throughput of the runner-up, "
        f"{row['runner_up_stack']} ({row['runner_up_variant']}); every other tested experiment is proven slower."
    )
    untested = (
        "" if pd.isna(row["faster_untested"]) else f" Faster, but too few repeats to test: {row['faster_untested']}."
    )
    return advice + payback_words(contenders) + untested


def payback(fastest, runner_up):
    """(the fastest's extra first-epoch seconds, the training length in examples from which it finishes before the
    runner-up): where its first epoch (median, compilation included) is slower, it catches up at the seconds per
    example its steady rate saves; None where it starts no slower or a figure is missing."""
    columns = ("first_epoch_s_median", "train_images_per_s_gmean", "images_per_epoch")
    if any(column not in fastest or pd.isna(fastest[column]) or pd.isna(runner_up[column]) for column in columns):
        return None
    later = fastest["first_epoch_s_median"] - runner_up["first_epoch_s_median"]
    saved = 1 / runner_up["train_images_per_s_gmean"] - 1 / fastest["train_images_per_s_gmean"]
    if later <= 0 or saved <= 0:
        return None
    return later, fastest["images_per_epoch"] + later / saved


def payback_words(contenders):
    """Where the fastest starts slower than the runner-up: from what training length it finishes before it."""
    if len(contenders) < 2:
        return ""
    fastest, runner_up = contenders.iloc[0], contenders.iloc[1]
    found = payback(fastest, runner_up)
    if found is None:
        return ""
    later, examples = found
    unit = "sequences" if pd.notna(fastest.get("train_tokens_per_s_gmean")) else "images"
    return (
        f" Its first epoch takes {later:.2f} s longer (compilation, warm-up): it finishes a training before "
        f"{name(runner_up)} from about {examples:,.0f} {unit} ({examples / fastest['images_per_epoch']:.1f} epochs "
        f"of this dataset), a shorter one after it (medians and geometric means, untested)."
    )


def tied(contenders):
    fastest, others = name(contenders.iloc[0]), [name(rival) for _, rival in contenders.iloc[1:].iterrows()]
    each = "is" if len(others) == 1 else "each is"
    return (
        f"Either {listed([fastest, *others], 'or')}: {listed(others)} {each} proven within the equivalence margin of "
        f"{fastest}, so throughput does not choose between them here."
    )


def margin_for_tie(against_fastest):
    """The smallest margin, rounded up to a whole percent, outside which every open rival's interval against the
    fastest already rules the ratio out (each interval at the level its verdict was tested at); None where one has no
    interval or the margin would be too wide to mean a tie."""
    if against_fastest.empty or against_fastest["ratio_low"].isna().any():
        return None
    widest = max((against_fastest["ratio_high"] - 1).max(), (1 / against_fastest["ratio_low"] - 1).max())
    margin = math.ceil(widest * 100) / 100
    return margin if margin < WIDEST_USEFUL_MARGIN else None


def ratio_list(rows):
    return "; ".join(
        f"{name(rival)} {ratio_words(rival['ratio'], rival['ratio_low'], rival['ratio_high'])} of "
        f"{rival['baseline_stack']} ({rival['baseline_variant']})"
        for _, rival in rows.iterrows()
    )


def how_to_decide(row, open_rows):
    """The rounds that would decide an undecided group, and the setting that runs them; where no count up to the most
    rounds would, which rivals (`open_rows`: their comparisons) stay out of reach and what the others need."""
    raced = pd.notna(row["race_outcome"])
    practical = "No count of rounds up to `race.max_rounds`" if raced else "No practical number of rounds"
    if pd.isna(row["rounds_to_decide"]):
        needs = open_rows.get("repeats_to_decide", pd.Series(float("nan"), index=open_rows.index))
        never = [name(rival) for index, rival in open_rows.iterrows() if pd.isna(needs[index])]
        reachable = [
            f"{name(rival)} {int(needs[index])}" for index, rival in open_rows.iterrows() if pd.notna(needs[index])
        ]
        if not never or not reachable:
            return f"{practical} would decide it at the ratios and spread they show: it is out of reach here."
        return (
            f"{practical} would decide {listed(never)} at the ratio and spread shown; the rounds in all that would "
            f"decide the others: {', '.join(reachable)}."
        )
    cost = [] if pd.isna(row["more_rounds_to_decide"]) else [f"{row['more_rounds_to_decide']} more"]
    cost += [] if pd.isna(row["minutes_to_decide"]) else [minutes_words(row["minutes_to_decide"])]
    spent = f" ({', '.join(cost)})" if cost else ""
    if not raced:
        return f"To decide it, run {row['rounds_to_decide']} rounds in all{spent}: raise `repeats` to that."
    setting = row.get("budget_to_decide")
    if pd.isna(setting):
        return f"{row['rounds_to_decide']} rounds in all would decide it{spent}."
    return (
        f"The budget ran out first: {row['rounds_to_decide']} rounds in all would decide it{spent}. To buy them, set "
        f"`{setting}` or more (more where another group stopped at the budget costs less: the cheaper decision is "
        "bought first) and run the same command again: the finished runs are kept, and the race's error rate holds "
        "however far it goes on."
    )


def undecided(row, contenders, unsettled):
    """The rivals still in the running, how close this machine can tell them apart, and what would decide.
    unsettled: the comparisons of the fastest's rivals that are neither slower nor equivalent (inconclusive, or a
    rival proven faster on the rounds it shares with the fastest)."""
    names = [name(contender) for _, contender in contenders[contenders["role"] != TIED].iterrows()]
    tied_names = [name(contender) for _, contender in contenders[contenders["role"] == TIED].iterrows()]
    open_rows = unsettled[unsettled["verdict"] != "faster"]
    beating = unsettled[unsettled["verdict"] == "faster"]
    sentences = [f"Undecided between {listed(names)}" + (f" ({ratio_list(open_rows)})." if len(open_rows) else ".")]
    if tied_names:
        are = "is" if len(tied_names) == 1 else "are"
        sentences.append(f"{listed(tied_names)} {are} proven within the margin of {names[0]}.")
    if len(beating):
        sentences.append(
            f"Proven faster on the rounds both ran: {ratio_list(beating)}, though {names[0]} has the higher geometric "
            "mean over all its repeats: more rounds of both settle which holds."
        )
        return " ".join(sentences)
    rounds = "" if pd.isna(row["rounds"]) else f"In its {row['rounds']} rounds, this"
    if pd.notna(row["race_outcome"]):  # a race's resolvable lead is at the most rounds a group may run
        rounds = "Within `race.max_rounds` rounds, this"
    if pd.notna(row["resolvable_lead"]):
        sentences.append(
            f"{rounds or 'This'} machine resolves a lead of {row['resolvable_lead']:.2f}x or more over each."
        )
    sentences.append(how_to_decide(row, open_rows))
    margin = margin_for_tie(open_rows[open_rows["baseline_experiment_id"] == contenders.iloc[0]["experiment_id"]])
    if margin is not None:
        sentences.append(
            f"Their intervals rule out a gap beyond {margin:.0%}: if a smaller one does not matter to you, a next "
            f"study with `equivalence_margin: {margin:.2f}` (chosen before it runs) can test them as a tie."
        )
    sentences.append("A quieter machine (no other load, fixed clocks) narrows the spread that more rounds must beat.")
    return " ".join(sentences)


def tie_breakers(row, contenders):
    """The measures beside steady throughput on which a reader can choose among tied or undecided contenders, each
    with its best and marked untested: the contenders' quickest first epoch, the group's first to the target, its
    fastest at inference and its lowest latency at batch 1 (the fastest table's)."""
    found = []
    first = contenders["first_epoch_s_median"].dropna() if "first_epoch_s_median" in contenders else ()
    if len(first) > 1:
        best = contenders.loc[first.idxmin()]
        found.append(f"quickest first epoch {name(best)}, {best['first_epoch_s_median']:.2f} s median")
    if pd.notna(row.get("to_target_stack")):
        found.append(
            f"first to target {row['to_target_stack']} ({row['to_target_variant']}), {row['to_target_s']:.2f} s mean"
        )
    if pd.notna(row.get("inference_stack")):
        found.append(
            f"fastest at inference {row['inference_stack']} ({row['inference_variant']}), "
            f"{row['inference_images_per_s']:,.0f}/s"
        )
    if pd.notna(row.get("latency_stack")):
        found.append(
            f"lowest latency at batch 1 {row['latency_stack']} ({row['latency_variant']}), {row['latency_ms']:.2f} ms"
        )
    if not found:
        return ""
    return " Meanwhile, choose on what was measured but not tested: " + "; ".join(found) + "."


def unequal_cores(contenders):
    """A caveat where the contenders kept unequal shares of the CPU busy (CPU runs): the most and least busy with
    their images/s per busy core; None where the gap is under BUSY_GAP points."""
    if "cpu_utilisation_mean_mean" not in contenders or (contenders["device"] != "cpu").any():
        return None
    busy = contenders["cpu_utilisation_mean_mean"].dropna()
    if len(busy) < 2 or busy.max() - busy.min() < BUSY_GAP:
        return None
    most, least = contenders.loc[busy.idxmax()], contenders.loc[busy.idxmin()]
    per_core = contenders.get("train_images_per_busy_core_mean")
    cores = ""
    if per_core is not None and pd.notna(per_core[busy.idxmax()]) and pd.notna(per_core[busy.idxmin()]):
        cores = f"; per busy core {per_core[busy.idxmax()]:,.0f} against {per_core[busy.idxmin()]:,.0f} images/s"
    return (
        f"{UNEQUAL_CORES}: {name(most)} kept {most['cpu_utilisation_mean_mean']:.0f}% of it busy, {name(least)} "
        f"{least['cpu_utilisation_mean_mean']:.0f}%{cores}."
    )


def decision_words(row):
    """The group's confidence as page 1's table prints it: with the rounds behind it, a tie's reason, and where
    undecided, the smallest lead those rounds resolve and what would decide it (the rounds, their minutes, and
    whether they run past the race's last look)."""
    rounds = "" if pd.isna(row.get("rounds")) else f" after {row['rounds']} rounds"
    if row["confidence"] == "decisive":
        return f"decided{rounds}"
    if row["confidence"] == "equivalent":
        return f"tie{rounds}: {row['confidence_reason']}"
    if row["confidence"] != "inconclusive":
        return row["confidence"]
    resolves = "" if pd.isna(row["resolvable_lead"]) else f" (resolves {row['resolvable_lead']:.2f}x)"
    if pd.isna(row["rounds_to_decide"]):
        against = "" if pd.isna(row.get("undecidable_rivals")) else f" against {row['undecidable_rivals']}"
        if pd.notna(row["race_outcome"]):
            return f"out of reach{rounds}{resolves}: no count up to `race.max_rounds` would decide it{against}"
        return f"undecided{rounds}{resolves}; no practical number of rounds would decide it{against}"
    cost = "" if pd.isna(row["minutes_to_decide"]) else f", {minutes_words(row['minutes_to_decide'])}"
    setting = row.get("budget_to_decide")
    at_budget = f": the budget ran out; set `{setting}` or more" if pd.notna(setting) else ""
    return f"undecided{rounds}{resolves}; {row['rounds_to_decide']} rounds would decide it{cost}{at_budget}"


def next_step(row):
    """What to do with a group that has no comparison to act on."""
    if row["confidence"] == "untested":
        return (
            "Not tested against the fastest: its comparisons are against another experiment (the config's "
            f"`comparison_baseline`, or a race's earlier leader): {row['confidence_reason']}."
        )
    if row["confidence"] == "contended":
        return (
            "Rerun on a quiet machine: an experiment of the group was never measured clean, so a contender may be "
            "missing."
        )
    if row["confidence"] == "alone":
        if row["experiments"] == 1:
            return "Nothing to choose between: the group has one experiment."
        return "Nothing to choose between: only one experiment of the group finished (see Failed runs)."
    return "No answer: no run of the group finished (see Failed runs)."


def recommendation(row, contenders, unsettled, caveat):
    """Page 1's recommendation for a group. row: its fastest-table row (confidence, lead, rounds and what would
    decide, the first to target and the fastest at inference); contenders: the group's summary rows still in the
    running with their `role`, the fastest first (the runner-up beside it where decided, the tied or unproven rivals
    otherwise); unsettled: the comparisons of the fastest's rivals neither slower nor equivalent (fastest.py);
    caveat: unequal_cores' of the contenders, or None."""
    flag = row["confidence"]
    if flag == "decisive":
        advice = decided(row, contenders)
    elif flag == "equivalent":
        advice = tied(contenders) + tie_breakers(row, contenders)
    elif flag == "inconclusive" and len(contenders) > 1:
        advice = undecided(row, contenders, unsettled) + tie_breakers(row, contenders)
    elif flag == "inconclusive":  # the runner-up was never tested: too few ok repeats
        advice = f"The lead is {row['confidence_reason']}: raise `repeats` to 3 or more to test it."
    else:
        advice = next_step(row)
    return advice if caveat is None else f"{advice} {caveat}"
