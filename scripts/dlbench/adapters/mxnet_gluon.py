"""MXNet Gluon adapter. Variants: eager (imperative), graph (hybridize with static_alloc and static_shape), -nhwc
(layout NHWC for convolutions, pooling and batch norm; conv kernels OHWI), -composed (attention written out with
batch_dot, as GluonNLP's GPT-2 writes it, instead of the interleaved attention operators), -amp (GPU only: MXNet's own
AMP, mx.contrib.amp, float16 compute with float32 master weights and dynamic loss scaling; amp.init patches the
operators of the whole process, which is one run's). Layout NCHW otherwise, neutral weights converted by
specs.channels_first_weights. Gluon's Trainer.step(batch_size) rescales summed gradients by 1/batch_size, which makes
the per-sample loss a batch mean as elsewhere (a language model's: the mean over its tokens).

Attention models as GluonNLP builds them: self-attention through MXNet's interleaved attention operators, or written out
under -composed (see _Attention; MXNet 1.x has no fused scaled-dot-product attention), exact GELU (LeakyReLU act_type
"gelu"), a tied language-model head sharing the token embedding's parameter.

Data-parallel replicas, as Gluon's users train on several devices: one process, a context list (the first N GPUs, or
N CPU contexts cpu(0..N-1), each with its own engine worker, sharing the cores and memory), the parameters on every
context, each global batch split into equal contiguous slices, one per context (gluon.utils.split_and_load), a
forward and backward per context, and the Trainer's kvstore ("device" on GPU, "local" on CPU) summing the gradients
over the contexts before Trainer.step(global batch) divides them by the global batch.
"""

import ctypes
import dataclasses
import math

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.contrib import amp

from .. import data, mathmode, parallel, specs, variants
from . import GATHER_AND_PLACE, OPTIMIZER_DEFAULTS, RMSPROP_RHO, contract, loop

FRAMEWORK = "mxnet"
INPUT_WORK = GATHER_AND_PLACE
LOADER = "gluon.data.DataLoader (worker processes, mx.image decode and crop with OpenCV, pinned memory on GPU)"


@dataclasses.dataclass
class _Staged(contract.StagedArrays):
    """The dataset as stage placed it: NDArrays on replica 0's context, or NumPy arrays in the network's layout on
    the host (on_host)."""

    contexts: list  # the replicas' contexts
    on_host: bool


@dataclasses.dataclass
class _Streamed(contract.StreamedData):
    """A Gluon DataLoader per split; the training batches are handed each epoch's items."""

    contexts: list
    train_batches: data.EpochBatches
    train: gluon.data.DataLoader
    test: gluon.data.DataLoader
    test_y: np.ndarray
    channels_last: bool
    mean: list  # per context, the ImageNet mean on it
    std: list


@dataclasses.dataclass
class _Model:
    """The network (hybridized in graph modes), its trainer and loss, on the replicas' contexts."""

    network: gluon.nn.HybridBlock
    trainer: gluon.Trainer
    leaves: list  # the spec's layers in order (weights, engagement)
    loss: gluon.loss.Loss
    variant: variants.Variant
    contexts: list


def version():
    return mx.__version__


def _context(device):
    return mx.gpu(0) if device == "gpu" else mx.cpu()


def _contexts(device, count):
    """The replicas' contexts, replica 0's first: the first `count` GPUs, or `count` CPU contexts (one for a run
    without replicas: _context's)."""
    return [mx.gpu(index) if device == "gpu" else mx.cpu(index) for index in range(count)]


def configure(device, threads, seed, math_mode, replicas):
    mx.random.seed(seed)  # every context's generator
    if device == "gpu" and mx.context.num_gpus() == 0:
        raise RuntimeError("device gpu requested but MXNet sees no GPU (is this the mxnet-cu112 env?)")
    # MXNet reads OMP_NUM_THREADS (where threads are pinned) and its math-mode variables (mathmode.environment)
    # from the environment, set by the runner before the import: what is read back here is what MXNet read. Its
    # OpenMP team size is read back in engaged(), once MXNet has set it.
    configured = {
        "device_name": str(_context(device)),
        "tf32": mathmode.tf32_engaged(mathmode.environment_engaged("MXNET_CUDA_ALLOW_TENSOR_CORE", "1")),
        "conv_autotune": mathmode.environment_engaged("MXNET_CUDNN_AUTOTUNE_DEFAULT", "1"),
    }
    return {**configured, **_replica_devices(device, replicas)} if parallel.through_mechanism(replicas) else configured


def _replica_devices(device, replicas):
    """The replicas' contexts, each read back from an array placed on it; refused where MXNet sees fewer GPUs."""
    if device == "gpu" and mx.context.num_gpus() < replicas:
        raise RuntimeError(f"{replicas} replicas need {replicas} GPUs, but MXNet sees {mx.context.num_gpus()}")
    placed = [mx.nd.zeros((1,), ctx=ctx) for ctx in _contexts(device, replicas)]
    return {"replicas": len(placed), "replica_devices": [str(array.context) for array in placed]}


