"""The tables' names and grouping keys (dlbench/analysis/tables.py), which the aggregation, the workflow's rules and
the report share."""

from dlbench.analysis import tables


def test_groups_and_panels_are_made_of_an_experiments_identity():
    """The summary has one row per IDENTITY: a comparison group or a figure's panel keyed by anything else would
    split or pool experiments the summary cannot tell apart."""
    assert set(tables.GROUP) <= set(tables.IDENTITY) and set(tables.PANEL) <= set(tables.IDENTITY)
    assert tables.GROUP == ["machine", *tables.COMPARISON_GROUP]  # runs on different machines are never compared


def test_rules_name_each_tables_file_by_the_tables_name():
    assert tables.paths(["runs", "ops"], "csv") == {"runs": "results/tables/runs.csv", "ops": "results/tables/ops.csv"}
    assert tables.paths(["runs"], "parquet", key_suffix="_parquet") == {"runs_parquet": "results/tables/runs.parquet"}
