"""TensorFlow adapter in plain TensorFlow ops (tf.nn, tf.Variable, fused optimiser kernels), no Keras.

Variants: eager runs the step op by op; graph wraps the same step in tf.function; xla in tf.function with
jit_compile=True; -amp computes in float16 (GPU) or bfloat16 (CPU) on float32 variables, as Keras' mixed
policies do: each layer casts its weights to the compute dtype, batch-norm statistics and the loss stay float32,
and float16 scales the loss dynamically (_LossScale below, Keras' LossScaleOptimizer's rule). Layout NHWC, the
neutral layout, so weights load unchanged; padding is explicit (TensorFlow's "SAME" would pad stride-2
convolutions on even sizes bottom/right only, unlike the spec).
"""

import itertools

import tensorflow as tf

from .. import data, mathmode, specs, variants
from . import GATHER_AND_PLACE, OPTIMIZER_DEFAULTS, RMSPROP_RHO

FRAMEWORK = "tensorflow"
INPUT_WORK = GATHER_AND_PLACE
LOADER = "tf.data (parallel map: read, decode_and_crop_jpeg, resize, flip; batch, prefetch)"


def version():
    return tf.__version__


def _device_name(device):
    return "/GPU:0" if device == "gpu" else "/CPU:0"


def configure(device, threads, seed, math_mode):
    tf.random.set_seed(seed)
    if device == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("device gpu requested but TensorFlow sees no GPU (is this the CUDA env?)")
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)  # else TensorFlow takes the whole card up front
    return {**apply_threads(threads), "device_name": _device_name(device), **apply_math_mode(math_mode)}


def apply_threads(threads):
    """Pinned: intra-op N, inter-op 1. Otherwise TensorFlow's own choice, which it reports as 0 (one thread per
    core); read back (also Keras on TensorFlow: shared, contract.KerasBackend)."""
    if threads is not None:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    return {
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
    }


def apply_math_mode(math_mode):
    """TensorFloat-32 set and read back as TensorFlow reports it; autotuning of cuDNN (graph, eager) and XLA (xla)
    convolutions, from the variables set before the import (also Keras on TensorFlow: shared, contract.KerasBackend)."""
    tf.config.experimental.enable_tensor_float_32_execution(math_mode["tf32"])
    return {
        "tf32": mathmode.tf32_engaged(tf.config.experimental.tensor_float_32_execution_enabled()),
        "conv_autotune": mathmode.tensorflow_autotune_engaged(),
    }


def stage(arrays, experiment):
    """Device placement: the dataset as tensors on the training device, batches gathered inside the step. Host
    placement: the NumPy arrays, from which every step's batch is gathered and passed to the step (see train_epoch)."""
    if experiment["data_placement"] == "host":
        return dict(arrays, device=_device_name(experiment["device"]), on_host=True)
    with tf.device(_device_name(experiment["device"])):
        staged = {key: tf.identity(tf.constant(value)) for key, value in arrays.items()}
    return dict(staged, device=_device_name(experiment["device"]), on_host=False)


def _image_pipeline(meta, split, workers):
    """dataset(items, batch_size): a streamed split as tf.data, the pipeline of TensorFlow's own ImageNet models. Per
    item (a row of data.stream_order or data.eval_order) read the file, decode it (training: only the crop box,
    decode_and_crop_jpeg), resize bilinearly with antialiasing, flip; in `workers` parallel calls on a private pool
    of as many threads; uint8 NHWC batches with int32 labels, prefetched. The split's paths and labels become
    tensors once, here, not in every epoch's timing. Also the loader of Keras, on every backend, and of Flax,
    which call stream."""
    files, labels, _ = data.stream_files(meta, split)
    files, labels, size = tf.constant(files), tf.constant(labels), meta["shape"][0]

    def dataset(items, batch_size):
        train = "flip" in items.dtype.names

        def load(item):
            box = {name: tf.cast(item[name], tf.int32) for name in ("left", "top", "width", "height")}
            contents = tf.io.read_file(tf.gather(files, item["index"]))
            if train:
                window = tf.stack([box["top"], box["left"], box["height"], box["width"]])
                image = tf.image.resize(
                    tf.image.decode_and_crop_jpeg(contents, window, channels=3), [size, size], antialias=True
                )
                image = tf.cond(item["flip"], lambda: tf.image.flip_left_right(image), lambda: image)
            else:
                image = tf.image.resize(
                    tf.io.decode_jpeg(contents, channels=3), [box["height"], box["width"]], antialias=True
                )
                image = tf.image.crop_to_bounding_box(image, box["top"], box["left"], size, size)
            return tf.saturate_cast(tf.round(image), tf.uint8), tf.gather(labels, item["index"])

        pipeline = tf.data.Dataset.from_tensor_slices({name: items[name] for name in items.dtype.names})
        pipeline = pipeline.map(load, num_parallel_calls=workers).batch(batch_size, drop_remainder=train)
        options = tf.data.Options()
        options.threading.private_threadpool_size = workers
        return pipeline.prefetch(tf.data.AUTOTUNE).with_options(options)

    return dataset


