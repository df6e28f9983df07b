"""Snakemake rerunning a finished study whose output folder became unwritable: alone it ends in its own traceback; the
onstart check (scripts/dlbench/cli.py's unwritable_output) says it in one line first."""

import os
import subprocess
import sys

import pytest
from conftest import library_environment
from filesystems import unwritable


SNAKEFILE = """
import sys
from dlbench.cli import unwritable_output

rule all:
    input: "tables/runs.csv"

rule aggregate:
    input: "record.json"
    output: "tables/runs.csv"
    shell: "cp {input} {output}"
"""
# What the workflow's Snakefile can add (Snakemake 9.27; workflow.dag is not a public API): Snakemake removes the old
# outputs and logs of every job it reruns before running it, and a folder that refuses it ends Snakemake with its own
# 50-line traceback, before any script of ours runs.
ONSTART = """
onstart:
    problem = unwritable_output(path for job in workflow.dag.needrun_jobs() for path in [*job.output, *job.log])
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(1)
"""


@pytest.mark.parametrize("hook", [False, True], ids=["snakemake-alone", "onstart-check"])
def test_snakemake_in_an_unwritable_output_folder(tmp_path, hook):
    """A finished study whose tables folder became read-only, rerun: Snakemake alone prints a traceback (its
    remove_existing_output does not catch PermissionError); the onstart check says it in one line first."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE + (ONSTART if hook else ""))
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "runs.csv").write_text("old\n")
    os.utime(tmp_path / "tables" / "runs.csv", (1, 1))
    (tmp_path / "record.json").write_text("{}\n")  # newer than the output: the rule reruns
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1"]
    with unwritable(tmp_path / "tables"):
        result = subprocess.run(snakemake, cwd=tmp_path, capture_output=True, text=True, env=library_environment())
    assert result.returncode == 1
    if hook:
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines()[-1] == (
            "error: cannot write tables/runs.csv: Permission denied (read-only folder: chmod u+w tables, "
            "or chattr -i tables if it is immutable)"
        )
    else:
        assert "Traceback" in result.stderr and "remove_existing_output" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("PermissionError: ")
