"""Data placement `stream`: the items of an epoch (crop boxes and flips from the seed) and of an evaluation, computed
in the driver (the loaders that read them: tests/frameworks/test_stream.py)."""

import numpy as np
from dlbench import data


def test_epoch_items_follow_the_seed_and_fit_their_images():
    sizes = np.random.default_rng(0).integers(20, 500, size=(200, 2))
    order = data.stream_order(sizes, 16, seed=3, epoch=1)
    again, other = data.stream_order(sizes, 16, 3, 1), data.stream_order(sizes, 16, 3, 2)
    assert (order == again).all() and not (order == other).all() and len(order) == 192
    width, height = sizes[order["index"], 0], sizes[order["index"], 1]
    assert (order["left"] >= 0).all() and (order["left"] + order["width"] <= width).all()
    assert (order["top"] >= 0).all() and (order["top"] + order["height"] <= height).all()
    share = order["width"] * order["height"] / (width * height)
    assert share.max() <= 1 and np.median(share) > 0.3 and 0.3 < order["flip"].mean() < 0.7
    assert len(data.stream_order(sizes, 16, 3, 1, cap=40)) == 32  # images_per_epoch: whole batches within the cap


def test_evaluation_items_resize_the_shorter_side_and_centre_the_crop():
    items = data.eval_order(np.array([[500, 375], [100, 300]]), 224)
    assert items[["width", "height", "left", "top"]].tolist() == [(341, 256, 58, 16), (256, 768, 16, 272)]


def test_a_loaders_epoch_batches_are_whole_for_training_and_keep_the_short_last_one_for_evaluation():
    """MXNet's and Paddle's batch sampler (data.EpochBatches): training steps all have one shape, evaluation covers
    every image; a new epoch's items replace the last ones under the persistent workers."""
    training = data.EpochBatches(np.arange(10), 4, whole_batches=True)
    evaluation = data.EpochBatches(np.arange(10), 4, whole_batches=False)
    assert list(training) == [[0, 1, 2, 3], [4, 5, 6, 7]] and len(training) == 2
    assert list(evaluation) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(evaluation) == 3
    training.items = np.arange(20, 28)
    assert list(training) == [[20, 21, 22, 23], [24, 25, 26, 27]]
