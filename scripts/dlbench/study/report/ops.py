"""Operator microbenchmarks: time per call against size per operator, the fraction of the machine's ceiling with the
cause of each measurement above it, and the operators beside the training runs' FLOP/s."""

import pandas as pd

from dlbench.study.analysis.operators import CACHE, GEMM, IMPORT, UNEXPLAINED, VIEW
from dlbench.study.palette import stack_colour
from dlbench.study.report.common import (
    figure_grid,
    lead_in,
    legend_below,
    log_ticks,
    markdown_table,
    number,
    panel_heading,
    save,
)

TITLE = "Operator microbenchmarks"
ABSENT = "no operator benchmarks in this configuration (`ops.stacks` is empty), or none succeeded."


def operator_grid(ops, column, ylabel, path, log_y, cap=None):
    """One panel per operator and device (CPU and GPU panels apart); a line per stack and dtype, in the stack's colour
    of the training figures (named with the framework it measured). With a cap, a fraction of the ceiling: values
    drawn up to the cap (those above it at its edge), the ceiling a dotted line."""
    panels = list(dict.fromkeys(zip(ops["device"], ops["operator"])))
    figure, axes = figure_grid(len(panels), max_columns=3, panel_height=1.9)
    for axis, (device, operator) in zip(axes, panels):
        part = ops[(ops["operator"] == operator) & (ops["device"] == device)]
        for (stack, framework, dtype), line in part.groupby(["stack", "framework", "dtype"]):
            line = line.sort_values("size")
            axis.plot(
                line["size"],
                line[column] if cap is None else line[column].clip(upper=cap),
                marker=".",
                color=stack_colour(stack),
                linestyle="-" if dtype == "float32" else "--",
                label=f"{stack} ({framework}) {dtype}",
            )
            if column == "median_s":
                axis.fill_between(line["size"], line["q1_s"], line["q3_s"], color=stack_colour(stack), alpha=0.2)
        axis.set_xscale("log")
        log_ticks(axis.xaxis)
        if log_y:
            axis.set_yscale("log")
            log_ticks(axis.yaxis)
        if cap is not None:
            axis.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
            axis.set_ylim(0, cap * 1.05)
        panel_heading(axis, f"{operator} · {device}")
        axis.set_xlabel("matrix side" if operator == "gemm" else "elements")
        axis.set_ylabel(ylabel)
    legend_below(figure)
    save(figure, path)


# Fractions of the ceiling are drawn up to this; the rows above it are cache-resident or unexplained (the table says).
CAP = 2.0
# Why a row lies above its ceiling (dlbench.study.analysis.operators), as the table's legend explains it.
CAUSES = {
    VIEW: "the operator returned a view of its input: its time does not grow with size, no data was copied, so its "
    "bytes per second are no bandwidth",
    IMPORT: "the framework adopted the NumPy array's memory instead of copying it: its time does not grow with size, "
    "so its bytes per second are no bandwidth",
    CACHE: "the bytes it moves fit in the CPU's last-level cache, which reads and writes faster than the memory the "
    "bandwidth ceiling measures",
    GEMM: "a GEMM (or dot) above NumPy's GEMM on the same machine: no copy or cache effect explains it, so its timing "
    "is suspect (asynchronous work left unfinished when the clock stopped) or the framework's BLAS beats NumPy's",
    UNEXPLAINED: "neither a view, an import nor the cache explains it: its timing is suspect",
}
NO_COPY = (VIEW, IMPORT)


def of_ceiling(row):
    """The fraction of the ceiling; above 1, why (the ops table's over_ceiling_cause) instead of a result."""
    if pd.isna(row["fraction_of_ceiling"]):
        return "–"
    if row["fraction_of_ceiling"] <= 1:
        return f"{row['fraction_of_ceiling']:.1%}"
    return f"over 100 %: {row['over_ceiling_cause']}"


def causes_text(measured):
    """The legend of the causes the table names."""
    counts = {name: int((measured["over_ceiling_cause"] == name).sum()) for name in CAUSES}
    lines = [f"- *{name}* ({count} row{'s' * (count > 1)}): {CAUSES[name]}." for name, count in counts.items() if count]
    if not lines:
        return ""
    return "\n" + lead_in("Above 100 % of the ceiling, by cause (over every size measured):") + "\n".join(lines) + "\n"


