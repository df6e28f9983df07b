"""One operator microbenchmark job: one operator of one stack on one device, over all sizes and dtypes.

Every result is first checked against NumPy, then timed with dlbench.ops.sample_clock (warm-up, device sync
around every sample, samples of at least `min_sample_ms`, median and interquartile range). The machine's
ceiling is measured in the same job (NumPy BLAS GEMM and memory copy on CPU; the framework's own large GEMM
and device copy on GPU) so that every figure is also a fraction of the machine's limit.
"""

import argparse
import json
import time
import traceback
from pathlib import Path

from dlbench import contention, ops
from dlbench.adapters import load
from dlbench.cli import log, run_main
from dlbench.io import write_json_atomic
from dlbench.process import prepare_process, thread_count, thread_policy
from dlbench.record import provenance, utc_now
from dlbench.telemetry import TIMED_PHASE, job_contention, job_sampler

SCRIPTS = Path(__file__).resolve().parent

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def framework_ceiling(adapter, device):
    """A GPU's limits as the framework reaches them: a 4096x4096 float32 GEMM and a 256 MiB device copy."""
    functions = adapter.operators(device, "float32")
    a, b = (adapter.ops_input(array, device, "float32") for array in ops.host_inputs("gemm", 4096))
    vector = adapter.ops_input(ops.host_inputs("relu", 1 << 26)[0], device, "float32")

    def sync(value):
        adapter.ops_sync(device, value)

    gemm = ops.sample_clock(lambda: functions["gemm"](a, b), sync, samples=5)
    copy = ops.sample_clock(lambda: functions["copy"](vector), sync, samples=5)
    return {
        "gemm_gflop_per_s": 2 * 4096**3 / gemm["median_s"] / 1e9,
        "bandwidth_gb_per_s": 2 * (1 << 28) / copy["median_s"] / 1e9,
        "source": f"{adapter.FRAMEWORK} {adapter.version()}: 4096x4096 float32 GEMM, 256 MiB device copy",
    }


def call_arguments(adapter, operator, host, device, dtype):
    """What the operator is called with: host data for creation operators, device inputs otherwise."""
    kind = ops.OPERATORS[operator][0]
    if kind == "numpy":
        return host
    if kind == "list":
        return [array.tolist() for array in host]
    return [adapter.ops_input(array, device, dtype) for array in host]


def measure(adapter, operator, device, dtype, size, options, ceiling):
    """One row: correctness check, then timing and the derived figures."""
    function = adapter.operators(device, dtype)[operator]
    host = ops.host_inputs(operator, size)
    arguments = call_arguments(adapter, operator, host, device, dtype)
    ops.check(operator, dtype, size, adapter.ops_output(function(*arguments)), ops.reference(operator, host))
    timing = ops.sample_clock(
        lambda: function(*arguments),
        lambda value: adapter.ops_sync(device, value),
        samples=options["samples"],
        min_sample_s=options["min_sample_ms"] / 1000,
    )
    elements, moved, flops = ops.cost(operator, size, ITEMSIZE[dtype])
    seconds = timing["median_s"]
    row = dict(
        timing,
        elements=elements,
        elements_per_s=elements / seconds,
        gb_per_s=moved / seconds / 1e9,
        gflop_per_s=flops / seconds / 1e9 if flops else None,
    )
    if operator in ops.FLOP_BOUND:
        row["fraction_of_ceiling"] = row["gflop_per_s"] / ceiling["gemm_gflop_per_s"]
    else:
        row["fraction_of_ceiling"] = row["gb_per_s"] / ceiling["bandwidth_gb_per_s"]
    return row


def run(args, options, record):
    start = time.perf_counter()
    adapter = load(options["adapter"])
    record["import_s"] = time.perf_counter() - start
    record["framework"], record["framework_version"] = adapter.FRAMEWORK, adapter.version()
    ceiling = ops.numpy_ceiling() if args.device == "cpu" else framework_ceiling(adapter, args.device)
    record["ceiling"] = ceiling
    log(f"{adapter.FRAMEWORK} {adapter.version()} on {args.device}; ceiling {ceiling}")
    sizes = options["gemm_sizes"] if args.operator == "gemm" else options["elementwise_sizes"]
    for dtype in options["dtypes"]:
        for size in sizes:
            row = {"dtype": dtype, "size": size, "status": "ok", "error": None}
            if dtype != "float32" and args.device == "cpu":
                row.update(status="unavailable", error=f"{dtype} is measured on gpu only")
            else:
                try:
                    row.update(measure(adapter, args.operator, args.device, dtype, size, options, ceiling))
                except Exception as error:  # a failing size is a result; the other sizes still run
                    traceback.print_exc()
                    row.update(status="error", error=f"{type(error).__name__}: {error}")
            record["rows"].append(row)
            figures = f"{row['median_s'] * 1e6:.1f} us/call" if row["status"] == "ok" else row["error"]
            log(f"{args.operator} {dtype} size {size}: {figures}")


def measure_once(args, options):
    """One try of the whole job: its record, with the contention over its timed window."""
    env_description = json.loads(Path(args.env_description).read_text())
    record = {
        "stack": args.stack,
        "operator": args.operator,
        "device": args.device,
        "framework": None,
        "framework_version": None,
        "status": "ok",
        "error": None,
        "ceiling": None,
        "rows": [],
        "provenance": provenance(env_description, SCRIPTS.parent, thread_policy(args.threads)),
    }
    sampler = job_sampler(args.device)
    sampler.mark(TIMED_PHASE)
    try:
        run(args, options, record)
    except Exception as error:  # e.g. the framework fails to import: still a record, and the workflow goes on
        traceback.print_exc()
        record.update(status="error", error=f"{type(error).__name__}: {error}")
    record["contention"] = job_contention(sampler)
    record["provenance"]["finished_at"] = utc_now()
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--operator", required=True, choices=sorted(ops.OPERATORS))
    parser.add_argument("--device", required=True, choices=["cpu", "gpu"])
    parser.add_argument("--options", required=True, help="JSON: adapter, environment, sizes, dtypes, samples")
    parser.add_argument("--env-description", required=True)
    parser.add_argument("--threads", type=thread_count, required=True, help="a number, 'all' or 'framework'")
    parser.add_argument("--contention", required=True, help="JSON: the config's contention section")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    options = json.loads(args.options)
    prepare_process(options["environment"], args.threads, options["math_mode"])
    record = contention.until_clean(
        lambda: measure_once(args, options),
        json.loads(args.contention),
        f"{args.operator} of {args.stack} on {args.device}",
        log,
    )
    write_json_atomic(args.out, record)
    log(f"status {record['status']}: {args.out}")


if __name__ == "__main__":
    run_main(main)
