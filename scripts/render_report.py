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

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

INCLUDE = re.compile(r"\{\{<\s*include\s+(\S+)\s*>\}\}")
STATUS_LABEL = {"oom": "OOM", "error": "ERROR", "unavailable": "N/A"}


def variant_label(variant, placement):
    """The variant, and the data placement where it is not the default (the dataset staged on the device)."""
    return variant if placement == "device" else f"{variant}, {placement} data"


def variant_labels(frame):
    return pd.Series(map(variant_label, frame["variant"], frame["data_placement"]), index=frame.index, dtype=object)


def label(frame):
    return frame["stack"] + " · " + variant_labels(frame)


PANEL = ["dataset", "model", "batch_size", "device"]
GROUP = ["dataset", "model", "device", "batch_size", "optimizer", "learning_rate", "epochs", "data_placement"]


def panel_titles(summary):
    return sorted(set(zip(*(summary[key] for key in PANEL))))


def panel_rows(frame, panel):
    """The rows of frame that belong to one (dataset, model, batch size, device) panel."""
    return frame[(frame[PANEL] == pd.Series(panel, index=PANEL)).all(axis=1)]


def figure_grid(count, max_columns=2, panel_size=(6.5, 3.2)):
    """A figure with `count` visible panels, at most max_columns a row."""
    columns = min(count, max_columns)
    rows = (count + columns - 1) // columns
    width, height = panel_size
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, 0.5 + height * rows), squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    return figure, axes.flat


def throughput_figure(summary, path):
    """Geometric-mean steady throughput per stack and variant, with its 95% interval (none below 3 repeats)."""
    panels = panel_titles(summary)
    figure, axes = figure_grid(len(panels))
    for axis, (dataset, model, batch, device) in zip(axes, panels):
        part = panel_rows(summary, (dataset, model, batch, device))
        part = part.sort_values("train_images_per_s_gmean")
        centre = part["train_images_per_s_gmean"].fillna(0)
        low = (centre - part["train_images_per_s_ci95_low"]).fillna(0)
        high = (part["train_images_per_s_ci95_high"] - centre).fillna(0)
        axis.barh(label(part), centre, xerr=[low, high], color="#4C72B0", capsize=3)
        for y, (value, status) in enumerate(zip(part["train_images_per_s_gmean"], part["statuses"])):
            if pd.isna(value):
                axis.text(0, y, " " + STATUS_LABEL.get(status.split(",")[0], "failed"), va="center", color="#C44E52")
        axis.set_xlim(left=0)
        axis.set_title(f"{model} on {dataset}, batch {batch}, {device}", fontsize=10)
        axis.set_xlabel("training images/s (steady epochs)")
    figure.tight_layout()
    figure.savefig(path, dpi=130)
    plt.close(figure)


def group_title(row):
    """An experiment group: what its members share (comparisons are made within one)."""
    placement = "" if row["data_placement"] == "device" else f", {row['data_placement']} data"
    return (f"{row['model']} on {row['dataset']}, batch {row['batch_size']}, {row['device']}, {row['optimizer']} "
            f"lr {row['learning_rate']:g}, {row['epochs']} epochs{placement}")  # fmt: skip


def comparison_groups(comparisons):
    return comparisons.groupby(GROUP, sort=True, dropna=False)


