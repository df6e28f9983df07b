"""Input share, memory, utilisation and energy: per experiment (means over finished repeats) and over a run."""

from matplotlib.lines import Line2D

from dlbench.axes import PANEL
from dlbench.study.analysis.records import TRACE_MIN_BIN_S
from dlbench.study.palette import series_style, workload_styles
from dlbench.study.report.common import (
    LINE_KEYS,
    bracketed,
    cell,
    figure_grid,
    figure_titles,
    key_legend,
    lead_in,
    markdown_table,
    number,
    panel_heading,
    panel_rows,
    panel_title,
    panel_titles,
    save,
    share,
    stack_rows,
    variant_labels,
)

TITLE = "Input share, memory, utilisation and energy"

METHOD = (
    "Each figure is a mean over the repeats that finished and measured it; costs, where the config prices the device, "
    "are per million images at the geometric mean throughput and to target at the mean time, each with its 95% "
    "interval. The input share is each experiment's first repeat's unless the config "
    "measures it in every repeat (`measure_input_share`). The input share is the part of a steady epoch that goes away when every "
    "step trains on one batch prepared before the clock starts: time spent gathering batches and placing them on the "
    "device that compute does not hide (for Keras on TensorFlow the copy to the device stays in both epochs, so its "
    "share is a lower bound). It is measured over pairs of a real and a fixed-batch epoch timed next to each other; "
    "each record also holds the interval over the pairs, and a share whose interval includes zero is noise, not "
    "input work. "
    "Images/s per busy core (CPU runs): steady throughput over the cores the run kept busy (CPU % of all cores "
    "times their count), which sets frameworks left to their own thread defaults side by side per core. "
    "Training GFLOP/s is the model's arithmetic per second of steady training (3 x forward FLOPs x images/s), on any "
    "device; the Operators section sets the highest of it beside the machine's measured GEMM ceiling, where the "
    "config runs operators. MFU (GPU) is that rate over the GPU's datasheet peak at the precision that ran. Memory "
    "and utilisation are sampled by a thread in each training process (see the run record's fields in "
    "docs/run-record.md); GPU utilisation and energy cover the training epochs only."
)

TRACE_METRICS = {
    "gpu_util_pct": "GPU utilisation %",
    "gpu_memory_mb": "GPU memory MiB",
    "power_w": "GPU power W",
    "cpu_util_pct": "CPU % of all cores",
    "rss_mb": "host RSS MiB",
}

GPU_COLUMNS = [
    ("gpu_utilisation_mean_mean", 0, "GPU %"),
    ("gpu_utilisation_p95_mean", 0, "GPU % p95"),
    ("gpu_memory_peak_mb_mean", 0, "GPU MiB"),
    ("allocator_peak_mb_mean", 0, "allocator MiB"),
    ("gpu_power_mean_w_mean", 0, "W"),
    ("gpu_energy_per_image_j_mean", 4, "J/image"),
    ("model_flops_utilisation_mean", 3, "MFU"),
]
# Beside energy per image, where the config prices the device-hour (the summary's costs, dlbench.study.analysis.cost).
COSTS = [
    ("cost_per_million_images", 3, "cost per million images [95%]"),
    ("cost_to_target", 3, "cost to target [95%]"),
]


def cost_cell(row, column, digits):
    """A cost with its interval where the summary has one (at least 3 repeats)."""
    if row["runs_ok"] == 0:
        return cell(row, column, digits)
    low, high = row.get(f"{column}_ci95_low"), row.get(f"{column}_ci95_high")  # absent from an older summary
    return bracketed(row[column], low, high, f",.{digits}f")


def resources_table(summary, runs):
    """Input share, memory, utilisation and energy per experiment (means over ok repeats), a table per dataset,
    model, batch and device; per-core throughput and GPU columns only where measured, costs only where priced."""
    always = [("host_rss_peak_mb_mean", 0, "RSS peak MiB"), ("cpu_utilisation_mean_mean", 0, "CPU %")]
    measured_only = [
        ("train_images_per_busy_core_mean", 0, "images/s per busy core"),
        ("train_flops_per_s_mean", 2, "training GFLOP/s"),
        *GPU_COLUMNS,
    ]
    formats = {"train_flops_per_s_mean": lambda flops, digits: number(flops / 1e9, digits)}
    sections = []
    for panel in panel_titles(summary):
        part = panel_rows(summary, panel)
        shown = always + [
            (column, digits, title) for column, digits, title in measured_only if part[column].notna().any()
        ]
        priced = [
            (column, digits, title) for column, digits, title in COSTS if column in part and part[column].notna().any()
        ]
        part = part.assign(variant_label=variant_labels(part)).sort_values(["stack", "variant_label"])
        rows = [
            [
                row["stack"],
                row["variant_label"],
                cell(row, "input_share_mean", 1, share),
                *(cell(row, column, digits, formats.get(column, number)) for column, digits, _ in shown),
                *(cost_cell(row, column, digits) for column, digits, _ in priced),
            ]
            for _, row in part.iterrows()
        ]
        titles = ["stack", "variant", "input share"] + [title for *_, title in shown + priced]
        sections.append(f"### {panel_title(panel)}\n\n" + markdown_table(titles, rows))
    reasons = sorted(set(runs["gpu_fields_reason"].dropna()))
    note = f"\nGPU fields not shown where not measured: {'; '.join(reasons)}.\n" if reasons else ""
    return "\n".join(sections) + note


