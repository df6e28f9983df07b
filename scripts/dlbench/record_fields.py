"""The run record's fields, typed, grouped in sections: each field's type, unit, default and meaning in one place.

record.json is flat: every section's fields sit at its top level, and `contention`, `dataset_description`, `stream`,
`gpu_devices` and `provenance` hold objects of the classes below. workflow/schemas/run_record.schema.yaml and
docs/run-record.md are generated from these classes (dlbench/study/record_docs.py), and a unit test keeps them equal; a
new field is added here, with its unit and meaning, and nowhere else by hand.

Standard library only: the runner writes the record of a process that died before writing its own.
"""

import dataclasses
import functools
import types
import typing
from typing import Literal

from . import walltime

SCHEMA_VERSION = 11
NO_TELEMETRY = "the run ended before telemetry started"
Seconds = float  # every time is in seconds: the unit column says so once per field


RUN_TABLES = ("epochs.csv", "telemetry.csv")  # beside each record, written before it (run_experiment.py)

# How the summary table (dlbench/study/analysis/summary.py) takes a field over an experiment's ok repeats, as
# docs/run-record.md's summary.csv column prints it: `interval`, the geometric mean with its 95 % interval beside the
# mean, std, coefficient of variation, min and median; `mean`, the mean alone; `reached`, the mean with its Student t
# interval over the repeats that have the figure (a time to target: those that reached it), and their count. A field
# without one is not summarised.
SUMMARIES = {"interval": "gmean [95 %]", "mean": "mean", "reached": "mean [95 %] where reached"}