def training_text(study, measured):
    """The operators beside the training runs: the highest training FLOP/s per device next to its GEMM ceiling."""
    lines = []
    for device, part in measured.groupby("device"):
        trained = study.summary[study.summary["device"] == device].dropna(subset=["train_flops_per_s_mean"])
        if trained.empty:
            continue
        best = trained.loc[trained["train_flops_per_s_mean"].idxmax()]
        lines.append(
            f"On {device}, the highest training rate was {best['train_flops_per_s_mean'] / 1e9:,.1f} GFLOP/s "
            f"(model FLOPs, forward and backward: {best['stack']}, {best['model']} on {best['dataset']}, batch "
            f"{best['batch_size']}), beside a GEMM ceiling of {part['ceiling_gemm_gflop_per_s'].max():,.1f} GFLOP/s."
        )
    if not lines:
        return ""
    return (
        "\nThe training runs are built from these operators: dense layers and convolutions are GEMMs, activations "
        "and normalisation elementwise. "
        + " ".join(lines)
        + " Where training stays far below the GEMM ceiling, its time goes to what a large GEMM leaves out: the "
        "per-call overhead that the small sizes' time per call shows, and elementwise operators bound by memory.\n"
    )


def largest_size_table(measured):
    """At each operator's largest size, the figures of every framework."""
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
            of_ceiling(row),
        ]
        for _, row in largest.iterrows()
    ]
    header = ["operator", "framework", "device", "dtype", "size", "µs/call", "GFLOP/s", "GB/s", "of ceiling"]
    return markdown_table(header, rows)


def ceiling_table(measured):
    ceilings = measured.drop_duplicates(["stack", "device"])
    rows = [
        [
            row["stack"],
            row["device"],
            number(row["ceiling_gemm_gflop_per_s"], 1),
            number(row["ceiling_bandwidth_gb_per_s"], 1),
            number(row["ceiling_cache_bytes"] / 2**20),
            row["ceiling_source"],
        ]
        for _, row in ceilings.iterrows()
    ]
    return markdown_table(["stack", "device", "GEMM GFLOP/s", "bandwidth GB/s", "last-level cache MiB", "how"], rows)


def failures_text(ops):
    failed = ops[ops["status"] == "error"]
    if failed.empty:
        return ""
    rows = [[row["stack"], row["operator"], row["size"], str(row["error"])[:200]] for _, row in failed.iterrows()]
    return (
        "\n" + lead_in("Failed operator measurements:") + markdown_table(["stack", "operator", "size", "error"], rows)
    )


def markdown(study, figures):
    measured = study.ops[study.ops["status"] == "ok"]
    if measured.empty:
        return None
    operator_grid(measured, "median_s", "seconds per call (median, IQR band)", figures / "ops_time.svg", True)
    copying = measured[~measured["over_ceiling_cause"].isin(NO_COPY)]
    operator_grid(
        copying, "fraction_of_ceiling", "fraction of the ceiling", figures / "ops_ceiling.svg", False, cap=CAP
    )
    return (
        "![Operator time per call against size (log-log; GEMM by matrix side, the others by element count; band: "
        "interquartile range)](figures/ops_time.svg)\n\n"
        f"![Fraction of the ceiling achieved (dotted: the machine's ceiling), drawn up to {CAP:g}x](figures/"
        "ops_ceiling.svg)\n\n"
        + lead_in(
            "The fraction of the ceiling is of the GEMM GFLOP/s ceiling for GEMM and dot, of the memory-bandwidth "
            "ceiling for the others; values above the cap sit at the top edge; views and zero-copy imports, which "
            "move no data, are left out. At each operator's largest size:"
        )
        + largest_size_table(measured)
        + causes_text(measured)
        + training_text(study, measured)
        + "\n"
        + lead_in("Ceilings, measured in each job:")
        + ceiling_table(measured)
        + failures_text(study.ops)
    )