def _host_iterator(dataset):
    """An iterator over a tf.data pipeline that runs on the host, even where the caller's scope is the GPU (the
    steps' tf.device): the loader's batches are then copied to the device by the step."""
    with tf.device("/CPU:0"):
        return iter(dataset)


def stream(meta, experiment, workers):
    """Data placement stream: tf.data over the image folder (_image_pipeline), made per epoch from its items; uint8
    batches made float and normalised inside the compiled step, on the device (_normalised)."""
    _, test_labels, test_sizes = data.stream_files(meta, "val")
    test_items = data.eval_order(test_sizes, meta["shape"][0])
    test = _image_pipeline(meta, "val", workers)(test_items, experiment["batch_size"])
    return {
        "stream": True,
        "train": _image_pipeline(meta, "train", workers),
        "test": test,
        "test_y": test_labels,
        "device": _device_name(experiment["device"]),
    }


def _normalised(images):
    """Streamed uint8 batches as float32 normalised with the ImageNet statistics; other batches as they are."""
    if images.dtype != tf.uint8:
        return images
    return (tf.cast(images, tf.float32) - [255 * mean for mean in data.IMAGENET_MEAN]) / [
        255 * std for std in data.IMAGENET_STD
    ]


def _spatial_padding(padding):
    return [[0, 0], [padding, padding], [padding, padding], [0, 0]]


def _plan(spec, input_shape, leaf_indices):
    """The spec as steps with shapes resolved once, so that a call only runs ops (eager mode calls per training step).
    A leaf step is (layer, in_shape, index of its variables); a residual step (layer, body steps, shortcut), where
    the shortcut is steps or option A's (stride, pad)."""
    steps = []
    for layer, in_shape, out_shape in specs.layer_shapes(spec, input_shape):
        if isinstance(layer, specs.Residual):
            body = _plan(layer.body, in_shape, leaf_indices)
            if layer.shortcut == "zero_pad":
                shortcut = specs.zero_pad_geometry(in_shape, out_shape)
            else:
                shortcut = _plan(layer.shortcut, in_shape, leaf_indices)
            steps.append((layer, body, shortcut))
        else:
            steps.append((layer, in_shape, next(leaf_indices)))
    return steps


class _Network(tf.Module):
    """The spec applied with tf.nn ops to tf.Variables holding the neutral weights (one list per leaf), computing
    in `compute_dtype` (float32 variables are cast per call under mixed precision)."""

    def __init__(self, spec, input_shape, weights, compute_dtype=tf.float32):
        super().__init__()
        self.compute_dtype = compute_dtype
        self.params = []
        for (layer, in_shape, _), arrays in zip(specs.leaves(spec, input_shape), weights):
            trainable = specs.parameter_shapes(layer, in_shape)[1]
            self.params.append([tf.Variable(array, trainable=index < trainable) for index, array in enumerate(arrays)])
        self.steps = _plan(spec, input_shape, iter(range(len(self.params))))

    def __call__(self, images, training):
        logits = self.apply(self.steps, tf.cast(images, self.compute_dtype), training)
        return tf.cast(logits, tf.float32)  # the loss and softmax in float32, as Keras' mixed policies do

    def apply(self, steps, x, training):
        for layer, first, second in steps:
            if isinstance(layer, specs.Residual):
                if isinstance(second, tuple):  # option A: subsample, zero-pad the channels
                    stride, pad = second
                    shortcut = tf.pad(x[:, ::stride, ::stride, :], [[0, 0], [0, 0], [0, 0], [pad, pad]])
                else:
                    shortcut = self.apply(second, x, training)
                x = self.apply(first, x, training) + shortcut
            else:
                x = self.leaf(layer, first, x, training, self.params[second])
            if getattr(layer, "activation", None) == "relu":
                x = tf.nn.relu(x)
        return x

    def leaf(self, layer, in_shape, x, training, params):
        if isinstance(layer, specs.BatchNorm):
            return _batch_norm(layer, x, training, *params)
        params = [tf.cast(param, self.compute_dtype) for param in params]
        if isinstance(layer, specs.Conv):
            x = tf.nn.conv2d(x, params[0], [1, layer.stride, layer.stride, 1], _spatial_padding(layer.padding))
            return x + params[1] if layer.bias else x
        if isinstance(layer, specs.Pool):
            if layer.padding:  # zeros: max pools follow a ReLU (specs.Pool)
                x = tf.pad(x, _spatial_padding(layer.padding))
            pool = tf.nn.avg_pool2d if layer.kind == "avg" else tf.nn.max_pool2d
            return pool(x, layer.size, layer.step, "VALID")
        if isinstance(layer, specs.GlobalAvgPool):
            return tf.reduce_mean(x, axis=[1, 2])
        if isinstance(layer, specs.Flatten):
            return tf.reshape(x, [tf.shape(x)[0], -1])
        if isinstance(layer, specs.Dropout):
            return tf.nn.dropout(x, layer.rate) if training else x
        if isinstance(layer, specs.LSTM):
            return _row_lstm(x, in_shape, *params)
        return tf.matmul(x, params[0]) + params[1]


