"""Figures, tables and the rendered report (HTML + PDF) from the aggregated tables.

The document is report/report.qmd. With `quarto` on PATH it renders with Quarto (html + typst formats);
otherwise the same document renders with pandoc (self-contained HTML) and pandoc -> typst -> PDF, with
Quarto's `{{< include >}}` shortcodes expanded here. Both paths read the same generated pieces.
"""

import argparse
import datetime
import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib

from dlbench.analysis.tables import GROUP, OPS_TABLE, PANEL, TABLES
from dlbench.cli import run_main

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "dlbench"  # the same figure gives the same file: no spurious diffs
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter  # noqa: E402

INCLUDE = re.compile(r"\{\{<\s*include\s+(\S+)\s*>\}\}")
STATUS_LABEL = {"oom": "OOM", "error": "ERROR", "unavailable": "N/A", "contended": "BUSY", "diverged": "DIVERGED"}


def variant_label(variant, placement):
    """The variant, and the data placement where it is not the default (the dataset staged on the device)."""
    return variant if placement == "device" else f"{variant}, {placement} data"


def variant_labels(frame):
    return pd.Series(map(variant_label, frame["variant"], frame["data_placement"]), index=frame.index, dtype=object)


def label(frame):
    return frame["stack"] + " · " + variant_labels(frame)


def panel_titles(summary):
    return sorted(set(zip(*(summary[key] for key in PANEL))))


def panel_title(panel):
    dataset, model, batch, device, machine = panel
    return f"{model} on {dataset}, batch {batch}, {device} on {machine}"


def panel_rows(frame, panel, keys=PANEL):
    """The rows of frame that belong to one panel: by default (dataset, model, batch size, device, machine)."""
    return frame[(frame[keys] == pd.Series(panel, index=keys)).all(axis=1)]


def figure_grid(count, max_columns=2, panel_size=(6.5, 3.2)):
    """A figure with `count` visible panels, at most max_columns a row; with none (no run finished anything to
    draw), one that says so, so that a study of failed runs still gets its report."""
    columns = max(1, min(count, max_columns))
    rows = max(1, (count + columns - 1) // columns)
    width, height = panel_size
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, 0.5 + height * rows), squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    if count == 0:
        axes.flat[0].set_visible(True)
        axes.flat[0].set_axis_off()
        axes.flat[0].text(0.5, 0.5, "no finished run to draw", ha="center", va="center")
    return figure, axes.flat


def save(figure, path):
    """SVG (glyphs drawn as paths): vector in the PDF, sharp in the HTML, no font needed where it is read."""
    figure.tight_layout()
    figure.savefig(path, format="svg")
    plt.close(figure)


def throughput_figure(summary, path):
    """Geometric-mean steady throughput per stack and variant, with its 95% interval (none below 3 repeats)."""
    panels = panel_titles(summary)
    figure, axes = figure_grid(len(panels))
    for axis, panel in zip(axes, panels):
        part = panel_rows(summary, panel)
        part = part.sort_values("train_images_per_s_gmean")
        centre = part["train_images_per_s_gmean"].fillna(0)
        low = (centre - part["train_images_per_s_ci95_low"]).fillna(0)
        high = (part["train_images_per_s_ci95_high"] - centre).fillna(0)
        axis.barh(label(part), centre, xerr=[low, high], color="#4C72B0", capsize=3)
        for y, (value, status) in enumerate(zip(part["train_images_per_s_gmean"], part["statuses"])):
            if pd.isna(value):
                axis.text(0, y, " " + STATUS_LABEL.get(status.split(",")[0], "failed"), va="center", color="#C44E52")
        axis.set_xlim(left=0)
        axis.set_title(panel_title(panel), fontsize=10)
        axis.set_xlabel("training images/s (steady epochs)")
    save(figure, path)


def group_title(row):
    """An experiment group: what its members share (comparisons are made within one)."""
    placement = "" if row["data_placement"] == "device" else f", {row['data_placement']} data"
    return (
        f"{row['model']} on {row['dataset']}, batch {row['batch_size']}, {row['device']}, {row['optimizer']} "
        f"lr {row['learning_rate']:g}, {row['epochs']} epochs{placement}, on {row['machine']}"
    )


def comparison_groups(comparisons):
    return comparisons.groupby(GROUP, sort=True, dropna=False)


DECIDED, EQUIVALENT, UNDECIDED = "#4C72B0", "#55A868", "#9A9A9A"  # blue, green, grey


def verdict_colour(verdict):
    """Blue for a proven difference, green for a proven equivalence, grey for inconclusive or not tested."""
    if verdict in ("faster", "slower"):
        return DECIDED
    return EQUIVALENT if verdict.startswith("equivalent") else UNDECIDED


def ratio_axis(axis, part, labels, title, xlabel):
    """Ratios with their 95% intervals on a log axis around 1, coloured by verdict (verdict_colour)."""
    for y, (ratio, low, high, verdict) in enumerate(
        zip(part["ratio"], part["ratio_ci95_low"], part["ratio_ci95_high"], part["verdict"])
    ):
        colour = verdict_colour(verdict)
        below, above = (0, 0) if pd.isna(low) else (ratio - low, high - ratio)
        axis.errorbar(ratio, y, xerr=[[below], [above]], fmt="o", color=colour, capsize=3)
    axis.set_yticks(range(len(part)), labels)
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_xscale("log")
    for ticks in (axis.xaxis.set_major_formatter, axis.xaxis.set_minor_formatter):
        ticks(FuncFormatter(lambda value, _: f"{value:g}x"))
    axis.set_title(title, fontsize=9)
    axis.set_xlabel(xlabel)


