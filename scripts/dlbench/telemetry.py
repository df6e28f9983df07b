"""Resource telemetry of a training process: a background sampler and the summaries the run record holds.

The sampler reads, at a fixed rate, the GPUs the job uses through NVML (utilisation of the GPU and of its memory,
memory used, power, SM clock, temperature, the energy counter, why the clocks are held down, other processes on it;
with data-parallel replicas on several GPUs, the trace holds them together and the record each one's own too)
and, on every device, the process's CPU time and resident memory, the machine's CPU counters and the CPU packages'
energy (RAPL). Samples go to a trace CSV together with phase markers (idle baseline, build, epoch boundaries,
evaluation), from which the summaries are computed over steady or training epochs. Standard library only; NVML is
injected (pynvml, or a fake module in tests), so the GPU path is testable without a GPU.
"""

import functools
import operator
import os
import threading
import time

from . import contention
from .io import csv_cell, write_text_atomic

# gpu_energy_mj: NVML's total energy counter (mJ since the driver loaded; Volta and newer); clocks_event_reasons:
# NVML's bitmask of why the clocks are held down at the sample; gpu_foreign_processes: how many processes outside the
# job's process tree NVML listed on the GPU at its last look (at most once a second).
GPU_COLUMNS = (
    "gpu_util_pct",
    "mem_util_pct",
    "gpu_memory_mb",
    "power_w",
    "sm_clock_mhz",
    "temperature_c",
    "gpu_energy_mj",
    "clocks_event_reasons",
    "gpu_foreign_processes",
)
# foreign_cpu_cores and steal_pct: contention (dlbench/contention.py) over the interval since the last CPU figure;
# cpu_energy_j: the CPU packages' energy (RAPL) since the sampler started.
HOST_COLUMNS = ("cpu_util_pct", "rss_mb", "foreign_cpu_cores", "steal_pct", "cpu_energy_j")
TRACE_COLUMNS = ("t_s", "phase", *GPU_COLUMNS, *HOST_COLUMNS)
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
# The phase a GPU job spends idle before its imports: the GPU's own draw, which energy above idle leaves out.
IDLE_PHASE = "idle baseline"
# NVML's clock event reason bits (nvml.h: nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*) that mean power
# or heat held the clocks down. GpuIdle, ApplicationsClocksSetting, SyncBoost and DisplayClockSetting are the GPU's
# own state or settings, not contention.
THROTTLE_BITS = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
}


def resident_mb():
    """Current resident set size of this process, from /proc (Linux)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE_MB


def load_nvml():
    """The pynvml module, initialised, or (None, reason) when no NVIDIA GPU or library is usable."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed in this env"
    try:
        pynvml.nvmlInit()
    except Exception as error:  # NVMLError subclasses: no driver, no GPU
        return None, f"NVML could not be initialised: {error}"
    return pynvml, None


def gpu_provenance(nvml, handle):
    """The GPU's settings that bound its speed and energy, for the provenance: enforced power limit, maximum and
    application clocks, ECC, MIG and persistence mode. A setting this GPU or driver does not report is None, with
    NVML's reason in gpu_provenance_unavailable."""
    queries = {
        "gpu_power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        "gpu_max_sm_clock_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
        "gpu_max_memory_clock_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "gpu_applications_sm_clock_mhz": lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM),
        "gpu_applications_memory_clock_mhz": lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_MEM),
        # ECC and MIG queries return [current, pending]: what is in force now
        "gpu_ecc": lambda: nvml.nvmlDeviceGetEccMode(handle)[0] == nvml.NVML_FEATURE_ENABLED,
        "gpu_mig": lambda: nvml.nvmlDeviceGetMigMode(handle)[0] == nvml.NVML_DEVICE_MIG_ENABLE,
        "gpu_persistence": lambda: nvml.nvmlDeviceGetPersistenceMode(handle) == nvml.NVML_FEATURE_ENABLED,
    }
    found, unavailable = {}, []
    for key, query in queries.items():
        try:
            found[key] = query()
        except (nvml.NVMLError, AttributeError) as error:  # AttributeError: pynvml drops deprecated queries
            found[key] = None
            unavailable.append(f"{key}: {error}")
    return {**found, "gpu_provenance_unavailable": unavailable}


