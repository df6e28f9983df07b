"""End to end: beside steady throughput, what a user training for minutes also pays - the first epoch (tracing,
compilation, warm-up) and the training time to the target accuracy - and where those rank the stacks differently."""

import pandas as pd

from dlbench.analysis.fastest import ranked, reached_target
from dlbench.report.common import (
    figure_grid,
    framework_colour,
    label,
    legend_below,
    log_ticks,
    panel_rows,
    panel_title,
    panel_titles,
    save,
    spans_a_decade,
    variant_label,
)

TITLE = "End to end: first epoch and time to target accuracy"
ABSENT = "no experiment finished with a measured throughput (Failed runs, Contended runs)."

# summary column -> (what it is, marker). One statistic for both, the mean over repeats, as page 1 gives time to
# target: a run's time to target includes its first epoch, so its marker never sits left of the first epoch's where
# every repeat reached the target.
MEASURES = {
    "first_epoch_s_mean": ("first epoch (mean)", "o"),
    "time_to_target_s_mean": ("time to target accuracy (mean)", "s"),
}


def end_to_end_figure(measured, path):
    """Per panel, each stack and variant's first epoch and time to target (seconds, framework colour; log axis
    where a panel spans more than 10x), in the order of steady throughput, fastest on top."""
    panels = panel_titles(measured)
    figure, axes = figure_grid(len(panels))
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel).sort_values("train_images_per_s_gmean")
        colours = list(map(framework_colour, part["framework"]))
        for column, (name, marker) in MEASURES.items():
            axis.scatter(part[column], range(len(part)), c=colours, marker=marker)
            axis.plot([], [], marker=marker, color="#555555", linestyle="", label=name)  # the legend's key, in grey
        axis.set_yticks(range(len(part)), label(part))
        if spans_a_decade(pd.concat([part[column] for column in MEASURES])):
            axis.set_xscale("log")
            log_ticks(axis.xaxis)
        axis.set_title(panel_title(panel), fontsize=10)
        axis.set_xlabel("training seconds")
    legend_below(figure)
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
        others = []
        if first not in (None, steady):
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
    end_to_end_figure(measured, figures / "end_to_end.svg")
    lines = rank_sentences(measured)
    ranking = (
        "Where these rank the stacks differently from steady throughput:\n\n" + "\n".join(lines)
        if lines
        else "In every panel the fastest in steady state also has the quickest first epoch and reaches the target "
        "accuracy first."
    )
    return (
        "Steady throughput leaves out the first epoch, which carries tracing, compilation and warm-up; a user who "
        "trains for minutes pays it. Per stack and variant (top: the fastest in steady state), the first epoch's "
        "training time and the training time to the target accuracy, first epoch included, each the mean over "
        "repeats (time to target: over the repeats that reached it):\n\n"
        "![First epoch and time to target accuracy](figures/end_to_end.svg)\n\n" + ranking + "\n"
    )