def ratio_figure(groups, labeller, titler, xlabel, empty, path):
    """One ratio panel per group (a list of (key, rows)), rows sorted by ratio."""
    rows = max((len(part) for _, part in groups), default=1)
    figure, axes = figure_grid(max(len(groups), 1), max_columns=1, panel_size=(9, 0.9 + 0.3 * rows))
    for axis, (_, part) in zip(axes, groups):
        part = part.sort_values("ratio")
        ratio_axis(axis, part, labeller(part), titler(part.iloc[0]), xlabel)
    if not groups:
        axes[0].text(0.5, 0.5, empty, ha="center", va="center")
        axes[0].set_axis_off()
    save(figure, path)


def speedup_figure(comparisons, path):
    """Each experiment's throughput as a ratio of its group's baseline (log axis), with the 95% interval; blue:
    faster or slower, green: equivalent, grey: inconclusive or not tested."""
    ratio_figure(
        list(comparison_groups(comparisons)),
        label,
        lambda first: f"{group_title(first)}: against {first['baseline_stack']} ({first['baseline_variant']})",
        "throughput / baseline throughput (log scale)",
        "no group has two experiments that finished",
        path,
    )


def epoch_time_figure(summary, epochs, path):
    shown = ["stack", "variant", "data_placement", *PANEL]
    merged = epochs.merge(summary[["experiment_id", *shown]])
    per_epoch = merged.groupby(["experiment_id", "machine", "epoch"], as_index=False).agg(
        train_s=("train_s", "median"), **{column: (column, "first") for column in shown if column != "machine"}
    )
    finished = summary[summary["runs_ok"] > 0]
    panels = panel_titles(finished if len(finished) else summary)  # experiments with no finished run have no epochs
    figure, axes = figure_grid(len(panels))
    for axis, panel in zip(axes, panels):
        part = panel_rows(per_epoch, panel)
        for name, line in part.groupby(label(part)):
            axis.plot(line["epoch"], line["train_s"], marker="o", label=name)
        axis.set_yscale("log")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole: no 1.25, 1.5 ticks
        axis.set_title(panel_title(panel), fontsize=10)
        axis.set_xlabel("epoch")
        axis.set_ylabel("training seconds (median of repeats)")
        axis.legend(fontsize=7)
    save(figure, path)


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
]


def batch_sweeps(summary):
    """The measured experiments whose otherwise identical siblings ran at other batch sizes."""
    measured = summary[summary["train_images_per_s_gmean"].notna()]
    sizes = measured.groupby(SWEEP, dropna=False)["batch_size"].transform("nunique")
    return measured[sizes > 1]


def batch_size_figure(sweeps, path):
    """Steady throughput against batch size (log-log, 95% intervals), a line per stack, variant and optimiser, a
    panel per dataset, model, device and machine."""
    where = ["dataset", "model", "device", "machine"]
    panels = sorted(set(zip(*(sweeps[key] for key in where))))
    figure, axes = figure_grid(len(panels))
    for axis, panel in zip(axes, panels):
        part = panel_rows(sweeps, panel, where)
        dataset, model, device, machine = panel
        training = (
            part["optimizer"]
            + " lr "
            + part["learning_rate"].map("{:g}".format)
            + ", "
            + part["epochs"].astype(str)
            + " epochs"
        )
        names = label(part) + ("" if training.nunique() == 1 else " · " + training)
        for name, line in part.groupby(names):
            line = line.sort_values("batch_size")
            centre = line["train_images_per_s_gmean"]
            spread = [
                (centre - line["train_images_per_s_ci95_low"]).fillna(0),
                (line["train_images_per_s_ci95_high"] - centre).fillna(0),
            ]
            axis.errorbar(line["batch_size"], centre, yerr=spread, marker="o", capsize=3, label=name)
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(
            sorted(part["batch_size"].unique()), [str(size) for size in sorted(part["batch_size"].unique())]
        )
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_title(f"{model} on {dataset}, {device} on {machine}", fontsize=10)
        axis.set_xlabel("batch size")
        axis.set_ylabel("training images/s (steady)")
        axis.legend(fontsize=7)
    save(figure, path)


def batch_size_markdown(summary, figures):
    sweeps = batch_sweeps(summary)
    if sweeps.empty:
        return "This configuration runs each experiment at one batch size (`batch_sizes` sweeps it).\n"
    batch_size_figure(sweeps, figures / "batch_size.svg")
    return (
        "Steady-epoch throughput against batch size (geometric mean and 95% interval over repeats):\n\n"
        "![Training throughput against batch size](figures/batch_size.svg)\n"
    )


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


TRACE_METRICS = {
    "gpu_util_pct": "GPU utilisation %",
    "gpu_memory_mb": "GPU memory used MiB",
    "power_w": "GPU power W",
    "cpu_util_pct": "CPU utilisation, % of all cores",
    "rss_mb": "host resident memory MiB",
}


