"""Flax adapter: Flax NNX modules trained with optax, on JAX.

Variants: eager runs the training step op by op (JAX dispatching each operation, not jitted: a debugging mode); xla
jits the same step the way Flax's performance guide recommends for speed: the model and its nnx.Optimizer split once
(nnx.split) into a graph definition and a state pytree, and a functional step, jax.jit with the state donated,
merges them, trains and returns the new state (no graph traversal and no copy of the weights per call); xla-amp
builds the modules with dtype=bfloat16 and param_dtype=float32, Flax's mixed precision: float32 weights, bfloat16
matmuls and convolutions, batch-norm statistics in float32. bfloat16 on CPU and GPU alike (not float16 on GPU as the
other stacks run it): it has float32's exponent range, so no loss scaling. -composed (eager-composed, xla-composed,
xla-composed-amp) writes attention out instead of calling JAX's fused kernel (see _Attention). Layout NHWC, the
neutral layout, so weights load unchanged: HWIO conv kernels, (in, out) dense kernels, and the LSTM's Keras-layout
kernels are nnx.OptimizedLSTMCell's (gates i, f, c, o; the one bias is its recurrent Linear's).

Attention models: self-attention runs JAX's fused kernel, jax.nn.dot_product_attention, on the (batch, tokens, heads,
head width) layout the fused projection's columns reshape to, no transposes (or, -composed, Flax's written-out
einsum, softmax, einsum on the same layout); the patch embedding is an nnx.Conv whose (h, w) grid is read as tokens,
the token embedding an nnx.Embed whose attend is the tied head (the same variable, one parameter), the class token
and learned positions nnx.Params. Language models take int token ids (N, tokens) and
next-token labels (N, tokens): the losses and accuracy are over every token.

Input: device-staged data is gathered inside the jitted step (jnp.take); host data is gathered in NumPy and put on
the device per step (_placed); streamed image folders go through tf.data (tensorflow_raw.stream, as Keras on JAX), and
their uint8 batches are made float and normalised as the step's first operations, on the device.

Data-parallel replicas, as Flax's guide to scaling up has it: a one-axis device mesh ("data") over the first N devices
(on a CPU, N host devices made by XLA_FLAGS=--xla_force_host_platform_device_count, set before the import), the
model and optimiser state replicated over it, every global batch split over its data axis, and the same step: jax.jit
(GSPMD) partitions it, each device computing its slice's part of the global batch's mean loss, and inserts the
all-reduce that sums the gradients' partial sums. Device-staged data is replicated on every device (a jitted step
takes its arguments on the mesh's devices), gathered inside the step and laid out over the data axis there
(jax.lax.with_sharding_constraint, the guide's tool for values made inside the step): each device gathers its own
slice from its own copy, no transfer between devices. The eager variant runs the same step op by op, each
operation on the sharded arrays partitioned by XLA as jit would (its collectives then per operation). Evaluation
runs replicated: every device the whole test batch, as one replica would.

Across the nodes of a Slurm job (launcher process-per-node: one process per node driving its devices), the processes
join through jax.distributed (JAX's coordination service on the first node) and the mesh spans every node's devices:
the same program in every process (multi-controller JAX), each handing its own data to its own devices
(jax.make_array_from_process_local_data: the replicated values whole, and of host batches its contiguous share of
each global batch); XLA's collectives cross the nodes (NCCL on GPUs; gloo between CPU processes).
"""

import dataclasses
import functools
import os

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .. import data, parallel, specs, variants
from . import GATHER_AND_PLACE, OPTIMIZER_DEFAULTS, RMSPROP_RHO, contract, jax_numpy, load, loop

FRAMEWORK = "flax"
# The adapter whose tf.data pipelines stream, loaded by name (stream), so that only streamed runs depend on it
# (dlbench/study/dependencies.py reads this literal).
STREAM_ADAPTER = "tensorflow_raw"
INPUT_WORK = GATHER_AND_PLACE
LOADER = "tf.data (parallel map: read, decode_and_crop_jpeg, resize, flip; batch, prefetch), device_put per batch"
_VARIANTS = ("eager", "xla", "xla-amp", "eager-composed", "xla-composed", "xla-composed-amp")


@dataclasses.dataclass
class _Staged(contract.StagedArrays):
    """The dataset as stage placed it: JAX arrays on the device (with replicas, on every replica's), or the NumPy
    arrays on the host (on_host). Streamed data is tensorflow_raw's."""

    on_host: bool


