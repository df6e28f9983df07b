"""PaddlePaddle adapter (dynamic graph). Variants: eager (the dynamic graph, op by op), graph (paddle.jit.to_static of
the network with full_graph=True: its forward translated from the Python source into one static program per training
and evaluation mode, which fails at what it cannot translate where the default SOT translation would fall back to the
dynamic graph; the step loop stays dynamic, as Paddle's guide to to_static training writes it; the backend that runs
the programs, PHI kernels or the CINN compiler, is read back), -nhwc (data_format NHWC for convolutions, pooling and
batch norm; kernels stay OIHW), -composed (attention written out as paddle.nn.MultiHeadAttention computes it, not
the fused function), -amp (GPU only: paddle.amp.auto_cast O1, float16 with GradScaler; auto_cast does nothing on
CPU). Layout NCHW otherwise, neutral weights converted by specs.channels_first_weights; Linear weights are
(in, out) as in the spec, and batch norm's momentum is, as there, the decay of the running averages. Attention runs
(but under -composed) through paddle.nn.functional.scaled_dot_product_attention, whose (batch, tokens, heads, head
width) layout is the fused projection's own; the backend its dispatcher picks (flash or memory-efficient attention on
a GPU, on CPU the composed matmul-softmax-matmul) is read back.
"""

import contextlib
import ctypes
import dataclasses
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn
from paddle.base import core
from paddle.nn.functional import sdpa

from .. import data, mathmode, specs, variants
from . import GATHER_AND_PLACE, OPTIMIZER_DEFAULTS, RMSPROP_RHO, contract, loop

FRAMEWORK = "paddle"
INPUT_WORK = GATHER_AND_PLACE
LOADER = "paddle.io.DataLoader (persistent worker processes, Pillow decode and crop, shared memory)"


@dataclasses.dataclass
class _Staged(contract.StagedArrays):
    """The dataset as stage placed it: tensors on the device, or NumPy arrays in the network's layout on the host
    (on_host)."""

    place: object  # paddle.CPUPlace or paddle.CUDAPlace
    on_host: bool


@dataclasses.dataclass
class _Streamed(contract.StreamedData):
    """A paddle.io.DataLoader per split; the training batches are handed each epoch's items."""

    place: object
    train_batches: data.EpochBatches
    train: paddle.io.DataLoader
    test: paddle.io.DataLoader
    test_y: np.ndarray
    channels_last: bool
    mean: paddle.Tensor
    std: paddle.Tensor


@dataclasses.dataclass
class _Model:
    """The network (to_static in graph modes), its optimiser and loss scaler."""

    network: nn.Layer
    leaves: list  # the spec's layers in order (weights, engagement)
    optimizer: paddle.optimizer.Optimizer
    variant: variants.Variant
    place: object
    autocast_dtype: str
    scaler: paddle.amp.GradScaler


def version():
    return paddle.__version__


def _place(device):
    return paddle.CUDAPlace(0) if device == "gpu" else paddle.CPUPlace()


def configure(device, threads, seed, math_mode, replicas):
    if replicas > 1:
        raise RuntimeError(
            f"{replicas} replicas requested: this stack has no data-parallel path wired (Paddle's DataParallel runs "
            "one process per device under paddle.distributed.launch, which this adapter does not set up)"
        )
    paddle.seed(seed)
    if device == "gpu" and not paddle.device.is_compiled_with_cuda():
        raise RuntimeError("device gpu requested but this Paddle is a CPU build (is this the paddle-3.3-cuda env?)")
    paddle.set_device("gpu:0" if device == "gpu" else "cpu")
    return {**_apply_threads(threads), "device_name": paddle.device.get_device(), **_apply_math_mode(math_mode)}


def replica_max(value):
    """The value itself: a paddle run is one process (no data-parallel replicas)."""
    return value


