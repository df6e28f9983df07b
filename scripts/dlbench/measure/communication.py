"""With data-parallel replicas, where the framework can leave out the gradients' reduction (the adapter's
unreduced_steps, the Communication capability): the share of a step spent communicating that compute does not hide,
from pairs of epochs of fixed-batch steps, one with the reduction and one without, alternating so that drift falls on
both alike (after one untimed call of each, which traces or compiles it where a framework needs to). As many pairs as
the steady window has epochs, at least 3."""

from .. import parallel
from ..adapters import contract
from .paired import removed_share, timed_in_pairs

NEEDS = (contract.Communication, contract.InputShare)  # its reduced side is the input share's fixed batch


def applies(trained):
    return parallel.replicas(trained.run.experiment) > 1


def measure(trained):
    run, model, staged, batch_size = trained.run, trained.model, trained.staged, trained.batch_size
    order = trained.shuffles.order_of(run.experiment["epochs"] - 1)  # the last training epoch's: already read
    unreduced = run.adapter.unreduced_steps(model, staged, order, batch_size)
    reduced, steps = run.adapter.fixed_batch_steps(model, staged, order, batch_size), len(order) // batch_size
    trained.sampler.mark("communication warm-up")
    run.timed(reduced, 1)
    run.timed(unreduced, 1)
    pair = (("reduced", lambda index: reduced(steps)), ("unreduced", lambda index: unreduced(steps)))
    timed = timed_in_pairs(run, trained.sampler, pair, max(len(trained.window), 3))
    share, interval = removed_share(timed["unreduced"], timed["reduced"])
    trained.log(f"communication share {share:.1%} [{interval[0]:.1%}, {interval[1]:.1%}]: fixed-batch epochs {timed} s")
    return dict(communication_share=share, communication_share_interval=interval, communication_epochs_s=timed)
