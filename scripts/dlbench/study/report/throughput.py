"""Training throughput: steady-epoch images/s per stack and variant with its 95% interval and each repeat."""

import pandas as pd

from dlbench.axes import PANEL
from dlbench.study.analysis.blocks import adjusted
from dlbench.study.palette import series_style
from dlbench.study.report.common import (
    STATUS_LABEL,
    figure_grid,
    figure_titles,
    key_legend,
    log_ticks,
    ok_runs,
    panel_heading,
    panel_rows,
    panel_title,
    panel_titles,
    save,
    spans_a_decade,
    stack_rows,
    throughput_unit,
)

TITLE = "Training throughput"


def centre_columns(row, stem):
    """The columns of an experiment's point: its throughput at the average round of its group with that interval
    where the summary has it (rounds as blocks), else its geometric mean with its 95% interval."""
    if pd.notna(row.get(adjusted(stem)[0])):
        return adjusted(stem)
    return [f"{stem}_gmean", f"{stem}_ci95_low", f"{stem}_ci95_high"]


def throughput_point(axis, row, y, repeats, stem):
    """One experiment: its throughput at the average round with its 95% interval (centre_columns; none below 3
    repeats) in its series' style, and its repeats as measured as small dots just below, so that three repeats are
    seen, not only the interval they give. stem: the throughput columns plotted (images or tokens: throughput_unit)."""
    style = series_style(row["stack"], row["variant"], row["data_placement"], linestyle="")
    centre, low, high = (row[column] for column in centre_columns(row, stem))
    below = 0 if pd.isna(low) else centre - low
    above = 0 if pd.isna(high) else high - centre
    axis.errorbar(centre, y, xerr=[[below], [above]], capsize=2, markersize=4, **style)
    axis.scatter(repeats, [y - 0.09] * len(repeats), s=4, color=style["color"], linewidths=0)


def throughput_figure(measured, runs, path):
    """Geometric-mean steady throughput per stack and variant with its 95% interval and its repeats: a row per stack
    (fastest on top), its variants side by side by marker; a log axis where a panel's values span more than 10x; an
    experiment without a measured run says how it ended."""
    panels = panel_titles(measured)
    titles = figure_titles(panels)
    figure, axes = figure_grid(len(panels), max_columns=3, panel_height=0.6 + 0.17 * measured["stack"].nunique())
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel)
        stem, unit = throughput_unit(part)
        ys, ticks, stacks = stack_rows(part, part[f"{stem}_gmean"])
        for index, row in part.iterrows():
            if pd.notna(row[f"{stem}_gmean"]):
                throughput_point(axis, row, ys[index], ok_runs(runs, row)[stem].dropna(), stem)
            else:
                where = axis.get_yaxis_transform()  # x in axes coordinates: at the panel's left edge
                status = STATUS_LABEL.get(row["statuses"].split(",")[0], "failed")
                axis.text(0.01, ys[index], status, va="center", color="#C44E52", fontsize=7, transform=where)
        axis.set_yticks(ticks, stacks)
        wide = spans_a_decade(pd.concat([part[f"{stem}_gmean"], part[f"{stem}_ci95_high"]]))
        if wide:
            axis.set_xscale("log")
            log_ticks(axis.xaxis)
        else:
            axis.set_xlim(left=0)
        panel_heading(axis, titles[panel])
        axis.set_xlabel(f"training {unit}/s (steady epochs" + (", log scale)" if wide else ")"))
    key_legend(figure, measured)
    save(figure, path)


def markdown(study, figures):
    summary = study.summary
    drawn = summary.groupby(PANEL)["train_images_per_s_gmean"].transform(lambda values: values.notna().any())
    throughput_figure(summary[drawn], study.runs, figures / "throughput.svg")
    empty = [panel_title(panel) for panel in panel_titles(summary[~drawn])]
    left_out = f"\n\nNot drawn, as no run there finished (Failed runs): {'; '.join(empty)}.\n" if empty else "\n"
    return (
        "![Training throughput per stack and variant: at the average round with its 95% interval, each repeat as "
        "measured a small dot below](figures/throughput.svg)\n\n"
        "A language model's panel counts tokens (its sequences times their length), every other panel images. "
        "Steady-epoch training throughput (epochs 2..N; the first epoch carries compilation and is reported apart): "
        "each point is the experiment's throughput at the average round of its group, with its 95% interval (log "
        "throughput fitted as experiment plus round over the group's runs, back-transformed: never zero or negative, "
        "and asymmetric), so that experiments a race ran in different rounds meet on one footing whatever the "
        "machine's drift between rounds (The machine's speed by round); the dots are the repeats as measured. "
        "Where a group leaves no freedom for an interval (its experiments ran once each), there is none." + left_out
    )
