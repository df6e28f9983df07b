"""The tables' names and grouping keys (dlbench/study/analysis/tables.py), which the aggregation, the workflow's rules
and the report share, and the table of axes (dlbench/axes.py) every list of axes comes from."""

import yaml
from conftest import REPO
from dlbench import axes, record
from dlbench.study import configuration, plan
from dlbench.study.analysis import tables


def test_groups_and_panels_are_made_of_an_experiments_identity():
    """The summary has one row per IDENTITY: a comparison group or a figure's panel keyed by anything else would
    split or pool experiments the summary cannot tell apart."""
    assert set(tables.GROUP) <= set(tables.IDENTITY) and set(axes.PANEL) <= set(tables.IDENTITY)
    assert tables.GROUP == ["machine", *axes.COMPARISON_GROUP]  # runs on different machines are never compared


def test_every_axis_is_a_config_key_a_field_of_the_experiment_and_a_column_of_the_record():
    """One row of dlbench/axes.py is the whole of an axis outside the adapters: the config schema declares its
    list with a default, the experiment row and the record carry it, and the tables key their rows by it."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())["properties"]
    defaults = configuration.with_defaults({})
    for axis in axes.TABLE:
        assert axis.name in plan.Experiment.__annotations__ and axis.name in record.IDENTITY_KEYS
        key = axis.config_key or axis.name  # a setting that is not swept has the axis' own name
        assert key in schema and "default" in schema[key] and key in defaults, key
    assert list(plan.AXES) == [axis.name for axis in axes.TABLE if axis.config_key]
    compared = {axis.name for axis in axes.TABLE if not axis.grouped}
    assert compared == {"stack", "variant"}  # what a group's experiments differ in


def test_rules_name_each_tables_file_by_the_tables_name():
    assert tables.paths(["runs", "ops"], "csv") == {"runs": "results/tables/runs.csv", "ops": "results/tables/ops.csv"}
    assert tables.paths(["runs"], "parquet", key_suffix="_parquet") == {"runs_parquet": "results/tables/runs.parquet"}
