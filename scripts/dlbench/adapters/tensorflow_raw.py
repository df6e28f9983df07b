"""TensorFlow adapter in plain TensorFlow ops (tf.nn, tf.Variable, fused optimiser kernels), no Keras.

Variants: eager runs the step op by op; graph wraps the same step in tf.function; xla in tf.function with
jit_compile=True; -amp computes in float16 (GPU) or bfloat16 (CPU) on float32 variables, as Keras' mixed
policies do: each layer casts its weights to the compute dtype, batch-norm statistics and the loss stay float32,
and float16 scales the loss dynamically (_LossScale below, Keras' LossScaleOptimizer's rule). Layout NHWC, the
neutral layout, so weights load unchanged; padding is explicit (TensorFlow's "SAME" would pad stride-2
convolutions on even sizes bottom/right only, unlike the spec).

Data-parallel replicas: tf.distribute.MirroredStrategy over N devices (on a CPU, N logical CPUs sharing the cores),
variables and optimiser slots mirrored on every device, the step run per replica by strategy.run on the replica's
slice of each global batch. Each replica's loss is its slice's mean divided by the replica count, and the gradients
are summed over the replicas (all-reduce), which gives the global batch's mean gradient; each replica then applies
the same update to its own copy. Batch-norm statistics are each replica's own (of its slice), replica 0's read back,
as DistributedDataParallel broadcasts rank 0's. XLA is refused with replicas (see build).

Attention models: TensorFlow core has no fused attention op, so self-attention is composed as TensorFlow's own
models write it (Keras' MultiHeadAttention): einsum, a causal mask, tf.nn.softmax, einsum; under jit_compile XLA
fuses the scaling, mask and softmax around the two matmuls. Dense layers on a sequence run one GEMM over every token;
a language model's inputs are int token ids, its loss the mean over every token; a tied head reads the token
embedding's variable (one variable, counted and updated once).
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf

from .. import data, mathmode, parallel, specs, variants
from . import GATHER_AND_PLACE, OPTIMIZER_DEFAULTS, RMSPROP_RHO, contract, loop

FRAMEWORK = "tensorflow"
INPUT_WORK = GATHER_AND_PLACE
LOADER = "tf.data (parallel map: read, decode_and_crop_jpeg, resize, flip; batch, prefetch)"


@dataclasses.dataclass
class _Staged(contract.StagedArrays):
    """The dataset as stage placed it: tensors on the device (with replicas, the training split on every replica's
    device), or the NumPy arrays on the host (on_host)."""

    device: str
    on_host: bool


@dataclasses.dataclass
class _Streamed(contract.StreamedData):
    """tf.data over the image folder: the training pipeline made per epoch from its items, the evaluation one made."""

    train: object  # (items, batch_size) -> tf.data.Dataset
    test: tf.data.Dataset
    test_y: np.ndarray
    device: str


@dataclasses.dataclass
class _Model:
    """The network, its variables and optimiser state, and its steps (tf.function'd except in eager mode; with replicas
    run by the strategy on every replica)."""

    train_on: object  # (images, labels): one training step on a batch
    gather_and_train: object  # (images, labels, rows): one step on the rows gathered on the device
    predict: object  # images -> logits
    network: "_Network"
    variables: list
    variant: variants.Variant
    loss_sum: tf.Variable
    example: tuple | None  # the last step and its arguments, to read XLA's compiled module back
    loss_scale: "_LossScale | None"
    device: str
    strategy: object  # tf.distribute.MirroredStrategy with replicas, else None


def version():
    return tf.__version__


def _device_name(device):
    return "/GPU:0" if device == "gpu" else "/CPU:0"


# The replicas' MirroredStrategy, made by configure (None with one replica): build and stage place on its devices.
_strategy = None


def configure(device, threads, seed, math_mode, replicas):
    global _strategy
    tf.random.set_seed(seed)
    if device == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("device gpu requested but TensorFlow sees no GPU (is this the CUDA env?)")
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)  # else TensorFlow takes the whole card up front
    configured = {**apply_threads(threads), "device_name": _device_name(device), **apply_math_mode(math_mode)}
    if not parallel.through_mechanism(replicas):
        return configured
    _strategy = mirrored_strategy(device, replicas)  # last: listing the logical devices starts the runtime
    devices = list(_strategy.extended.worker_devices)
    return {**configured, "replicas": _strategy.num_replicas_in_sync, "replica_devices": devices}


def mirrored_strategy(device, replicas):
    """A MirroredStrategy over `replicas` devices: on a CPU as many logical CPUs sharing its cores (made here, so
    before anything starts TensorFlow's runtime), reducing through ReductionToOneDevice (NCCL is GPU-only); on GPUs
    the first `replicas`, reducing through NcclAllReduce, the all-reduce TensorFlow's guide names for it (named here:
    left to itself, TensorFlow 2.21 picks its collective ops with an AUTO implementation). RuntimeError where fewer
    devices exist (also Keras on TensorFlow: shared, contract.TensorFlowBackend)."""
    if device == "cpu":
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * replicas
        )
    kind = "GPU" if device == "gpu" else "CPU"
    devices = [logical.name for logical in tf.config.list_logical_devices(kind)]
    if len(devices) < replicas:
        raise RuntimeError(f"{replicas} replicas need {replicas} {kind} devices, but TensorFlow sees {len(devices)}")
    reduction = tf.distribute.ReductionToOneDevice() if device == "cpu" else tf.distribute.NcclAllReduce()
    return tf.distribute.MirroredStrategy(devices[:replicas], cross_device_ops=reduction)


def strategy_engagement(strategy):
    """{data_parallel, collective}: the strategy and the cross-device reduction its all-reduces of float gradients
    run through, read back (shared, contract.TensorFlowBackend)."""
    return {
        "data_parallel": type(strategy).__name__,
        "collective": type(strategy.extended._cross_device_ops).__name__,
        "batch_norm_statistics": "per replica: each replica normalises its slice of the batch",
    }


def replica_max(value):
    """The value itself: one process drives every replica's device."""
    return value


