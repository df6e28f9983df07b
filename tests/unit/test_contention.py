"""Contention: the machine's counters read from /proc, judged against the config's limits, and contended runs run
again; on fake /proc trees (a busy loop beside a real training job: tests/frameworks/test_contention_runs.py)."""

import pytest
from dlbench import contention, telemetry
from runs import LENIENT

TICKS = contention.CLOCK_TICKS
LIMITS = dict(LENIENT, max_foreign_cpu_cores=0.1, max_steal_share=0.05, retries=2, settle_seconds=0)


def stat_line(user=0, nice=0, system=0, idle=0, iowait=0, irq=0, softirq=0, steal=0):
    return f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"


def fake_process(proc, pid, ppid, ticks, name="python"):
    """/proc/<pid>/stat with `ticks` of user time; the name holds a space and a parenthesis, as comm may."""
    folder = proc / str(pid)
    folder.mkdir(parents=True, exist_ok=True)
    fields = ["S", ppid, *[0] * 9, ticks, 0, 0, 0, *[0] * 20]
    (folder / "stat").write_text(f"{pid} ({name} (x)) {' '.join(map(str, fields))}\n")


def test_system_counters_are_busy_steal_and_total_seconds(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(stat_line(user=300, nice=10, system=50, idle=1000, iowait=20, irq=5, softirq=15, steal=100))
    busy, steal, total = contention.system_cpu_seconds(stat)
    assert (busy, steal, total) == pytest.approx((380 / TICKS, 100 / TICKS, 1500 / TICKS))


def test_unreadable_or_foreign_counters_say_why(tmp_path):
    with pytest.raises(contention.Unavailable, match="is not readable"):
        contention.system_cpu_seconds(tmp_path / "missing")
    (tmp_path / "stat").write_text("intr 1 2 3\n")
    with pytest.raises(contention.Unavailable, match="no aggregate cpu line"):
        contention.system_cpu_seconds(tmp_path / "stat")
    meter, reason = telemetry.cpu_meter()  # this machine's /proc is readable
    assert meter is not None and reason is None


def test_the_process_tree_is_the_root_and_all_its_descendants(tmp_path):
    """pid 5 (Snakemake) launched 10 (the job), which started 11, which started 12; 20 is someone else's."""
    for pid, ppid, ticks in ((1, 0, 5), (5, 1, 30), (10, 5, 100), (11, 10, 200), (12, 11, 50), (20, 1, 999)):
        fake_process(tmp_path, pid, ppid, ticks)
    assert contention.tree_members(10, tmp_path) == {10, 11, 12}
    assert contention.launchers(10, contention.parents(tmp_path)) == [5]
    assert contention.process_stat(11, tmp_path) == (10, pytest.approx(200 / TICKS), 0.0)
    assert contention.process_stat(99, tmp_path) is None  # exited
    meter = contention.CpuMeter(root=10, proc=tmp_path, stat=tmp_path / "missing")
    assert meter.tree_seconds() == pytest.approx(350 / TICKS) and meter.launcher_seconds() == pytest.approx(30 / TICKS)


def test_foreign_cpu_is_the_machines_busy_time_minus_the_trees_and_its_launchers():
    start = {"t": 0.0, "busy_s": 10.0, "steal_s": 1.0, "total_s": 100.0, "tree_s": 5.0, "launchers_s": 3.0}
    end = {"t": 2.0, "busy_s": 14.7, "steal_s": 1.2, "total_s": 104.0, "tree_s": 7.0, "launchers_s": 3.2}
    window = contention.cpu_window(start, end)
    assert window == {
        "window_s": 2.0,
        "foreign_cpu_cores": pytest.approx(1.25),
        "steal_share": pytest.approx(0.05),
        "launcher_cpu_cores": pytest.approx(0.1),
    }
    assert contention.cpu_window(start, dict(end, busy_s=11.0))["foreign_cpu_cores"] == 0.0  # tick rounding


def test_reasons_name_what_crossed_which_limit():
    found = contention.reasons(
        {
            "foreign_cpu_cores": 0.5,
            "steal_share": 0.06,
            "throttle_reasons": ["sw_power_cap", "sw_thermal"],
            "foreign_gpu_processes": [{"pid": 7, "name": "miner", "used_memory_mb": 2048}],
        },
        LIMITS,
    )
    assert found == [
        "other processes used the CPU: 0.50 cores (limit 0.1)",
        "the hypervisor stole CPU time: 6.0% (limit 5%)",
        "another process used the GPU: pid 7 (miner, 2048 MiB)",
        "GPU clocks throttled: sw_thermal",
    ]
    assert contention.reasons({"foreign_cpu_cores": 0.05, "steal_share": 0.0}, LIMITS) == []
    assert contention.reasons({"foreign_cpu_cores": 3.0}, dict(LIMITS, max_foreign_cpu_cores=None)) == []


def clean_or_busy(statuses):
    """try_once for until_clean: records whose window was busy (True) or clean (False), in turn."""
    tries = iter(statuses)

    def try_once():
        busy = next(tries)
        return {"status": "ok", "contention": {"foreign_cpu_cores": 1.0 if busy else 0.0, "steal_share": 0.0}}

    return try_once


def test_a_contended_run_is_run_again_until_clean_and_keeps_its_contended_tries():
    told, set_aside, slept = [], [], []
    record = contention.until_clean(
        clean_or_busy([True, True, False]),
        dict(LIMITS, settle_seconds=4),
        "exp rep 1",
        told.append,
        set_aside.append,
        slept.append,
    )
    assert record["status"] == "ok" and record["attempt"] == 3
    assert [attempt["status"] for attempt in record["contended_attempts"]] == ["contended", "contended"]
    assert set_aside == [1, 2] and slept == [4, 8]  # the wait doubles
    assert (
        told[0].startswith("exp rep 1 contended (other processes used the CPU: 1.00 cores")
        and "retry 1 of 2" in told[0]
    )
    assert told[-1] == "exp rep 1 measured clean on try 3 after 2 contended"


def test_a_run_never_clean_ends_contended_and_says_it_was_not_measured():
    told = []
    record = contention.until_clean(clean_or_busy([True] * 3), LIMITS, "exp rep 2", told.append, sleep=lambda s: None)
    assert record["status"] == "contended" and record["attempt"] == 3 and len(record["contended_attempts"]) == 2
    assert told[-1].startswith("exp rep 2 not measured: machine busy in all 3 tries")


def test_a_failed_run_is_not_judged_contended():
    record = contention.judge({"status": "error", "contention": {"foreign_cpu_cores": 2.0}}, LIMITS)
    assert record["status"] == "error" and record["contention"]["reasons"]


class FakeMeter:
    """Cumulative counters at the test's clock `t`: the tree uses one core throughout, and one foreign core is busy
    from second 1 on."""

    def __init__(self):
        self.t = 0.0

    def reading(self):
        foreign = max(0.0, self.t - 1.0)
        return {
            "t": self.t,
            "busy_s": self.t + foreign,
            "steal_s": 0.0,
            "total_s": 2 * self.t,
            "tree_s": self.t,
            "launchers_s": 0.0,
        }


def test_the_sampler_traces_foreign_cpu_and_sums_it_over_phases():
    meter = FakeMeter()
    sampler = telemetry.Sampler(rate_hz=2, clock=lambda: meter.t, cpu_clock=lambda: meter.t, meter=meter)
    sampler.origin, sampler._last = 0.0, (0.0, 0.0, meter.reading())
    for t, step in (
        (1.0, sampler.sample),
        (1.0, lambda: sampler.mark("epoch 1")),
        (2.0, sampler.sample),
        (2.0, lambda: sampler.mark("epoch 2")),
        (3.0, sampler.sample),
    ):
        meter.t = t
        step()
    assert [row["foreign_cpu_cores"] for row in sampler.rows] == [0.0, None, None, 1.0, None, None, 1.0]
    summary = telemetry.contention_summary(sampler.rows, {"epoch 1", "epoch 2"})
    assert summary["window_s"] == pytest.approx(2.0) and summary["foreign_cpu_cores"] == pytest.approx(1.0)
    assert summary["unavailable"] == {} and summary["foreign_cpu_peak_cores"] == 1.0


def test_without_counters_contention_is_unavailable_with_the_reason():
    sampler = telemetry.Sampler(rate_hz=10, meter=None).start()
    sampler.mark("epoch 1")
    sampler.stop()
    summary = telemetry.contention_summary(sampler.rows, {"epoch 1"}, cpu_unavailable="/proc/stat is not readable")
    assert summary["foreign_cpu_cores"] is None and summary["unavailable"] == {"cpu": "/proc/stat is not readable"}