def speedup_figure(comparisons, path):
    """Each experiment's throughput as a ratio of its group's baseline (log axis), with the 95% interval; grey:
    within noise or not tested."""
    groups = list(comparison_groups(comparisons))
    rows = max((len(part) for _, part in groups), default=1)
    figure, axes = figure_grid(max(len(groups), 1), max_columns=1, panel_size=(9, 0.9 + 0.3 * rows))
    for axis, (_, part) in zip(axes, groups):
        part = part.sort_values("ratio")
        low = (part["ratio"] - part["ratio_ci95_low"]).fillna(0)
        high = (part["ratio_ci95_high"] - part["ratio"]).fillna(0)
        for y, (ratio, below, above, verdict) in enumerate(zip(part["ratio"], low, high, part["verdict"])):
            colour = "#4C72B0" if verdict in ("faster", "slower") else "#9A9A9A"
            axis.errorbar(ratio, y, xerr=[[below], [above]], fmt="o", color=colour, capsize=3)
        axis.set_yticks(range(len(part)), label(part))
        axis.axvline(1.0, color="black", linewidth=0.8)
        axis.set_xscale("log")
        for ticks in (axis.xaxis.set_major_formatter, axis.xaxis.set_minor_formatter):
            ticks(FuncFormatter(lambda value, _: f"{value:g}x"))
        first = part.iloc[0]
        axis.set_title(f"{group_title(first)}: against {first['baseline_stack']} ({first['baseline_variant']})",
                       fontsize=9)  # fmt: skip
        axis.set_xlabel("throughput / baseline throughput (log scale)")
    if not groups:
        axes[0].text(0.5, 0.5, "no group has two experiments that finished", ha="center", va="center")
        axes[0].set_axis_off()
    figure.tight_layout()
    figure.savefig(path, dpi=130)
    plt.close(figure)


def epoch_time_figure(summary, epochs, path):
    merged = epochs.merge(summary[["experiment_id", "stack", "variant", "data_placement", "dataset", "model",
                                   "batch_size", "device"]])  # fmt: skip
    per_epoch = merged.groupby(["experiment_id", "epoch"], as_index=False).agg(
        train_s=("train_s", "median"), stack=("stack", "first"), variant=("variant", "first"),
        data_placement=("data_placement", "first"),
        dataset=("dataset", "first"), model=("model", "first"), batch_size=("batch_size", "first"),
        device=("device", "first"))  # fmt: skip
    finished = summary[summary["runs_ok"] > 0]
    panels = panel_titles(finished if len(finished) else summary)  # experiments with no finished run have no epochs
    figure, axes = figure_grid(len(panels))
    for axis, (dataset, model, batch, device) in zip(axes, panels):
        part = panel_rows(per_epoch, (dataset, model, batch, device))
        for name, line in part.groupby(label(part)):
            axis.plot(line["epoch"], line["train_s"], marker="o", label=name)
        axis.set_yscale("log")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole: no 1.25, 1.5 ticks
        axis.set_title(f"{model} on {dataset}, batch {batch}, {device}", fontsize=10)
        axis.set_xlabel("epoch")
        axis.set_ylabel("training seconds (median of repeats)")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=130)
    plt.close(figure)