def apply_threads(threads):
    """Pinned: intra-op N, inter-op 1. Otherwise TensorFlow's own choice, which it reports as 0: one thread per
    schedulable CPU, whose count is recorded beside it; read back (also Keras on TensorFlow: shared,
    contract.KerasBackend)."""
    if threads is not None:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    return {
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "schedulable_cpus": parallel.schedulable_cpus(),
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
    """Device placement: the dataset as tensors on the training device, batches gathered inside the step; with
    replicas the training split on every replica's device, each gathering its slices from its own copy. Host
    placement: the NumPy arrays, from which every step's batch is gathered and passed to the step (see train_epoch)."""
    device = _device_name(experiment["device"])
    if experiment["data_placement"] == "host":
        return _Staged(**arrays, device=device, on_host=True)
    replicated = ("train_x", "train_y") if parallel.through_mechanism(parallel.replicas(experiment)) else ()
    with tf.device(device):
        placed = {
            key: _on_every_replica(value) if key in replicated else tf.identity(tf.constant(value))
            for key, value in arrays.items()
        }
    return _Staged(**placed, device=device, on_host=False)


def _on_every_replica(array):
    """A host array copied to every replica's device: a PerReplica value, which strategy.run hands out per replica."""
    devices = _strategy.extended.worker_devices

    def place(context):
        with tf.device(devices[context.replica_id_in_sync_group]):
            return tf.identity(tf.constant(array))

    return _strategy.experimental_distribute_values_from_function(place)


def _split(strategy, parts):
    """A host batch's parts (arrays or tensors) as the step takes them: tensors; with replicas PerReplica values,
    each replica's part its slice of the batch (parallel.replica_slice), on its device."""
    if strategy is None:
        return tuple(tf.convert_to_tensor(part) for part in parts)
    devices = strategy.extended.worker_devices

    def place(part):
        def replica_part(context):
            rank, count = context.replica_id_in_sync_group, context.num_replicas_in_sync
            with tf.device(devices[rank]):
                return tf.identity(parallel.replica_slice(part, rank, count))

        return strategy.experimental_distribute_values_from_function(replica_part)

    return tuple(place(part) for part in parts)


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
    test = _image_pipeline(meta, "val", workers)(test_items, parallel.replica_batch_size(experiment))
    return _Streamed(
        train=_image_pipeline(meta, "train", workers),
        test=test,
        test_y=test_labels,
        device=_device_name(experiment["device"]),
    )


def _normalised(images):
    """Streamed uint8 batches as float32 normalised with the ImageNet statistics; other batches as they are."""
    if images.dtype != tf.uint8:
        return images
    return (tf.cast(images, tf.float32) - [255 * mean for mean in data.IMAGENET_MEAN]) / [
        255 * std for std in data.IMAGENET_STD
    ]


def _spatial_padding(padding):
    return [[0, 0], [padding, padding], [padding, padding], [0, 0]]


# The activations a leaf or residual may name; GELU the exact (erf) one, tf.nn.gelu's default.
_ACTIVATIONS = {"relu": tf.nn.relu, "gelu": tf.nn.gelu}


class _Network(tf.Module):
    """The spec applied with tf.nn ops to tf.Variables holding the neutral weights (one list per leaf), computing
    in `compute_dtype` (float32 variables are cast per call under mixed precision). token_table: the token
    embedding's variable, which a tied head reads (found while the variables are made: no further walk of the
    spec); attends: whether the spec has self-attention."""

    def __init__(self, spec, input_shape, weights, compute_dtype=tf.float32, synchronised=False):
        super().__init__()
        self.compute_dtype, self.synchronised = compute_dtype, synchronised
        self.params, self.token_table, self.attends = [], None, False
        for (layer, in_shape, _), arrays in zip(specs.leaves(spec, input_shape), weights):
            trainable = specs.parameter_shapes(layer, in_shape)[1]
            self.params.append([tf.Variable(array, trainable=index < trainable) for index, array in enumerate(arrays)])
            if isinstance(layer, specs.TokenEmbedding):
                self.token_table = self.params[-1][0]
            self.attends |= isinstance(layer, specs.Attention)
        self.steps = specs.plan(spec, input_shape)

    def __call__(self, inputs, training):
        if inputs.dtype.is_floating:  # images; token ids stay integers
            inputs = tf.cast(inputs, self.compute_dtype)
        logits = self.apply(self.steps, inputs, training)
        return tf.cast(logits, tf.float32)  # the loss and softmax in float32, as Keras' mixed policies do

    def apply(self, steps, x, training):
        for layer, first, second in steps:
            if isinstance(layer, specs.Residual):
                if layer.shortcut == "zero_pad":  # option A: subsample, zero-pad the channels
                    stride, pad = second
                    shortcut = tf.pad(x[:, ::stride, ::stride, :], [[0, 0], [0, 0], [0, 0], [pad, pad]])
                else:
                    shortcut = self.apply(second, x, training)
                x = self.apply(first, x, training) + shortcut
            else:
                x = self.leaf(layer, first, x, training, self.params[second])
            activation = getattr(layer, "activation", None)
            if activation:
                x = _ACTIVATIONS[activation](x)
        return x

    def leaf(self, layer, in_shape, x, training, params):
        if isinstance(layer, specs.BatchNorm):
            return _batch_norm(layer, x, training, self.synchronised, *params)
        if isinstance(layer, specs.LayerNorm):
            return _layer_norm(x, layer.epsilon, *params)
        if isinstance(layer, specs.TokenEmbedding):  # the rows looked up, then cast: not the whole table
            return tf.cast(tf.gather(params[0], x), self.compute_dtype)
        params = [tf.cast(param, self.compute_dtype) for param in params]
        if isinstance(layer, (specs.PatchEmbed, specs.ClassToken, specs.PositionEmbedding, specs.TokenPool)):
            return _token_leaf(layer, x, params)
        if isinstance(layer, specs.Attention):
            return _attention(x, layer.heads, layer.causal, *params)
        if isinstance(layer, specs.LMHead):  # tied: the token embedding's table transposed, no weights of its own
            if layer.tied:
                return _last_axis_matmul(x, tf.cast(self.token_table, self.compute_dtype), transpose_kernel=True)
            return _last_axis_matmul(x, params[0])
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
        return _last_axis_matmul(x, params[0]) + params[1]


def _last_axis_matmul(x, kernel, transpose_kernel=False):
    """x times the kernel over x's last axis. A sequence (N, tokens, width) as one (N * tokens, width) matrix: one
    GEMM over every token, as Keras' Dense runs it (tensordot), not a batched matmul per sequence."""
    if x.shape.rank == 2:
        return tf.matmul(x, kernel, transpose_b=transpose_kernel)
    rows = _last_axis_matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel, transpose_kernel)
    return tf.reshape(rows, [-1, *x.shape[1:-1], rows.shape[-1]])


