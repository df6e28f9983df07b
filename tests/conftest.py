"""Shared fixtures. Stack envs are built once into a venv root shared by every test (and the end-to-end run)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
STACKS = yaml.safe_load((REPO / "envs" / "stacks.yaml").read_text())
VENV_ROOT = Path(os.environ.get("DLBENCH_VENV_ROOT", REPO / ".venvs")).absolute()


def build_env(env):
    """Build (or reuse) the venv of envs/<env>.yaml; returns its interpreter."""
    from build_env import venv_prefix

    env_file = REPO / "envs" / f"{env}.yaml"
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_env.py"), str(env_file), "--venv-root",
                    str(VENV_ROOT)], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return venv_prefix(VENV_ROOT, env_file) / "bin" / "python"


@pytest.fixture(scope="session")
def env_python():
    """env name -> interpreter of its built venv (built on first use, once per session)."""
    built = {}

    def get(env):
        if env not in built:
            built[env] = build_env(env)
        return built[env]

    return get


@pytest.fixture(scope="session")
def probes(env_python):
    """stack -> output of tests/probe_adapter.py run in the stack's CPU env."""
    results = {}
    for stack, entry in STACKS.items():
        environment = dict(os.environ, **entry["environment"])
        output = subprocess.run([str(env_python(entry["env"]["cpu"])), str(REPO / "tests" / "probe_adapter.py"),
                                 entry["adapter"]], env=environment, capture_output=True, text=True)  # fmt: skip
        assert output.returncode == 0, f"probe of {stack} failed:\n{output.stderr[-3000:]}"
        results[stack] = json.loads(output.stdout)
    return results
