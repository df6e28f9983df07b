"""Resource telemetry of a training process: a background sampler and the summaries the run record holds.

The sampler reads, at a fixed rate, the GPU the job uses through NVML (utilisation of the GPU and of its memory,
memory used, power, SM clock, temperature) and, on every device, the process's CPU time and resident memory.
Samples go to a trace CSV together with phase markers (build, epoch boundaries, evaluation), from which the
summaries are computed over steady epochs only. Standard library only; NVML is injected (pynvml, or a fake
module in tests), so the GPU path is testable without a GPU.
"""

import os
import threading
import time

from .io import write_text_atomic

TRACE_COLUMNS = ("t_s", "phase", "gpu_util_pct", "mem_util_pct", "gpu_memory_mb", "power_w", "sm_clock_mhz",
                 "temperature_c", "cpu_util_pct", "rss_mb")  # fmt: skip
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


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


class Sampler:
    """Samples at `rate_hz` in a daemon thread between start() and stop(); mark(phase) labels what follows."""

    def __init__(self, rate_hz=10.0, nvml=None, gpu_index=0, clock=time.perf_counter, cpu_clock=time.process_time):
        self.period, self.nvml, self.clock, self.cpu_clock = 1.0 / rate_hz, nvml, clock, cpu_clock
        self.handle = nvml.nvmlDeviceGetHandleByIndex(gpu_index) if nvml else None
        self.rows, self.phase, self.cores = [], "start", os.cpu_count() or 1
        self._stop, self._lock = threading.Event(), threading.Lock()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)

    def start(self):
        self.origin = self.clock()
        self._last = (self.origin, self.cpu_clock())
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

    def gpu_reading(self):
        if self.handle is None:
            return (None,) * 6
        nvml, handle = self.nvml, self.handle
        rates = nvml.nvmlDeviceGetUtilizationRates(handle)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        return (rates.gpu, rates.memory, memory.used / 2**20, nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
                nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))  # fmt: skip

    def sample(self):
        with self._lock:
            self._sample()

    def _sample(self):
        """One row. CPU utilisation is the process's CPU time over the wall time since the last figure, over all
        cores; a boundary sample right after another leaves it empty: CPU time divided by a few microseconds of
        wall time read as several hundred percent."""
        now, cpu = self.clock(), self.cpu_clock()
        wall, used = now - self._last[0], cpu - self._last[1]
        cpu_util = None
        if wall >= self.period / 2:
            cpu_util = min(100.0, 100.0 * used / (wall * self.cores))
            self._last = (now, cpu)
        self.rows.append((now - self.origin, self.phase, *self.gpu_reading(), cpu_util, resident_mb()))

    def write_trace(self, path):
        lines = [",".join(TRACE_COLUMNS)]
        lines += [",".join("" if value is None else str(value) for value in row) for row in self.rows]
        write_text_atomic(path, "\n".join(lines) + "\n")


def mean(values):
    return sum(values) / len(values) if values else None


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def energy_j(rows, phases, column):
    """Trapezoidal integral of power (W) over time (s) within each of the phases (not across the gaps between)."""
    t, phase, power = column["t_s"], column["phase"], column["power_w"]
    return sum((b[t] - a[t]) * (a[power] + b[power]) / 2 for a, b in zip(rows, rows[1:])
               if a[phase] == b[phase] and a[phase] in phases and None not in (a[power], b[power]))  # fmt: skip


def summarise(rows, steady_phases, training_phases, images_trained):
    """Run-record fields from trace rows: utilisation over steady epochs, peaks, power and energy of training."""
    column = {name: index for index, name in enumerate(TRACE_COLUMNS)}
    every_phase = {row[column["phase"]] for row in rows}

    def values(name, phases):
        return [row[column[name]] for row in rows if row[column["phase"]] in phases and row[column[name]] is not None]

    steady_util = values("gpu_util_pct", steady_phases)
    powers = values("power_w", training_phases)
    energy = energy_j(rows, training_phases, column) if powers else None
    return {
        "cpu_utilisation_mean": mean(values("cpu_util_pct", steady_phases)),
        "gpu_utilisation_mean": mean(steady_util),
        "gpu_utilisation_p95": percentile(steady_util, 0.95),
        "gpu_memory_utilisation_mean": mean(values("mem_util_pct", steady_phases)),
        "gpu_memory_peak_mb": max(values("gpu_memory_mb", every_phase), default=None),
        "gpu_power_mean_w": mean(powers),
        "gpu_energy_j": energy,
        "gpu_energy_per_image_j": energy / images_trained if energy is not None and images_trained else None,
    }
