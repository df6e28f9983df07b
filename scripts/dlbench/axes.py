"""The experiment's axes, written once: what each is called in the config, whether experiments that share it are
compared together, and whether it keys a figure's panel. Planning (the matrix, the config's lists), the run record's
identity and the analysis' groups and panels are all derived from this table, so that a new axis is one row here
plus the adapters that implement it."""

from typing import NamedTuple


class Axis(NamedTuple):
    name: str  # the experiment's field, the record's key and the tables' column
    config_key: str | None  # the config's list of its values (one per grid); None: one config setting, not swept
    grouped: bool  # held equal within a comparison group: experiments that differ in it are never compared
    in_panel: bool  # keys a figure's panel: experiments that differ in it are drawn apart


TABLE = (
    Axis("stack", "stacks", grouped=False, in_panel=False),  # what a group compares
    Axis("dataset", "datasets", grouped=True, in_panel=True),
    Axis("model", "models", grouped=True, in_panel=True),
    Axis("device", "devices", grouped=True, in_panel=True),
    Axis("batch_size", "batch_sizes", grouped=True, in_panel=True),
    Axis("optimizer", "optimizers", grouped=True, in_panel=False),  # a panel draws its optimisers side by side
    Axis("learning_rate", "learning_rates", grouped=True, in_panel=False),
    Axis("epochs", "epochs", grouped=True, in_panel=False),
    Axis("variant", "variants", grouped=False, in_panel=False),  # what a group compares, beside the stack
    Axis("data_placement", "data_placements", grouped=True, in_panel=False),
    Axis("replicas", "replicas", grouped=True, in_panel=True),
    Axis("scaling", None, grouped=True, in_panel=False),  # the config's `scaling`, weak wherever one replica runs
)

NAMES = tuple(axis.name for axis in TABLE)
# The swept axes: {name: the config's key}, in the matrix's order (dlbench.study.plan.grids).
CONFIG_KEYS = {axis.name: axis.config_key for axis in TABLE if axis.config_key}
# Experiments equal in these, on one machine, are compared and raced together (dlbench.study.analysis.race.race_groups),
# so that comparisons stay paired round by round.
COMPARISON_GROUP = [axis.name for axis in TABLE if axis.grouped]
# A figure's panel: the experiments drawn side by side in it (stacks and variants, over optimisers and rates), on one
# machine.
PANEL = [*(axis.name for axis in TABLE if axis.in_panel), "machine"]
