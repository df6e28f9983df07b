"""Environments and provenance: each machine, and per stack, device and machine the versions that ran and where from."""

import pandas as pd

from dlbench.study.report.common import markdown_table

TITLE = "Environments and provenance"

VERSIONS = {
    "stack": "stack",
    "device": "device",
    "framework_version": "framework version",
    "backend": "backend",
    "provenance_env_deployment": "deployment",
    "provenance_python": "Python",
    "provenance_numpy": "NumPy",
    "provenance_cuda": "CUDA",
    "provenance_cudnn": "cuDNN",
}
SOURCES = {
    "stack": "stack",
    "device": "device",
    "provenance_env_file": "env file",
    "provenance_env_file_sha256": "env file sha256",
    "provenance_lock_sha256": "lock sha256",
    "provenance_packages_sha256": "packages sha256",
}


def shown(key, value):
    """A cell: hashes cut to 12 characters, a missing value as a dash."""
    if pd.isna(value):
        return "–"
    return str(value)[:12] if "sha256" in key else value


MACHINE_ROWS = {
    "provenance_host": "host",
    "provenance_cpu_model": "CPU",
    "provenance_cpu_cores": "CPU cores",
    "provenance_cpus_usable": "CPUs a run could use",
    "provenance_memory_mb": "memory (MiB)",
    "provenance_threads": "threads per run",
    "provenance_platform": "platform",
    "provenance_gpu": "GPU",
    "provenance_gpu_driver": "GPU driver",
    "provenance_workflow_commit": "workflow commit",
}


def machine_table(runs):
    """The machine the runs ran on, a column per machine where they ran on several (a cluster's nodes, imported
    bundles): its hardware, the commit it ran, and when."""
    columns = {}
    for machine, part in runs.groupby("machine", sort=True):
        first = part.iloc[0]
        cells = [shown(key, first.get(key)) for key in MACHINE_ROWS]
        if pd.isna(first.get("provenance_gpu")):
            cells[list(MACHINE_ROWS).index("provenance_gpu")] = f"none ({first['gpu_fields_reason']})"
        columns[machine] = [*cells, part["provenance_started_at"].min(), part["provenance_finished_at"].max()]
    names = [*MACHINE_ROWS.values(), "first run started", "last run finished"]
    header = ["machine", *columns] if len(columns) > 1 else ["machine", "value"]
    return markdown_table(header, [[name, *values] for name, *values in zip(names, *columns.values())])


def markdown(study, figures):
    # absent from older records
    runs = study.runs.assign(**{key: study.runs.get(key) for key in ("provenance_numpy", "provenance_lock_sha256")})
    stacks = (
        runs.dropna(subset=["framework_version"])
        .drop_duplicates(["stack", "device", "machine"])
        .sort_values(["stack", "device", "machine"])
    )
    by_machine = {"machine": "machine"} if runs["machine"].nunique() > 1 else {}
    tables = [
        markdown_table(
            list(columns.values()),
            [[shown(key, value) for key, value in row.items()] for row in stacks[list(columns)].to_dict("records")],
        )
        for columns in ({**by_machine, **VERSIONS}, {**by_machine, **SOURCES})
    ]
    return machine_table(runs) + "\n" + "\n".join(tables)
