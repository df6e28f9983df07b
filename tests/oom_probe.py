"""scripts/max_batch.py with PyTorch's train_epoch raising CUDA's out-of-memory error above batch 24 (a scripted
memory limit), so the probe's OOM path runs in the real framework without a GPU.

    <torch env python> tests/oom_probe.py <max_batch.py arguments>
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import max_batch  # noqa: E402
import torch  # noqa: E402
from dlbench.adapters import pytorch  # noqa: E402

CAPACITY = 24
train_epoch = pytorch.train_epoch


def limited_train_epoch(model, staged, order, batch_size):
    if batch_size > CAPACITY:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return train_epoch(model, staged, order, batch_size)


pytorch.train_epoch = limited_train_epoch
sys.argv = ["max_batch.py", *sys.argv[1:]]
max_batch.main()
