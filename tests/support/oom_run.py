"""train.py with PyTorch's train_epoch replaced by one that raises CUDA's out-of-memory error (a scripted OOM).

PYTHONPATH=scripts <torch env python> tests/support/oom_run.py <train.py arguments>
"""

import sys

import torch
import train
from dlbench.adapters import pytorch


def out_of_memory(*args, **kwargs):
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


pytorch.train_epoch = out_of_memory
sys.argv = ["train.py", *sys.argv[1:]]
train.main()
