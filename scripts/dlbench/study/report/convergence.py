"""Convergence: test accuracy and loss after each epoch against the training time spent to reach it."""

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

TITLE = "Convergence"
FLAT = 1e-9  # a panel whose values all agree this closely shows nothing: it says its one value instead
# A test loss this small everywhere is a set fitted from the first epoch: float rounding moves it, not learning (MXNet's
# reads about -1e-6), and drawn it would fill an axis of millionths. The panel says so instead.
FITTED_LOSS = 1e-4


def convergence_figure(summary, epochs, path):
    """Test accuracy and test loss after each epoch against the training time spent to reach it (evaluation
    excluded): repeats' mean accuracy and loss at their median cumulative time, a line per stack and variant."""
    epochs = epochs.sort_values(["experiment_id", "machine", "rep", "epoch"])
    epochs = epochs.assign(trained_s=epochs.groupby(["experiment_id", "machine", "rep"])["train_s"].cumsum())
    curves = epochs.groupby(["experiment_id", "machine", "epoch"], as_index=False).agg(
        trained_s=("trained_s", "median"), test_accuracy=("test_accuracy", "mean"), test_loss=("test_loss", "mean")
    )
    curves = curves.merge(summary[["experiment_id", *LINE_KEYS]])
    panels = panel_titles(curves)
    titles = figure_titles(panels)
    figure, axes = figure_grid(2 * len(panels), max_columns=4, panel_height=1.45)
    axes = list(axes)
    releases = release_styles(curves["stack"])
    for index, panel in enumerate(panels):
        part = panel_rows(curves, panel)
        for axis, column, ylabel in (
            (axes[2 * index], "test_accuracy", "test accuracy"),
            (axes[2 * index + 1], "test_loss", "test loss"),
        ):
            panel_heading(axis, titles[panel])
            fitted = column == "test_loss" and part[column].abs().max() < FITTED_LOSS
            if fitted or part[column].max() - part[column].min() < FLAT:
                axis.set_axis_off()
                value = f"below {FITTED_LOSS:g}" if fitted else f"{part[column].iloc[0]:.3g}"
                axis.text(0.5, 0.5, f"{ylabel}: {value}\nfor every line and epoch", ha="center", va="center")
                continue
            for name, line, style in styled_lines(part, label(part), releases):
                axis.plot(line["trained_s"], line[column], linewidth=1, markersize=3, label=name, **style)
            axis.set_xscale("log")
            log_ticks(axis.xaxis)
            axis.set_xlabel("training s (cumulative)")
            axis.set_ylabel(ylabel)
            axis.yaxis.set_major_locator(MaxNLocator(4))  # a short panel: four labels, not one per 0.025
    legend_below(figure)
    save(figure, path)


def markdown(study, figures):
    convergence_figure(study.summary, study.epochs, figures / "convergence.svg")
    return (
        "![Test accuracy and loss against training time](figures/convergence.svg)\n\n"
        "Test accuracy and test loss after each epoch against the training time spent to reach it (evaluation "
        "excluded; the repeats' mean at their median cumulative time, on a log axis): the time-to-accuracy view of "
        "the same runs.\n"
    )
