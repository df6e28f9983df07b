import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn


def make_epoch(arrays, batch_size, learning_rate):
    images = mx.nd.array(arrays["train_x"].transpose(0, 3, 1, 2))
    labels = mx.nd.array(arrays["train_y"])
    network = nn.HybridSequential()
    network.add(
        nn.Conv2D(6, 5, activation="relu"), nn.AvgPool2D(2), nn.Conv2D(16, 3, activation="relu"), nn.AvgPool2D(2),
        nn.Flatten(), nn.Dense(120, activation="relu"), nn.Dense(84, activation="relu"), nn.Dense(10),
    )  # fmt: skip
    network.initialize(mx.init.Xavier())
    network.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(network.collect_params(), "adam", {"learning_rate": learning_rate, "epsilon": 1e-7})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def epoch(order):
        order = mx.nd.array(order, dtype="int64")
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            with autograd.record():
                loss = loss_fn(network(mx.nd.take(images, batch)), mx.nd.take(labels, batch))
            loss.backward()
            trainer.step(batch_size)
        mx.nd.waitall()

    return epoch
