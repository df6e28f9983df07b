"""Inference latency at batch 1: one test example through the trained model, host array in, its logits back on the
host, as a service answers one request: the adapter's `logits`, each framework's compiled inference (PyTorch's
inference function, a hybridized Gluon block, TensorFlow's tf.function, a jitted Flax step, Keras'
predict, Paddle's dynamic graph in eval mode). After WARMUP untimed calls (the first traces and compiles
the batch-1 shape), CALLS timed ones, or as many as fit in SECONDS; the median and the 99th percentile, as serving
benchmarks report them. Not for streamed data (its models read the loader's undecoded images) nor for data-parallel
replicas (one request runs on one device)."""

import math
import statistics
import time

NEEDS = ()  # `logits` is every adapter's
WARMUP, CALLS, SECONDS = 5, 100, 2.0


def applies(trained):
    """Where the config asks for it (true: every repeat; "first": the first repeat only), on one device, for data
    held in arrays (the run kept one test example)."""
    experiment = trained.run.experiment
    asked = experiment.get("measure_latency", False)
    wanted = asked is True or (asked == "first" and experiment["rep"] == 1)
    one_device = experiment.get("replicas", 1) == 1
    return wanted and one_device and trained.run.example is not None


def percentile(values, share):
    """The nearest-rank percentile: the smallest value with at least `share` of `values` at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def measure(trained):
    model, example, logits = trained.model, trained.run.example, trained.run.adapter.logits
    trained.sampler.mark("latency")
    for _ in range(WARMUP):
        logits(model, example)
    seconds, deadline = [], time.perf_counter() + SECONDS
    while len(seconds) < CALLS and time.perf_counter() < deadline:
        start = time.perf_counter()
        logits(model, example)  # returns host values: nothing left running on the device
        seconds.append(time.perf_counter() - start)
    median, p99 = statistics.median(seconds) * 1e3, percentile(seconds, 0.99) * 1e3
    trained.log(f"latency at batch 1: median {median:.3f} ms, p99 {p99:.3f} ms over {len(seconds)} calls")
    return dict(latency_ms_median=median, latency_ms_p99=p99, latency_calls=len(seconds))