def operator_grid(ops, column, ylabel, path, log_y):
    """One panel per operator and device (CPU and GPU panels apart); a line per framework and dtype."""
    panels = list(dict.fromkeys(zip(ops["device"], ops["operator"])))
    figure, axes = figure_grid(len(panels), max_columns=3, panel_size=(4.2, 2.8))
    colours = {name: f"C{index}" for index, name in enumerate(sorted(ops["framework"].unique()))}
    for axis, (device, operator) in zip(axes, panels):
        part = ops[(ops["operator"] == operator) & (ops["device"] == device)]
        for (framework, dtype), line in part.groupby(["framework", "dtype"]):
            line = line.sort_values("size")
            axis.plot(line["size"], line[column], marker=".", color=colours[framework],
                      linestyle="-" if dtype == "float32" else "--", label=f"{framework} {dtype}")  # fmt: skip
            if column == "median_s":
                axis.fill_between(line["size"], line["q1_s"], line["q3_s"], color=colours[framework], alpha=0.2)
        axis.set_xscale("log")
        if log_y:
            axis.set_yscale("log")
        axis.set_title(f"{operator} · {device}", fontsize=10)
        axis.set_xlabel("matrix side" if operator == "gemm" else "elements")
        axis.set_ylabel(ylabel, fontsize=8)
        axis.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def ops_markdown(ops, figures):
    """The operator section: figures and, at each operator's largest size, the figures of every framework."""
    measured = ops[ops["status"] == "ok"]
    if measured.empty:
        return "No operator benchmarks in this configuration (`ops.stacks` is empty) or none succeeded.\n"
    operator_grid(measured, "median_s", "seconds per call (median, IQR band)", figures / "ops_time.png", True)
    operator_grid(measured, "fraction_of_ceiling", "fraction of the ceiling", figures / "ops_ceiling.png", False)
    largest = measured.loc[measured.groupby(["operator", "framework", "device", "dtype"])["size"].idxmax()]
    rows = [[row["operator"], row["framework"], row["device"], row["dtype"], f"{row['size']:,}",
             f"{row['median_s'] * 1e6:,.1f}", number(row["gflop_per_s"], 1), number(row["gb_per_s"], 2),
             f"{row['fraction_of_ceiling']:.1%}"] for _, row in largest.iterrows()]  # fmt: skip
    ceilings = measured.drop_duplicates(["stack", "device"])[["stack", "device", "ceiling_gemm_gflop_per_s",
                                                               "ceiling_bandwidth_gb_per_s", "ceiling_source"]]  # fmt: skip
    ceiling_rows = [[row["stack"], row["device"], number(row["ceiling_gemm_gflop_per_s"], 1),
                     number(row["ceiling_bandwidth_gb_per_s"], 1), row["ceiling_source"]] for _, row in ceilings.iterrows()]  # fmt: skip
    failed = ops[ops["status"] == "error"]
    failures = "" if failed.empty else "\nFailed operator measurements:\n\n" + markdown_table(
        ["stack", "operator", "size", "error"],
        [[row["stack"], row["operator"], row["size"], str(row["error"])[:200]] for _, row in failed.iterrows()])  # fmt: skip
    return ("Time per call against size (log-log; GEMM by matrix side, the others by element count):\n\n"
            "![Operator time per call](figures/ops_time.png)\n\n"
            "Achieved fraction of the machine's ceiling (GEMM and dot: of the GEMM GFLOP/s ceiling; the others: "
            "of the memory-bandwidth ceiling):\n\n![Fraction of the ceiling](figures/ops_ceiling.png)\n\n"
            "At each operator's largest size:\n\n"
            + markdown_table(["operator", "framework", "device", "dtype", "size", "µs/call", "GFLOP/s", "GB/s",
                              "of ceiling"], rows)
            + "\nCeilings, measured in each job:\n\n"
            + markdown_table(["stack", "device", "GEMM GFLOP/s", "bandwidth GB/s", "how"], ceiling_rows) + failures)  # fmt: skip


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
    header = ["stack", "variant", "images/s", "95% interval", "CV", "steady epoch s", "first epoch s",
              "inference images/s", "accuracy", "runs ok"]  # fmt: skip
    sections = []
    for (dataset, model, batch, device), part in summary.groupby(["dataset", "model", "batch_size", "device"]):
        rows = []
        part = part.assign(variant_label=variant_labels(part))
        for _, row in part.sort_values(["stack", "variant_label"]).iterrows():
            rows.append([row["stack"], row["variant_label"], cell(row, "train_images_per_s_gmean"),
                         interval_cell(row, "train_images_per_s_ci95_low", "train_images_per_s_ci95_high"),
                         cell(row, "train_images_per_s_cv", 1, percent), cell(row, "steady_epoch_s_median", 3),
                         cell(row, "first_epoch_s_median", 3), cell(row, "inference_images_per_s_gmean"),
                         cell(row, "final_test_accuracy_mean", 3), f"{row['runs_ok']}/{row['runs']}"])  # fmt: skip
        sections.append(f"### {model} on {dataset}, batch {batch}, {device}\n\n" + markdown_table(header, rows))
    return "\n".join(sections)


