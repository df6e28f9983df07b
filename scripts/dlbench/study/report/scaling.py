"""Data-parallel scaling: throughput against replicas with the ideal line, scaling efficiency, and each stack's
scaling against the best at the same number of replicas."""

import pandas as pd

from dlbench.study.analysis.scaling import FAMILY
from dlbench.study.palette import release_styles
from dlbench.study.report.common import (
    bracketed,
    figure_grid,
    label,
    legend_below,
    markdown_table,
    method_word,
    number,
    ok_runs,
    p_text,
    panel_heading,
    save,
    share,
    styled_lines,
    throughput_unit,
    variant_label,
)

TITLE = "Data-parallel scaling"
ABSENT = "every experiment ran on one device (config `replicas`: [1])."
# A figure's panel: the experiments of one question, whatever their replicas.
PANEL = [key for key in FAMILY if key != "replicas"]
SCALING_WORDS = {"faster": "scales better", "slower": "scales worse"}


def panel_title(row):
    placement = "" if row["data_placement"] == "device" else f", {row['data_placement']} data"
    per = "per replica" if row["scaling"] == "weak" else "global"
    return (
        f"{row['model']} on {row['dataset']}, batch {row['batch_size']} {per} ({row['scaling']} scaling), "
        f"{row['device']}{placement}, on {row['machine']}"
    )


def scaling_figure(curves, runs, path):
    """Geometric-mean throughput against replicas per stack and variant, each repeat a small dot, and dotted beside
    each line its ideal: one replica's throughput times the replicas."""
    panels = [part for _, part in curves.groupby(PANEL, sort=True, dropna=False)]
    figure, axes = figure_grid(len(panels), panel_height=2.0)
    releases = release_styles(curves["stack"])
    for axis, part in zip(axes, panels):
        stem, unit = throughput_unit(part)
        for name, line, style in styled_lines(part, label(part), releases):
            line = line.sort_values("replicas")
            axis.plot(line["replicas"], line[f"{stem}_gmean"], label=name, **style)
            repeats = pd.concat([ok_runs(runs, row) for _, row in line.iterrows()])
            beside = repeats["replicas"] + 0.06  # just right of the mean's marker, which would hide them
            axis.scatter(beside, repeats[stem], s=5, color=style["color"], linewidths=0)
            one = line[line["replicas"] == 1][f"{stem}_gmean"]
            if len(one):
                axis.plot(line["replicas"], one.iloc[0] * line["replicas"], color=style["color"], linestyle=":")
        counts = sorted(part["replicas"].unique())
        axis.set_xticks(counts, [str(count) for count in counts])
        axis.set_ylim(bottom=0)
        axis.set_xlabel("replicas (dotted: ideal)")
        axis.set_ylabel(f"training {unit}/s")
        panel_heading(axis, panel_title(part.iloc[0]))
    legend_below(figure)
    save(figure, path)


def efficiency_text(row):
    return bracketed(row["efficiency"], row["efficiency_ci95_low"], row["efficiency_ci95_high"], ".2f")


def against_best_text(row):
    """The verdict of a stack's scaling against the best at its replicas (the row marked "best"), in words: short,
    the table's last column."""
    if row["experiment_id"] == row["best_experiment_id"]:
        return "best"
    ratio = f"{row['efficiency_ratio']:.2f}x"
    if not pd.isna(row["ratio_low"]):
        ratio += f" [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}]"
    verdict = row["verdict"]
    if verdict == "inconclusive":
        verdict = "within noise (inconclusive)"
    return f"{ratio}: {SCALING_WORDS.get(verdict, verdict)}, p {p_text(row['p_holm'])}{method_word(row)}"


def scaling_tables(scaling):
    header = [
        "stack",
        "variant",
        "replicas",
        "global batch",
        "images/s",
        "per replica",
        "one replica",
        "efficiency [95%]",
        "communication",
        "efficiency against the best",
    ]
    sections = []
    for _, part in scaling.groupby(PANEL, sort=True, dropna=False):
        rows = [
            [
                row["stack"],
                variant_label(row["variant"], row["data_placement"]),
                row["replicas"],
                number(row["global_batch_size"]),
                number(row["train_images_per_s_gmean"]),
                number(row["replica_images_per_s_gmean"]),
                number(row["base_images_per_s_gmean"]),
                efficiency_text(row),
                share(row["communication_share_mean"], 0),
                against_best_text(row),
            ]
            for _, row in part.sort_values(["replicas", "efficiency"], ascending=[True, False]).iterrows()
        ]
        sections.append(f"### {panel_title(part.iloc[0])}\n\n" + markdown_table(header, rows))
    return "\n".join(sections)


def markdown(study, figures):
    scaling = study.scaling
    if scaling.empty:
        return None
    scaled = set(scaling["experiment_id"]) | set(scaling["base_experiment_id"])
    curves = study.summary[study.summary["experiment_id"].isin(scaled)]
    scaling_figure(curves, study.runs, figures / "scaling.svg")
    return (
        "![Throughput against replicas, each repeat a dot; dotted, the ideal: one replica's throughput times the "
        "replicas]"
        "(figures/scaling.svg)\n\n"
        "Each experiment on N data-parallel replicas (the stack's own mechanism: the record's `data_parallel`) "
        "against the same experiment on one, on the same machine. Speedup is the ratio of geometric-mean steady "
        "throughputs, tested as the comparisons are (paired by round, else unpaired); scaling efficiency is the "
        "speedup over N, with its 95% interval (1: N times one replica's throughput). At each N the stacks are "
        'compared with the best-scaling one (marked "best"): the ratio of their efficiencies with its interval at the '
        "level its verdict was tested at (so it excludes 1 exactly where a difference is proven), "
        'p Holm-adjusted within the N; "within noise" where neither a difference nor an equivalence is proven. '
        "Communication is the share of a fixed-batch step that leaving out the gradients' reduction saves, compute "
        "not hiding it (PyTorch's no_sync; a dash where a framework has no step without it).\n\n"
        + scaling_tables(scaling)
    )
