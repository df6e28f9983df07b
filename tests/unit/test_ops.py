"""Operator microbenchmarks: the clock really syncs, a wrong result is refused, the costs (every operator in every
framework against NumPy: tests/frameworks/test_operators.py)."""

import time

import numpy as np
import pytest
from dlbench import ops


class FakeDevice:
    """A device whose work only completes when it is synchronised, like a GPU's queue."""

    def __init__(self, seconds_per_call):
        self.seconds_per_call, self.pending = seconds_per_call, 0

    def call(self):
        self.pending += 1  # queued, returns at once
        return self.pending

    def sync(self, value):
        time.sleep(self.pending * self.seconds_per_call)
        self.pending = 0


def test_the_clock_waits_for_the_device():
    device = FakeDevice(0.002)
    timing = ops.sample_clock(device.call, device.sync, samples=10, min_sample_s=0.004)
    assert timing["median_s"] >= 0.002  # without the syncs it would measure the enqueue only (~1 us)
    assert timing["q1_s"] <= timing["median_s"] <= timing["q3_s"]
    assert timing["samples"] == 10 and timing["inner"] * 0.002 >= 0.004
    assert device.pending == 0


def test_short_calls_are_batched_into_samples_of_the_minimum_length(monkeypatch):
    """On a fake clock where each call takes exactly 1 us, calls double until a sample lasts 5 ms (no real timing:
    a shared machine's noise would make the test flaky)."""
    clock = {"now": 0.0}

    def call():
        clock["now"] += 1e-6

    monkeypatch.setattr(ops.time, "perf_counter", lambda: clock["now"])
    timing = ops.sample_clock(call, lambda value: None, samples=10, min_sample_s=0.005)
    assert timing["inner"] == 8192  # the first power of two with 8192 us >= 5 ms
    assert timing["median_s"] == pytest.approx(1e-6)


def test_a_wrong_result_is_refused():
    host = ops.host_inputs("tanh", 1000)
    with pytest.raises(AssertionError, match="tanh at size 1000 .float32.: max relative error"):
        ops.check("tanh", "float32", 1000, np.tanh(host[0]) + 1e-3, ops.reference("tanh", host))


def test_costs():
    assert ops.cost("gemm", 1024, 4) == (1024**2, 3 * 1024**2 * 4, 2 * 1024**3)
    assert ops.cost("dot", 1000, 4) == (1000, 8000, 2000)
    assert ops.cost("relu", 10**6, 2) == (10**6, 4 * 10**6, 10**6)
