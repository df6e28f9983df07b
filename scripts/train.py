"""One training run (one experiment, one repeat) in a fresh process, inside its stack's environment.

Phases are timed separately with the device synchronised around every clock read (dlbench/clock.py):
imports, data loading (host) and staging (device; streamed data: the index read and the loaders made), build
(model, optimiser, hybridize/trace setup), the first epoch (includes lazy compilation), steady epochs (2..N).
Evaluation is timed outside training; so are, after it, the input-share epochs and, for streamed data, the loader
alone. Any exception still produces a record with status 'error'; a loss that becomes NaN or infinite ends the run
with status 'diverged', naming the epoch. Called by run_experiment.py.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

from dlbench import data, parallel, peaks, specs
from dlbench.adapters import STREAM_INPUT_WORK, load
from dlbench.cli import run_main
from dlbench.io import write_json_atomic
from dlbench.process import prepare_process, thread_count, thread_policy
from dlbench.record import (
    EPOCH_COLUMNS,
    NO_GPU_REASON,
    base_record,
    cuda_libraries,
    dotted_cuda_versions,
    peak_rss_mb,
    utc_now,
    write_epochs_csv,
)
from dlbench.rapl import rapl_meter
from dlbench.run import Run
from dlbench.telemetry import (
    IDLE_PHASE,
    Sampler,
    cpu_meter,
    device_summaries,
    gpu_provenance,
    load_nvml,
    sampler_contention,
    summarise,
    visible_gpus,
)

SCRIPTS = Path(__file__).resolve().parent

# The GPU's idle draw is sampled this long before the imports: several of NVML's power updates, little wait.
IDLE_BASELINE_S = 2.0


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def steady_throughput(images_per_epoch, epoch_seconds):
    """Images/s over epochs 2..N (None with a single epoch: the first epoch carries compilation)."""
    steady = epoch_seconds[1:]
    return images_per_epoch * len(steady) / sum(steady) if steady else None


def start_telemetry(experiment, record, idle_seconds=IDLE_BASELINE_S):
    """The sampler for this run; on a GPU job the CUDA and cuDNN versions and, with NVML, the GPU's name, driver,
    power limit, clocks and modes go into the provenance, and the sampler first traces `idle_seconds` of the idle
    GPU (phase IDLE_PHASE), the baseline of the energy above idle."""
    nvml, reason = load_nvml() if experiment["device"] == "gpu" else (None, NO_GPU_REASON)
    gpus = parallel.sampled_gpus(experiment)
    if nvml and not gpus:
        nvml, reason = None, "under torchrun each node's process of local rank 0 samples the node's GPUs"
    record["gpu_fields_reason"] = reason
    if experiment["device"] == "gpu":
        cuda, cudnn = cuda_libraries()
        record["provenance"].update(cuda=cuda, cudnn=cudnn)
    if nvml:
        handle = visible_gpus(nvml, 1)[0][1]  # the first replica's
        record["provenance"].update(
            gpu=str(nvml.nvmlDeviceGetName(handle)),
            gpu_driver=str(nvml.nvmlSystemGetDriverVersion()),
            **gpu_provenance(nvml, handle),
        )
    meter, unreadable = cpu_meter()
    rapl, rapl_unreadable = rapl_meter()
    sampler = Sampler(
        experiment["telemetry_hz"],
        nvml,
        gpus=gpus,
        meter=meter,
        meter_unavailable=unreadable,
        rapl=rapl,
        rapl_unavailable=rapl_unreadable,
    ).start()
    if nvml:
        sampler.mark(IDLE_PHASE)
        time.sleep(idle_seconds)
    return sampler


def timed_phases(rows):
    """Every phase from the first training epoch on: the window whose figures the record reports."""
    phases = [row["phase"] for row in rows]
    return set(phases[phases.index("epoch 1") :]) if "epoch 1" in phases else set()


def record_telemetry(sampler, record, epoch_rows, trace_path):
    """Stop sampling, write the trace and put its summaries (steady epochs; energy of all epochs; contention over
    the timed phases, GPU processes and throttling included) in the record."""
    sampler.stop()
    sampler.write_trace(trace_path)
    steady = {f"epoch {row['epoch']}" for row in epoch_rows[1:]}
    # The images the sampled GPUs trained: across nodes, the first node's share.
    share = len(sampler.gpu.labels) / parallel.replicas(record) if sampler.gpu else 1
    images = share * sum(row["images"] for row in epoch_rows)
    record.update(summarise(sampler.rows, steady, steady | {"epoch 1"}, images), **sampler.cpu_energy_origin())
    if sampler.gpu:
        record["gpu_devices"] = device_summaries(sampler.rows, sampler.gpu.labels, steady, steady | {"epoch 1"})
    record["contention"] = sampler_contention(sampler, timed_phases(sampler.rows))


def import_adapter(experiment, record, sampler):
    sampler.mark("imports")
    start = time.perf_counter()
    adapter = load(experiment["adapter"])
    record["phases_s"]["imports"] = time.perf_counter() - start
    return adapter


def train(adapter, experiment, dataset_dir, threads, record, epoch_rows, sampler):
    """Run the experiment, filling record and epoch_rows as it goes (so a failure keeps what was measured)."""
    run, phases = Run(adapter, experiment, record["phases_s"]), record["phases_s"]
    record["framework_version"] = adapter.version()
    if experiment["device"] == "gpu":  # what the framework itself reports wins over the env's wheels
        reported = dotted_cuda_versions(*adapter.cuda_versions())
        for key, version in zip(("cuda", "cudnn"), reported):
            record["provenance"][key] = version or record["provenance"][key]
    device, batch_size = experiment["device"], parallel.global_batch_size(experiment)
    # Evaluation runs one replica's batches: on one device (DDP, tf.nn, Gluon), or split over them (Keras' predict).
    eval_batch_size = parallel.replica_batch_size(experiment)
    record["engaged"].update(run.configure(threads))
    log(f"{experiment['framework']} {record['framework_version']} on {device}: {record['engaged']}")
    data.verify(dataset_dir)  # before the clock: hashing is not loading
    sampler.mark("data")
    opened = open_stream if experiment["data_placement"] == "stream" else open_arrays
    staged, meta, order_of = opened(run, dataset_dir, record)
    shape, classes = tuple(meta["shape"]), meta["classes"]
    record["dataset_description"] = {
        "train_images": meta["train_size"],
        "test_images": meta["test_size"],
        "classes": classes,
        "image_shape": list(shape),
    }
    spec = specs.model_spec(experiment["model"], classes)
    record["flops_per_image"] = specs.flops_per_image(spec, shape)
    sampler.mark("build")
    model = run.build(spec, shape)
    record["parameters"] = adapter.parameter_count(model)
    expected = specs.parameter_count(spec, shape)
    if record["parameters"] != expected:
        raise RuntimeError(f"{experiment['adapter']} built {record['parameters']} parameters, the spec has {expected}")
    record["engaged"].update(adapter.engaged(model))
    log(f"built {experiment['model']}: {record['parameters']} parameters, {record['flops_per_image']} FLOPs/image")

    trained_seconds = 0.0
    for epoch in range(experiment["epochs"]):
        order = order_of(epoch)
        sampler.mark(f"epoch {epoch + 1}")
        loss, train_s = run.timed(adapter.train_epoch, model, staged, order, batch_size)
        sampler.mark(f"eval {epoch + 1}")
        (test_loss, accuracy), eval_s = run.timed(adapter.evaluate, model, staged, eval_batch_size)
        loss, test_loss = recorded_loss(loss), recorded_loss(test_loss)
        trained_seconds += train_s
        record["epoch_train_s"].append(train_s)
        record["epoch_eval_s"].append(eval_s)
        record["loss_curve"].append(loss)
        row = dict(zip(EPOCH_COLUMNS, (epoch + 1, train_s, eval_s, loss, test_loss, accuracy, len(order))))
        row["images_per_s"] = len(order) / train_s
        epoch_rows.append(row)
        log(
            f"epoch {epoch + 1}/{experiment['epochs']}: train {train_s:.3f}s ({row['images_per_s']:.0f} img/s) "
            f"loss {loss:.4f} | eval {eval_s:.3f}s test loss {test_loss:.4f} accuracy {accuracy:.4f}"
        )
        check_finite(loss, test_loss, epoch + 1, experiment["learning_rate"])  # the epoch stays in the record
        target = experiment.get("target_accuracy")
        if target is not None and record["time_to_target_s"] is None and accuracy >= target:
            record["time_to_target_s"] = trained_seconds

    images = record["images_per_epoch"] = len(order)
    phases["first_epoch"] = record["epoch_train_s"][0]
    phases["steady_epochs"] = sum(record["epoch_train_s"][1:])
    record["first_epoch_images_per_s"] = images / record["epoch_train_s"][0]
    window = steady_window(run, model, staged, order_of, record, sampler)
    record["train_images_per_s"] = steady_throughput(images, [phases["first_epoch"], *window])
    if record["train_images_per_s"]:
        record["replica_images_per_s"] = record["train_images_per_s"] / parallel.replicas(experiment)
    steady_eval = record["epoch_eval_s"][1:] or record["epoch_eval_s"]
    record["inference_images_per_s"] = meta["test_size"] / statistics.median(steady_eval)
    record["final_test_loss"], record["final_test_accuracy"] = test_loss, accuracy
    record["allocator_peak_mb"] = adapter.allocator_peak_mb(device)
    record["engaged"].update(adapter.engaged(model))  # read back after training: compiled graphs, XLA, breaks
    log(f"engaged: {record['engaged']}")
    record.update(
        peaks.utilisation(
            record["flops_per_image"],
            record["train_images_per_s"],
            record["engaged"],
            device,
            record["provenance"]["gpu"],
            parallel.replicas(experiment),
        )
    )
    if experiment["measure_input_share"] and window:
        measure_input_share(run, model, staged, order_of, window, record, sampler)
    if experiment["data_placement"] == "stream":
        measure_loader(run, staged, order_of, record, sampler)
    if parallel.replicas(experiment) > 1:  # last: without the reduction each replica's weights become its own
        measure_communication_share(run, model, staged, order, max(len(window), 3), record, sampler)
    record["status"] = "ok"


# A cross-entropy is never below 0, but a framework's float32 log-softmax can overshoot 0 at a sample predicted with
# certainty: MXNet's oneDNN kernel returns log-probability 1.43e-6 there instead of 0 (its logarithm's approximation
# error near 1), so the loss of a well-trained model averages slightly below 0. A mean loss this little below 0 is that
# rounding and is recorded as 0; one further below is no rounding and is recorded as the framework computed it.
LOSS_ROUNDING = 1e-5


def recorded_loss(value):
    """An epoch's mean loss as the record keeps it: 0 for the rounding below 0 (LOSS_ROUNDING), else as measured."""
    value = float(value)
    return 0.0 if -LOSS_ROUNDING <= value < 0 else value


