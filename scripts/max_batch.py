"""The largest batch that fits: for one stack, model, dataset, device, optimiser, variant and data placement, train
a few steps at growing batch sizes until one runs out of memory, then bisect.

Each batch size is tried in a fresh process (this script with --probe, in the stack's env): an out-of-memory error
can leave a framework's allocator fragmented or its context unusable, so a later, smaller batch could fail for the
wrong reason. A probe stages the dataset in the experiment's data placement, builds the model and its optimiser,
and trains `steps` steps of the batch size (indices drawn from the training set, repeating it when the batch is
larger), so the memory it needs is the memory training needs. A probe's OOM is the framework's own error
(adapter.is_oom), a MemoryError, or a kill by SIGKILL (the kernel's out-of-memory killer, most likely); any
other error ends the search with status error.

    <env python> scripts/max_batch.py --search JSON --dataset-dir DIR --env-description FILE --threads N --out FILE
"""

import argparse
import json
import signal
import sys
from pathlib import Path

from dlbench import contention
from dlbench.cli import log, run_main
from dlbench.io import write_json_atomic
from dlbench.process import prepare_process, run_child, thread_count, thread_policy
from dlbench.record import provenance, utc_now
from dlbench.telemetry import TIMED_PHASE, job_contention, job_sampler

SCRIPTS = Path(__file__).resolve().parent


class ProbeFailed(Exception):
    """A probe failed for a reason other than memory: the search cannot say what fits."""


def largest_fitting(fits, start, limit, resolution):
    """(largest batch that fits, smallest batch found not to fit or None) for a monotone fits(batch): double from
    `start` up to `limit`; if `start` does not fit, halve down; then bisect between the two, to a multiple of
    `resolution`. 0 when not even a batch of 1 fits."""
    good, bad, batch = 0, None, start
    while bad is None and good < limit:
        if fits(batch):
            good, batch = batch, min(2 * batch, limit)
        else:
            bad = batch
    while good == 0 and bad > 1:
        batch = bad // 2
        if fits(batch):
            good = batch
        else:
            bad = batch
    while bad is not None and bad - good > resolution:
        middle = (good + bad) // 2 // resolution * resolution
        if middle <= good:
            break
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good, bad


def run_probe(search, batch_size, arguments):
    """One probe in a fresh process: its outcome as a dict with status ok | oom | error."""
    command = [
        sys.executable,
        __file__,
        "--probe",
        "--search",
        json.dumps(dict(search, batch_size=batch_size)),
        "--dataset-dir",
        arguments.dataset_dir,
        "--threads",
        str(thread_policy(arguments.threads)),
    ]
    child = run_child(command, capture_stdout=True)
    sys.stderr.write(child.stderr[-4000:])
    outcome, reported = {"batch_size": batch_size, "wall_s": child.seconds}, child.result()
    if child.ok and reported is not None:
        return outcome | reported
    if child.signal == signal.SIGKILL:
        return outcome | {"status": "oom", "error": "killed by SIGKILL (the out-of-memory killer, most likely)"}
    return outcome | {"status": "error", "error": f"probe {child.description}: {child.stderr_tail(3)}"}


def probe(search, dataset_dir, threads):
    """Train search['steps'] steps at search['batch_size'] in this process; the outcome as a dict."""
    prepare_process(search["environment"], threads, search["math_mode"])
    import numpy as np
    from dlbench import data, specs
    from dlbench.adapters import load
    from dlbench.run import Run

    adapter = load(search["adapter"])
    run, batch = Run(adapter, search), search["batch_size"]
    try:
        run.configure(threads)
        data.verify(dataset_dir)
        arrays, meta = run.load(dataset_dir)
        staged = run.stage(arrays)
        model = run.build(specs.model_spec(search["model"], meta["classes"]), tuple(meta["shape"]))
        order = np.resize(data.epoch_order(len(arrays["train_y"]), 1, search["seed"], 0), search["steps"] * batch)
        seconds = run.timed(adapter.train_epoch, model, staged, order, batch)[1]
        return {"status": "ok", "seconds": seconds, "allocator_peak_mb": adapter.allocator_peak_mb(run.device)}
    except Exception as error:  # the outcome of a probe, not a failure of this script
        out_of_memory = isinstance(error, MemoryError) or adapter.is_oom(error)
        return {"status": "oom" if out_of_memory else "error", "error": f"{type(error).__name__}: {error}"[:2000]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--search", required=True, help="the search row as JSON (common.smk: max_batch_searches)")
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--threads", type=thread_count, required=True, help="a number, 'all' or 'framework'")
    parser.add_argument("--env-description")
    parser.add_argument("--out")
    parser.add_argument("--contention", help="JSON: the config's contention section")
    parser.add_argument("--probe", action="store_true", help="train one batch size in this process (internal)")
    arguments = parser.parse_args()
    search = json.loads(arguments.search)
    if arguments.probe:
        print(json.dumps(probe(search, arguments.dataset_dir, arguments.threads)))
        return
    # What fits in memory does not depend on CPU time: only the GPU's findings (another process holding its
    # memory, throttling) make a search contended.
    limits = dict(json.loads(arguments.contention), max_foreign_cpu_cores=None, max_steal_share=None)
    result = contention.until_clean(lambda: search_once(search, arguments), limits, search["search_id"], log)
    write_json_atomic(arguments.out, result)


def search_once(search, arguments):
    """One whole search: its result, with the contention over all its probes."""
    env_description = json.loads(Path(arguments.env_description).read_text())
    result = {
        key: search[key]
        for key in (
            "search_id",
            "stack",
            "framework",
            "dataset",
            "model",
            "device",
            "optimizer",
            "variant",
            "data_placement",
            "start",
            "limit",
            "resolution",
            "steps",
        )
    }
    result.update(
        status="ok",
        error=None,
        probes=[],
        provenance=provenance(env_description, SCRIPTS.parent, thread_policy(arguments.threads)),
    )

    def fits(batch_size):
        outcome = run_probe(search, batch_size, arguments)
        result["probes"].append(outcome)
        log(f"batch {batch_size}: {outcome['status']}" + (f" ({outcome['error']})" if outcome.get("error") else ""))
        if outcome["status"] == "error":
            raise ProbeFailed(outcome["error"])
        return outcome["status"] == "ok"

    log(f"searching the largest batch of {search['search_id']} in [1, {search['limit']}], from {search['start']}")
    sampler = job_sampler(search["device"])
    sampler.mark(TIMED_PHASE)
    try:
        largest, first_failure = largest_fitting(fits, search["start"], search["limit"], search["resolution"])
        result.update(max_batch=largest, first_failure=first_failure, limit_reached=first_failure is None)
        log(
            f"largest batch that fits: {largest}"
            + (" (the limit)" if first_failure is None else f"; {first_failure} does not")
        )
    except ProbeFailed as failure:
        result.update(status="error", error=str(failure), max_batch=None, first_failure=None, limit_reached=False)
        log(f"FAILED: {failure}")
    result["contention"] = job_contention(sampler)
    result["provenance"]["finished_at"] = utc_now()
    return result


if __name__ == "__main__":
    run_main(main)
