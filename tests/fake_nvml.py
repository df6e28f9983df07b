"""A stand-in for pynvml that returns scripted readings, so the GPU telemetry path runs without a GPU."""

from types import SimpleNamespace

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0


class FakeNVML:
    """Each reading returns the next value of its script (the last one repeats)."""

    NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = NVML_CLOCK_SM, NVML_TEMPERATURE_GPU

    def __init__(self, utilisation, memory_mb, power_mw):
        self.scripts = {"utilisation": list(utilisation), "memory": list(memory_mb), "power": list(power_mw)}
        self.calls = {name: 0 for name in self.scripts}
        self.initialised = False

    def _next(self, name):
        script, index = self.scripts[name], self.calls[name]
        self.calls[name] += 1
        return script[min(index, len(script) - 1)]

    def nvmlInit(self):
        self.initialised = True

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetUtilizationRates(self, handle):
        value = self._next("utilisation")
        return SimpleNamespace(gpu=value, memory=value / 2)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=self._next("memory") * 2**20, total=80 * 2**30)

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._next("power")

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, kind):
        return 55

    def nvmlDeviceGetName(self, handle):
        return "Fake H100"

    def nvmlSystemGetDriverVersion(self):
        return "999.99"
