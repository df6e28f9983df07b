"""scripts/max_batch.py with PyTorch's train_epoch raising CUDA's out-of-memory error above batch 24 (a scripted
memory limit), so the probe's OOM path runs in the real framework without a GPU.

    PYTHONPATH=scripts <torch env python> tests/support/oom_probe.py <max_batch.py arguments>
"""

import sys

import max_batch
import torch
from dlbench.adapters import pytorch

CAPACITY = 24
train_epoch = pytorch.train_epoch


def limited_train_epoch(model, staged, order, batch_size):
    if batch_size > CAPACITY:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return train_epoch(model, staged, order, batch_size)


pytorch.train_epoch = limited_train_epoch
sys.argv = ["max_batch.py", *sys.argv[1:]]
max_batch.main()
