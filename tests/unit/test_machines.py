"""Machines side by side (dlbench.study.analysis.machines): two stacks of the fixture study's MLP on digits at batches
32 and 64, on two machines, the second 0.8x as fast but for one stack at batch 32, 0.3x, which puts it behind the
other there (report_fixture.two_machines; the report's section: tests/frameworks/test_report.py)."""

import pandas as pd
import pytest
from dlbench.study.analysis.records import cpu_names
from report_fixture import DEMOTED, FLIPPED_BATCH, OTHER_MACHINE, factor, two_machines


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return two_machines(tmp_path_factory.mktemp("machines"))


def test_every_shared_workload_has_a_row_per_machine_with_its_ratio_over_the_reference(tables):
    table, reference = tables
    assert set(table["machine"]) == {reference, OTHER_MACHINE} and (table["reference_machine"] == reference).all()
    assert len(table) == 2 * 8
    on_b = table[table["machine"] == OTHER_MACHINE]
    expected = [factor(stack, batch) for stack, batch in zip(on_b["stack"], on_b["batch_size"])]
    assert on_b["ratio"].to_numpy() == pytest.approx(expected, rel=1e-9)
    # unpaired intervals around the ratio; the fixture's CPU runs wobble by 0.05 %, so they are narrow
    assert ((on_b["ratio_ci95_low"] < on_b["ratio"]) & (on_b["ratio"] < on_b["ratio_ci95_high"])).all()
    assert (on_b["ratio_ci95_high"] / on_b["ratio_ci95_low"] < 1.01).all()
    assert (table.loc[table["machine"] == reference, "ratio"] == 1).all()


def test_the_ranking_holds_where_every_stack_slows_alike_and_flips_where_one_slows_more(tables):
    table, reference = tables
    holds = table.groupby("batch_size")["ranking_holds"].first()
    assert holds.to_dict() == {32: False, 64: True}
    assert table.groupby("batch_size")["fastest_holds"].first().to_dict() == {32: False, 64: True}
    answers = table.groupby(["batch_size", "machine"])[["page1_fastest", "page1_confidence"]].first()
    assert answers.loc[(FLIPPED_BATCH, OTHER_MACHINE)].tolist() == ["mxnet-1.9", "decisive"]
    assert answers.loc[(FLIPPED_BATCH, reference)].tolist() == [DEMOTED, "decisive"]
    orders = table[table["batch_size"] == FLIPPED_BATCH].groupby("machine")["order"].first()
    assert orders.to_dict() == {reference: f"{DEMOTED} > mxnet-1.9", OTHER_MACHINE: f"mxnet-1.9 > {DEMOTED}"}


def test_a_cpu_model_run_with_different_usable_cpus_names_its_machines_apart():
    runs = pd.DataFrame(
        {
            "provenance_cpu_model": ["EPYC", "EPYC", "Xeon", None],
            "provenance_cpu_cores": [2, 2, 8, None],
            "provenance_cpus_usable": [1, 2, 8, None],
        }
    )
    *named, unknown = cpu_names(runs)
    assert named == ["EPYC (1 of 2 CPUs)", "EPYC (2 CPUs)", "Xeon"] and pd.isna(unknown)
    older = runs.drop(columns="provenance_cpus_usable")  # records from before the field: the machine's cores
    assert cpu_names(older)[:3] == ["EPYC", "EPYC", "Xeon"]


def test_a_language_models_cells_carry_its_tokens_per_second(tables, tmp_path):
    """The same workloads read as a language model's: each row its tokens/s beside its sequences/s (images/s), the
    ratios unchanged; an image model's rows have none."""
    table, _ = tables
    assert table["train_tokens_per_s_gmean"].isna().all()
    as_tokens, _ = two_machines(tmp_path, sequence_tokens=64)
    for statistic in ("gmean", "ci95_low", "ci95_high"):
        tokens, images = as_tokens[f"train_tokens_per_s_{statistic}"], as_tokens[f"train_images_per_s_{statistic}"]
        assert tokens.to_numpy() == pytest.approx(64 * images.to_numpy())
    assert as_tokens["ratio"].to_numpy() == pytest.approx(table["ratio"].to_numpy())
