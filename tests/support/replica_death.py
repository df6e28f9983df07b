"""train.py whose replica process 1 dies in its first epoch (its adapter's train_epoch replaced by one that raises),
while process 0 waits in the first all-reduce: a replica that dies mid-training.

PYTHONPATH=scripts <stack's env python> -m torch.distributed.run --standalone --nproc-per-node=2 \
    tests/support/replica_death.py <train.py arguments>          (or as parallel.training_command runs train.py)
"""

import json
import sys

import train
from dlbench import parallel
from dlbench.adapters import load


def lost_device(*args, **kwargs):
    raise RuntimeError("replica lost its device")


if parallel.process_rank() == 1:
    load(json.loads(sys.argv[sys.argv.index("--experiment") + 1])["adapter"]).train_epoch = lost_device
sys.argv = ["train.py", *sys.argv[1:]]
train.main()