def replica_max(value):
    """The value itself: one process drives every context."""
    return value


def _image_axes(channels_last):
    return (0, 1, 2, 3) if channels_last else (0, 3, 1, 2)


def _network_inputs(inputs, channels_last):
    """NHWC images in the network's layout; token ids (N, tokens) as they are. float32 either way: MXNet's Embedding
    reads float ids (exact up to 2^24), and split_and_load and mx.nd.array make every host array float32."""
    laid_out = inputs.transpose(_image_axes(channels_last)) if inputs.ndim == 4 else inputs
    return np.ascontiguousarray(laid_out, dtype=np.float32)


def stage(arrays, experiment):
    """Device placement: the dataset as NDArrays on the training context (replica 0's). Host placement: NumPy arrays
    in the network's layout, from which every step's batch is gathered and copied (see _batches)."""
    contexts = _contexts(experiment["device"], parallel.replicas(experiment))
    ctx, channels_last = contexts[0], variants.parse(experiment["variant"]).channels_last
    on_host = experiment["data_placement"] == "host"

    def images(key):
        laid_out = _network_inputs(arrays[key], channels_last)
        return laid_out if on_host else mx.nd.array(laid_out, ctx=ctx, dtype="float32")

    def labels(key):
        as_float = arrays[key].astype(np.float32)
        return as_float if on_host else mx.nd.array(as_float, ctx=ctx, dtype="float32")

    return _Staged(
        train_x=images("train_x"),
        train_y=labels("train_y"),
        test_x=images("test_x"),
        test_y=labels("test_y"),
        contexts=contexts,
        on_host=on_host,
    )


class _ImageFolderStream(gluon.data.Dataset):
    """A streamed split, decoded and transformed in the DataLoader's workers with mx.image (OpenCV), as Gluon's
    ImageFolderDataset and transforms do. Items are rows of data.stream_order (training: crop box and flip) or
    data.eval_order (evaluation: resized size and crop corner)."""

    def __init__(self, files, labels, size, train):
        self.files, self.labels, self.size, self.train = files, labels, size, train

    def __len__(self):
        return len(self.files)

    def __getitem__(self, item):
        image = mx.image.imread(self.files[item[0]])  # RGB, HWC uint8
        if self.train:
            _, left, top, width, height, flip = item
            # OpenCV turns a JPEG by its EXIF orientation (Pillow, which sized the box, does not): keep the box inside.
            left, top = min(left, image.shape[1] - 1), min(top, image.shape[0] - 1)
            width, height = min(width, image.shape[1] - left), min(height, image.shape[0] - top)
            image = mx.image.fixed_crop(image, left, top, width, height, size=(self.size, self.size), interp=1)
            image = mx.nd.flip(image, axis=1) if flip else image
        else:
            _, width, height, left, top = item
            image = mx.image.fixed_crop(
                mx.image.imresize(image, width, height, interp=1), left, top, self.size, self.size
            )
        return image, int(self.labels[item[0]])


def stream(meta, experiment, workers):
    """Data placement stream: a Gluon DataLoader per split over the image folder, `workers` worker processes,
    pinned memory on a GPU; uint8 NHWC global batches, split over the contexts, made float, normalised and laid out
    on each; the evaluation split in one replica's batches, on replica 0's context."""
    contexts = _contexts(experiment["device"], parallel.replicas(experiment))
    size, batch_size = meta["shape"][0], parallel.global_batch_size(experiment)

    def loader(split, train, sampler):
        files, labels, _ = data.stream_files(meta, split)
        return gluon.data.DataLoader(
            _ImageFolderStream(files, labels, size, train),
            batch_sampler=sampler,
            num_workers=workers,
            pin_memory=experiment["device"] == "gpu",
            timeout=data.LOADER_TIMEOUT_S,
        )

    train_batches = data.EpochBatches(np.empty(0, dtype=data.TRAIN_ITEM), batch_size, True)
    _, test_labels, test_sizes = data.stream_files(meta, "val")
    test = data.EpochBatches(data.eval_order(test_sizes, size), parallel.replica_batch_size(experiment), False)
    return _Streamed(
        contexts=contexts,
        train_batches=train_batches,
        train=loader("train", True, train_batches),
        test=loader("val", False, test),
        test_y=test_labels,
        channels_last=variants.parse(experiment["variant"]).channels_last,
        mean=[mx.nd.array(data.IMAGENET_MEAN, ctx=ctx).reshape((1, 1, 1, 3)) * 255 for ctx in contexts],
        std=[mx.nd.array(data.IMAGENET_STD, ctx=ctx).reshape((1, 1, 1, 3)) * 255 for ctx in contexts],
    )


def _split(images, labels, contexts):
    """One batch as its replicas' shards [(images, labels)], one per context: equal contiguous slices, replica 0's
    first (as parallel.replica_slice), copied to their contexts by gluon.utils.split_and_load, which puts a host
    batch on the first context before slicing. With one context: the batch on it."""
    return list(zip(gluon.utils.split_and_load(images, contexts), gluon.utils.split_and_load(labels, contexts)))