def telemetry_figure(summary, telemetry, path):
    """Small multiples: a row per quantity the sampler measured (the GPU's only where NVML read them), a column per
    stack, each panel that stack's experiments' first finished repeats over time in its colour, its workloads
    (dataset, model, batch) by line style, its variants by marker. One panel holds a few lines of one stack, not every
    stack's lines over one another."""
    traces = telemetry.merge(summary[["experiment_id", *LINE_KEYS]])
    metrics = [name for name in TRACE_METRICS if traces[name].notna().any()]
    stacks = sorted(set(traces["stack"]))
    workloads = panel_titles(traces)
    styles = workload_styles(workloads)
    figure, axes = figure_grid(len(metrics) * len(stacks), max_columns=len(stacks), panel_height=1.3)
    axes = list(axes)
    for row, metric in enumerate(metrics):
        for column, stack in enumerate(stacks):
            axis = axes[row * len(stacks) + column]
            part = traces[traces["stack"] == stack].dropna(subset=[metric])
            for _, line in part.groupby(part["experiment_id"] + " " + part["machine"], sort=True):
                first = line.iloc[0]
                workload = tuple(first[key] for key in PANEL)
                style = series_style(first["stack"], first["variant"], first["data_placement"], styles[workload])
                axis.plot(line["t_s"], line[metric], linewidth=0.8, markevery=0.25, markersize=2.5, **style)
            if part.empty:
                axis.text(0.5, 0.5, "not measured", ha="center", va="center", fontsize=7, transform=axis.transAxes)
                axis.set_xticks([])
            axis.set_ylim(bottom=0, top=max(traces[metric].max(), 1) * 1.05)
            axis.set_title(stack if row == 0 else "", fontsize=7)
            axis.set_ylabel(TRACE_METRICS[metric] if column == 0 else "")
            axis.set_xlabel("s since start" if row == len(metrics) - 1 else "")
            if column:
                axis.tick_params(labelleft=False)
    titles = figure_titles(workloads)
    workload_keys = [Line2D([], [], color="#555555", linestyle=styles[each], label=titles[each]) for each in workloads]
    key_legend(figure, traces, workload_keys)
    save(figure, path)


def energy_figure(measured, path):
    """GPU energy per trained image (training epochs only), per experiment where NVML reported power: a row per
    stack (the least energy on top), its variants by marker."""
    panels = panel_titles(measured)
    titles = figure_titles(panels)
    figure, axes = figure_grid(len(panels), max_columns=3, panel_height=0.6 + 0.17 * measured["stack"].nunique())
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel)
        ys, ticks, stacks = stack_rows(part, -part["gpu_energy_per_image_j_mean"])
        for index, row in part.iterrows():
            style = series_style(row["stack"], row["variant"], row["data_placement"], linestyle="")
            axis.plot(row["gpu_energy_per_image_j_mean"], ys[index], markersize=4, **style)
        axis.set_yticks(ticks, stacks)
        axis.set_xlim(left=0)
        panel_heading(axis, titles[panel])
        axis.set_xlabel("joules per training image (mean of repeats)")
    key_legend(figure, measured)
    save(figure, path)


def resource_figures(summary, runs, telemetry, figures):
    """The resource figures: telemetry over time always, energy per image where measured; then whether CPU energy
    was measured. Peak memory is the table's: no figure repeats it."""
    pieces = []
    if len(telemetry):
        telemetry_figure(summary, telemetry, figures / "telemetry.svg")
        pieces.append(
            "![Telemetry over a run: a column per stack, its experiments' first finished repeats](figures/"
            "telemetry.svg)\n\nOver each experiment's first finished repeat, from the sampler's trace in means over "
            f"bins of at least {TRACE_MIN_BIN_S:g} s (on GPU: utilisation, memory and power from NVML), a line "
            "style per workload; the table's means give each experiment's level."
        )
    energy = summary[summary["gpu_energy_per_image_j_mean"].notna()]
    if len(energy):
        energy_figure(energy, figures / "energy.svg")
        pieces.append(
            "![Energy per training image](figures/energy.svg)\n\n"
            "Energy per training image: GPU board power integrated over the training epochs."
        )
    else:
        pieces.append("Energy is measured from the GPU's board power (NVML): no run of this report had it.")
    pieces.append(cpu_energy_text(runs))
    return "\n\n".join(pieces) + "\n"


def cpu_energy_text(runs):
    """Whether the CPU packages' energy (RAPL, through /sys/class/powercap) was measured, and where it was not, why:
    the records' own reasons."""
    finished = runs[runs["status"] == "ok"]
    missing = finished[finished["cpu_energy_j"].isna()]
    if missing.empty:
        return "CPU package energy (RAPL) was measured in every finished run (the runs table's `cpu_energy_j`)."
    reasons = "; ".join(sorted(set(missing["cpu_energy_reason"].dropna()))) or "no reason recorded"
    return (
        f"CPU package energy (RAPL, read through /sys/class/powercap) was not measured in {len(missing)} of "
        f"{len(finished)} finished runs: {reasons}."
    )


def markdown(study, figures):
    return "\n\n".join(
        [
            lead_in(METHOD),
            resources_table(study.summary, study.runs),
            resource_figures(study.summary, study.runs, study.telemetry, figures),
        ]
    )
