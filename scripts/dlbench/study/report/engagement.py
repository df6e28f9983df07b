"""What ran: per stack, what each variant read back after training (graph, XLA, dtype, layout), and each model's
size."""

import json

from dlbench.study.report.common import lead_in, markdown_table

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


def read_back(row):
    """What one run's framework read back: the switches and counts engaged, its matmul dtype and layout, and the
    attention it ran where the model has attention."""
    engaged = json.loads(row["engaged"])
    attention = f"; attention: {engaged['attention']}" if "attention" in engaged else ""
    return (
        f"{engagement_label(engaged)} ({engaged.get('matmul_dtype', 'dtype not read back')}, "
        f"{engaged.get('layout', 'layout not read back')}{attention})"
    )


def variant_text(runs):
    """One variant of one stack over the models it trained: what ran, once where every model read back the same,
    else each reading with its models."""
    models = {}
    for _, row in runs.iterrows():
        models.setdefault(read_back(row), []).append(row["model"])
    if len(models) == 1:
        return next(iter(models))
    return "; ".join(f"{reading} for {', '.join(sorted(set(names)))}" for reading, names in models.items())


def cpu_kernels(members):
    """The CPU kernel libraries a stack's CPU runs reported (the record's provenance), or a dash where none did."""
    named = members.get("provenance_cpu_kernels", members.iloc[0:0]).dropna()
    return "; ".join(sorted(set(named))) or "-"


def engagement_table(runs):
    """A row per stack: what each of its variants ran, read back from the first finished run of each model, and the
    CPU kernel libraries its framework build runs on."""
    ok = runs[runs["status"] == "ok"].drop_duplicates(["stack", "variant", "model", "dataset"])
    rows = [
        [
            stack,
            "; ".join(f"{variant}: {variant_text(part)}" for variant, part in members.groupby("variant")),
            cpu_kernels(members),
        ]
        for stack, members in ok.groupby("stack")
    ]
    return markdown_table(["stack", "each variant as it ran (engaged; matmul dtype, layout)", "CPU kernels"], rows)


def model_table(runs):
    """Each model's size, from the neutral spec (the same in every framework)."""
    models = runs.dropna(subset=["parameters"]).drop_duplicates(["model", "dataset"]).sort_values(["model", "dataset"])
    rows = [
        [row["model"], row["dataset"], f"{int(row['parameters']):,}", f"{row['flops_per_image'] / 1e6:,.1f}"]
        for _, row in models.iterrows()
    ]
    return markdown_table(["model", "dataset", "parameters", "MFLOPs/example"], rows)


def markdown(study, figures):
    return (
        lead_in(
            "Read back from each framework after training, not assumed from the requested variant "
            '(see docs/methodology.md, "Variants"). CPU kernels: the kernel libraries the framework\'s build names '
            "(oneDNN, its BLAS; for JAX, XLA's own), as the framework reports them in each CPU run, not traced per "
            "operation:"
        )
        + engagement_table(study.runs)
        + "\n"
        + lead_in("Parameters and forward FLOPs per image (a multiply-add counted as 2), from the neutral spec:")
        + model_table(study.runs)
    )
