"""Convergence: test accuracy and loss after each epoch against the training time spent to reach it."""

from dlbench.report.common import (
    LINE_KEYS,
    figure_grid,
    label,
    legend_below,
    log_ticks,
    panel_rows,
    panel_title,
    panel_titles,
    save,
    styled_lines,
)

TITLE = "Convergence"
FLAT = 1e-9  # a panel whose values all agree this closely shows nothing: it says its one value instead


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
    figure, axes = figure_grid(2 * len(panels))
    axes = list(axes)
    for index, panel in enumerate(panels):
        part = panel_rows(curves, panel)
        for axis, column, ylabel in (
            (axes[2 * index], "test_accuracy", "test accuracy"),
            (axes[2 * index + 1], "test_loss", "test loss"),
        ):
            axis.set_title(panel_title(panel), fontsize=10)
            if part[column].max() - part[column].min() < FLAT:
                axis.set_axis_off()
                axis.text(0.5, 0.5, f"{ylabel}: {part[column].iloc[0]:.3g} for every line and epoch", ha="center")
                continue
            for name, line, style in styled_lines(part, label(part)):
                axis.plot(line["trained_s"], line[column], markersize=3, label=name, **style)
            axis.set_xscale("log")
            log_ticks(axis.xaxis)
            axis.set_xlabel("training seconds (cumulative, log scale)")
            axis.set_ylabel(ylabel)
    legend_below(figure)
    save(figure, path)


def markdown(study, figures):
    convergence_figure(study.summary, study.epochs, figures / "convergence.svg")
    return (
        "Test accuracy and test loss after each epoch against the training time spent to reach it (evaluation "
        "excluded; the repeats' mean at their median cumulative time): the time-to-accuracy view of the same runs.\n\n"
        "![Test accuracy and loss against training time](figures/convergence.svg)\n"
    )
