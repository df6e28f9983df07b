"""A record's files are strict JSON and plain CSV: a number that is not finite is written as null (an empty cell). A
run's tables beside its record, which Snakemake does not track, are checked for by the aggregation."""

import dataclasses

import numpy as np
import pytest
from conftest import read_csv
from dlbench import record_fields
from dlbench.io import write_json_atomic
from dlbench.record import EPOCH_COLUMNS, add_epoch, keep_one_target, write_epochs_csv
from dlbench.study.analysis.records import (
    TRACE_MIN_BIN_S,
    Derived,
    read_records,
    record_machines,
    runs_table,
    trace_rows,
)
from dlbench.study.analysis.summary import MEANS, REACHED, STATISTICS, SUMMARISED, summary_table
from dlbench.study.cpus import microarchitecture
from report_fixture import write_records
from runs import strict_json


def test_json_results_hold_null_where_a_number_is_not_finite(tmp_path):
    payload = {
        "loss": float("nan"),
        "curve": [1.5, float("inf"), (float("-inf"), 2)],
        "ok": 3,
        "flag": True,
        "nested": {"deep": [{"value": np.float32("nan"), "fine": np.float32(0.5), "count": np.int64(7)}]},
        "path": tmp_path,
    }
    write_json_atomic(tmp_path / "record.json", payload)
    written = strict_json((tmp_path / "record.json").read_text())
    assert written == {
        "loss": None,
        "curve": [1.5, None, [None, 2]],
        "ok": 3,
        "flag": True,
        "nested": {"deep": [{"value": None, "fine": 0.5, "count": 7}]},
        "path": str(tmp_path),
    }
    assert payload["loss"] != payload["loss"]  # the caller's data is left as it was
    write_epochs_csv(
        tmp_path / "epochs.csv",
        [
            dict(
                epoch=1,
                train_s=0.5,
                eval_s=0.1,
                train_loss=float("nan"),
                test_loss=np.float32("inf"),
                test_accuracy=0.1,
                images=64,
                images_per_s=128.0,
            )
        ],
    )
    assert read_csv(tmp_path / "epochs.csv") == [
        {
            "epoch": "1",
            "train_s": "0.5",
            "eval_s": "0.1",
            "train_loss": "",
            "test_loss": "",
            "test_accuracy": "0.1",
            "images": "64",
            "images_per_s": "128.0",
        }
    ]


def test_a_short_runs_trace_is_binned_into_means_of_at_least_half_a_second(tmp_path):
    """At 10 Hz a CPU percentage flickers between its levels sample by sample: a 3-second run is drawn from
    6 means of 5 samples each, not from 400 bins of single samples."""
    samples = 30
    rows = [f"{index / 10},train,,,,{100 if index % 2 else 0},500" for index in range(samples)]
    header = "t_s,phase,gpu_util_pct,gpu_memory_mb,power_w,cpu_util_pct,rss_mb\n"
    (tmp_path / "telemetry.csv").write_text(header + "\n".join(rows) + "\n")
    binned = trace_rows(tmp_path / "record.json", {"rep": 1, "experiment_id": "exp"}, "machine")
    assert len(binned) == samples / 10 / TRACE_MIN_BIN_S
    assert binned["cpu_util_pct"].between(40, 60).all() and (binned["rep"] == 1).all()


def test_an_epoch_adds_its_figures_and_the_time_to_target_is_the_training_time_until_it_is_first_reached():
    record = {"epoch_train_s": [], "epoch_eval_s": [], "loss_curve": [], "time_to_target_s": None}
    record.update(target_accuracy=0.9, target_loss=None)
    rows = []
    for epoch, (train_s, accuracy) in enumerate([(2.0, 0.5), (1.0, 0.92), (1.0, 0.95)], start=1):
        row = add_epoch(record, rows, (epoch, train_s, 0.1, 0.3, 0.4, accuracy, 100))
    assert record["epoch_train_s"] == [2.0, 1.0, 1.0] and record["loss_curve"] == [0.3] * 3
    assert record["time_to_target_s"] == 3.0
    assert row == dict(zip(EPOCH_COLUMNS, (3, 1.0, 0.1, 0.3, 0.4, 0.95, 100, 100.0)))
    assert len(rows) == 3