def _streamed_batches(staged, loader, contexts):
    """A loader's uint8 NHWC batches as shards on the contexts, each normalised float32 in the network's layout."""
    for batch in loader:
        shards = []
        for (images, labels), mean, std in zip(_split(*batch, contexts), staged.mean, staged.std):
            images = mx.nd.broadcast_div(mx.nd.broadcast_sub(images.astype("float32"), mean), std)
            if not staged.channels_last:
                images = mx.nd.transpose(images, axes=(0, 3, 1, 2))
            shards.append((images, labels.astype("float32")))
        yield shards


def _batches(staged, order, batch_size):
    """Each batch of `order` as its shards on the contexts (_split), gathered where the data lives: on replica 0's
    context (device placement) or in NumPy (host placement)."""
    contexts = staged.contexts
    if staged.STREAM:
        staged.train_batches.items = order
        yield from _streamed_batches(staged, staged.train, contexts)
        return
    if staged.on_host:
        for images, labels in data.host_batches(staged.train_x, staged.train_y, order, batch_size):
            yield _split(images, labels, contexts)
        return
    indices = mx.nd.array(order, ctx=contexts[0], dtype="int64")
    for batch in data.batch_slices(len(order), batch_size):
        yield _split(mx.nd.take(staged.train_x, indices[batch]), mx.nd.take(staged.train_y, indices[batch]), contexts)


def _test_batches(staged, batch_size):
    """(images, labels) of the test split on replica 0's context: evaluation runs there alone."""
    ctx = staged.contexts[0]
    if staged.STREAM:
        for [(images, labels)] in _streamed_batches(staged, staged.test, [ctx]):
            yield images, labels
        return
    count = staged.test_y.shape[0]
    for start in range(0, count, batch_size):
        images, labels = staged.test_x[start : start + batch_size], staged.test_y[start : start + batch_size]
        if staged.on_host:
            images, labels = mx.nd.array(images, ctx=ctx), mx.nd.array(labels, ctx=ctx)
        yield images, labels


class _ZeroPadShortcut(gluon.HybridBlock):
    """Option-A shortcut: subsample by the stride, zero-pad the added channels half on each side."""

    def __init__(self, stride, pad, channels_last):
        super().__init__()
        self.stride, self.pad, self.axis = stride, pad, 3 if channels_last else 1

    def hybrid_forward(self, F, x):
        step = (1, self.stride, self.stride, 1) if self.axis == 3 else (1, 1, self.stride, self.stride)
        x = F.slice(x, begin=(None,) * 4, end=(None,) * 4, step=step)
        zeros = F.zeros_like(F.slice_axis(x, axis=self.axis, begin=0, end=self.pad))
        return F.concat(zeros, x, zeros, dim=self.axis)


class _Residual(gluon.HybridBlock):
    def __init__(self, body, shortcut, activation):
        super().__init__()
        self.body, self.shortcut, self.activation = body, shortcut, activation

    def hybrid_forward(self, F, x):
        out = self.body(x) + self.shortcut(x)
        return F.relu(out) if self.activation == "relu" else out


class _RowLSTM(gluon.HybridBlock):
    """An LSTM reading the image row by row; the logits come from the last step's hidden state."""

    def __init__(self, features, units, channels_last):
        super().__init__()
        self.lstm = gluon.rnn.LSTM(units, layout="NTC", input_size=features)
        self.channels_last = channels_last

    def hybrid_forward(self, F, x):
        rows = (x if self.channels_last else F.transpose(x, (0, 2, 3, 1))).reshape((0, 0, -1))
        return F.squeeze(F.slice_axis(self.lstm(rows), axis=1, begin=-1, end=None), axis=1)


class _PatchEmbed(gluon.HybridBlock):
    """A conv of kernel and stride `patch`, its (h, w) grid read as tokens in row-major order."""

    def __init__(self, channels, patch, width, channels_last):
        super().__init__()
        layout = "NHWC" if channels_last else "NCHW"
        self.conv = gluon.nn.Conv2D(width, patch, strides=patch, in_channels=channels, layout=layout)
        self.channels_last = channels_last

    def hybrid_forward(self, F, x):
        grid = self.conv(x)
        if self.channels_last:
            return grid.reshape((0, -1, 0))
        return F.swapaxes(grid.reshape((0, 0, -1)), 1, 2)


class _ClassToken(gluon.HybridBlock):
    def __init__(self, width):
        super().__init__()
        self.token = self.params.get("token", shape=(width,))

    def hybrid_forward(self, F, x, token):
        tokens = F.broadcast_like(token.reshape((1, 1, -1)), x, lhs_axes=(0,), rhs_axes=(0,))
        return F.concat(tokens, x, dim=1)


class _PositionEmbedding(gluon.HybridBlock):
    def __init__(self, shape):
        super().__init__()
        self.table = self.params.get("table", shape=shape)

    def hybrid_forward(self, F, x, table):
        return F.broadcast_add(x, F.expand_dims(table, axis=0))


