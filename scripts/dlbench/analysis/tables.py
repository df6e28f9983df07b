"""The aggregation's tables and the keys that group their rows, in one place: what scripts/aggregate.py and
aggregate_ops.py write, what the workflow declares (workflow/rules/aggregate.smk, report.smk) and what the report
reads. Each table is results/tables/<name>.csv with the same rows in <name>.parquet beside it (the report reads those).

Lists, as pandas reads a tuple of keys as one key. Plain Python: Snakemake's driver imports it while planning.
"""

TABLES = (  # aggregate.py
    "runs",
    "summary",
    "epochs",
    "max_batch",
    "comparisons",
    "fastest",
    "versions",
    "scaling",
    "telemetry",
    "workload",
)
OPS_TABLE = "ops"  # scripts/aggregate_ops.py: the operator sweep
FOLDER = "results/tables"

# An experiment on one machine: runs of one experiment on different machines (cluster nodes with other GPUs or
# CPUs) are never pooled, and only experiments on the same machine are compared.
IDENTITY = [
    "experiment_id",
    "machine",
    "stack",
    "framework",
    "backend",
    "dataset",
    "model",
    "device",
    "batch_size",
    "optimizer",
    "learning_rate",
    "epochs",
    "variant",
    "data_placement",
    "replicas",
    "scaling",
]
# Experiments equal in these, on one machine (GROUP), are compared and raced together (dlbench.analysis.race
# .race_groups), so that comparisons stay paired round by round.
COMPARISON_GROUP = [
    "dataset",
    "model",
    "device",
    "batch_size",
    "optimizer",
    "learning_rate",
    "epochs",
    "data_placement",
    "replicas",
    "scaling",
]
GROUP = ["machine", *COMPARISON_GROUP]  # a comparison group, per machine: one family of tests, one reader's question
# A figure's panel: the experiments drawn side by side in it (stacks and variants, over optimisers and rates).
PANEL = ["dataset", "model", "batch_size", "device", "machine", "replicas"]


def paths(names, extension, key_suffix=""):
    """{name + key_suffix: results/tables/<name>.<extension>} of these tables, as rules name their files."""
    return {name + key_suffix: f"{FOLDER}/{name}.{extension}" for name in names}
