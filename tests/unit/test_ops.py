"""Operator microbenchmarks: the clock really syncs, a wrong result is refused, the costs (every operator in every
framework against NumPy: tests/frameworks/test_operators.py)."""

import time

import numpy as np
import pandas as pd
import pytest
from dlbench import ops
from dlbench.study.analysis.operators import CACHE, GEMM, IMPORT, UNEXPLAINED, VIEW, over_ceiling_causes


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


def test_the_last_level_cache_is_read_from_sysfs(tmp_path):
    for index, (kind, level, size) in enumerate(
        [("Data", 1, "48K"), ("Instruction", 1, "32K"), ("Unified", 2, "2048K"), ("Unified", 3, "32M")]
    ):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("type", kind), ("level", level), ("size", size)):
            (folder / name).write_text(f"{value}\n")
    assert ops.cache_bytes(tmp_path) == 32 << 20
    assert ops.cache_bytes(tmp_path / "absent") is None


def sweep(stack, operator, seconds, fraction, cache=32 << 20):
    """An operator's rows over three sizes (10^4..10^6 elements): its seconds per call and fraction of the ceiling,
    with the bytes it moves (read + write, float32) behind its GB/s."""
    return [
        {
            "stack": stack,
            "operator": operator,
            "device": "cpu",
            "dtype": "float32",
            "status": "ok",
            "size": elements,
            "elements": elements,
            "median_s": time,
            "gb_per_s": 8 * elements / time / 1e9,
            "fraction_of_ceiling": share,
            "ceiling_cache_bytes": cache,
        }
        for elements, time, share in zip((10**4, 10**5, 10**6), seconds, fraction)
    ]


def test_an_operator_above_its_ceiling_is_given_its_cause():
    """torch's flatten is a view and its from_numpy adopts NumPy's memory: neither's time grows with size, so their
    bytes per second are no bandwidth. A relu whose 8 MB fit in a 32 MiB cache runs above memory's bandwidth; on a CPU
    whose cache is smaller, nothing explains it. A GEMM above NumPy's is a timing to check."""
    rows = [
        *sweep("torch-2.13", "flatten", (2e-6, 2.1e-6, 2.2e-6), (0.5, 5.0, 50.0)),
        *sweep("torch-2.13", "from_numpy", (1e-6, 1e-6, 1.1e-6), (1.0, 9.0, 90.0)),
        *sweep("torch-2.13", "relu", (1e-6, 1e-5, 1e-4), (0.5, 1.2, 1.3)),
        *sweep("mxnet-1.9", "relu", (1e-6, 1e-5, 1e-4), (0.5, 0.9, 1.3), cache=1 << 20),
        *sweep("jax", "gemm", (1e-5, 1e-3, 1e-1), (0.8, 1.5, 1.9)),
    ]
    table = pd.DataFrame(rows)
    table["over_ceiling_cause"] = over_ceiling_causes(table)
    causes = table.groupby(["stack", "operator"])["over_ceiling_cause"].apply(list).to_dict()
    assert causes[("torch-2.13", "flatten")] == [None, VIEW, VIEW]
    assert causes[("torch-2.13", "from_numpy")] == [None, IMPORT, IMPORT]
    assert causes[("torch-2.13", "relu")] == [None, CACHE, CACHE]
    assert causes[("mxnet-1.9", "relu")] == [None, None, UNEXPLAINED]
    assert causes[("jax", "gemm")] == [None, GEMM, GEMM]
    failed = pd.DataFrame([dict(rows[0], status="error", fraction_of_ceiling=None, median_s=None)])
    assert over_ceiling_causes(failed).tolist() == [None]
