"""train.py whose replica process 1 dies in its first epoch (PyTorch's train_epoch replaced by one that raises), while
process 0 waits in DDP's first all-reduce: a replica that dies mid-training.

PYTHONPATH=scripts <torch env python> -m torch.distributed.run --standalone --nproc-per-node=2 \
    tests/replica_death.py <train.py arguments>
"""

import sys

import train
from dlbench import parallel
from dlbench.adapters import pytorch


def lost_device(*args, **kwargs):
    raise RuntimeError("replica lost its device")


if parallel.process_rank() == 1:
    pytorch.train_epoch = lost_device
sys.argv = ["train.py", *sys.argv[1:]]
train.main()
