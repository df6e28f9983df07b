"""Shared fixtures. Stack envs are built once into a venv root shared by every test (and the end-to-end run)."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
# The stacks the tests run: those with a CPU env file (a stack without one runs only in an existing environment).
from dlbench.configuration import load_stacks  # noqa: E402

STACKS = {name: entry for name, entry in load_stacks().items() if entry["env"].get("cpu")}
VENV_ROOT = Path(os.environ.get("DLBENCH_VENV_ROOT", REPO / ".venvs")).absolute()
# Snakemake through this interpreter: the venv's bin/snakemake starts with the absolute path the venv was built at,
# so it stops working once the checkout is moved (test_readme.py).
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# The `contention` section of the tests' workflow configs: tests share the machine with each other (and a developer's
# work), so only the contention tests (test_contention.py) hold runs to the default limits.
SHARED_MACHINE = {"max_foreign_cpu_cores": 64, "max_steal_share": 1, "settle_seconds": 1}


# Every invocation runs the rule list_failures (and so the target `all`), so that it ends with the runs not ok.
EVERY_INVOCATION = {"all", "list_failures"}


def planned_rules(output):
    """{rule: job count} of a dry run's job stats table, without the jobs every invocation runs: {} where nothing
    else is to be done."""
    if "Nothing to be done" in output:
        return {}
    table = output.split("Job stats:")[1].split("total")[0]
    counts = {name: int(count) for name, count in re.findall(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    return {name: count for name, count in counts.items() if name not in EVERY_INVOCATION}


def copy_repository(root):
    """The repository's files (tracked and untracked, not ignored) copied into root, modification times kept."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)


def build_env(env):
    """Build (or reuse) the venv of envs/<env>.yaml; returns its interpreter."""
    from build_env import venv_prefix

    env_file = REPO / "envs" / f"{env}.yaml"
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_env.py"), str(env_file), "--venv-root", str(VENV_ROOT)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
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


def cpu_variants(entry):
    """The variants a stack declares that run on CPU, base variant first."""
    from dlbench.variants import unsupported_reason

    return [variant for variant in entry["variants"] if unsupported_reason(entry, variant, "cpu") is None]


@pytest.fixture(scope="session")
def probes(env_python, tmp_path_factory):
    """stack -> (probe.json of tests/probe_adapter.py run in the stack's CPU env, its output folder).

    The five probes run side by side: each is mostly single-threaded framework start-up and model building."""
    running = {}
    for stack, entry in STACKS.items():
        out = tmp_path_factory.mktemp(f"probe-{stack}")
        command = [
            str(env_python(entry["env"]["cpu"])),
            str(REPO / "tests" / "probe_adapter.py"),
            entry["adapter"],
            ",".join(cpu_variants(entry)),
            str(out),
        ]
        log = open(out / "stderr.log", "w")
        running[stack] = (
            subprocess.Popen(command, env=dict(os.environ, **entry["environment"]), stderr=log, stdout=log),
            out,
        )
    results = {}
    for stack, (process, out) in running.items():
        assert process.wait() == 0, f"probe of {stack} failed:\n{(out / 'stderr.log').read_text()[-3000:]}"
        results[stack] = (json.loads((out / "probe.json").read_text()), out)
    return results


def read_csv(path):
    """The rows of a CSV table as dicts of strings."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))
