"""A piece of GPU parity tested on CPU in the torch venv: PyTorch's host batches go to the GPU pinned and
non-blocking (the arithmetic of parity: tests/unit/test_parity.py)."""

import subprocess

from conftest import STACKS, library_environment


def test_pytorch_hands_host_batches_to_a_gpu_pinned_and_non_blocking(env_python):
    """The GPU branch of the PyTorch host path, with a fake CUDA device and tensor (CI has no GPU)."""
    probe = """
from types import SimpleNamespace
from dlbench.adapters import pytorch

calls = []
class FakeTensor:
    def pin_memory(self):
        calls.append("pin_memory")
        return self
    def to(self, device, non_blocking=False):
        calls.append(f"to {device.type} non_blocking={non_blocking}")
        return self
pytorch.torch.from_numpy = lambda array: FakeTensor()
pytorch._to_device(None, SimpleNamespace(type="cuda"))
print(calls)
"""
    python = env_python(STACKS["torch-2.13"]["env"]["cpu"])
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=library_environment())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['pin_memory', 'to cuda non_blocking=True']"
