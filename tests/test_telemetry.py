"""The telemetry sampler and its summaries, with a scripted fake NVML in place of a GPU."""

import time

import pytest
from dlbench import record, telemetry
from fake_nvml import FakeNVML


def test_sampler_records_gpu_readings_phases_and_host_figures(tmp_path):
    nvml = FakeNVML(utilisation=[10, 90], memory_mb=[1000, 3000], power_mw=[100_000, 300_000])
    sampler = telemetry.Sampler(rate_hz=100, nvml=nvml).start()
    sampler.mark("epoch 1")
    time.sleep(0.05)
    sampler.mark("epoch 2")
    sum(i * i for i in range(200_000))  # some CPU work in the steady phase
    sampler.stop()
    phases = [row[1] for row in sampler.rows]
    assert phases[0] == "start" and "epoch 1" in phases and phases[-1] == "epoch 2"
    assert len(sampler.rows) >= 5  # 100 Hz over > 50 ms, plus the boundary samples
    assert all(row[4] in (1000, 3000) for row in sampler.rows) and all(row[9] > 0 for row in sampler.rows)
    sampler.write_trace(tmp_path / "trace.csv")
    header, first = (tmp_path / "trace.csv").read_text().splitlines()[:2]
    assert header.split(",") == list(telemetry.TRACE_COLUMNS)
    assert first.split(",")[1] == "start"


def row(t, phase, util, memory, power, cpu=50.0):
    return (t, phase, util, util / 2, memory, power, 1980, 55, cpu, 100.0)


def test_summaries_use_steady_epochs_and_integrate_power_within_training_phases():
    rows = [row(0.0, "epoch 1", 20, 500, 100.0), row(1.0, "epoch 1", 20, 900, 100.0),
            row(1.0, "eval 1", 5, 900, 500.0), row(3.0, "eval 1", 5, 900, 500.0),
            row(3.0, "epoch 2", 80, 1200, 200.0), row(4.0, "epoch 2", 100, 1200, 300.0),
            row(5.0, "epoch 2", 90, 1100, 300.0)]  # fmt: skip
    summary = telemetry.summarise(rows, {"epoch 2"}, {"epoch 1", "epoch 2"}, images_trained=1000)
    assert summary["gpu_utilisation_mean"] == pytest.approx(90.0)
    assert summary["gpu_utilisation_p95"] == 100
    assert summary["gpu_memory_peak_mb"] == 1200
    # epoch 1: 1 s at 100 W; epoch 2: 250 J + 300 J; the evaluation in between is excluded
    assert summary["gpu_energy_j"] == pytest.approx(100.0 + 250.0 + 300.0)
    assert summary["gpu_energy_per_image_j"] == pytest.approx(0.65)
    assert summary["gpu_power_mean_w"] == pytest.approx((100 + 100 + 200 + 300 + 300) / 5)
    assert summary["cpu_utilisation_mean"] == pytest.approx(50.0)


def test_without_a_gpu_the_gpu_summaries_are_null():
    rows = [(0.0, "epoch 2", *(None,) * 6, 40.0, 100.0), (1.0, "epoch 2", *(None,) * 6, 60.0, 120.0)]
    summary = telemetry.summarise(rows, {"epoch 2"}, {"epoch 2"}, images_trained=10)
    assert summary["gpu_utilisation_mean"] is None and summary["gpu_energy_j"] is None
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


@pytest.mark.parametrize(("wheels", "expected"), [
    ([("torch", "2.13.0"), ("nvidia-cuda-runtime-cu12", "12.8.90"), ("nvidia_cudnn_cu12", "9.10.2.21")],
     ("12.8.90", "9.10.2.21")),
    ([("mxnet-cu112", "1.9.1"), ("numpy", "1.23.5")], ("11.2", None)),
    ([("tensorflow-cpu", "2.21.0")], (None, None)),
])  # fmt: skip
def test_cuda_and_cudnn_versions_come_from_the_envs_wheels(wheels, expected):
    assert record.cuda_libraries([Wheel(*wheel) for wheel in wheels]) == expected


def test_cpu_utilisation_is_never_divided_by_a_boundary_samples_sliver_of_time():
    """Marks sample on both sides of a boundary microseconds apart: no CPU figure there, and none above 100%."""
    wall, cpu = iter([0.1, 0.100001, 0.100002, 0.2, 0.3]), iter([0.1, 0.1001, 0.1002, 0.19, 0.29])
    sampler = telemetry.Sampler(rate_hz=10, clock=lambda: next(wall), cpu_clock=lambda: next(cpu))
    sampler.cores, sampler.origin, sampler._last = 1, 0.0, (0.0, 0.0)
    sampler.sample()  # 0.1 s of wall time, 0.1 s of CPU: 100%
    sampler.mark("epoch 1")  # two samples 1 µs apart: 100 µs of CPU over 1 µs would read 10,000%
    sampler.sample()  # 0.1 s after the last figure
    sampler.sample()
    assert [row[8] for row in sampler.rows] == [pytest.approx(100.0), None, None, pytest.approx(90.0), pytest.approx(100.0)]