def _apply_threads(threads):
    """Pinned CPU threads, or Paddle's default (FLAGS_paddle_num_threads: one), read back from the OpenMP runtime
    its MKL and its own loops run on (None where the build ships none)."""
    if threads is not None:
        core.set_num_threads(threads)
    runtime = Path(paddle.__file__).parent / "libs" / "libiomp5.so"
    return {"intra_op_threads": ctypes.CDLL(str(runtime)).omp_get_max_threads() if runtime.exists() else None}


def _apply_math_mode(math_mode):
    """Paddle's TF32 switches (cuBLAS's, off by Paddle's default, and cuDNN's) and its kernel autotuning
    (paddle.incubate.autotune: cuDNN convolution algorithms timed over the first steps), set and read back."""
    core.set_cublas_switch(math_mode["tf32"])
    core.set_cudnn_switch(math_mode["tf32"])
    paddle.incubate.autotune.set_config({"kernel": {"enable": math_mode["autotune"]}})
    tf32 = core.get_cublas_switch() and core.get_cudnn_switch()
    autotune = paddle.get_flags("FLAGS_use_autotune")["FLAGS_use_autotune"]
    return {"tf32": mathmode.tf32_engaged(tf32), "conv_autotune": autotune}


def _image_axes(channels_last):
    return (0, 1, 2, 3) if channels_last else (0, 3, 1, 2)


def _laid_out(inputs, channels_last):
    """NHWC images in the network's layout; token ids (N, tokens) as int64, the labels' integer type."""
    if inputs.ndim == 4:
        return np.ascontiguousarray(inputs.transpose(_image_axes(channels_last)))
    return inputs.astype(np.int64)


def stage(arrays, experiment):
    """Device placement: the dataset as tensors on the training device. Host placement: NumPy arrays in the
    network's layout, from which every step's batch is gathered and copied (see _batches)."""
    place, channels_last = _place(experiment["device"]), variants.parse(experiment["variant"]).channels_last
    on_host = experiment["data_placement"] == "host"

    def images(key):
        laid_out = _laid_out(arrays[key], channels_last)
        return laid_out if on_host else paddle.to_tensor(laid_out, place=place)

    def labels(key):
        int64 = arrays[key].astype(np.int64)
        return int64 if on_host else paddle.to_tensor(int64, place=place)

    return _Staged(
        train_x=images("train_x"),
        train_y=labels("train_y"),
        test_x=images("test_x"),
        test_y=labels("test_y"),
        place=place,
        on_host=on_host,
    )


class _ImageFolderStream(paddle.io.Dataset):
    """A streamed split, decoded and transformed in the DataLoader's workers with Pillow (data.pillow_crop, as
    pytorch's twin). Items are rows of data.stream_order (training: crop box and flip) or data.eval_order
    (evaluation: resized size and crop corner)."""

    def __init__(self, files, labels, size, train):
        super().__init__()
        self.files, self.labels, self.size, self.train = files, labels, size, train

    def __len__(self):
        return len(self.files)

    def __getitem__(self, item):
        return data.pillow_crop(self.files[item[0]], item, self.size, self.train), np.int64(self.labels[item[0]])


def stream(meta, experiment, workers):
    """Data placement stream: a paddle.io.DataLoader per split over the image folder, `workers` persistent worker
    processes handing batches over in shared memory, and its buffered reader placing them on the device (through
    pinned memory on a GPU); uint8 NHWC batches, made float, normalised and laid out there."""
    place, size, batch_size = _place(experiment["device"]), meta["shape"][0], experiment["batch_size"]

    def loader(split, train, batches):
        files, labels, _ = data.stream_files(meta, split)
        return paddle.io.DataLoader(
            _ImageFolderStream(files, labels, size, train),
            places=place,
            batch_sampler=batches,
            num_workers=workers,
            persistent_workers=True,
            timeout=data.LOADER_TIMEOUT_S,
        )

    train_batches = data.EpochBatches(np.empty(0, dtype=data.TRAIN_ITEM), batch_size, True)
    _, test_labels, test_sizes = data.stream_files(meta, "val")
    test = data.EpochBatches(data.eval_order(test_sizes, size), batch_size, False)
    return _Streamed(
        place=place,
        train_batches=train_batches,
        train=loader("train", True, train_batches),
        test=loader("val", False, test),
        test_y=test_labels,
        channels_last=variants.parse(experiment["variant"]).channels_last,
        mean=paddle.to_tensor(data.IMAGENET_MEAN, place=place).reshape([1, 1, 1, 3]) * 255,
        std=paddle.to_tensor(data.IMAGENET_STD, place=place).reshape([1, 1, 1, 3]) * 255,
    )


