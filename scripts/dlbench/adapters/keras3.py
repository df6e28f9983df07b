"""Keras 3 adapter: `fit` and `predict` on the backend named by KERAS_BACKEND (set per stack).

Variants: eager is run_eagerly=True; graph the compiled step without XLA (TensorFlow only: JAX has no graph mode
without XLA, and on torch it is the eager step); xla is jit_compile=True on TensorFlow and JAX, compile the same on
torch, where Keras compiles its train step with torch.compile; -amp the mixed_float16 policy on GPU (Keras then
scales the loss) and mixed_bfloat16 on CPU. What was engaged is read back from the compiled model. Layout NHWC, the
neutral layout, so weights load unchanged; padding is "same" where that equals the spec's symmetric padding and
explicit (ZeroPadding2D) where it does not (stride 2 on even sizes).

Attention models: self-attention runs Keras' fused op, keras.ops.dot_product_attention, on the (batch, tokens, heads,
head width) layout it takes; Keras dispatches it to its backend's kernel (_ATTENTION_KERNELS). -composed
(eager-composed, xla-composed, ...) writes it out instead, as Keras' MultiHeadAttention does without the fused op
(_composed_attention). A language model's token embedding is Keras' ReversibleEmbedding, which the tied head calls in
reverse: one variable, its table.

Input: fit and predict read each epoch's batches, in the order every framework trains in, through the backend's
own fast path for in-memory data (`feed`), which is part of what is measured. Given arrays, fit would shuffle in
its own order, and on JAX it converts a JAX array back to NumPy every epoch (keras/src/trainers/data_adapters/
array_slicing.py), undoing device staging. Streamed image folders go through tf.data on every backend (the
pipelines of tensorflow_raw.stream; Keras' documented input for JAX too), and the model then takes uint8
images, made float and normalised by its first layers, on the device.

Data-parallel replicas: on TensorFlow a tf.distribute.MirroredStrategy (tensorflow_raw's), in whose scope the model
is built and compiled; fit splits each global batch over the replicas itself (its distributed dataset) and sums the
replicas' gradients, each replica's mean loss scaled by 1/replicas. On JAX Keras' DataParallel distribution, set in
configure: variables replicated over a one-axis mesh, each global batch sharded along it, one jitted step whose
gradient XLA all-reduces. Keras on torch has none (keras.distribution runs on JAX only).
"""

import contextlib
import math
import random

import keras
import numpy as np

from .. import data, parallel, specs, variants
from . import GATHER_AND_PLACE, OPTIMIZER_DEFAULTS, RMSPROP_RHO, contract, load

FRAMEWORK = "keras"
# The adapter of each backend, whose switches Keras runs on, and the one whose tf.data pipelines stream on every
# backend: loaded by name (_backend_adapter, stream), so that a stack's jobs depend on its backend's adapter only,
# and on the streaming one only with streamed data (dlbench/study/dependencies.py reads these literals).
BACKEND_ADAPTERS = {"jax": "jax_numpy", "tensorflow": "tensorflow_raw", "torch": "pytorch"}
STREAM_ADAPTER = "tensorflow_raw"
if keras.backend.backend() == "tensorflow":
    INPUT_WORK = "gathering every batch in tf.data (its copy to the device stays in both epochs: a lower bound)"
else:
    INPUT_WORK = GATHER_AND_PLACE
LOADER = "tf.data (parallel map: read, decode_and_crop_jpeg, resize, flip; batch, prefetch), through fit"


def version():
    return keras.__version__


def _backend_adapter():
    """The adapter of the backend Keras runs on (BACKEND_ADAPTERS)."""
    return load(BACKEND_ADAPTERS[keras.backend.backend()])


def _backend_version():
    backend = keras.backend.backend()
    module = __import__({"jax": "jax", "tensorflow": "tensorflow", "torch": "torch"}[backend])
    return f"{backend} {module.__version__}"


# The replicas' MirroredStrategy on TensorFlow, made by configure (None otherwise): build works in its scope.
_strategy = None


def configure(device, threads, seed, math_mode, replicas):
    _set_random_seed(seed)
    configured = {
        "backend": keras.backend.backend(),
        "backend_version": _backend_version(),
        "device_name": _torch_device(device) if keras.backend.backend() == "torch" else device,
        **_backend_threads(threads),
        **_configure_backend(math_mode),
    }
    if not parallel.through_mechanism(replicas):
        return configured
    return {**configured, **_configure_replicas(device, replicas)}