def ratio_text(row):
    interval = "" if pd.isna(row["ratio_ci95_low"]) else f" [{row['ratio_ci95_low']:.2f}, {row['ratio_ci95_high']:.2f}]"
    return f"{row['ratio']:.2f}x{interval}"


def comparisons_markdown(comparisons):
    """Per group, every experiment against the baseline: ratio, interval, Holm-corrected p, verdict."""
    if comparisons.empty:
        return "No group has two experiments with a finished run, so nothing is compared.\n"
    header = ["stack", "variant", "ratio [95% interval]", "p (Holm)", "verdict", "repeats"]
    sections = []
    for _, part in comparison_groups(comparisons):
        first = part.iloc[0]
        rows = [[row["stack"], variant_label(row["variant"], row["data_placement"]), ratio_text(row),
                 "–" if pd.isna(row["p_holm"]) else f"{row['p_holm']:.3g}", row["verdict"],
                 f"{row['runs_ok']} vs {row['baseline_runs_ok']}"] for _, row in part.sort_values("ratio").iterrows()]  # fmt: skip
        sections.append(f"### {group_title(first)}\n\nBaseline: {first['baseline_stack']} ({first['baseline_variant']}), "
                        f"{first['baseline_rule']}.\n\n" + markdown_table(header, rows))  # fmt: skip
    return "\n".join(sections)


def resources_markdown(summary, runs):
    """Input share, memory, utilisation and energy per experiment (means over ok repeats); GPU columns only where
    measured."""
    header = ["stack", "variant", "dataset", "model", "batch", "input share", "RSS peak MiB", "CPU %"]
    columns = [("host_rss_peak_mb_mean", 0), ("cpu_utilisation_mean_mean", 0)]
    gpu = [("gpu_utilisation_mean_mean", 0, "GPU %"), ("gpu_utilisation_p95_mean", 0, "GPU % p95"),
           ("gpu_memory_peak_mb_mean", 0, "GPU MiB"), ("allocator_peak_mb_mean", 0, "allocator MiB"),
           ("gpu_power_mean_w_mean", 0, "W"), ("gpu_energy_per_image_j_mean", 4, "J/image")]  # fmt: skip
    gpu.append(("model_flops_utilisation_mean", 3, "MFU"))
    for column, digits, title in gpu:
        if summary[column].notna().any():
            header.append(title)
            columns.append((column, digits))
    summary = summary.assign(variant_label=variant_labels(summary))
    rows = [[row["stack"], row["variant_label"], row["dataset"], row["model"], row["batch_size"],
             cell(row, "input_share_mean", 1, percent), *(cell(row, column, digits) for column, digits in columns)]
            for _, row in summary.sort_values(["dataset", "model", "batch_size", "stack", "variant_label"]).iterrows()]  # fmt: skip
    reasons = sorted(set(runs["gpu_fields_reason"].dropna()))
    note = f"\nGPU fields not shown where not measured: {'; '.join(reasons)}.\n" if reasons else ""
    return markdown_table(header, rows) + note


ENGAGEMENT_CHECKS = {"graph": "graph", "xla": "XLA", "xla_compiled": "XLA HLO built", "cached_graph": "cached graph",
                     "compiled_graphs": "compiled graphs", "graph_breaks": "graph breaks",
                     "loss_scaling": "loss scaling"}  # fmt: skip


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
        mode = (f"TF32 {'on' if engaged.get('tf32') else 'off'}, "
                f"convolution autotuning {'on' if engaged.get('conv_autotune') else 'off'}")  # fmt: skip
        modes.setdefault(mode, set()).add(f"{row['stack']} on {row['device']}")
    parts = [f"{mode} ({', '.join(sorted(where))})" for mode, where in sorted(modes.items())]
    return (f"*Math mode, as each framework applied it: {'; '.join(parts) or 'no finished run'}. On CPU neither "
            "exists: float32 runs in float32.*\n")  # fmt: skip


