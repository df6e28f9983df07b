"""The README's commands are the ones that work: its first two set up and run the workflow and the tests (CI runs
exactly its test line), the third runs the unit tier, every tier it names is a folder of tests/, and they keep working
once the checkout is moved."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SETUP = "python3 scripts/build_env.py envs/driver.yaml --prefix .venv && "
# The venv's console scripts (bin/snakemake, bin/pytest) start with `#!<absolute path of the venv>/bin/python`.
PINNED_SCRIPT = re.compile(r"\.venv/bin/(snakemake|pytest|snakefmt)\b")


def readme_commands():
    return re.findall(r"```bash\n(.+?)\n```", (REPO / "README.md").read_text())


def test_ci_runs_the_readme_test_line():
    ci_lines = [
        line
        for line in (REPO / ".ci/run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci_lines == [readme_commands()[1]]


def test_first_command_sets_up_and_runs_the_workflow():
    setup_and_run = readme_commands()[0]
    assert setup_and_run == SETUP + ".venv/bin/python -m snakemake"


def test_the_test_line_runs_pytest_through_the_venvs_interpreter():
    assert readme_commands()[1] == SETUP + ".venv/bin/python -m pytest tests"


def test_the_fast_line_runs_the_unit_tier():
    assert readme_commands()[2] == ".venv/bin/python -m pytest tests/unit"


def test_the_tiers_the_readme_names_are_the_test_folders():
    named = set(re.findall(r"^\| `tests/(\w+)` \|", (REPO / "README.md").read_text(), re.MULTILINE))
    folders = {path.parent.name for path in (REPO / "tests").glob("*/test_*.py")}
    assert named == folders == {"unit", "frameworks", "workflow", "cluster"}


def test_no_command_for_users_names_a_venv_console_script():
    """Every place that tells a user what to type (README, the docs, config and profile comments, CI, the scripts'
    docstrings and messages) runs Snakemake and pytest as `.venv/bin/python -m ...`."""
    places = [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        REPO / "config" / "README.md",
        REPO / ".ci" / "run",
        REPO / "Snakefile",
        *(REPO / "config").glob("*.yaml"),
        *(REPO / "profiles").rglob("*.yaml"),
        *(REPO / "workflow").rglob("*.smk"),
        *(REPO / "scripts").rglob("*.py"),
        *(REPO / "benchmarks").glob("*.py"),
    ]
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in places
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PINNED_SCRIPT.search(line)
    ]
    assert not found, "\n".join(found)


def test_the_commands_work_once_the_checkout_is_moved(tmp_path):
    """A copy of the driver venv stands in for a checkout built at one path and moved to another (465 MB: `cp -a` takes
    about 2 s, against minutes and pip's index for building a venv). A copy keeps the console scripts' first line,
    which still names the original venv, so it is rewritten to the line pip writes when it installs into the copy's
    own path; then that path is renamed away, as `mv` of a checkout does. The interpreter still runs
    (`bin/python` is a link to the base Python, found by its absolute path), and with it `-m snakemake` and
    `-m pytest`; the console scripts no longer start: their interpreter is gone (ENOENT from exec)."""
    driver = Path(sys.prefix)
    if not (driver / "bin" / "snakemake").exists():
        pytest.skip(f"{driver} is not a venv with Snakemake")
    built, moved = tmp_path / "built", tmp_path / "moved"
    built.mkdir()
    try:
        subprocess.run(["cp", "-a", str(driver), str(built / ".venv")], check=True)
        for script in ("snakemake", "pytest"):
            path = built / ".venv" / "bin" / script
            lines = path.read_text().split("\n", 1)
            assert lines[0].startswith("#!") and lines[0].endswith("/bin/python"), lines[0]
            path.write_text(f"#!{built / '.venv' / 'bin' / 'python'}\n{lines[1]}")
        built.rename(moved)
        python = moved / ".venv" / "bin" / "python"
        version = subprocess.run(
            [str(python), "-m", "snakemake", "--version"], cwd=moved, capture_output=True, text=True
        )
        assert version.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\s*", version.stdout), version.stderr[-2000:]
        tests = subprocess.run([str(python), "-m", "pytest", "--version"], cwd=moved, capture_output=True, text=True)
        assert tests.returncode == 0, tests.stderr[-2000:]
        for script in ("snakemake", "pytest"):  # the cause: each names the venv's old path
            with pytest.raises(FileNotFoundError):
                subprocess.run([str(moved / ".venv" / "bin" / script), "--version"], cwd=moved, capture_output=True)
    finally:
        shutil.rmtree(moved if moved.exists() else built, ignore_errors=True)
