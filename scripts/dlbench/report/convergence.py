"""Convergence: test accuracy and loss after each epoch against the training time spent to reach it."""

from dlbench.analysis.tables import PANEL
from dlbench.report.common import figure_grid, label, panel_rows, panel_title, panel_titles, save

TITLE = "Convergence"


def convergence_figure(summary, epochs, path):
    """Test accuracy and test loss after each epoch against the training time spent to reach it (evaluation
    excluded): repeats' mean accuracy and loss at their median cumulative time, a line per stack and variant."""
    epochs = epochs.sort_values(["experiment_id", "machine", "rep", "epoch"])
    epochs = epochs.assign(trained_s=epochs.groupby(["experiment_id", "machine", "rep"])["train_s"].cumsum())
    curves = epochs.groupby(["experiment_id", "machine", "epoch"], as_index=False).agg(
        trained_s=("trained_s", "median"), test_accuracy=("test_accuracy", "mean"), test_loss=("test_loss", "mean")
    )
    curves = curves.merge(summary[["experiment_id", "stack", "variant", "data_placement", *PANEL]])
    panels = panel_titles(curves)
    figure, axes = figure_grid(2 * len(panels))
    axes = list(axes)
    for index, panel in enumerate(panels):
        part = panel_rows(curves, panel)
        for axis, column, ylabel in (
            (axes[2 * index], "test_accuracy", "test accuracy"),
            (axes[2 * index + 1], "test_loss", "test loss"),
        ):
            for name, line in part.groupby(label(part)):
                axis.plot(line["trained_s"], line[column], marker="o", markersize=3, label=name)
            axis.set_xscale("log")
            axis.set_title(panel_title(panel), fontsize=10)
            axis.set_xlabel("training seconds (cumulative, log scale)")
            axis.set_ylabel(ylabel)
        axes[2 * index].legend(fontsize=6)
    save(figure, path)


def markdown(study, figures):
    convergence_figure(study.summary, study.epochs, figures / "convergence.svg")
    return (
        "Test accuracy and test loss after each epoch against the training time spent to reach it (evaluation "
        "excluded; the repeats' mean at their median cumulative time): the time-to-accuracy view of the same runs.\n\n"
        "![Test accuracy and loss against training time](figures/convergence.svg)\n"
    )
