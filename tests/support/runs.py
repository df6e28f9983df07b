"""The runner (scripts/run_experiment.py) as the tests start it: an experiment row, the command line, the record
schema and the contention limits of a shared machine."""

import json
import subprocess

import yaml
from conftest import REPO, SHARED_MACHINE
from dlbench import record as run_record
from dlbench import record_check, record_fields

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
        "measure_latency": False,
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


# A finished run's epochs (write_run)
IMAGES = 512
EPOCHS = [  # (train_s, eval_s, train_loss, test_loss, test_accuracy)
    (0.9, 0.05, 1.2, 1.0, 0.6),
    (0.25, 0.04, 0.8, 0.7, 0.85),
    (0.26, 0.04, 0.5, 0.45, 0.93),
]
EXTRA = [0.27, 0.25]  # extra steady epochs


def write_run(folder, **changes):
    """A finished run as run_experiment.py leaves it, its figures made by the functions train.py makes them with;
    `changes` overwrite record fields after the digests are taken."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"status": "ok", "error": None, "epoch_train_s": [], "epoch_eval_s": [], "loss_curve": []}
    record |= {"target_accuracy": 0.9, "target_loss": None, "time_to_target_s": None, "images_per_epoch": IMAGES}
    rows = []
    for epoch, figures in enumerate(EPOCHS, 1):
        run_record.add_epoch(record, rows, (epoch, *figures, IMAGES))
    run_record.write_epochs_csv(folder / "epochs.csv", rows)
    (folder / "telemetry.csv").write_text("t_s,phase\n0.0,build\n")
    record |= {
        "extra_steady_epochs_s": EXTRA,
        "train_images_per_s": record_check.steady_throughput(IMAGES, [*record["epoch_train_s"], *EXTRA]),
        "first_epoch_images_per_s": IMAGES / EPOCHS[0][0],
        "final_test_accuracy": EPOCHS[-1][4],
        "final_test_loss": EPOCHS[-1][3],
        "tokens_per_example": None,
        "model_flops_utilisation": 0.3,
        "device": "cpu",
        "provenance": {"cpu_cores": 2},
        "mfu_precision": "fp32",
        "train_flops_per_s": 3e9,
    }
    record["tables_sha256"] = record_check.tables_sha256({name: folder / name for name in record_fields.RUN_TABLES})
    (folder / "record.json").write_text(json.dumps(record | changes))
    return folder / "record.json"