@dataclasses.dataclass
class _Model:
    """The split network and optimiser (graph definition and state) and the step functions on the state (_steps),
    with the replicas' shardings."""

    train_on: object  # (state, loss_sum, images, labels) -> (state, loss_sum)
    gather_and_train: object  # (state, loss_sum, images, labels, rows) -> (state, loss_sum)
    evaluate_on: object  # (state, totals, images, labels) -> totals
    predict: object  # (state, images) -> logits
    graphdef: nnx.GraphDef
    state: object  # nnx.State of the network and optimiser, replaced by every step
    variant: variants.Variant
    replicated: jax.sharding.Sharding | None  # a copy on every replica's device; None with one replica
    layout: "_BatchLayout | None"  # how a global batch is split over the replicas; None with one replica


_MEAN = np.asarray(data.IMAGENET_MEAN, np.float32) * 255
_STD = np.asarray(data.IMAGENET_STD, np.float32) * 255

_seed = 0  # of every nnx.Rngs (dropout masks), set by configure
# JAX has no device-wide barrier: sync blocks on the newest values the adapter queued (the state and mean loss of the
# last steps, the staged data or the built model), which the device finishes after everything queued before them.
_newest = None


def version():
    return flax.__version__


def _produced(value):
    """`value`, kept as the newest device work (what sync blocks on)."""
    global _newest
    _newest = value
    return value


def configure(device, threads, seed, math_mode, replicas):
    """The device becomes JAX's default (jax.devices("gpu") raises in an env without a GPU backend); XLA's threads
    and math mode through jax_numpy, read back; with replicas, the devices of their mesh (and across processes, the
    processes' cluster, joined first)."""
    global _seed
    _seed = seed
    joined = _join_processes() if parallel.process_count() > 1 else {}
    target = jax.local_devices(backend="gpu" if device == "gpu" else "cpu")[0]
    jax.config.update("jax_default_device", target)
    configured = {
        "backend": "jax",
        "backend_version": f"jax {jax.__version__}",
        "device_name": str(target),
        **jax_numpy.apply_threads(threads),
        **jax_numpy.apply_math_mode(math_mode),
    }
    if not parallel.through_mechanism(replicas):
        return configured
    mesh = _replica_mesh(device, replicas)
    return {**configured, **joined, "replicas": mesh.size, "replica_devices": [str(d) for d in mesh.devices.flat]}


def _join_processes():
    """This node's process in the run's cluster (parallel.slurm_launch's process-per-node tasks): jax.distributed at
    the first node's coordinator, before any device is touched, giving up after parallel.COLLECTIVE_TIMEOUT_S.
    JAX's own Slurm detection is off: it would give each process the one GPU of its SLURM_LOCALID (one process per
    GPU), where here a process drives all its node's GPUs."""
    jax.distributed.initialize(
        coordinator_address=parallel.coordinator(),
        num_processes=parallel.process_count(),
        process_id=parallel.process_rank(),
        cluster_detection_method="deactivate",
        initialization_timeout=parallel.COLLECTIVE_TIMEOUT_S,
    )
    return {"processes": jax.process_count()}


def _replica_mesh(device, replicas):
    """A one-axis mesh ("data") over the platform's first `replicas` devices (jax_numpy.replica_devices)."""
    devices = jax.devices("gpu" if device == "gpu" else "cpu")
    return Mesh(np.array(jax_numpy.replica_devices(devices, replicas, device)), ("data",))


def _shardings(experiment):
    """(replicated, batch) shardings over the replicas' mesh: (None, None) for one replica, where jax.device_put
    places on the default device as it always has."""
    if not parallel.through_mechanism(parallel.replicas(experiment)):
        return None, None
    mesh = _replica_mesh(experiment["device"], parallel.replicas(experiment))
    return NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))


def replica_max(value):
    """The slowest process's value (an epoch's seconds) across processes; in one process, which drives every
    replica's device, the value itself."""
    if jax.process_count() == 1:
        return value
    return float(multihost_utils.process_allgather(np.asarray(value, np.float32)).max())