class GpuReader:
    """One GPU through NVML: the GPU columns of a sample, and the processes on it outside the job's process tree
    (key `gpu_processes`, not part of the trace). A query this GPU or driver does not answer (NotSupported,
    FunctionNotFound, ...) is left out for the rest of the run with NVML's reason in `unavailable`: a sample never
    fails on it."""

    def __init__(self, nvml, handle, proc="/proc", clock=time.perf_counter):
        self.nvml, self.handle, self.proc, self.clock = nvml, handle, proc, clock
        self.queries = {
            "utilisation": self.utilisation,
            "memory": self.memory,
            "power": self.power,
            "SM clock": self.sm_clock,
            "temperature": self.temperature,
            "energy counter": self.energy,
            "clock event reasons": self.clock_event_reasons,
            "running processes": self.processes,
        }
        self.unavailable = {}
        # The job's tree, looked up again only when NVML lists a pid outside it; whether a pid of the tree was ever
        # listed (in a container NVML lists host pids, and none ever is).
        self.root, self.tree, self.tree_on_gpu = contention.job_root(), set(), False
        self.foreign, self.looked = [], None

    def reading(self):
        row = {**dict.fromkeys(GPU_COLUMNS), "gpu_processes": None}
        for name, query in list(self.queries.items()):
            try:
                row.update(query())
            except self.nvml.NVMLError as error:
                del self.queries[name]
                self.unavailable[name] = f"NVML: {error}"
        return row

    def utilisation(self):
        rates = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
        return {"gpu_util_pct": rates.gpu, "mem_util_pct": rates.memory}

    def memory(self):
        return {"gpu_memory_mb": self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20}

    def power(self):
        return {"power_w": self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0}

    def sm_clock(self):
        return {"sm_clock_mhz": self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)}

    def temperature(self):
        return {"temperature_c": self.nvml.nvmlDeviceGetTemperature(self.handle, self.nvml.NVML_TEMPERATURE_GPU)}

    def energy(self):
        return {"gpu_energy_mj": self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)}

    def clock_event_reasons(self):
        try:
            mask = self.nvml.nvmlDeviceGetCurrentClocksEventReasons(self.handle)
        except (AttributeError, self.nvml.NVMLError_FunctionNotFound):  # pynvml before 12, or a driver before 535
            mask = self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle)
        return {"clocks_event_reasons": mask}

    def processes(self):
        """The GPU's processes outside the job's tree, listed again at most once a second (processes come and go
        rarely, and the tree is looked up again only when NVML lists a pid it does not hold)."""
        now = self.clock()
        if self.looked is None or now - self.looked >= contention.TREE_REFRESH_S:
            self.looked = now
            listed = contention.gpu_processes(self.nvml, self.handle, self.proc)
            if any(process["pid"] not in self.tree for process in listed):
                self.tree = contention.tree_members(self.root, self.proc)
            self.tree_on_gpu |= any(process["pid"] in self.tree for process in listed)
            self.foreign = [process for process in listed if process["pid"] not in self.tree]
        return {"gpu_foreign_processes": len(self.foreign), "gpu_processes": self.foreign}


# How a sample's GPU columns combine the run's GPUs (data-parallel replicas on several): together they draw the sum
# of their power and energy and hold the sum of their memory, their utilisation is the mean, the slowest clock and
# the hottest die bound them, and a reason any one's clocks are held down holds the run down.
COMBINED = {
    "gpu_util_pct": lambda values: sum(values) / len(values),
    "mem_util_pct": lambda values: sum(values) / len(values),
    "gpu_memory_mb": sum,
    "power_w": sum,
    "sm_clock_mhz": min,
    "temperature_c": max,
    "gpu_energy_mj": sum,
    "clocks_event_reasons": lambda masks: functools.reduce(operator.or_, masks),
    "gpu_foreign_processes": sum,
}


