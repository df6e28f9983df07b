"""Keras 3 adapter: `fit` and `predict` on the backend named by KERAS_BACKEND (set per stack).

Variants: eager is run_eagerly=True; graph the compiled step without XLA (TensorFlow only: JAX has no graph mode
without XLA); xla is jit_compile=True; -amp the mixed_float16 policy on GPU (Keras then scales the loss) and
mixed_bfloat16 on CPU. What was engaged is read back from the compiled model. Layout NHWC, the neutral layout, so
weights load unchanged; padding is "same" where that equals the spec's symmetric padding and explicit
(ZeroPadding2D) where it does not (stride 2 on even sizes). fit slices the arrays (host or device: stage) into
batches through Keras' own data adapter: that input path is part of what is measured.
"""

import keras
import numpy as np

from .. import specs, variants
from . import OPTIMIZER_DEFAULTS, RMSPROP_RHO

FRAMEWORK = "keras"
INPUT_WORK = "the epoch's gather only (fit slices and hands over every batch in both epochs: a lower bound)"


def version():
    return keras.__version__


def backend_version():
    backend = keras.backend.backend()
    module = __import__({"jax": "jax", "tensorflow": "tensorflow", "torch": "torch"}[backend])
    return f"{backend} {module.__version__}"


def configure(device, threads, seed):
    keras.utils.set_random_seed(seed)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)  # else TensorFlow takes the whole card up front
    return {"backend": keras.backend.backend(), "backend_version": backend_version(), "device_name": device}


def stage(arrays, experiment):
    """Host placement: the NumPy arrays, which fit slices and copies batch by batch. Device placement: backend
    tensors on the training device (JAX arrays, which fit slices on the device; TensorFlow tensors on CPU only,
    since fit on TensorFlow reads through tf.data on the host: envs/stacks.yaml)."""
    if experiment["data_placement"] == "host":
        return arrays
    if keras.backend.backend() == "tensorflow" and experiment["device"] == "gpu":
        raise ValueError("Keras on TensorFlow reads fit's arrays through tf.data on the host: device-staged data is "
                         "not what would run on a GPU (use data_placement host)")  # fmt: skip
    return {key: keras.ops.convert_to_tensor(value) for key, value in arrays.items()}


def zero_pad_channels(pad):
    return keras.layers.Lambda(lambda x: keras.ops.pad(x, [[0, 0], [0, 0], [0, 0], [pad, pad]]))


def leaf_layers(layer, in_shape):
    """The Keras layers of one spec leaf; the last one holds the leaf's weights."""
    activation = getattr(layer, "activation", None)
    if isinstance(layer, specs.Conv):
        # "same" where it equals the spec's padding (a separate ZeroPadding2D costs a copy per conv), else explicit.
        same = layer.padding and specs.same_padding_is_symmetric(layer, in_shape)
        padding = [keras.layers.ZeroPadding2D(layer.padding)] if layer.padding and not same else []
        return padding + [keras.layers.Conv2D(layer.filters, layer.kernel, strides=layer.stride,
                                              padding="same" if same else "valid", activation=activation,
                                              use_bias=layer.bias)]  # fmt: skip
    if isinstance(layer, specs.BatchNorm):
        return [keras.layers.BatchNormalization(momentum=layer.momentum, epsilon=layer.epsilon)]
    if isinstance(layer, specs.Pool):
        if layer.kind == "avg":
            return [keras.layers.AveragePooling2D(layer.size, layer.step)]
        padding = [keras.layers.ZeroPadding2D(layer.padding)] if layer.padding else []  # follows a ReLU
        return padding + [keras.layers.MaxPooling2D(layer.size, layer.step)]
    if isinstance(layer, specs.GlobalAvgPool):
        return [keras.layers.GlobalAveragePooling2D()]
    if isinstance(layer, specs.Flatten):
        return [keras.layers.Flatten()]
    if isinstance(layer, specs.Dropout):
        return [keras.layers.Dropout(layer.rate)]
    if isinstance(layer, specs.LSTM):
        return [keras.layers.Reshape((in_shape[0], in_shape[1] * in_shape[2])), keras.layers.LSTM(layer.units)]
    return [keras.layers.Dense(layer.units, activation=activation)]


def apply(spec, input_shape, x, leaves):
    """The spec applied to a functional-API tensor; each leaf's weight-holding layer is appended to `leaves`."""
    for layer, in_shape, out_shape in specs.layer_shapes(spec, input_shape):
        if isinstance(layer, specs.Residual):
            body = apply(layer.body, in_shape, x, leaves)
            if layer.shortcut == "zero_pad":
                stride, pad = specs.zero_pad_geometry(in_shape, out_shape)
                subsampled = keras.layers.MaxPooling2D(1, stride)(x)  # a 1x1 pool with a stride subsamples
                shortcut = zero_pad_channels(pad)(subsampled)
            else:
                shortcut = apply(layer.shortcut, in_shape, x, leaves)
            x = keras.layers.Add()([body, shortcut])
        else:
            for keras_layer in leaf_layers(layer, in_shape):
                x = keras_layer(x)
            leaves.append(keras_layer)
        if isinstance(layer, (specs.Residual, specs.BatchNorm)) and layer.activation == "relu":
            x = keras.layers.Activation("relu")(x)
    return x


