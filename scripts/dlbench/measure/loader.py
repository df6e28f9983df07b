"""The loader alone, for streamed data: `stream.loader_batches` batches of a fresh shuffle decoded, augmented and
placed on the device with the model removed; and the input-bound share, training images/s over the loader's (1:
training runs as fast as its loader can feed it)."""

from ..adapters import contract

NEEDS = (contract.Streaming,)


def applies(trained):
    return trained.run.experiment["data_placement"] == "stream"


def measure(trained):
    run, batch_size = trained.run, trained.batch_size
    (epoch,) = trained.shuffles.take()
    order = trained.shuffles.order_of(epoch)[: run.experiment["stream"]["loader_batches"] * batch_size]
    trained.sampler.mark("loader alone")
    seconds = run.timed(run.adapter.loader_pass, trained.staged, order, batch_size)[1]
    loader_images_per_s = len(order) / seconds
    training = trained.train_images_per_s
    input_bound_share = training / loader_images_per_s if training else None
    trained.log(
        f"loader alone: {len(order)} images in {seconds:.3f}s, {loader_images_per_s:.0f} img/s; "
        f"training ran at {input_bound_share or 0:.1%} of it"
    )
    return {"loader_images_per_s": loader_images_per_s, "input_bound_share": input_bound_share}
