"""The benchmarks' code paths on CPU with tiny inputs (their figures are benchmarks, printed, never asserted):
the parity benchmark's every default stack and precision against the hand-written scripts (and, for one stack,
against the figure a run's record reports), the hand-written networks of its other models against their specs, the
attention and telemetry cost benchmarks, and every default stack's loader for streamed image folders at two worker
counts."""

import json
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, SUPPORT, VENV_ROOT, library_environment, read_csv
from conftest import STACKS as ALL_STACKS

# The default config's stacks: the version study's earlier releases run the same adapters and bare scripts.
STACKS = yaml.safe_load((REPO / "config.yaml").read_text())["stacks"]

TINY = [
    "--device",
    "cpu",
    "--images",
    "16",
    "--batch-size",
    "8",
    "--image-size",
    "32",
    "--warmup",
    "0",
    "--trials",
    "1",
    "--rounds",
    "1",
    "--threads",
    "1",
    "--venv-root",
    str(VENV_ROOT),
]


def parity(tmp_path, *options):
    table = tmp_path / "parity.csv"
    command = [sys.executable, str(REPO / "benchmarks" / "parity.py"), *TINY, "--csv", str(table), *options]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout, read_csv(table)


def test_parity_runs_every_precision_or_says_why_not(tmp_path):
    printed, rows = parity(tmp_path, "--models", "lenet", "--stacks", *STACKS, "--no-record")
    assert {(row["stack"], row["precision"]) for row in rows} == {
        (s, p) for s in STACKS for p in ("fp32", "amp", "fastest")
    }
    measured = [row for row in rows if not row["reason"]]
    assert {row["stack"] for row in measured if row["precision"] == "fp32"} == set(STACKS)
    assert ("torch-2.13", "eager-nhwc-amp") in {(row["stack"], row["variant"]) for row in measured}
    for row in measured:
        assert float(row["workflow_images_per_s"]) > 0 and float(row["bare_images_per_s"]) > 0
        assert row["workflow_parameters"] == row["bare_parameters"], row
    refused = {row["stack"]: row["reason"] for row in rows if row["reason"] and row["precision"] == "amp"}
    assert "AVX512-BF16" in refused.pop("mxnet-1.9") and not refused  # the one CPU refusal, with its reason
    assert "its amp row is its fastest layout" in printed


def test_the_hand_written_resnets_and_gpt_are_the_specs(env_python):
    """Each default stack's bare networks of the parity benchmark's other models have their specs' parameters: built
    in one process per stack (tests/support/probe_bare.py), as parity.py's own run of them is minutes of compiling on
    a CPU for the training loop LeNet's rows above run already."""
    models = ["resnet20", "resnet50", "gpt-tiny"]
    for stack in STACKS:
        entry = ALL_STACKS[stack]
        command = [env_python(entry["env"]["cpu"]), SUPPORT / "probe_bare.py", entry["adapter"], *models]
        result = subprocess.run(
            [str(word) for word in command],
            env=library_environment(entry["environment"]),
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        counts = json.loads(result.stdout.splitlines()[-1])
        assert list(counts) == models and all(count["bare"] == count["spec"] for count in counts.values()), (
            stack,
            counts,
        )


def test_parity_sets_a_runs_recorded_figure_and_paired_epochs_against_the_bare_script(tmp_path):
    models = ["--models", "lenet", "gpt-tiny", "--precisions", "fp32", "--stacks", "keras-3-jax", "--paired"]
    printed, rows = parity(tmp_path, *models)
    assert [row["model"] for row in rows] == ["lenet", "gpt-tiny"] and "record img/s" in printed
    for row in rows:  # train.py's record on the study's own experiment row, images and token sequences
        assert not row["reason"] and float(row["record_images_per_s"]) > 0 and float(row["paired_ratio"]) > 0, row
        ratio = float(row["record_images_per_s"]) / float(row["bare_window_images_per_s"])
        assert float(row["record_ratio"]) == pytest.approx(ratio)


def test_parity_refuses_an_unknown_stack_and_a_wrong_interpreter(tmp_path):
    command = [sys.executable, str(REPO / "benchmarks" / "parity.py"), *TINY, "--stacks", "torch-9"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode != 0 and "unknown stack(s) torch-9" in result.stderr
    printed, rows = parity(
        tmp_path,
        "--models",
        "lenet",
        "--precisions",
        "fp32",
        "--stacks",
        "torch-2.11",
        "--python",
        f"torch-2.11={sys.executable}",
    )
    assert "does not exist" not in rows[0]["reason"] and "torch" in rows[0]["reason"], rows[0]["reason"]


def test_the_attention_benchmark_sets_fused_against_composed_or_says_why_not(tmp_path):
    table = tmp_path / "attention.csv"
    command = [sys.executable, str(REPO / "benchmarks" / "attention.py"), "--stacks", "torch-2.13", "tensorflow-2.21"]
    command += ["--examples", "16", "--batch-size", "8", "--warmup", "0", "--trials", "1", "--rounds", "1"]
    command += ["--threads", "1", "--venv-root", str(VENV_ROOT), "--csv", str(table)]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    torch, tensorflow = read_csv(table)
    assert float(torch["ratio"]) > 0 and torch["composed"].startswith("composed") and not torch["reason"]
    assert "TensorFlow has no fused attention kernel" in tensorflow["reason"]


def test_the_telemetry_cost_benchmark_runs(tmp_path):
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "overhead.py"),
        "--stacks",
        "torch-2.13",
        "--trials",
        "1",
        "--rounds",
        "1",
        "--images",
        "128",
        "--threads",
        "1",
        "--venv-root",
        str(VENV_ROOT),
    ]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 1 pairs" in result.stdout


def test_the_loader_benchmark_measures_every_stack_and_worker_count(tmp_path):
    table = tmp_path / "loaders.csv"
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "loaders.py"),
        "--images",
        "16",
        "--batch-size",
        "8",
        "--resolution",
        "32",
        "--sides",
        "40",
        "80",
        "--trials",
        "1",
        "--workers",
        "1",
        "2",
        "--venv-root",
        str(VENV_ROOT),
        "--csv",
        str(table),
    ]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = read_csv(table)
    assert {(row["stack"], row["workers"]) for row in rows} == {
        (stack, workers) for stack in STACKS for workers in ("1", "2")
    }
    assert all(float(row["images_per_s"]) > 0 and not row["reason"] for row in rows), rows