def coupled_weight_decay(optimizer_class, decay):
    """The optimiser with weight decay added to the gradients (PyTorch's and MXNet's definition; Keras' own
    weight_decay is decoupled). `apply` is the one path: JAX's stateless_apply calls it inside a scope that maps the
    variables to their current values."""

    class Coupled(optimizer_class):
        def apply(self, grads, trainable_variables=None):
            variables = trainable_variables if trainable_variables is not None else self._trainable_variables
            return super().apply([g + decay * v for g, v in zip(grads, variables)], trainable_variables)

    return Coupled if decay else optimizer_class


def make_optimizer(experiment):
    name, rate = experiment["optimizer"], experiment["learning_rate"]
    if name == "adam":
        optimizer, options = keras.optimizers.Adam, OPTIMIZER_DEFAULTS
    elif name == "rmsprop":
        optimizer, options = keras.optimizers.RMSprop, {"rho": RMSPROP_RHO,
                                                        "epsilon": OPTIMIZER_DEFAULTS["epsilon"]}  # fmt: skip
    else:
        optimizer, options = keras.optimizers.SGD, {"momentum": experiment["momentum"]}
    return coupled_weight_decay(optimizer, experiment["weight_decay"])(rate, **options)


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if variant.channels_last or (variant.mode == "graph" and keras.backend.backend() == "jax"):
        raise ValueError(f"keras adapter on {keras.backend.backend()} does not run {variant.name!r}")
    if variant.mode == "compile":
        raise ValueError("keras adapter runs eager, graph and xla, not compile")
    compute = variants.compute_dtype(variant, experiment["device"])
    keras.config.set_dtype_policy(f"mixed_{compute}" if variant.mixed_precision else "float32")
    inputs, leaves = keras.Input(shape=input_shape), []
    network = keras.Model(inputs, apply(spec, input_shape, inputs, leaves))
    for keras_layer, params in zip(leaves, weights):
        if params:
            keras_layer.set_weights(params)
    network.compile(
        optimizer=make_optimizer(experiment),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        run_eagerly=variant.mode == "eager",
        jit_compile=variant.mode == "xla",
    )
    network.leaves, network.variant = leaves, variant
    return network


def parameter_count(model):
    return int(sum(np.prod(weight.shape) for weight in model.trainable_weights))


def weights(model, spec, input_shape):
    return [keras_layer.get_weights() for keras_layer in model.leaves]


def engaged(model):
    """What ran, read back from the compiled model: eager or not, XLA or not, the policy and the matmul dtype."""
    return {"variant": model.variant.name, "graph": not model.run_eagerly, "run_eagerly": bool(model.run_eagerly),
            "jit_compile": bool(model.jit_compile), "xla": bool(model.jit_compile),
            "dtype_policy": model.dtype_policy.name, "dtype": model.leaves[-1].variable_dtype,
            "matmul_dtype": model.leaves[-1].compute_dtype,
            "layout": "NHWC" if keras.config.image_data_format() == "channels_last" else "NCHW",
            "loss_scaling": type(model.optimizer).__name__ == "LossScaleOptimizer"}  # fmt: skip


def take(array, indices):
    return array[indices] if isinstance(array, np.ndarray) else keras.ops.take(array, indices, axis=0)


def train_epoch(model, staged, order, batch_size):
    images, labels = take(staged["train_x"], order), take(staged["train_y"], order)
    history = model.fit(images, labels, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
    return history.history["loss"][-1]


def fixed_batch_steps(model, staged, order, batch_size):
    """fit over copies of the first batch, so the epoch's gather is gone; fit still slices and hands over each
    batch itself, so the input share measured against this is a lower bound (INPUT_WORK)."""
    repeated = np.resize(order[:batch_size], len(order))
    images, labels = take(staged["train_x"], repeated), take(staged["train_y"], repeated)

    def run(steps):
        fit = model.fit(images, labels, batch_size=batch_size, epochs=1, steps_per_epoch=steps, shuffle=False, verbose=0)
        return fit.history["loss"][-1]

    return run


def evaluate(model, staged, batch_size):
    logits = np.asarray(model.predict(staged["test_x"], batch_size=batch_size, verbose=0), dtype=np.float64)
    labels = np.asarray(staged["test_y"])
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(len(labels)), labels].mean()
    return float(loss), float((logits.argmax(axis=1) == labels).mean())


def logits(model, images):
    return np.asarray(model.predict(images, verbose=0), dtype=np.float32)


def sync(device):
    # fit and predict return host values, so no device work is pending when they return.
    pass


def allocator_peak_mb(device):
    if device != "gpu":
        return None
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.devices()[0].memory_stats()["peak_bytes_in_use"] / 2**20
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    import torch

    return torch.cuda.max_memory_allocated() / 2**20


OOM_MARKERS = ("RESOURCE_EXHAUSTED", "OOM when allocating", "out of memory")


def is_oom(error):
    # Each backend has its own exception type; all of them say so in the message.
    return any(marker in str(error) for marker in OOM_MARKERS)
