"""What a reader of page 1 should do with each group's answer: one recommendation per group, built here from the
group's row of the fastest table (dlbench.analysis.fastest) and its experiments, so that page 1 only lays it out and
the tests read it without rendering.

- decided: use the fastest, by how much over the runner-up, at the confidence its verdict was tested at, and where
  its first epoch is the slower one, from what training length it finishes first (its compile time paid back);
- tie: either of the experiments proven within the margin;
- undecided: the rivals still in the running named with their ratios, the smallest lead this machine resolves in the
  rounds run, and what would resolve it: the rounds that would decide it with their minutes (past the race's last
  look where they are), a wider equivalence margin where the intervals already lie inside one, a quieter machine;
- untested, alone, contended, failed: what to do next.

A tie or an undecided group ends in the tie-breakers the runs measured beside throughput, each marked untested (no
test compares them): the quickest first epoch (median over repeats, compilation included), the first to the target
(mean over repeats that all reached it) and the fastest at inference (geometric mean). Beside any verdict, a caveat
where the experiments it rests on kept unequal shares of the CPU busy (each framework's own thread default): their
images/s per busy core, and the config switch that sets every framework's threads alike.
"""

import pandas as pd

FASTEST, OPEN, TIED, RUNNER_UP = "fastest", "open", "tied", "runner-up"  # a contender's role beside the fastest
UNEQUAL_CORES = "Caveat: compared as each framework's defaults on unequal shares of the CPU"
# Said once under the recommendations where any carries the caveat.
EQUAL_CORES = (
    "This study left each framework its own default threads; to compare them on equal cores, set `cpu_threads: all` "
    "in the config (every framework that can be pinned runs on every core)."
)
BUSY_GAP = 15  # points of CPU busy (% of all cores) between contenders that make a caveat, as page 1's "differs"
WIDEST_USEFUL_MARGIN = 0.5  # an equivalence margin past which "a tie" no longer tells a reader anything


def name(row):
    return f"{row['stack']} ({row['variant']})"


