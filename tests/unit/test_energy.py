"""Energy and GPU provenance: NVML's energy counter or power integration, the idle baseline and the energy above it,
CPU package energy from a fake powercap tree, and the GPU's settings, with a fake NVML in place of a GPU."""

import time
from pathlib import Path

import pytest
from dlbench import rapl, run_telemetry, telemetry
from fake_nvml import FakeNVML


def row(t, phase, power, energy_mj=None, cpu_energy_j=None):
    return {
        **dict.fromkeys(telemetry.TRACE_COLUMNS),
        "t_s": t,
        "phase": phase,
        "power_w": power,
        "gpu_energy_mj": energy_mj,
        "cpu_energy_j": cpu_energy_j,
        "cpu_s": 0.0,
    }


# 2 s idle at 50 W, then epoch 1 (1 s), an evaluation, epoch 2 (2 s). The counter (mJ) grows by what the GPU drew,
# including a spike between samples that the integration of the samples misses.
ROWS = [
    row(0.0, telemetry.IDLE_PHASE, 50.0, 1_000_000, 0.0),
    row(2.0, telemetry.IDLE_PHASE, 50.0, 1_100_000, 60.0),
    row(2.0, "imports", 50.0, 1_100_000, 60.0),
    row(3.0, "imports", 50.0, 1_150_000, 90.0),
    row(3.0, "epoch 1", 100.0, 1_150_000, 90.0),
    row(4.0, "epoch 1", 100.0, 1_300_000, 150.0),
    row(4.0, "eval 1", 500.0, 1_300_000, 150.0),
    row(5.0, "eval 1", 500.0, 1_800_000, 200.0),
    row(5.0, "epoch 2", 200.0, 1_800_000, 200.0),
    row(7.0, "epoch 2", 200.0, 2_250_000, 320.0),
]
TRAINING = {"epoch 1", "epoch 2"}


def test_the_energy_counter_is_used_where_the_gpu_has_one():
    summary = telemetry.summarise(ROWS, {"epoch 2"}, TRAINING, images_trained=100, cores=1)
    # epoch 1: 150 J, epoch 2: 450 J by the counter; the evaluation between them is left out
    assert summary["gpu_energy_source"] == "nvml energy counter"
    assert summary["gpu_energy_j"] == pytest.approx(600.0) and summary["gpu_energy_per_image_j"] == pytest.approx(6.0)
    assert summary["gpu_idle_power_w"] == pytest.approx(50.0)
    assert summary["gpu_energy_above_idle_j"] == pytest.approx(600.0 - 50.0 * 3)
    assert summary["cpu_energy_j"] == pytest.approx(60.0 + 120.0)


def test_power_is_integrated_where_the_gpu_has_no_energy_counter():
    rows = [dict(each, gpu_energy_mj=None) for each in ROWS]
    summary = telemetry.summarise(rows, {"epoch 2"}, TRAINING, images_trained=100, cores=1)
    assert summary["gpu_energy_source"] == "power integration"
    assert summary["gpu_energy_j"] == pytest.approx(100.0 + 400.0)
    assert summary["gpu_idle_power_w"] == pytest.approx(50.0)
    assert summary["gpu_energy_above_idle_j"] == pytest.approx(500.0 - 150.0)


def test_without_an_idle_baseline_there_is_no_energy_above_idle():
    rows = [each for each in ROWS if each["phase"] != telemetry.IDLE_PHASE]
    summary = telemetry.summarise(rows, {"epoch 2"}, TRAINING, images_trained=100, cores=1)
    assert summary["gpu_energy_j"] == pytest.approx(600.0)
    assert summary["gpu_idle_power_w"] is None and summary["gpu_energy_above_idle_j"] is None


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_the_sampler_traces_the_energy_counter_and_the_idle_baseline():
    # One counter reading per sample (mJ): idle at 60 W from t = 0 to 2, 700 J in epoch 1 (t = 3 to 5).
    counter = [0, 0, 60_000, 120_000, 120_000, 150_000, 150_000, 850_000, 900_000]
    nvml = FakeNVML([50], [1000], [60_000], energy_mj=counter)
    clock = Clock()
    sampler = telemetry.Sampler(rate_hz=10, nvml=nvml, clock=clock, cpu_clock=clock)
    sampler.origin, sampler._last = 0.0, (0.0, 0.0, None)
    for t, step in (
        (0.0, lambda: sampler.mark(telemetry.IDLE_PHASE)),
        (1.0, sampler.sample),
        (2.0, lambda: sampler.mark("imports")),
        (3.0, lambda: sampler.mark("epoch 1")),
        (5.0, lambda: sampler.mark("eval 1")),
    ):
        clock.t = t
        step()
    assert [each["gpu_energy_mj"] for each in sampler.rows] == counter
    summary = telemetry.summarise(sampler.rows, {"epoch 1"}, {"epoch 1"}, images_trained=70, cores=1)
    assert summary["gpu_energy_source"] == "nvml energy counter" and summary["gpu_energy_j"] == pytest.approx(700.0)
    assert summary["gpu_idle_power_w"] == pytest.approx(60.0)
    assert summary["gpu_energy_above_idle_j"] == pytest.approx(700.0 - 60.0 * 2)