def engagement_markdown(runs):
    """What each stack and variant actually ran, read back from the first finished run of each model, and the
    model's size from the spec."""
    ok = runs[runs["status"] == "ok"].drop_duplicates(["stack", "variant", "model", "dataset"])
    rows = []
    for _, row in ok.sort_values(["model", "dataset", "stack", "variant"]).iterrows():
        engaged = json.loads(row["engaged"])
        checks = engagement_label(engaged)
        rows.append([row["model"], row["dataset"], f"{int(row['parameters']):,}", f"{row['flops_per_image'] / 1e6:,.1f}",
                     row["stack"], row["variant"], engaged.get("matmul_dtype", "–"), engaged.get("layout", "–"), checks])  # fmt: skip
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
        rows.append([row["stack"], variant_label(row["variant"], row["data_placement"]), row["dataset"], row["model"], row["device"],
                     row["optimizer"], largest, failure, number(row["allocator_peak_mb"]), row["probes"]])  # fmt: skip
    header = ["stack", "variant", "dataset", "model", "device", "optimizer", "largest batch", "next", "allocator MiB",
              "probes"]  # fmt: skip
    return markdown_table(header, rows)


def failures_markdown(runs):
    failed = runs[runs["status"] != "ok"]
    if failed.empty:
        return "Every run finished with status ok.\n"
    rows = [[row["experiment_id"], row["rep"], STATUS_LABEL.get(row["status"], row["status"]),
             str(row["error"])[:300]] for _, row in failed.iterrows()]  # fmt: skip
    return markdown_table(["experiment", "repeat", "status", "error"], rows)


def provenance_markdown(runs):
    columns = {"stack": "stack", "framework_version": "framework version", "backend": "backend",
               "provenance_env_file": "env file", "provenance_env_file_sha256": "env file sha256",
               "provenance_packages_sha256": "packages sha256", "provenance_python": "Python",
               "provenance_env_deployment": "deployment", "provenance_cuda": "CUDA", "provenance_cudnn": "cuDNN"}  # fmt: skip
    stacks = runs.dropna(subset=["framework_version"]).drop_duplicates(["stack", "device"]).sort_values("stack")
    rows = [["–" if pd.isna(value) else str(value)[:12] if "sha256" in key else value for key, value in row.items()]
            for row in stacks[list(columns)].to_dict("records")]  # fmt: skip
    table = markdown_table(list(columns.values()), rows)
    first = runs.iloc[0]
    machine = [["host", first["provenance_host"]], ["CPU", first["provenance_cpu_model"]],
               ["CPU cores", first["provenance_cpu_cores"]], ["threads per run", first["provenance_threads"]],
               ["platform", first["provenance_platform"]],
               ["GPU", first["provenance_gpu"] or "none ({})".format(first["gpu_fields_reason"])],
               ["workflow commit", first["provenance_workflow_commit"]],
               ["first run started", runs["provenance_started_at"].min()],
               ["last run finished", runs["provenance_finished_at"].max()]]  # fmt: skip
    return markdown_table(["machine", "value"], machine) + "\n" + table


def conclusion(part):
    """The sentence for one comparison group, from the comparisons table only: who differs from the baseline
    beyond noise, who does not, who was not tested. It never names a winner within noise."""
    first = part.iloc[0]
    clauses = []
    for verdict, words in (("faster", "faster beyond noise"), ("slower", "slower beyond noise"),
                           ("not significant after Holm correction",
                            "apart from it, but not significantly after correcting for every comparison made"),
                           ("within noise", "within noise of it")):  # fmt: skip
        members = part[part["verdict"] == verdict].sort_values("ratio", ascending=False)
        if len(members):
            listed = ", ".join(f"{row['stack']} ({row['variant']}) {ratio_text(row)}" for _, row in members.iterrows())
            clauses.append(f"{words}: {listed}")
    untested = part[part["verdict"].str.startswith("not tested")]
    if len(untested):
        clauses.append(f"not tested (fewer than 3 ok repeats): {', '.join(untested['stack'] + ' (' + untested['variant'] + ')')}")
    return (f"- {group_title(first)}; against {first['baseline_stack']} ({first['baseline_variant']}, "
            f"{first['baseline_rule']}): " + "; ".join(clauses) + ".")  # fmt: skip