def _batch_norm(layer, x, training, gamma, beta, moving_mean, moving_variance):
    """Statistics and normalisation in float32 whatever the compute dtype (Keras' BatchNormalization does the same
    under mixed precision); the result in the input's dtype."""
    dtype, x = x.dtype, tf.cast(x, tf.float32)
    if training:
        mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
        moving_mean.assign(moving_mean * layer.momentum + mean * (1 - layer.momentum))
        moving_variance.assign(moving_variance * layer.momentum + variance * (1 - layer.momentum))
    else:
        mean, variance = moving_mean, moving_variance
    return tf.cast(tf.nn.batch_normalization(x, mean, variance, beta, gamma, layer.epsilon), dtype)


def _row_lstm(x, in_shape, kernel, recurrent, bias):
    """An LSTM over the image rows (unrolled: the row count is static); returns the last hidden state."""
    rows = tf.reshape(x, [-1, in_shape[0], in_shape[1] * in_shape[2]])
    hidden = cell = tf.zeros([tf.shape(x)[0], recurrent.shape[0]], x.dtype)
    for step in range(in_shape[0]):
        gates = tf.matmul(rows[:, step], kernel) + tf.matmul(hidden, recurrent) + bias
        input_gate, forget_gate, candidate, output_gate = tf.split(gates, 4, axis=1)
        cell = tf.sigmoid(forget_gate) * cell + tf.sigmoid(input_gate) * tf.tanh(candidate)
        hidden = tf.sigmoid(output_gate) * tf.tanh(cell)
    return hidden


class _Optimizer:
    """Adam / SGD-momentum / RMSprop through TensorFlow's fused resource kernels (what tf.compat.v1 optimisers
    ran); weight decay is coupled (added to the gradient), as in PyTorch and MXNet."""

    def __init__(self, variables, experiment):
        self.variables, self.experiment = variables, experiment
        self.slots = [[tf.Variable(tf.zeros_like(var)) for _ in range(2)] for var in variables]
        self.step = tf.Variable(0.0)

    def apply(self, gradients):
        rate, decay, name = (
            self.experiment["learning_rate"],
            self.experiment["weight_decay"],
            self.experiment["optimizer"],
        )
        self.step.assign_add(1.0)
        for var, (first, second), grad in zip(self.variables, self.slots, gradients):
            if decay:
                grad = grad + decay * var
            if name == "adam":
                beta_1, beta_2 = OPTIMIZER_DEFAULTS["beta_1"], OPTIMIZER_DEFAULTS["beta_2"]
                tf.raw_ops.ResourceApplyAdam(
                    var=var.handle,
                    m=first.handle,
                    v=second.handle,
                    beta1_power=beta_1**self.step,
                    beta2_power=beta_2**self.step,
                    lr=rate,
                    beta1=beta_1,
                    beta2=beta_2,
                    epsilon=OPTIMIZER_DEFAULTS["epsilon"],
                    grad=grad,
                )
            elif name == "rmsprop":
                tf.raw_ops.ResourceApplyRMSProp(
                    var=var.handle,
                    ms=first.handle,
                    mom=second.handle,
                    lr=rate,
                    rho=RMSPROP_RHO,
                    momentum=0.0,
                    epsilon=OPTIMIZER_DEFAULTS["epsilon"],
                    grad=grad,
                )
            else:
                tf.raw_ops.ResourceApplyMomentum(
                    var=var.handle, accum=first.handle, lr=rate, grad=grad, momentum=self.experiment["momentum"]
                )