def _placed(value, sharding):
    """A pytree of host (or default-device) arrays on the replicas' mesh, each process handing its own: with the
    replicated sharding the whole value (alike in every process), with the batch sharding its share of the global
    batch (jax.make_array_from_process_local_data: multi-process JAX's way in; device_put in one process, where it is
    the whole batch). A sharding of None: the default device."""
    return jax.device_put(value) if sharding is None else jax.make_array_from_process_local_data(sharding, value)


def stage(arrays, experiment):
    """Device placement: JAX arrays on the device (with replicas, a copy on every replica's device), batches gathered
    inside the step. Host placement: the NumPy arrays, each batch gathered there and put on the device per step (see
    _batch_calls)."""
    if experiment["data_placement"] == "host":
        return _Staged(**arrays, on_host=True)
    replicated, _ = _shardings(experiment)
    return _Staged(**_produced(_placed(dict(arrays), replicated)), on_host=False)


def stream(meta, experiment, workers):
    """Data placement stream: tf.data over the image folder, made per epoch from its items: TensorFlow's own
    pipelines (tensorflow_raw.stream, as Keras on JAX); uint8 batches, normalised on the device by the step
    (_normalised)."""
    return load(STREAM_ADAPTER).stream(meta, experiment, workers)


def _normalised(images):
    """Streamed uint8 batches as float32 normalised with the ImageNet statistics; other batches as they are."""
    if images.dtype != jnp.uint8:
        return images
    return (images.astype(jnp.float32) - _MEAN) / _STD


class _ClassToken(nnx.Module):
    """A learned token put before the sequence, in the sequence's dtype (bfloat16 under mixed precision, as Flax's
    layers cast their float32 weights)."""

    def __init__(self, width):
        self.token = nnx.Param(jnp.zeros(width))

    def __call__(self, x):
        token = jnp.broadcast_to(self.token[...].astype(x.dtype), (x.shape[0], 1, x.shape[-1]))
        return jnp.concatenate([token, x], axis=1)


class _PositionEmbedding(nnx.Module):
    """A learned vector per position, added in the sequence's dtype."""

    def __init__(self, shape):
        self.table = nnx.Param(jnp.zeros(shape))

    def __call__(self, x):
        return x + self.table[...].astype(x.dtype)