class _Attention(gluon.HybridBlock):
    """Multi-head self-attention between the fused input and the output projection, in one of two ways (MXNet 1.x has
    no fused scaled-dot-product attention):
    - MXNet's attention operators, interleaved_matmul_selfatt_qk (scores, scaled by 1 / sqrt(head width)) and
      interleaved_matmul_selfatt_valatt (the weighted sum), with the softmax between, as GluonNLP's BERT runs them.
      They read one (tokens, N, 3 * width) projection whose columns hold each head's query, key and value side by
      side: the qkv kernel is stored in that order (_stored_columns). A causal softmax reads, for query i, only the
      first i + 1 keys (softmax's lengths: MXNet has no fused causal attention).
    - written out (variant -composed) as GluonNLP's GPT-2 writes it: the projection split into query, key and value,
      each (N * heads, tokens, head width), batch_dot, a causal mask through where, softmax, batch_dot."""

    KERNELS = {
        False: "mx.nd.contrib.interleaved_matmul_selfatt_qk, softmax, interleaved_matmul_selfatt_valatt",
        True: "composed: batch_dot, softmax, batch_dot",
    }

    def __init__(self, width, heads, causal, composed):
        super().__init__()
        self.qkv = gluon.nn.Dense(3 * width, flatten=False, in_units=width)
        self.out = gluon.nn.Dense(width, flatten=False, in_units=width)
        self.heads, self.causal, self.composed = heads, causal, composed
        self.scale = 1 / math.sqrt(width // heads)

    def hybrid_forward(self, F, x):
        return self.out(self._composed(F, x) if self.composed else self._interleaved(F, x))

    def _interleaved(self, F, x):
        qkv = self.qkv(F.swapaxes(x, 0, 1))  # the operators' layout: tokens first
        scores = F.contrib.interleaved_matmul_selfatt_qk(qkv, heads=self.heads)  # (N * heads, tokens, tokens)
        if self.causal:
            visible = F.contrib.arange_like(scores, start=1, axis=-1).astype("int32")  # query i sees i + 1 keys
            lengths = F.broadcast_like(visible.reshape((1, -1)), scores, lhs_axes=(0,), rhs_axes=(0,))
            weights = F.softmax(scores, length=lengths, use_length=True, axis=-1)
        else:
            weights = F.softmax(scores, axis=-1)
        mixed = F.contrib.interleaved_matmul_selfatt_valatt(qkv, weights, heads=self.heads)  # (tokens, N, width)
        return F.swapaxes(mixed, 0, 1)

    def _composed(self, F, x):
        query, key, value = (self._split_heads(F, part) for part in F.split(self.qkv(x), num_outputs=3, axis=-1))
        scores = F.batch_dot(query, key, transpose_b=True) * self.scale  # (N * heads, tokens, tokens)
        if self.causal:
            scores = F.where(_later_keys(F, scores), F.ones_like(scores) * -np.inf, scores)
        mixed = F.batch_dot(F.softmax(scores, axis=-1), value)  # (N * heads, tokens, head width)
        return self._merge_heads(F, mixed)

    def _split_heads(self, F, part):
        """(N, tokens, width) as (N * heads, tokens, head width)."""
        return F.transpose(part.reshape((0, 0, self.heads, -1)), (0, 2, 1, 3)).reshape((-3, 0, 0))

    def _merge_heads(self, F, mixed):
        """(N * heads, tokens, head width) back as (N, tokens, width)."""
        return F.transpose(mixed.reshape((-4, -1, self.heads, 0, 0)), (0, 2, 1, 3)).reshape((0, 0, -1))


def _later_keys(F, scores):
    """True where the key comes after the query, for every (N * heads) row of scores (tokens, tokens)."""
    positions = F.contrib.arange_like(scores, axis=-1)
    later = F.broadcast_greater(positions.reshape((1, -1)), positions.reshape((-1, 1)))
    return F.broadcast_like(F.expand_dims(later, axis=0), scores, lhs_axes=(0,), rhs_axes=(0,))


def _stored_columns(attention):
    """The neutral qkv column each stored column holds: for the interleaved operators, head by head, its query, key
    and value columns; written out, the neutral order."""
    width = attention.out.weight.shape[0]
    if attention.composed:
        return np.arange(3 * width)
    return np.arange(3 * width).reshape(3, attention.heads, -1).transpose(1, 0, 2).ravel()


class _TokenPool(gluon.HybridBlock):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def hybrid_forward(self, F, x):
        if self.kind == "class":
            return F.squeeze(F.slice_axis(x, axis=1, begin=0, end=1), axis=1)
        return F.mean(x, axis=1)


class _TiedHead(gluon.nn.Dense):
    """The language-model head tied to the token embedding, as GluonNLP's GPT-2 ties it: a bias-free dense layer
    given the embedding's parameters, whose (vocabulary, width) table is then its weight."""

    def __init__(self, embedding):
        vocabulary, width = embedding.weight.shape
        super().__init__(vocabulary, use_bias=False, flatten=False, in_units=width, params=embedding.params)


def _sequence_block(layer, in_shape, variant, built):
    """The block of an attention model's leaf; `built` holds the leaves built so far (a tied head finds its
    embedding there)."""
    if isinstance(layer, specs.PatchEmbed):
        return _PatchEmbed(in_shape[-1], layer.patch, layer.width, variant.channels_last)
    if isinstance(layer, specs.ClassToken):
        return _ClassToken(in_shape[-1])
    if isinstance(layer, specs.PositionEmbedding):
        return _PositionEmbedding(in_shape)
    if isinstance(layer, specs.TokenEmbedding):
        return gluon.nn.Embedding(layer.vocabulary, layer.width)
    if isinstance(layer, specs.LayerNorm):
        return gluon.nn.LayerNorm(epsilon=layer.epsilon, in_channels=in_shape[-1])
    if isinstance(layer, specs.Attention):
        return _Attention(in_shape[-1], layer.heads, layer.causal, variant.composed_attention)
    if isinstance(layer, specs.TokenPool):
        return _TokenPool(layer.kind)
    if isinstance(layer, specs.LMHead) and layer.tied:
        return _TiedHead(next(block for block in built if isinstance(block, gluon.nn.Embedding)))
    return gluon.nn.Dense(layer.vocabulary, use_bias=False, flatten=False, in_units=in_shape[-1])  # untied LMHead


_SEQUENCE_LEAVES = (
    specs.PatchEmbed,
    specs.ClassToken,
    specs.PositionEmbedding,
    specs.TokenEmbedding,
    specs.LayerNorm,
    specs.Attention,
    specs.TokenPool,
    specs.LMHead,
)


def _leaf_block(layer, in_shape, variant, synchronised_over, built):
    if isinstance(layer, _SEQUENCE_LEAVES):
        return _sequence_block(layer, in_shape, variant, built)
    activation = getattr(layer, "activation", None)
    channels_last = variant.channels_last
    layout = "NHWC" if channels_last else "NCHW"
    if isinstance(layer, specs.Conv):
        return gluon.nn.Conv2D(
            layer.filters,
            layer.kernel,
            strides=layer.stride,
            padding=layer.padding,
            activation=activation,
            use_bias=layer.bias,
            in_channels=in_shape[-1],
            layout=layout,
        )
    if isinstance(layer, specs.BatchNorm) and synchronised_over:  # -syncbn: statistics of every context's slice
        return gluon.contrib.nn.SyncBatchNorm(
            in_channels=in_shape[-1], num_devices=synchronised_over, momentum=layer.momentum, epsilon=layer.epsilon
        )
    if isinstance(layer, specs.BatchNorm):
        return gluon.nn.BatchNorm(
            axis=3 if channels_last else 1, momentum=layer.momentum, epsilon=layer.epsilon, in_channels=in_shape[-1]
        )
    if isinstance(layer, specs.Pool):
        if layer.kind == "avg":
            return gluon.nn.AvgPool2D(layer.size, layer.step, layout=layout)
        return gluon.nn.MaxPool2D(layer.size, layer.step, layer.padding, layout=layout)
    if isinstance(layer, specs.GlobalAvgPool):
        return gluon.nn.GlobalAvgPool2D(layout=layout)
    if isinstance(layer, specs.Flatten):
        return gluon.nn.Flatten()
    if isinstance(layer, specs.Dropout):
        return gluon.nn.Dropout(layer.rate)
    if isinstance(layer, specs.LSTM):
        return _RowLSTM(in_shape[1] * in_shape[2], layer.units, channels_last)
    # Dense flattens an image's features (global pooling leaves (N, C, 1, 1)); a sequence's it applies per token.
    # Its Activation operator has no GELU: _sequential adds one after it.
    return gluon.nn.Dense(
        layer.units,
        activation=None if activation == "gelu" else activation,
        flatten=len(in_shape) == 1,
        in_units=in_shape[-1],
    )


def _parameters_of(block):
    """The block's parameters in the neutral order (see `_stored` for the ones stored in another layout)."""
    if isinstance(block, _TiedHead):  # the embedding's, loaded there
        return []
    if isinstance(block, gluon.nn.Dense):
        return [block.weight] + ([block.bias] if block.bias is not None else [])
    if isinstance(block, _Attention):
        return _parameters_of(block.qkv) + _parameters_of(block.out)
    if isinstance(block, _PatchEmbed):
        return _parameters_of(block.conv)
    if isinstance(block, gluon.nn.LayerNorm):
        return [block.gamma, block.beta]
    if isinstance(block, (_ClassToken, _PositionEmbedding, gluon.nn.Embedding)):
        return list(block.params.values())
    if isinstance(block, gluon.nn.BatchNorm):
        return [block.gamma, block.beta, block.running_mean, block.running_var]
    if isinstance(block, _RowLSTM):
        lstm = block.lstm
        return [lstm.l0_i2h_weight, lstm.l0_h2h_weight, lstm.l0_i2h_bias]
    if isinstance(block, gluon.nn.Conv2D):
        return [block.weight] + ([block.bias] if block.bias is not None else [])
    return []


def _transposed(block, index):
    """Whether neutral array `index` of this block is stored transposed: dense, LSTM and attention kernels are
    (out, in)."""
    if isinstance(block, _Attention):
        return index in (0, 2)
    return index < 2 and isinstance(block, (gluon.nn.Dense, _RowLSTM))


def _stored(block, index, array):
    """Neutral array `index` of this block in the block's layout: transposed (_transposed), attention's qkv kernel
    and bias in the interleaved column order."""
    if isinstance(block, _Attention) and index < 2:
        array = array[..., _stored_columns(block)]
    return array.T if _transposed(block, index) else array


def _neutral(block, index, array):
    """The inverse of _stored."""
    array = array.T if _transposed(block, index) else array
    if isinstance(block, _Attention) and index < 2:
        return array[..., np.argsort(_stored_columns(block))]
    return array


def _sequential(spec, input_shape, variant, leaves, synchronised_over=None):
    """The spec as blocks, each leaf appended to `leaves`; batch norm synchronised over that many contexts, or not
    (None)."""
    network = gluon.nn.HybridSequential()
    for layer, in_shape, out_shape in specs.layer_shapes(spec, input_shape):
        if isinstance(layer, specs.Residual):
            body = _sequential(layer.body, in_shape, variant, leaves, synchronised_over)
            if layer.shortcut == "zero_pad":
                shortcut = _ZeroPadShortcut(*specs.zero_pad_geometry(in_shape, out_shape), variant.channels_last)
            else:
                shortcut = _sequential(layer.shortcut, in_shape, variant, leaves, synchronised_over)
            network.add(_Residual(body, shortcut, layer.activation))
        else:
            leaves.append(_leaf_block(layer, in_shape, variant, synchronised_over, leaves))
            network.add(leaves[-1])
            if isinstance(layer, specs.BatchNorm) and layer.activation == "relu":
                network.add(gluon.nn.Activation("relu"))
            if getattr(layer, "activation", None) == "gelu":  # the exact (erf) one: LeakyReLU act_type "gelu"
                network.add(gluon.nn.GELU())
    return network


def _ohwi_kernels(spec, input_shape, weights, axes):
    return [
        [params[0].transpose(axes)] + params[1:] if isinstance(layer, (specs.Conv, specs.PatchEmbed)) else params
        for (layer, _, _), params in zip(specs.leaves(spec, input_shape), weights)
    ]


def _layout_weights(spec, input_shape, weights, channels_last):
    """Neutral weights in this network's layout: OIHW kernels for NCHW, OHWI for NHWC (the Flatten order stays)."""
    if channels_last:
        return _ohwi_kernels(spec, input_shape, weights, (3, 0, 1, 2))
    return specs.channels_first_weights(spec, input_shape, weights)


def _make_trainer(params, experiment, mixed_precision):
    name = experiment["optimizer"]
    if name == "adam":
        options = {
            "beta1": OPTIMIZER_DEFAULTS["beta_1"],
            "beta2": OPTIMIZER_DEFAULTS["beta_2"],
            "epsilon": OPTIMIZER_DEFAULTS["epsilon"],
        }
    elif name == "rmsprop":
        options = {"gamma1": RMSPROP_RHO, "epsilon": OPTIMIZER_DEFAULTS["epsilon"]}
    else:
        options = {"momentum": experiment["momentum"]}
    options.update(learning_rate=experiment["learning_rate"], wd=experiment["weight_decay"])
    # The kvstore that sums the gradients of several contexts (none with one): "device" reduces on the GPUs, "local"
    # in host memory. It also runs the update (MXNet's default) except under AMP, whose loss scaler must skip an
    # overflowed step before any update: its dynamic loss scaling requires update_on_kvstore=False (MXNet's AMP guide).
    kvstore = "device" if experiment["device"] == "gpu" else "local"
    return gluon.Trainer(params, name, options, kvstore=kvstore, update_on_kvstore=False if mixed_precision else None)


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if variant.mode not in ("eager", "graph"):
        raise ValueError(
            f"mxnet adapter runs eager and graph, optionally -nhwc, -composed and -amp, not {variant.name!r}"
        )
    if variant.channels_last and experiment["device"] == "cpu":
        raise ValueError("MXNet 1.9's CPU convolutions take NCHW only: -nhwc runs on gpu")
    if variant.mixed_precision and experiment["device"] == "cpu":
        raise ValueError("MXNet 1.9's CPU (oneDNN) has no bfloat16 training kernels here: -amp runs on gpu")
    if variant.mixed_precision:
        amp.init(target_dtype="float16")  # before the network exists: it patches the operators it will call
    contexts, leaves = _contexts(experiment["device"], parallel.replicas(experiment)), []
    ctx = contexts[0]
    synchronised_over = len(contexts) if variant.sync_batch_norm else None
    network = _sequential(spec, input_shape, variant, leaves, synchronised_over)
    network.initialize(ctx=contexts)
    for block, params in zip(leaves, _layout_weights(spec, input_shape, weights, variant.channels_last)):
        for index, (param, value) in enumerate(zip(_parameters_of(block), params)):  # set_data: on every context
            param.set_data(mx.nd.array(_stored(block, index, value), ctx=ctx))
        if isinstance(block, _RowLSTM):  # the spec has one bias vector: the second stays zero
            block.lstm.l0_h2h_bias.set_data(mx.nd.zeros(block.lstm.l0_h2h_bias.shape, ctx=ctx))
            block.lstm.l0_h2h_bias.grad_req = "null"
    if variant.mode == "graph":  # one cached graph, its static memory kept per context
        network.hybridize(static_alloc=True, static_shape=True)
    trainable = [param for param in network.collect_params().values() if param.grad_req != "null"]
    trainer = _make_trainer(trainable, experiment, variant.mixed_precision)
    if variant.mixed_precision:
        amp.init_trainer(trainer)  # dynamic loss scaling; the step skips updates whose gradients overflowed
    return _Model(
        network=network,
        trainer=trainer,
        leaves=leaves,
        loss=gluon.loss.SoftmaxCrossEntropyLoss(),
        variant=variant,
        contexts=contexts,
    )


def parameter_count(model):
    params = model.network.collect_params().values()
    return sum(int(np.prod(param.shape)) for param in params if param.grad_req != "null")


def weights(model, spec, input_shape):
    """The current weights in the neutral layout (equivalence tests), replica 0's."""
    variant, current, ctx = model.variant, [], model.contexts[0]
    for block in model.leaves:
        arrays = [param.data(ctx).asnumpy() for param in _parameters_of(block)]
        current.append([_neutral(block, index, array) for index, array in enumerate(arrays)])
    if variant.channels_last:
        return _ohwi_kernels(spec, input_shape, current, (1, 2, 3, 0))
    return specs.channels_first_weights(spec, input_shape, current, inverse=True)


def engaged(model):
    """What ran, read back: whether hybridize built its cached graph, the parameters' dtype, the dtype a dense layer's
    matmul computes in (AMP casts its inputs to float16), the layout, loss scaling; with replicas, the kvstore."""
    network, variant, contexts = model.network, model.variant, model.contexts
    ctx = contexts[0]
    dtype = next(iter(network.collect_params().values())).dtype
    probe = mx.nd.zeros((1, 2), ctx=ctx)
    matmul_dtype = mx.nd.FullyConnected(probe, probe, no_bias=True, num_hidden=1).dtype
    result = {
        "variant": variant.name,
        "graph": variant.mode == "graph",
        "hybridize": {"static_alloc": True, "static_shape": True} if variant.mode == "graph" else None,
        "cached_graph": getattr(network, "_cached_op", None) is not None,
        "dtype": np.dtype(dtype).name,
        "matmul_dtype": np.dtype(matmul_dtype).name,
        "layout": "NHWC" if variant.channels_last else "NCHW",
        "loss_scaling": hasattr(model.trainer, "_amp_loss_scaler"),
        "omp_threads": _omp_threads(),
    }
    attention = next((block for block in model.leaves if isinstance(block, _Attention)), None)
    if attention is not None:
        result["attention"] = _Attention.KERNELS[attention.composed]
    if len(contexts) == 1:
        return result
    synchronised = any(isinstance(block, gluon.contrib.nn.SyncBatchNorm) for block in model.leaves)
    return {**result, **_data_parallel(model.trainer, synchronised)}


def _data_parallel(trainer, synchronised):
    """How the Trainer reduced the gradients, from its kvstore (which it makes at its first step: before that, the
    kvstore it was given) and its optimizer's rescale_grad (1 / the global batch of the last step; under AMP also
    divided by the loss scale)."""
    made = trainer._kv_initialized
    kvstore = trainer._kvstore.type if made else f"{trainer._kvstore_params['kvstore']} (made at the first step)"
    return {
        "data_parallel": f"gluon.Trainer over a context list of {len(trainer._contexts)} (split_and_load)",
        "gradient_reduction": "sum over replicas (kvstore pushpull), rescaled by 1 / the global batch in Trainer.step",
        "collective": f"kvstore {kvstore}",
        "batch_norm_statistics": (
            "global batch: SyncBatchNorm shares them between the contexts"
            if synchronised
            else "per replica: each context normalises its slice of the batch"
        ),
        "update_on_kvstore": trainer._update_on_kvstore if made else None,
        "rescale_grad": trainer._optimizer.rescale_grad,
    }


def _omp_threads():
    """The OpenMP team size MXNet set: OMP_NUM_THREADS where pinned, else its own rule (half the logical CPUs on
    x86), read from the OpenMP runtime it loaded (None where it loaded none)."""
    with open("/proc/self/maps") as maps:
        runtimes = {line.split()[-1] for line in maps if "libgomp" in line or "libiomp" in line}
    return ctypes.CDLL(sorted(runtimes)[0]).omp_get_max_threads() if runtimes else None


def _begin(model):
    return [mx.nd.zeros((1,), ctx=ctx) for ctx in model.contexts]  # a total per context


def _step(model, shards, totals):
    """One training step on a batch of shards (one per context): a forward and backward on each context, queued
    together (MXNet's engine runs them concurrently), then Trainer.step over the global batch."""
    network, trainer, loss_fn = model.network, model.trainer, model.loss
    with autograd.record():
        losses = [loss_fn(network(images), labels) for images, labels in shards]
        if model.variant.mixed_precision:
            with amp.scale_loss(losses, trainer) as scaled_losses:
                autograd.backward(scaled_losses)
    if not model.variant.mixed_precision:
        autograd.backward(losses)
    trainer.step(sum(images.shape[0] for images, _ in shards))
    for total, loss in zip(totals, losses):
        total += loss.mean()  # in place: NDArray.__iadd__
    return totals


def _mean(model, totals, steps):
    """The global batches' mean loss, read once after the last step: the shards are equal, so the mean of the
    replicas' means."""
    return sum(total.asscalar() for total in totals) / (steps * len(totals))


_LOOP = loop.Loop(begin=_begin, step=_step, mean=_mean)


def train_epoch(model, staged, order, batch_size):
    return _LOOP.epoch(model, _batches(staged, order, batch_size))


def fixed_batch_steps(model, staged, order, batch_size):
    return _LOOP.repeating(model, next(_batches(staged, order, batch_size)))


def loader_batches(staged, order, batch_size):
    """The loader's own host batches (uint8 NHWC, labels) of `order`; None: of the evaluation split (tests)."""
    if order is not None:
        staged.train_batches.items = order
    for images, labels in staged.train if order is not None else staged.test:
        yield images.asnumpy(), labels.asnumpy()


def loader_pass(staged, order, batch_size):
    """The training batches of `order` placed on the context, the model removed (the loader's own throughput)."""
    for _ in _batches(staged, order, batch_size):
        pass


def evaluate(model, staged, batch_size):
    """The mean loss and accuracy per label: per image, or per token of a language model's sequences."""
    network, loss_fn, ctx = model.network, model.loss, model.contexts[0]
    loss_sum, correct = mx.nd.zeros((1,), ctx=ctx), mx.nd.zeros((1,), ctx=ctx)
    for images, labels in _test_batches(staged, batch_size):
        logits = network(images)
        loss_sum += loss_fn(logits, labels).sum()  # per example: the mean over its tokens, all equally many
        correct += (logits.argmax(axis=-1) == labels).sum()
    examples, count = len(staged.test_y), staged.test_y.size
    return loss_sum.asscalar() / examples, correct.asscalar() / count


def logits(model, images):
    laid_out = _network_inputs(images, model.variant.channels_last)
    return model.network(mx.nd.array(laid_out, ctx=model.contexts[0])).asnumpy()


def sync(device):
    mx.nd.waitall()


def cuda_versions():
    # MXNet reports whether it was built with CUDA and cuDNN, not which versions (record.cuda_libraries: the wheel).
    return None, None


# MXNet's build features that name its CPU kernel libraries, in words.
_CPU_LIBRARIES = {
    "MKLDNN": "oneDNN",
    "BLAS_MKL": "BLAS MKL",
    "BLAS_OPEN": "BLAS OpenBLAS",
    "BLAS_ATLAS": "BLAS ATLAS",
    "BLAS_APPLE": "BLAS Accelerate",
}


def cpu_kernels():
    features = mx.runtime.Features()
    return ", ".join(words for key, words in _CPU_LIBRARIES.items() if features.is_enabled(key)) or None


def allocator_peak_mb(device):
    return None  # MXNet 1.9 exposes no allocator peak (only free/total through gpu_memory_info)


def is_oom(error):
    return isinstance(error, mx.base.MXNetError) and "out of memory" in str(error).lower()


# Operator microbenchmarks (dlbench/ops.py).
def operators(device, dtype):
    ctx = _context(device)
    return {
        "from_numpy": lambda array: mx.nd.array(array, ctx=ctx, dtype=dtype),
        "from_list": lambda values: mx.nd.array(values, ctx=ctx, dtype=dtype),
        "sigmoid": mx.nd.sigmoid,
        "relu": mx.nd.relu,
        "tanh": mx.nd.tanh,
        "softrelu": lambda x: mx.nd.Activation(x, act_type="softrelu"),
        "softsign": mx.nd.softsign,
        "dot": mx.nd.dot,
        "gemm": mx.nd.dot,
        "flatten": mx.nd.flatten,
        "normalize": lambda x: mx.nd.L2Normalization(x, mode="instance"),
        "copy": lambda x: x.copy(),
    }


def ops_input(array, device, dtype):
    return mx.nd.array(array, ctx=_context(device), dtype=dtype)


def ops_output(value):
    return value.astype("float32").asnumpy()


def ops_sync(device, value):
    sync(device)
