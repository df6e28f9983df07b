"""Minimal hand-written LeNet and ResNet-20 training loops, one per framework, as references for
benchmarks/overhead.py.

Each module defines `make_epoch(arrays, batch_size, learning_rate, model) -> epoch(order)`, which trains one epoch over
the batches of `order` and returns only once the device is idle. They import their framework directly: they are
the bare loops the adapters are measured against, not part of the workflow.
"""
