"""A config is data: shell metacharacters in every path and string a config gives (the venv root, an existing
interpreter, the download registry, mirror and offline folder, the report's title, the config file's own name) run
nothing. Every job's command of a hostile study, as a dry run prints it, is run by bash, which expands whatever the
quoting let through before the program it starts fails on the missing inputs; not one marker file appears. (Each
field quoted: tests/unit/test_shell_quoting.py; the same values in a real run: test_workflow.py's mnist study.)"""

import re
import subprocess

import yaml
from archives import mnist_like, registry_entry
from conftest import SNAKEMAKE, STACKS, copy_repository
from hostile import HOSTILE, HOSTILE_URL_PATH, MARKERS, markers


def run_in_bash(command, cwd):
    return subprocess.run(
        ["/bin/bash", "-c", command], cwd=cwd, env={}, check=False, capture_output=True, text=True, timeout=60
    )


def test_the_hostile_values_run_commands_where_unquoted(tmp_path):
    run_in_bash(f"true {HOSTILE}; true {HOSTILE_URL_PATH}", tmp_path)
    assert markers(tmp_path) == MARKERS


def test_no_config_value_runs_a_command(env_python, tmp_path):
    root = tmp_path / "workflow"
    root.mkdir()
    copy_repository(root)
    torch_env = tmp_path / f"torch {HOSTILE}"
    torch_env.symlink_to(env_python(STACKS["torch-2.13"]["env"]["cpu"]).parents[1])
    _, files = mnist_like(tmp_path / "mnist", train=64, test=16)
    registry = root / f"registry {HOSTILE}.yaml"
    registry.write_text(yaml.safe_dump({"mnist": registry_entry("idx", (28, 28, 1), files, "http://127.0.0.1:9/")}))
    study = {
        "stacks": ["torch-2.13"],
        "datasets": ["mnist"],
        "models": ["mlp"],
        "variants": ["eager"],
        "epochs": [2],
        "repeats": 2,
        "race": {"max_rounds": 3},
        "max_batch": {"enabled": True, "start": 16, "limit": 32},
        "ops": {"stacks": ["torch-2.13"], "operators": ["relu"]},
        "venv_root": str(tmp_path / f"venvs {HOSTILE}"),
        "existing_envs": {"torch-2.13": str(torch_env / "bin" / "python")},
        "downloads": {
            "registry": registry.name,
            "mirror": f"http://127.0.0.1:9/{HOSTILE_URL_PATH}/",
            "offline_dir": f"offline {HOSTILE}",
        },
        "report": {"title": HOSTILE},
    }
    config_file = root / f"study {HOSTILE}.yaml"
    config_file.write_text(yaml.safe_dump(study))
    dry_run = subprocess.run(
        [*SNAKEMAKE, "-n", "-p", "--cores", "2", "--configfile", config_file.name],
        cwd=root,
        check=False,
        capture_output=True,
        text=True,
    )
    output = dry_run.stdout + dry_run.stderr
    assert dry_run.returncode == 0, output[-3000:]
    commands = [
        line.removeprefix("Shell command: ") for line in output.splitlines() if line.startswith("Shell command: ")
    ]
    rules = set(re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):", output, re.MULTILINE))
    # every rule with a command that takes a config value: envs, downloads, data, training, probes, operators,
    # rounds, tables and the report
    assert rules >= {
        "build_env",
        "describe_existing_env",
        "download_archive",
        "prepare_dataset",
        "train",
        "max_batch",
        "ops_benchmark",
        "plan_round",
        "aggregate",
        "aggregate_ops",
        "report",
    }, rules
    for command in commands:
        run_in_bash(command, root)
    assert markers(tmp_path) == []