def _streamed_batches(staged, loader):
    """A loader's uint8 NHWC batches, already on the device, as normalised float32 in the network's layout (the
    copy was a quarter of float's)."""
    for images, labels in loader:
        images = (images.astype("float32") - staged.mean) / staged.std
        yield (images if staged.channels_last else images.transpose([0, 3, 1, 2])), labels


def _to_device(array, place):
    """A host batch on the training device. On a GPU through page-locked memory, so that the copy does not block
    the host and overlaps the previous step (as pytorch's twin hands batches over; a pageable copy would wait)."""
    if isinstance(place, paddle.CUDAPlace):
        return paddle.to_tensor(array, place=paddle.CUDAPinnedPlace()).cuda(blocking=False)
    return paddle.to_tensor(array, place=place)


def _batches(staged, order, batch_size):
    """(images, labels) on the training device for each batch of `order`, gathered where the data lives."""
    if staged.STREAM:
        staged.train_batches.items = order
        yield from _streamed_batches(staged, staged.train)
        return
    place = staged.place
    if staged.on_host:
        for images, labels in data.host_batches(staged.train_x, staged.train_y, order, batch_size):
            yield _to_device(images, place), _to_device(labels, place)
        return
    indices = paddle.to_tensor(order, place=place)
    for batch in data.batch_slices(len(order), batch_size):
        yield paddle.gather(staged.train_x, indices[batch]), paddle.gather(staged.train_y, indices[batch])


def _test_batches(staged, batch_size):
    if staged.STREAM:
        yield from _streamed_batches(staged, staged.test)
        return
    place = staged.place
    for start in range(0, len(staged.test_y), batch_size):
        images, labels = staged.test_x[start : start + batch_size], staged.test_y[start : start + batch_size]
        if staged.on_host:
            images, labels = _to_device(images, place), _to_device(labels, place)
        yield images, labels


class _ZeroPadShortcut(nn.Layer):
    """Option-A shortcut: subsample by the stride, zero-pad the added channels half on each side."""

    def __init__(self, stride, pad, channels_last):
        super().__init__()
        self.stride, self.pad, self.channels_last = stride, pad, channels_last

    def forward(self, x):
        step, axis = self.stride, 3 if self.channels_last else 1
        x = x[:, ::step, ::step, :] if self.channels_last else x[:, :, ::step, ::step]
        zeros = paddle.zeros_like(paddle.slice(x, [axis], [0], [self.pad]))
        return paddle.concat([zeros, x, zeros], axis=axis)


class _Residual(nn.Layer):
    def __init__(self, body, shortcut, activation):
        super().__init__()
        self.body, self.shortcut, self.activation = body, shortcut, activation

    def forward(self, x):
        out = self.body(x) + self.shortcut(x)
        return F.relu(out) if self.activation == "relu" else out


class _RowLSTM(nn.Layer):
    """An LSTM reading the image row by row; the logits come from the last step's hidden state. Paddle's gates are
    in the spec's order (input, forget, cell, output)."""

    def __init__(self, features, units, channels_last):
        super().__init__()
        # The spec has one bias vector: the second stays zero, frozen by a zero learning rate and left out of the
        # optimiser (stop_gradient would break the fused kernel's backward, which writes every weight's gradient).
        frozen = paddle.ParamAttr(learning_rate=0.0, initializer=nn.initializer.Constant(0.0))
        self.lstm = nn.LSTM(features, units, bias_hh_attr=frozen)
        self.channels_last = channels_last

    def forward(self, x):
        rows = x if self.channels_last else x.transpose([0, 2, 3, 1])  # -> (N, H, W, C), the neutral row order
        return self.lstm(paddle.flatten(rows, start_axis=2))[0][:, -1]