def powercap(root, zones):
    """A powercap tree: {directory: (name, energy_uj, max_energy_range_uj)}; a name of None leaves the name out."""
    for directory, (name, energy, span) in zones.items():
        zone = root / directory
        zone.mkdir(parents=True)
        if name is not None:
            (zone / "name").write_text(f"{name}\n")
        (zone / "energy_uj").write_text(f"{energy}\n")
        (zone / "max_energy_range_uj").write_text(f"{span}\n")
    return root


# Two packages, a subzone of the first, the platform zone and the MMIO view of package 0: only the packages count.
ZONES = {
    "intel-rapl": (None, 0, 0),
    "intel-rapl:0": ("package-0", 990_000, 1_000_000),
    "intel-rapl:0:0": ("core", 5_000, 1_000_000),
    "intel-rapl:1": ("package-1", 500, 2_000_000),
    "intel-rapl:2": ("psys", 7_000, 1_000_000),
    "intel-rapl-mmio:0": ("package-0", 990_000, 1_000_000),
}


def set_energy(root, directory, energy):
    (root / directory / "energy_uj").write_text(f"{energy}\n")


def test_rapl_sums_the_packages_and_undoes_the_counters_wraparound(tmp_path):
    root = powercap(tmp_path / "powercap", ZONES)
    meter, reason = rapl.rapl_meter(root)
    assert reason is None and meter.source == "RAPL through powercap: intel-rapl:0, intel-rapl:1"
    set_energy(root, "intel-rapl:0", 10_000)  # wrapped: 990,000 -> 1,000,000 = 0 -> 10,000
    set_energy(root, "intel-rapl:1", 1_500)
    set_energy(root, "intel-rapl:0:0", 900_000)  # a subzone: inside its package's figure already
    assert meter.joules() == pytest.approx((20_000 + 1_000) / 1e6)
    set_energy(root, "intel-rapl:0", 30_000)
    assert meter.joules() == pytest.approx((40_000 + 1_000) / 1e6)


@pytest.mark.parametrize(
    ("zones", "expected"),
    [
        (None, "is not present on this machine"),
        ({"intel-rapl:0": ("psys", 0, 1_000)}, "has no RAPL package zone"),
    ],
)
def test_without_rapl_packages_the_reason_is_given(tmp_path, zones, expected):
    root = powercap(tmp_path / "powercap", zones) if zones else tmp_path / "powercap"
    meter, reason = rapl.rapl_meter(root)
    assert meter is None and expected in reason and str(root) in reason


def test_a_counter_readable_by_root_only_is_named_with_the_reason(tmp_path, monkeypatch):
    root = powercap(tmp_path / "powercap", ZONES)
    read_text = Path.read_text

    def root_only(path, *args, **kwargs):
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", root_only)
    meter, reason = rapl.rapl_meter(root)
    counter = root / "intel-rapl:0" / "energy_uj"
    assert meter is None and reason == f"{counter} is not readable (Permission denied; root only since Linux 5.10)"


def test_the_sampler_traces_cpu_energy_and_a_counter_lost_mid_run_gives_the_reason(tmp_path):
    root = powercap(tmp_path / "powercap", ZONES)
    meter, _ = rapl.rapl_meter(root)
    clock = Clock()
    sampler = telemetry.Sampler(rate_hz=10, clock=clock, cpu_clock=clock, rapl=meter)
    sampler.origin, sampler._last = 0.0, (0.0, 0.0, None)
    sampler.mark("epoch 1")
    set_energy(root, "intel-rapl:1", 1_500_500)  # 1.5 J more
    clock.t = 1.0
    sampler.mark("eval 1")
    summary = telemetry.summarise(sampler.rows, {"epoch 1"}, {"epoch 1"}, images_trained=10, cores=1)
    assert summary["cpu_energy_j"] == pytest.approx(1.5)
    assert sampler.cpu_energy_origin() == {"cpu_energy_source": meter.source, "cpu_energy_reason": None}
    (root / "intel-rapl:1" / "energy_uj").unlink()
    sampler.sample()
    assert sampler.rows[-1]["cpu_energy_j"] is None
    origin = sampler.cpu_energy_origin()
    assert origin["cpu_energy_source"] is None
    assert "intel-rapl:1/energy_uj is not readable" in origin["cpu_energy_reason"]