class _Attention(nnx.Module):
    """Multi-head self-attention between the fused input projection and the output projection: through JAX's fused
    kernel, jax.nn.dot_product_attention, or written out (variant -composed, _composed_attention). The fused kernel's
    implementation is XLA's, named rather than left to JAX's default (None, which picks XLA's in this version) so that
    what engaged reports is what ran: cuDNN's, the other, runs only on GPUs and only in 16-bit, neither a CPU nor the
    float32 variants."""

    IMPLEMENTATION = "xla"
    KERNELS = {
        False: f"jax.nn.dot_product_attention (implementation={IMPLEMENTATION!r})",
        True: "composed: einsum, softmax, einsum",
    }

    WEIGHTS = ("qkv_kernel", "qkv_bias", "out_kernel", "out_bias")

    def __init__(self, shapes, heads, causal, composed, dtype):
        # The neutral weights of specs.parameter_shapes, in its order: the fused projection's columns [q | k | v],
        # each head-major, then the output projection.
        for name, shape in zip(self.WEIGHTS, shapes, strict=True):
            setattr(self, name, nnx.Param(jnp.zeros(shape)))
        self.heads, self.causal, self.composed, self.dtype = heads, causal, composed, dtype

    def weights(self):
        return [getattr(self, name) for name in self.WEIGHTS]

    def __call__(self, x):
        width = x.shape[-1]
        head = (self.heads, width // self.heads)
        # In the computing dtype, as nnx.Linear promotes its weights.
        qkv_kernel, qkv_bias, out_kernel, out_bias = (weight[...].astype(self.dtype) for weight in self.weights())
        # The projections as nnx.MultiHeadAttention makes them (LinearGeneral): contractions with the kernels seen
        # per head, straight into and out of the (n, tokens, heads, head width) layout JAX's kernel takes. A Linear
        # on the flat width with reshapes between cost gpt-tiny's step 6 % (a 2-core CPU).
        qkv = jnp.einsum("btc,cshd->btshd", x.astype(self.dtype), qkv_kernel.reshape(width, 3, *head))
        q, k, v = jnp.unstack(qkv + qkv_bias.reshape(3, *head), axis=2)
        if self.composed:
            mixed = _composed_attention(q, k, v, self.causal)
        else:
            mixed = jax.nn.dot_product_attention(q, k, v, is_causal=self.causal, implementation=self.IMPLEMENTATION)
        return jnp.einsum("bthd,hdc->btc", mixed, out_kernel.reshape(*head, width)) + out_bias


def _composed_attention(q, k, v, causal):
    """Attention written out as Flax's nnx.dot_product_attention writes it where it does not hand over to JAX's kernel
    (with attention dropout, or the weights sown; flax/nnx/nn/attention.py, dot_product_attention_weights): q scaled by
    1/sqrt(head width), einsum with k, later tokens masked with the dtype's lowest value, softmax, einsum with v. All
    in the computing dtype (bfloat16 under -amp), where the fused kernel takes its scores and softmax in float32."""
    scores = jnp.einsum("...qhd,...khd->...hqk", q / jnp.sqrt(q.shape[-1]).astype(q.dtype), k)
    if causal:
        earlier = jnp.tril(jnp.ones(scores.shape[-2:], dtype=bool))
        scores = jnp.where(earlier, scores, jnp.finfo(scores.dtype).min)
    return jnp.einsum("...hqk,...khd->...qhd", jax.nn.softmax(scores, axis=-1), v)


class _TiedHead(nnx.Module):
    """The language-model head tied to the token embedding: its table, transposed (nnx.Embed.attend, Flax's tied
    head); the embedding's variable is shared, not copied, so it is counted and trained once."""

    def __init__(self, embedding):
        self.embedding = embedding

    def __call__(self, x):
        return self.embedding.attend(x)


def _unset(key, shape, dtype=jnp.float32):
    """The initialiser of every randomly initialised weight: a placeholder the neutral weights replace. Flax's own
    (truncated normal, orthogonal) compile a kernel per weight shape when called eagerly, seconds of every build on a
    CPU for values thrown away."""
    return jnp.asarray(np.zeros(shape, dtype))


def _leaf_module(layer, in_shape, variant, rngs, built):
    """The nnx module of one spec leaf in the variant (None for a leaf without state), computing in bfloat16 under
    mixed precision, else float32, on float32 weights; `built` holds the leaves' modules so far (a tied head finds its
    embedding there)."""
    dtype = jnp.bfloat16 if variant.mixed_precision else jnp.float32
    options = {"dtype": dtype, "param_dtype": jnp.float32, "rngs": rngs}
    if isinstance(layer, specs.PatchEmbed):
        return nnx.Conv(
            in_shape[-1], layer.width, (layer.patch,) * 2, layer.patch, padding="VALID", kernel_init=_unset, **options
        )
    if isinstance(layer, specs.ClassToken):
        return _ClassToken(in_shape[-1])
    if isinstance(layer, specs.PositionEmbedding):
        return _PositionEmbedding(in_shape)
    if isinstance(layer, specs.TokenEmbedding):
        return nnx.Embed(layer.vocabulary, layer.width, embedding_init=_unset, **options)
    if isinstance(layer, specs.LayerNorm):
        return nnx.LayerNorm(in_shape[-1], epsilon=layer.epsilon, **options)
    if isinstance(layer, specs.Attention):
        shapes, _ = specs.parameter_shapes(layer, in_shape)
        return _Attention(shapes, layer.heads, layer.causal, variant.composed_attention, dtype)
    if isinstance(layer, specs.LMHead):
        if layer.tied:
            return _TiedHead(next(module for module in built if isinstance(module, nnx.Embed)))
        return nnx.Linear(in_shape[-1], layer.vocabulary, use_bias=False, kernel_init=_unset, **options)
    if isinstance(layer, specs.Conv):
        padding = ((layer.padding, layer.padding),) * 2
        return nnx.Conv(
            in_shape[-1],
            layer.filters,
            (layer.kernel,) * 2,
            layer.stride,
            padding=padding,
            use_bias=layer.bias,
            kernel_init=_unset,
            **options,
        )
    if isinstance(layer, specs.BatchNorm):  # Flax's momentum is the decay, as the spec's
        return nnx.BatchNorm(in_shape[-1], momentum=layer.momentum, epsilon=layer.epsilon, **options)
    if isinstance(layer, specs.Dense):
        return nnx.Linear(in_shape[-1], layer.units, kernel_init=_unset, **options)
    if isinstance(layer, specs.LSTM):
        cell = nnx.OptimizedLSTMCell(
            in_shape[1] * in_shape[2], layer.units, kernel_init=_unset, recurrent_kernel_init=_unset, **options
        )
        return nnx.RNN(cell, rngs=rngs)
    if isinstance(layer, specs.Dropout):
        return nnx.Dropout(layer.rate, rngs=rngs)
    return None


def _variables(module):
    """The module's variables in the neutral order of its leaf's weights."""
    if isinstance(module, nnx.RNN):
        cell = module.cell
        return [cell.dense_i.kernel, cell.dense_h.kernel, cell.dense_h.bias]
    if isinstance(module, nnx.BatchNorm):
        return [module.scale, module.bias, module.mean, module.var]
    if isinstance(module, (nnx.Conv, nnx.Linear)):
        return [module.kernel] + ([module.bias] if module.bias is not None else [])
    if isinstance(module, nnx.LayerNorm):
        return [module.scale, module.bias]
    if isinstance(module, _Attention):
        return module.weights()
    if isinstance(module, nnx.Embed):
        return [module.embedding]
    if isinstance(module, _ClassToken):
        return [module.token]
    if isinstance(module, _PositionEmbedding):
        return [module.table]
    return []  # a tied head's weights are its embedding's


# jax.nn.gelu defaults to the tanh approximation; the spec's GELU is the exact one (erf).
_ACTIVATIONS = {"relu": jax.nn.relu, "gelu": functools.partial(jax.nn.gelu, approximate=False)}


class _Network(nnx.Module):
    """The spec applied to nnx modules holding the neutral weights, one per leaf (None where a leaf has none)."""

    def __init__(self, spec, input_shape, weights, variant, rngs):
        modules = []
        for layer, in_shape, _ in specs.leaves(spec, input_shape):
            modules.append(_leaf_module(layer, in_shape, variant, rngs, modules))
        self.leaves = nnx.List(modules)
        for module, params in zip(self.leaves, weights):
            for variable, value in zip(_variables(module), params):
                variable[...] = jnp.asarray(value)
        self.plan = specs.plan(spec, input_shape)

    def __call__(self, inputs, training):
        return self._apply(self.plan, inputs, training).astype(jnp.float32)  # the loss and softmax in float32

    def _apply(self, steps, x, training):
        for layer, first, second in steps:
            if isinstance(layer, specs.Residual):
                x = self._apply(first, x, training) + self._shortcut(layer, second, x, training)
            else:
                x = self._leaf(layer, first, x, training, self.leaves[second])
            activation = getattr(layer, "activation", None)
            if activation:
                x = _ACTIVATIONS[activation](x)
        return x

    def _shortcut(self, layer, steps, x, training):
        if layer.shortcut != "zero_pad":
            return self._apply(steps, x, training)
        stride, pad = steps  # option A: subsample by the stride, zero-pad the new channels half on each side
        return jnp.pad(x[:, ::stride, ::stride], ((0, 0), (0, 0), (0, 0), (pad, pad)))

    def _leaf(self, layer, in_shape, x, training, module):
        if isinstance(layer, specs.BatchNorm):
            return module(x, use_running_average=not training)
        if isinstance(layer, specs.Dropout):
            return module(x, deterministic=not training)
        if isinstance(layer, specs.LSTM):  # the image rows as steps of w*c features; the last step's hidden state
            return module(x.reshape(x.shape[0], in_shape[0], -1))[:, -1]
        if isinstance(layer, specs.Pool):  # max pools pad with -inf; they follow a ReLU, so as zeros would
            pool = nnx.avg_pool if layer.kind == "avg" else nnx.max_pool
            return pool(x, (layer.size,) * 2, (layer.step,) * 2, ((layer.padding, layer.padding),) * 2)
        if isinstance(layer, specs.GlobalAvgPool):
            return x.mean(axis=(1, 2))
        if isinstance(layer, specs.Flatten):
            return x.reshape(x.shape[0], -1)
        if isinstance(layer, specs.PatchEmbed):  # the conv's (h, w) grid as tokens, row-major
            return module(x).reshape(x.shape[0], -1, layer.width)
        if isinstance(layer, specs.TokenPool):
            return x[:, 0] if layer.kind == "class" else x.mean(axis=1)
        return module(x)


def _adam(rate):
    """Adam as Keras, TensorFlow and MXNet step it: epsilon added to sqrt(v) before bias correction (Keras' "epsilon
    hat"), the rate corrected instead. optax.adam adds it to the corrected sqrt(v_hat), as PyTorch does, which moves
    weights whose gradients are near epsilon differently (tests/frameworks/test_adapters.py)."""
    beta_1, beta_2, epsilon = (OPTIMIZER_DEFAULTS[key] for key in ("beta_1", "beta_2", "epsilon"))

    def init(params):
        moments = (optax.tree.zeros_like(params) for _ in range(2))  # distinct buffers: the jitted step donates both
        return optax.ScaleByAdamState(jnp.zeros([], jnp.int32), *moments)

    def update(gradients, state, params=None):
        mu = optax.tree.update_moment(gradients, state.mu, beta_1, 1)
        nu = optax.tree.update_moment_per_elem_norm(gradients, state.nu, beta_2, 2)
        count = state.count + 1
        step = -rate * jnp.sqrt(1 - beta_2**count) / (1 - beta_1**count)
        updates = jax.tree.map(lambda m, v: step * m / (jnp.sqrt(v) + epsilon), mu, nu)
        return updates, optax.ScaleByAdamState(count, mu, nu)

    return optax.GradientTransformation(init, update)


def _make_optimizer(experiment):
    """The optax chain; weight decay coupled, added to the gradient before the optimiser (PyTorch's and MXNet's
    definition)."""
    name, rate, decay = experiment["optimizer"], experiment["learning_rate"], experiment["weight_decay"]
    if name == "adam":
        optimizer = _adam(rate)
    elif name == "rmsprop":  # epsilon inside the square root, as Keras, TensorFlow and MXNet
        optimizer = optax.rmsprop(rate, decay=RMSPROP_RHO, eps=OPTIMIZER_DEFAULTS["epsilon"], eps_in_sqrt=True)
    else:
        optimizer = optax.sgd(rate, momentum=experiment["momentum"] or None)  # None: no momentum buffer
    return optax.chain(optax.add_decayed_weights(decay), optimizer) if decay else optimizer


def _loss(logits, labels):
    """Over the last axis: per image, or per token of a sequence (a language model's next-token loss)."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


class _BatchLayout:
    """Replicas' batches split over the mesh's data axis inside the step, and the sharding XLA's partitioner gave them
    there, read back (jax.debug.inspect_array_sharding: when the step compiles, or per call in the eager variant)."""

    def __init__(self, sharding):
        self.sharding, self.seen = sharding, None

    def __call__(self, images, labels):
        images, labels = jax.lax.with_sharding_constraint((images, labels), self.sharding)
        jax.debug.inspect_array_sharding(images, callback=self._saw)
        return images, labels

    def _saw(self, sharding):
        self.seen = sharding


def _train_on(graphdef, layout, state, loss_sum, images, labels):
    """One step, functional: the network and optimiser merged from the state, the new state and loss sum returned;
    with replicas, the batch laid out over them (`layout`, else None)."""
    if layout is not None:
        images, labels = layout(images, labels)
    network, optimizer = nnx.merge(graphdef, state)
    loss, gradients = nnx.value_and_grad(lambda net: _loss(net(_normalised(images), True), labels).mean())(network)
    optimizer.update(network, gradients)
    return nnx.state((network, optimizer)), loss_sum + loss


def _gather_and_train(graphdef, layout, state, loss_sum, images, labels, batch):
    gathered = jnp.take(images, batch, axis=0), jnp.take(labels, batch, axis=0)
    return _train_on(graphdef, layout, state, loss_sum, *gathered)


def _evaluate_on(graphdef, state, totals, images, labels):
    """totals (loss sum, correct) plus this batch's, in inference mode."""
    logits = _predict(graphdef, state, images)
    return totals + jnp.stack([_loss(logits, labels).sum(), (logits.argmax(axis=-1) == labels).sum()])


def _predict(graphdef, state, images):
    network, _ = nnx.merge(graphdef, state)
    return network(_normalised(images), False)


def _steps(graphdef, layout, jitted):
    """The step functions on the state, the graph definition (and the training steps' batch layout) bound; jitted:
    jax.jit with the training state and the loss sum donated (updated in place, as Flax's guide has it)."""
    functions = {
        "train_on": (functools.partial(_train_on, graphdef, layout), (0, 1)),
        "gather_and_train": (functools.partial(_gather_and_train, graphdef, layout), (0, 1)),
        "evaluate_on": (functools.partial(_evaluate_on, graphdef), ()),
        "predict": (functools.partial(_predict, graphdef), ()),
    }
    if not jitted:
        return {name: function for name, (function, _) in functions.items()}
    return {name: jax.jit(function, donate_argnums=donated) for name, (function, donated) in functions.items()}


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if variant.name not in _VARIANTS:
        raise ValueError(f"flax adapter runs {', '.join(_VARIANTS)}, not {variant.name!r}")
    network = _Network(spec, input_shape, weights, variant, nnx.Rngs(_seed))
    optimizer = nnx.Optimizer(network, _make_optimizer(experiment), wrt=nnx.Param)
    graphdef, state = nnx.split((network, optimizer))
    replicated, batch = _shardings(experiment)
    layout = _BatchLayout(batch) if batch is not None else None
    steps = _steps(graphdef, layout, jitted=variant.mode == "xla")
    if replicated is not None:  # a copy of the state on every replica's device
        state = _placed(state, replicated)
    return _Model(
        **steps, graphdef=graphdef, state=_produced(state), variant=variant, replicated=replicated, layout=layout
    )


def _network(model):
    return nnx.merge(model.graphdef, model.state)[0]


def parameter_count(model):
    return sum(leaf.size for leaf in jax.tree.leaves(nnx.state(_network(model), nnx.Param)))


def weights(model, spec, input_shape):
    return [[np.asarray(variable[...]) for variable in _variables(module)] for module in _network(model).leaves]


def engaged(model):
    """What ran, read back: whether the step is a jax.jit wrapper, the weights' dtype, the dtype the last dense
    layer's matmul gives (traced abstractly: jax.eval_shape); with replicas, the shardings of a weight and of the
    batch in the step."""
    variant, network = model.variant, _network(model)
    dense = next(module for module in reversed(network.leaves) if isinstance(module, nnx.Linear))
    jitted = hasattr(model.train_on, "lower")
    result = {
        "variant": variant.name,
        "graph": variant.mode != "eager",
        "xla": jitted,
        "jit": jitted,
        "dtype": str(dense.kernel[...].dtype),
        "matmul_dtype": str(jax.eval_shape(dense, jax.ShapeDtypeStruct((1, dense.in_features), jnp.float32)).dtype),
        "layout": "NHWC",
        "loss_scaling": False,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    if any(isinstance(module, _Attention) for module in network.leaves):
        result["attention"] = _Attention.KERNELS[variant.composed_attention]
    if model.layout is None:
        return result
    return {**result, **_data_parallel(dense.kernel[...], model.layout, jitted)}


def _cross_process_collectives():
    """What XLA's collectives go through between processes: NCCL between GPUs; between CPU processes the
    implementation JAX is configured with (jax_cpu_collectives_implementation, gloo by default)."""
    if jax.default_backend() == "gpu":
        return "NCCL"
    return jax.config.jax_cpu_collectives_implementation


def _data_parallel(weight, layout, jitted):
    """How the replicas shared the step, read back: a weight replicated over the mesh and the batch split over its
    data axis in the step (None before the first step), from which XLA's partitioner all-reduces the gradients'
    partial sums, the loss being the global batch's mean: once per step under jit, per operation in eager; across
    processes through the platform's cross-process collectives."""
    mesh, processes = dict(weight.sharding.mesh.shape), jax.process_count()
    across = f" across {processes} processes ({_cross_process_collectives()})" if processes > 1 else ""
    return {
        "data_parallel": f"jax.jit over a Mesh {mesh} (GSPMD)" if jitted else f"op by op over a Mesh {mesh} (GSPMD)",
        "gradient_reduction": "mean: the global batch's mean loss differentiated, partial sums all-reduced",
        "collective": f"XLA all-reduce (GSPMD){across}" + ("" if jitted else ", per operation"),
        "batch_norm_statistics": "global batch: GSPMD keeps the one-device step's mean over every slice",
        "weight_sharding": str(weight.sharding.spec),
        "batch_sharding": str(layout.seen.spec) if layout.seen is not None else None,
    }


def _host_batches(staged, order, batch_size):
    """This process's batches of `order` on the host (across processes, its share of each global batch:
    parallel.process_share): the loader's (streamed), or gathered from the NumPy arrays."""
    order, batch_size = parallel.process_share(order, batch_size)
    if staged.STREAM:
        return staged.train(order, batch_size).as_numpy_iterator()
    return data.host_batches(staged.train_x, staged.train_y, order, batch_size)


def _batch_calls(model, staged, order, batch_size):
    """(step, arguments) per batch of `order`: device-staged data is gathered inside the step, host batches are put
    on the device before it."""
    if staged.STREAM or staged.on_host:
        for batch in _host_batches(staged, order, batch_size):
            yield model.train_on, _placed(batch, _batch_sharding(model))
        return
    indices = _placed(order.astype(np.int32), model.replicated)
    for batch in data.batch_slices(len(order), batch_size):
        yield model.gather_and_train, (staged.train_x, staged.train_y, indices[batch])


def _batch_sharding(model):
    """Where a batch made outside the step goes: split over the replicas, or (None) the default device."""
    return None if model.layout is None else model.layout.sharding


def _begin(model):
    return _placed(np.zeros((), np.float32), model.replicated)


def _step(model, call, loss_sum):
    """One jitted step (a call of _batch_calls), the state donated to it; the loss summed inside the step."""
    step, arguments = call
    model.state, loss_sum = step(model.state, loss_sum, *arguments)
    return loss_sum


def _mean(model, loss_sum, steps):
    """The mean loss, on the device until the caller reads it; the state's last update produced with it."""
    mean = loss_sum / steps
    _produced((model.state, mean))
    return mean


_LOOP = loop.Loop(begin=_begin, step=_step, mean=_mean)


def train_epoch(model, staged, order, batch_size):
    return _LOOP.epoch(model, _batch_calls(model, staged, order, batch_size))


def fixed_batch_steps(model, staged, order, batch_size):
    """The first batch of `order`, gathered and placed on the device before any timing, trained on `steps` times."""
    if staged.STREAM or staged.on_host:
        first = _placed(next(iter(_host_batches(staged, order[:batch_size], batch_size))), _batch_sharding(model))
    else:
        indices = _placed(order[:batch_size].astype(np.int32), model.replicated)
        first = jnp.take(staged.train_x, indices, axis=0), jnp.take(staged.train_y, indices, axis=0)
        first = jax.device_put(first, _batch_sharding(model))
    return _LOOP.repeating(model, (model.train_on, first))


def loader_batches(staged, order, batch_size):
    """The loader's own host batches (uint8 NHWC, labels) of `order`; None: of the evaluation split (tests)."""
    yield from staged.test.as_numpy_iterator() if order is None else _host_batches(staged, order, batch_size)


def loader_pass(staged, order, batch_size):
    """The training batches of `order` placed on the device, the model removed (the loader's own throughput); the
    last one waited for, so that every copy has finished."""
    for batch in _host_batches(staged, order, batch_size):
        placed = jax.device_put(batch)
    jax.block_until_ready(placed)


def _test_batches(staged, batch_size, replicated):
    """(images, labels) of the test split in order, on the device (every replica's, with `replicated`)."""
    if staged.STREAM:
        yield from (_placed(batch, replicated) for batch in staged.test.as_numpy_iterator())
        return
    for start in range(0, len(staged.test_y), batch_size):
        batch = staged.test_x[start : start + batch_size], staged.test_y[start : start + batch_size]
        yield _placed(batch, replicated) if staged.on_host else batch


def evaluate(model, staged, batch_size):
    totals = _placed(np.zeros(2, np.float32), model.replicated)
    for images, labels in _test_batches(staged, batch_size, model.replicated):
        totals = model.evaluate_on(model.state, totals, images, labels)
    loss_sum, correct = np.asarray(totals, dtype=np.float64)
    count = staged.test_y.size  # images, or every token of the sequences
    return float(loss_sum) / count, float(correct) / count


def logits(model, images):
    return np.asarray(model.predict(model.state, _placed(images, model.replicated)), dtype=np.float32)


def sync(device):
    if _newest is not None:
        jax.block_until_ready(_newest)


def cuda_versions():
    return jax_numpy.cuda_versions()


def cpu_kernels():
    return jax_numpy.cpu_kernels()


def allocator_peak_mb(device):
    return jax_numpy.allocator_peak_mb(device)


def is_oom(error):
    # XLA raises JaxRuntimeError for every failure; an allocation failure says so in its message.
    message = str(error)
    return "RESOURCE_EXHAUSTED" in message or "out of memory" in message.lower()