def overview_markdown(summary, runs, comparisons):
    lines = [f"{len(runs)} runs of {len(summary)} experiments over {summary['stack'].nunique()} stacks "
             f"({', '.join(sorted(summary['stack'].unique()))}); "
             f"{int((runs['status'] != 'ok').sum())} runs did not finish with status ok.", ""]  # fmt: skip
    overlapping = int((runs["overlapping_runs"] > 0).sum())
    if overlapping:
        lines += [f"**Warning: {overlapping} runs overlapped another run on the same host; their timings are "
                  "not trustworthy.**", ""]  # fmt: skip
    lines += [conclusion(part) for _, part in comparison_groups(comparisons)]
    return "\n".join(lines) + "\n"


def expand_includes(text, folder):
    return INCLUDE.sub(lambda match: (folder / match[1]).read_text(), text)


def render_with_quarto(document, title):
    for target in ("html", "typst"):
        subprocess.run(["quarto", "render", document.name, "--to", target, "-M", f"title:{title}"],
                       cwd=document.parent, check=True)  # fmt: skip


def render_with_pandoc(document, title):
    import pypandoc
    import typst

    folder = document.parent
    markdown = expand_includes(document.read_text(), folder)
    metadata = [f"--metadata=title:{title}", f"--metadata=date:{datetime.date.today().isoformat()}"]
    pypandoc.convert_text(markdown, "html", format="markdown", outputfile=str(folder / "report.html"),
                          extra_args=["--standalone", "--embed-resources", "--toc", f"--resource-path={folder}",
                                      "--variable=maxwidth:72em", *metadata])  # fmt: skip
    typst_source = pypandoc.convert_text(markdown, "typst", format="markdown",
                                         extra_args=["--standalone", "--toc", *metadata])  # fmt: skip
    (folder / "report.typ").write_text(typst_source)
    typst.compile(str(folder / "report.typ"), output=str(folder / "report.pdf"), root=str(folder))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", required=True)
    parser.add_argument("--document", required=True)
    parser.add_argument("--title", required=True)
    parser.add_argument("--html", required=True)
    parser.add_argument("--pdf", required=True)
    args = parser.parse_args()
    tables = Path(args.tables)
    runs, summary = pd.read_parquet(tables / "runs.parquet"), pd.read_parquet(tables / "summary.parquet")
    epochs, ops = pd.read_parquet(tables / "epochs.parquet"), pd.read_parquet(tables / "ops.parquet")
    searches, comparisons = pd.read_parquet(tables / "max_batch.parquet"), pd.read_parquet(tables / "comparisons.parquet")
    build = Path(args.html).parent / "build"
    if build.exists():
        shutil.rmtree(build)
    (build / "figures").mkdir(parents=True)
    throughput_figure(summary, build / "figures" / "throughput.png")
    epoch_time_figure(summary, epochs, build / "figures" / "epoch_time.png")
    speedup_figure(comparisons, build / "figures" / "speedup.png")
    pieces = {"overview.md": overview_markdown(summary, runs, comparisons), "summary.md": summary_markdown(summary),
              "comparisons.md": comparisons_markdown(comparisons),
              "failures.md": failures_markdown(runs), "provenance.md": provenance_markdown(runs),
              "resources.md": resources_markdown(summary, runs), "engagement.md": engagement_markdown(runs),
              "ops.md": ops_markdown(ops, build / "figures"), "max_batch.md": max_batch_markdown(searches),
              "math_mode.md": math_mode_markdown(runs)}  # fmt: skip
    for name, text in pieces.items():
        (build / name).write_text(text)
    document = build / "report.qmd"
    shutil.copy(args.document, document)
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
    main()