class Diverged(Exception):
    """The loss became NaN or infinite: the run ends with status `diverged`, keeping the epochs that finished."""


def check_finite(train_loss, test_loss, epoch, learning_rate):
    """Raise Diverged where an epoch's training or test loss (each read on the host once per epoch) is not finite."""
    for name, value in (("training loss", train_loss), ("test loss", test_loss)):
        if not math.isfinite(float(value)):
            raise Diverged(
                f"{name} became {float(value)} in epoch {epoch} (learning rate {learning_rate:g}): the run "
                f"diverged; lower the learning rate"
            )


def open_arrays(run, dataset_dir, record):
    """(staged, meta, order_of) of a prepared dataset: its arrays loaded (data_loading) and placed where the
    experiment's data placement puts them (data_staging); order_of(epoch) is the epoch's example indices."""
    experiment = run.experiment
    arrays, meta = run.load(dataset_dir)
    staged = run.stage(arrays)

    def order_of(epoch):
        cap = experiment.get("images_per_epoch")
        return data.epoch_order(
            meta["train_size"], parallel.global_batch_size(experiment), experiment["seed"], epoch, cap
        )

    return staged, meta, order_of


def open_stream(run, dataset_dir, record):
    """(staged, meta, order_of) of a streamed image folder: the index read (data_loading) and the framework's
    loaders made, their workers started where they start at once (data_staging); order_of(epoch) is the epoch's
    items, each with its crop box and flip."""
    adapter, experiment = run.adapter, run.experiment
    meta = run.phase("data_loading", data.read_meta, dataset_dir)
    workers = experiment["stream"]["workers"] or parallel.schedulable_cpus()
    staged = run.stream(meta, workers)
    sizes = data.stream_files(meta, "train")[2]
    record["stream"] = {
        "workers": workers,
        "loader": adapter.LOADER,
        "root": meta["root"],
        "train_images": meta["train_size"],
        "val_images": meta["test_size"],
        "skipped_images": len(meta["skipped"]),
        "skipped": meta["skipped"][:SKIPPED_LISTED],
    }
    log(
        f"streaming {meta['root']}: {meta['train_size']} train / {meta['test_size']} val images through "
        f"{adapter.LOADER}, {workers} workers ({len(meta['skipped'])} files skipped at indexing)"
    )

    def order_of(epoch):
        cap = experiment.get("images_per_epoch")
        return data.stream_order(sizes, parallel.global_batch_size(experiment), experiment["seed"], epoch, cap)

    return staged, meta, order_of