def telemetry_figure(summary, telemetry, path):
    """Each experiment's first finished repeat over time, as its sampler recorded it: a row per dataset, model,
    batch and device panel, a column per quantity measured there (the GPU's only where NVML read them)."""
    traces = telemetry.merge(summary[["experiment_id", "stack", "variant", "data_placement", *PANEL]])
    panels = [
        (panel, [name for name in TRACE_METRICS if panel_rows(traces, panel)[name].notna().any()])
        for panel in panel_titles(traces)
    ]
    columns = max(len(metrics) for _, metrics in panels)
    figure, axes = figure_grid(len(panels) * columns, max_columns=columns, panel_size=(4.4, 2.8))
    axes = list(axes)
    for row, (panel, metrics) in enumerate(panels):
        part = panel_rows(traces, panel)
        for column, axis in enumerate(axes[row * columns : (row + 1) * columns]):
            if column >= len(metrics):
                axis.set_visible(False)
                continue
            for name, line in part.groupby(label(part)):
                axis.plot(line["t_s"], line[metrics[column]], linewidth=1, label=name)
            axis.set_title(panel_title(panel), fontsize=8)
            axis.set_xlabel("seconds since the process started", fontsize=8)
            axis.set_ylabel(TRACE_METRICS[metrics[column]], fontsize=8)
            axis.set_ylim(bottom=0)
        axes[row * columns].legend(fontsize=5)
    save(figure, path)


MEMORY_PEAKS = {
    "host_rss_peak_mb_mean": "host RSS",
    "gpu_memory_peak_mb_mean": "GPU (NVML)",
    "allocator_peak_mb_mean": "framework allocator",
}


def memory_figure(summary, path):
    """Peak memory per experiment (means over finished repeats): host resident set, and on GPU the device memory
    NVML saw and the framework allocator's own peak."""
    measured = summary[summary["runs_ok"] > 0]
    peaks = [column for column in MEMORY_PEAKS if measured[column].notna().any()]
    panels = panel_titles(measured)
    figure, axes = figure_grid(len(panels))
    height = 0.8 / len(peaks)
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel).sort_values("host_rss_peak_mb_mean")
        for index, column in enumerate(peaks):
            positions = [y + (index - (len(peaks) - 1) / 2) * height for y in range(len(part))]
            axis.barh(positions, part[column].fillna(0), height=height, label=MEMORY_PEAKS[column])
        axis.set_yticks(range(len(part)), label(part))
        axis.set_title(panel_title(panel), fontsize=10)
        axis.set_xlabel("peak MiB")
        axis.legend(fontsize=7)
    save(figure, path)


def energy_figure(measured, path):
    """GPU energy per trained image (training epochs only), per experiment where NVML reported power."""
    panels = panel_titles(measured)
    figure, axes = figure_grid(len(panels))
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel).sort_values("gpu_energy_per_image_j_mean")
        axis.barh(label(part), part["gpu_energy_per_image_j_mean"], color="#55A868")
        axis.set_title(panel_title(panel), fontsize=10)
        axis.set_xlabel("joules per training image (mean of repeats)")
    save(figure, path)


def resource_figures_markdown(summary, telemetry, figures):
    """The resource figures: telemetry over time and memory peaks always, energy per image where measured."""
    pieces = []
    if len(telemetry):
        telemetry_figure(summary, telemetry, figures / "telemetry.svg")
        pieces.append(
            "Over each experiment's first finished repeat, from the sampler's trace (on GPU: utilisation, "
            "memory and power from NVML):\n\n![Telemetry over a run](figures/telemetry.svg)"
        )
    if (summary["runs_ok"] > 0).any():
        memory_figure(summary, figures / "memory.svg")
        pieces.append("Peak memory per experiment:\n\n![Peak memory](figures/memory.svg)")
    energy = summary[summary["gpu_energy_per_image_j_mean"].notna()]
    if len(energy):
        energy_figure(energy, figures / "energy.svg")
        pieces.append(
            "Energy per training image, GPU board power integrated over the training epochs:\n\n"
            "![Energy per image](figures/energy.svg)"
        )
    else:
        pieces.append("Energy is measured from the GPU's board power (NVML): no run of this report had it.")
    return "\n\n".join(pieces) + "\n"


def operator_grid(ops, column, ylabel, path, log_y):
    """One panel per operator and device (CPU and GPU panels apart); a line per framework and dtype."""
    panels = list(dict.fromkeys(zip(ops["device"], ops["operator"])))
    figure, axes = figure_grid(len(panels), max_columns=3, panel_size=(4.2, 2.8))
    colours = {name: f"C{index}" for index, name in enumerate(sorted(ops["framework"].unique()))}
    for axis, (device, operator) in zip(axes, panels):
        part = ops[(ops["operator"] == operator) & (ops["device"] == device)]
        for (framework, dtype), line in part.groupby(["framework", "dtype"]):
            line = line.sort_values("size")
            axis.plot(
                line["size"],
                line[column],
                marker=".",
                color=colours[framework],
                linestyle="-" if dtype == "float32" else "--",
                label=f"{framework} {dtype}",
            )
            if column == "median_s":
                axis.fill_between(line["size"], line["q1_s"], line["q3_s"], color=colours[framework], alpha=0.2)
        axis.set_xscale("log")
        if log_y:
            axis.set_yscale("log")
        axis.set_title(f"{operator} · {device}", fontsize=10)
        axis.set_xlabel("matrix side" if operator == "gemm" else "elements")
        axis.set_ylabel(ylabel, fontsize=8)
        axis.legend(fontsize=6)
    save(figure, path)


