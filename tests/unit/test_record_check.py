"""A record stands for its run only while the tables its run wrote beside it agree with it (dlbench/record_check.py):
each tampering below is named when the record is read, and the aggregation counts the run as an error."""

import json
import os

import pytest
from dlbench import record as run_record
from dlbench import record_check
from dlbench.study.analysis.records import read_records
from runs import EPOCHS, write_run


def problem(path):
    return record_check.problem(path, json.loads(path.read_text()))


def test_a_record_as_its_run_wrote_it_stands(tmp_path):
    path = write_run(tmp_path / "run")
    assert problem(path) is None
    assert run_record.read(path)["time_to_target_s"] == pytest.approx(sum(epoch[0] for epoch in EPOCHS))


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"train_images_per_s": 1000 * 1024 / 1.03}, "its train_images_per_s 994174.7572815533 does not follow from"),
        ({"first_epoch_images_per_s": 1.0}, "its first_epoch_images_per_s 1.0 does not follow"),
        ({"time_to_target_s": 0.5}, "its time_to_target_s 0.5 does not follow from its epochs.csv (1.41"),
        ({"final_test_accuracy": 0.99}, "its final_test_accuracy 0.99 does not follow"),
        ({"images_per_epoch": 1024}, "its epochs.csv counts other images per epoch than the record's"),
        ({"extra_steady_epochs_s": [-0.27, 0.25]}, "its extra_steady_epochs_s[0] -0.27 is below its least value 0"),
        ({"epoch_train_s": [0.9, 0.25]}, "its epochs.csv holds 3 epoch(s) whose train_s differ from the record's"),
        ({"model_flops_utilisation": 3.2}, "its model_flops_utilisation 3.2 is above its greatest value 1"),
        ({"train_flops_per_s": 1e12}, "its train_flops_per_s 1e+12 is more than 2 CPU cores can compute (8e+11"),
        ({"extra_steady_epochs_s": 5}, "cannot be checked (TypeError"),
    ],
)
def test_a_figure_its_epochs_contradict_is_named_when_the_record_is_read(tmp_path, changes, reason):
    path = write_run(tmp_path / "run", **changes)
    with pytest.raises(run_record.UnreadableRecord, match="^record inconsistent: ") as raised:
        run_record.read(path)
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"status": "error", "train_images_per_s": -5.0}, "its train_images_per_s -5.0 is below its least value 0"),
        ({"status": "error", "gpu_utilisation_mean": 150.0}, "its gpu_utilisation_mean 150.0 is above its greatest"),
        ({"status": "error", "learning_rate": 0.0}, "its learning_rate 0.0 is not above its bound 0"),
        ({"status": "error", "phases_s": {"imports": -1.0}}, "its phases_s.imports -1.0 is below its least value 0"),
        ({"status": "error", "cpu_energy_j": float("inf")}, "its cpu_energy_j inf is not finite"),
        ({"status": "error", "epoch_eval_s": [float("nan")]}, "its epoch_eval_s[0] nan is not finite"),
        (
            {"status": "error", "contention": {"steal_share": 1.5, "unavailable": {}}},
            "its contention.steal_share 1.5 is above its greatest value 1",
        ),
        ({"status": "error", "epoch_eval_s": [None]}, "its epoch_eval_s[0] None is not a number"),
        ({"status": "error", "train_images_per_s": "fast"}, "its train_images_per_s 'fast' is not a number"),
        (
            {"status": "error", "contended_attempts": [{"train_images_per_s": -1.0}]},
            "its contended_attempts[0].train_images_per_s -1.0 is below its least value 0",
        ),
    ],
)
def test_a_number_outside_the_bounds_its_field_declares_is_named_whatever_the_status(tmp_path, changes, reason):
    """The bounds come from the record's typed fields (dlbench/record_fields.py), the check reads them from there:
    a failed run's figures too, nested ones by their path."""
    path = write_run(tmp_path / "run", **changes)
    with pytest.raises(run_record.UnreadableRecord, match="^record inconsistent: ") as raised:
        run_record.read(path)
    assert reason in str(raised.value)


def test_a_table_cut_changed_or_gone_is_named_and_the_run_counts_as_an_error(tmp_path):
    """epochs.csv cut to 60 bytes (its header, partly): a digest that no longer matches; in an older record without
    digests, its epochs that no longer agree. A table gone is named. The aggregation keeps each run as an error."""
    cut, older, gone = (write_run(tmp_path / name / "rep1") for name in ("cut", "older", "gone"))
    os.truncate(cut.with_name("epochs.csv"), 60)
    assert (
        problem(cut) == "its epochs.csv changed since the run wrote it (sha256 differs from the record's tables_sha256)"
    )
    older.write_text(json.dumps(json.loads(older.read_text()) | {"tables_sha256": {}}))
    os.truncate(older.with_name("epochs.csv"), 60)
    assert problem(older).startswith("its epochs.csv holds 0 epoch(s)")
    gone.with_name("telemetry.csv").unlink()
    assert problem(gone) == "its telemetry.csv is gone"
    read = dict(read_records([cut, older, gone, write_run(tmp_path / "whole" / "rep1")]))
    assert [record["status"] for record in read.values()] == ["error", "error", "error", "ok"]
    assert all(run_record.stands_in(read[path]) for path in (cut, older, gone))
    assert read[gone]["error"] == f"record inconsistent: {gone}: its telemetry.csv is gone"


def test_a_failed_run_is_checked_for_its_tables_not_for_its_figures(tmp_path):
    path = write_run(tmp_path / "run", status="error", train_images_per_s=None, time_to_target_s=None)
    assert problem(path) is None