SKIPPED_LISTED = 20  # the record lists this many skipped files (all of them are in the index's meta.json)


def measure_loader(run, staged, order_of, record, sampler):
    """The loader alone: `stream.loader_batches` batches of a fresh shuffle decoded, augmented and placed on the
    device with the model removed, after training; and the input-bound share, training images/s over the
    loader's (1: training runs as fast as its loader can feed it)."""
    experiment = run.experiment
    batch_size = parallel.global_batch_size(experiment)
    order = order_of(unread_shuffle(experiment, record))[: experiment["stream"]["loader_batches"] * batch_size]
    sampler.mark("loader alone")
    seconds = run.timed(run.adapter.loader_pass, staged, order, batch_size)[1]
    record["loader_images_per_s"] = len(order) / seconds
    if record["train_images_per_s"]:
        record["input_bound_share"] = record["train_images_per_s"] / record["loader_images_per_s"]
    log(
        f"loader alone: {len(order)} images in {seconds:.3f}s, {record['loader_images_per_s']:.0f} img/s; "
        f"training ran at {record['input_bound_share'] or 0:.1%} of it"
    )


def unread_shuffle(experiment, record):
    """The epoch whose shuffle no pass after training has read yet: past the training epochs, the extra steady
    epochs and the input share's real epochs (a loader timed on images just read would find them in the page cache)."""
    return experiment["epochs"] + len(record["extra_steady_epochs_s"]) + len(record["input_share_epochs_s"])