class _PatchEmbed(nn.Layer):
    """A conv of kernel and stride `patch`, its (h, w) grid read as tokens in row-major order."""

    def __init__(self, channels, patch, width, channels_last):
        super().__init__()
        layout = "NHWC" if channels_last else "NCHW"
        self.conv = nn.Conv2D(channels, width, patch, stride=patch, data_format=layout)
        self.channels_last = channels_last

    def forward(self, x):
        grid = self.conv(x)
        return grid.flatten(1, 2) if self.channels_last else grid.flatten(2).transpose([0, 2, 1])


class _ClassToken(nn.Layer):
    def __init__(self, width):
        super().__init__()
        self.token = self.create_parameter([width], default_initializer=nn.initializer.Constant(0.0))

    def forward(self, x):
        return paddle.concat([self.token.expand([x.shape[0], 1, -1]), x], axis=1)


class _PositionEmbedding(nn.Layer):
    def __init__(self, shape):
        super().__init__()
        self.table = self.create_parameter(list(shape), default_initializer=nn.initializer.Constant(0.0))

    def forward(self, x):
        return x + self.table


class _Attention(nn.Layer):
    """Multi-head self-attention between the fused input and the output projection: through
    paddle.nn.functional.scaled_dot_product_attention, or written out (variant -composed). The projection's columns,
    [q | k | v] each head-major, are already the function's (batch, tokens, heads, head width) layout: a reshape, no
    transpose."""

    KERNEL = "paddle.nn.functional.scaled_dot_product_attention"
    COMPOSED = "composed: matmul, softmax, matmul"

    def __init__(self, tokens, width, heads, causal, composed):
        super().__init__()
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.tokens, self.heads, self.causal, self.composed = tokens, heads, causal, composed

    def forward(self, x):
        q, k, v = self.qkv(x).reshape([0, 0, 3, self.heads, -1]).unbind(axis=2)
        attend = _composed_attention if self.composed else F.scaled_dot_product_attention
        mixed = attend(q, k, v, is_causal=self.causal)
        return self.out(mixed.flatten(2))


def _composed_attention(q, k, v, is_causal):
    """Attention as paddle.nn.MultiHeadAttention computes it: heads moved ahead of the tokens, the queries scaled by
    1/sqrt(head width) before their matmul with the keys, the causal mask added as Transformer's
    generate_square_subsequent_mask writes it (-inf above the diagonal), softmax over the last axis, the weighted sum
    of the values; in and out in scaled_dot_product_attention's (batch, tokens, heads, head width) layout."""
    q, k, v = (tensor.transpose([0, 2, 1, 3]) for tensor in (q, k, v))
    scores = paddle.matmul(q * q.shape[-1] ** -0.5, k, transpose_y=True)
    if is_causal:
        tokens = scores.shape[-1]
        scores = scores + paddle.full([tokens, tokens], -np.inf, scores.dtype).triu(1)
    return paddle.matmul(F.softmax(scores), v).transpose([0, 2, 1, 3])


class _TokenPool(nn.Layer):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        return x[:, 0] if self.kind == "class" else x.mean(axis=1)