class GpuGroup:
    """The GPUs a run uses, each read by its own GpuReader, with GpuReader's interface: a sample's GPU columns are
    the devices together (COMBINED), its `gpu_processes` the processes outside the job's tree on any of them, and
    `devices` each device's own columns, in the order of `labels` (how CUDA names them: CUDA_VISIBLE_DEVICES'
    entries, else NVML's indices)."""

    def __init__(self, readers, labels):
        self.readers, self.labels = readers, labels

    @property
    def unavailable(self):
        return {name: why for reader in self.readers for name, why in reader.unavailable.items()}

    @property
    def tree_on_gpu(self):
        return any(reader.tree_on_gpu for reader in self.readers)

    def reading(self):
        readings = [reader.reading() for reader in self.readers]
        row = {}
        for column, combine in COMBINED.items():
            values = [reading[column] for reading in readings if reading[column] is not None]
            row[column] = combine(values) if values else None
        listed = [reading["gpu_processes"] for reading in readings if reading["gpu_processes"] is not None]
        row["gpu_processes"] = [process for foreign in listed for process in foreign] if listed else None
        row["devices"] = [{column: reading[column] for column in GPU_COLUMNS} for reading in readings]
        return row


def visible_gpus(nvml, count, environ=os.environ):
    """[(label, NVML handle)] of the first `count` GPUs CUDA shows this process: those CUDA_VISIBLE_DEVICES names, by
    index or UUID, as a scheduler (Slurm) sets it, whose numbering NVML does not follow; else NVML's first `count`."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [(str(index), nvml.nvmlDeviceGetHandleByIndex(index)) for index in range(count)]
    named = [entry.strip() for entry in visible.split(",") if entry.strip()][:count]
    if len(named) < count:
        raise RuntimeError(f"{count} GPUs asked for, but CUDA_VISIBLE_DEVICES={visible!r} names {len(named)}")
    return [
        (
            entry,
            nvml.nvmlDeviceGetHandleByIndex(int(entry)) if entry.isdigit() else nvml.nvmlDeviceGetHandleByUUID(entry),
        )
        for entry in named
    ]


def cpu_meter():
    """(contention.CpuMeter, None), or (None, why the machine's CPU counters cannot be read)."""
    try:
        meter = contention.CpuMeter()
        meter.reading()
    except contention.Unavailable as error:
        return None, str(error)
    return meter, None


class Sampler:
    """Samples at `rate_hz` in a daemon thread between start() and stop(); mark(phase) labels what follows. Each
    row is a dict of TRACE_COLUMNS; where the machine's CPU counters are readable, it also keeps their cumulative
    reading, the process's CPU time and the wall-clock time (keys `counters`, `cpu_s`, `at`, not part of the trace) so that contention can be
    summed over any window of phases, and on a GPU the processes outside the job's tree (`gpu_processes`)."""

    def __init__(
        self,
        rate_hz=10.0,
        nvml=None,
        gpus=1,
        clock=time.perf_counter,
        cpu_clock=time.process_time,
        meter=None,
        meter_unavailable=None,
        rapl=None,
        rapl_unavailable=None,
        proc="/proc",
    ):
        self.period, self.clock, self.cpu_clock = 1.0 / rate_hz, clock, cpu_clock
        self.meter, self.meter_unavailable = meter, meter_unavailable  # contention.CpuMeter, or why there is none
        self.rapl, self.rapl_unavailable = rapl, rapl_unavailable  # rapl.RaplMeter, or why there is none
        self.gpu = None
        if nvml:  # the run's GPUs (one per replica), read together
            labels, handles = zip(*visible_gpus(nvml, gpus))
            self.gpu = GpuGroup([GpuReader(nvml, handle, proc, clock) for handle in handles], list(labels))
        self.rows, self.phase, self.cores = [], "start", os.cpu_count() or 1
        self._stop, self._lock = threading.Event(), threading.Lock()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)

    def start(self):
        self.origin = self.clock()
        self._last = (self.origin, self.cpu_clock(), self.counters())
        self._thread.start()
        return self

    def mark(self, phase):
        """End the current phase and start the next, with a sample on each side of the boundary, so every phase
        has its own end points however short it is."""
        with self._lock:
            self._sample()
            self.phase = phase
            self._sample()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self):
        while not self._stop.wait(self.period):
            self.sample()

    def counters(self):
        return self.meter.reading() if self.meter else None

    def gpu_reading(self):
        return (
            self.gpu.reading() if self.gpu else {**dict.fromkeys(GPU_COLUMNS), "gpu_processes": None, "devices": None}
        )

    def cpu_energy_origin(self):
        """{cpu_energy_source, cpu_energy_reason}: where the CPU energy comes from, or why there is none."""
        if self.rapl and self.rapl.reason is None:
            return {"cpu_energy_source": self.rapl.source, "cpu_energy_reason": None}
        reason = self.rapl.reason if self.rapl else self.rapl_unavailable
        return {"cpu_energy_source": None, "cpu_energy_reason": reason}

    def sample(self):
        with self._lock:
            self._sample()

    def _sample(self):
        """One row. CPU utilisation is the process's CPU time over the wall time since the last figure, over all
        cores, and contention is the machine's counters over the same interval; a boundary sample right after
        another leaves them empty: CPU time divided by a few microseconds of wall time read as several hundred
        percent."""
        now, cpu, counters = self.clock(), self.cpu_clock(), self.counters()
        wall, used = now - self._last[0], cpu - self._last[1]
        row = {
            "t_s": now - self.origin,
            "phase": self.phase,
            **self.gpu_reading(),
            **dict.fromkeys(HOST_COLUMNS),
            "rss_mb": resident_mb(),
            "cpu_s": cpu,
            "counters": counters,
            "at": time.time(),
            "cpu_energy_j": self.rapl.joules() if self.rapl else None,
        }
        if wall >= self.period / 2:
            row["cpu_util_pct"] = min(100.0, 100.0 * used / (wall * self.cores))
            if counters:
                window = contention.cpu_window(self._last[2], counters)
                row["foreign_cpu_cores"] = window["foreign_cpu_cores"]
                row["steal_pct"] = None if window["steal_share"] is None else 100.0 * window["steal_share"]
            self._last = (now, cpu, counters)
        self.rows.append(row)

    def write_trace(self, path):
        lines = [",".join(TRACE_COLUMNS)]
        lines += [",".join(csv_cell(row[name]) for name in TRACE_COLUMNS) for row in self.rows]
        write_text_atomic(path, "\n".join(lines) + "\n")