def steady_window(run, model, staged, order_of, record, sampler):
    """The steady epochs' times: epochs 2..N, then, while they last less than min_steady_seconds together, more
    passes over the training set (fresh shuffles, no evaluation: after the last one, so no reported accuracy
    changes). Short epochs timed alone are noise; throughput is taken over the whole window."""
    experiment = run.experiment
    window, batch_size = list(record["epoch_train_s"][1:]), parallel.global_batch_size(experiment)
    while window and sum(window) < experiment["min_steady_seconds"]:
        sampler.mark(f"extra steady epoch {len(record['extra_steady_epochs_s']) + 1}")
        order = order_of(unread_shuffle(experiment, record))
        record["extra_steady_epochs_s"].append(run.timed(run.adapter.train_epoch, model, staged, order, batch_size)[1])
        window.append(record["extra_steady_epochs_s"][-1])
    record["steady_window_s"] = sum(window) if window else None
    if record["extra_steady_epochs_s"]:
        log(
            f"steady window {sum(window):.3f}s: {len(record['extra_steady_epochs_s'])} extra steady epochs after the "
            f"last evaluation (epochs 2..{experiment['epochs']} lasted {sum(window[: experiment['epochs'] - 1]):.3f}s, "
            f"less than min_steady_seconds {experiment['min_steady_seconds']})"
        )
    return window


