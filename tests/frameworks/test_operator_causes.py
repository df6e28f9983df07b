"""An operator measured above its ceiling is given its cause from real measurements: PyTorch's flatten of a contiguous
tensor is a view, whose time per call does not grow with size, so its "bandwidth" is no result (the causes on made-up
rows: tests/unit/test_ops.py)."""

import json
import subprocess

from conftest import REPO, SHARED_MACHINE, STACKS, library_environment, read_csv
from dlbench.study import configuration
from runs import ENV_DESCRIPTION

STACK = "torch-2.13"


def test_a_view_above_the_ceiling_is_named_a_view(env_python, tmp_path):
    entry = STACKS[STACK]
    options = {
        "adapter": entry["ops_adapter"],
        "environment": entry["environment"],
        "math_mode": {"tf32": True, "autotune": True},
        "dtypes": ["float32"],
        "elementwise_sizes": [10**4, 10**5, 10**6],
        "gemm_sizes": [64],
        "samples": 10,
        "min_sample_ms": 1,
    }
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV_DESCRIPTION))
    contention = dict(configuration.config_schema()["properties"]["contention"]["default"], **SHARED_MACHINE)
    record = tmp_path / "ops" / "flatten.json"
    subprocess.run(
        [
            str(env_python(entry["env"]["cpu"])),
            str(REPO / "scripts/run_ops.py"),
            *("--stack", STACK, "--operator", "flatten", "--device", "cpu", "--threads", "framework"),
            *("--options", json.dumps(options), "--env-description", str(env)),
            *("--contention", json.dumps(contention), "--out", str(record)),
        ],
        env=library_environment(),
        check=True,
        capture_output=True,
    )
    table = tmp_path / "ops.csv"
    subprocess.run(
        [str(env_python("tools")), str(REPO / "scripts/aggregate_ops.py"), "--out", table, "--records", record],
        env=library_environment(),
        check=True,
        capture_output=True,
    )
    rows = {int(row["size"]): row for row in read_csv(table)}
    largest = rows[10**6]  # 8 MB "moved" in about a microsecond: thousands of GB/s
    assert float(largest["fraction_of_ceiling"]) > 1 and largest["over_ceiling_cause"] == "view"
    assert {row["over_ceiling_cause"] for row in rows.values()} <= {"view", ""}