def ops_markdown(ops, figures):
    """The operator section: figures and, at each operator's largest size, the figures of every framework."""
    measured = ops[ops["status"] == "ok"]
    if measured.empty:
        return "No operator benchmarks in this configuration (`ops.stacks` is empty) or none succeeded.\n"
    operator_grid(measured, "median_s", "seconds per call (median, IQR band)", figures / "ops_time.svg", True)
    operator_grid(measured, "fraction_of_ceiling", "fraction of the ceiling", figures / "ops_ceiling.svg", False)
    largest = measured.loc[measured.groupby(["operator", "framework", "device", "dtype"])["size"].idxmax()]
    rows = [
        [
            row["operator"],
            row["framework"],
            row["device"],
            row["dtype"],
            f"{row['size']:,}",
            f"{row['median_s'] * 1e6:,.1f}",
            number(row["gflop_per_s"], 1),
            number(row["gb_per_s"], 2),
            f"{row['fraction_of_ceiling']:.1%}",
        ]
        for _, row in largest.iterrows()
    ]
    ceilings = measured.drop_duplicates(["stack", "device"])[
        ["stack", "device", "ceiling_gemm_gflop_per_s", "ceiling_bandwidth_gb_per_s", "ceiling_source"]
    ]
    ceiling_rows = [
        [
            row["stack"],
            row["device"],
            number(row["ceiling_gemm_gflop_per_s"], 1),
            number(row["ceiling_bandwidth_gb_per_s"], 1),
            row["ceiling_source"],
        ]
        for _, row in ceilings.iterrows()
    ]
    failed = ops[ops["status"] == "error"]
    failures = (
        ""
        if failed.empty
        else "\nFailed operator measurements:\n\n"
        + markdown_table(
            ["stack", "operator", "size", "error"],
            [[row["stack"], row["operator"], row["size"], str(row["error"])[:200]] for _, row in failed.iterrows()],
        )
    )
    return (
        "Time per call against size (log-log; GEMM by matrix side, the others by element count):\n\n"
        "![Operator time per call](figures/ops_time.svg)\n\n"
        "Achieved fraction of the machine's ceiling (GEMM and dot: of the GEMM GFLOP/s ceiling; the others: "
        "of the memory-bandwidth ceiling):\n\n![Fraction of the ceiling](figures/ops_ceiling.svg)\n\n"
        "At each operator's largest size:\n\n"
        + markdown_table(
            ["operator", "framework", "device", "dtype", "size", "µs/call", "GFLOP/s", "GB/s", "of ceiling"], rows
        )
        + "\nCeilings, measured in each job:\n\n"
        + markdown_table(["stack", "device", "GEMM GFLOP/s", "bandwidth GB/s", "how"], ceiling_rows)
        + failures
    )


def version_label(part):
    return (
        part["framework"] + " " + part["older_version"] + " → " + part["newer_version"] + " · " + variant_labels(part)
    )


def version_figure(versions, path):
    """Newer over older release throughput per framework pair (log axis, 95% interval), a panel per group."""
    ratio_figure(
        list(comparison_groups(versions)),
        version_label,
        group_title,
        "newer / older release throughput (log scale)",
        "no framework ran at two versions",
        path,
    )


def versions_markdown(versions, figures):
    """The version study: each framework's consecutive releases on the same experiment."""
    if versions.empty:
        return (
            "No framework ran at two versions here. A version study runs two stacks of one framework on the "
            "same experiments (see the version study in docs/stacks.md).\n"
        )
    version_figure(versions, figures / "versions.svg")
    header = [
        "framework",
        "variant",
        "older (stack, packages)",
        "newer (stack, packages)",
        "throughput ratio",
        "p (Holm), method",
        "verdict",
        "first-epoch ratio",
        "accuracy change",
    ]
    sections = []
    for _, part in comparison_groups(versions):
        rows = [
            [
                row["framework"],
                variant_label(row["variant"], row["data_placement"]),
                f"{row['older_version']} ({row['older_stack']}, {str(row['older_packages_sha256'])[:12]})",
                f"{row['newer_version']} ({row['newer_stack']}, {str(row['newer_packages_sha256'])[:12]})",
                ratio_text(row),
                p_method_text(row),
                "REGRESSION" if row["regression"] else verdict_text(row),
                f"{row['first_epoch_ratio']:.2f}x",
                number(row["accuracy_difference"] * 100, 2) + " pts",
            ]
            for _, row in part.iterrows()
        ]
        sections.append(f"### {group_title(part.iloc[0])}\n\n" + markdown_table(header, rows))
    return (
        "Newer release over older, per framework, backend and variant on otherwise identical experiments, "
        "tested as the comparisons are (ratio of geometric-mean steady throughput with its 95% interval, paired "
        "by round or else unpaired, Holm-adjusted within each experiment group; equivalence within "
        f"{margin_text(versions)}); REGRESSION marks a proven slowdown:\n\n"
        "![Version ratios](figures/versions.svg)\n\n" + "\n".join(sections)
    )


def number(value, digits=0):
    return "–" if pd.isna(value) else f"{value:,.{digits}f}"


def cell(row, column, digits=0, formatter=number):
    """A figure, or the failure it stands for (OOM, ERROR) when no run of the experiment succeeded."""
    if row["runs_ok"] == 0:
        return STATUS_LABEL.get(row["statuses"].split(",")[0], "failed")
    return formatter(row[column], digits)


def percent(value, digits=0):
    return "–" if pd.isna(value) else f"{value:.{digits}%}"


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(value).replace("|", "/") for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def interval_cell(row, low, high):
    if row["runs_ok"] == 0:
        return "–"
    if pd.isna(row[low]):
        return f"none ({row['runs_ok']} ok repeat{'s' * (row['runs_ok'] != 1)})"
    return f"{row[low]:,.0f} – {row[high]:,.0f}"


