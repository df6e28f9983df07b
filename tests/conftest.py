"""Shared fixtures. Stack envs are built once into a venv root shared by every test (and the end-to-end run).

A test's tier is its folder: tests/unit (no framework venv, no Snakemake run: seconds), tests/frameworks (code run in
the stacks' venvs), tests/workflow (Snakemake runs), tests/cluster (a Slurm cluster); each test is marked with it."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dlbench.process import child_environment
from dlbench.study.configuration import load_stacks

REPO = Path(__file__).resolve().parents[1]
SCRIPTS, TESTS = REPO / "scripts", REPO / "tests"
SUPPORT = TESTS / "support"  # the shared modules: probes, fixtures, fakes
TIERS = ("unit", "frameworks", "workflow", "cluster")  # fastest first: the order they run in
# The stacks the tests run: those with a CPU env file (a stack without one runs only in an existing environment).
STACKS = {name: entry for name, entry in load_stacks().items() if entry["env"].get("cpu")}
VENV_ROOT = Path(os.environ.get("DLBENCH_VENV_ROOT", REPO / ".venvs")).absolute()
# Snakemake through this interpreter: the venv's bin/snakemake starts with the absolute path the venv was built at,
# so it stops working once the checkout is moved (tests/unit/test_readme.py).
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# The `contention` section of the tests' workflow configs: tests share the machine with each other (and a developer's
# work), so only the contention tests (tests/frameworks/test_contention_runs.py) hold runs to the default limits.
SHARED_MACHINE = {"max_foreign_cpu_cores": 64, "max_steal_share": 1, "settle_seconds": 1}


def library_environment(environment=None):
    """The environment of a child that imports this checkout's library but is no script in scripts/ (a probe of
    tests/ in a stack's venv, a test's Snakefile): this process's, with `environment` and scripts/ on PYTHONPATH."""
    return child_environment(environment, [SCRIPTS])


def pytest_collection_modifyitems(items):
    """Each test marked with its tier (its folder under tests/), the tiers run fastest first."""
    tiers = {}
    for item in items:
        tiers[item] = Path(item.path).relative_to(TESTS).parts[0]
        if tiers[item] not in TIERS:
            raise pytest.UsageError(f"{item.path}: a test belongs in a tier's folder, tests/{{{','.join(TIERS)}}}/")
        item.add_marker(tiers[item])
    items.sort(key=lambda item: TIERS.index(tiers[item]))


# What the suite cost, printed at its end (a slow file is found by reading, not guessing; a full disk is named):
# seconds per test file (setup, call and teardown: the fixtures that build venvs or probe stacks are paid by the first
# file that asks for them) and the disk free before and after.
SLOWEST_FILES = 12
FREE_AT_START = pytest.StashKey[float]()
SECONDS_PER_FILE = {}


def free_gigabytes():
    return shutil.disk_usage(REPO).free / 1e9


def pytest_sessionstart(session):
    session.config.stash[FREE_AT_START] = free_gigabytes()


def pytest_runtest_logreport(report):
    file = report.nodeid.split("::")[0]
    SECONDS_PER_FILE[file] = SECONDS_PER_FILE.get(file, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, config):
    if not SECONDS_PER_FILE:
        return
    terminalreporter.section("the suite's cost")
    per_tier = {}
    for file, seconds in SECONDS_PER_FILE.items():
        tier = Path(file).parts[1] if len(Path(file).parts) > 2 else file
        per_tier[tier] = per_tier.get(tier, 0.0) + seconds
    terminalreporter.write_line("minutes per tier: " + ", ".join(f"{t} {s / 60:.1f}" for t, s in per_tier.items()))
    terminalreporter.write_line(f"the {SLOWEST_FILES} slowest files (minutes, fixtures included):")
    for file, seconds in sorted(SECONDS_PER_FILE.items(), key=lambda item: -item[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"  {seconds / 60:6.1f}  {file}")
    terminalreporter.write_line(
        f"disk free: {config.stash[FREE_AT_START]:.1f} GB at the start, {free_gigabytes():.1f} GB at the end "
        f"(stack venvs in {VENV_ROOT})"
    )


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
    """Build (or reuse) the venv of envs/<env>.yaml; returns its interpreter, or the builder's failure: its exit code
    and last lines (pip's error), which would otherwise be lost in a captured traceback."""
    from build_env import venv_prefix

    env_file = REPO / "envs" / f"{env}.yaml"
    builder = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_env.py"), str(env_file), "--venv-root", str(VENV_ROOT)],
        capture_output=True,
        text=True,
    )
    if builder.returncode:
        output = (builder.stdout + builder.stderr).splitlines()
        # The builder's last line (its reason) first: a CI log's excerpt of the error may show only the start.
        return f"building envs/{env}.yaml failed (exit {builder.returncode}): {output[-1] if output else ''}\n" + (
            "\n".join(output[-40:])
        )
    return venv_prefix(VENV_ROOT, env_file) / "bin" / "python"


@pytest.fixture(scope="session")
def env_python():
    """env name -> interpreter of its built venv (built on first use, once per session; a failed build fails each
    test that asks for it with the builder's output, without building again)."""
    built = {}

    def get(env):
        if env not in built:
            built[env] = build_env(env)
        if isinstance(built[env], str):
            pytest.fail(built[env], pytrace=False)
        return built[env]

    return get


def cpu_variants(entry):
    """The variants a stack declares that run on CPU, base variant first."""
    from dlbench.variants import unsupported_reason

    return [variant for variant in entry["variants"] if unsupported_reason(entry, variant, "cpu") is None]


@pytest.fixture(scope="session")
def probes(env_python, tmp_path_factory):
    """stack -> (probe.json of tests/support/probe_adapter.py run in the stack's CPU env, its output folder).

    The five probes run side by side: each is mostly single-threaded framework start-up and model building."""
    running = {}
    for stack, entry in STACKS.items():
        out = tmp_path_factory.mktemp(f"probe-{stack}")
        command = [
            str(env_python(entry["env"]["cpu"])),
            str(SUPPORT / "probe_adapter.py"),
            entry["adapter"],
            ",".join(cpu_variants(entry)),
            str(out),
        ]
        log = open(out / "stderr.log", "w")
        running[stack] = (
            subprocess.Popen(command, env=library_environment(entry["environment"]), stderr=log, stdout=log),
            out,
        )
    results = {}
    for stack, (process, out) in running.items():
        assert process.wait() == 0, f"probe of {stack} failed:\n{(out / 'stderr.log').read_text()[-3000:]}"
        results[stack] = (json.loads((out / "probe.json").read_text()), out)
    return results


@pytest.fixture(scope="module")
def existing_python(env_python, tmp_path_factory):
    """An environment that already exists (config `existing_envs`), for torch-2.13: a venv made without pip whose
    packages are those of the built torch venv (a .pth file), so it stands for a preinstalled interpreter."""
    built = env_python(STACKS["torch-2.13"]["env"]["cpu"])
    site = subprocess.run(
        [str(built), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    base = subprocess.run(
        [str(built), "-c", "import sys; print(sys._base_executable)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    prefix = tmp_path_factory.mktemp("preinstalled") / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(prefix)], check=True)
    python = prefix / "bin" / "python"
    own_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (prefix / own_site / "preinstalled.pth").write_text(site + "\n")
    return python


def read_csv(path):
    """The rows of a CSV table as dicts of strings."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))