def _token_leaf(layer, x, params):
    """The parameter-light leaves of a transformer: patches to tokens, the class token, positions, pooling."""
    if isinstance(layer, specs.PatchEmbed):  # a conv whose kernel is its stride; its (h, w) grid row-major as tokens
        x = tf.nn.conv2d(x, params[0], layer.patch, "VALID") + params[1]
        return tf.reshape(x, [-1, x.shape[1] * x.shape[2], layer.width])
    if isinstance(layer, specs.ClassToken):
        return tf.concat([tf.broadcast_to(params[0], [tf.shape(x)[0], 1, x.shape[-1]]), x], axis=1)
    if isinstance(layer, specs.PositionEmbedding):
        return x + params[0]
    return x[:, 0] if layer.kind == "class" else tf.reduce_mean(x, axis=1)


def _layer_norm(x, epsilon, gamma, beta):
    """Over the last axis, biased variance; statistics and normalisation in float32 whatever the compute dtype (as
    Keras' LayerNormalization under mixed precision), the result in the input's dtype."""
    dtype, x = x.dtype, tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return tf.cast(tf.nn.batch_normalization(x, mean, variance, beta, gamma, epsilon), dtype)


# What self-attention runs (engaged): TensorFlow core has no fused attention op.
_COMPOSED_ATTENTION = "composed: tf.einsum, tf.nn.softmax, tf.einsum"


