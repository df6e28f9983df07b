"""Operator microbenchmarks: time per call against size per operator, the fraction of the machine's ceiling."""

import pandas as pd

from dlbench.report.common import (
    figure_grid,
    framework_colour,
    legend_below,
    log_ticks,
    markdown_table,
    number,
    save,
)

TITLE = "Operator microbenchmarks"
ABSENT = "no operator benchmarks in this configuration (`ops.stacks` is empty), or none succeeded."


def operator_grid(ops, column, ylabel, path, log_y):
    """One panel per operator and device (CPU and GPU panels apart); a line per framework and dtype."""
    panels = list(dict.fromkeys(zip(ops["device"], ops["operator"])))
    figure, axes = figure_grid(len(panels), max_columns=3, panel_size=(4.2, 2.8))
    for axis, (device, operator) in zip(axes, panels):
        part = ops[(ops["operator"] == operator) & (ops["device"] == device)]
        for (framework, dtype), line in part.groupby(["framework", "dtype"]):
            line = line.sort_values("size")
            axis.plot(
                line["size"],
                line[column],
                marker=".",
                color=framework_colour(framework),
                linestyle="-" if dtype == "float32" else "--",
                label=f"{framework} {dtype}",
            )
            if column == "median_s":
                axis.fill_between(
                    line["size"], line["q1_s"], line["q3_s"], color=framework_colour(framework), alpha=0.2
                )
        axis.set_xscale("log")
        log_ticks(axis.xaxis)
        if log_y:
            axis.set_yscale("log")
            log_ticks(axis.yaxis)
        axis.set_title(f"{operator} · {device}", fontsize=10)
        axis.set_xlabel("matrix side" if operator == "gemm" else "elements")
        axis.set_ylabel(ylabel, fontsize=8)
    legend_below(figure, fontsize=6)
    save(figure, path)


def of_ceiling(fraction):
    """The fraction of the ceiling; above 1 the ceiling, not the operator, is wrong (measured low), so the figure
    is flagged rather than printed as a result."""
    if pd.isna(fraction):
        return "–"
    return f"{fraction:.1%}" if fraction <= 1 else "over 100 %: ceiling measured low"


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
            of_ceiling(row["fraction_of_ceiling"]),
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
            row["ceiling_source"],
        ]
        for _, row in ceilings.iterrows()
    ]
    return markdown_table(["stack", "device", "GEMM GFLOP/s", "bandwidth GB/s", "how"], rows)


def failures_text(ops):
    failed = ops[ops["status"] == "error"]
    if failed.empty:
        return ""
    rows = [[row["stack"], row["operator"], row["size"], str(row["error"])[:200]] for _, row in failed.iterrows()]
    return "\nFailed operator measurements:\n\n" + markdown_table(["stack", "operator", "size", "error"], rows)


def markdown(study, figures):
    measured = study.ops[study.ops["status"] == "ok"]
    if measured.empty:
        return None
    operator_grid(measured, "median_s", "seconds per call (median, IQR band)", figures / "ops_time.svg", True)
    operator_grid(measured, "fraction_of_ceiling", "fraction of the ceiling", figures / "ops_ceiling.svg", False)
    return (
        "Time per call against size (log-log; GEMM by matrix side, the others by element count):\n\n"
        "![Operator time per call](figures/ops_time.svg)\n\n"
        "Achieved fraction of the machine's ceiling (GEMM and dot: of the GEMM GFLOP/s ceiling; the others: "
        "of the memory-bandwidth ceiling):\n\n![Fraction of the ceiling](figures/ops_ceiling.svg)\n\n"
        "At each operator's largest size:\n\n"
        + largest_size_table(measured)
        + "\nCeilings, measured in each job:\n\n"
        + ceiling_table(measured)
        + failures_text(study.ops)
    )
