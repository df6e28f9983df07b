"""The telemetry sampler and its summaries, with a scripted fake NVML in place of a GPU: GPU readings, the processes
on the GPU outside the job's tree and the throttle reasons in the contention section, and the check for a free GPU
before the timed part."""

import subprocess
import time
from pathlib import Path

import pytest
from dlbench import contention, record, telemetry
from fake_nvml import FakeGPUs, FakeNVML


def test_sampler_records_gpu_readings_phases_and_host_figures(tmp_path):
    nvml = FakeNVML(utilisation=[10, 90], memory_mb=[1000, 3000], power_mw=[100_000, 300_000])
    sampler = telemetry.Sampler(rate_hz=100, nvml=nvml).start()
    sampler.mark("epoch 1")
    time.sleep(0.05)
    sampler.mark("epoch 2")
    sum(i * i for i in range(200_000))  # some CPU work in the steady phase
    sampler.stop()
    phases = [row["phase"] for row in sampler.rows]
    assert phases[0] == "start" and "epoch 1" in phases and phases[-1] == "epoch 2"
    assert len(sampler.rows) >= 5  # 100 Hz over > 50 ms, plus the boundary samples
    assert all(row["gpu_memory_mb"] in (1000, 3000) for row in sampler.rows)
    assert all(row["rss_mb"] > 0 for row in sampler.rows)
    sampler.write_trace(tmp_path / "trace.csv")
    header, first = (tmp_path / "trace.csv").read_text().splitlines()[:2]
    assert header.split(",") == list(telemetry.TRACE_COLUMNS)
    assert first.split(",")[1] == "start"


def test_a_run_on_several_gpus_traces_them_together_and_records_each_apart():
    """Two replicas' GPUs: the trace's GPU columns are the two together (utilisation their mean, memory and power
    their sums), and the record's gpu_devices each one's own figures, in CUDA's order."""
    nvml = FakeGPUs(
        FakeNVML(utilisation=[40], memory_mb=[1000], power_mw=[100_000], energy_mj=range(0, 10**7, 1000)),
        FakeNVML(utilisation=[80], memory_mb=[3000], power_mw=[300_000], energy_mj=range(0, 3 * 10**7, 3000)),
    )
    sampler = telemetry.Sampler(rate_hz=100, nvml=nvml, gpus=2).start()
    sampler.mark("epoch 1")
    time.sleep(0.03)
    sampler.mark("epoch 2")
    time.sleep(0.03)
    sampler.stop()
    steady = [row for row in sampler.rows if row["phase"] == "epoch 2"]
    assert {(row["gpu_util_pct"], row["gpu_memory_mb"], row["power_w"]) for row in steady} == {(60, 4000, 400)}
    devices = telemetry.device_summaries(sampler.rows, sampler.gpu.labels, {"epoch 2"}, {"epoch 1", "epoch 2"})
    assert [(device["device"], device["utilisation_mean"], device["memory_peak_mb"]) for device in devices] == [
        ("0", 40, 1000),
        ("1", 80, 3000),
    ]
    assert [device["power_mean_w"] for device in devices] == [100, 300]
    assert devices[0]["energy_j"] > 0 and devices[1]["energy_j"] == pytest.approx(3 * devices[0]["energy_j"])


def test_the_gpus_a_run_samples_are_those_cuda_visible_devices_names():
    nvml = FakeGPUs(*[FakeNVML(utilisation=[0], memory_mb=[0], power_mw=[0]) for _ in range(4)])
    named = telemetry.visible_gpus(nvml, 2, {"CUDA_VISIBLE_DEVICES": "GPU-3,GPU-1,GPU-0"})
    assert named == [("GPU-3", ("gpu", 3)), ("GPU-1", ("gpu", 1))]
    assert telemetry.visible_gpus(nvml, 1, {"CUDA_VISIBLE_DEVICES": "2"}) == [("2", ("gpu", 2))]
    assert telemetry.visible_gpus(nvml, 2, {}) == [("0", ("gpu", 0)), ("1", ("gpu", 1))]
    with pytest.raises(RuntimeError, match="2 GPUs asked for, but CUDA_VISIBLE_DEVICES='1' names 1"):
        telemetry.visible_gpus(nvml, 2, {"CUDA_VISIBLE_DEVICES": "1"})


