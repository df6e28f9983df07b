"""The README's first commands are the ones that work: CI runs exactly its test line."""

import re

from conftest import REPO


def readme_commands():
    return re.findall(r"```bash\n(.+?)\n```", (REPO / "README.md").read_text())


def test_ci_runs_the_readme_test_line():
    ci_lines = [line for line in (REPO / ".ci/run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci_lines == [readme_commands()[1]]


def test_first_command_sets_up_and_runs_the_workflow():
    setup_and_run = readme_commands()[0]
    assert setup_and_run.startswith("python3 scripts/build_env.py envs/driver.yaml --prefix .venv && ")
    assert setup_and_run.endswith("snakemake")
