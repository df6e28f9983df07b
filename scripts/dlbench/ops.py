"""Operator microbenchmarks: the operators, their NumPy references and cost models, and the sampling clock.

Framework-neutral (NumPy only). Each adapter module that supports operators provides OPS (name -> callable
on framework inputs), `ops_input(array, dtype, device)`, `ops_output(value) -> np.ndarray` and
`ops_sync(device, value)`; creation operators receive host data instead of framework inputs.
"""

import statistics
import time
from pathlib import Path

import numpy as np

# name: (input kind, size kind). Input kinds: "device" tensors, a host "numpy" array, a host Python "list".
OPERATORS = {
    "from_numpy": ("numpy", "elements"),
    "from_list": ("list", "elements"),
    "sigmoid": ("device", "elements"),
    "relu": ("device", "elements"),
    "tanh": ("device", "elements"),
    "softrelu": ("device", "elements"),
    "softsign": ("device", "elements"),
    "dot": ("device", "elements"),
    "gemm": ("device", "side"),
    "flatten": ("device", "elements"),
    "normalize": ("device", "elements"),
}
FLOP_BOUND = ("dot", "gemm")  # measured against the GEMM ceiling (GFLOP/s); the others against the bandwidth ceiling
ROW = 1000  # flatten and normalize see `elements` as a (elements / ROW, ROW) matrix (a (n, 10, 10, 10) tensor)


def reference(op, arrays):
    """The NumPy result the framework's output is checked against (computed in float64)."""
    x = arrays[0].astype(np.float64)
    return {
        "from_numpy": lambda: x,
        "from_list": lambda: x,
        "sigmoid": lambda: 1 / (1 + np.exp(-x)),
        "relu": lambda: np.maximum(x, 0),
        "tanh": lambda: np.tanh(x),
        "softrelu": lambda: np.logaddexp(0, x),
        "softsign": lambda: x / (1 + np.abs(x)),
        "dot": lambda: np.dot(x, arrays[1].astype(np.float64)),
        "gemm": lambda: x @ arrays[1].astype(np.float64),
        "flatten": lambda: x.reshape(len(x), -1),
        "normalize": lambda: x / np.sqrt((x * x).sum(axis=1, keepdims=True)),
    }[op]()


def host_inputs(op, size, seed=0):
    """NumPy float32 inputs of an operator at a size (elements, or the side of a square matrix for gemm)."""
    rng = np.random.default_rng(seed)
    if op == "gemm":
        return [rng.standard_normal((size, size), dtype=np.float32) for _ in range(2)]
    if op == "dot":
        return [rng.standard_normal(size, dtype=np.float32) for _ in range(2)]
    if op == "flatten":
        return [rng.standard_normal((max(size // ROW, 1), 10, 10, 10), dtype=np.float32)]
    if op == "normalize":
        return [rng.standard_normal((max(size // ROW, 1), ROW), dtype=np.float32)]
    return [rng.standard_normal(size, dtype=np.float32)]


def cost(op, size, itemsize):
    """(elements, bytes moved, floating-point operations) of one call: the figures throughput is derived from."""
    if op == "gemm":
        return size * size, 3 * size * size * itemsize, 2 * size**3
    elements = max(size // ROW, 1) * ROW if op in ("flatten", "normalize") else size
    if op == "dot":
        return elements, 2 * elements * itemsize, 2 * elements
    flops = {"sigmoid": 4, "tanh": 4, "softrelu": 3, "softsign": 3, "relu": 1, "normalize": 3}.get(op, 0)
    return elements, 2 * elements * itemsize, flops * elements


def tolerance(op, dtype, size):
    """Relative tolerance against the float64 reference: float32 rounding grows with the reduction length."""
    base = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    reduction = {"dot": size, "gemm": size, "normalize": ROW}.get(op, 1)
    return base * max(1.0, np.sqrt(reduction))


def check(op, dtype, size, output, expected):
    """Raise AssertionError naming the operator when the output differs from the reference."""
    output = np.asarray(output, dtype=np.float64).reshape(np.shape(expected))
    scale = max(float(np.abs(expected).max()), 1e-30)
    error = float(np.abs(output - expected).max()) / scale
    if not error <= tolerance(op, dtype, size):
        raise AssertionError(
            f"{op} at size {size} ({dtype}): max relative error {error:.2e} "
            f"exceeds {tolerance(op, dtype, size):.1e} against NumPy"
        )


def sample_clock(call, sync, samples=10, min_sample_s=0.005, warmup=3, max_seconds=20.0):
    """Seconds per call: warm-up calls, then `samples` samples of `inner` calls each, synchronised around every
    sample, with `inner` doubled until one sample lasts at least min_sample_s. Returns a dict with the median
    and interquartile range per call, the inner count and the samples taken."""
    for _ in range(warmup):
        sync(call())

    def sample(inner):
        sync(None)
        start = time.perf_counter()
        for _ in range(inner):
            value = call()
        sync(value)
        return (time.perf_counter() - start) / inner

    inner = 1
    while sample(inner) * inner < min_sample_s and inner < 1 << 20:
        inner *= 2
    per_call, spent = [], 0.0
    while len(per_call) < samples and (spent < max_seconds or len(per_call) < 3):
        per_call.append(sample(inner))
        spent += per_call[-1] * inner
    q1, median, q3 = statistics.quantiles(per_call, n=4, method="inclusive")
    return {"median_s": median, "q1_s": q1, "q3_s": q3, "inner": inner, "samples": len(per_call)}


CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def cache_bytes(caches=CACHES):
    """The CPU's last-level cache (bytes, from sysfs: the data or unified cache of the highest level; None where
    sysfs does not say). Data that fits in it is read and written at the cache's speed, above memory's."""
    sizes = {}
    for index in sorted(caches.glob("index*")):
        try:
            kind, level, size = ((index / name).read_text().strip() for name in ("type", "level", "size"))
        except OSError:
            continue
        if kind in ("Data", "Unified") and size:
            sizes[int(level)] = int(size.rstrip("KMG")) * UNITS.get(size[-1], 1)
    return sizes[max(sizes)] if sizes else None


def numpy_ceiling(gemm_side=1024, copy_bytes=1 << 26):
    """This machine's CPU limits, measured with NumPy: BLAS GEMM GFLOP/s and memory copy GB/s (read + write), and
    its last-level cache, within which an operator can run above the memory's bandwidth."""
    a, b = host_inputs("gemm", gemm_side)
    gemm = sample_clock(lambda: a @ b, lambda value: None, samples=5)
    source = np.ones(copy_bytes // 4, dtype=np.float32)
    target = np.empty_like(source)
    copy = sample_clock(lambda: np.copyto(target, source), lambda value: None, samples=5)
    return {
        "gemm_gflop_per_s": 2 * gemm_side**3 / gemm["median_s"] / 1e9,
        "bandwidth_gb_per_s": 2 * copy_bytes / copy["median_s"] / 1e9,
        "source": f"NumPy {np.__version__}: {gemm_side}x{gemm_side} float32 GEMM, {copy_bytes >> 20} MiB copy",
        "cache_bytes": cache_bytes(),
    }
