"""The largest-batch search: the search itself on a scripted memory limit, and how probe outcomes are read,
including a probe killed by the out-of-memory killer and a scripted out-of-memory error in a real framework."""

import json
import signal
import subprocess

import pytest
from conftest import REPO
from max_batch import ProbeFailed, largest_fitting, run_probe


def scripted(capacity):
    """fits(batch) for a device that holds batches up to `capacity`, recording every batch tried."""
    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= capacity

    return fits, tried


@pytest.mark.parametrize(
    ("capacity", "resolution", "expected"),
    [(700, 8, (696, 704)), (700, 1, (700, 701)), (10**6, 8, (4096, None)), (5, 1, (5, 6)), (0, 8, (0, 1))],
)
def test_the_search_finds_the_largest_batch_to_the_resolution(capacity, resolution, expected):
    fits, tried = scripted(capacity)
    assert largest_fitting(fits, 16, 4096, resolution) == expected
    assert len(tried) == len(set(tried)) and len(tried) <= 2 * 12  # no batch twice; logarithmic in the range


def test_a_failure_other_than_memory_ends_the_search():
    def fits(batch):
        raise ProbeFailed("ValueError: bad shape")

    with pytest.raises(ProbeFailed):
        largest_fitting(fits, 16, 64, 8)


def test_a_probe_killed_by_sigkill_counts_as_out_of_memory(monkeypatch):
    killed = subprocess.CompletedProcess([], -signal.SIGKILL, stdout="", stderr="")
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: killed)
    outcome = run_probe({}, 256, type("Arguments", (), {"dataset_dir": "d", "threads": 1}))
    assert (outcome["status"], outcome["batch_size"]) == ("oom", 256)
    assert "out-of-memory killer" in outcome["error"]


def test_a_framework_out_of_memory_error_is_an_oom_probe(tmp_path, env_python):
    """A probe in the torch env whose training raises CUDA's out-of-memory error above batch 24 (tests/oom_probe.py)."""
    dataset = tmp_path / "dataset"
    options = {"synthetic": {"classes": 4, "train_size": 64, "test_size": 16, "seed": 0}}
    subprocess.run(
        [
            str(env_python("tools")),
            str(REPO / "scripts" / "prepare_dataset.py"),
            "synthetic-8x8x1",
            str(dataset),
            "--options",
            json.dumps(options),
        ],
        check=True,
    )
    search = {
        "stack": "torch-2.13",
        "adapter": "pytorch",
        "dataset": "synthetic-8x8x1",
        "model": "mlp",
        "device": "cpu",
        "optimizer": "adam",
        "learning_rate": 0.001,
        "momentum": 0.9,
        "weight_decay": 0.0,
        "variant": "eager",
        "data_placement": "device",
        "environment": {},
        "seed": 0,
        "steps": 2,
        "math_mode": {"tf32": True, "autotune": True},
    }
    outcomes = {}
    for batch in (16, 32):
        command = [
            str(env_python("torch-2.13-cpu")),
            str(REPO / "tests" / "oom_probe.py"),
            "--probe",
            "--search",
            json.dumps(dict(search, batch_size=batch)),
            "--dataset-dir",
            str(dataset),
            "--threads",
            "1",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        outcomes[batch] = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcomes[16]["status"] == "ok" and outcomes[16]["seconds"] > 0
    assert outcomes[32] == {
        "status": "oom",
        "error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    }