def mean(values):
    return sum(values) / len(values) if values else None


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def segments(rows, phases):
    """(first row, last row) of each stretch of consecutive rows in one of `phases` (marks sample both ends)."""
    stretch = []
    for row in [*rows, None]:
        if stretch and (row is None or row["phase"] != stretch[0]["phase"]):
            yield stretch[0], stretch[-1]
            stretch = []
        if row is not None and row["phase"] in phases:
            stretch.append(row)


def energy_j(rows, phases):
    """Trapezoidal integral of power (W) over time (s) within each of the phases (not across the gaps between)."""
    return sum(
        (b["t_s"] - a["t_s"]) * (a["power_w"] + b["power_w"]) / 2
        for a, b in zip(rows, rows[1:])
        if a["phase"] == b["phase"] and a["phase"] in phases and None not in (a["power_w"], b["power_w"])
    )


def span_s(rows, phases):
    """Wall time of the stretches of `phases`."""
    return sum(last["t_s"] - first["t_s"] for first, last in segments(rows, phases))


def counter_growth(rows, phases, column):
    """How much a cumulative counter column grew over the stretches of `phases`; None where an end lacks it."""
    ends = [(first[column], last[column]) for first, last in segments(rows, phases)]
    if not ends or any(None in pair for pair in ends):
        return None
    return sum(end - start for start, end in ends)


def gpu_energy(rows, phases):
    """(J, source) over `phases`: NVML's energy counter where the GPU has one (it sums every change of power, not
    only those the samples catch), else power integrated over the samples; (None, None) with neither."""
    counted = counter_growth(rows, phases, "gpu_energy_mj")
    if counted is not None:
        return counted / 1000.0, "nvml energy counter"
    if any(row["power_w"] is not None for row in rows if row["phase"] in phases):
        return energy_j(rows, phases), "power integration"
    return None, None


