"""Largest batch: the largest batch that trains without running out of memory, per search."""

from dlbench.study.report.common import markdown_table, number, variant_label

TITLE = "Largest batch"
ABSENT = "no largest-batch search in this configuration (`max_batch.enabled` is false)."

METHOD = (
    "The largest batch that trains without running out of memory, per stack, model and variant (optional: "
    "`max_batch` in the config). Each batch size is tried in a fresh process for a few training steps; sizes double "
    'until one runs out of memory, then the gap is bisected. "next" is the smallest size found not to fit; the '
    "allocator figure is the framework allocator's peak at the largest batch (GPU only)."
)


def search_row(row):
    if row["status"] != "ok":
        largest, failure = "ERROR", str(row["error"])[:200]
    else:
        largest = f"{row['max_batch']:,}" + (" (the limit)" if row["limit_reached"] else "")
        failure = "–" if row["limit_reached"] else f"OOM at {row['first_failure']:,}"
    return [
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


def markdown(study, figures):
    searches = study.max_batch
    if searches.empty:
        return None
    rows = [
        search_row(row)
        for _, row in searches.sort_values(["dataset", "model", "device", "stack", "variant"]).iterrows()
    ]
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
    return METHOD + "\n\n" + markdown_table(header, rows)