def entry(description, unit=None, default=None, factory=None, required=True, schema=None, summary=None, **keywords):
    """A record field: its meaning, its unit, its default in a record not yet measured (`factory` for a list or
    dict), whether a valid record may lack it (only fields older records lack), how the summary table takes it over
    repeats (a key of SUMMARIES), and JSON Schema keywords beyond what its type gives, its bounds among them, which
    reading a record checks (dlbench/record_check.py; `schema` replaces the schema its type gives)."""
    assert summary in (None, *SUMMARIES), summary
    metadata = {
        "description": description,
        "unit": unit,
        "required": required,
        "schema": schema,
        "keywords": keywords,
        "summary": summary,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def at_least(minimum, description, unit=None, **keywords):
    """A number that is never below `minimum` (or null: not measured)."""
    return entry(description, unit, minimum=minimum, **keywords)


def times(description, **keywords):
    """A list of durations in seconds, empty where none were timed."""
    return entry(description, "s", factory=list, items={"minimum": 0}, **keywords)


# --- objects held in a field ---------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class Contention:
    """What else used the machine over the run's timed window."""

    OPEN = True  # records may carry more keys than these

    window_s: float | None = at_least(0, "the timed window: every phase from the first epoch on", "s")
    window_started_at: str | None = entry("the window's start (UTC)", format="date-time")
    window_finished_at: str | None = entry("the window's end (UTC)", format="date-time")
    foreign_cpu_cores: float | None = at_least(
        0, "mean CPU cores busy outside the job's process tree over the window (1.0: one core all along)", "cores"
    )
    foreign_cpu_peak_cores: float | None = at_least(0, "the highest telemetry interval's figure", "cores")
    launcher_cpu_cores: float | None = at_least(
        0,
        "CPU cores used by the processes that launched the job (its shell, Snakemake): not foreign; absent in older"
        " records",
        "cores",
        required=False,
    )
    steal_share: float | None = entry("share of all CPU time stolen by the hypervisor", "share", minimum=0, maximum=1)
    foreign_gpu_processes: list[dict] | None = entry(
        "other processes seen on the job's GPU: pid, name, GPU memory (MiB); null on CPU jobs"
    )
    throttle_reasons: list[str] | None = entry("the GPU's clock-throttle reasons over the window; null on CPU jobs")
    unavailable: dict[str, str] = entry("per part (cpu, gpu), why it could not be measured", factory=dict)
    reasons: list[str] = entry("why the run is contended; empty: clean", factory=list, required=False)


@dataclasses.dataclass(kw_only=True)
class DatasetDescription:
    """The prepared dataset the run trained on, as it was read."""

    train_images: int = entry("images in the training split", minimum=1)
    test_images: int = entry("the evaluation split (streamed data: the validation folder)", minimum=1)
    classes: int = entry("classes", minimum=1)
    image_shape: list[int] = entry("height, width, channels", items={"minimum": 1})


@dataclasses.dataclass(kw_only=True)
class SkippedFile:
    """A file left out at indexing, with the reason."""

    OPEN = True

    path: str = entry("the file")
    reason: str = entry("why it was left out")


@dataclasses.dataclass(kw_only=True)
class Stream:
    """Streamed data (placement stream) as it was read."""

    workers: int = entry("loader worker processes (tf.data: parallel calls)", minimum=1)
    loader: str = entry("the framework's loader, in words")
    root: str = entry("the image folder")
    train_images: int = entry("training images found", minimum=0)
    val_images: int = entry("validation images found", minimum=0)
    skipped_images: int = entry("files left out at indexing (not JPEG, undecodable)", minimum=0)
    skipped: list[SkippedFile] = entry("the first of them, with the reason (all are in the index's meta.json)")


@dataclasses.dataclass(kw_only=True)
class GpuDevice:
    """One GPU the run's telemetry sampled."""

    device: str = entry("the GPU as CUDA_VISIBLE_DEVICES names it, else its NVML index")
    utilisation_mean: float | None = at_least(0, "NVML utilisation, mean over steady epochs", "%", maximum=100)
    utilisation_p95: float | None = at_least(
        0, "NVML utilisation, 95th percentile over steady epochs", "%", maximum=100
    )
    memory_peak_mb: float | None = at_least(0, "NVML memory used, peak over the run", "MiB")
    power_mean_w: float | None = at_least(0, "NVML power, mean over the training epochs", "W")
    energy_j: float | None = at_least(0, "energy over the training epochs", "J")


@dataclasses.dataclass(kw_only=True)
class CommunicationEpochs:
    """The alternating fixed-batch epochs of the communication share."""

    OPEN = True

    reduced: list[Seconds] = times("with the gradients' reduction", required=False)
    unreduced: list[Seconds] = times("without it", required=False)


HASH = {"pattern": "^[0-9a-f]{64}$"}


@dataclasses.dataclass(kw_only=True)
class Provenance:
    """Where, with what and when the run ran."""

    host: str = entry("the machine (node) the run ran on")
    slurm_job_id: str | None = entry("the Slurm job the run ran in (profiles/slurm); null outside Slurm")
    cpu_model: str = entry("the CPU's model name")
    cpu_generation: str | None = entry(
        "family, model and stepping (/proc/cpuinfo): the generation where the name does not tell it, as a virtual"
        ' machine\'s "AMD EPYC" does not'
    )
    cpu_cores: int = entry("logical CPUs: twice the physical cores where SMT runs two threads on each")
    cpu_physical_cores: int | None = entry("distinct cores; null where /proc/cpuinfo does not say")
    cpus_usable: int | None = at_least(
        1,
        "the logical CPUs the run's process could run on (its affinity, which taskset, cpusets and Slurm narrow): a"
        " machine's name says it where runs of one CPU model had different counts; null in records older than it",
    )
    memory_mb: int | None = entry("the machine's memory (MemTotal); null without /proc/meminfo", "MiB")
    threads: int | Literal["framework"] | None = entry(
        "the config's `cpu_threads` policy: a count, or `framework` (each framework's default)",
        schema={"oneOf": [{"type": ["integer", "null"]}, {"const": "framework"}]},
    )
    gpu: str | None = entry("the GPU's name (NVML); null on CPU jobs")
    gpu_driver: str | None = entry("the NVIDIA driver (NVML)")
    gpu_power_limit_w: float | None = at_least(0, "the enforced power limit (NVML)", "W")
    gpu_max_sm_clock_mhz: float | None = at_least(0, "the highest SM clock", "MHz")
    gpu_max_memory_clock_mhz: float | None = at_least(0, "the highest memory clock", "MHz")
    gpu_applications_sm_clock_mhz: float | None = at_least(0, "the application SM clock set", "MHz")
    gpu_applications_memory_clock_mhz: float | None = at_least(0, "the application memory clock set", "MHz")
    gpu_ecc: bool | None = entry("ECC memory enabled")
    gpu_mig: bool | None = entry("MIG (Multi-Instance GPU) mode enabled")
    gpu_persistence: bool | None = entry("persistence mode enabled")
    gpu_provenance_unavailable: list[str] = entry(
        '"key: NVML\'s reason" for each of the GPU settings above that NVML does not report on this GPU (all of them'
        " null on CPU jobs and without NVML, where gpu_fields_reason says why)",
        factory=list,
    )
    cuda: str | None = entry(
        "CUDA runtime of a GPU job as the framework reports it (its adapter's cuda_versions), else from the env's"
        " nvidia-cuda-runtime-cuXX wheel (what the CUDA builds of torch, TensorFlow and JAX load) or MXNet's"
        " mxnet-cuXYZ wheel name; null on CPU"
    )
    cudnn: str | None = entry(
        "cuDNN of a GPU job as the framework reports it, else from the env's nvidia-cudnn-cuXX wheel; null for MXNet,"
        " which bundles its own and reports no version"
    )
    cpu_kernels: str | None = entry(
        "the CPU kernel libraries of a CPU job's framework build, as the framework names them (its adapter's"
        ' cpu_kernels: "oneDNN 3.12, BLAS MKL"; XLA\'s own for JAX); null on GPU jobs; absent in older records',
        required=False,
    )
    python: str = entry("the Python version")
    numpy: str | None = entry(
        "NumPy of the run's env (every framework hands arrays through it); absent in older records", required=False
    )
    platform: str = entry("the operating system and machine (Python's platform.platform())")
    env_file: str | None = entry("the env file; null for an existing environment (config existing_envs)")
    env_file_sha256: str | None = entry("sha256 of the env file", **HASH)
    lock_sha256: str | None = entry(
        "sha256 of the lock (envs/<env>.lock.txt) the venv was installed from exactly; null for conda and existing"
        " environments, which have none; absent in older records",
        required=False,
        **HASH,
    )
    env_deployment: Literal["venv", "conda", "existing"] = entry("how the environment was made")
    packages_sha256: str = entry("sha256 of the installed packages' names and versions", **HASH)
    workflow_commit: str | None = entry("the git commit of the workflow; null outside a git checkout")
    experiment_sha256: str = entry("sha256 of exactly the experiment's parameters (its slice of the config)", **HASH)
    started_at: str = entry(
        "when the training process started (UTC, milliseconds): the runs table's overlapping_runs counts the other"
        " runs on the same host that ran at the same time, from these, and must be 0",
        format="date-time",
    )
    finished_at: str | None = entry("when it wrote the record (UTC, milliseconds); null until then", format="date-time")


# --- the record's sections -------------------------------------------------------------------------------------------

PHASES = ("imports", "data_loading", "data_staging", "build", "first_epoch", "steady_epochs")


@dataclasses.dataclass(kw_only=True)
class Identity:
    """What names the run: its experiment's id, its stack and every axis (dlbench/axes.py), the settings its optimiser
    shares, and the repeat with its seed. `global_batch_size` and `replica_batch_size` are the images per step over
    all data-parallel replicas and on each ([scaling.md](scaling.md))."""

    TITLE = "Identity"

    schema_version: int = entry(
        "the version of the record's layout, raised when a field changes meaning or goes",
        default=SCHEMA_VERSION,
        schema={"const": SCHEMA_VERSION},
    )
    experiment_id: str = entry("readable, stable id of the experiment (all axes)")
    stack: str = entry("the stack (envs/stacks.yaml): a framework release, its env and its adapter")
    framework: str = entry("the framework")
    framework_version: str | None = entry("read inside the env at run time; null if the import failed")
    backend: str = entry("the backend the framework ran on (Keras: jax, torch or tensorflow)")
    dataset: str = entry("the dataset")
    model: str = entry("the model (dlbench/specs.py)")
    device: Literal["cpu", "gpu"] = entry("the device it trained on")
    batch_size: int = entry("the config's batch size: per replica (weak scaling) or global", minimum=1)
    replicas: int = entry("data-parallel replicas (devices) the run trained on", minimum=1)
    scaling: Literal["weak", "strong"] = entry("weak: batch_size per replica; strong: batch_size is the global batch")
    global_batch_size: int | None = entry("images per training step over all replicas", minimum=1)
    replica_batch_size: int | None = entry("images per training step on each replica", minimum=1)
    optimizer: Literal["adam", "sgd", "rmsprop"] = entry("the optimiser")
    learning_rate: float = entry("the learning rate", exclusiveMinimum=0)
    momentum: float = entry("SGD's momentum (RMSprop's too)", minimum=0)
    weight_decay: float = entry("coupled L2 weight decay added to the gradients", minimum=0)
    epochs: int = entry("training epochs asked for", minimum=1)
    variant: str = entry(
        "the optimisation: graph mode, compiler, memory layout, mixed precision ([methodology.md](methodology.md))",
        pattern="^(eager|graph|xla|compile(-reduce-overhead|-max-autotune)?)(-nhwc)?(-amp)?$",
    )
    data_placement: Literal["device", "host", "stream"] = entry(
        "device: the dataset is staged once as framework tensors on the training device and each step gathers its"
        " batch there; host: the dataset stays in NumPy and each step gathers its batch on the host and hands it over"
        " (a host-to-device copy on GPU); stream: an image folder read every epoch by the framework's own loader"
    )
    rep: int = entry("the repeat, from 1", minimum=1)
    seed: int = entry("the repeat's seed", minimum=0)


@dataclasses.dataclass(kw_only=True)
class Outcome:
    """How the run ended. A Python exception is recorded by the training process, and so is a loss that is not finite
    after an epoch (`diverged`: the epochs that finished stay in the record, a loss that was not finite as null, since
    records are strict JSON and never hold NaN); a process that dies (native crash, killed) gets its record from
    `scripts/run_experiment.py`, which also judges contention and runs a contended run again. Failed runs appear in
    the tables and as ERROR/OOM cells in the report; the workflow goes on ([troubleshooting.md](troubleshooting.md)).
    `contention` covers the timed window ([contention.md](contention.md))."""

    TITLE = "Outcome"

    status: Literal["ok", "oom", "error", "unavailable", "contended", "diverged"] = entry(
        "contended: the run finished, but something outside its process tree used the machine beyond the config's"
        " `contention` limits during its timed window (`contention.reasons` says what); diverged: the training or test"
        " loss of an epoch was NaN or infinite, training stopped after that epoch and `error` names the epoch and the"
        " learning rate; neither is ever in the statistics",
        default="error",
    )
    error: str | None = entry(
        "exception type and message, how the process died, or which loss was not finite in which epoch (diverged)"
    )
    attempt: int = entry(
        "which try this record is: contended runs are run again (config contention.retries)", default=1, minimum=1
    )
    contended_attempts: list[dict] = entry(
        "the earlier, contended tries of this run, each a whole record of its own (kept, never averaged)", factory=list
    )
    tables_sha256: dict[str, str] = entry(
        "sha256 of the tables the run wrote beside its record (epochs.csv, telemetry.csv): reading the record checks"
        " them, and that the figures derived from the epochs follow from epochs.csv (dlbench/record_check.py);"
        " absent in older records",
        factory=dict,
        required=False,
        propertyNames={"enum": list(RUN_TABLES)},
        additionalProperties=HASH,
    )
    contention: Contention | None = entry(
        "what else used the machine over the run's timed window: CPU time of processes outside the job's process"
        " tree, hypervisor steal, other processes on its GPU and the GPU's clock-throttle reasons; null when the run"
        " ended before the window"
    )


@dataclasses.dataclass(kw_only=True)
class Timing:
    """The clock and its phases ([methodology.md](methodology.md#the-clock-and-its-phases)). The steady window is
    epochs 2..N, lengthened by extra steady epochs to the config's `min_steady_seconds`."""

    TITLE = "Timing"

    phases_s: dict[str, Seconds] = entry(
        "imports, data_loading (host), data_staging (device), build, first_epoch, steady_epochs",
        "s",
        factory=dict,
        propertyNames={"enum": list(PHASES)},
        additionalProperties={"minimum": 0},
    )
    epoch_train_s: list[Seconds] = times("each epoch's training time")
    epoch_eval_s: list[Seconds] = times("each epoch's evaluation time")
    train_images_per_s: float | None = at_least(
        0,
        "over the steady window, all replicas: epochs 2..N and any extra steady epochs; null with one epoch",
        "images/s",
        summary="interval",
    )
    replica_images_per_s: float | None = at_least(0, "train_images_per_s per replica", "images/s")
    first_epoch_images_per_s: float | None = at_least(
        0, "the first epoch's, compilation and warm-up included", "images/s"
    )
    inference_images_per_s: float | None = at_least(
        0, "test images / median evaluation time", "images/s", summary="interval"
    )
    latency_ms_median: float | None = at_least(
        0,
        "inference latency at batch 1: the median of timed calls of one test example, host in, logits back on the"
        " host (dlbench/measure/latency.py); null where not measured (measure_latency, streamed data, replicas)",
        "ms",
        required=False,
        summary="mean",
    )
    latency_ms_p99: float | None = at_least(
        0, "the 99th percentile of those calls", "ms", required=False, summary="mean"
    )
    latency_calls: int | None = at_least(1, "the timed calls of the latency pass", required=False)
    tokens_per_example: int | None = entry(
        "a language model's context, the tokens each training sequence predicts (a token dataset's examples, which the"
        " images/s fields count, are its sequences); null for images",
        minimum=1,
    )
    train_tokens_per_s: float | None = at_least(
        0, "train_images_per_s x tokens_per_example", "tokens/s", summary="interval"
    )
    target_accuracy: float | None = entry(
        "the test accuracy time_to_target_s counts to (config target_accuracy); null for a language model"
    )
    target_loss: float | None = entry(
        "a language model's: the test loss time_to_target_s counts down to (config target_loss); null for images"
    )
    time_to_target_s: float | None = at_least(
        0,
        "training seconds until test accuracy >= target_accuracy (a language model: test loss <= target_loss)",
        "s",
        summary="reached",
    )
    min_steady_seconds: float | None = at_least(0, "the config's shortest steady window", "s")
    extra_steady_epochs_s: list[Seconds] = times(
        "passes over the training set timed after the last evaluation, each like a steady epoch (a fresh shuffle, no"
        " evaluation), added while epochs 2..N together lasted less than min_steady_seconds; empty when they did"
    )
    steady_window_s: float | None = at_least(0, "epochs 2..N plus extra_steady_epochs_s", "s")
    wall_s: dict[str, Seconds] = entry(
        "the run's wall time from its wrapper's start to its final record, in named parts (dlbench/walltime.py's"
        " PARTS: the processes' starts, set-up, each phase, evaluation, the passes after training, telemetry, the"
        " exit, the wrapper's tear-down); empty in older records",
        "s",
        factory=dict,
        required=False,
        propertyNames={"enum": list(walltime.PARTS)},
        additionalProperties={"minimum": 0},
    )


@dataclasses.dataclass(kw_only=True)
class Input:
    """The input pipeline's cost ([methodology.md](methodology.md#data-placement-and-input-share)) and, with streamed
    data, the loader's own speed ([streaming.md](streaming.md))."""

    TITLE = "Input"

    input_share_epochs_s: list[Seconds] = times(
        "the real epochs of the input-share measurement (each a fresh shuffle, like a steady epoch), timed after the"
        " last evaluation alternately with fixed_batch_epochs_s; empty when measure_input_share is off (or `first`, the"
        " default, and this is a later repeat), with one epoch, or where the adapter lacks the InputShare capability"
        " (the run's log says so)"
    )
    fixed_batch_epochs_s: list[Seconds] = times(
        "as many epochs as input_share_epochs_s, alternating with them, each of as many steps as a steady epoch,"
        " every step on one batch assembled and placed before the clock started (after one untimed warm-up step)"
    )
    fixed_batch_epoch_s: float | None = at_least(0, "the median of fixed_batch_epochs_s", "s")
    input_share: float | None = entry(
        "1 - fixed_batch_epoch_s / median of input_share_epochs_s: the share of a steady epoch spent on input work"
        " that compute does not hide (input_share_covers says which work); around 0 (within input_share_interval)"
        " when none shows",
        "share",
        summary="mean",
    )
    input_share_interval: tuple[float, float] | None = entry(
        "[low, high]: 1 - fixed / real over the pairs they were timed in (each pair's two epochs adjacent), the noise"
        " of single epochs beside the share; a share whose interval includes 0 shows no input work beyond noise",
        "share",
    )
    input_share_covers: str | None = entry("the input work the fixed-batch epoch leaves out")
    images_per_epoch: int | None = entry(
        "images each training epoch saw (whole batches; fewer than the training set under images_per_epoch)",
        minimum=1,
    )
    dataset_description: DatasetDescription | None = entry(
        "the prepared dataset the run trained on, as it was read; null where the run ended before reading it"
    )
    stream: Stream | None = entry("streamed data (placement stream) as it was read; null for the other placements")
    loader_images_per_s: float | None = at_least(
        0,
        "the loader alone, after training: the config's `stream.loader_batches` batches of a fresh shuffle decoded, augmented and"
        " placed on the device with the model removed",
        "images/s",
        summary="mean",
    )
    input_bound_share: float | None = at_least(
        0,
        "train_images_per_s / loader_images_per_s: near 1, training runs as fast as its loader can feed it"
        " (input-bound); well below 1, the loader has headroom",
        "share",
        summary="mean",
    )


@dataclasses.dataclass(kw_only=True)
class Communication:
    """With data-parallel replicas, where the framework can leave out the gradients' reduction (PyTorch's DDP
    `no_sync`): the share of a step spent communicating gradients that compute does not hide; with `-syncbn`,
    SyncBatchNorm's all-reduces of the statistics run on both sides, so they are not in it
    ([scaling.md](scaling.md))."""

    TITLE = "Communication"

    communication_share: float | None = entry(
        "1 - median fixed-batch epoch without the reduction / median with it; null with one replica or where the"
        " framework has no step without it",
        "share",
        summary="mean",
    )
    communication_share_interval: tuple[float, float] | None = entry(
        "[low, high]: the same ratio over the pairs they were timed in (each pair's two epochs adjacent)", "share"
    )
    communication_epochs_s: CommunicationEpochs | None = entry(
        "the alternating fixed-batch epochs with (`reduced`) and without (`unreduced`) the reduction, timed in pairs"
        " after the last evaluation, each pair's order alternating",
        "s",
    )


@dataclasses.dataclass(kw_only=True)
class Quality:
    """What the training reached. A cross-entropy is never below 0, but a float32 log-softmax can overshoot 0 at a
    sample predicted with certainty (MXNet's oneDNN kernel by 1.4e-6), so a mean loss less than 1e-5 below 0 is that
    rounding and is recorded as 0; one further below is kept as computed."""

    TITLE = "Quality"

    final_test_accuracy: float | None = entry(
        "test accuracy after the last epoch", "share", minimum=0, maximum=1, summary="mean"
    )
    final_test_loss: float | None = entry("test loss after the last epoch")
    loss_curve: list[float | None] = entry(
        "mean training loss per epoch; null where it was not finite (status diverged: JSON has no NaN)", factory=list
    )


@dataclasses.dataclass(kw_only=True)
class Resources:
    """From a sampler thread in the training process at `telemetry_hz` (default 10 Hz) whose trace, with phase markers
    (imports, data, build, `epoch N`, `eval N`, `fixed-batch warm-up`, `input-share real epoch N`, `input-share fixed
    epoch N`, `loader alone`, `communication warm-up`, `reduced epoch N`, `unreduced epoch N`), is `telemetry.csv`
    beside the record; it also holds SM clock (MHz), temperature (°C) and the foreign load per sampling interval
    (`foreign_cpu_cores`, `steal_pct`). On several GPUs (data-parallel replicas) the trace's GPU columns are the run's
    GPUs together (utilisation their mean; memory, power and energy their sums; the lowest SM clock, the highest
    temperature) and `gpu_devices` lists each GPU's own figures. On a CPU job, or without NVML, every GPU field is
    null and `gpu_fields_reason` says why. An out-of-memory error in any framework ends the run with status `oom`.
    The sampler's own cost is measured by `benchmarks/overhead.py` ([findings.md](findings.md#telemetry-overhead))."""

    TITLE = "Resources"

    host_rss_peak_mb: float | None = at_least(
        0, "`getrusage` peak resident set of the training process", "MiB", summary="mean"
    )
    cpu_utilisation_mean: float | None = at_least(
        0,
        "process CPU time / wall time over steady epochs (with several processes, rank 0's)",
        "% of all cores",
        summary="mean",
    )
    cpu_energy_j: float | None = at_least(
        0,
        "the CPU packages' energy over the training epochs, from their RAPL counters (Linux powercap, package zones"
        " summed, wraparound undone; `scripts/dlbench/rapl.py`): the whole packages, whatever ran on them",
        "J",
        summary="mean",
    )
    cpu_energy_source: str | None = entry("the counters cpu_energy_j comes from (the zones read)")
    cpu_energy_reason: str | None = entry(
        "why there is no CPU energy (no powercap; the counters are readable by root only since Linux 5.10)",
        default=NO_TELEMETRY,
    )
    telemetry_hz: float | None = entry("sampling rate of telemetry.csv beside the record", "Hz")
    gpu_memory_peak_mb: float | None = at_least(
        0,
        "NVML memory used on the run's GPUs (summed over its replicas' devices), peak over the run",
        "MiB",
        summary="mean",
    )
    allocator_peak_mb: float | None = at_least(
        0,
        "the framework allocator's own peak: torch.cuda.max_memory_allocated, TensorFlow's get_memory_info peak"
        " (memory growth on, so that TensorFlow does not take the whole card), JAX's memory_stats peak; null for MXNet, which has none; with replicas, the first"
        " replica's device only",
        "MiB",
        summary="mean",
    )
    gpu_utilisation_mean: float | None = at_least(
        0, "NVML GPU utilisation, mean over steady epochs", "%", maximum=100, summary="mean"
    )
    gpu_utilisation_p95: float | None = at_least(
        0, "NVML GPU utilisation, 95th percentile over steady epochs", "%", maximum=100, summary="mean"
    )
    gpu_memory_utilisation_mean: float | None = at_least(
        0, "NVML memory-controller utilisation, mean over steady epochs", "%", maximum=100
    )
    gpu_power_mean_w: float | None = at_least(
        0,
        "NVML power, mean over the training epochs (summed over the run's GPUs; utilisation is their mean)",
        "W",
        summary="mean",
    )
    gpu_devices: list[GpuDevice] | None = entry(
        "each GPU the run's telemetry sampled (with replicas, every device of the node of replica process 0), in"
        " CUDA's order: its own utilisation over steady epochs, memory peak, power and energy over the training"
        " epochs; null on CPU or without NVML"
    )
    gpu_energy_j: float | None = at_least(
        0, "over the training epochs only: NVML's energy counter, or power integrated (gpu_energy_source)", "J"
    )
    gpu_energy_source: Literal["nvml energy counter", "power integration"] | None = entry(
        "nvml energy counter: NVML's total energy counter (Volta and newer), read at the epochs' ends; power"
        " integration: NVML power integrated (trapezoids) over the telemetry samples, on a GPU without the counter"
    )
    gpu_energy_per_image_j: float | None = at_least(0, "gpu_energy_j per training image", "J", summary="mean")
    gpu_idle_power_w: float | None = at_least(
        0,
        "the GPU's draw over a short idle baseline before the run's imports (phase `idle baseline`)",
        "W",
        summary="mean",
    )
    gpu_energy_above_idle_j: float | None = entry(
        "gpu_energy_j minus gpu_idle_power_w over the training epochs' time, the energy the training added (near 0 or"
        " below within noise for a model too small to load the GPU)",
        "J",
        summary="mean",
    )
    gpu_fields_reason: str | None = entry("why the GPU fields are null", default=NO_TELEMETRY)


@dataclasses.dataclass(kw_only=True)
class Model:
    """The model's size and what its training achieved against the device's peak: train_flops_per_s = 3 x
    flops_per_image x train_images_per_s (a backward pass costs twice the forward; a multiply-add counts 2). Peaks are
    dense datasheet figures by GPU name and precision (`scripts/dlbench/peaks.py`: H100 SXM/PCIe, H200, A100, L4, A10, V100,
    T4); null where none is known (CPU runs, other GPUs), with the reason in `peak_flops_source`."""

    TITLE = "Model and FLOPs utilisation"

    parameters: int | None = entry(
        "trainable parameters, counted in the framework and checked against the spec", minimum=1
    )
    flops_per_image: int | None = entry(
        "forward FLOPs per example (an image, a language model's sequence), from the spec (multiply-add = 2)",
        "FLOP",
        minimum=0,
    )
    train_flops_per_s: float | None = at_least(
        0,
        "achieved in training: 3 x flops_per_image x train_images_per_s (backward = 2 x forward)",
        "FLOP/s",
        summary="mean",
    )
    mfu_precision: Literal["fp32", "tf32", "fp16", "bf16"] | None = entry(
        "the precision the matmuls ran in, from `engaged` (tf32: float32 with TF32 engaged on a GPU)"
    )
    peak_flops_per_s: float | None = at_least(0, "the device's dense peak at mfu_precision", "FLOP/s")
    peak_flops_source: str | None = entry("the datasheet of that peak, or why there is none")
    model_flops_utilisation: float | None = at_least(
        0,
        "train_flops_per_s / peak_flops_per_s (MFU); null without a datasheet peak",
        "share",
        maximum=1,
        summary="mean",
    )


@dataclasses.dataclass(kw_only=True)
class WhatRan:
    """What the framework did, read back after training rather than assumed from the request
    ([methodology.md](methodology.md))."""

    TITLE = "What ran"

    engaged: dict = entry(
        "variant, graph, and per framework xla / xla_compiled (TensorFlow: the train step lowered to an XLA HLO"
        " module), jit_compile and run_eagerly (Keras), cached_graph (MXNet hybridize), torch_compile,"
        " compiled_graphs and graph_breaks (torch.compile), dtype (parameters), matmul_dtype (what matrix products"
        " ran in), layout, loss_scaling, dtype_policy; the math mode as the framework applied it, tf32 (float32"
        " matmuls and convolutions may run in TensorFloat-32) and conv_autotune (convolution algorithms chosen by"
        " timing); thread counts (omp_threads, intra_op_threads, inter_op_threads, xla_threads: 0 is the framework's"
        " default of one per schedulable CPU, counted in schedulable_cpus) and device name; with data-parallel"
        " replicas, replicas and replica_devices (read back), data_parallel (the mechanism), gradient_reduction,"
        " collective and batch_norm_statistics (per replica, or the global batch's); across nodes with one process"
        " per node (Flax), processes",
        factory=dict,
    )


@dataclasses.dataclass(kw_only=True)
class Where:
    """Where, with what and when the run ran: the machine, the environment (its env file, the lock it was installed
    from exactly, [stacks.md](stacks.md#locks), and the packages installed), on GPU jobs the GPU's settings from
    NVML, and the code and request."""

    TITLE = "Provenance"

    provenance: Provenance = entry("the run's provenance")


SECTIONS = (Identity, Outcome, Timing, Input, Communication, Quality, Resources, Model, WhatRan, Where)


def fields(section):
    return dataclasses.fields(section)


def empty(section):
    """A section as a record not yet measured holds it: each field's default."""
    return {
        field.name: field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        for field in fields(section)
    }


def names():
    """Every top-level key of a record, in the sections' order."""
    return [field.name for section in SECTIONS for field in fields(section)]


def summarised(kind, sections=SECTIONS):
    """The top-level fields the summary table takes over repeats as `kind` (a key of SUMMARIES), in order."""
    return [field.name for section in sections for field in fields(section) if field.metadata["summary"] == kind]


# --- JSON Schema from the types ---------------------------------------------------------------------------------------

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def nullable(schema):
    """A schema that also admits null."""
    if "enum" in schema:
        return {**schema, "enum": [*schema["enum"], None]}
    return {**schema, "type": [schema["type"], "null"]}


def type_schema(annotation):
    """The JSON Schema a Python annotation gives: scalars, Literal (an enum), X | None, list[X], tuple[X, X] (an
    array of that length), dict[str, X] and the classes of this module (objects)."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        (present,) = [argument for argument in arguments if argument is not type(None)]
        return nullable(type_schema(present))
    if origin is Literal:
        return {"enum": list(arguments)}
    if origin is list:
        return {"type": "array", "items": type_schema(arguments[0])}
    if origin is tuple:
        return {
            "type": "array",
            "items": type_schema(arguments[0]),
            "minItems": len(arguments),
            "maxItems": len(arguments),
        }
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(arguments[1])}
    if dataclasses.is_dataclass(annotation):
        return object_schema(annotation)
    return {"type": JSON_TYPES[annotation]}


def field_schema(field, hints):
    """One field's schema: its type's (or the one it states), its keywords, its meaning and its unit."""
    metadata = field.metadata
    schema = dict(metadata["schema"] or type_schema(hints[field.name]))
    for keyword, value in metadata["keywords"].items():
        schema[keyword] = {**schema[keyword], **value} if isinstance(schema.get(keyword), dict) else value
    # `unit` and `summary` are annotations, as `description` is: validators pass over keywords they do not know.
    annotations = {key: metadata[key] for key in ("unit", "summary") if metadata[key]}
    return {**schema, "description": metadata["description"], **annotations}


def schema_types(schema):
    """The JSON types a field's schema admits, as a set (its `type` is one name or a list; none: any)."""
    kind = schema.get("type")
    return {kind} if isinstance(kind, str) else set(kind or ())


def object_schema(cls):
    """The schema of an object this module defines: its fields, those required, and no others unless it is OPEN."""
    hints = typing.get_type_hints(cls)
    required = [field.name for field in fields(cls) if field.metadata["required"]]
    schema = {"type": "object", **({"required": required} if required else {})}
    schema["properties"] = {field.name: field_schema(field, hints) for field in fields(cls)}
    if not getattr(cls, "OPEN", False):
        schema["additionalProperties"] = False
    return schema


@functools.cache
def record_schema():
    """The record's JSON Schema: every section's fields at the top level, those required, and no others."""
    properties, required = {}, []
    for section in SECTIONS:
        hints = typing.get_type_hints(section)
        for field in fields(section):
            properties[field.name] = field_schema(field, hints)
            if field.metadata["required"]:
                required.append(field.name)
    return {"type": "object", "required": required, "additionalProperties": False, "properties": properties}