def _set_random_seed(seed):
    """keras.utils.set_random_seed, less its TensorFlow seed off TensorFlow. Keras seeds TensorFlow wherever it is
    installed, for tf.data pipelines' shuffles: on JAX or torch that imports all of TensorFlow into the run (1.6 s on a
    2-core CPU, with its thread pools), where the env has it only for a streamed folder's tf.data loader, which draws
    no random numbers (its order, crops and flips are the harness's)."""
    if keras.backend.backend() == "tensorflow":
        keras.utils.set_random_seed(seed)
        return
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)  # remade from the seed
    random.seed(seed)
    np.random.seed(seed)
    if keras.backend.backend() == "torch":
        import torch

        torch.manual_seed(seed)


def _configure_replicas(device, replicas):
    """{replicas, replica_devices}, read back, of the replicas made: on TensorFlow tensorflow_raw's MirroredStrategy
    (last: it starts TensorFlow's runtime, after which threads cannot be set); on JAX Keras' DataParallel over the
    first devices (on a CPU as many as XLA_FLAGS made before the import), set before any model is built."""
    global _strategy
    backend = keras.backend.backend()
    if backend == "torch":
        raise RuntimeError(
            f"{replicas} replicas: Keras' distribution API runs on JAX only; Keras on torch has no data-parallel path"
        )
    if backend == "tensorflow":
        _strategy = _backend_adapter().mirrored_strategy(device, replicas)
        return {"replicas": _strategy.num_replicas_in_sync, "replica_devices": list(_strategy.extended.worker_devices)}
    devices = _backend_adapter().replica_devices(keras.distribution.list_devices(device), replicas, device)
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
    mesh = keras.distribution.distribution().device_mesh.backend_mesh
    return {"replicas": int(mesh.devices.size), "replica_devices": [str(each) for each in mesh.devices.flat]}


def replica_max(value):
    """The value itself: one process drives every replica's device."""
    return value


def _torch_device(device):
    """Keras on torch places every tensor on the device it chose at import, CUDA whenever it sees a GPU: the
    experiment's device is set as its torch device (the global attribute keras.device() scopes) and read back from
    a tensor."""
    from keras.src.backend.common import global_state

    target = "cuda:0" if device == "gpu" else "cpu"
    global_state.set_global_attribute("torch_device", target)
    try:
        placed = str(keras.ops.zeros((1,)).device)
    except (AssertionError, RuntimeError) as error:  # torch's "not compiled with CUDA enabled", no device found
        raise RuntimeError(f"device {device} requested but Keras' torch backend cannot use {target}: {error}")
    if placed != target:
        raise RuntimeError(f"device {device} requested but Keras' torch backend placed a tensor on {placed}")
    return placed


def _backend_threads(threads):
    """The backend's thread counts through its own adapter, read back. XLA (JAX) cannot be pinned at run time and
    keeps its default, one thread per core, which is recorded as such."""
    return _backend_adapter().apply_threads(threads)


