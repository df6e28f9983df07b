"""The scaling table from the report fixture's study (tests/support/report_fixture.py): each experiment on 2 and 4
replicas against the same experiment on one, its efficiency with an interval, and the stacks' scaling compared at each
count."""

import pytest
from dlbench.study.analysis.records import read_records, record_machines, runs_table
from dlbench.study.analysis.scaling import scaling_table
from dlbench.study.analysis.summary import summary_table
from report_fixture import SCALING, write_records


@pytest.fixture(scope="module")
def scaling(tmp_path_factory):
    records = read_records(write_records(tmp_path_factory.mktemp("runs")))
    runs = runs_table(records, record_machines(records))
    return scaling_table(runs, summary_table(runs), 0.05)


def test_each_replicated_experiment_is_scaled_against_the_same_on_one_replica(scaling):
    rows = {(row.stack, row.replicas): row for row in scaling.itertuples()}
    assert set(rows) == {(stack, count) for stack, counts in SCALING.items() for count in counts}
    for (stack, count), row in rows.items():
        assert row.experiment_id == f"{row.base_experiment_id}_r{count}"
        assert row.efficiency == pytest.approx(SCALING[stack][count], rel=0.02), (stack, count)
        assert row.efficiency_ci95_low <= row.efficiency <= row.efficiency_ci95_high
        assert row.replica_images_per_s_gmean == pytest.approx(row.train_images_per_s_gmean / count)
        assert row.global_batch_size == 128 * count  # weak scaling: 128 per replica


def test_stacks_are_compared_at_each_replica_count_with_the_best_scaling_one(scaling):
    rows = {(row.stack, row.replicas): row for row in scaling.itertuples()}
    assert {rows[(stack, count)].best_stack for stack, count in rows} == {"torch-2.13"}
    two, four = rows[("keras-3-jax", 2)], rows[("keras-3-jax", 4)]
    assert two.efficiency_ratio == pytest.approx(0.90 / 0.97, rel=0.02) and two.verdict == "slower"
    assert two.ratio_high < 1
    assert four.verdict == "equivalent within 5 %", four  # 0.94 against 0.95