def row(t, phase, util, memory, power, cpu_share=0.5):
    """A trace row at t s whose process has used `cpu_share` of one core since t = 0."""
    return {
        **dict.fromkeys(telemetry.TRACE_COLUMNS),
        "t_s": t,
        "phase": phase,
        "gpu_util_pct": util,
        "mem_util_pct": None if util is None else util / 2,
        "gpu_memory_mb": memory,
        "power_w": power,
        "cpu_s": cpu_share * t,
        "counters": None,
        "gpu_processes": None,
    }


def test_summaries_use_steady_epochs_and_integrate_power_within_training_phases():
    rows = [
        row(0.0, "epoch 1", 20, 500, 100.0),
        row(1.0, "epoch 1", 20, 900, 100.0),
        row(1.0, "eval 1", 5, 900, 500.0),
        row(3.0, "eval 1", 5, 900, 500.0),
        row(3.0, "epoch 2", 80, 1200, 200.0),
        row(4.0, "epoch 2", 100, 1200, 300.0),
        row(5.0, "epoch 2", 90, 1100, 300.0),
    ]
    summary = telemetry.summarise(rows, {"epoch 2"}, {"epoch 1", "epoch 2"}, images_trained=1000, cores=1)
    assert summary["gpu_utilisation_mean"] == pytest.approx(90.0)
    assert summary["gpu_utilisation_p95"] == 100
    assert summary["gpu_memory_peak_mb"] == 1200
    # epoch 1: 1 s at 100 W; epoch 2: 250 J + 300 J; the evaluation in between is excluded
    assert summary["gpu_energy_j"] == pytest.approx(100.0 + 250.0 + 300.0)
    assert summary["gpu_energy_source"] == "power integration"
    assert summary["gpu_energy_per_image_j"] == pytest.approx(0.65)
    assert summary["gpu_power_mean_w"] == pytest.approx((100 + 100 + 200 + 300 + 300) / 5)
    assert summary["cpu_utilisation_mean"] == pytest.approx(50.0)


def test_without_a_gpu_the_gpu_summaries_are_null():
    rows = [row(0.0, "epoch 2", None, None, None), row(1.0, "epoch 2", None, None, None)]
    summary = telemetry.summarise(rows, {"epoch 2"}, {"epoch 2"}, images_trained=10, cores=1)
    assert summary["gpu_utilisation_mean"] is None and summary["gpu_energy_j"] is None
    assert summary["gpu_energy_source"] is None and summary["gpu_idle_power_w"] is None
    assert summary["gpu_memory_peak_mb"] is None and summary["cpu_utilisation_mean"] == pytest.approx(50.0)


def test_load_nvml_without_the_library_gives_a_reason(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    assert telemetry.load_nvml() == (None, "nvidia-ml-py (pynvml) is not installed in this env")


class Wheel:
    """An installed distribution as importlib.metadata describes it."""

    def __init__(self, name, version):
        self.metadata, self.version = {"Name": name}, version


@pytest.mark.parametrize(
    ("wheels", "expected"),
    [
        (
            [("torch", "2.13.0"), ("nvidia-cuda-runtime-cu12", "12.8.90"), ("nvidia_cudnn_cu12", "9.10.2.21")],
            ("12.8.90", "9.10.2.21"),
        ),
        ([("mxnet-cu112", "1.9.1"), ("numpy", "1.23.5")], ("11.2", None)),
        ([("tensorflow-cpu", "2.21.0")], (None, None)),
    ],
)
def test_cuda_and_cudnn_versions_come_from_the_envs_wheels(wheels, expected):
    assert record.cuda_libraries([Wheel(*wheel) for wheel in wheels]) == expected


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        (("13.0", "91900"), ("13.0", "9.19.0")),  # PyTorch 2.11 on CUDA 13 (torch.backends.cudnn.version())
        (("12.1", "8902"), ("12.1", "8.9.2")),  # cuDNN 8 had a one-digit minor version
        (("12080", "90100"), ("12.8", "9.1.0")),  # JAX's CUDA plugin: both integers
        (("12.5.1", "9"), ("12.5.1", "9")),  # TensorFlow's build info: already its own form
        ((None, None), (None, None)),
    ],
)
def test_cuda_versions_a_framework_reports_are_written_as_the_wheels_write_them(reported, expected):
    assert record.dotted_cuda_versions(*reported) == expected


