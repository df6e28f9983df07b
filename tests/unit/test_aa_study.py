"""The A/A study's printout: the twins' paired noise round by round, and tables where a twin had no ok run."""

import math

from conftest import REPO


def aa_study(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import aa_study

    return aa_study


def test_a_twin_with_no_ok_run_prints_dashes_not_a_crash(monkeypatch):
    study = aa_study(monkeypatch)
    assert study.shown("", ".3f") == "–" and study.shown("1234.5", ",.0f") == "1,234"


def test_the_paired_sd_reads_only_rounds_both_twins_ran_ok(monkeypatch):
    study = aa_study(monkeypatch)
    row = {"experiment_id": "a", "baseline_experiment_id": "b"}
    runs = [
        {"rep": "1", "experiment_id": "a", "status": "ok", "train_images_per_s": "100"},
        {"rep": "1", "experiment_id": "b", "status": "ok", "train_images_per_s": "100"},
        {"rep": "2", "experiment_id": "a", "status": "ok", "train_images_per_s": str(100 * math.e)},
        {"rep": "2", "experiment_id": "b", "status": "ok", "train_images_per_s": "100"},
        {"rep": "3", "experiment_id": "a", "status": "failed", "train_images_per_s": ""},
        {"rep": "3", "experiment_id": "b", "status": "ok", "train_images_per_s": "100"},
    ]
    sd, rounds = study.paired_sd(runs, row)
    assert rounds == 2 and math.isclose(sd, math.sqrt(0.5))
