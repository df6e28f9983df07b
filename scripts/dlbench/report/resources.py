"""Input share, memory, utilisation and energy: per experiment (means over finished repeats) and over a run."""

from dlbench.report.common import (
    LINE_KEYS,
    cell,
    figure_grid,
    framework_colour,
    label,
    legend_below,
    markdown_table,
    panel_rows,
    panel_title,
    panel_titles,
    save,
    share,
    styled_lines,
    variant_labels,
)

TITLE = "Input share, memory, utilisation and energy"

METHOD = (
    "Means over the repeats that finished. The input share is the part of a steady epoch that goes away when every "
    "step trains on one batch prepared before the clock starts: time spent gathering batches and placing them on the "
    "device that compute does not hide (for Keras on TensorFlow the copy to the device stays in both epochs, so its "
    "share is a lower bound). It is measured over pairs of a real and a fixed-batch epoch timed next to each other; "
    "each record also holds the interval over the pairs, and a share whose interval includes zero is noise, not "
    "input work. "
    "MFU (GPU) is the achieved training FLOP/s (3 x forward FLOPs x images/s) over the GPU's datasheet peak at the "
    "precision that ran. Memory and utilisation are sampled by a thread in each training process (see the run "
    "record's fields in docs/run-record.md); GPU utilisation and energy cover the training epochs only."
)

TRACE_METRICS = {
    "gpu_util_pct": "GPU utilisation %",
    "gpu_memory_mb": "GPU memory used MiB",
    "power_w": "GPU power W",
    "cpu_util_pct": "CPU utilisation, % of all cores",
    "rss_mb": "host resident memory MiB",
}

MEMORY_PEAKS = {
    "host_rss_peak_mb_mean": "host RSS",
    "gpu_memory_peak_mb_mean": "GPU (NVML)",
    "allocator_peak_mb_mean": "framework allocator",
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
# Beside energy per image, where the config prices the device-hour (the summary's costs, dlbench.analysis.cost).
COSTS = [
    ("cost_per_million_images", 3, "cost per million images (geometric mean)"),
    ("cost_to_target", 3, "cost to target (mean)"),
]


def resources_table(summary, runs):
    """Input share, memory, utilisation and energy per experiment (means over ok repeats), a table per dataset,
    model, batch and device; GPU columns only where measured, costs only where priced."""
    header = ["stack", "variant", "input share (mean)", "RSS peak MiB (mean)", "CPU % (mean)"]
    columns = [("host_rss_peak_mb_mean", 0), ("cpu_utilisation_mean_mean", 0)]
    sections = []
    for panel in panel_titles(summary):
        part = panel_rows(summary, panel)
        measured = [(column, digits, title) for column, digits, title in GPU_COLUMNS if part[column].notna().any()]
        priced = [
            (column, digits, title) for column, digits, title in COSTS if column in part and part[column].notna().any()
        ]
        part = part.assign(variant_label=variant_labels(part)).sort_values(["stack", "variant_label"])
        rows = [
            [
                row["stack"],
                row["variant_label"],
                cell(row, "input_share_mean", 1, share),
                *(cell(row, column, digits) for column, digits in columns),
                *(cell(row, column, digits) for column, digits, _ in measured),
                *(cell(row, column, digits) for column, digits, _ in priced),
            ]
            for _, row in part.iterrows()
        ]
        titles = header + [f"{title} (mean)" for _, _, title in measured] + [title for _, _, title in priced]
        sections.append(f"### {panel_title(panel)}\n\n" + markdown_table(titles, rows))
    reasons = sorted(set(runs["gpu_fields_reason"].dropna()))
    note = f"\nGPU fields not shown where not measured: {'; '.join(reasons)}.\n" if reasons else ""
    return "\n".join(sections) + note


def telemetry_figure(summary, telemetry, path):
    """Each experiment's first finished repeat over time, as its sampler recorded it: a row per dataset, model,
    batch and device panel, a column per quantity measured there (the GPU's only where NVML read them)."""
    traces = telemetry.merge(summary[["experiment_id", *LINE_KEYS]])
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
            for name, line, style in styled_lines(part, label(part)):
                axis.plot(
                    line["t_s"], line[metrics[column]], linewidth=1, markevery=0.2, markersize=3, label=name, **style
                )
            axis.set_title(panel_title(panel), fontsize=8)
            axis.set_xlabel("seconds since the process started", fontsize=8)
            axis.set_ylabel(TRACE_METRICS[metrics[column]], fontsize=8)
            axis.set_ylim(bottom=0)
    legend_below(figure)
    save(figure, path)


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
    legend_below(figure)
    save(figure, path)


def energy_figure(measured, path):
    """GPU energy per trained image (training epochs only), per experiment where NVML reported power."""
    panels = panel_titles(measured)
    figure, axes = figure_grid(len(panels))
    for axis, panel in zip(axes, panels):
        part = panel_rows(measured, panel).sort_values("gpu_energy_per_image_j_mean")
        axis.barh(
            label(part), part["gpu_energy_per_image_j_mean"], color=list(map(framework_colour, part["framework"]))
        )
        axis.set_title(panel_title(panel), fontsize=10)
        axis.set_xlabel("joules per training image (mean of repeats)")
    save(figure, path)


def resource_figures(summary, runs, telemetry, figures):
    """The resource figures: telemetry over time and memory peaks always, energy per image where measured; then
    whether CPU energy was measured."""
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
            METHOD,
            resources_table(study.summary, study.runs),
            resource_figures(study.summary, study.runs, study.telemetry, figures),
        ]
    )