def test_an_epoch_whose_loss_is_not_finite_never_reaches_the_target():
    """The run ends as diverged after that epoch (losses.check_finite): its accuracy is no time to target."""
    record = {"epoch_train_s": [], "epoch_eval_s": [], "loss_curve": [], "time_to_target_s": None}
    record.update(target_accuracy=0.9, target_loss=None)
    add_epoch(record, [], (1, 1.0, 0.1, float("nan"), 0.4, 0.95, 100))
    assert record["time_to_target_s"] is None and len(record["epoch_train_s"]) == 1


def test_a_language_models_time_to_target_is_the_training_time_until_its_test_loss_first_falls_to_the_target():
    record = {"epoch_train_s": [], "epoch_eval_s": [], "loss_curve": [], "time_to_target_s": None}
    record.update(target_accuracy=0.9, target_loss=2.5)
    keep_one_target(
        record, language_model=True
    )  # a token dataset: the loss is its target, its next-token accuracy none
    for epoch, test_loss in enumerate([4.0, 2.6, 2.4, 2.2], start=1):
        add_epoch(record, [], (epoch, 1.5, 0.1, 3.0, test_loss, 0.95, 100))
    assert record["target_accuracy"] is None and record["time_to_target_s"] == 4.5


def test_a_cpu_is_named_by_its_microarchitecture_where_its_name_does_not_tell_it():
    assert microarchitecture("AMD EPYC", "family 25, model 17, stepping 1") == "Zen 4"
    assert microarchitecture("AMD EPYC 7B13", "family 25, model 1, stepping 0") == "Zen 3"
    assert microarchitecture("AMD Ryzen 7 PRO 6850U", "family 25, model 68, stepping 1") == "Zen 3+"
    assert microarchitecture("Intel(R) Xeon(R) Platinum 8259CL", "family 6, model 85, stepping 7") == "Cascade Lake"
    assert microarchitecture("Intel(R) Xeon(R) Platinum 8480+", "family 6, model 143, stepping 8") == "Sapphire Rapids"
    assert microarchitecture("AMD EPYC", "family 99, model 1, stepping 0") is None
    assert microarchitecture("AMD EPYC", None) is None


def test_the_runs_and_summary_tables_take_each_field_as_its_declaration_says(tmp_path):
    """One declaration per field (dlbench/record_fields.py, and the runs table's Derived columns): flatten() makes
    every derived column, the summary takes each `interval` field with its geometric mean and interval and each
    `mean` field with its mean, and a new field declared so needs no list of its own anywhere."""
    records = read_records(write_records(tmp_path))
    runs = runs_table(records, record_machines(records))
    assert {field.name for field in dataclasses.fields(Derived)} <= set(runs.columns)
    summary = summary_table(runs)
    for field in record_fields.summarised("interval", SUMMARISED):
        assert {f"{field}_gmean", f"{field}_ci95_low", f"{field}_ci95_high", f"{field}_cv"} <= set(summary.columns)
    means = summary[[f"{field}_mean" for field in MEANS]]
    assert means.notna().any().sum() >= 10  # the fixture measures most of them: a mean, not an empty column
    assert "train_images_per_s" in STATISTICS and "final_test_accuracy" in MEANS and "steady_epoch_s" in STATISTICS
    assert REACHED == ["time_to_target_s"] and {"time_to_target_s_ci95_low", "time_to_target_runs"} <= set(summary)
    ok = runs[runs["status"] == "ok"].groupby(["experiment_id", "machine"])["final_test_accuracy"].mean()
    means = summary.set_index(["experiment_id", "machine"])["final_test_accuracy_mean"]
    assert means[ok.index].to_list() == pytest.approx(ok.to_list())
