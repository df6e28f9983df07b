"""Keras 3 adapter: `fit` and `predict` on the backend named by KERAS_BACKEND (set per stack).

Variant 'eager' is run_eagerly=True. Variant 'graph' is the backend's compiled step: on JAX that is jax.jit
(JAX has no graph mode without XLA, so jit_compile=True), on TensorFlow tf.function without XLA. What was
engaged is read back from the compiled model. Layout NHWC, the neutral layout, so weights load unchanged.
fit reads host NumPy arrays through Keras' own data adapter: that input path is part of what is measured.
"""

import keras
import numpy as np

from .. import specs
from . import OPTIMIZER_DEFAULTS

FRAMEWORK = "keras"


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


def stage(arrays, device):
    return arrays


def layer_object(layer):
    activation = getattr(layer, "activation", None)
    if isinstance(layer, specs.Conv):
        return keras.layers.Conv2D(layer.filters, layer.kernel, strides=layer.stride, activation=activation)
    if isinstance(layer, specs.Pool):
        pool = keras.layers.AveragePooling2D if layer.kind == "avg" else keras.layers.MaxPooling2D
        return pool(layer.size)
    if isinstance(layer, specs.Flatten):
        return keras.layers.Flatten()
    return keras.layers.Dense(layer.units, activation=activation)


def make_optimizer(experiment):
    if experiment["optimizer"] == "adam":
        return keras.optimizers.Adam(experiment["learning_rate"], **OPTIMIZER_DEFAULTS)
    return keras.optimizers.SGD(experiment["learning_rate"], momentum=experiment["momentum"])


def build(spec, input_shape, weights, experiment):
    network = keras.Sequential([keras.Input(shape=input_shape)] + [layer_object(layer) for layer in spec])
    network.set_weights([array for params in weights for array in params])
    graph = experiment["variant"] == "graph"
    network.compile(
        optimizer=make_optimizer(experiment),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        run_eagerly=not graph,
        jit_compile=graph and keras.backend.backend() == "jax",
    )
    return network


def parameter_count(model):
    return int(model.count_params())


def engaged(model):
    return {"variant": "eager" if model.run_eagerly else "graph", "graph": not model.run_eagerly,
            "run_eagerly": bool(model.run_eagerly), "jit_compile": bool(model.jit_compile),
            "dtype_policy": keras.config.dtype_policy().name, "layout": keras.config.image_data_format()}  # fmt: skip


def train_epoch(model, staged, order, batch_size):
    history = model.fit(
        staged["train_x"][order], staged["train_y"][order], batch_size=batch_size, epochs=1, shuffle=False, verbose=0
    )
    return history.history["loss"][-1]


def evaluate(model, staged, batch_size):
    logits = model.predict(staged["test_x"], batch_size=batch_size, verbose=0).astype(np.float64)
    labels = staged["test_y"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(len(labels)), labels].mean()
    return float(loss), float((logits.argmax(axis=1) == labels).mean())


def logits(model, images):
    return model.predict(images, verbose=0)


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
