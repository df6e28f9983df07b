"""Time per epoch: each epoch's training time, the first (compilation, warm-up) beside the steady ones."""

from matplotlib.ticker import MaxNLocator

from dlbench.study.palette import release_styles
from dlbench.study.report.common import (
    LINE_KEYS,
    figure_grid,
    figure_titles,
    label,
    legend_below,
    log_ticks,
    panel_heading,
    panel_rows,
    panel_titles,
    save,
    styled_lines,
)

TITLE = "Time per epoch"


def epoch_time_figure(summary, epochs, path):
    merged = epochs.merge(summary[["experiment_id", *LINE_KEYS]])
    per_epoch = merged.groupby(["experiment_id", "machine", "epoch"], as_index=False).agg(
        train_s=("train_s", "median"), **{column: (column, "first") for column in LINE_KEYS if column != "machine"}
    )
    finished = summary[summary["runs_ok"] > 0]
    panels = panel_titles(finished if len(finished) else summary)  # experiments with no finished run have no epochs
    titles = figure_titles(panels)
    figure, axes = figure_grid(len(panels), max_columns=3, panel_height=1.4)
    releases = release_styles(per_epoch["stack"])
    for axis, panel in zip(axes, panels):
        part = panel_rows(per_epoch, panel)
        for name, line, style in styled_lines(part, label(part), releases):
            axis.plot(line["epoch"], line["train_s"], label=name, linewidth=1, markersize=3, **style)
        axis.set_yscale("log")
        log_ticks(axis.yaxis)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole: no 1.25, 1.5 ticks
        panel_heading(axis, titles[panel])
        axis.set_xlabel("epoch")
        axis.set_ylabel("training s (median)")
    legend_below(figure)
    save(figure, path)


def markdown(study, figures):
    epoch_time_figure(study.summary, study.epochs, figures / "epoch_time.svg")
    return (
        "![Training time per epoch](figures/epoch_time.svg)\n\nTraining time of each epoch (median over repeats; the "
        "first epoch includes tracing, hybridisation and compilation), evaluation excluded.\n"
    )
