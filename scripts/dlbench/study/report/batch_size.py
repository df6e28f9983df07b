"""Throughput versus batch size: where `batch_sizes` sweeps an experiment, its steady throughput at each size."""

from matplotlib.ticker import NullFormatter

from dlbench.study.palette import release_styles
from dlbench.study.report.common import (
    figure_grid,
    label,
    legend_below,
    log_ticks,
    on_devices,
    panel_heading,
    panel_rows,
    save,
    styled_lines,
    throughput_unit,
)

TITLE = "Throughput versus batch size"
ABSENT = "each experiment ran at one batch size (`batch_sizes` in the config sweeps it)."

SWEEP = [
    "machine",
    "dataset",
    "model",
    "device",
    "optimizer",
    "learning_rate",
    "epochs",
    "stack",
    "variant",
    "data_placement",
    "replicas",
    "scaling",
]


def batch_sweeps(summary):
    """The measured experiments whose otherwise identical siblings ran at other batch sizes."""
    measured = summary[summary["train_images_per_s_gmean"].notna()]
    sizes = measured.groupby(SWEEP, dropna=False)["batch_size"].transform("nunique")
    return measured[sizes > 1]


def batch_size_figure(sweeps, path):
    """Steady throughput against batch size (log-log, 95% intervals), a line per stack, variant and optimiser, a
    panel per dataset, model, device, machine and replica count."""
    where = ["dataset", "model", "device", "machine", "replicas"]
    panels = sorted(set(zip(*(sweeps[key] for key in where))))
    figure, axes = figure_grid(len(panels), panel_height=1.8)
    releases = release_styles(sweeps["stack"])
    for axis, panel in zip(axes, panels):
        part = panel_rows(sweeps, panel, where)
        dataset, model, device, machine, replicas = panel
        training = (
            part["optimizer"]
            + " lr "
            + part["learning_rate"].map("{:g}".format)
            + ", "
            + part["epochs"].astype(str)
            + " epochs"
        )
        names = label(part) + ("" if training.nunique() == 1 else " · " + training)
        stem, unit = throughput_unit(part)
        for name, line, style in styled_lines(part, names, releases):
            line = line.sort_values("batch_size")
            centre = line[f"{stem}_gmean"]
            spread = [
                (centre - line[f"{stem}_ci95_low"]).fillna(0),
                (line[f"{stem}_ci95_high"] - centre).fillna(0),
            ]
            axis.errorbar(
                line["batch_size"], centre, yerr=spread, capsize=2, linewidth=1, markersize=3, label=name, **style
            )
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        log_ticks(axis.yaxis)
        sizes = sorted(part["batch_size"].unique())
        axis.set_xticks(sizes, [str(size) for size in sizes])
        axis.xaxis.set_minor_formatter(NullFormatter())
        panel_heading(axis, f"{model} on {dataset}, {on_devices(device, replicas)} on {machine}")
        axis.set_xlabel("batch size")
        axis.set_ylabel(f"training {unit}/s (steady)")
    legend_below(figure)
    save(figure, path)


def markdown(study, figures):
    sweeps = batch_sweeps(study.summary)
    if sweeps.empty:
        return None
    batch_size_figure(sweeps, figures / "batch_size.svg")
    return (
        "![Training throughput against batch size](figures/batch_size.svg)\n\n"
        "Steady-epoch throughput against batch size (geometric mean and 95% interval over repeats).\n"
    )
