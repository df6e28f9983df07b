"""The aggregation's tables and the keys that group their rows, in one place: what scripts/aggregate.py and
aggregate_ops.py write, what the workflow declares (workflow/rules/aggregate.smk, report.smk) and what the report
reads. Each table is results/tables/<name>.csv with the same rows in <name>.parquet beside it (the report reads those).

Lists, as pandas reads a tuple of keys as one key. Plain Python: Snakemake's driver imports it while planning.
"""

from dlbench.axes import COMPARISON_GROUP, NAMES

TABLES = (  # aggregate.py
    "runs",
    "summary",
    "epochs",
    "max_batch",
    "comparisons",
    "fastest",
    "relative",
    "versions",
    "scaling",
    "telemetry",
    "workload",
    "machines",
    "rounds",
)
OPS_TABLE = "ops"  # scripts/aggregate_ops.py: the operator sweep
FOLDER = "results/tables"

# An experiment on one machine: runs of one experiment on different machines (cluster nodes with other GPUs or
# CPUs) are never pooled, and only experiments on the same machine are compared.
IDENTITY = ["experiment_id", "machine", *NAMES, "framework", "backend"]
GROUP = ["machine", *COMPARISON_GROUP]  # a comparison group, per machine: one family of tests, one reader's question


def paths(names, extension, key_suffix=""):
    """{name + key_suffix: results/tables/<name>.<extension>} of these tables, as rules name their files."""
    return {name + key_suffix: f"{FOLDER}/{name}.{extension}" for name in names}
