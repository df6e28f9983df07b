"""End to end: beside steady throughput, what a user training for minutes also pays - the first epoch (tracing,
compilation, warm-up) and the training time to the target accuracy - and where those rank the stacks differently."""

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.markers import TICKDOWN, TICKUP

from dlbench.study.analysis.fastest import ranked, reached_target
from dlbench.study.palette import series_style
from dlbench.study.report.common import (
    figure_grid,
    figure_titles,
    key_legend,
    lead_in,
    log_ticks,
    ok_runs,
    panel_heading,
    panel_rows,
    panel_title,
    panel_titles,
    save,
    spans_a_decade,
    stack_rows,
    variant_label,
)

TITLE = "End to end: first epoch and time to target accuracy"
ABSENT = "no experiment finished with a measured throughput (Failed runs, Contended runs)."

# summary column -> (what it is, marker fill). One statistic for both, the mean over repeats, as page 1 gives time to
# target: a run's time to target includes its first epoch, so its marker never sits left of the first epoch's where
# every repeat reached the target.
MEASURES = {
    "first_epoch_s_mean": ("first epoch, hollow", "none"),
    "time_to_target_s_mean": ("time to target, filled", "full"),
}
# the runs' own values behind each mean, drawn as ticks: a repeat's first epoch hangs below its row, its time to
# target stands above it, so the two measures' repeats read apart where they interleave
REPEATED = {
    "first_epoch_s": ("a repeat's first epoch (tick below)", TICKDOWN),
    "time_to_target_s": ("a repeat's time to target (tick above)", TICKUP),
}


def end_to_end_figure(measured, runs, path):
    """Per panel, each stack and variant's first epoch (hollow) and time to target (filled), joined by a line, with
    each repeat's own as a tick (below the row for a first epoch, above it for a time to target), in its series'
    style: a row per stack in the order of steady throughput, fastest on
    top; a log axis where a panel spans more than 10x."""
    panels = panel_titles(measured)
    titles = figure_titles(panels)
    figure, axes = figure_grid(len(panels), max_columns=3, panel_height=0.6 + 0.17 * measured["stack"].nunique())
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel)
        ys, ticks, stacks = stack_rows(part, part["train_images_per_s_gmean"])
        drawn = []
        for index, row in part.iterrows():
            style = series_style(row["stack"], row["variant"], row["data_placement"])
            axis.plot(list(row[list(MEASURES)]), [ys[index]] * 2, color=style["color"], linewidth=0.8)
            for column, (_, fill) in MEASURES.items():
                axis.plot(row[column], ys[index], **dict(style, fillstyle=fill, linestyle=""), markersize=4)
            finished = ok_runs(runs, row)
            for column, (_, marker) in REPEATED.items():
                repeats = finished[column].dropna()
                axis.plot(
                    repeats, [ys[index]] * len(repeats), color=style["color"], marker=marker, markersize=5, linestyle=""
                )
                drawn.append(repeats)
            drawn.append(row[list(MEASURES)])
        axis.set_yticks(ticks, stacks)
        if spans_a_decade(pd.concat(drawn)):
            axis.set_xscale("log")
            log_ticks(axis.xaxis)
        panel_heading(axis, titles[panel])
        axis.set_xlabel("training seconds")
    measures = [
        Line2D([], [], color="#555555", marker="o", fillstyle=fill, linestyle="", label=name)
        for name, fill in MEASURES.values()
    ]
    measures += [
        Line2D([], [], color="#555555", marker=marker, markersize=4, linestyle="", label=name)
        for name, marker in REPEATED.values()
    ]
    key_legend(figure, measured, measures)
    save(figure, path)


def named(row):
    return f"{row['stack']} ({variant_label(row['variant'], row['data_placement'])})"


def leader(part, column):
    """The quickest by a time: the least first epoch, or the least time to target among experiments that reached
    the target in every ok repeat."""
    if column == "time_to_target_s_mean":
        part = reached_target(part)
    timed = part.dropna(subset=[column])
    return None if timed.empty else named(timed.loc[timed[column].idxmin()])


def rank_sentences(measured):
    """One line per panel where the quickest first epoch or the first to target is not the fastest in steady state."""
    lines = []
    for panel in panel_titles(measured):
        part = panel_rows(measured, panel)
        steady = named(ranked(part).iloc[0])  # as page 1 names it: among experiments that can be tested
        first, target = leader(part, "first_epoch_s_mean"), leader(part, "time_to_target_s_mean")
        by_median = leader(part, "first_epoch_s_median") if "first_epoch_s_median" in part else first
        others = []
        if by_median != first:  # lumpy repeats: the two centres disagree, and neither order is tested
            others.append(f"quickest first epoch {first} by mean, {by_median} by median")
        elif first not in (None, steady):
            others.append(f"quickest first epoch {first}")
        if target not in (None, steady):
            others.append(f"first to target accuracy {target}")
        if others:
            lines.append(f"- {panel_title(panel)}: fastest in steady state {steady}; " + "; ".join(others) + ".")
    return lines


def markdown(study, figures):
    measured = study.summary[study.summary["train_images_per_s_gmean"].notna()]
    if measured.empty:
        return None
    end_to_end_figure(measured, study.runs, figures / "end_to_end.svg")
    lines = rank_sentences(measured)
    ranking = (
        lead_in(
            "Where these rank the stacks differently from steady throughput (orders of means over repeats, not "
            "tested: only steady throughput is raced and compared):"
        )
        + "\n".join(lines)
        if lines
        else "In every panel the fastest in steady state also has the quickest first epoch and reaches the target "
        "accuracy first."
    )
    return (
        "![First epoch (hollow) and time to target accuracy (filled) per stack and variant, fastest in steady state "
        "on top](figures/end_to_end.svg)\n\n"
        "Steady throughput leaves out the first epoch, which carries tracing, compilation and warm-up; a user who "
        "trains for minutes pays it. Per stack and variant, the first epoch's "
        "training time and the training time to the target accuracy, first epoch included, each the mean over "
        "repeats (time to target: over the repeats that reached it); each repeat's own is a tick, below the row for "
        "its first epoch and above it for its time to target.\n\n" + ranking + "\n"
    )
