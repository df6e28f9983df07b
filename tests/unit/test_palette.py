"""The report's one palette (dlbench.study.palette): a colour per stack family, the same in every figure, the training
and operator figures alike, and series that stay apart within a family."""

from dlbench.study.configuration import load_stacks
from dlbench.study.palette import (
    FAMILY_COLOURS,
    OTHER_COLOUR,
    family,
    release_styles,
    series_style,
    stack_colour,
    variant_marker,
)
from dlbench.variants import MODES


def test_every_stack_has_its_familys_colour_and_no_two_families_share_one():
    stacks = load_stacks()
    families = {family(stack) for stack in stacks}
    assert families <= set(FAMILY_COLOURS), families - set(FAMILY_COLOURS)
    assert len(set(FAMILY_COLOURS.values())) == len(FAMILY_COLOURS) and OTHER_COLOUR not in FAMILY_COLOURS.values()
    for stack in stacks:
        assert stack_colour(stack) == FAMILY_COLOURS[family(stack)]
    assert family("keras-3-jax-0.9") == family("keras-3-jax") == "keras-3-jax" and family("torch-2.13") == "torch"
    assert stack_colour("keras-3-jax") != stack_colour("keras-3-tensorflow")
    assert stack_colour("no-such-stack-1.0") == OTHER_COLOUR


def test_a_stack_is_coloured_by_its_name_whatever_framework_a_figure_names():
    """An operator row of stack keras-3-jax measures jax: it takes keras-3-jax's colour, as its training runs do."""
    assert series_style("keras-3-jax", "eager", "device")["color"] == stack_colour("keras-3-jax")


def test_releases_variants_and_placements_keep_series_of_one_family_apart():
    styles = release_styles(["torch-2.13", "torch-2.11", "mxnet-1.9", "torch-2.13"])
    assert styles["torch-2.11"] != styles["torch-2.13"] and styles["mxnet-1.9"] == styles["torch-2.11"]
    assert len({variant_marker(mode) for mode in MODES}) == len(MODES)
    assert variant_marker("graph-amp") == variant_marker("graph-amp")  # stable, whatever figure asks
    fills = {series_style("torch-2.13", "eager", placement)["fillstyle"] for placement in ("device", "host", "stream")}
    assert len(fills) == 3
