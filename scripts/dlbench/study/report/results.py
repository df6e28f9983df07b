"""Results per experiment: the summary table, one per dataset x model x batch x device so each fits a PDF page."""

import pandas as pd

from dlbench.axes import PANEL
from dlbench.study.report.common import cell, lead_in, markdown_table, panel_title, percent, variant_labels

TITLE = "Results per experiment"


def interval_cell(row, low, high):
    if row["runs_ok"] == 0:
        return "–"
    if pd.isna(row[low]):
        return f"none ({row['runs_ok']} ok repeat{'s' * (row['runs_ok'] != 1)})"
    return f"{row[low]:,.0f} – {row[high]:,.0f}"


def tokens_cell(row):
    """A language model's tokens/s beside its sequences/s; nothing for images."""
    tokens = row.get("train_tokens_per_s_gmean")
    return f" ({tokens:,.0f} tokens/s)" if pd.notna(tokens) else ""


def latency_cell(row):
    """Batch-1 latency's median and 99th percentile (means over the repeats that measured it); a dash where none
    did (measure_latency, streamed data, replicas)."""
    median, p99 = row.get("latency_ms_median_mean"), row.get("latency_ms_p99_mean")
    if row["runs_ok"] == 0 or median is None or pd.isna(median):
        return "–"
    return f"{median:.3g}, {p99:.3g}"


def average_round_cell(row):
    """The throughput at the average round of the group with its interval (rounds as blocks); a dash where the
    summary has none."""
    centre = row.get("train_images_per_s_adjusted")
    if row["runs_ok"] == 0 or centre is None or pd.isna(centre):
        return "–"
    if pd.isna(row["train_images_per_s_adjusted_low"]):
        return f"{centre:,.0f}"
    low, high = row["train_images_per_s_adjusted_low"], row["train_images_per_s_adjusted_high"]
    return f"{centre:,.0f} [{low:,.0f}, {high:,.0f}]"


def summary_table(summary):
    header = [
        "stack",
        "variant",
        "images/s (geometric mean)",
        "95% interval",
        "at the average round [95%]",
        "CV",
        "steady epoch s (median)",
        "first epoch s (median)",
        "inference images/s (geometric mean)",
        "latency at batch 1, ms (median, p99)",
        "accuracy (mean)",
        "runs ok",
    ]
    sections = []
    for panel, part in summary.groupby(PANEL):
        rows = []
        part = part.assign(variant_label=variant_labels(part))
        for _, row in part.sort_values(["stack", "variant_label"]).iterrows():
            throughput = row["measurement_note"] or cell(row, "train_images_per_s_gmean") + tokens_cell(row)
            rows.append(
                [
                    row["stack"],
                    row["variant_label"],
                    throughput,
                    interval_cell(row, "train_images_per_s_ci95_low", "train_images_per_s_ci95_high"),
                    average_round_cell(row),
                    cell(row, "train_images_per_s_cv", 1, percent) + (" unstable" if row.get("unstable") else ""),
                    cell(row, "steady_epoch_s_median", 3),
                    cell(row, "first_epoch_s_median", 3),
                    cell(row, "inference_images_per_s_gmean"),
                    latency_cell(row),
                    cell(row, "final_test_accuracy_mean", 3),
                    f"{row['runs_ok']}/{row['runs']}",
                ]
            )
        sections.append(f"### {panel_title(panel)}\n\n" + markdown_table(header, rows))
    return "\n".join(sections)


def markdown(study, figures):
    return lead_in(
        "Images/s is the geometric mean of the repeats' steady throughput with its 95% interval (log-scale t); at the "
        "average round, the same with the machine's drift between rounds taken out (experiment plus round fitted over "
        "the group's runs: The machine's speed by round), the figure to set beside another experiment's where a race "
        "ran them in different rounds; CV is "
        "the coefficient of variation across repeats, marked unstable from 10 % (pyperf's warning); a language "
        "model's images are its sequences, its tokens/s "
        "(sequences/s x context) beside them. Whether two experiments differ beyond noise is their "
        "comparison's verdict (Comparisons), whatever the figures' order. Inference images/s is one evaluation pass "
        "over the test set as the stack runs it (Keras: its `predict` call), the median pass after the first epoch, "
        "its fixed cost per pass included: on a small test set that cost can make inference read slower than "
        "training, whose steady epochs are many steps long. Latency at batch 1: one test example in and its logits "
        "back on the host, as a service answers one request (median and 99th percentile of up to 100 calls after 5 "
        "untimed ones; `measure_latency`, by default in each experiment's first repeat)."
    ) + summary_table(study.summary)
