"""One training run's telemetry: the sampler started before the framework's imports (on a GPU job after the provenance
NVML gives and a trace of the idle GPU), and at the end its trace written and its summaries put in the record."""

import time

from . import parallel
from .rapl import rapl_meter
from .record import NO_GPU_REASON, cuda_libraries
from .telemetry import (
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

# The GPU's idle draw is sampled this long before the imports: several of NVML's power updates, little wait.
IDLE_BASELINE_S = 2.0


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
