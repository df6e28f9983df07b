"""The share of a steady epoch spent on input work that compute does not hide, from pairs of epochs: a real one (a
fresh shuffle, gathered and placed as in training) and one of as many steps on one batch assembled and placed before
the clock starts (after one untimed step, which traces the step for that batch where a framework needs to). Each
pair's order alternates, so that drift falls on both sides alike: a GPU's clocks ramp up over the first seconds of
work and settle down under its power cap, by several percent on an H200, more than the input work of a device-staged
run. As many epochs in all as the steady window holds, at least two pairs."""

import math
import statistics

from ..adapters import STREAM_INPUT_WORK, contract
from .paired import removed_share, timed_in_pairs

NEEDS = (contract.InputShare,)


def applies(trained):
    """Where the config asks for it (true: every repeat; "first": the first repeat only) and a steady window ran."""
    experiment = trained.run.experiment
    asked = experiment["measure_input_share"]
    return bool(trained.window) and (asked is True or (asked == "first" and experiment["rep"] == 1))


def measure(trained):
    run, model, staged, batch_size = trained.run, trained.model, trained.staged, trained.batch_size
    epochs = trained.shuffles.take(max(2, math.ceil(len(trained.window) / 2)))
    orders = [trained.shuffles.order_of(epoch) for epoch in epochs]
    fixed_steps = len(orders[0]) // batch_size
    steps = run.adapter.fixed_batch_steps(model, staged, orders[0], batch_size)
    trained.sampler.mark("fixed-batch warm-up")
    run.timed(steps, 1)
    pair = (
        ("real", lambda index: run.adapter.train_epoch(model, staged, orders[index], batch_size)),
        ("fixed", lambda index: steps(fixed_steps)),
    )
    timed = timed_in_pairs(run, trained.sampler, pair, len(epochs), "input-share ")
    share, interval = removed_share(timed["fixed"], timed["real"])
    removed = STREAM_INPUT_WORK if staged.STREAM else run.adapter.INPUT_WORK
    trained.log(
        f"input share {share:.1%} [{interval[0]:.1%}, {interval[1]:.1%}]: fixed-batch epochs {timed['fixed']} s vs "
        f"real epochs {timed['real']} s, alternating (removed: {removed})"
    )
    return dict(
        input_share_epochs_s=timed["real"],
        fixed_batch_epochs_s=timed["fixed"],
        fixed_batch_epoch_s=statistics.median(timed["fixed"]),
        input_share=share,
        input_share_interval=interval,
        input_share_covers=removed,
    )