def energy_summary(rows, training_phases, images_trained):
    """Run-record fields of energy over the training phases: the GPU's (with its source, its idle draw measured
    before the run and the energy above it) and the CPU packages' (RAPL)."""
    energy, source = gpu_energy(rows, training_phases)
    idle_energy, idle_s = gpu_energy(rows, {IDLE_PHASE})[0], span_s(rows, {IDLE_PHASE})
    idle_w = idle_energy / idle_s if idle_energy is not None and idle_s > 0 else None
    above_idle = energy - idle_w * span_s(rows, training_phases) if None not in (energy, idle_w) else None
    return {
        "gpu_energy_j": energy,
        "gpu_energy_source": source,
        "gpu_energy_per_image_j": energy / images_trained if energy is not None and images_trained else None,
        "gpu_idle_power_w": idle_w,
        "gpu_energy_above_idle_j": above_idle,
        "cpu_energy_j": counter_growth(rows, training_phases, "cpu_energy_j"),
    }


def processes_seen(rows):
    """{pid: process} of the processes outside the job's tree that `rows` saw on the GPU, each with the most memory
    it held."""
    seen = {}
    for row in rows:
        for process in row["gpu_processes"] or []:
            known = seen.setdefault(process["pid"], dict(process))
            held = [mb for mb in (known["used_memory_mb"], process["used_memory_mb"]) if mb is not None]
            known["used_memory_mb"] = max(held, default=None)
    return seen


def throttle_names(mask):
    return [name for name, bit in THROTTLE_BITS.items() if mask & bit]


def gpu_contention(sampler, phases):
    """The GPU's findings over `phases`, the `gpu` of contention.summary (None without NVML): the processes outside
    the job's tree seen on its GPU, the throttle reasons seen, and why a part could not be read."""
    if sampler.gpu is None:
        return None
    rows = [row for row in sampler.rows if row["phase"] in phases]
    seen = processes_seen(rows)
    missing = [
        f"{query}: {why}"
        for query, why in sampler.gpu.unavailable.items()
        if query in ("running processes", "clock event reasons")
    ]
    # NVML lists host pids. Where no pid of the job's tree was ever listed on its GPU but pids this /proc does not
    # show were, the job runs in a pid namespace of its own (a container): those cannot be told from its own process.
    hidden = [] if sampler.gpu.tree_on_gpu else sorted(pid for pid, process in seen.items() if process["name"] is None)
    if hidden:
        missing.append(
            f"pids {', '.join(map(str, hidden))} on the GPU are outside this pid namespace and no pid "
            "of the job's is on it: in a container NVML lists host pids, not told from the job's own"
        )
    masks = [row["clocks_event_reasons"] for row in rows if row["clocks_event_reasons"] is not None]
    listed = any(row["gpu_processes"] is not None for row in rows)
    return {
        "foreign_processes": [process for pid, process in seen.items() if pid not in hidden] if listed else None,
        "throttle_reasons": sorted({name for mask in masks for name in throttle_names(mask)}) if masks else None,
        "reason": "; ".join(missing) or None,
    }


def window_counters(rows, phases):
    """The machine's CPU counters summed over the stretches of `phases` as differences of {t, busy_s, steal_s,
    total_s, tree_s, launchers_s} (None without counters), so contention.cpu_window(zero, this) gives the window's
    figures."""
    keys, total = ("t", "busy_s", "steal_s", "total_s", "tree_s", "launchers_s"), None
    for first, last in segments(rows, phases):
        if first["counters"] is None or last["counters"] is None:
            return None
        total = total or dict.fromkeys(keys, 0.0)
        for key in keys:
            total[key] += last["counters"][key] - first["counters"][key]
    return total