def test_cpu_utilisation_is_never_divided_by_a_boundary_samples_sliver_of_time():
    """Marks sample on both sides of a boundary microseconds apart: no CPU figure there, and none above 100%."""
    wall, cpu = iter([0.1, 0.100001, 0.100002, 0.2, 0.3]), iter([0.1, 0.1001, 0.1002, 0.19, 0.29])
    sampler = telemetry.Sampler(rate_hz=10, clock=lambda: next(wall), cpu_clock=lambda: next(cpu))
    sampler.cores, sampler.origin, sampler._last = 1, 0.0, (0.0, 0.0, None)
    sampler.sample()  # 0.1 s of wall time, 0.1 s of CPU: 100%
    sampler.mark("epoch 1")  # two samples 1 µs apart: 100 µs of CPU over 1 µs would read 10,000%
    sampler.sample()  # 0.1 s after the last figure
    sampler.sample()
    shares = [pytest.approx(100.0), None, None, pytest.approx(90.0), pytest.approx(100.0)]
    assert [row["cpu_util_pct"] for row in sampler.rows] == shares


class Clock:
    """A settable clock for driving a sampler by hand."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def fake_proc(root, processes):
    """A /proc holding `processes`, {pid: (parent pid, command name)}, as contention.tree_members reads it."""
    for pid, (parent, name) in processes.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({name}) S {parent} " + " ".join(["0"] * 40) + "\n")
        (root / str(pid) / "comm").write_text(f"{name}\n")
    return root


def drive(sampler, clock, steps):
    """Run (t, step) pairs in order with the clock set to t, without the sampling thread."""
    sampler.origin, sampler._last = 0.0, (0.0, 0.0, None)
    for t, step in steps:
        clock.t = t
        step()


# The job: the launcher (pid 100) and its training process (101); a process outside it (4242).
JOB = {100: (1, "python3"), 101: (100, "python"), 4242: (1, "hog")}
LIMITS = {
    "max_foreign_cpu_cores": 0.1,
    "max_steal_share": 0.05,
    "throttle_reasons": ["hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake"],
}  # the defaults
TIMED = {"epoch 1", "epoch 2"}


def test_a_foreign_gpu_process_and_throttling_are_found_named_and_traced(tmp_path, monkeypatch):
    monkeypatch.setenv(contention.ROOT_VARIABLE, "100")
    proc, clock = fake_proc(tmp_path / "proc", JOB), Clock()
    idle, application = FakeNVML.nvmlClocksEventReasonGpuIdle, FakeNVML.nvmlClocksEventReasonApplicationsClocksSetting
    power_cap, thermal = FakeNVML.nvmlClocksEventReasonSwPowerCap, FakeNVML.nvmlClocksEventReasonHwThermalSlowdown
    brake = FakeNVML.nvmlClocksEventReasonHwPowerBrakeSlowdown
    # One mask per sample, in order: the samples at t = 1 and the first at t = 2 are before the timed phases.
    masks = [idle, brake, idle, power_cap | idle, application, thermal, 0]
    nvml = FakeNVML(
        [50],
        [1000],
        [200_000],
        processes=[[(101, 500)], [(101, 900), (4242, 2048)], [(101, 900), (4242, 1024)]],
        throttle=masks,
    )
    sampler = telemetry.Sampler(rate_hz=10, nvml=nvml, clock=clock, cpu_clock=clock, proc=proc)
    drive(
        sampler,
        clock,
        [
            (1.0, sampler.sample),
            (2.0, lambda: sampler.mark("epoch 1")),
            (3.0, sampler.sample),
            (4.0, lambda: sampler.mark("epoch 2")),
            (5.0, sampler.sample),
        ],
    )
    # NVML's process list is read at most once a second: once at each t, not twice at a boundary.
    assert nvml.calls["processes"] == 5
    assert [row["gpu_foreign_processes"] for row in sampler.rows] == [0, 1, 1, 1, 1, 1, 1]
    gpu = telemetry.gpu_contention(sampler, TIMED)
    assert gpu == {
        "foreign_processes": [{"pid": 4242, "name": "hog", "used_memory_mb": 2048.0}],
        "throttle_reasons": ["hw_thermal", "sw_power_cap"],
        "reason": None,
    }
    summary = telemetry.contention_summary(sampler.rows, TIMED, gpu=gpu)
    assert summary["foreign_gpu_processes"][0]["name"] == "hog" and "gpu" not in summary["unavailable"]
    found = " | ".join(contention.reasons(summary, LIMITS))
    assert "pid 4242 (hog, 2048 MiB)" in found and "hw_thermal" in found
    assert "sw_power_cap" not in found  # recorded above, but the card holding its power cap is not contention
    assert "hw_power_brake" not in found  # seen before the timed phases only
    sampler.write_trace(tmp_path / "trace.csv")
    header, *lines = (tmp_path / "trace.csv").read_text().splitlines()
    column = header.split(",").index("clocks_event_reasons")
    assert [int(line.split(",")[column]) for line in lines] == masks


@pytest.mark.parametrize("own_listed", [True, False])
def test_in_a_container_nvmls_host_pids_are_not_taken_for_foreign_ones(tmp_path, monkeypatch, own_listed):
    """NVML lists host pids. Where the job's own pid shows on the GPU, a pid this /proc does not show is another
    container's process; where none of the job's ever shows, it cannot be told from the job's own."""
    monkeypatch.setenv(contention.ROOT_VARIABLE, "100")
    proc, clock = fake_proc(tmp_path / "proc", JOB), Clock()
    listed = [(101, 900), (880001, 700)] if own_listed else [(880001, 700)]
    sampler = telemetry.Sampler(
        rate_hz=10, nvml=FakeNVML([50], [1000], [200_000], processes=[listed]), clock=clock, cpu_clock=clock, proc=proc
    )
    drive(sampler, clock, [(1.0, lambda: sampler.mark("epoch 1")), (2.0, sampler.sample)])
    gpu = telemetry.gpu_contention(sampler, TIMED)
    if own_listed:
        assert gpu["foreign_processes"] == [{"pid": 880001, "name": None, "used_memory_mb": 700.0}]
        assert gpu["reason"] is None
    else:
        assert gpu["foreign_processes"] == [] and "880001" in gpu["reason"] and "container" in gpu["reason"]


