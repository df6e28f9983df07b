"""One training run (one experiment, one repeat) in a fresh process, inside its stack's environment.

Phases are timed separately with the device synchronised around every clock read (dlbench/clock.py):
imports, data loading (host) and staging (device; streamed data: the index read and the loaders made), build
(model, optimiser, hybridize/trace setup), the first epoch (includes lazy compilation), steady epochs (2..N).
Evaluation is timed outside training; so are, after it, the steady window's extra epochs and the measurements of
dlbench/measure (input share, the loader alone, communication). Any exception still produces a record with status
'error'; a loss that becomes NaN or infinite ends the run with status 'diverged', naming the epoch. Called by
run_experiment.py.
"""

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

from dlbench import data, measure, parallel, peaks, specs, walltime
from dlbench.adapters import load
from dlbench.cli import log, run_main
from dlbench.io import write_json_atomic
from dlbench.losses import Diverged, check_finite, recorded_loss
from dlbench.measure import steady_window
from dlbench.process import prepare_process, thread_count, thread_policy
from dlbench.record import add_epoch, base_record, keep_one_target, peak_rss_mb, utc_now, write_epochs_csv
from dlbench.run import Run, dataset_description
from dlbench.run_telemetry import record_telemetry, start_telemetry


def train(adapter, experiment, dataset_dir, threads, record, epoch_rows, sampler, timeline):
    """Run the experiment, filling record and epoch_rows as it goes (so a failure keeps what was measured), each
    part of its wall time marked on `timeline`."""
    run, phases = Run(adapter, experiment, record["phases_s"]), record["phases_s"]
    record["framework_version"] = adapter.version()
    record["provenance"].update(run.libraries(record["provenance"]))
    device, batch_size = experiment["device"], parallel.global_batch_size(experiment)  # the batch size, settled once
    # Evaluation runs one replica's batches: on one device (DDP, tf.nn, Gluon), or split over them (Keras' predict).
    eval_batch_size = parallel.replica_batch_size(experiment)
    record["engaged"].update(run.configure(threads))
    log(f"{experiment['framework']} {record['framework_version']} on {device}: {record['engaged']}")
    timeline.mark("configure")
    data.verify(dataset_dir)  # before the clock: hashing is not loading
    sampler.mark("data")
    staged, meta, shuffles, record["stream"] = run.open(dataset_dir, batch_size)
    if record["stream"]:
        log(data.streaming_line(meta, adapter.LOADER, record["stream"]["workers"]))
    record["dataset_description"] = dataset_description(meta)
    timeline.mark("data")
    keep_one_target(record, data.holds_tokens(meta))
    spec, shape = specs.model_spec(experiment["model"], meta["classes"]), tuple(meta["shape"])
    record["flops_per_image"] = specs.flops_per_image(spec, shape)
    sampler.mark("build")
    model = run.build(spec, shape)
    record["parameters"] = adapter.parameter_count(model)
    run.check_parameters(record["parameters"], spec, shape)
    record["engaged"].update(adapter.engaged(model))
    timeline.mark("build")
    log(f"built {experiment['model']}: {record['parameters']} parameters, {record['flops_per_image']} FLOPs/image")

    for epoch in range(experiment["epochs"]):
        order = shuffles.order_of(epoch)
        sampler.mark(f"epoch {epoch + 1}")
        loss, train_s = run.timed(adapter.train_epoch, model, staged, order, batch_size)
        timeline.mark("steady_epochs" if epoch else "first_epoch")
        sampler.mark(f"eval {epoch + 1}")
        (test_loss, accuracy), eval_s = run.timed(adapter.evaluate, model, staged, eval_batch_size)
        timeline.mark("evaluation" if epoch else "first_evaluation")
        loss, test_loss = recorded_loss(loss), recorded_loss(test_loss)
        figures = (epoch + 1, train_s, eval_s, loss, test_loss, accuracy, len(order))
        row = add_epoch(record, epoch_rows, figures)
        log(
            f"epoch {epoch + 1}/{experiment['epochs']}: train {train_s:.3f}s ({row['images_per_s']:.0f} img/s) "
            f"loss {loss:.4f} | eval {eval_s:.3f}s test loss {test_loss:.4f} accuracy {accuracy:.4f}"
        )
        check_finite(loss, test_loss, epoch + 1, experiment["learning_rate"])  # the epoch stays in the record

    images = record["images_per_epoch"] = len(order)
    phases["first_epoch"], phases["steady_epochs"] = record["epoch_train_s"][0], sum(record["epoch_train_s"][1:])
    record["first_epoch_images_per_s"] = images / phases["first_epoch"]
    epochs_s, extra = record["epoch_train_s"], record["extra_steady_epochs_s"]
    window, section = steady_window.measure(
        run, model, staged, shuffles, batch_size, epochs_s, extra, images, sampler, log
    )
    record.update(section)
    timeline.mark("steady_extra")
    steady_eval = record["epoch_eval_s"][1:] or record["epoch_eval_s"]
    record["inference_images_per_s"] = meta["test_size"] / statistics.median(steady_eval)
    if data.holds_tokens(meta):  # its examples are sequences of `context` tokens
        sequences_per_s, record["tokens_per_example"] = record["train_images_per_s"], shape[0]
        record["train_tokens_per_s"] = sequences_per_s * shape[0] if sequences_per_s else None
    record["final_test_loss"], record["final_test_accuracy"] = test_loss, accuracy
    record["allocator_peak_mb"] = adapter.allocator_peak_mb(device)
    record["engaged"].update(adapter.engaged(model))  # read back after training: compiled graphs, XLA, breaks
    log(f"engaged: {record['engaged']}")
    replicas, gpu = parallel.replicas(experiment), record["provenance"]["gpu"]
    throughput, engaged = record["train_images_per_s"], record["engaged"]
    record.update(peaks.utilisation(record["flops_per_image"], throughput, engaged, device, gpu, replicas))
    trained = measure.Trained(run, model, staged, shuffles, batch_size, window, throughput, sampler, log)
    measure.after_training(trained, record)
    timeline.mark("after_training")
    record["status"] = "ok"