def summary_markdown(summary):
    """One table per dataset x model x batch x device, so each fits a page in the PDF."""
    header = [
        "stack",
        "variant",
        "images/s",
        "95% interval",
        "CV",
        "steady epoch s",
        "first epoch s",
        "inference images/s",
        "accuracy",
        "runs ok",
    ]
    sections = []
    for panel, part in summary.groupby(PANEL):
        rows = []
        part = part.assign(variant_label=variant_labels(part))
        for _, row in part.sort_values(["stack", "variant_label"]).iterrows():
            throughput = row["measurement_note"] or cell(row, "train_images_per_s_gmean")
            rows.append(
                [
                    row["stack"],
                    row["variant_label"],
                    throughput,
                    interval_cell(row, "train_images_per_s_ci95_low", "train_images_per_s_ci95_high"),
                    cell(row, "train_images_per_s_cv", 1, percent),
                    cell(row, "steady_epoch_s_median", 3),
                    cell(row, "first_epoch_s_median", 3),
                    cell(row, "inference_images_per_s_gmean"),
                    cell(row, "final_test_accuracy_mean", 3),
                    f"{row['runs_ok']}/{row['runs']}",
                ]
            )
        sections.append(f"### {panel_title(panel)}\n\n" + markdown_table(header, rows))
    return "\n".join(sections)


def ratio_text(row):
    interval = "" if pd.isna(row["ratio_ci95_low"]) else f" [{row['ratio_ci95_low']:.2f}, {row['ratio_ci95_high']:.2f}]"
    return f"{row['ratio']:.2f}x{interval}"


def p_text(value):
    return "–" if pd.isna(value) else f"{value:.3g}"


def margin_text(table):
    """The equivalence margin the table was tested with, as the verdicts print it ("5 %")."""
    return f"{table['equivalence_margin'].iloc[0] * 100:g} %"


def deciding_text(row):
    """What would decide an inconclusive comparison."""
    if pd.isna(row["repeats_to_decide"]):
        return "no practical number of repeats would decide"
    return f"about {row['repeats_to_decide']} repeats would decide"


def verdict_text(row):
    """The verdict, and for an inconclusive one the repeats that would decide it."""
    return f"inconclusive ({deciding_text(row)})" if row["verdict"] == "inconclusive" else row["verdict"]


METHOD_WORD = {"paired by round": "paired", "unpaired (Welch)": "unpaired"}  # none: not tested


def repeats_text(row):
    """The repeats a comparison rests on, and how they were compared."""
    if row["method"] == "paired by round":
        return f"{row['pairs']} rounds, paired"
    method = f", {METHOD_WORD[row['method']]}" if row["method"] in METHOD_WORD else ""
    return f"{row['runs_ok']} vs {row['baseline_runs_ok']}{method}"


def p_method_text(row):
    method = f", {METHOD_WORD[row['method']]}" if row["method"] in METHOD_WORD else ""
    return p_text(row["p_holm"]) + method


def comparisons_markdown(comparisons):
    """Per group, every experiment against the baseline: ratio, interval, Holm-adjusted p's of the difference and
    equivalence tests, verdict, and the repeats it rests on with the method."""
    if comparisons.empty:
        return "No group has two experiments with a finished run, so nothing is compared.\n"
    header = [
        "stack",
        "variant",
        "ratio [95% interval]",
        "p difference (Holm)",
        "p equivalence (Holm)",
        "verdict",
        "repeats",
    ]
    sections = []
    for _, part in comparison_groups(comparisons):
        first = part.iloc[0]
        rows = [
            [
                row["stack"],
                variant_label(row["variant"], row["data_placement"]),
                ratio_text(row),
                p_text(row["p_holm"]),
                p_text(row["p_equivalence_holm"]),
                verdict_text(row),
                repeats_text(row),
            ]
            for _, row in part.sort_values("ratio").iterrows()
        ]
        sections.append(
            f"### {group_title(first)}\n\nBaseline: {first['baseline_stack']} ({first['baseline_variant']}), "
            f"{first['baseline_rule']}.\n\n" + markdown_table(header, rows)
        )
    return (
        f"Equivalence margin: {margin_text(comparisons)} (a ratio within [1 / (1 + margin), 1 + margin]; "
        "`equivalence_margin` in the config).\n\n" + "\n".join(sections)
    )


def resources_markdown(summary, runs):
    """Input share, memory, utilisation and energy per experiment (means over ok repeats), a table per dataset,
    model, batch and device; GPU columns only where measured."""
    header = ["stack", "variant", "input share", "RSS peak MiB", "CPU %"]
    columns = [("host_rss_peak_mb_mean", 0), ("cpu_utilisation_mean_mean", 0)]
    gpu = [
        ("gpu_utilisation_mean_mean", 0, "GPU %"),
        ("gpu_utilisation_p95_mean", 0, "GPU % p95"),
        ("gpu_memory_peak_mb_mean", 0, "GPU MiB"),
        ("allocator_peak_mb_mean", 0, "allocator MiB"),
        ("gpu_power_mean_w_mean", 0, "W"),
        ("gpu_energy_per_image_j_mean", 4, "J/image"),
        ("model_flops_utilisation_mean", 3, "MFU"),
    ]
    sections = []
    for panel in panel_titles(summary):
        part = panel_rows(summary, panel)
        shown = list(columns) + [(column, digits) for column, digits, _ in gpu if part[column].notna().any()]
        titles = header + [title for column, _, title in gpu if part[column].notna().any()]
        part = part.assign(variant_label=variant_labels(part)).sort_values(["stack", "variant_label"])
        rows = [
            [
                row["stack"],
                row["variant_label"],
                cell(row, "input_share_mean", 1, percent),
                *(cell(row, column, digits) for column, digits in shown),
            ]
            for _, row in part.iterrows()
        ]
        sections.append(f"### {panel_title(panel)}\n\n" + markdown_table(titles, rows))
    reasons = sorted(set(runs["gpu_fields_reason"].dropna()))
    note = f"\nGPU fields not shown where not measured: {'; '.join(reasons)}.\n" if reasons else ""
    return "\n".join(sections) + note


