import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn


class Block(gluon.HybridBlock):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(nn.Conv2D(outputs, 3, stride, 1, use_bias=False), nn.BatchNorm(), nn.Activation("relu"),
                      nn.Conv2D(outputs, 3, 1, 1, use_bias=False), nn.BatchNorm())  # fmt: skip
        self.stride, self.pad = stride, (outputs - inputs) // 2

    def hybrid_forward(self, F, x):
        if self.stride == 1:
            return F.relu(self.body(x) + x)
        shortcut = F.slice(x, begin=(None,) * 4, end=(None,) * 4, step=(1, 1, self.stride, self.stride))
        zeros = F.zeros_like(F.slice_axis(shortcut, axis=1, begin=0, end=self.pad))
        return F.relu(self.body(x) + F.concat(zeros, shortcut, zeros, dim=1))


def build_network(model):
    network = nn.HybridSequential()
    if model == "lenet":
        network.add(
            nn.Conv2D(6, 5, activation="relu"), nn.AvgPool2D(2), nn.Conv2D(16, 3, activation="relu"), nn.AvgPool2D(2),
            nn.Flatten(), nn.Dense(120, activation="relu"), nn.Dense(84, activation="relu"), nn.Dense(10),
        )  # fmt: skip
        return network
    network.add(nn.Conv2D(16, 3, 1, 1, use_bias=False), nn.BatchNorm(), nn.Activation("relu"))  # resnet20
    inputs = 16
    for outputs in (16, 32, 64):
        for _ in range(3):
            network.add(Block(inputs, outputs, 2 if outputs != inputs else 1))
            inputs = outputs
    network.add(nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(10))
    return network


def make_epoch(arrays, batch_size, learning_rate, model):
    images = mx.nd.array(arrays["train_x"].transpose(0, 3, 1, 2))
    labels = mx.nd.array(arrays["train_y"])
    network = build_network(model)
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