def test_the_gpu_settings_go_into_the_provenance():
    assert telemetry.gpu_provenance(FakeNVML([0], [0], [0]), ("gpu", 0)) == {
        "gpu_power_limit_w": 700.0,
        "gpu_max_sm_clock_mhz": 1980,
        "gpu_max_memory_clock_mhz": 2619,
        "gpu_applications_sm_clock_mhz": 1755,
        "gpu_applications_memory_clock_mhz": 2619,
        "gpu_ecc": True,
        "gpu_mig": False,
        "gpu_persistence": True,
        "gpu_provenance_unavailable": [],
    }


def test_gpu_settings_nvml_does_not_report_are_null_with_the_reason():
    nvml = FakeNVML(
        [0],
        [0],
        [0],
        unsupported={"nvmlDeviceGetEccMode", "nvmlDeviceGetMigMode"},
        missing={"nvmlDeviceGetApplicationsClock"},
    )
    settings = telemetry.gpu_provenance(nvml, ("gpu", 0))
    assert settings["gpu_ecc"] is None and settings["gpu_mig"] is None and settings["gpu_power_limit_w"] == 700.0
    assert settings["gpu_provenance_unavailable"] == [
        "gpu_applications_sm_clock_mhz: Function Not Found",
        "gpu_applications_memory_clock_mhz: Function Not Found",
        "gpu_ecc: Not Supported",
        "gpu_mig: Not Supported",
    ]


def test_a_gpu_run_records_energy_idle_baseline_provenance_and_gpu_contention(tmp_path, monkeypatch):
    """A training run's start and end of telemetry (dlbench/run_telemetry.py) on a fake GPU: an idle baseline before
    the imports, the GPU's settings in the provenance, energy by the counter, CPU energy's reason on this machine, the
    GPU part of contention."""
    power_w = 100.0
    nvml = FakeNVML([50], [1000], [power_w * 1000])
    # An energy counter that grows at 100 W as the real clock runs, whichever sample reads it.
    monkeypatch.setattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", lambda handle: time.perf_counter() * power_w * 1e3)
    monkeypatch.setattr(run_telemetry, "load_nvml", lambda: (nvml, None))
    monkeypatch.setattr(run_telemetry, "rapl_meter", lambda: rapl.rapl_meter(tmp_path / "no-powercap"))
    record = {"provenance": {}}
    sampler = run_telemetry.start_telemetry({"device": "gpu", "telemetry_hz": 50}, record, idle_seconds=0.2)
    sampler.mark("imports")
    sampler.mark("epoch 1")
    time.sleep(0.2)
    sampler.mark("eval 1")
    run_telemetry.record_telemetry(sampler, record, [{"epoch": 1, "images": 100}], tmp_path / "telemetry.csv")
    assert record["provenance"]["gpu_power_limit_w"] == 700.0 and record["provenance"]["gpu_ecc"] is True
    phases = [each["phase"] for each in sampler.rows]
    assert phases.index(telemetry.IDLE_PHASE) < phases.index("imports")
    assert record["gpu_energy_source"] == "nvml energy counter"
    assert record["gpu_energy_j"] == pytest.approx(power_w * 0.2, rel=0.25)
    # The sampler reads its clock and the counter a moment apart: on a loaded machine, a few percent of a 0.2 s window
    # (a missing or zero baseline would be far outside these bounds).
    assert record["gpu_idle_power_w"] == pytest.approx(power_w, rel=0.05)
    assert record["gpu_energy_above_idle_j"] == pytest.approx(0.0, abs=1.0)
    assert record["cpu_energy_j"] is None and record["cpu_energy_source"] is None
    assert "no-powercap is not present on this machine" in record["cpu_energy_reason"]
    assert record["contention"]["foreign_gpu_processes"] == [] and record["contention"]["throttle_reasons"] == []
