"""Framework adapters: one module per framework, the same small interface, read side by side.

The interface is code: contract.py's Protocols (TrainingAdapter for a stack's `adapter`, OpsAdapter for its
`ops_adapter`), checked for every adapter by tests/unit/test_adapter_contract.py. Load one by name with load().
The adapters whose frameworks' experts write their own training loop share loop.py's over their primitives.
"""

import importlib
import pkgutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .contract import OpsAdapter, TrainingAdapter

# What a fixed-batch epoch leaves out where the adapter runs its own step loop, and with streamed data.
GATHER_AND_PLACE = "gathering every batch and placing it on the device"
STREAM_INPUT_WORK = "the loader's reading, decoding and augmenting of every batch, and placing it on the device"

# Adam's betas, RMSprop's decay and both epsilons, the same in every framework (each has its own defaults).
OPTIMIZER_DEFAULTS = {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}
RMSPROP_RHO = 0.9


# The package's modules that are not adapters: the interface, and the training loop several adapters share.
SHARED = ("contract", "loop")


def names():
    """The adapters: every module of this package but the shared ones."""
    return sorted(module.name for module in pkgutil.iter_modules(__path__) if module.name not in SHARED)


def load(name) -> "TrainingAdapter | OpsAdapter":
    """The adapter module `name` (a TrainingAdapter or OpsAdapter, as a stack names it), imported; ValueError naming
    the known adapters for any other name."""
    if name not in names():
        raise ValueError(f"unknown adapter {name!r}: scripts/dlbench/adapters has {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}")