def listed(names, conjunction="and"):
    """["a", "b", "c"] -> "a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {conjunction} {names[-1]}"


def minutes_words(minutes):
    return "under a minute" if minutes < 1 else f"about {minutes:.0f} minutes"


def ratio_words(ratio, low, high):
    """A ratio and its interval where it has one: "1.15x [1.02, 1.30]" (the report prints every ratio so)."""
    interval = "" if pd.isna(low) else f" [{low:.2f}, {high:.2f}]"
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
    return advice + payback_words(contenders)


def payback(fastest, runner_up):
    """(the fastest's extra first-epoch seconds, the training length in examples from which it finishes first):
    where its first epoch (median, compilation included) is slower than the runner-up's, it catches up at the
    seconds per example its steady rate saves; None where it starts no slower or a figure is missing."""
    columns = ("first_epoch_s_median", "train_images_per_s_gmean", "images_per_epoch")
    if any(column not in fastest or pd.isna(fastest[column]) or pd.isna(runner_up[column]) for column in columns):
        return None
    later = fastest["first_epoch_s_median"] - runner_up["first_epoch_s_median"]
    saved = 1 / runner_up["train_images_per_s_gmean"] - 1 / fastest["train_images_per_s_gmean"]
    if later <= 0 or saved <= 0:
        return None
    return later, fastest["images_per_epoch"] + later / saved


def payback_words(contenders):
    """Where the fastest starts slower than the runner-up: from what training length it finishes first."""
    if len(contenders) < 2:
        return ""
    fastest, runner_up = contenders.iloc[0], contenders.iloc[1]
    found = payback(fastest, runner_up)
    if found is None:
        return ""
    later, examples = found
    unit = "sequences" if pd.notna(fastest.get("train_tokens_per_s_gmean")) else "images"
    return (
        f" Its first epoch takes {later:.2f} s longer (compilation, warm-up): it finishes a training first from about "
        f"{examples:,.0f} {unit} ({examples / fastest['images_per_epoch']:.1f} epochs of this dataset); a shorter one "
        f"finishes sooner on {name(runner_up)} (medians and geometric means, untested)."
    )


def tied(row, contenders):
    others = [name(rival) for _, rival in contenders.iloc[1:].iterrows()]
    return (
        f"Either {listed([name(contenders.iloc[0]), *others], 'or')}: proven to train within the equivalence margin of "
        "each other, so throughput does not choose between them here."
    )


def margin_for_tie(open_rows):
    """The smallest equivalence margin inside which every open rival's interval already lies (each interval at the
    level its verdict was tested at); None where one has no interval or it would be too wide to mean a tie."""
    if open_rows.empty or open_rows["ratio_low"].isna().any():
        return None
    margin = max((open_rows["ratio_high"] - 1).max(), (1 / open_rows["ratio_low"] - 1).max())
    return margin if margin < WIDEST_USEFUL_MARGIN else None


def undecided(row, contenders, open_rows):
    """The rivals still in the running, how close this machine can tell them apart, and what would decide."""
    ratios = [
        f"{name(rival)} {ratio_words(rival['ratio'], rival['ratio_low'], rival['ratio_high'])} of "
        f"{rival['baseline_stack']} ({rival['baseline_variant']})"
        for _, rival in open_rows.iterrows()
    ]
    names = [name(contender) for _, contender in contenders[contenders["role"] != TIED].iterrows()]
    tied = [name(contender) for _, contender in contenders[contenders["role"] == TIED].iterrows()]
    sentences = [f"Undecided between {listed(names)}" + (f" ({'; '.join(ratios)})." if ratios else ".")]
    if tied:
        are = "is" if len(tied) == 1 else "are"
        sentences.append(f"{listed(tied)} {are} proven within the margin of {names[0]}.")
    rounds = "" if pd.isna(row["rounds"]) else f"In its {row['rounds']} rounds, this"
    if pd.notna(row["resolvable_lead"]):
        sentences.append(
            f"{rounds or 'This'} machine resolves a lead of {row['resolvable_lead']:.2f}x or more over each."
        )
    if pd.notna(row["rounds_to_decide"]):
        more = "" if pd.isna(row["rounds"]) else f"{max(row['rounds_to_decide'] - row['rounds'], 0)} more, "
        minutes = "" if pd.isna(row["minutes_to_decide"]) else minutes_words(row["minutes_to_decide"])
        raced = pd.notna(row["race_outcome"]) and row["rounds_to_decide"] > (row["rounds"] or 0)
        how = ": raise the last of `race.looks`" if raced else ": raise `repeats`"
        sentences.append(f"To decide it, run {row['rounds_to_decide']} rounds in all ({more}{minutes}){how}.")
    else:
        sentences.append("No practical number of rounds would decide it at the ratios and spread they show.")
    margin = margin_for_tie(open_rows)
    if margin is not None:
        sentences.append(
            f"Their intervals lie within {margin:.0%} of even: an `equivalence_margin` of {margin:.2f} or more "
            "would test them as a tie, if a gap that size does not matter to you."
        )
    sentences.append("A quieter machine (no other load, fixed clocks) narrows the spread that more rounds must beat.")
    return " ".join(sentences)


def tie_breakers(contenders):
    """The measures beside steady throughput on which a reader can choose among tied or undecided contenders, each
    named with its best and marked untested."""
    found = []
    first = contenders["first_epoch_s_median"].dropna() if "first_epoch_s_median" in contenders else ()
    if len(first) > 1:
        best = contenders.loc[first.idxmin()]
        found.append(f"quickest first epoch {name(best)}, {best['first_epoch_s_median']:.2f} s median")
    reached = contenders[(contenders["runs_ok"] > 0) & (contenders["time_to_target_runs"] == contenders["runs_ok"])]
    if len(reached):
        best = reached.loc[reached["time_to_target_s_mean"].idxmin()]
        found.append(f"first to target {name(best)}, {best['time_to_target_s_mean']:.2f} s mean")
    inference = (
        contenders["inference_images_per_s_gmean"].dropna() if "inference_images_per_s_gmean" in contenders else ()
    )
    if len(inference) > 1:
        best = contenders.loc[inference.idxmax()]
        found.append(f"fastest at inference {name(best)}, {best['inference_images_per_s_gmean']:,.0f}/s")
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


NEXT_STEP = {
    "untested": "Compare against the fastest: the config's `comparison_baseline` tests every experiment against "
    "another stack, so none is proven against the fastest.",
    "contended": "Rerun on a quiet machine: an experiment of the group was never measured clean, so a contender may "
    "be missing.",
    "alone": "Nothing to choose between: only one experiment of the group finished (see Failed runs).",
    "failed": "No answer: no run of the group finished (see Failed runs).",
}


def recommendation(row, contenders, open_rows):
    """Page 1's recommendation for a group. row: its fastest-table row so far (confidence, lead, rounds and what
    would decide); contenders: the group's summary rows still in the running, the fastest first (the runner-up
    beside it where decided, the tied or unproven rivals otherwise); open_rows: the comparisons of the unproven
    rivals against the fastest (or the leader it beat)."""
    flag = row["confidence"]
    if flag == "decisive":
        advice = decided(row, contenders)
    elif flag == "equivalent":
        advice = tied(row, contenders) + tie_breakers(contenders)
    elif flag == "inconclusive" and len(contenders) > 1:
        advice = undecided(row, contenders, open_rows) + tie_breakers(contenders)
    elif flag == "inconclusive":  # the runner-up was never tested: too few ok repeats
        advice = f"The lead is {row['confidence_reason']}: raise `repeats` to 3 or more to test it."
    else:
        advice = NEXT_STEP[flag]
    caveat = unequal_cores(contenders) if len(contenders) > 1 else None
    return advice if caveat is None else f"{advice} {caveat}"
