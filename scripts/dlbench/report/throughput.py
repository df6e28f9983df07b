"""Training throughput: steady-epoch images/s per stack and variant with its 95% interval."""

import pandas as pd

from dlbench.analysis.tables import PANEL
from dlbench.report.common import (
    STATUS_LABEL,
    figure_grid,
    framework_colour,
    label,
    log_ticks,
    panel_rows,
    panel_title,
    panel_titles,
    save,
    spans_a_decade,
)

TITLE = "Training throughput"


def throughput_figure(measured, path):
    """Geometric-mean steady throughput per stack and variant with its 95% interval (none below 3 repeats), a dot in
    its framework's colour; a log axis where a panel's values span more than 10x; an experiment without a measured
    run says how it ended."""
    panels = panel_titles(measured)
    figure, axes = figure_grid(len(panels))
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel).sort_values("train_images_per_s_gmean")
        centre = part["train_images_per_s_gmean"]
        low = (centre - part["train_images_per_s_ci95_low"]).fillna(0)
        high = (part["train_images_per_s_ci95_high"] - centre).fillna(0)
        for y, (value, below, above, framework) in enumerate(zip(centre, low, high, part["framework"])):
            if pd.notna(value):
                axis.errorbar(value, y, xerr=[[below], [above]], fmt="o", color=framework_colour(framework), capsize=3)
        axis.set_yticks(range(len(part)), label(part))
        wide = spans_a_decade(pd.concat([centre, part["train_images_per_s_ci95_high"]]))
        if wide:
            axis.set_xscale("log")
            log_ticks(axis.xaxis)
        else:
            axis.set_xlim(left=0)
        for y, (value, status) in enumerate(zip(centre, part["statuses"])):
            if pd.isna(value):
                where = axis.get_yaxis_transform()  # x in axes coordinates: at the panel's left edge
                axis.text(
                    0.01,
                    y,
                    STATUS_LABEL.get(status.split(",")[0], "failed"),
                    va="center",
                    color="#C44E52",
                    transform=where,
                )
        axis.set_title(panel_title(panel), fontsize=10)
        axis.set_xlabel("training images/s (steady epochs" + (", log scale)" if wide else ")"))
    save(figure, path)


def markdown(study, figures):
    summary = study.summary
    drawn = summary.groupby(PANEL)["train_images_per_s_gmean"].transform(lambda values: values.notna().any())
    throughput_figure(summary[drawn], figures / "throughput.svg")
    empty = [panel_title(panel) for panel in panel_titles(summary[~drawn])]
    left_out = f"\n\nNot drawn, as no run there finished (Failed runs): {'; '.join(empty)}.\n" if empty else "\n"
    return (
        "Steady-epoch training throughput (epochs 2..N; the first epoch carries compilation and is reported apart): "
        "the geometric mean over repeats, with its 95% interval from Student's t on log throughput, back-transformed "
        "(so it is never zero or negative, and is asymmetric). Experiments with fewer than 3 ok repeats have no "
        "interval.\n\n"
        "![Training throughput per stack and optimisation variant](figures/throughput.svg)" + left_out
    )