class _LossScale:
    """Dynamic loss scaling for float16, Keras' LossScaleOptimizer rule: the loss is multiplied by the scale and the
    gradients divided by it; a step whose gradients are not finite is skipped and halves the scale, and each run of
    2,000 finite steps doubles it. The decision is a tf.cond on the device: no host read per step."""

    INITIAL, GROWTH_STEPS = 2.0**15, 2000

    def __init__(self):
        self.scale = tf.Variable(self.INITIAL, trainable=False)
        self.finite_steps = tf.Variable(0, trainable=False, dtype=tf.int64)

    def apply(self, optimizer, scaled_gradients):
        gradients = [gradient / self.scale for gradient in scaled_gradients]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(gradient)) for gradient in gradients])

        def update():
            optimizer.apply(gradients)
            grow = self.finite_steps + 1 >= self.GROWTH_STEPS
            self.scale.assign(tf.where(grow, self.scale * 2, self.scale))
            self.finite_steps.assign(tf.where(grow, tf.constant(0, tf.int64), self.finite_steps + 1))

        def skip():
            self.scale.assign(self.scale / 2)
            self.finite_steps.assign(0)

        tf.cond(finite, update, skip)


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if variant.mode not in ("eager", "graph", "xla") or variant.channels_last:
        raise ValueError(f"tensorflow adapter runs eager, graph and xla, not {variant.name!r}")
    if variant.mixed_precision and variant.mode == "eager":
        raise ValueError(
            "tensorflow adapter runs -amp compiled only (graph-amp, xla-amp): eager float16 would read "
            "the loss scale's decision back to the host every step"
        )
    compute_dtype = tf.as_dtype(variants.compute_dtype(variant, experiment["device"]))
    with tf.device(_device_name(experiment["device"])):
        network = _Network(spec, input_shape, weights, compute_dtype)
        variables = network.trainable_variables
        optimizer = _Optimizer(variables, experiment)
        loss_scale = _LossScale() if compute_dtype == tf.float16 else None
        loss_sum = tf.Variable(0.0)  # accumulated inside the step: no extra eager op per step

    def train_on(images, labels):
        with tf.GradientTape() as tape:
            logits = network(_normalised(images), training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            scaled = loss * loss_scale.scale if loss_scale else loss
        gradients = tape.gradient(scaled, variables)
        if loss_scale:
            loss_scale.apply(optimizer, gradients)
        else:
            optimizer.apply(gradients)
        loss_sum.assign_add(loss)

    def gather_and_train(images, labels, batch):
        train_on(tf.gather(images, batch), tf.gather(labels, batch))

    def predict(images):
        return network(_normalised(images), training=False)

    steps = {"train_on": train_on, "gather_and_train": gather_and_train, "predict": predict}
    if variant.mode != "eager":
        steps = {name: tf.function(step, jit_compile=variant.mode == "xla") for name, step in steps.items()}
    return dict(
        steps,
        network=network,
        variables=variables,
        variant=variant,
        loss_sum=loss_sum,
        example=None,
        loss_scale=loss_scale,
        device=_device_name(experiment["device"]),
    )


def parameter_count(model):
    return sum(int(tf.size(var)) for var in model["variables"])


def weights(model, spec, input_shape):
    return [[var.numpy() for var in params] for params in model["network"].params]


def engaged(model):
    """What ran, read back: for xla, whether the traced train step lowers to an XLA HLO module."""
    variant = model["variant"]
    result = {
        "variant": variant.name,
        "graph": variant.mode != "eager",
        "tf_function": variant.mode != "eager",
        "xla": variant.mode == "xla",
        "dtype": model["variables"][0].dtype.name,
        "matmul_dtype": model["network"].compute_dtype.name,
        "layout": "NHWC",
        "loss_scaling": model["loss_scale"] is not None,
    }
    if variant.mode == "xla" and model["example"] is not None:
        step, arguments = model["example"]
        hlo = step.experimental_get_compiler_ir(*arguments)(stage="hlo")
        result["xla_compiled"] = "HloModule" in hlo
    return result


def _batch_calls(model, staged, order, batch_size):
    """(step function, arguments) per batch of `order`: the gather is inside the step for device-staged data,
    in NumPy before it for host data (the step's inputs are then copied to the device)."""
    if staged.get("stream"):
        for images, labels in _host_iterator(staged["train"](order, batch_size)):
            yield model["train_on"], (images, labels)
        return
    if staged["on_host"]:
        for images, labels in data.host_batches(staged["train_x"], staged["train_y"], order, batch_size):
            yield model["train_on"], (tf.constant(images), tf.constant(labels))
        return
    indices = tf.constant(order)
    for batch in data.batch_slices(len(order), batch_size):
        yield model["gather_and_train"], (staged["train_x"], staged["train_y"], indices[batch])


def _train_steps(model, calls):
    with tf.device(model["device"]):
        model["loss_sum"].assign(0.0)
        steps = 0
        for step, arguments in calls:
            step(*arguments)
            steps += 1
        model["example"] = (step, arguments)
        return float(model["loss_sum"]) / steps


def train_epoch(model, staged, order, batch_size):
    return _train_steps(model, _batch_calls(model, staged, order, batch_size))


def fixed_batch_steps(model, staged, order, batch_size):
    if staged.get("stream"):
        images, labels = next(iter(staged["train"](order[:batch_size], batch_size)))
    else:
        images, labels = (
            tf.gather(staged["train_x"], order[:batch_size]),
            tf.gather(staged["train_y"], order[:batch_size]),
        )
    with tf.device(model["device"]):  # the first batch, gathered and on the device before timing
        images, labels = tf.identity(images), tf.identity(labels)
    return lambda steps: _train_steps(model, itertools.repeat((model["train_on"], (images, labels)), steps))


def loader_batches(staged, order, batch_size):
    """The loader's own host batches (uint8 NHWC, labels) of `order`; None: of the evaluation split (tests)."""
    if order is None:
        dataset = staged["test"]
    else:
        dataset = staged["train"](order, batch_size)
    for images, labels in dataset:
        yield images.numpy(), labels.numpy()


def loader_pass(staged, order, batch_size):
    """The training batches of `order` placed on the device, the model removed (the loader's own throughput)."""
    for images, labels in _host_iterator(staged["train"](order, batch_size)):
        with tf.device(staged["device"]):
            tf.identity(images), tf.identity(labels)


def _test_batches(staged, batch_size):
    """(images, labels) of the test split in order, where the data lives (host batches are copied by the step)."""
    if staged.get("stream"):
        yield from _host_iterator(staged["test"])
        return
    count = len(staged["test_y"])
    for start in range(0, count, batch_size):
        images, labels = staged["test_x"][start : start + batch_size], staged["test_y"][start : start + batch_size]
        yield (tf.constant(images), tf.constant(labels)) if staged["on_host"] else (images, labels)


def evaluate(model, staged, batch_size):
    with tf.device(staged["device"]):
        loss_sum, correct = tf.zeros(()), tf.zeros((), tf.int32)
        count = len(staged["test_y"])
        for images, labels in _test_batches(staged, batch_size):
            logits = model["predict"](images)
            loss_sum += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            correct += tf.reduce_sum(tf.cast(tf.argmax(logits, axis=1, output_type=tf.int32) == labels, tf.int32))
        return float(loss_sum) / count, int(correct) / count


def logits(model, images):
    return model["predict"](tf.constant(images)).numpy()


def sync(device):
    tf.test.experimental.sync_devices()


def cuda_versions():
    build = tf.sysconfig.get_build_info()
    return build.get("cuda_version"), build.get("cudnn_version")


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
        "sigmoid": tf.math.sigmoid,
        "relu": tf.nn.relu,
        "tanh": tf.math.tanh,
        "softrelu": tf.math.softplus,
        "softsign": tf.math.softsign,
        "dot": lambda a, b: tf.tensordot(a, b, 1),
        "gemm": tf.linalg.matmul,
        "flatten": lambda x: tf.reshape(x, [tf.shape(x)[0], -1]),
        "normalize": lambda x: tf.math.l2_normalize(x, axis=1),
        "copy": tf.identity,
    }

    def on_device(function):
        def run(*args):
            with tf.device(_device_name(device)):
                return function(*args)

        return run

    return {name: on_device(function) for name, function in functions.items()}


def ops_input(array, device, dtype):
    with tf.device(_device_name(device)):
        return tf.identity(tf.constant(array, dtype=getattr(tf, dtype)))


def ops_output(value):
    return tf.cast(value, tf.float32).numpy()


def ops_sync(device, value):
    sync(device)
