"""The relative-throughput table (dlbench/study/analysis/relative.py): every stack in every group against one reference
stack, each stack's fastest variant, and each stack's geometric mean across the groups it shares with the
reference."""

import math

import pandas as pd
import pytest
from dlbench.study.analysis.relative import ACROSS, relative_table
from dlbench.study.analysis.tables import GROUP

BASE = dict(zip(GROUP, ["cpu-model", "digits", "mlp", "cpu", 32, "adam", 0.001, 3, "device", 1, "weak"]))


def experiment(model, stack, variant, rate):
    return dict(BASE, model=model, stack=stack, variant=variant, train_images_per_s_gmean=rate)


SUMMARY = pd.DataFrame(
    [
        experiment("mlp", "torch-2.13", "eager", 200.0),
        experiment("mlp", "mxnet-1.9", "graph", 100.0),
        experiment("mlp", "mxnet-1.9", "eager", 50.0),  # its slower variant: not the stack's cell
        experiment("lenet", "torch-2.13", "eager", 100.0),
        experiment("lenet", "mxnet-1.9", "graph", 80.0),
        experiment("gpt-tiny", "torch-2.13", "eager", 40.0),
        experiment("gpt-tiny", "mxnet-1.9", "graph", 10.0),
        experiment("resnet20", "mxnet-1.9", "graph", 10.0),  # the reference never ran here: no row
    ]
)
FASTEST = pd.DataFrame(  # torch-2.13 fastest in three groups, proven in two
    {
        "fastest_stack": ["torch-2.13", "torch-2.13", "torch-2.13", "mxnet-1.9"],
        "confidence": ["decisive", "decisive", "inconclusive", "decisive"],
    }
)


def test_every_stack_is_set_against_the_stack_fastest_in_the_most_groups_by_its_fastest_variant():
    table = relative_table(SUMMARY, FASTEST)
    cells = table[table["group"] != ACROSS]
    assert (
        set(cells["reference_stack"]) == {"torch-2.13"}
        and "proven fastest in 2 of 4" in cells["reference_rule"].iloc[0]
    )
    mxnet = cells[cells["stack"] == "mxnet-1.9"].set_index("model")
    assert mxnet["ratio"].to_dict() == {"gpt-tiny": 0.25, "lenet": 0.8, "mlp": 0.5}
    assert set(mxnet["variant"]) == {"graph"} and "resnet20" not in set(cells["model"])
    across = table[table["group"] == ACROSS].set_index("stack")
    assert across.loc["mxnet-1.9", "ratio"] == pytest.approx((0.25 * 0.8 * 0.5) ** (1 / 3))
    assert across.loc["mxnet-1.9", "groups"] == 3
    assert across.loc["mxnet-1.9", "ratio_ci95_low"] < across.loc["mxnet-1.9", "ratio"]
    assert across.loc["torch-2.13", "ratio"] == pytest.approx(1.0)


def test_a_named_baseline_is_the_reference_and_two_groups_give_no_interval():
    table = relative_table(SUMMARY[SUMMARY["model"].isin(["mlp", "lenet"])], FASTEST, named="mxnet-1.9")
    across = table[table["group"] == ACROSS].set_index("stack")
    assert across.loc["torch-2.13", "ratio"] == pytest.approx(math.sqrt(2.0 * 1.25))
    assert math.isnan(across.loc["torch-2.13", "ratio_ci95_low"])
    assert table["reference_rule"].iloc[0] == "the config's `comparison_baseline`"


def test_groups_that_differ_past_model_dataset_batch_and_devices_keep_labels_apart():
    adam = SUMMARY[SUMMARY["model"] == "mlp"]
    table = relative_table(pd.concat([adam, adam.assign(optimizer="sgd")]), FASTEST)
    cells = table[table["group"] != ACROSS]
    assert sorted(set(cells["group"])) == ["mlp/digits b32 cpu (optimizer adam)", "mlp/digits b32 cpu (optimizer sgd)"]
    assert set(relative_table(SUMMARY, FASTEST)["group"]) == {
        "mlp/digits b32 cpu",
        "lenet/digits b32 cpu",
        "gpt-tiny/digits b32 cpu",
        ACROSS,
    }