class _TiedHead(nn.Layer):
    """The language-model head tied to the token embedding: its table, transposed (GPT-2's, nanoGPT's)."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, x):
        return paddle.matmul(x, self.embedding.weight, transpose_y=True)


def _leaf_layer(layer, in_shape, variant, built):
    """The layer of one leaf in the variant; `built` holds the leaves built so far (a tied head finds its embedding
    there)."""
    channels_last = variant.channels_last
    if isinstance(layer, specs.PatchEmbed):
        return _PatchEmbed(in_shape[-1], layer.patch, layer.width, channels_last)
    if isinstance(layer, specs.ClassToken):
        return _ClassToken(in_shape[-1])
    if isinstance(layer, specs.PositionEmbedding):
        return _PositionEmbedding(in_shape)
    if isinstance(layer, specs.TokenEmbedding):
        return nn.Embedding(layer.vocabulary, layer.width)
    if isinstance(layer, specs.LayerNorm):
        return nn.LayerNorm(in_shape[-1], epsilon=layer.epsilon)
    if isinstance(layer, specs.Attention):
        return _Attention(*in_shape, layer.heads, layer.causal, variant.composed_attention)
    if isinstance(layer, specs.TokenPool):
        return _TokenPool(layer.kind)
    if isinstance(layer, specs.LMHead):
        if layer.tied:
            return _TiedHead(next(built_layer for built_layer in built if isinstance(built_layer, nn.Embedding)))
        return nn.Linear(in_shape[-1], layer.vocabulary, bias_attr=False)
    layout = "NHWC" if channels_last else "NCHW"
    if isinstance(layer, specs.Conv):
        return nn.Conv2D(
            in_shape[-1],
            layer.filters,
            layer.kernel,
            stride=layer.stride,
            padding=layer.padding,
            bias_attr=None if layer.bias else False,
            data_format=layout,
        )
    if isinstance(layer, specs.BatchNorm):
        return nn.BatchNorm2D(in_shape[-1], momentum=layer.momentum, epsilon=layer.epsilon, data_format=layout)
    if isinstance(layer, specs.Pool):
        if layer.kind == "avg":
            return nn.AvgPool2D(layer.size, layer.step, data_format=layout)
        return nn.MaxPool2D(layer.size, layer.step, padding=layer.padding, data_format=layout)
    if isinstance(layer, specs.GlobalAvgPool):
        return nn.Sequential(nn.AdaptiveAvgPool2D(1, data_format=layout), nn.Flatten())
    if isinstance(layer, specs.Flatten):
        return nn.Flatten()
    if isinstance(layer, specs.Dropout):
        return nn.Dropout(layer.rate)
    if isinstance(layer, specs.LSTM):
        return _RowLSTM(in_shape[1] * in_shape[2], layer.units, channels_last)
    return nn.Linear(in_shape[-1], layer.units)


def _parameters_of(layer):
    """The layer's weights in the neutral order (see `_transposed` for the ones stored transposed)."""
    if isinstance(layer, nn.Linear):
        return [layer.weight] + ([layer.bias] if layer.bias is not None else [])
    if isinstance(layer, nn.LayerNorm):
        return [layer.weight, layer.bias]
    if isinstance(layer, _PatchEmbed):
        return _parameters_of(layer.conv)
    if isinstance(layer, _Attention):
        return _parameters_of(layer.qkv) + _parameters_of(layer.out)
    if isinstance(layer, (_ClassToken, _PositionEmbedding, nn.Embedding)):
        return layer.parameters()
    if isinstance(layer, nn.BatchNorm2D):
        return [layer.weight, layer.bias, layer._mean, layer._variance]
    if isinstance(layer, _RowLSTM):
        return [layer.lstm.weight_ih_l0, layer.lstm.weight_hh_l0, layer.lstm.bias_ih_l0]
    if isinstance(layer, nn.Conv2D):
        return [layer.weight] + ([layer.bias] if layer.bias is not None else [])
    return []


def _transposed(layer, index):
    """Whether neutral array `index` of this layer is stored transposed: the LSTM's kernels are (4 units, in)."""
    return index < 2 and isinstance(layer, _RowLSTM)


def _layout_weights(spec, input_shape, weights, channels_last, inverse=False):
    """Neutral weights in this network's layout (inverse: back). Paddle's kernels are OIHW in both data formats: NCHW
    also reorders the rows of a dense layer after Flatten (specs.channels_first_weights); NHWC flattens in the
    neutral (h, w, c) order, so only its kernels change."""
    if not channels_last:
        return specs.channels_first_weights(spec, input_shape, weights, inverse)
    axes = (2, 3, 1, 0) if inverse else (3, 2, 0, 1)
    return [
        [params[0].transpose(axes), *params[1:]] if isinstance(layer, (specs.Conv, specs.PatchEmbed)) else params
        for (layer, _, _), params in zip(specs.leaves(spec, input_shape), weights)
    ]


