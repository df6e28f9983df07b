"""A stack, and the tools' jobs, run in an environment that already exists (config `existing_envs`, conftest's
existing_python): checked before any job, described in every record like a built env; a bad one is refused before
any job (the check itself: tests/frameworks/test_existing_env.py)."""

import json
import subprocess

import yaml
from conftest import SHARED_MACHINE, SNAKEMAKE, VENV_ROOT, copy_repository

TORCH = "torch-2.13"


def run_snakemake(root, *arguments):
    return subprocess.run([*SNAKEMAKE, "--cores", "2", *arguments], cwd=root, capture_output=True, text=True)


def test_a_stack_runs_in_an_existing_env_and_bad_ones_are_refused_before_any_job(existing_python, env_python, tmp_path):
    copy_repository(tmp_path)
    config = {
        "stacks": [TORCH],
        "datasets": ["synthetic-12x12x1"],
        "models": ["mlp"],
        "batch_sizes": [32],
        "epochs": [2],
        "variants": ["eager"],
        "repeats": 1,
        "race": {"enabled": False},
        "venv_root": str(VENV_ROOT),
        "ops": {"stacks": []},
        "contention": SHARED_MACHINE,
        "synthetic": {"classes": 4, "train_size": 128, "test_size": 32, "seed": 0},
        # the tools' jobs too (dataset preparation here), as on a machine with no index to build envs/tools.yaml from
        "existing_envs": {TORCH: str(existing_python), "tools": str(env_python("tools"))},
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
    assert (tmp_path / "results/envs/existing-tools.json").exists()
    assert not (tmp_path / "results/envs/tools.json").exists()  # nothing built
    assert "Nothing to be done" in run_snakemake(tmp_path, target, "-n").stdout

    for stack, python, message in (
        (
            "tensorflow-2.21",
            existing_python,
            f"config error in `existing_envs.tensorflow-2.21`: `{existing_python}` cannot import tensorflow",
        ),
        (TORCH, tmp_path / "missing" / "python", "does not exist"),
        ("tools", existing_python, f"config error in `existing_envs.tools`: `{existing_python}` cannot import"),
    ):
        config.update(stacks=[stack if stack != "tools" else TORCH], existing_envs={stack: str(python)})
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
