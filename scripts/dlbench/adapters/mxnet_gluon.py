"""MXNet Gluon adapter: variant 'eager' is imperative, 'graph' is hybridize(static_alloc, static_shape).

Layout NCHW; neutral weights converted by specs.channels_first_weights. Gluon's Trainer.step(batch_size)
rescales summed gradients by 1/batch_size, which makes the per-sample loss a batch mean as elsewhere.
"""

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from .. import specs
from . import OPTIMIZER_DEFAULTS

FRAMEWORK = "mxnet"


def version():
    return mx.__version__


def context(device):
    return mx.gpu(0) if device == "gpu" else mx.cpu()


def configure(device, threads, seed):
    mx.random.seed(seed)
    if device == "gpu" and mx.context.num_gpus() == 0:
        raise RuntimeError("device gpu requested but MXNet sees no GPU (is this the mxnet-cu112 env?)")
    # MXNet reads OMP_NUM_THREADS at import; train.py sets it before the import.
    return {"omp_threads": threads, "device_name": str(context(device))}


def stage(arrays, device):
    ctx = context(device)

    def images(key):
        return mx.nd.array(arrays[key].transpose(0, 3, 1, 2), ctx=ctx, dtype="float32")

    def labels(key):
        return mx.nd.array(arrays[key], ctx=ctx, dtype="float32")

    return {"train_x": images("train_x"), "train_y": labels("train_y"), "test_x": images("test_x"),
            "test_y": labels("test_y"), "ctx": ctx}  # fmt: skip


def layer_block(layer, in_shape):
    activation = getattr(layer, "activation", None)
    if isinstance(layer, specs.Conv):
        return gluon.nn.Conv2D(
            layer.filters, layer.kernel, strides=layer.stride, activation=activation, in_channels=in_shape[-1]
        )
    if isinstance(layer, specs.Pool):
        pool = gluon.nn.AvgPool2D if layer.kind == "avg" else gluon.nn.MaxPool2D
        return pool(pool_size=layer.size)
    if isinstance(layer, specs.Flatten):
        return gluon.nn.Flatten()
    return gluon.nn.Dense(layer.units, activation=activation, in_units=in_shape[0])


def make_trainer(params, experiment):
    if experiment["optimizer"] == "adam":
        options = {"beta1": OPTIMIZER_DEFAULTS["beta_1"], "beta2": OPTIMIZER_DEFAULTS["beta_2"],
                   "epsilon": OPTIMIZER_DEFAULTS["epsilon"]}  # fmt: skip
    else:
        options = {"momentum": experiment["momentum"]}
    options["learning_rate"] = experiment["learning_rate"]
    return gluon.Trainer(params, experiment["optimizer"], options)


def build(spec, input_shape, weights, experiment):
    ctx = context(experiment["device"])
    network = gluon.nn.HybridSequential()
    blocks = []
    for layer, in_shape, _ in specs.layer_shapes(spec, input_shape):
        blocks.append(layer_block(layer, in_shape))
        network.add(blocks[-1])
    network.initialize(ctx=ctx)
    for block, params in zip(blocks, specs.channels_first_weights(spec, input_shape, weights)):
        if params:
            kernel, bias = params
            block.weight.set_data(mx.nd.array(kernel.T if isinstance(block, gluon.nn.Dense) else kernel, ctx=ctx))
            block.bias.set_data(mx.nd.array(bias, ctx=ctx))
    hybridized = experiment["variant"] == "graph"
    if hybridized:
        network.hybridize(static_alloc=True, static_shape=True)
    return {"network": network, "trainer": make_trainer(network.collect_params(), experiment),
            "loss": gluon.loss.SoftmaxCrossEntropyLoss(), "hybridized": hybridized, "ctx": ctx}  # fmt: skip


def parameter_count(model):
    return sum(int(np.prod(param.shape)) for param in model["network"].collect_params().values())


def engaged(model):
    dtype = next(iter(model["network"].collect_params().values())).dtype
    return {"variant": "graph" if model["hybridized"] else "eager", "graph": model["hybridized"],
            "hybridize": {"static_alloc": True, "static_shape": True} if model["hybridized"] else None,
            "dtype": np.dtype(dtype).name, "layout": "NCHW"}  # fmt: skip


def train_epoch(model, staged, order, batch_size):
    network, trainer, loss_fn = model["network"], model["trainer"], model["loss"]
    indices = mx.nd.array(order, ctx=staged["ctx"], dtype="int64")
    total = mx.nd.zeros((1,), ctx=staged["ctx"])
    steps = len(order) // batch_size
    for step in range(steps):
        batch = indices[step * batch_size : (step + 1) * batch_size]
        images, labels = mx.nd.take(staged["train_x"], batch), mx.nd.take(staged["train_y"], batch)
        with autograd.record():
            loss = loss_fn(network(images), labels)
        loss.backward()
        trainer.step(batch_size)
        total += loss.mean()
    return (total / steps).asscalar()


def evaluate(model, staged, batch_size):
    network, loss_fn = model["network"], model["loss"]
    loss_sum = mx.nd.zeros((1,), ctx=staged["ctx"])
    correct = mx.nd.zeros((1,), ctx=staged["ctx"])
    count = staged["test_y"].shape[0]
    for start in range(0, count, batch_size):
        images, labels = staged["test_x"][start : start + batch_size], staged["test_y"][start : start + batch_size]
        logits = network(images)
        loss_sum += loss_fn(logits, labels).sum()
        correct += (logits.argmax(axis=1) == labels).sum()
    return loss_sum.asscalar() / count, correct.asscalar() / count


def logits(model, images):
    return model["network"](mx.nd.array(images.transpose(0, 3, 1, 2), ctx=model["ctx"])).asnumpy()


def sync(device):
    mx.nd.waitall()


def allocator_peak_mb(device):
    return None  # MXNet 1.9 exposes no allocator peak (only free/total through gpu_memory_info)


def is_oom(error):
    return isinstance(error, mx.base.MXNetError) and "out of memory" in str(error).lower()


# Operator microbenchmarks (dlbench/ops.py).
def operators(device, dtype):
    ctx = context(device)
    return {
        "from_numpy": lambda array: mx.nd.array(array, ctx=ctx, dtype=dtype),
        "from_list": lambda values: mx.nd.array(values, ctx=ctx, dtype=dtype),
        "sigmoid": mx.nd.sigmoid, "relu": mx.nd.relu, "tanh": mx.nd.tanh,
        "softrelu": lambda x: mx.nd.Activation(x, act_type="softrelu"), "softsign": mx.nd.softsign,
        "dot": mx.nd.dot, "gemm": mx.nd.dot, "flatten": mx.nd.flatten,
        "normalize": lambda x: mx.nd.L2Normalization(x, mode="instance"), "copy": lambda x: x.copy(),
    }  # fmt: skip


def ops_input(array, device, dtype):
    return mx.nd.array(array, ctx=context(device), dtype=dtype)


def ops_output(value):
    return value.astype("float32").asnumpy()


def ops_sync(device, value):
    sync(device)