def _sequential(spec, input_shape, variant, leaves):
    """The spec as layers in the variant (its layout, its attention); each leaf appended to `leaves` (depth first,
    the neutral weights' order)."""
    layers = []
    for layer, in_shape, out_shape in specs.layer_shapes(spec, input_shape):
        if isinstance(layer, specs.Residual):
            body = _sequential(layer.body, in_shape, variant, leaves)
            if layer.shortcut == "zero_pad":
                shortcut = _ZeroPadShortcut(*specs.zero_pad_geometry(in_shape, out_shape), variant.channels_last)
            else:
                shortcut = _sequential(layer.shortcut, in_shape, variant, leaves)
            layers.append(_Residual(body, shortcut, layer.activation))
            continue
        leaves.append(_leaf_layer(layer, in_shape, variant, leaves))
        layers.append(leaves[-1])
        activation = getattr(layer, "activation", None)
        if activation:
            layers.append(nn.ReLU() if activation == "relu" else nn.GELU())  # GELU: the exact (erf) one by default
    return nn.Sequential(*layers)


def _load_weights(leaves, weights):
    for layer, params in zip(leaves, weights):
        for index, (target, value) in enumerate(zip(_parameters_of(layer), params)):
            target.set_value(np.ascontiguousarray(value.T if _transposed(layer, index) else value))


def _make_optimizer(parameters, experiment):
    # A float weight_decay is Paddle's L2Decay: the decay times the weight added to the gradient (coupled, as
    # PyTorch's weight_decay); None adds no regulariser op at all.
    name, rate, decay = experiment["optimizer"], experiment["learning_rate"], experiment["weight_decay"] or None
    epsilon = OPTIMIZER_DEFAULTS["epsilon"]
    if name == "adam":
        # Paddle adds epsilon * sqrt(1 - beta_2^t) to sqrt(v): to the bias-corrected sqrt(v_hat), as PyTorch does
        # (tests/frameworks/test_adapters.py).
        betas = {"beta1": OPTIMIZER_DEFAULTS["beta_1"], "beta2": OPTIMIZER_DEFAULTS["beta_2"]}
        return paddle.optimizer.Adam(rate, **betas, epsilon=epsilon, parameters=parameters, weight_decay=decay)
    if name == "rmsprop":  # epsilon inside the square root, as all but PyTorch
        return paddle.optimizer.RMSProp(rate, RMSPROP_RHO, epsilon, parameters=parameters, weight_decay=decay)
    return paddle.optimizer.Momentum(rate, experiment["momentum"], parameters=parameters, weight_decay=decay)


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if variant.mode not in ("eager", "graph"):
        raise ValueError(
            f"paddle adapter runs eager and graph, optionally -nhwc, -composed and -amp, not {variant.name!r}"
        )
    if variant.mixed_precision and experiment["device"] == "cpu":
        raise ValueError("paddle.amp.auto_cast runs on GPU only (on CPU it warns and runs float32): -amp runs on gpu")
    leaves = []
    network = _sequential(spec, input_shape, variant, leaves)
    _load_weights(leaves, _layout_weights(spec, input_shape, weights, variant.channels_last))
    if variant.mode == "graph":
        network = paddle.jit.to_static(network, full_graph=True)
    dtype = variants.compute_dtype(variant, experiment["device"])
    return _Model(
        network=network,
        leaves=leaves,
        optimizer=_make_optimizer(_trainable(network), experiment),
        variant=variant,
        place=_place(experiment["device"]),
        autocast_dtype=dtype,
        scaler=paddle.amp.GradScaler(enable=dtype == "float16"),
    )


def _autocast(model):
    """O1 mixed precision for -amp; nothing otherwise (auto_cast knows no float32 lists, even disabled)."""
    if not model.variant.mixed_precision:
        return contextlib.nullcontext()
    return paddle.amp.auto_cast(level="O1", dtype=model.autocast_dtype)


def _trainable(network):
    """The parameters the optimiser updates: not batch norm's statistics, not the LSTM's frozen second bias."""
    return [p for p in network.parameters() if not p.stop_gradient and p.optimize_attr["learning_rate"] > 0]