def _attention(x, heads, causal, qkv_kernel, qkv_bias, out_kernel, out_bias):
    """Multi-head self-attention as Keras' MultiHeadAttention composes it: the query scaled by 1 / sqrt(head width),
    scores and weighted sum by einsum straight on the (N, tokens, heads, head width) split of the projection; a
    causal mask sets later tokens' scores to -inf (the diagonal stays, so no row is all -inf)."""
    tokens, width = x.shape[1:]
    qkv = tf.reshape(_last_axis_matmul(x, qkv_kernel) + qkv_bias, [-1, tokens, 3, heads, width // heads])
    query, key, value = tf.unstack(qkv, axis=2)  # columns [q | k | v], each head-major
    scores = tf.einsum("nqhd,nkhd->nhqk", query * (1 / math.sqrt(width // heads)), key)
    if causal:
        earlier = np.tril(np.ones((tokens, tokens), bool))
        scores = tf.where(earlier, scores, tf.constant(-np.inf, scores.dtype))
    mixed = tf.einsum("nhqk,nkhd->nqhd", tf.nn.softmax(scores), value)
    return _last_axis_matmul(tf.reshape(mixed, [-1, tokens, width]), out_kernel) + out_bias


def _batch_norm(layer, x, training, synchronised, gamma, beta, moving_mean, moving_variance):
    """Statistics and normalisation in float32 whatever the compute dtype (Keras' BatchNormalization does the same
    under mixed precision); the result in the input's dtype. `synchronised`: statistics of the replicas' global
    batch."""
    dtype, x = x.dtype, tf.cast(x, tf.float32)
    if training:
        mean, variance = _global_moments(x) if synchronised else tf.nn.moments(x, axes=[0, 1, 2])
        moving_mean.assign(moving_mean * layer.momentum + mean * (1 - layer.momentum))
        moving_variance.assign(moving_variance * layer.momentum + variance * (1 - layer.momentum))
    else:
        mean, variance = moving_mean, moving_variance
    return tf.cast(tf.nn.batch_normalization(x, mean, variance, beta, gamma, layer.epsilon), dtype)


def _global_moments(x):
    """Mean and variance over N, H, W of every replica's slice: the sums, sums of squares and counts all-reduced in
    the replica context, as Keras' synchronized BatchNormalization computes them on TensorFlow."""
    count = tf.cast(tf.reduce_prod(tf.shape(x)[:3]), tf.float32)
    local = [tf.reduce_sum(x, axis=[0, 1, 2]), tf.reduce_sum(tf.square(x), axis=[0, 1, 2]), count]
    total, squares, count = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, local)
    mean = total / count
    return mean, squares / count - tf.square(mean)


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


# How the replicas' gradients are all-reduced: summed, each replica's loss being its share of the global batch's mean.
_GRADIENT_REDUCTION = tf.distribute.ReduceOp.SUM


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if variant.mode not in ("eager", "graph", "xla") or variant.channels_last:
        raise ValueError(f"tensorflow adapter runs eager, graph and xla, not {variant.name!r}")
    if variant.mixed_precision and variant.mode == "eager":
        raise ValueError(
            "tensorflow adapter runs -amp compiled only (graph-amp, xla-amp): eager float16 would read "
            "the loss scale's decision back to the host every step"
        )
    strategy = _strategy if parallel.through_mechanism(parallel.replicas(experiment)) else None
    if strategy and variant.mode == "xla":
        raise ValueError(
            "tensorflow adapter runs replicas eager and graph, not under XLA: jit_compile cannot compile a "
            "MirroredStrategy step, whose variables live on every replica's device (TensorFlow issue 53140; "
            "Keras turns XLA off under tf.distribute)"
        )
    compute_dtype = tf.as_dtype(variants.compute_dtype(variant, experiment["device"]))
    # With replicas, variables made in the strategy's scope are mirrored on every replica's device.
    with strategy.scope() if strategy else tf.device(_device_name(experiment["device"])):
        network = _Network(spec, input_shape, weights, compute_dtype, variant.sync_batch_norm)
        variables = network.trainable_variables
        optimizer = _Optimizer(variables, experiment)
        loss_scale = _LossScale() if compute_dtype == tf.float16 else None
        # Accumulated inside the step (no extra eager op per step); with replicas each adds its share, summed on read.
        loss_sum = tf.Variable(
            0.0, synchronization=tf.VariableSynchronization.ON_READ, aggregation=tf.VariableAggregation.SUM
        )

    def train_on(images, labels):
        with tf.GradientTape() as tape:
            logits = network(_normalised(images), training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            if strategy:  # summed over the replicas' equal slices, these shares make the global batch's mean
                loss /= strategy.num_replicas_in_sync
            scaled = loss * loss_scale.scale if loss_scale else loss
        # Dense: the token embedding's gather gives IndexedSlices, and the update (momentum, decay, Adam's moments),
        # the loss scale's check and the all-reduce take every row, as PyTorch's dense embedding gradient does.
        gradients = [tf.convert_to_tensor(gradient) for gradient in tape.gradient(scaled, variables)]
        if strategy:
            gradients = tf.distribute.get_replica_context().all_reduce(_GRADIENT_REDUCTION, gradients)
        if loss_scale:
            loss_scale.apply(optimizer, gradients)
        else:
            optimizer.apply(gradients)
        loss_sum.assign_add(loss)

    def gather_and_train(images, labels, batch):
        if strategy:  # one row per replica: its slice of the global batch
            batch = batch[tf.distribute.get_replica_context().replica_id_in_sync_group]
        train_on(tf.gather(images, batch), tf.gather(labels, batch))

    def predict(images):
        return network(_normalised(images), training=False)

    steps = {"train_on": train_on, "gather_and_train": gather_and_train, "predict": predict}  # _Model's steps
    if strategy:  # the training steps run on every replica, on its slice (evaluation: on replica 0's variables)
        steps.update({name: _replicated(strategy, steps[name]) for name in ("train_on", "gather_and_train")})
    if variant.mode != "eager":
        steps = {name: tf.function(step, jit_compile=variant.mode == "xla") for name, step in steps.items()}
    return _Model(
        **steps,
        network=network,
        variables=variables,
        variant=variant,
        loss_sum=loss_sum,
        example=None,
        loss_scale=loss_scale,
        device=_device_name(experiment["device"]),
        strategy=strategy,
    )


def _replicated(strategy, step):
    """The step run by every replica (strategy.run), each taking its part of PerReplica arguments."""
    return lambda *arguments: strategy.run(step, args=arguments)


def parameter_count(model):
    return sum(int(tf.size(var)) for var in model.variables)


def weights(model, spec, input_shape):
    return [[var.numpy() for var in params] for params in model.network.params]


def engaged(model):
    """What ran, read back: for xla, whether the traced train step lowers to an XLA HLO module."""
    variant = model.variant
    result = {
        "variant": variant.name,
        "graph": variant.mode != "eager",
        "tf_function": variant.mode != "eager",
        "xla": variant.mode == "xla",
        "dtype": model.variables[0].dtype.name,
        "matmul_dtype": model.network.compute_dtype.name,
        "layout": "NHWC",
        "loss_scaling": model.loss_scale is not None,
    }
    if model.network.attends:
        fused = ", its scale, mask and softmax fused by XLA (jit_compile)" if variant.mode == "xla" else ""
        result["attention"] = _COMPOSED_ATTENTION + fused
    if variant.mode == "xla" and model.example is not None:
        step, arguments = model.example
        hlo = step.experimental_get_compiler_ir(*arguments)(stage="hlo")
        result["xla_compiled"] = "HloModule" in hlo
    if model.strategy:
        reduction = (
            f"{_GRADIENT_REDUCTION.value.lower()} (all-reduce) over the replicas, each replica's loss its slice's "
            "mean divided by the replica count: the global batch's mean gradient"
        )
        result.update(strategy_engagement(model.strategy), gradient_reduction=reduction)
        if model.network.synchronised:
            result["batch_norm_statistics"] = "global batch: sums all-reduced in the replica context"
    return result


def _batch_calls(model, staged, order, batch_size):
    """(step function, arguments) per batch of `order`: the gather is inside the step for device-staged data,
    in NumPy before it for host data (the step's inputs are then copied to the device); with replicas, each
    replica's slice of every batch."""
    strategy = model.strategy
    if staged.STREAM:
        for batch in _host_iterator(staged.train(order, batch_size)):
            yield model.train_on, _split(strategy, batch)
        return
    if staged.on_host:
        for batch in data.host_batches(staged.train_x, staged.train_y, order, batch_size):
            yield model.train_on, _split(strategy, batch)
        return
    if strategy:
        indices = tf.constant(_replica_rows(order, batch_size, strategy.num_replicas_in_sync))
        for step in range(len(indices)):
            yield model.gather_and_train, (staged.train_x, staged.train_y, indices[step])
        return
    indices = tf.constant(order)
    for batch in data.batch_slices(len(order), batch_size):
        yield model.gather_and_train, (staged.train_x, staged.train_y, indices[batch])


def _replica_rows(order, batch_size, count):
    """The indices of `order` per batch and replica (batches, replicas, slice): each replica's slice of each
    batch (parallel.replica_slice)."""
    batches = [order[batch] for batch in data.batch_slices(len(order), batch_size)]
    return np.array([[parallel.replica_slice(batch, rank, count) for rank in range(count)] for batch in batches])


def _begin(model):
    model.loss_sum.assign(0.0)
    return model.loss_sum


def _step(model, call, loss_sum):
    """One step (a call of _batch_calls); the loss summed into the model's variable inside it. The last call is
    kept for the engagement check (XLA's compiled step)."""
    step, arguments = call
    step(*arguments)
    model.example = call
    return loss_sum


def _mean(model, loss_sum, steps):
    return float(loss_sum.read_value()) / steps  # read_value: with replicas, their shares summed


_LOOP = loop.Loop(begin=_begin, step=_step, mean=_mean, scope=lambda model: tf.device(model.device))


def train_epoch(model, staged, order, batch_size):
    return _LOOP.epoch(model, _batch_calls(model, staged, order, batch_size))


def fixed_batch_steps(model, staged, order, batch_size):
    strategy = model.strategy
    if staged.STREAM:
        batch = next(iter(staged.train(order[:batch_size], batch_size)))
    else:  # with replicas, device-staged data from replica 0's copy
        parts = [staged.train_x, staged.train_y]
        if strategy and not staged.on_host:
            parts = [strategy.experimental_local_results(part)[0] for part in parts]
        batch = tuple(tf.gather(part, order[:batch_size]) for part in parts)
    if strategy:  # each replica's slice of the first batch, on its device before timing
        batch = _split(strategy, batch)
    else:
        with tf.device(model.device):  # the first batch, gathered and on the device before timing
            batch = tuple(tf.identity(part) for part in batch)
    return _LOOP.repeating(model, (model.train_on, batch))


def loader_batches(staged, order, batch_size):
    """The loader's own host batches (uint8 NHWC, labels) of `order`; None: of the evaluation split (tests)."""
    if order is None:
        dataset = staged.test
    else:
        dataset = staged.train(order, batch_size)
    for images, labels in dataset:
        yield images.numpy(), labels.numpy()


def loader_pass(staged, order, batch_size):
    """The training batches of `order` placed on the device, the model removed (the loader's own throughput)."""
    for images, labels in _host_iterator(staged.train(order, batch_size)):
        with tf.device(staged.device):
            tf.identity(images), tf.identity(labels)


def _test_batches(staged, batch_size):
    """(images, labels) of the test split in order, where the data lives (host batches are copied by the step)."""
    if staged.STREAM:
        yield from _host_iterator(staged.test)
        return
    count = len(staged.test_y)
    for start in range(0, count, batch_size):
        images, labels = staged.test_x[start : start + batch_size], staged.test_y[start : start + batch_size]
        yield (tf.constant(images), tf.constant(labels)) if staged.on_host else (images, labels)


def evaluate(model, staged, batch_size):
    with tf.device(staged.device):
        loss_sum, correct = tf.zeros(()), tf.zeros((), tf.int32)
        count = math.prod(staged.test_y.shape)  # images, or every token of every sequence
        for images, labels in _test_batches(staged, batch_size):
            logits = model.predict(images)
            loss_sum += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            correct += tf.reduce_sum(tf.cast(tf.argmax(logits, axis=-1, output_type=tf.int32) == labels, tf.int32))
        return float(loss_sum) / count, int(correct) / count


def logits(model, images):
    return model.predict(tf.constant(images)).numpy()


def sync(device):
    tf.test.experimental.sync_devices()


def cuda_versions():
    build = tf.sysconfig.get_build_info()
    return build.get("cuda_version"), build.get("cudnn_version")


def cpu_kernels():
    """oneDNN where TensorFlow's oneDNN optimisations are on (its default on x86 CPUs with AVX512_VNNI, AVX512_BF16 or
    AMX; TF_ENABLE_ONEDNN_OPTS=0 turns them off, =1 on), Eigen's kernels for the rest (shared,
    contract.TensorFlowBackend)."""
    from tensorflow.python.util import _pywrap_util_port  # TensorFlow's own test of the switch

    return "oneDNN, Eigen" if _pywrap_util_port.IsMklEnabled() else "Eigen"


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