def input_pipeline_markdown(summary):
    """Streamed experiments: the loader alone beside training, and whether training is input-bound."""
    streamed = summary[summary["data_placement"] == "stream"]
    if streamed.empty:
        return (
            "No experiment streamed its data (data placement `stream`: an image folder read by each framework's "
            "own loader; see docs/streaming.md).\n"
        )
    header = [
        "stack",
        "variant",
        "loader",
        "workers",
        "loader alone img/s",
        "training img/s",
        "training / loader",
        "input share",
        "GPU %",
        "verdict",
    ]
    sections = []
    for panel in panel_titles(streamed):
        part = panel_rows(streamed, panel).assign(variant_label=lambda frame: variant_labels(frame))
        rows = [
            [
                row["stack"],
                row["variant_label"],
                str(row["stream_loader"]).split(" (")[0],
                number(row["stream_workers"]),
                cell(row, "loader_images_per_s_mean"),
                cell(row, "train_images_per_s_gmean"),
                cell(row, "input_bound_share_mean", 2),
                cell(row, "input_share_mean", 1, percent),
                cell(row, "gpu_utilisation_mean_mean"),
                row["input_bound"] or "–",
            ]
            for _, row in part.sort_values(["stack", "variant_label"]).iterrows()
        ]
        sections.append(f"### {panel_title(panel)}\n\n" + markdown_table(header, rows))
    return "\n".join(sections)


ENGAGEMENT_CHECKS = {
    "graph": "graph",
    "xla": "XLA",
    "xla_compiled": "XLA HLO built",
    "cached_graph": "cached graph",
    "compiled_graphs": "compiled graphs",
    "graph_breaks": "graph breaks",
    "loss_scaling": "loss scaling",
}


def engagement_label(engaged):
    """Short: the switches that were on, and counts where they are counts ("compiled graphs 1, graph breaks 2")."""
    shown = []
    for key, title in ENGAGEMENT_CHECKS.items():
        value = engaged.get(key)
        if value is True:
            shown.append(title)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            shown.append(f"{title} {value}")
    return ", ".join(shown) or "eager"


def math_mode_markdown(runs):
    """The math mode that ran, read back per run (engaged tf32 and conv_autotune): one line under every figure."""
    ok = runs[runs["status"] == "ok"]
    modes = {}
    for _, row in ok.iterrows():
        engaged = json.loads(row["engaged"])
        mode = (
            f"TF32 {'on' if engaged.get('tf32') else 'off'}, "
            f"convolution autotuning {'on' if engaged.get('conv_autotune') else 'off'}"
        )
        modes.setdefault(mode, set()).add(f"{row['stack']} on {row['device']}")
    parts = [f"{mode} ({', '.join(sorted(where))})" for mode, where in sorted(modes.items())]
    return (
        f"*Math mode, as each framework applied it: {'; '.join(parts) or 'no finished run'}. On CPU neither "
        "exists: float32 runs in float32.*\n"
    )


def engagement_markdown(runs):
    """What each stack and variant actually ran, read back from the first finished run of each model, and the
    model's size from the spec."""
    ok = runs[runs["status"] == "ok"].drop_duplicates(["stack", "variant", "model", "dataset"])
    rows = []
    for _, row in ok.sort_values(["model", "dataset", "stack", "variant"]).iterrows():
        engaged = json.loads(row["engaged"])
        checks = engagement_label(engaged)
        rows.append(
            [
                row["model"],
                row["dataset"],
                f"{int(row['parameters']):,}",
                f"{row['flops_per_image'] / 1e6:,.1f}",
                row["stack"],
                row["variant"],
                engaged.get("matmul_dtype", "–"),
                engaged.get("layout", "–"),
                checks,
            ]
        )
    header = ["model", "dataset", "parameters", "MFLOPs/image", "stack", "variant", "matmul dtype", "layout", "engaged"]
    return markdown_table(header, rows)


def max_batch_markdown(searches):
    if searches.empty:
        return "No search in this configuration (`max_batch.enabled` is false).\n"
    rows = []
    for _, row in searches.sort_values(["dataset", "model", "device", "stack", "variant"]).iterrows():
        if row["status"] != "ok":
            largest, failure = "ERROR", str(row["error"])[:200]
        else:
            largest = f"{row['max_batch']:,}" + (" (the limit)" if row["limit_reached"] else "")
            failure = "–" if row["limit_reached"] else f"OOM at {row['first_failure']:,}"
        rows.append(
            [
                row["stack"],
                variant_label(row["variant"], row["data_placement"]),
                row["dataset"],
                row["model"],
                row["device"],
                row["optimizer"],
                largest,
                failure,
                number(row["allocator_peak_mb"]),
                row["probes"],
            ]
        )
    header = [
        "stack",
        "variant",
        "dataset",
        "model",
        "device",
        "optimizer",
        "largest batch",
        "next",
        "allocator MiB",
        "probes",
    ]
    return markdown_table(header, rows)


