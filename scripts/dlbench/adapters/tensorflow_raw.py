"""TensorFlow adapter in plain TensorFlow ops (tf.nn, tf.Variable, fused optimiser kernels), no Keras.

Variant 'eager' runs the step op by op; 'graph' wraps the same step in tf.function (no XLA).
Layout NHWC, the neutral layout, so weights load unchanged.
"""

import tensorflow as tf

from .. import specs
from . import OPTIMIZER_DEFAULTS

FRAMEWORK = "tensorflow"


def version():
    return tf.__version__


def device_name(device):
    return "/GPU:0" if device == "gpu" else "/CPU:0"


def configure(device, threads, seed):
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(seed)
    if device == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("device gpu requested but TensorFlow sees no GPU (is this the CUDA env?)")
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)  # else TensorFlow takes the whole card up front
    return {"intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "device_name": device_name(device)}  # fmt: skip


def stage(arrays, device):
    with tf.device(device_name(device)):
        staged = {key: tf.identity(tf.constant(value)) for key, value in arrays.items()}
    staged["device"] = device_name(device)
    return staged


class Network(tf.Module):
    """The spec applied with tf.nn ops to tf.Variables holding the neutral weights."""

    def __init__(self, spec, input_shape, weights):
        super().__init__()
        self.layers = [layer for layer, _, _ in specs.layer_shapes(spec, input_shape)]
        self.params = [[tf.Variable(array) for array in params] for params in weights]

    def __call__(self, images):
        outputs = images
        for layer, params in zip(self.layers, self.params):
            if isinstance(layer, specs.Conv):
                strides = [1, layer.stride, layer.stride, 1]
                outputs = tf.nn.conv2d(outputs, params[0], strides, "VALID") + params[1]
            elif isinstance(layer, specs.Pool):
                pool = tf.nn.avg_pool2d if layer.kind == "avg" else tf.nn.max_pool2d
                outputs = pool(outputs, layer.size, layer.size, "VALID")
            elif isinstance(layer, specs.Flatten):
                outputs = tf.reshape(outputs, [tf.shape(outputs)[0], -1])
            else:
                outputs = tf.matmul(outputs, params[0]) + params[1]
            if getattr(layer, "activation", None) == "relu":
                outputs = tf.nn.relu(outputs)
        return outputs


class Optimizer:
    """Adam / SGD-momentum through TensorFlow's fused resource kernels (what tf.compat.v1 optimisers ran)."""

    def __init__(self, variables, experiment):
        self.variables, self.experiment = variables, experiment
        self.slots = [[tf.Variable(tf.zeros_like(var)) for _ in range(2)] for var in variables]
        self.step = tf.Variable(0.0)

    def apply(self, gradients):
        rate = self.experiment["learning_rate"]
        self.step.assign_add(1.0)
        for var, (first, second), grad in zip(self.variables, self.slots, gradients):
            if self.experiment["optimizer"] == "adam":
                beta_1, beta_2 = OPTIMIZER_DEFAULTS["beta_1"], OPTIMIZER_DEFAULTS["beta_2"]
                tf.raw_ops.ResourceApplyAdam(
                    var=var.handle, m=first.handle, v=second.handle, beta1_power=beta_1**self.step,
                    beta2_power=beta_2**self.step, lr=rate, beta1=beta_1, beta2=beta_2,
                    epsilon=OPTIMIZER_DEFAULTS["epsilon"], grad=grad,
                )  # fmt: skip
            else:
                tf.raw_ops.ResourceApplyMomentum(
                    var=var.handle, accum=first.handle, lr=rate, grad=grad, momentum=self.experiment["momentum"]
                )


def build(spec, input_shape, weights, experiment):
    with tf.device(device_name(experiment["device"])):
        network = Network(spec, input_shape, weights)
        variables = [var for params in network.params for var in params]
        optimizer = Optimizer(variables, experiment)
        loss_sum = tf.Variable(0.0)  # accumulated inside the step: no extra eager op per step

    def train_step(images, labels, batch):
        with tf.GradientTape() as tape:
            logits = network(tf.gather(images, batch))
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.gather(labels, batch), logits=logits)
            )
        optimizer.apply(tape.gradient(loss, variables))
        loss_sum.assign_add(loss)

    def predict(images):
        return network(images)

    graph = experiment["variant"] == "graph"
    if graph:
        train_step, predict = tf.function(train_step, jit_compile=False), tf.function(predict, jit_compile=False)
    return {"network": network, "variables": variables, "train_step": train_step, "predict": predict,
            "graph": graph, "loss_sum": loss_sum}  # fmt: skip


def parameter_count(model):
    return sum(int(tf.size(var)) for var in model["variables"])


def engaged(model):
    return {"variant": "graph" if model["graph"] else "eager", "graph": model["graph"],
            "tf_function": model["graph"], "xla": False, "dtype": model["variables"][0].dtype.name,
            "layout": "NHWC"}  # fmt: skip


def train_epoch(model, staged, order, batch_size):
    with tf.device(staged["device"]):
        indices = tf.constant(order)
        model["loss_sum"].assign(0.0)
        steps = len(order) // batch_size
        for step in range(steps):
            model["train_step"](staged["train_x"], staged["train_y"], indices[step * batch_size : (step + 1) * batch_size])
        return float(model["loss_sum"]) / steps


def evaluate(model, staged, batch_size):
    with tf.device(staged["device"]):
        loss_sum, correct = tf.zeros(()), tf.zeros((), tf.int32)
        count = int(staged["test_y"].shape[0])
        for start in range(0, count, batch_size):
            images, labels = staged["test_x"][start : start + batch_size], staged["test_y"][start : start + batch_size]
            logits = model["predict"](images)
            loss_sum += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            correct += tf.reduce_sum(tf.cast(tf.argmax(logits, axis=1, output_type=tf.int32) == labels, tf.int32))
        return float(loss_sum) / count, int(correct) / count


def logits(model, images):
    return model["predict"](tf.constant(images)).numpy()


def sync(device):
    tf.test.experimental.sync_devices()


def allocator_peak_mb(device):
    return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20 if device == "gpu" else None


def is_oom(error):
    return isinstance(error, tf.errors.ResourceExhaustedError)


# Operator microbenchmarks (dlbench/ops.py).
def operators(device, dtype):
    kind = getattr(tf, dtype)
    functions = {
        "from_numpy": lambda array: tf.constant(array, dtype=kind),
        "from_list": lambda values: tf.constant(values, dtype=kind),
        "sigmoid": tf.math.sigmoid, "relu": tf.nn.relu, "tanh": tf.math.tanh, "softrelu": tf.math.softplus,
        "softsign": tf.math.softsign, "dot": lambda a, b: tf.tensordot(a, b, 1), "gemm": tf.linalg.matmul,
        "flatten": lambda x: tf.reshape(x, [tf.shape(x)[0], -1]),
        "normalize": lambda x: tf.math.l2_normalize(x, axis=1), "copy": tf.identity,
    }  # fmt: skip

    def on_device(function):
        def run(*args):
            with tf.device(device_name(device)):
                return function(*args)

        return run

    return {name: on_device(function) for name, function in functions.items()}


def ops_input(array, device, dtype):
    with tf.device(device_name(device)):
        return tf.identity(tf.constant(array, dtype=getattr(tf, dtype)))


def ops_output(value):
    return tf.cast(value, tf.float32).numpy()


def ops_sync(device, value):
    sync(device)
