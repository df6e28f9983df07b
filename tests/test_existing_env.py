"""A stack runs in an environment that already exists (config `existing_envs`): checked before any job, described
in every record like a built env. The existing environment here is a venv the test makes without pip, whose
packages are those of the built torch venv (a .pth file), so it stands for a preinstalled interpreter."""

import json
import subprocess

import pytest
import yaml
from build_env import check_existing, describe
from conftest import SHARED_MACHINE, SNAKEMAKE, STACKS, VENV_ROOT, copy_repository

TORCH = "torch-2.13"


@pytest.fixture(scope="module")
def existing_python(env_python, tmp_path_factory):
    built = env_python(STACKS[TORCH]["env"]["cpu"])
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


def test_an_existing_env_is_checked_for_its_framework_and_version(existing_python, tmp_path):
    problem, found = check_existing(existing_python, "torch", "2.13")
    assert problem is None and found["version"].startswith("2.13")
    problem, _ = check_existing(existing_python, "torch", "2.1")
    assert "imports torch 2.13" in problem and "declares version 2.1" in problem
    problem, _ = check_existing(existing_python, "tensorflow", "2.21")
    assert str(existing_python) in problem and "cannot import tensorflow" in problem
    problem, _ = check_existing(tmp_path / "no" / "python", "torch", "2.13")
    assert "does not exist" in problem


def test_an_existing_env_without_pip_is_described_like_a_built_one(existing_python):
    description = describe(None, str(existing_python), "existing")
    assert description["env_file"] is None and description["deployment"] == "existing"
    assert any(package.startswith("torch==2.13") for package in description["packages"])
    assert len(description["packages_sha256"]) == 64


def run_snakemake(root, *arguments):
    return subprocess.run([*SNAKEMAKE, "--cores", "2", *arguments], cwd=root, capture_output=True, text=True)


def test_a_stack_runs_in_an_existing_env_and_bad_ones_are_refused_before_any_job(existing_python, tmp_path):
    copy_repository(tmp_path)
    config = {
        "stacks": [TORCH],
        "datasets": ["synthetic-12x12x1"],
        "models": ["mlp"],
        "batch_sizes": [32],
        "epochs": [2],
        "variants": ["eager"],
        "repeats": 1,
        "venv_root": str(VENV_ROOT),
        "ops": {"stacks": []},
        "contention": SHARED_MACHINE,
        "synthetic": {"classes": 4, "train_size": 128, "test_size": 32, "seed": 0},
        "existing_envs": {TORCH: str(existing_python)},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    experiment = f"{TORCH}_synthetic-12x12x1_mlp_cpu_b32_adam-lr0.001_e2_eager"
    target = f"results/runs/{experiment}/rep1/record.json"
    result = run_snakemake(tmp_path, target)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / target).read_text())
    description = json.loads((tmp_path / f"results/envs/existing-{TORCH}.json").read_text())
    assert record["status"] == "ok" and record["framework_version"].startswith("2.13")
    provenance = record["provenance"]
    assert (provenance["env_deployment"], provenance["env_file"]) == ("existing", None)
    assert provenance["packages_sha256"] == description["packages_sha256"]
    assert description["python"] == str(existing_python)
    assert "Nothing to be done" in run_snakemake(tmp_path, target, "-n").stdout

    for stack, python, message in (
        (
            "tensorflow-2.21",
            existing_python,
            f"config error in `existing_envs.tensorflow-2.21`: `{existing_python}` cannot import tensorflow",
        ),
        (TORCH, tmp_path / "missing" / "python", "does not exist"),
    ):
        config.update(stacks=[stack], existing_envs={stack: str(python)})
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        refused = run_snakemake(tmp_path, "-n")
        output = refused.stdout + refused.stderr
        assert refused.returncode != 0 and message in output, output[-2000:]
        assert "Job stats" not in output


def test_a_stack_without_an_env_file_for_the_device_needs_an_existing_env(tmp_path):
    copy_repository(tmp_path)
    config = {"stacks": ["torch-2.11"], "datasets": ["digits"], "models": ["mlp"], "ops": {"stacks": []}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    refused = run_snakemake(tmp_path, "-n")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "stack torch-2.11 has no env file for cpu" in output and "existing_envs" in output
