"""The experiment row is a declared type (dlbench/study/plan.py: Experiment): the matrix's builder makes rows of exactly
its keys, each documented where it is declared."""

import inspect

import pytest
from dlbench import record
from dlbench.study import configuration, plan

STACKS = configuration.load_stacks()


def table(tmp_path, **settings):
    config = configuration.with_defaults(
        {
            "stacks": ["torch-2.13", "keras-3-jax"],
            "datasets": ["synthetic-8x8x1", "tiny"],
            "models": ["mlp"],
            "variants": ["eager"],
            "data_placements": ["device", "host", "stream"],
            "image_folders": {"tiny": {"path": str(tmp_path), "resolution": 16}},
            **settings,
        }
    )
    rows = plan.experiment_table(config, STACKS)[0].values()
    assert {row["data_placement"] for row in rows} == {"device", "host", "stream"}
    return rows


@pytest.mark.parametrize("images_per_epoch", [None, 64])
def test_the_builder_makes_rows_of_exactly_the_declared_keys(tmp_path, images_per_epoch):
    required, optional = plan.Experiment.__required_keys__, plan.Experiment.__optional_keys__
    assert optional == {"images_per_epoch", "stream"}
    for row in table(tmp_path, images_per_epoch=images_per_epoch):
        expected = required | ({"stream"} if row["data_placement"] == "stream" else set())
        expected |= {"images_per_epoch"} if images_per_epoch else set()
        assert set(row) == expected, row["experiment_id"]


def test_every_key_is_documented_where_it_is_declared():
    source = inspect.getsource(plan.Experiment)
    for key in plan.Experiment.__annotations__:
        line = next(line for line in source.splitlines() if line.strip().startswith(f"{key}:"))
        assert "  # " in line, f"Experiment.{key} has no comment saying what it is"


def test_the_record_identity_comes_from_the_row_and_its_repeat():
    """train.py's record copies its identity from the experiment JSON: the row plus the workflow's rep and seed."""
    assert set(record.IDENTITY_KEYS) <= set(plan.Experiment.__annotations__) | {"rep", "seed"}