def main():
    timeline = walltime.Timeline.of_this_process()
    timeline.mark("process_start")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", required=True, help="the experiment row as JSON")
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--env-description", required=True)
    parser.add_argument("--threads", type=thread_count, required=True, help="a number, 'all' or 'framework'")
    parser.add_argument("--record", required=True)
    parser.add_argument("--epochs-csv", required=True)
    parser.add_argument("--telemetry-csv", required=True)
    args = parser.parse_args()
    experiment = json.loads(args.experiment)
    env_description = json.loads(Path(args.env_description).read_text())
    # One process per replica (torchrun) or per node: each trains and writes its own outputs; rank 0's are the run's.
    rank, processes = parallel.process_rank(), parallel.process_count()
    threads = parallel.threads_per_process(args.threads, parallel.local_process_count())
    record = base_record(experiment, env_description, Path(__file__).resolve().parents[1])
    record["provenance"]["threads"] = thread_policy(threads)
    epoch_rows = []
    prepare_process(experiment["environment"], threads, experiment["math_mode"])
    replica = f" (replica process {rank} of {processes})" if processes > 1 else ""
    log(f"experiment {experiment['experiment_id']} rep {experiment['rep']}{replica}")
    sampler, adapter = start_telemetry(experiment, record), None
    timeline.mark("setup")
    try:
        sampler.mark("imports")
        start = time.perf_counter()
        adapter = load(experiment["adapter"])
        record["phases_s"]["imports"] = time.perf_counter() - start
        timeline.mark("imports")
        train(adapter, experiment, args.dataset_dir, threads, record, epoch_rows, sampler, timeline)
    except Diverged as error:  # a result, not a fault: no traceback
        timeline.mark("failed")
        record["status"], record["error"] = "diverged", str(error)
        log(f"DIVERGED: {record['error']}")
    except Exception as error:  # a failed run is a result: record it, let the workflow go on
        timeline.mark("failed")
        traceback.print_exc()
        out_of_memory = isinstance(error, MemoryError) or (adapter is not None and adapter.is_oom(error))
        record["status"] = "oom" if out_of_memory else "error"
        record["error"] = f"{type(error).__name__}: {error}"
        log(f"{'OUT OF MEMORY' if out_of_memory else 'FAILED'}{replica}: {record['error']}")
    record_telemetry(sampler, record, epoch_rows, parallel.rank_output(args.telemetry_csv, rank))
    timeline.mark("telemetry")
    record["host_rss_peak_mb"] = peak_rss_mb()
    record["provenance"]["finished_at"] = utc_now()
    write_epochs_csv(parallel.rank_output(args.epochs_csv, rank), epoch_rows)
    record["wall_s"] = timeline.parts  # to here: the record's writing and the exit are the wrapper's to see
    write_json_atomic(parallel.rank_output(args.record, rank), record)
    log(f"status {record['status']}: record written to {parallel.rank_output(args.record, rank)}")
    sys.stdout.flush()
    sys.stderr.flush()
    if processes == 1 and not multiprocessing.active_children():
        # The record is written and nothing is left to measure: the framework's own teardown (its thread pools, XLA
        # clients, exit handlers: up to a second) would only hold the wrapper, which waits for this process's end.
        # Not with child processes (a streamed run's loader workers): the exit handlers stop them, and left running
        # they would hold the wrapper's pipe.
        os._exit(0)
    if processes > 1 and record["status"] != "ok":
        # Leave at once, exit code 1, so that torchrun (or srun --kill-on-bad-exit) stops the other processes now, not
        # at their collectives' timeout: no exit handlers, one of which (jax.distributed's shutdown barrier) would
        # wait for the others, which wait for this one.
        os._exit(1)


if __name__ == "__main__":
    run_main(main)
