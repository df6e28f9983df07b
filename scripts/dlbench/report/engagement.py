"""What ran: what each framework read back after training (graph, XLA, dtype, layout), and each model's size."""

import json

from dlbench.report.common import markdown_table

TITLE = "What ran"

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


def engagement_table(runs):
    """What each stack and variant actually ran, read back from the first finished run of each model, and the
    model's size from the spec."""
    ok = runs[runs["status"] == "ok"].drop_duplicates(["stack", "variant", "model", "dataset"])
    rows = []
    for _, row in ok.sort_values(["model", "dataset", "stack", "variant"]).iterrows():
        engaged = json.loads(row["engaged"])
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
                engagement_label(engaged),
            ]
        )
    header = ["model", "dataset", "parameters", "MFLOPs/image", "stack", "variant", "matmul dtype", "layout", "engaged"]
    return markdown_table(header, rows)


def markdown(study, figures):
    return (
        "Read back from each framework after training, not assumed from the requested variant "
        '(see docs/methodology.md, "Variants"); parameters and forward FLOPs per image (a multiply-add counted as 2) '
        "come from the neutral spec.\n\n" + engagement_table(study.runs)
    )