def failures_markdown(runs):
    failed = runs[~runs["status"].isin(["ok", "contended"])]
    if failed.empty:
        return "Every run finished (a run the machine's other load kept from a clean measurement: next section).\n"
    rows = [
        [row["experiment_id"], row["rep"], STATUS_LABEL.get(row["status"], row["status"]), str(row["error"])[:300]]
        for _, row in failed.iterrows()
    ]
    return markdown_table(["experiment", "repeat", "status", "error"], rows)


def contended_markdown(tries):
    """Every contended try (runs and their tries, final or not): its figures and what else used the machine. They
    are kept here and never enter the statistics; a run still contended after its retries was not measured."""
    contended = tries[tries["status"] == "contended"].sort_values(["experiment_id", "rep", "attempt"])
    if contended.empty:
        return (
            "No run was contended: nothing outside the runs' own processes used the machine beyond the "
            "`contention` limits during their timed windows.\n"
        )
    unmeasured = int(contended["final_try"].sum())
    lines = [
        f"{len(contended)} tries were contended and run again; {unmeasured} runs never measured clean (their "
        'experiments report "not measured: machine busy" if no other repeat was clean). Their figures are '
        "listed here and used nowhere else.",
        "",
    ]
    rows = [
        [
            row["experiment_id"],
            row["rep"],
            row["attempt"],
            number(row["train_images_per_s"]),
            number(row["contention_foreign_cpu_cores"], 2),
            percent(row["contention_steal_share"], 1),
            str(row["contention_reasons"])[:200],
        ]
        for _, row in contended.iterrows()
    ]
    header = ["experiment", "repeat", "try", "images/s", "foreign CPU cores", "steal", "why"]
    return "\n".join(lines) + "\n" + markdown_table(header, rows)


def provenance_markdown(runs):
    """The machine, then per stack and device what ran (versions) and where from (env file and packages hashes)."""
    stacks = (
        runs.dropna(subset=["framework_version"]).drop_duplicates(["stack", "device"]).sort_values(["stack", "device"])
    )
    versions = {
        "stack": "stack",
        "device": "device",
        "framework_version": "framework version",
        "backend": "backend",
        "provenance_env_deployment": "deployment",
        "provenance_python": "Python",
        "provenance_cuda": "CUDA",
        "provenance_cudnn": "cuDNN",
    }
    sources = {
        "stack": "stack",
        "device": "device",
        "provenance_env_file": "env file",
        "provenance_env_file_sha256": "env file sha256",
        "provenance_packages_sha256": "packages sha256",
    }
    tables = [
        markdown_table(
            list(columns.values()),
            [
                ["–" if pd.isna(value) else str(value)[:12] if "sha256" in key else value for key, value in row.items()]
                for row in stacks[list(columns)].to_dict("records")
            ],
        )
        for columns in (versions, sources)
    ]
    first = runs.iloc[0]
    machine = [
        ["host", first["provenance_host"]],
        ["CPU", first["provenance_cpu_model"]],
        ["CPU cores", first["provenance_cpu_cores"]],
        ["threads per run", first["provenance_threads"]],
        ["platform", first["provenance_platform"]],
        ["GPU", first["provenance_gpu"] or "none ({})".format(first["gpu_fields_reason"])],
        ["workflow commit", first["provenance_workflow_commit"]],
        ["first run started", runs["provenance_started_at"].min()],
        ["last run finished", runs["provenance_finished_at"].max()],
    ]
    return markdown_table(["machine", "value"], machine) + "\n" + "\n".join(tables)


def decided_clause(members, verdict):
    """One verdict's members, fastest first, each with its ratio and interval."""
    listed = ", ".join(
        f"{row['stack']} ({row['variant']}) {ratio_text(row)}"
        for _, row in members.sort_values("ratio", ascending=False).iterrows()
    )
    return f"{verdict}: {listed}"


def undecided_clause(members):
    """The inconclusive members, fastest first, each with the repeats that would decide it."""
    listed = [
        f"{row['stack']} ({row['variant']}) {ratio_text(row)}, {deciding_text(row)}"
        for _, row in members.sort_values("ratio", ascending=False).iterrows()
    ]
    return "inconclusive: " + "; ".join(listed)


def methods_text(part):
    """How a group's comparisons were tested: paired by round, unpaired, or some of each."""
    methods = sorted(set(part["method"].dropna()))
    return " and ".join(methods) + ", Holm within the group" if methods else "none tested"


def conclusion(part):
    """The sentence for one comparison group, from the comparisons table only: who is proven faster, slower or
    equivalent, who is inconclusive (and what would decide it), who was not tested. It never names a winner the
    tests did not prove."""
    first = part.iloc[0]
    clauses = []
    equivalences = sorted(verdict for verdict in set(part["verdict"]) if verdict.startswith("equivalent"))
    for verdict in ("faster", "slower", *equivalences):
        members = part[part["verdict"] == verdict]
        if len(members):
            clauses.append(decided_clause(members, verdict))
    undecided = part[part["verdict"] == "inconclusive"]
    if len(undecided):
        clauses.append(undecided_clause(undecided))
    untested = part[part["verdict"].str.startswith("not tested")]
    if len(untested):
        clauses.append(
            f"not tested (fewer than 3 ok repeats): {', '.join(untested['stack'] + ' (' + untested['variant'] + ')')}"
        )
    return (
        f"- {group_title(first)}; against {first['baseline_stack']} ({first['baseline_variant']}, "
        f"{first['baseline_rule']}; {methods_text(part)}): " + "; ".join(clauses) + "."
    )


