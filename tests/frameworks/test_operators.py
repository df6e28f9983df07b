"""Operator microbenchmarks: every operator of every stack's ops adapter agrees with NumPy, in the stack's venv
(tests/support/probe_ops.py; the clock and the costs: tests/unit/test_ops.py)."""

import json
import subprocess

import pytest
from conftest import SUPPORT, STACKS, library_environment
from dlbench import ops

OPS_STACKS = sorted(name for name, entry in STACKS.items() if entry.get("ops_adapter"))


@pytest.mark.parametrize("stack", OPS_STACKS)
def test_every_operator_matches_numpy(env_python, stack):
    entry = STACKS[stack]
    result = subprocess.run(
        [str(env_python(entry["env"]["cpu"])), str(SUPPORT / "probe_ops.py"), entry["ops_adapter"]],
        env=library_environment(entry["environment"]),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(result.stdout)
    assert probe["failures"] == []
    assert len(probe["checked"]) == 2 * len(ops.OPERATORS)
