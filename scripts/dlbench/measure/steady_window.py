"""The steady window: epochs 2..N, then, while they last less than min_steady_seconds together, more passes over the
training set (fresh shuffles, no evaluation: after the last one, so no reported accuracy changes). Short epochs timed
alone are noise; throughput is taken over the whole window."""

from .. import parallel
from ..record_check import steady_throughput


def measure(run, model, staged, shuffles, batch_size, epoch_seconds, extra, images, sampler, log):
    """(the window's epoch seconds, its record section): the training's steady epochs and the extra ones, each
    appended to `extra` (the record's list) as it ends, and the steady throughput over them (`images` an epoch), in
    all and per replica."""
    experiment = run.experiment
    window = list(epoch_seconds[1:])
    while window and sum(window) < experiment["min_steady_seconds"]:
        sampler.mark(f"extra steady epoch {len(extra) + 1}")
        order = shuffles.order_of(shuffles.take()[0])
        extra.append(run.timed(run.adapter.train_epoch, model, staged, order, batch_size)[1])
        window.append(extra[-1])
    if extra:
        log(
            f"steady window {sum(window):.3f}s: {len(extra)} extra steady epochs after the last evaluation (epochs "
            f"2..{experiment['epochs']} lasted {sum(epoch_seconds[1:]):.3f}s, less than min_steady_seconds "
            f"{experiment['min_steady_seconds']})"
        )
    throughput = steady_throughput(images, [epoch_seconds[0], *window])
    return window, {
        "steady_window_s": sum(window) if window else None,
        "train_images_per_s": throughput,
        "replica_images_per_s": throughput / parallel.replicas(experiment) if throughput else None,
    }