def regression_lines(versions):
    """The summary's sentences on releases, from the versions table only."""
    flagged = versions[versions["regression"]]
    return [
        f"- **Regression**: {row['framework']} {row['newer_version']} trains at {ratio_text(row)} of "
        f"{row['older_version']}, {group_title(row)} ({row['variant']})."
        for _, row in flagged.iterrows()
    ]


def overview_markdown(summary, runs, comparisons, versions):
    lines = [
        f"{len(runs)} runs of {len(summary)} experiments over {summary['stack'].nunique()} stacks "
        f"({', '.join(sorted(summary['stack'].unique()))}); "
        f"{int((runs['status'] != 'ok').sum())} runs did not finish with status ok.",
        "",
    ]
    overlapping = int((runs["overlapping_runs"] > 0).sum())
    if overlapping:
        lines += [
            f"**Warning: {overlapping} runs overlapped another run on the same host; their timings are "
            "not trustworthy.**",
            "",
        ]
    lines += [conclusion(part) for _, part in comparison_groups(comparisons)]
    lines += regression_lines(versions)
    return "\n".join(lines) + "\n"


def expand_includes(text, folder):
    return INCLUDE.sub(lambda match: (folder / match[1]).read_text(), text)


def render_with_quarto(document, title):
    for target in ("html", "typst"):
        subprocess.run(
            ["quarto", "render", document.name, "--to", target, "-M", f"title:{title}"], cwd=document.parent, check=True
        )


# Pandoc sizes the columns of a pipe table whose lines are longer than --columns by its dash counts (all equal
# here), which squeezes long names into narrow cells; with a width no table reaches, every column fits its content.
TABLE_LINE_WIDTH = "--columns=100000"


def render_with_pandoc(document, title):
    import pypandoc
    import typst

    folder = document.parent
    markdown = expand_includes(document.read_text(), folder)
    metadata = [f"--metadata=title:{title}", f"--metadata=date:{datetime.date.today().isoformat()}"]
    pypandoc.convert_text(
        markdown,
        "html",
        format="markdown",
        outputfile=str(folder / "report.html"),
        extra_args=[
            "--standalone",
            "--embed-resources",
            "--toc",
            "--toc-depth=2",
            f"--resource-path={folder}",
            f"--css={folder / 'report.css'}",
            TABLE_LINE_WIDTH,
            *metadata,
        ],
    )
    typst_source = pypandoc.convert_text(
        markdown,
        "typst",
        format="markdown",
        extra_args=["--standalone", "--toc", "--toc-depth=2", TABLE_LINE_WIDTH, *metadata],
    )
    (folder / "report.typ").write_text(typst_source)
    typst.compile(str(folder / "report.typ"), output=str(folder / "report.pdf"), root=str(folder))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", required=True)
    parser.add_argument("--document", required=True)
    parser.add_argument("--style", required=True, help="the HTML's stylesheet (embedded)")
    parser.add_argument("--title", required=True)
    parser.add_argument("--html", required=True)
    parser.add_argument("--pdf", required=True)
    args = parser.parse_args()
    tables = {name: pd.read_parquet(Path(args.tables) / f"{name}.parquet") for name in (*TABLES, OPS_TABLE)}
    tries, summary, epochs = tables["runs"], tables["summary"], tables["epochs"]
    runs = tries[tries["final_try"]]  # contended tries before a run's final one are listed apart
    build = Path(args.html).parent / "build"
    if build.exists():
        shutil.rmtree(build)
    figures = build / "figures"
    figures.mkdir(parents=True)
    throughput_figure(summary, figures / "throughput.svg")
    epoch_time_figure(summary, epochs, figures / "epoch_time.svg")
    speedup_figure(tables["comparisons"], figures / "speedup.svg")
    convergence_figure(summary, epochs, figures / "convergence.svg")
    pieces = {
        "overview.md": overview_markdown(summary, runs, tables["comparisons"], tables["versions"]),
        "summary.md": summary_markdown(summary),
        "comparisons.md": comparisons_markdown(tables["comparisons"]),
        "batch_size.md": batch_size_markdown(summary, figures),
        "failures.md": failures_markdown(runs),
        "contended.md": contended_markdown(tries),
        "provenance.md": provenance_markdown(runs),
        "resources.md": resources_markdown(summary, runs),
        "engagement.md": engagement_markdown(runs),
        "resource_figures.md": resource_figures_markdown(summary, tables["telemetry"], figures),
        "versions.md": versions_markdown(tables["versions"], figures),
        "ops.md": ops_markdown(tables["ops"], figures),
        "max_batch.md": max_batch_markdown(tables["max_batch"]),
        "math_mode.md": math_mode_markdown(runs),
        "input_pipeline.md": input_pipeline_markdown(summary),
    }
    for name, text in pieces.items():
        (build / name).write_text(text)
    document = build / "report.qmd"
    shutil.copy(args.document, document)
    shutil.copy(args.style, build / "report.css")
    if shutil.which("quarto"):
        print("rendering with Quarto")
        render_with_quarto(document, args.title)
    else:
        print("quarto not on PATH: rendering with pandoc (HTML) and pandoc + typst (PDF)")
        render_with_pandoc(document, args.title)
    shutil.copy(build / "report.html", args.html)
    shutil.copy(build / "report.pdf", args.pdf)
    print(json.dumps({"html": args.html, "pdf": args.pdf}))


if __name__ == "__main__":
    run_main(main)