def test_nvml_queries_a_gpu_does_not_support_are_left_out_with_the_reason(tmp_path, monkeypatch):
    unsupported = {
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetUtilizationRates",
    }
    nvml = FakeNVML([50], [1000], [200_000], unsupported=unsupported)
    clock = Clock()
    sampler = telemetry.Sampler(rate_hz=10, nvml=nvml, clock=clock, cpu_clock=clock)
    drive(sampler, clock, [(1.0, lambda: sampler.mark("epoch 1")), (2.0, sampler.sample), (3.0, sampler.sample)])
    assert all(row["gpu_util_pct"] is None and row["gpu_memory_mb"] == 1000 for row in sampler.rows)
    assert set(sampler.gpu.unavailable) == {"utilisation", "running processes", "clock event reasons", "energy counter"}
    gpu = telemetry.gpu_contention(sampler, {"epoch 1"})
    assert gpu["foreign_processes"] is None and gpu["throttle_reasons"] is None
    assert gpu["reason"] == "clock event reasons: NVML: Not Supported; running processes: NVML: Not Supported"
    summary = telemetry.contention_summary(sampler.rows, {"epoch 1"}, gpu=gpu)
    assert summary["unavailable"]["gpu"] == gpu["reason"] and contention.reasons(summary, LIMITS) == []


