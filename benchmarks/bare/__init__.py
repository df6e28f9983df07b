"""Hand-written LeNet, ResNet-20 and ResNet-50 training loops, one per framework, written the way that framework's
own guides write them: the references of benchmarks/parity.py.

Each module defines `make_epoch(arrays, batch_size, learning_rate, model, device, mixed_precision, channels_last)
-> (epoch(order), parameter_count)`; `epoch` trains over the batches of `order` and returns once the device is idle.
They import their framework directly: they are what the adapters are measured against, not part of the workflow.
"""