def removed_share(without_seconds, with_seconds):
    """(share, [low, high]): the share of the work of epochs timed `with_seconds` that epochs timed `without_seconds`
    leave out, 1 - median without / median with, and the range of that ratio over the pairs the two were timed in
    (each pair's epochs next to each other, their order alternating), so the noise of single epochs is stated beside
    it and the machine's drift between far-apart epochs is not (a share below zero that the range does not exclude
    from zero is noise, not work). The share always lies in the range: each side's median is bounded by the pairs'."""
    share = 1 - statistics.median(without_seconds) / statistics.median(with_seconds)
    ratios = [1 - without / with_ for without, with_ in zip(without_seconds, with_seconds, strict=True)]
    return share, [min(ratios), max(ratios)]


def timed_in_pairs(run, sampler, pair, rounds, label=""):
    """{kind: [seconds]} of `rounds` pairs of epochs, `pair` being ((kind, work(round index)), (kind, work)): each
    pair's order alternating, so that the machine's drift falls on both kinds alike (removed_share's pairs)."""
    timed = {kind: [] for kind, _ in pair}
    for index in range(rounds):
        for kind, work in pair if index % 2 == 0 else reversed(pair):
            sampler.mark(f"{label}{kind} epoch {index + 1}")
            timed[kind].append(run.timed(work, index)[1])
    return timed


def measure_input_share(run, model, staged, order_of, steady, record, sampler):
    """The share of a steady epoch spent on input work that compute does not hide, from pairs of epochs: a real one
    (a fresh shuffle, gathered and placed as in training) and one of as many steps on one batch assembled and placed
    before the clock starts (after one untimed step, which traces the step for that batch where a framework needs
    to). Each pair's order alternates, so that drift falls on both sides alike: a GPU's clocks ramp up over the first
    seconds of work and settle down under its power cap, by several percent on an H200, more than the input work
    of a device-staged run. As many epochs in all as the steady window holds, at least two pairs. Run after the last
    evaluation, so the updates they make change no reported result."""
    batch_size, first = parallel.global_batch_size(run.experiment), unread_shuffle(run.experiment, record)
    order = order_of(first)
    fixed_steps = len(order) // batch_size
    steps = run.adapter.fixed_batch_steps(model, staged, order, batch_size)
    sampler.mark("fixed-batch warm-up")
    run.timed(steps, 1)
    pair = (
        ("real", lambda index: run.adapter.train_epoch(model, staged, order_of(first + index), batch_size)),
        ("fixed", lambda index: steps(fixed_steps)),
    )
    timed = timed_in_pairs(run, sampler, pair, max(2, math.ceil(len(steady) / 2)), "input-share ")
    share, interval = removed_share(timed["fixed"], timed["real"])
    removed = STREAM_INPUT_WORK if staged.get("stream") else run.adapter.INPUT_WORK
    record.update(
        input_share_epochs_s=timed["real"],
        fixed_batch_epochs_s=timed["fixed"],
        fixed_batch_epoch_s=statistics.median(timed["fixed"]),
        input_share=share,
        input_share_interval=interval,
        input_share_covers=removed,
    )
    log(
        f"input share {share:.1%} [{interval[0]:.1%}, {interval[1]:.1%}]: fixed-batch epochs {timed['fixed']} s vs "
        f"real epochs {timed['real']} s, alternating (removed: {removed})"
    )