def parameter_count(model):
    return sum(int(np.prod(parameter.shape)) for parameter in _trainable(model.network))


def weights(model, spec, input_shape):
    """The current weights in the neutral layout (equivalence tests)."""
    current = []
    for layer in model.leaves:
        arrays = [tensor.numpy() for tensor in _parameters_of(layer)]
        current.append([array.T if _transposed(layer, index) else array for index, array in enumerate(arrays)])
        if isinstance(layer, _RowLSTM):  # bias_hh is frozen at zero; added all the same
            current[-1][2] = current[-1][2] + layer.lstm.bias_hh_l0.numpy()
    return _layout_weights(spec, input_shape, current, model.variant.channels_last, inverse=True)


def _to_static(network):
    """What paddle.jit.to_static did, read back: the static programs it translated (one per training and evaluation
    mode and input shape) and the backend that runs them (CINN only in a CUDA build that has it)."""
    forward = network.forward
    if not isinstance(forward, paddle.jit.dy2static.program_translator.StaticFunction):
        return None
    return {"full_graph": True, "programs": len(forward.program_cache), "backend": forward._kwargs["backend"].name}


def _attention_backend(model, attention):
    """The backend scaled_dot_product_attention's dispatcher picks for this layer's queries under the autocast, asked
    as the function asks it (Paddle reads none back): flash_attn or mem_efficient on a GPU, else math, the composed
    matmul-softmax-matmul (always on CPU)."""
    with paddle.no_grad(), _autocast(model):
        inputs = paddle.zeros([1, attention.tokens, attention.qkv.weight.shape[0]])
        query = attention.qkv(inputs).reshape([0, 0, 3, attention.heads, -1])[:, :, 0]
    if not sdpa._config:  # the function's own lazy set-up of the kernels' dtype and SM limits
        sdpa.init_config()
    shape = query.shape
    return sdpa.select_sdp_for_sdpa(
        sdpa.SDPParams(
            query_shape=shape,
            key_shape=shape,
            value_shape=shape,
            attn_mask_shape=None,
            dropout=0.0,
            is_causal=attention.causal,
            scale=None,
            query_stop_gradient=False,
            dtype=(query.dtype,) * 3,
            place=(query.place,) * 3,
        )
    )


def engaged(model):
    """What ran, read back: to_static's programs, the parameters' dtype, the dtype of the logits' matmul under the
    autocast, the layout, loss scaling; for attention models, what attention ran: the fused function and its
    backend, or the composed ops."""
    network, variant = model.network, model.variant
    dense = next(layer for layer in reversed(model.leaves) if isinstance(layer, nn.Linear))
    with paddle.no_grad(), _autocast(model):
        matmul_dtype = dense(paddle.zeros([1, dense.weight.shape[0]])).dtype
    attention = next((layer for layer in model.leaves if isinstance(layer, _Attention)), None)
    result = {
        "variant": variant.name,
        "graph": variant.mode == "graph",
        "to_static": _to_static(network),
        "dtype": str(network.parameters()[0].dtype).replace("paddle.", ""),
        "matmul_dtype": str(matmul_dtype).replace("paddle.", ""),
        "layout": "NHWC" if variant.channels_last else "NCHW",
        "loss_scaling": model.scaler.is_enable(),
    }
    if attention is not None and attention.composed:
        result["attention"] = _Attention.COMPOSED
    elif attention is not None:
        result["attention"] = f"{_Attention.KERNEL} (backend {_attention_backend(model, attention)})"
    return result


def _cross_entropy(logits, labels, reduction="mean"):
    """Over the last axis: per image, or per token of a sequence (a language model's next-token loss)."""
    return F.cross_entropy(logits.flatten(0, -2), labels.flatten(), reduction=reduction)


def _begin(model):
    model.network.train()
    return paddle.zeros([])


