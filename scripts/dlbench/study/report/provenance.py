"""Environments and provenance: the machine, and per stack and device the versions that ran and where from."""

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


def machine_table(runs):
    first = runs.iloc[0]
    machine = [
        ["host", first["provenance_host"]],
        ["CPU", first["provenance_cpu_model"]],
        ["CPU cores", first["provenance_cpu_cores"]],
        ["threads per run", first["provenance_threads"]],
        ["platform", first["provenance_platform"]],
        ["GPU", first["provenance_gpu"] or "none ({})".format(first["gpu_fields_reason"])],
        ["workflow commit", first["provenance_workflow_commit"]],
        ["first run started", runs["provenance_started_at"].min()],
        ["last run finished", runs["provenance_finished_at"].max()],
    ]
    return markdown_table(["machine", "value"], machine)


def markdown(study, figures):
    # absent from older records
    runs = study.runs.assign(**{key: study.runs.get(key) for key in ("provenance_numpy", "provenance_lock_sha256")})
    stacks = (
        runs.dropna(subset=["framework_version"]).drop_duplicates(["stack", "device"]).sort_values(["stack", "device"])
    )
    tables = [
        markdown_table(
            list(columns.values()),
            [[shown(key, value) for key, value in row.items()] for row in stacks[list(columns)].to_dict("records")],
        )
        for columns in (VERSIONS, SOURCES)
    ]
    return machine_table(runs) + "\n" + "\n".join(tables)
