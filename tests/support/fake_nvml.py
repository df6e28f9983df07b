"""A stand-in for pynvml that returns scripted readings, so the GPU telemetry path runs without a GPU."""

from types import SimpleNamespace

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0


class NVMLError(Exception):
    """pynvml's base error: one subclass per NVML return code, str() its description."""

    description = "Unknown Error"

    def __str__(self):
        return self.description


class NVMLError_NotSupported(NVMLError):
    description = "Not Supported"


class NVMLError_FunctionNotFound(NVMLError):
    description = "Function Not Found"


def process(pid, used_mb):
    """A running process as pynvml lists it (usedGpuMemory in bytes, None where NVML does not report it)."""
    return SimpleNamespace(pid=pid, usedGpuMemory=None if used_mb is None else used_mb * 2**20)


class FakeNVML:
    """Each reading returns the next value of its script (the last one repeats). Optional scripts: `processes` and
    `graphics`, the compute and graphics processes listed at each call, each a list of (pid, used MiB or None);
    `throttle`, the clock event reasons bitmask; `energy_mj`, the total energy counter (None: a GPU without one,
    which raises NotSupported). `unsupported` names the queries that raise NVMLError_NotSupported, `missing` those
    the driver lacks (NVMLError_FunctionNotFound)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = NVML_CLOCK_SM, 2, NVML_TEMPERATURE_GPU
    NVML_FEATURE_ENABLED, NVML_DEVICE_MIG_ENABLE = 1, 1
    NVMLError, NVMLError_NotSupported, NVMLError_FunctionNotFound = (
        NVMLError,
        NVMLError_NotSupported,
        NVMLError_FunctionNotFound,
    )
    # nvml.h's clock event reason bits (pynvml also names them nvmlClocksThrottleReason*)
    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonApplicationsClocksSetting = 0x2
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonSwThermalSlowdown = 0x20
    nvmlClocksEventReasonHwThermalSlowdown = 0x40
    nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
    POWER_LIMIT_MW, MAX_CLOCKS_MHZ, APPLICATIONS_CLOCKS_MHZ = 700_000, {1: 1980, 2: 2619}, {1: 1755, 2: 2619}

    def __init__(
        self,
        utilisation,
        memory_mb,
        power_mw,
        processes=((),),
        graphics=((),),
        throttle=(0,),
        energy_mj=None,
        unsupported=(),
        missing=(),
    ):
        self.scripts = {
            "utilisation": list(utilisation),
            "memory": list(memory_mb),
            "power": list(power_mw),
            "processes": list(processes),
            "graphics": list(graphics),
            "throttle": list(throttle),
            "energy": list(energy_mj or [None]),
        }
        self.calls = {name: 0 for name in self.scripts}
        self.unsupported, self.missing = set(unsupported), set(missing)
        if energy_mj is None:
            self.unsupported.add("nvmlDeviceGetTotalEnergyConsumption")
        self.initialised = False

    def _next(self, name):
        script, index = self.scripts[name], self.calls[name]
        self.calls[name] += 1
        return script[min(index, len(script) - 1)]

    def _query(self, function):
        if function in self.missing:
            raise NVMLError_FunctionNotFound()
        if function in self.unsupported:
            raise NVMLError_NotSupported()

    def nvmlInit(self):
        self.initialised = True

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return ("gpu", int(uuid.removeprefix("GPU-")))

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._query("nvmlDeviceGetUtilizationRates")
        value = self._next("utilisation")
        return SimpleNamespace(gpu=value, memory=value / 2)

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._query("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=self._next("memory") * 2**20, total=80 * 2**30)

    def nvmlDeviceGetPowerUsage(self, handle):
        self._query("nvmlDeviceGetPowerUsage")
        return self._next("power")

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, kind):
        return 55

    def nvmlDeviceGetName(self, handle):
        return "Fake H100"

    def nvmlSystemGetDriverVersion(self):
        return "999.99"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self._query("nvmlDeviceGetTotalEnergyConsumption")
        return self._next("energy")

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        self._query("nvmlDeviceGetComputeRunningProcesses")
        return [process(*listed) for listed in self._next("processes")]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        self._query("nvmlDeviceGetGraphicsRunningProcesses")
        return [process(*listed) for listed in self._next("graphics")]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self._query("nvmlDeviceGetCurrentClocksEventReasons")
        return self._next("throttle")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        self._query("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._next("throttle")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        self._query("nvmlDeviceGetEnforcedPowerLimit")
        return self.POWER_LIMIT_MW

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        self._query("nvmlDeviceGetMaxClockInfo")
        return self.MAX_CLOCKS_MHZ[kind]

    def nvmlDeviceGetApplicationsClock(self, handle, kind):
        self._query("nvmlDeviceGetApplicationsClock")
        return self.APPLICATIONS_CLOCKS_MHZ[kind]

    def nvmlDeviceGetEccMode(self, handle):
        self._query("nvmlDeviceGetEccMode")
        return [1, 1]  # [current, pending]

    def nvmlDeviceGetMigMode(self, handle):
        self._query("nvmlDeviceGetMigMode")
        return [0, 0]  # [current, pending]

    def nvmlDeviceGetPersistenceMode(self, handle):
        self._query("nvmlDeviceGetPersistenceMode")
        return 1


class FakeGPUs(FakeNVML):
    """Several GPUs, each scripted by a FakeNVML of its own: a device query goes to the GPU its handle names (by NVML
    index, or by UUID `GPU-<index>`)."""

    def __init__(self, *devices):
        self.devices, self.initialised = devices, False


def _to_device(name):
    return lambda self, handle, *args: getattr(self.devices[handle[1]], name)(handle, *args)


for _name in dir(FakeNVML):
    if _name.startswith("nvmlDevice") and not _name.startswith("nvmlDeviceGetHandle"):
        setattr(FakeGPUs, _name, _to_device(_name))
