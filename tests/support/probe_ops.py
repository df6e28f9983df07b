"""Run inside a stack's env: every operator of one ops adapter at a few sizes, checked against NumPy.

    PYTHONPATH=scripts <env python> tests/support/probe_ops.py ADAPTER > probe.json
Prints {"framework": ..., "checked": [[operator, size], ...], "failures": [message, ...]}.
"""

import json
import sys

from dlbench import ops
from dlbench.adapters import load
from run_ops import call_arguments


def main():
    adapter = load(sys.argv[1])
    functions = adapter.operators("cpu", "float32")
    checked, failures = [], []
    for operator in ops.OPERATORS:
        for size in (8, 33) if operator == "gemm" else (1000, 5000):
            host = ops.host_inputs(operator, size, seed=size)
            try:
                output = functions[operator](*call_arguments(adapter, operator, host, "cpu", "float32"))
                ops.check(operator, "float32", size, adapter.ops_output(output), ops.reference(operator, host))
                checked.append([operator, size])
            except Exception as error:
                failures.append(f"{operator} {size}: {type(error).__name__}: {error}")
    json.dump({"framework": adapter.FRAMEWORK, "checked": checked, "failures": failures}, sys.stdout)


if __name__ == "__main__":
    main()