def _configure_backend(math_mode):
    """The backend's own math-mode switches (mathmode.py), read back from its adapter (JAX's: jax_numpy); TensorFlow's
    GPU memory growth."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)  # else TensorFlow takes the whole card up front
    return _backend_adapter().apply_math_mode(math_mode)


def stage(arrays, experiment):
    """JAX and torch: host placement keeps the NumPy arrays (each batch gathered there, then copied to the device by
    fit, one batch ahead); device placement makes the backend's arrays on the device (batches gathered there; on JAX
    with replicas, on every replica's device). TensorFlow: tensors in
    host memory, where tf.data runs, so device-staged data is refused on GPU (envs/stacks.yaml).

    JAX on a CPU: the device's memory is the host's, so device placement keeps the NumPy arrays too, each batch
    gathered by NumPy as fit gathers arrays: an XLA gather dispatched per batch beside the step it feeds cost a LeNet
    epoch 7 % on 2 cores (docs/findings.md, "Keras on JAX's two costs")."""
    if keras.backend.backend() == "tensorflow":
        if experiment["data_placement"] == "device" and experiment["device"] == "gpu":
            raise ValueError(
                "Keras on TensorFlow reads fit's input through tf.data on the host: device-staged data "
                "is not what would run on a GPU (use data_placement host)"
            )
        import tensorflow as tf

        with tf.device("/CPU:0"):
            return contract.StagedArrays(**{key: tf.constant(value) for key, value in arrays.items()})
    if experiment["data_placement"] == "host" or (keras.backend.backend() == "jax" and experiment["device"] == "cpu"):
        return contract.StagedArrays(**arrays)
    return contract.StagedArrays(**{key: _on_device(value, sharded=False) for key, value in arrays.items()})


def _on_device(array, sharded):
    """A host array as the backend's tensor on the device; on JAX with replicas on every replica's device: whole on
    each, or `sharded` along the batch, as fit splits its input (which then places it no more)."""
    distribution = keras.distribution.distribution()
    if distribution is None:
        return keras.ops.convert_to_tensor(array)
    if sharded:
        layout = distribution.get_data_layout(array.shape)
    else:
        layout = keras.distribution.TensorLayout([None] * len(array.shape), distribution.device_mesh)
    return keras.distribution.distribute_tensor(array, layout)


def stream(meta, experiment, workers):
    """Data placement stream: tf.data over the image folder, made per epoch from its items: TensorFlow's own
    pipelines (STREAM_ADAPTER's stream)."""
    return load(STREAM_ADAPTER).stream(meta, experiment, workers)


def _normalisation_layers(inputs):
    """Streamed uint8 images as normalised floats, by the model's first layers (so on the device)."""
    scaled = keras.layers.Rescaling(1 / 255)(inputs)
    variance = [std**2 for std in data.IMAGENET_STD]
    return keras.layers.Normalization(mean=list(data.IMAGENET_MEAN), variance=variance)(scaled)


def _placeholder(shape, dtype=None):
    """Every variable's value until build sets the neutral weights: zeros made on the host. Keras' default
    initializers draw random numbers on the backend, which on JAX compiles an XLA program per variable shape (2.7 s of
    a LeNet's 2.9 s build on a 2-core CPU) for values set_weights then replaces."""
    return np.zeros(shape, dtype or "float32")


def _placeholder_initializers(*weights):
    """A layer's initializer arguments for `weights` (kernel, bias...), each _placeholder."""
    return {f"{weight}_initializer": _placeholder for weight in weights}


def _zero_pad_channels(pad):
    return keras.layers.Lambda(lambda x: keras.ops.pad(x, [[0, 0], [0, 0], [0, 0], [pad, pad]]))


class _PatchEmbed(keras.layers.Conv2D):
    """ViT's patch embedding: a conv of kernel and stride `patch` (its kernel HWIO, as the neutral layout's), its
    (h, w) grid read as tokens in row-major order."""

    def __init__(self, patch, width):
        super().__init__(width, patch, strides=patch, **_placeholder_initializers("kernel", "bias"))

    def call(self, images):
        grid = super().call(images)
        return keras.ops.reshape(grid, (-1, grid.shape[1] * grid.shape[2], self.filters))

    def compute_output_shape(self, input_shape):
        batch, height, width, channels = super().compute_output_shape(input_shape)
        return batch, height * width, channels


class _ClassToken(keras.layers.Layer):
    """A learned token put before the sequence."""

    def build(self, input_shape):
        self.token = self.add_weight(shape=input_shape[-1:], initializer=_placeholder, name="token")

    def call(self, sequence):
        batch, _, width = keras.ops.shape(sequence)
        return keras.ops.concatenate([keras.ops.broadcast_to(self.token, (batch, 1, width)), sequence], axis=1)


class _PositionEmbedding(keras.layers.Layer):
    """A learned vector per position, added: a (tokens, width) table as long as the sequence it reads."""

    def build(self, input_shape):
        self.table = self.add_weight(shape=input_shape[1:], initializer=_placeholder, name="table")

    def call(self, sequence):
        return keras.ops.add(sequence, self.table)


# What keras.ops.dot_product_attention runs on each backend (keras/src/backend/<backend>/nn.py): JAX's fused kernel
# (its XLA implementation; on a GPU cuDNN's flash attention where Keras finds it usable), PyTorch's; TensorFlow has
# none, and Keras composes it there. -composed: _composed_attention.
_COMPOSED_ATTENTION = "composed: einsum, softmax, einsum"
_ATTENTION_KERNELS = {
    "jax": "keras.ops.dot_product_attention: jax.nn.dot_product_attention",
    "tensorflow": "composed: keras.ops.dot_product_attention writes it out (einsum, softmax, einsum)",
    "torch": "keras.ops.dot_product_attention: torch.nn.functional.scaled_dot_product_attention",
}
# On torch, Keras 3.15 probes for flash attention by building a pybind11 SDPAParams, which torch.compile cannot trace:
# a graph break at every attention call. False skips the probe and leaves the kernel to scaled_dot_product_attention's
# own dispatcher (flash attention where it can), as Keras' fix does while tracing (keras-team/keras PR 23327).
_FLASH_ATTENTION = False if keras.backend.backend() == "torch" else None


class _Attention(keras.layers.Layer):
    """Multi-head self-attention between the fused input projection and the output projection: through Keras' fused
    op, keras.ops.dot_product_attention, or written out (variant -composed, _composed_attention)."""

    WEIGHTS = ("qkv_kernel", "qkv_bias", "out_kernel", "out_bias")

    def __init__(self, shapes, heads, causal, composed):
        super().__init__()
        self.shapes = shapes
        self.softmax = keras.layers.Softmax()  # -composed's: its masking value fits the compute dtype
        self.heads, self.causal, self.composed = heads, causal, composed

    def build(self, input_shape):
        # The neutral weights of specs.parameter_shapes, in its order: the fused [query | key | value] projection
        # (each head-major), then the output projection.
        for name, shape in zip(self.WEIGHTS, self.shapes, strict=True):
            setattr(self, name, self.add_weight(shape=shape, initializer=_placeholder, name=name))

    def call(self, sequence):
        width = sequence.shape[-1]
        head = (self.heads, width // self.heads)
        # The projections as Keras' MultiHeadAttention makes them (EinsumDense): einsums with the kernels seen per
        # head, straight into and out of the (batch, tokens, heads, head width) layout Keras' op takes. Dense layers
        # on the flat width with reshapes between cost gpt-tiny's step 6 % on JAX (a 2-core CPU).
        kernel = keras.ops.reshape(self.qkv_kernel, (width, 3, *head))
        qkv = keras.ops.einsum("btc,cshd->btshd", sequence, kernel) + keras.ops.reshape(self.qkv_bias, (3, *head))
        query, key, value = keras.ops.unstack(qkv, axis=2)
        if self.composed:
            mixed = self._composed_attention(query, key, value)
        else:
            mixed = keras.ops.dot_product_attention(
                query, key, value, is_causal=self.causal, flash_attention=_FLASH_ATTENTION
            )
        kernel = keras.ops.reshape(self.out_kernel, (*head, width))
        return keras.ops.einsum("bthd,hdc->btc", mixed, kernel) + self.out_bias

    def _composed_attention(self, query, key, value):
        """Attention written out as Keras' MultiHeadAttention writes it where it does not hand over to the fused op
        (with attention dropout, or its scores returned; keras/src/layers/attention/multi_head_attention.py): the
        query scaled by 1/sqrt(head width), einsum with the key, a Softmax layer masking later tokens, einsum with the
        value. All in the compute dtype (bfloat16 under -amp)."""
        query = keras.ops.multiply(query, keras.ops.cast(1 / math.sqrt(query.shape[-1]), query.dtype))
        scores = keras.ops.einsum("bqhd,bkhd->bhqk", query, key)
        earlier = keras.ops.tril(keras.ops.ones(scores.shape[-2:], dtype="bool")) if self.causal else None
        return keras.ops.einsum("bhqk,bkhd->bqhd", self.softmax(scores, mask=earlier), value)


def _token_pool(kind):
    """The class token's final state, or the mean over the tokens."""
    if kind == "class":
        return keras.layers.Lambda(lambda sequence: sequence[:, 0])
    return keras.layers.GlobalAveragePooling1D()


def _is_tied_head(layer):
    return isinstance(layer, specs.LMHead) and layer.tied


def _tied_head(x, leaves):
    """GPT-2's head: the token embedding, Keras' ReversibleEmbedding, called in reverse (its table transposed). The
    embedding is also the head's leaf layer, whose weights the head does not own (`weights` reads none)."""
    embedding = next(leaf for leaf in leaves if isinstance(leaf, keras.layers.ReversibleEmbedding))
    leaves.append(embedding)
    return embedding(x, reverse=True)


def _leaf_layers(layer, in_shape, variant):
    """The Keras layers of one spec leaf in the variant; the last one holds the leaf's weights. -syncbn: batch norm
    over the replicas' global batch (Keras' synchronized BatchNormalization, a TensorFlow-backend option);
    -composed: attention written out."""
    activation = getattr(layer, "activation", None)
    if isinstance(layer, specs.PatchEmbed):
        return [_PatchEmbed(layer.patch, layer.width)]
    if isinstance(layer, specs.ClassToken):
        return [_ClassToken()]
    if isinstance(layer, specs.PositionEmbedding):
        return [_PositionEmbedding()]
    if isinstance(layer, specs.TokenEmbedding):
        return [
            keras.layers.ReversibleEmbedding(layer.vocabulary, layer.width, **_placeholder_initializers("embeddings"))
        ]
    if isinstance(layer, specs.LayerNorm):
        return [keras.layers.LayerNormalization(epsilon=layer.epsilon, **_placeholder_initializers("beta", "gamma"))]
    if isinstance(layer, specs.Attention):
        shapes, _ = specs.parameter_shapes(layer, in_shape)
        return [_Attention(shapes, layer.heads, layer.causal, variant.composed_attention)]
    if isinstance(layer, specs.TokenPool):
        return [_token_pool(layer.kind)]
    if isinstance(layer, specs.LMHead):  # untied: a bias-free kernel
        return [keras.layers.Dense(layer.vocabulary, use_bias=False, **_placeholder_initializers("kernel"))]
    if isinstance(layer, specs.Conv):
        # "same" where it equals the spec's padding (a separate ZeroPadding2D costs a copy per conv), else explicit.
        same = layer.padding and specs.same_padding_is_symmetric(layer, in_shape)
        padding = [keras.layers.ZeroPadding2D(layer.padding)] if layer.padding and not same else []
        return padding + [
            keras.layers.Conv2D(
                layer.filters,
                layer.kernel,
                strides=layer.stride,
                padding="same" if same else "valid",
                activation=activation,
                use_bias=layer.bias,
                **_placeholder_initializers("kernel", "bias"),
            )
        ]
    if isinstance(layer, specs.BatchNorm):
        return [
            keras.layers.BatchNormalization(
                momentum=layer.momentum,
                epsilon=layer.epsilon,
                synchronized=variant.sync_batch_norm,
                **_placeholder_initializers("beta", "gamma", "moving_mean", "moving_variance"),
            )
        ]
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
        return [
            keras.layers.Reshape((in_shape[0], in_shape[1] * in_shape[2])),
            keras.layers.LSTM(layer.units, **_placeholder_initializers("kernel", "recurrent", "bias")),
        ]
    return [keras.layers.Dense(layer.units, activation=activation, **_placeholder_initializers("kernel", "bias"))]


def _apply(spec, input_shape, x, leaves, variant):
    """The spec applied to a functional-API tensor in the variant (its batch norm, its attention); each leaf's
    weight-holding layer is appended to `leaves`."""
    for layer, in_shape, out_shape in specs.layer_shapes(spec, input_shape):
        if isinstance(layer, specs.Residual):
            body = _apply(layer.body, in_shape, x, leaves, variant)
            if layer.shortcut == "zero_pad":
                stride, pad = specs.zero_pad_geometry(in_shape, out_shape)
                subsampled = keras.layers.MaxPooling2D(1, stride)(x)  # a 1x1 pool with a stride subsamples
                shortcut = _zero_pad_channels(pad)(subsampled)
            else:
                shortcut = _apply(layer.shortcut, in_shape, x, leaves, variant)
            x = keras.layers.Add()([body, shortcut])
        elif _is_tied_head(layer):
            x = _tied_head(x, leaves)
        else:
            for keras_layer in _leaf_layers(layer, in_shape, variant):
                x = keras_layer(x)
            leaves.append(keras_layer)
        if isinstance(layer, (specs.Residual, specs.BatchNorm)) and layer.activation == "relu":
            x = keras.layers.Activation("relu")(x)
    return x


def _coupled_weight_decay(optimizer_class, decay):
    """The optimiser with weight decay added to the gradients (PyTorch's and MXNet's definition; Keras' own
    weight_decay is decoupled). `apply` is the one path: JAX's stateless_apply calls it inside a scope that maps the
    variables to their current values."""

    class Coupled(optimizer_class):
        def apply(self, grads, trainable_variables=None):
            variables = trainable_variables if trainable_variables is not None else self._trainable_variables
            return super().apply([g + decay * v for g, v in zip(grads, variables)], trainable_variables)

    return Coupled if decay else optimizer_class


def _make_optimizer(experiment):
    name, rate = experiment["optimizer"], experiment["learning_rate"]
    if name == "adam":
        optimizer, options = keras.optimizers.Adam, OPTIMIZER_DEFAULTS
    elif name == "rmsprop":
        optimizer, options = keras.optimizers.RMSprop, {"rho": RMSPROP_RHO, "epsilon": OPTIMIZER_DEFAULTS["epsilon"]}
    else:
        optimizer, options = keras.optimizers.SGD, {"momentum": experiment["momentum"]}
    return _coupled_weight_decay(optimizer, experiment["weight_decay"])(rate, **options)


def _input_dtype(spec, streamed):
    """Token ids for a language model; uint8 images streamed (normalised by the model); else the policy's floats."""
    if specs.reads_tokens(spec):
        return "int32"
    return "uint8" if streamed else None


# The variant modes per backend: jit_compile is XLA on TensorFlow and JAX, torch.compile on torch; the compiled step
# without XLA (graph) is TensorFlow's alone (on torch it is the eager step).
_MODES = {"tensorflow": ("eager", "graph", "xla"), "jax": ("eager", "xla"), "torch": ("eager", "compile")}


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if (
        variant.channels_last
        or variant.mode not in _MODES[keras.backend.backend()]
        or variant.compile_mode != "default"
    ):
        modes = " and ".join(_MODES[keras.backend.backend()])
        raise ValueError(f"keras adapter on {keras.backend.backend()} runs {modes}, not {variant.name!r}")
    if _strategy and variant.mode == "xla":
        raise ValueError(
            "keras adapter on tensorflow runs replicas eager and graph, not under XLA: Keras turns jit_compile off "
            "under tf.distribute (its 'auto'), and jit_compile=True fails on the replicas' variables, which live "
            "on several devices (keras-team/keras issue 19005)"
        )
    compute = variants.compute_dtype(variant, experiment["device"])
    keras.config.set_dtype_policy(f"mixed_{compute}" if variant.mixed_precision else "float32")
    streamed = experiment["data_placement"] == "stream"
    # With replicas on TensorFlow, the variables (the optimiser's too) are made mirrored in the strategy's scope.
    with _strategy.scope() if _strategy else contextlib.nullcontext():
        inputs, leaves = keras.Input(shape=input_shape, dtype=_input_dtype(spec, streamed)), []
        x = _normalisation_layers(inputs) if streamed else inputs
        network = keras.Model(inputs, _apply(spec, input_shape, x, leaves, variant))
        for keras_layer, params in zip(leaves, weights):
            if params:
                keras_layer.set_weights(params)
        network.compile(
            optimizer=_make_optimizer(experiment),
            # Over the last axis, the mean over every element: per image, or per token of a language model's sequence.
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            run_eagerly=variant.mode == "eager",
            jit_compile=variant.mode in ("xla", "compile"),
        )
    network.leaves, network.variant, network.replicas = leaves, variant, parallel.replicas(experiment)
    if keras.backend.backend() == "torch":
        network.compile_counters = _backend_adapter().compile_counters()
    return network


def parameter_count(model):
    return int(sum(np.prod(weight.shape) for weight in model.trainable_weights))


def weights(model, spec, input_shape):
    """Each leaf's weights; a tied head has none of its own (its leaf layer is the token embedding)."""
    return [
        [] if _is_tied_head(layer) else keras_layer.get_weights()
        for keras_layer, (layer, _, _) in zip(model.leaves, specs.leaves(spec, input_shape))
    ]


def engaged(model):
    """What ran, read back from the compiled model: eager or not, XLA or not, the policy and the matmul dtype."""
    on_torch = keras.backend.backend() == "torch"
    result = {
        "variant": model.variant.name,
        "graph": not model.run_eagerly,
        "run_eagerly": bool(model.run_eagerly),
        "jit_compile": bool(model.jit_compile),
        "xla": bool(model.jit_compile) and not on_torch,
        "dtype_policy": model.dtype_policy.name,
        "dtype": model.leaves[-1].variable_dtype,
        "matmul_dtype": model.leaves[-1].compute_dtype,
        "layout": "NHWC" if keras.config.image_data_format() == "channels_last" else "NCHW",
        "loss_scaling": type(model.optimizer).__name__ == "LossScaleOptimizer",
    }
    if any(isinstance(keras_layer, _Attention) for keras_layer in model.leaves):
        composed = model.variant.composed_attention
        result["attention"] = _COMPOSED_ATTENTION if composed else _ATTENTION_KERNELS[keras.backend.backend()]
    if on_torch and model.jit_compile:
        result["torch_compile"] = True
        result.update(_backend_adapter().compile_engagement("default", model.compile_counters))
    if parallel.through_mechanism(model.replicas):
        result.update(_data_parallel(model))
    return result


def _data_parallel(model):
    """How the replicas' gradients were reduced, read back. TensorFlow: the model's strategy and its cross-device
    reduction (tensorflow_raw's reading); Keras' train step scales each replica's mean loss by 1/replicas
    (scale_loss_for_distribution) and its optimiser sums the gradients over the replicas. JAX: the distribution and
    its mesh, over which one jitted step takes the global batch's mean loss, XLA all-reducing the gradient."""
    if keras.backend.backend() == "tensorflow":
        strategy = model.distribute_strategy
        reduction = (
            f"sum (all-reduce) over the replicas, each replica's mean loss scaled by 1/"
            f"{strategy.num_replicas_in_sync}: the global batch's mean gradient"
        )
        result = {**_backend_adapter().strategy_engagement(strategy), "gradient_reduction": reduction}
        if any(getattr(layer, "synchronized", False) for layer in model.layers):
            result["batch_norm_statistics"] = "global batch: Keras' synchronized BatchNormalization all-reduces them"
        return result
    distribution = keras.distribution.distribution()
    mesh = distribution.device_mesh
    return {
        "data_parallel": type(distribution).__name__,
        "gradient_reduction": "mean: the gradient of the global batch's mean loss, the batch sharded over the mesh",
        "collective": f"XLA all-reduce over mesh axis {distribution.batch_dim_name!r} ({mesh.devices.size} devices)",
        "batch_norm_statistics": "global batch: GSPMD keeps the one-device step's mean over every slice",
    }


def _take(array, indices):
    return array[indices] if isinstance(array, np.ndarray) else keras.ops.take(array, indices, axis=0)


def _feed(arrays, order, batch_size):
    """fit's input: the whole batches of `order`, each of every array, through the backend's own path for in-memory
    data. JAX and torch: a generator, gathering in NumPy (host placement, and on JAX device placement on a CPU:
    stage; fit copies each batch to the device one batch ahead) or on the device (fit takes the backend's arrays as
    they are). TensorFlow: the epoch gathered at once on the host and batched by tf.data with prefetch, a TensorFlow
    user's from_tensor_slices pipeline; a gather per batch in a tf.data map, the pipeline Keras builds for arrays
    (array_data_adapter), ran LeNet's epoch 15 % slower on 2 cores (docs/findings.md, "Keras on TensorFlow's feed")."""
    batches = data.batch_slices(len(order), batch_size)
    if keras.backend.backend() != "tensorflow":
        return (tuple(_take(array, order[batch]) for array in arrays) for batch in batches)
    import tensorflow as tf

    # tf.data's default graph rewrites serialize a new pipeline's graph, the epoch's gathered tensors in it, when its
    # iterator starts (3.6 ms of LeNet's 140 ms epoch on 2 cores); slices, batch and prefetch leave them nothing to do.
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    with tf.device("/CPU:0"):
        epoch = tuple(tf.gather(array, order[: len(batches) * batch_size]) for array in arrays)
        batched = tf.data.Dataset.from_tensor_slices(epoch).batch(batch_size)
        return batched.prefetch(tf.data.AUTOTUNE).with_options(options)


def _fit_loss(model, batches):
    return model.fit(batches, epochs=1, shuffle=False, verbose=0).history["loss"][-1]


def _train_batches(staged, order, batch_size):
    """fit's input for the batches of `order`."""
    if staged.STREAM:
        return staged.train(order, batch_size)
    return _feed((staged.train_x, staged.train_y), order, batch_size)


def train_epoch(model, staged, order, batch_size):
    return _fit_loss(model, _train_batches(staged, order, batch_size))


def _first_batch(staged, order, batch_size):
    """The first batch of `order` as the backend's tensors (streamed: through the loader, read back)."""
    if staged.STREAM:
        return tuple(np.asarray(part) for part in next(iter(_train_batches(staged, order[:batch_size], batch_size))))
    return _take(staged.train_x, order[:batch_size]), _take(staged.train_y, order[:batch_size])


def loader_batches(staged, order, batch_size):
    """The loader's own host batches (uint8 NHWC, labels) of `order`; None: of the evaluation split (tests)."""
    for images, labels in staged.test if order is None else _train_batches(staged, order, batch_size):
        yield np.asarray(images), np.asarray(labels)


def loader_pass(staged, order, batch_size):
    """The training batches of `order` placed on the device as fit places them, the model removed (the loader's
    own throughput); the last one read back, so that every copy has finished."""
    for images, labels in _train_batches(staged, order, batch_size):
        placed = keras.ops.convert_to_tensor(np.asarray(images)), keras.ops.convert_to_tensor(np.asarray(labels))
    keras.ops.convert_to_numpy(placed[0][:1, :1, :1])


def fixed_batch_steps(model, staged, order, batch_size):
    """fit over the first batch, gathered (and, on JAX, placed on the device, with replicas split over them) before
    any timing, `steps` times."""
    images, labels = _first_batch(staged, order, batch_size)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return lambda steps: _fit_loss(model, tf.data.Dataset.from_tensors((images, labels)).repeat(steps))
    placed = _on_device(images, sharded=True), _on_device(labels, sharded=True)
    return lambda steps: _fit_loss(model, (placed for _ in range(steps)))


# The float32 test logits one predict call returns at most (at least one batch's): a language model's over a whole
# test split would not fit on the host (gpt2-small's are 0.2 GB a sequence), an image model's fit in one call. The
# float64 reduction makes about four temporaries twice their size: 2 GiB of host memory at the peak.
_LOGITS_PER_CALL_BYTES = 1 << 28


def evaluate(model, staged, batch_size):
    """predict over the test split in order, the loss and hits of each call's logits summed on the host as they
    come (_predicted); in float64, per image or per token of a sequence (a language model's next token)."""
    loss_sum, hits, count = 0.0, 0, 0
    for predicted, labels in _predicted(model, staged, batch_size):
        logits, labels = np.asarray(predicted, dtype=np.float64), np.asarray(labels)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        loss_sum -= np.take_along_axis(log_probs, labels[..., None], axis=-1).sum()
        hits += int((logits.argmax(axis=-1) == labels).sum())
        count += labels.size
    return float(loss_sum / count), hits / count


def _predicted(model, staged, batch_size):
    """(logits, labels) of the test split in order, in as few predict calls as _LOGITS_PER_CALL_BYTES allows: on
    TensorFlow the host tensors themselves (Keras' tf.data slicing), on JAX and torch a generator of slices, so that
    device-staged data stays on the device; streamed, the evaluation loader in one call. On JAX with replicas,
    batches padded to whole shares (_whole_shares), the extra predictions dropped."""
    if staged.STREAM:
        test = staged.test
        if keras.backend.backend() == "jax" and parallel.through_mechanism(model.replicas):
            test = ((_whole_shares(np.asarray(batch), model.replicas),) for batch, _ in test)
        yield model.predict(test, verbose=0)[: len(staged.test_y)], staged.test_y
        return
    count, per_example = len(staged.test_y), 4 * math.prod(model.output_shape[1:])
    chunk = batch_size * max(1, _LOGITS_PER_CALL_BYTES // (batch_size * per_example))
    for first in range(0, count, chunk):
        inputs, labels = staged.test_x[first : first + chunk], staged.test_y[first : first + chunk]
        if keras.backend.backend() == "tensorflow":
            yield model.predict(inputs, batch_size=batch_size, verbose=0), labels
            continue
        slices = (inputs[start : start + batch_size] for start in range(0, len(labels), batch_size))
        predicted = model.predict(((_whole_shares(batch, model.replicas),) for batch in slices), verbose=0)
        yield predicted[: len(labels)], labels


def _whole_shares(batch, replicas):
    """A batch of images padded to a multiple of the replicas by repeating its rows (only the last batch can be
    short): Keras' DataParallel shards only batches that split evenly. Unchanged with one replica."""
    short = -len(batch) % replicas
    return _take(batch, np.arange(len(batch) + short) % len(batch)) if short else batch


def logits(model, images):
    # predict, Keras' one inference call (its per-call set-up is part of a batch-1 latency); predict_on_batch traced
    # 7 graph breaks into torch.compile's predict step on the torch backend.
    return np.asarray(model.predict(images, verbose=0), dtype=np.float32)


def sync(device):
    # fit and predict return host values, so no device work is pending when they return.
    pass


def cuda_versions():
    """What the backend reports, through its adapter (JAX's: jax_numpy, from jaxlib)."""
    return _backend_adapter().cuda_versions()


def cpu_kernels():
    """The backend's, through its adapter."""
    return _backend_adapter().cpu_kernels()


def allocator_peak_mb(device):
    """The backend's allocator peak, through its adapter."""
    return _backend_adapter().allocator_peak_mb(device)


_OOM_MARKERS = ("RESOURCE_EXHAUSTED", "OOM when allocating", "out of memory", "can't allocate memory")


def is_oom(error):
    # Each backend has its own exception type; all of them say so in the message.
    return any(marker in str(error) for marker in _OOM_MARKERS)
