"""The runner (scripts/run_experiment.py) as the tests start it: an experiment row, the command line, the record
schema and the contention limits of a shared machine."""

import json
import subprocess

import yaml
from conftest import REPO, SHARED_MACHINE

RECORD_SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "run_record.schema.yaml").read_text())
ENV_DESCRIPTION = {
    "env_file": "envs/torch-2.13-cpu.yaml",
    "env_file_sha256": "a" * 64,
    "lock_sha256": "c" * 64,
    "deployment": "venv",
    "packages_sha256": "b" * 64,
}


def experiment(**changes):
    row = {
        "experiment_id": "torch-2.13_digits_mlp_cpu_b64_adam-lr0.001_e3_eager",
        "stack": "torch-2.13",
        "framework": "torch",
        "backend": "eager",
        "adapter": "pytorch",
        "dataset": "digits",
        "model": "mlp",
        "device": "cpu",
        "batch_size": 64,
        "optimizer": "adam",
        "learning_rate": 0.001,
        "momentum": 0.9,
        "weight_decay": 0.0,
        "epochs": 3,
        "variant": "eager",
        "data_placement": "device",
        "replicas": 1,
        "scaling": "weak",
        "rep": 1,
        "seed": 1,
        "target_accuracy": 0.9,
        "telemetry_hz": 10,
        "measure_input_share": True,
        "math_mode": {"tf32": True, "autotune": True},
        "min_steady_seconds": 0.0,
        "environment": {},
    }
    return row | changes


CONFIG_SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
LENIENT = dict(CONFIG_SCHEMA["properties"]["contention"]["default"], **SHARED_MACHINE)


def runner_command(python, row, dataset_dir, folder, contention=LENIENT):
    command = [str(python), str(REPO / "scripts" / "run_experiment.py")]
    return [*command, *train_arguments(row, dataset_dir, folder), "--contention", json.dumps(contention)]


def train_arguments(row, dataset_dir, folder):
    """train.py's arguments for `row` (run_experiment.py's, less --contention), its outputs in `folder`."""
    env_json = folder / "env.json"
    env_json.write_text(json.dumps(ENV_DESCRIPTION))
    return [
        "--experiment",
        json.dumps(row),
        "--dataset-dir",
        str(dataset_dir),
        "--env-description",
        str(env_json),
        "--threads",
        "1",
        "--record",
        str(folder / "record.json"),
        "--epochs-csv",
        str(folder / "epochs.csv"),
        "--telemetry-csv",
        str(folder / "telemetry.csv"),
    ]


def strict_json(text):
    """json.loads that refuses NaN and Infinity, as every parser outside Python does."""

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def prepare_synthetic(tools_python, folder, classes, train_size, test_size, name="synthetic-8x8x1"):
    """A synthetic dataset (default synthetic-8x8x1; a synthetic-tokens one: sequences, `classes` unused) prepared into
    folder by scripts/prepare_dataset.py in the tools env, as the workflow's prepare rule does."""
    sizes = {"train_size": train_size, "test_size": test_size, "seed": 0}
    options = {"synthetic": {"classes": classes, **sizes}, "synthetic_tokens": sizes}
    command = [str(tools_python), str(REPO / "scripts" / "prepare_dataset.py"), name, str(folder)]
    subprocess.run([*command, "--options", json.dumps(options)], check=True)
    return folder