def _step(model, batch, total):
    """One training step; its loss added to the total on the device."""
    images, labels = batch
    with _autocast(model):
        loss = _cross_entropy(model.network(images), labels)
    model.scaler.scale(loss).backward()
    model.scaler.step(model.optimizer)
    model.scaler.update()
    model.optimizer.clear_grad(set_to_zero=False)
    total += loss.detach().astype("float32")
    return total


def _mean(model, total, steps):
    return total / steps


_LOOP = loop.Loop(begin=_begin, step=_step, mean=_mean)


def train_epoch(model, staged, order, batch_size):
    return _LOOP.epoch(model, _batches(staged, order, batch_size))


def fixed_batch_steps(model, staged, order, batch_size):
    # A one-batch epoch run to its end: a persistent Paddle loader left mid-epoch hands its rest to the next epoch.
    (first,) = _batches(staged, order[:batch_size], batch_size)
    return _LOOP.repeating(model, first)


def loader_batches(staged, order, batch_size):
    """The loader's own host batches (uint8 NHWC, labels) of `order`; None: of the evaluation split (tests)."""
    if order is not None:
        staged.train_batches.items = order
    for images, labels in staged.train if order is not None else staged.test:
        yield images.numpy(), labels.numpy()


def loader_pass(staged, order, batch_size):
    """The training batches of `order` placed on the device, the model removed (the loader's own throughput)."""
    for _ in _batches(staged, order, batch_size):
        pass


def evaluate(model, staged, batch_size):
    network = model.network
    network.eval()
    loss_sum, correct = paddle.zeros([]), paddle.zeros([], dtype="int64")
    with paddle.no_grad(), _autocast(model):
        for images, labels in _test_batches(staged, batch_size):
            logits = network(images).astype("float32")
            loss_sum += _cross_entropy(logits, labels, reduction="sum")
            correct += (logits.argmax(axis=-1) == labels).astype("int64").sum()
    count = staged.test_y.size  # images, or tokens
    return loss_sum.item() / count, correct.item() / count


def logits(model, images):
    model.network.eval()
    inputs = _laid_out(images, model.variant.channels_last)
    with paddle.no_grad(), _autocast(model):
        return model.network(paddle.to_tensor(inputs, place=model.place)).astype("float32").numpy()


def sync(device):
    if device == "gpu":
        paddle.device.synchronize()


def cuda_versions():
    if not paddle.device.is_compiled_with_cuda():
        return None, None  # paddle.version reports "False" for both
    return paddle.version.cuda(), paddle.version.cudnn()


def cpu_kernels():
    """oneDNN where the build has it, and the BLAS: MKL where paddle.version says so, else OpenBLAS."""
    parts = ["oneDNN"] if core.is_compiled_with_onednn() else []
    return ", ".join([*parts, "BLAS MKL" if paddle.version.with_mkl == "ON" else "BLAS OpenBLAS"])


def allocator_peak_mb(device):
    return paddle.device.cuda.max_memory_allocated() / 2**20 if device == "gpu" else None


def is_oom(error):
    # Paddle raises its ResourceExhausted errors (host and GPU allocators alike) as Python's MemoryError.
    return isinstance(error, MemoryError)


# Operator microbenchmarks (dlbench/ops.py): creation copies the data, as the other frameworks do.
def operators(device, dtype):
    place = _place(device)
    return {
        "from_numpy": lambda array: paddle.to_tensor(array, dtype=dtype, place=place),
        "from_list": lambda values: paddle.to_tensor(values, dtype=dtype, place=place),
        "sigmoid": F.sigmoid,
        "relu": F.relu,
        "tanh": paddle.tanh,
        "softrelu": F.softplus,
        "softsign": F.softsign,
        "dot": paddle.dot,
        "gemm": paddle.matmul,
        "flatten": lambda x: paddle.flatten(x, start_axis=1),
        "normalize": lambda x: x / paddle.linalg.norm(x, axis=1, keepdim=True),
        "copy": paddle.clone,
    }


def ops_input(array, device, dtype):
    return paddle.to_tensor(array, dtype=dtype, place=_place(device))


def ops_output(value):
    return value.astype("float32").numpy()


def ops_sync(device, value):
    sync(device)
