"""What the runs trained on and for how long (the workload table, from the report fixture's study): each dataset as the
runs read it, steps per epoch, the epoch after which the target accuracy was reached, whole trainings and the first
epoch's share; and the machine as a record describes it."""

import pytest
from dlbench import record
from dlbench.study.analysis.records import read_records, record_machines, runs_table, target_epoch
from dlbench.study.analysis.summary import summary_table
from dlbench.study.analysis.workload import workload_table
from report_fixture import DATASETS, write_records


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    records = read_records(write_records(tmp_path_factory.mktemp("runs")))
    return workload_table(runs_table(records, record_machines(records)))


def test_each_group_describes_its_dataset_and_steps_per_epoch(workload):
    digits = workload[(workload["dataset"] == "digits") & (workload["batch_size"] == 64)].iloc[0]
    assert (digits["dataset_train_images"], digits["dataset_test_images"], digits["dataset_classes"]) == (1437, 360, 10)
    assert digits["dataset_image_shape"] == "8x8x1" and digits["target_accuracy"] == 0.9
    assert digits["steps_per_epoch"] == 1024 // 64  # the fixture's epochs are 1,024 images in whole batches
    assert set(workload["dataset_image_shape"].dropna()) == {
        "x".join(map(str, dataset["image_shape"])) for dataset in DATASETS.values()
    }


def test_groups_whose_every_run_reached_the_target_after_epoch_one_say_so(workload):
    """On synthetic data the fixture's CPU runs reach the target after their first epoch: time to target is the first
    epoch's time there; elsewhere they reach it after the third."""
    finished = workload[workload["runs_ok"] > 0]
    first = finished[finished["target_at_first_epoch"]]
    assert set(zip(first["dataset"], first["device"])) == {("synthetic-32x32x3", "cpu")}
    later = finished[~finished["target_at_first_epoch"]]
    assert (later["target_epoch_max"] == 3).all() and (later["runs_reached_target"] == later["runs_ok"]).all()
    failed = workload[workload["runs_ok"] == 0].iloc[0]  # the panel whose every run ran out of memory
    assert not failed["target_at_first_epoch"] and failed["runs_reached_target"] == 0


def test_whole_trainings_and_the_first_epochs_share(workload):
    """The fixture's first epoch takes twice a steady one (half of three epochs), keras-3-jax's ResNet-20 twenty times
    (the 2- and 4-replica groups' median run is one of its)."""
    digits = workload[workload["dataset"] == "digits"]
    assert digits["first_epoch_share_median"].tolist() == pytest.approx([0.5] * len(digits))
    assert (digits["training_s_min"] < digits["training_s_max"]).all()
    replicated = workload[workload["replicas"] > 1]
    assert (replicated["first_epoch_share_median"] > 0.5).all()


def test_the_epoch_the_target_was_reached_is_read_from_the_cumulative_training_time():
    epochs = {"epoch_train_s": [0.30000000000000004, 0.1, 0.1]}
    assert target_epoch(dict(epochs, time_to_target_s=0.30000000000000004)) == 1
    assert target_epoch(dict(epochs, time_to_target_s=0.30000000000000004 + 0.1 + 0.1)) == 3
    assert target_epoch(dict(epochs, time_to_target_s=None)) is None


def test_the_machine_is_described_by_its_cores_smt_memory_and_generation(monkeypatch, tmp_path):
    """A virtual machine's "AMD EPYC" with two threads on each of two cores: the record says 2 physical cores and the
    family, model and stepping that tell the generation."""
    cpu = {"model name": "AMD EPYC", "cpu family": "25", "model": "17", "stepping": "1", "physical id": "0"}
    cpus = [dict(cpu, **{"core id": str(core)}) for core in (0, 0, 1, 1)]
    monkeypatch.setattr(record, "cpuinfo", lambda: cpus)
    assert record.cpu_model() == "AMD EPYC"
    assert record.cpu_generation() == "family 25, model 17, stepping 1"
    assert record.physical_cores() == 2
    monkeypatch.setattr(record, "cpuinfo", lambda: [{"model name": "Apple M2"}])
    assert record.cpu_generation() is None and record.physical_cores() is None
    assert isinstance(record.memory_mb(), int)


def test_time_to_target_is_never_below_the_first_epoch_in_the_statistic_both_are_drawn_with(tmp_path):
    """The end-to-end figure draws both as means over repeats: where every repeat reached the target, its time to
    target includes its first epoch, so the mean of one is never below the mean of the other."""
    records = read_records(write_records(tmp_path))
    summary = summary_table(runs_table(records, record_machines(records)))
    reached = summary[(summary["runs_ok"] > 0) & (summary["time_to_target_runs"] == summary["runs_ok"])]
    assert len(reached) and (reached["time_to_target_s_mean"] >= reached["first_epoch_s_mean"]).all()
    first = reached[reached["dataset"].eq("synthetic-32x32x3") & reached["device"].eq("cpu")]
    assert first["time_to_target_s_mean"].tolist() == pytest.approx(first["first_epoch_s_mean"].tolist())