def measure_communication_share(run, model, staged, order, rounds, record, sampler):
    """With replicas, where the framework can leave out the gradients' reduction (adapter.unreduced_steps): the share
    of a step spent communicating that compute does not hide, from `rounds` pairs of epochs of fixed-batch steps, one
    with the reduction and one without, alternating so that drift falls on both alike (after one untimed call of
    each, which traces or compiles it where a framework needs to)."""
    batch_size = parallel.global_batch_size(run.experiment)
    unreduced = run.adapter.unreduced_steps(model, staged, order, batch_size)
    if unreduced is None:
        return
    reduced, steps = run.adapter.fixed_batch_steps(model, staged, order, batch_size), len(order) // batch_size
    sampler.mark("communication warm-up")
    run.timed(reduced, 1)
    run.timed(unreduced, 1)
    pair = (("reduced", lambda index: reduced(steps)), ("unreduced", lambda index: unreduced(steps)))
    timed = timed_in_pairs(run, sampler, pair, rounds)
    share, interval = removed_share(timed["unreduced"], timed["reduced"])
    record.update(communication_share=share, communication_share_interval=interval, communication_epochs_s=timed)
    log(f"communication share {share:.1%} [{interval[0]:.1%}, {interval[1]:.1%}]: fixed-batch epochs {timed} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", required=True, help="the experiment row as JSON")
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--env-description", required=True)
    parser.add_argument("--threads", type=thread_count, required=True, help="a number, or 'framework'")
    parser.add_argument("--record", required=True)
    parser.add_argument("--epochs-csv", required=True)
    parser.add_argument("--telemetry-csv", required=True)
    args = parser.parse_args()
    experiment = json.loads(args.experiment)
    env_description = json.loads(Path(args.env_description).read_text())
    # One process per replica (torchrun) or per node: each trains and writes its own outputs; rank 0's are the run's.
    rank, processes = parallel.process_rank(), parallel.process_count()
    threads = parallel.threads_per_process(args.threads, parallel.local_process_count())
    record = base_record(experiment, env_description, SCRIPTS.parent)
    record["provenance"]["threads"] = thread_policy(threads)
    epoch_rows = []
    prepare_process(experiment["environment"], threads, experiment["math_mode"])
    replica = f" (replica process {rank} of {processes})" if processes > 1 else ""
    log(f"experiment {experiment['experiment_id']} rep {experiment['rep']}{replica}")
    sampler, adapter = start_telemetry(experiment, record), None
    try:
        adapter = import_adapter(experiment, record, sampler)
        train(adapter, experiment, args.dataset_dir, threads, record, epoch_rows, sampler)
    except Diverged as error:  # a result, not a fault: no traceback
        record["status"], record["error"] = "diverged", str(error)
        log(f"DIVERGED: {record['error']}")
    except Exception as error:  # a failed run is a result: record it, let the workflow go on
        traceback.print_exc()
        out_of_memory = isinstance(error, MemoryError) or (adapter is not None and adapter.is_oom(error))
        record["status"] = "oom" if out_of_memory else "error"
        record["error"] = f"{type(error).__name__}: {error}"
        log(f"{'OUT OF MEMORY' if out_of_memory else 'FAILED'}{replica}: {record['error']}")
    record_telemetry(sampler, record, epoch_rows, parallel.rank_output(args.telemetry_csv, rank))
    record["host_rss_peak_mb"] = peak_rss_mb()
    record["provenance"]["finished_at"] = utc_now()
    write_epochs_csv(parallel.rank_output(args.epochs_csv, rank), epoch_rows)
    write_json_atomic(parallel.rank_output(args.record, rank), record)
    log(f"status {record['status']}: record written to {parallel.rank_output(args.record, rank)}")
    if processes > 1 and record["status"] != "ok":
        # Leave at once, exit code 1, so that torchrun (or srun --kill-on-bad-exit) stops the other processes now, not
        # at their collectives' timeout: no exit handlers, one of which (jax.distributed's shutdown barrier) would
        # wait for the others, which wait for this one.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    run_main(main)