def contention_summary(rows, phases, gpu=None, cpu_unavailable=None):
    """The record's contention section over the stretches of `phases`: foreign CPU cores (mean and the highest
    sampling interval), steal, and the GPU findings gathered by the caller."""
    counters = window_counters(rows, phases)
    cpu = contention.cpu_window(dict.fromkeys(counters, 0.0), counters) if counters and counters["t"] > 0 else None
    inside = [row for row in rows if row["phase"] in phases]
    peaks = [row["foreign_cpu_cores"] for row in inside if row["foreign_cpu_cores"] is not None]
    span = (inside[0]["at"], inside[-1]["at"]) if inside else None
    return contention.summary(cpu, gpu, cpu_unavailable=cpu_unavailable, peak_cores=max(peaks, default=None), span=span)


def process_cpu_share(rows, phases, cores):
    """The process's CPU time over the wall time of the stretches of `phases`, over all cores (None without a
    CPU clock in the rows): exact however short the phases, unlike the per-interval figures."""
    spans = [(last["cpu_s"] - first["cpu_s"], last["t_s"] - first["t_s"]) for first, last in segments(rows, phases)]
    wall = sum(seconds for _, seconds in spans)
    return min(100.0, 100.0 * sum(used for used, _ in spans) / (wall * cores)) if wall > 0 else None


def device_summaries(rows, labels, steady_phases, training_phases):
    """Each GPU's own figures (the record's gpu_devices), from the `devices` of the rows: utilisation over steady
    epochs, memory peak, power and energy over the training epochs. None without GPU rows."""
    sampled = [row for row in rows if row.get("devices")]
    if not sampled:
        return None
    summaries = []
    for index, label in enumerate(labels):
        device_rows = [{"t_s": row["t_s"], "phase": row["phase"], **row["devices"][index]} for row in sampled]

        def values(name, phases, device_rows=device_rows):
            return [row[name] for row in device_rows if row["phase"] in phases and row[name] is not None]

        utilisation = values("gpu_util_pct", steady_phases)
        summaries.append(
            {
                "device": label,
                "utilisation_mean": mean(utilisation),
                "utilisation_p95": percentile(utilisation, 0.95),
                "memory_peak_mb": max(values("gpu_memory_mb", {row["phase"] for row in device_rows}), default=None),
                "power_mean_w": mean(values("power_w", training_phases)),
                "energy_j": gpu_energy(device_rows, training_phases)[0],
            }
        )
    return summaries


def summarise(rows, steady_phases, training_phases, images_trained, cores=None):
    """Run-record fields from trace rows: utilisation over steady epochs, peaks, power and energy of training."""
    every_phase = {row["phase"] for row in rows}

    def values(name, phases):
        return [row[name] for row in rows if row["phase"] in phases and row[name] is not None]

    steady_util = values("gpu_util_pct", steady_phases)
    return {
        "cpu_utilisation_mean": process_cpu_share(rows, steady_phases, cores or os.cpu_count() or 1),
        "gpu_utilisation_mean": mean(steady_util),
        "gpu_utilisation_p95": percentile(steady_util, 0.95),
        "gpu_memory_utilisation_mean": mean(values("mem_util_pct", steady_phases)),
        "gpu_memory_peak_mb": max(values("gpu_memory_mb", every_phase), default=None),
        "gpu_power_mean_w": mean(values("power_w", training_phases)),
        **energy_summary(rows, training_phases, images_trained),
    }


TIMED_PHASE = "timed"


def job_sampler(device, rate_hz=10.0):
    """A started sampler for a timed job that keeps no trace (operator benchmark, largest-batch search): the
    machine's CPU counters and, on a GPU job, its GPU; mark(TIMED_PHASE) opens the window job_contention reads."""
    nvml = load_nvml()[0] if device == "gpu" else None
    meter, unreadable = cpu_meter()
    return Sampler(rate_hz, nvml, meter=meter, meter_unavailable=unreadable).start()


def sampler_contention(sampler, phases):
    """The record's contention section over the sampler's stretches of `phases`: CPU and GPU findings together."""
    return contention_summary(
        sampler.rows, phases, gpu=gpu_contention(sampler, phases), cpu_unavailable=sampler.meter_unavailable
    )


def job_contention(sampler):
    """Stop the job's sampler; the record's contention section over its timed window."""
    sampler.stop()
    return sampler_contention(sampler, {TIMED_PHASE})
