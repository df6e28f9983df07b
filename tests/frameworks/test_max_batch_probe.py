"""The largest-batch search's probe in the torch venv: a scripted CUDA out-of-memory error above batch 24
(tests/support/oom_probe.py) is an oom probe, a batch below it an ok one (the search itself:
tests/unit/test_max_batch.py)."""

import json
import subprocess

from conftest import SUPPORT, library_environment
from runs import prepare_synthetic


def test_a_framework_out_of_memory_error_is_an_oom_probe(tmp_path, env_python):
    """A probe in the torch env whose training raises CUDA's out-of-memory error above batch 24
    (tests/support/oom_probe.py)."""
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 4, 64, 16)
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
            str(SUPPORT / "oom_probe.py"),
            "--probe",
            "--search",
            json.dumps(dict(search, batch_size=batch)),
            "--dataset-dir",
            str(dataset),
            "--threads",
            "1",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=True, env=library_environment())
        outcomes[batch] = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcomes[16]["status"] == "ok" and outcomes[16]["seconds"] > 0
    assert outcomes[32] == {
        "status": "oom",
        "error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    }