def test_the_older_throttle_query_stands_in_where_the_driver_lacks_the_newer_one():
    nvml = FakeNVML(
        [50],
        [1000],
        [200_000],
        throttle=[FakeNVML.nvmlClocksEventReasonSwThermalSlowdown],
        missing={"nvmlDeviceGetCurrentClocksEventReasons"},
    )
    clock = Clock()
    sampler = telemetry.Sampler(rate_hz=10, nvml=nvml, clock=clock, cpu_clock=clock)
    drive(sampler, clock, [(1.0, lambda: sampler.mark("epoch 1")), (2.0, sampler.sample)])
    assert telemetry.gpu_contention(sampler, {"epoch 1"})["throttle_reasons"] == ["sw_thermal"]


def test_a_cpu_job_has_no_gpu_findings():
    sampler = telemetry.Sampler(rate_hz=10).start()
    sampler.mark("epoch 1")
    sampler.stop()
    assert telemetry.gpu_contention(sampler, {"epoch 1"}) is None
    assert all(row["gpu_foreign_processes"] is None and row["gpu_processes"] is None for row in sampler.rows)


class Waiting:
    """A fake clock that sleeping advances, and the log lines said."""

    def __init__(self):
        self.t, self.slept, self.said = 0.0, [], []

    def clock(self):
        return self.t

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.t += seconds


@pytest.fixture
def other_process():
    """A real process outside the job's tree (the job's tree here: this test process alone)."""
    process = subprocess.Popen(["sleep", "60"])
    comm = Path("/proc", str(process.pid), "comm")
    while comm.read_text().strip() != "sleep":  # the child has its parent's name until it execs
        time.sleep(0.001)
    yield process.pid
    process.kill()
    process.wait()


def wait(nvml, policy, timeout_s, waiting):
    return contention.wait_for_free_gpu(
        nvml, ("gpu", 0), {100, 101}, policy, timeout_s, waiting.said.append, sleep=waiting.sleep, clock=waiting.clock
    )


def test_a_free_gpu_or_one_holding_only_the_jobs_processes_needs_no_wait():
    waiting = Waiting()
    assert wait(FakeNVML([0], [0], [0], processes=[[(101, 900)]]), "wait", 300, waiting) == []
    assert waiting.slept == [] and waiting.said == []


def test_wait_polls_until_the_other_process_leaves(other_process):
    waiting = Waiting()
    nvml = FakeNVML([0], [0], [0], processes=[[(other_process, 1024)], [(other_process, 1024)], []])
    assert wait(nvml, "wait", 300, waiting) == []
    assert waiting.slept == [contention.GPU_POLL_S] * 2
    assert len(waiting.said) == 1 and f"pid {other_process} (sleep, 1024 MiB)" in waiting.said[0]


def test_wait_gives_up_after_the_timeout_naming_the_process_and_the_fix(other_process):
    waiting = Waiting()
    with pytest.raises(contention.GpuBusy) as busy:
        wait(FakeNVML([0], [0], [0], processes=[[(other_process, 1024), (880001, None)]]), "wait", 12, waiting)
    assert sum(waiting.slept) == pytest.approx(12)
    message = str(busy.value)
    assert f"pid {other_process} (sleep, 1024 MiB)" in message and "pid 880001 (name not visible here" in message
    assert "after waiting 12 s" in message and "stop them" in message
    assert "contention.foreign_gpu_process to refuse" in message and "record" in message


def test_refuse_raises_at_once_and_record_lets_the_run_go(other_process):
    nvml = FakeNVML([0], [0], [0], processes=[[(other_process, 512)]])
    waiting = Waiting()
    with pytest.raises(contention.GpuBusy, match=f"in use by pid {other_process} \\(sleep, 512 MiB\\): stop it"):
        wait(nvml, "refuse", 300, waiting)
    assert waiting.slept == []
    found = wait(nvml, "record", 300, waiting)
    assert found == [{"pid": other_process, "name": "sleep", "used_memory_mb": 512.0}] and waiting.slept == []
    assert "contention.foreign_gpu_process: record" in waiting.said[-1]


def test_a_gpu_whose_processes_cannot_be_listed_is_not_waited_for():
    waiting = Waiting()
    nvml = FakeNVML([0], [0], [0], unsupported={"nvmlDeviceGetComputeRunningProcesses"})
    assert wait(nvml, "refuse", 300, waiting) == []
    assert "cannot be listed (NVML: Not Supported)" in waiting.said[0]
