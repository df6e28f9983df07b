"""What a run measures after its timed training epochs, one module a measurement, each run in the order of PASSES
when it applies to the run and the adapter has the capability it NEEDS; each returns its own section of the record.
They all train or load after the last evaluation, so that no reported accuracy changes. A pass that reads fresh data
takes shuffles no earlier pass has read (Shuffles), so that a loader is never timed on images still in the page cache;
the communication share reuses the last training epoch's on purpose: it times fixed-batch steps, not reading.

A pass module has NEEDS (the adapter capabilities it calls, dlbench/adapters/contract.py's CAPABILITIES),
applies(trained) and measure(trained) -> {record key: value}.
"""

from dataclasses import dataclass
from typing import Any, Callable

from ..adapters import contract
from ..data import Shuffles
from . import communication, input_share, latency, loader

# The order is part of the measurement: the input share's real epochs train on before the loader reads fresh shuffles,
# the communication share follows them because its unreduced steps leave each replica with weights of its own, and
# latency, which only infers (on one device), comes last.
PASSES = (input_share, loader, communication, latency)


@dataclass
class Trained:
    """What the passes after training work on: the run (its adapter and experiment), the trained model and staged
    data, the unread shuffles, the global batch size, the steady window's epoch seconds and the training throughput."""

    run: Any  # dlbench.run.Run
    model: Any
    staged: Any
    shuffles: Shuffles
    batch_size: int
    window: list
    train_images_per_s: float | None
    sampler: Any  # dlbench.telemetry.Sampler: each pass marks its phases
    log: Callable[[str], None]


def after_training(trained, record):
    """Every pass that applies, in PASSES' order, each one's section written into `record` as it ends (a pass that
    fails leaves those before it in the record); a pass whose capability the adapter lacks is left out, said in the
    log."""
    for measurement in PASSES:
        if not measurement.applies(trained):
            continue
        lacking = set(measurement.NEEDS) - set(contract.capabilities(trained.run.adapter))
        if lacking:
            name = measurement.__name__.rsplit(".", 1)[-1]
            trained.log(f"{name}: left out, the adapter lacks {', '.join(sorted(c.__name__ for c in lacking))}")
            continue
        record.update(measurement.measure(trained))
