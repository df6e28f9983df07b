"""A run's wall time in named parts (dlbench/walltime.py), on a fake clock: the parts of the wrapper and the training
process add up to the wall from the wrapper's start to its record, whatever the retries and exits."""

import pandas as pd
import pytest
from dlbench import walltime
from dlbench.study.analysis.records import wall_columns
from dlbench.study.analysis.summary import run_seconds


class FakeClock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def test_a_timeline_begins_at_its_process_start_and_adds_repeated_parts():
    clock = FakeClock()
    timeline = walltime.Timeline.of_this_process(clock, age=lambda: 0.4)
    timeline.mark("process_start")
    for train_s, eval_s in ((1.5, 0.2), (0.5, 0.1), (0.5, 0.1)):
        clock.advance(train_s)
        timeline.mark("steady_epochs" if train_s < 1 else "first_epoch")
        clock.advance(eval_s)
        timeline.mark("evaluation")
    assert timeline.parts == pytest.approx(
        {"process_start": 0.4, "first_epoch": 1.5, "steady_epochs": 1.0, "evaluation": 0.4}
    )
    assert sum(timeline.parts.values()) == pytest.approx(3.3)


def test_an_unknown_part_is_refused_naming_the_parts():
    with pytest.raises(ValueError, match="unknown wall-time part 'lunch'.*wrapper_start"):
        walltime.Timeline(0.0, FakeClock()).mark("lunch")


def simulated_run(retries):
    """A wrapper and its training process on one fake clock: (the joined parts, the wall from the wrapper's start)."""
    clock = FakeClock()
    wrapper_started = clock()
    clock.advance(0.08)
    wrapper = walltime.Timeline.of_this_process(clock, age=lambda: 0.08)
    wrapper.mark("wrapper_start")
    for attempt in range(retries + 1):  # as run_experiment.py marks each try's launch
        clock.advance(0.01)
        wrapper.mark("retries" if attempt else "wrapper_setup")
        if attempt < retries:
            clock.advance(4.0 + 10.0)  # a contended try and the settle wait after it
    launched = clock()
    clock.advance(0.15)  # the training process's interpreter starts
    training = walltime.Timeline.of_this_process(clock, age=lambda: 0.15)
    training.mark("process_start")
    for part, seconds in (
        ("imports", 1.0),
        ("build", 0.3),
        ("first_epoch", 1.2),
        ("first_evaluation", 0.4),  # the evaluation step's compilation with its first pass
        ("steady_epochs", 0.8),
        ("evaluation", 0.03),
    ):
        clock.advance(seconds)
        training.mark(part)
    clock.advance(0.02)
    training.mark("telemetry")
    clock.advance(0.05)  # its record written, its exit
    ended = clock()
    clock.advance(0.003)
    parts = walltime.joined(wrapper.parts, training.parts, launched, ended, clock() - ended)
    return parts, clock() - wrapper_started


@pytest.mark.parametrize("retries", [0, 2])
def test_the_parts_of_a_run_sum_to_its_wall(retries):
    parts, wall = simulated_run(retries)
    assert sum(parts.values()) == pytest.approx(wall)
    assert list(parts) == [part for part in walltime.PARTS if part in parts]  # in PARTS' order
    assert parts["exit"] == pytest.approx(0.05)
    assert ("retries" in parts) == bool(retries)


def test_harness_seconds_and_efficiency_leave_the_framework_and_the_window_out():
    parts, wall = simulated_run(0)
    framework = 1.0 + 0.3 + 1.2 + 0.4 + 0.8  # the later evaluation (0.03 s) is the harness's
    assert walltime.harness_seconds(parts) == pytest.approx(wall - framework)
    assert walltime.measurement_efficiency(parts) == pytest.approx(0.8 / wall)
    assert walltime.measurement_efficiency({}) is None


def test_a_process_that_died_before_its_record_is_all_exit():
    parts = walltime.joined({"wrapper_start": 0.1, "wrapper_setup": 0.0}, {}, launched=5.0, ended=7.5, teardown=0.01)
    assert parts == {"wrapper_start": 0.1, "wrapper_setup": 0.0, "exit": 2.5, "wrapper_teardown": 0.01}


def test_the_process_age_is_read_from_proc(tmp_path):
    (tmp_path / "self").mkdir()
    ticks = walltime.os.sysconf("SC_CLK_TCK")
    fields = ["S"] + ["0"] * 18 + [str(50 * ticks)]  # field 22: started 50 s after boot
    (tmp_path / "self" / "stat").write_text(f"123 (python (odd) name) {' '.join(fields)} 0 0\n")
    (tmp_path / "uptime").write_text("52.25 99.0\n")
    assert walltime.process_age(str(tmp_path)) == pytest.approx(2.25)
    assert walltime.process_age(str(tmp_path / "missing")) == 0.0


def test_a_run_costs_its_wall_time_and_an_older_record_its_timed_phases():
    """The race's planner and page 1's minutes to decide cost a run at run_wall_s (from its record's wall_s)."""
    parts = {"wrapper_start": 0.1, "imports": 1.0, "first_epoch": 0.5, "steady_epochs": 1.0, "exit": 0.05}
    columns = wall_columns(parts)
    assert columns["run_wall_s"] == pytest.approx(2.65)
    assert columns["harness_s"] == pytest.approx(0.15)
    assert columns["wall_exit_s"] == 0.05
    assert wall_columns({}) == {}
    runs = pd.DataFrame(
        [
            {"phase_imports_s": 1.0, "phase_first_epoch_s": 0.5, "run_wall_s": columns["run_wall_s"]},
            {"phase_imports_s": 1.0, "phase_first_epoch_s": 0.5, "run_wall_s": None},  # an older record
        ]
    )
    assert run_seconds(runs).tolist() == pytest.approx([2.65, 1.5])
