"""PyTorch adapter. Variants: eager, compile (torch.compile of the network, in its default mode or as
compile-reduce-overhead / compile-max-autotune), -nhwc (channels_last memory format for the weights and every batch),
-composed (attention written out instead of F.scaled_dot_product_attention), -amp (torch.autocast; GradScaler with
float16 on GPU). Layout NCHW; neutral weights converted by
specs.channels_first_weights. Data-parallel replicas: DistributedDataParallel, one process per replica started by
torchrun (parallel.launch), gloo processes sharing the cores on CPU, NCCL over the node's GPUs.
"""

import atexit
import dataclasses
import datetime
import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.parallel import DistributedDataParallel

from .. import data, mathmode, parallel, specs, variants
from . import GATHER_AND_PLACE, OPTIMIZER_DEFAULTS, RMSPROP_RHO, contract, loop

FRAMEWORK = "torch"
INPUT_WORK = GATHER_AND_PLACE
LOADER = "torch.utils.data.DataLoader (persistent worker processes, Pillow decode and crop, pinned memory on GPU)"


@dataclasses.dataclass
class _Staged(contract.StagedArrays):
    """The dataset as stage placed it: tensors on the device, or NCHW arrays on the host (on_host)."""

    device: torch.device
    on_host: bool


@dataclasses.dataclass
class _Streamed(contract.StreamedData):
    """A DataLoader per split; the training sampler is handed each epoch's items."""

    device: torch.device
    train_sampler: "_EpochSampler"
    train: torch.utils.data.DataLoader
    test: torch.utils.data.DataLoader
    test_y: np.ndarray
    mean: torch.Tensor
    std: torch.Tensor


@dataclasses.dataclass
class _Model:
    """The network as built, what trains it (the compiled or DDP-wrapped module, optimiser, scaler) and how it runs."""

    network: torch.nn.Module
    run: torch.nn.Module  # what a training step calls: the network, compiled, in DDP with replicas
    inference: torch.nn.Module  # what evaluation calls: the same without DDP
    distributed: DistributedDataParallel | None
    leaves: list  # the spec's layers in order (weights, engagement)
    optimizer: torch.optim.Optimizer
    device: torch.device
    variant: variants.Variant
    memory_format: torch.memory_format
    autocast_dtype: torch.dtype
    scaler: torch.amp.GradScaler
    compile_counters: dict  # torch.compile's counters at build, to count what it compiled since


def version():
    return torch.__version__


def _torch_device(device):
    """The process's device: on a GPU, its node's GPU LOCAL_RANK (one process per replica under torchrun; GPU 0
    otherwise)."""
    return torch.device("cuda", parallel.local_rank()) if device == "gpu" else torch.device("cpu")


def configure(device, threads, seed, math_mode, replicas):
    torch.manual_seed(seed)  # the same on every replica; DDP broadcasts rank 0's parameters anyway
    if device == "gpu" and not torch.cuda.is_available():
        raise RuntimeError("device gpu requested but torch.cuda.is_available() is False in this env")
    joined = _join_replicas(device, replicas) if parallel.through_mechanism(replicas) else {}
    return {**apply_threads(threads), "device_name": str(_torch_device(device)), **apply_math_mode(math_mode), **joined}


def _join_replicas(device, replicas):
    """This replica's process in the run's process group (gloo on CPU, NCCL on GPU), whose collectives raise after
    parallel.COLLECTIVE_TIMEOUT_S rather than wait forever for a replica that died; every replica's device, read
    back. The threads train.py hands over are already this process's share (parallel.threads_per_process)."""
    if parallel.process_count() != replicas:
        raise RuntimeError(
            f"{replicas} replicas run one process each, launched through torchrun (parallel.launch), but this run "
            f"has {parallel.process_count()} process(es) (torchrun's WORLD_SIZE)"
        )
    target = _torch_device(device)
    if device == "gpu":
        if target.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"{replicas} replicas: the process of local rank {target.index} needs GPU {target.index}, but torch "
                f"sees {torch.cuda.device_count()} GPU(s)"
            )
        torch.cuda.set_device(target)
    torch.distributed.init_process_group(
        "nccl" if device == "gpu" else "gloo",
        timeout=datetime.timedelta(seconds=parallel.COLLECTIVE_TIMEOUT_S),
        device_id=target if device == "gpu" else None,
    )
    atexit.register(torch.distributed.destroy_process_group)  # else torch warns of a group left open at exit
    reported = f"cuda:{torch.cuda.current_device()}" if device == "gpu" else str(target)
    devices = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(devices, reported)
    return {"replicas": torch.distributed.get_world_size(), "replica_devices": devices}


def replica_max(value):
    """The largest of a host float over the replicas' processes (all-reduce MAX, on the device NCCL reduces on);
    the value itself in a one-process run."""
    if not torch.distributed.is_initialized():
        return value
    on_gpu = torch.distributed.get_backend() == "nccl"
    largest = torch.tensor(value, dtype=torch.float64, device="cuda" if on_gpu else "cpu")
    torch.distributed.all_reduce(largest, op=torch.distributed.ReduceOp.MAX)
    return largest.item()


def apply_threads(threads):
    """Pinned intra-op threads, or PyTorch's default (its physical cores); read back (also Keras on torch: shared,
    contract.KerasBackend)."""
    if threads is not None:
        torch.set_num_threads(threads)
    return {"intra_op_threads": torch.get_num_threads()}


def apply_math_mode(math_mode):
    """PyTorch's TF32 (matmul and cuDNN) and cudnn.benchmark switches, set and read back (also Keras on torch:
    shared, contract.KerasBackend)."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = math_mode["tf32"]
    torch.backends.cudnn.benchmark = math_mode["autotune"]
    tf32 = torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    return {"tf32": mathmode.tf32_engaged(tf32), "conv_autotune": torch.backends.cudnn.benchmark}


def _memory_format(variant):
    return torch.channels_last if variant.channels_last else torch.contiguous_format


def _channels_first(inputs):
    """NHWC images as NCHW, token ids (N, tokens) as int64. A real copy: for one channel, ascontiguousarray keeps the
    transposed strides, (N, 1, H, W) with a channel stride of 1, and oneDNN then silently runs the convolutions
    channels-last."""
    return inputs.transpose(0, 3, 1, 2).copy() if inputs.ndim == 4 else inputs.astype(np.int64)


def stage(arrays, experiment):
    """Device placement: the dataset as tensors on the training device. Host placement: NumPy arrays, already
    NCHW, from which every step's batch is gathered and copied (see _batches)."""
    target, variant = _torch_device(experiment["device"]), variants.parse(experiment["variant"])

    def images(key):
        inputs = _channels_first(arrays[key])
        if experiment["data_placement"] == "host":
            return inputs
        return torch.from_numpy(inputs).contiguous(memory_format=_memory_format(variant)).to(target)

    def labels(key):
        int64 = arrays[key].astype(np.int64)
        return int64 if experiment["data_placement"] == "host" else torch.from_numpy(int64).to(target)

    return _Staged(
        train_x=images("train_x"),
        train_y=labels("train_y"),
        test_x=images("test_x"),
        test_y=labels("test_y"),
        device=target,
        on_host=experiment["data_placement"] == "host",
    )


class _ImageFolderStream(torch.utils.data.Dataset):
    """A streamed split, decoded and transformed in the DataLoader's workers with Pillow, as torchvision's
    ImageFolder and transforms do. Items are rows of data.stream_order (training: crop box and flip) or
    data.eval_order (evaluation: resized size and crop corner)."""

    def __init__(self, files, labels, size, train):
        self.files, self.labels, self.size, self.train = files, labels, size, train

    def __len__(self):
        return len(self.files)

    def __getitem__(self, item):
        image = data.pillow_crop(self.files[item[0]], item, self.size, self.train)
        return torch.from_numpy(image), int(self.labels[item[0]])


class _EpochSampler(torch.utils.data.Sampler):
    """Hands an epoch's items to the persistent workers: set before each epoch, as DistributedSampler.set_epoch is."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items.tolist())

    def __len__(self):
        return len(self.items)


def stream(meta, experiment, workers):
    """Data placement stream: a DataLoader per split over the image folder, `workers` persistent worker processes,
    pinned memory on a GPU; uint8 NHWC batches, made float, normalised and laid out on the device. With replicas,
    each process's training loader loads its replica's share of every batch, and evaluation one replica's batches."""
    target, size = _torch_device(experiment["device"]), meta["shape"][0]

    def loader(split, train, sampler, batch_size, **options):
        files, labels, _ = data.stream_files(meta, split)
        return torch.utils.data.DataLoader(
            _ImageFolderStream(files, labels, size, train),
            batch_size,
            sampler=sampler,
            num_workers=workers,
            pin_memory=target.type == "cuda",
            persistent_workers=True,
            timeout=data.LOADER_TIMEOUT_S,
            **options,
        )

    train_sampler = _EpochSampler(np.empty(0, dtype=data.TRAIN_ITEM))
    _, test_labels, test_sizes = data.stream_files(meta, "val")
    return _Streamed(
        device=target,
        train_sampler=train_sampler,
        train=loader("train", True, train_sampler, parallel.replica_batch_size(experiment), drop_last=True),
        test=loader(
            "val", False, _EpochSampler(data.eval_order(test_sizes, size)), parallel.replica_batch_size(experiment)
        ),
        test_y=test_labels,
        mean=torch.tensor(data.IMAGENET_MEAN, device=target).view(1, 3, 1, 1) * 255,
        std=torch.tensor(data.IMAGENET_STD, device=target).view(1, 3, 1, 1) * 255,
    )


def _streamed_batches(staged, loader, layout):
    """A loader's uint8 NHWC batches on the device as normalised float NCHW (the copy is a quarter of float's)."""
    for images, labels in loader:
        images = images.to(staged.device, non_blocking=True).permute(0, 3, 1, 2).float()
        images = ((images - staged.mean) / staged.std).contiguous(memory_format=layout)
        yield images, labels.to(staged.device, non_blocking=True)


def _to_device(array, device):
    """A host batch on the training device as DataLoader(pin_memory=True) hands it over on a GPU: copied into
    page-locked memory, so the copy to the device is asynchronous (non_blocking) and overlaps the previous step.
    PyTorch's pinned-memory cache keeps the block until the copy has run."""
    tensor = torch.from_numpy(array)
    if device.type != "cuda":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


def _batches(staged, order, batch_size, layout):
    """(images, labels) on the training device for each batch of `order`, gathered where the data lives; with
    replicas, this process's replica's share of each."""
    order, batch_size = parallel.process_share(order, batch_size)
    if staged.STREAM:
        staged.train_sampler.items = order
        yield from _streamed_batches(staged, staged.train, layout)
        return
    if staged.on_host:
        for images, labels in data.host_batches(staged.train_x, staged.train_y, order, batch_size):
            yield (
                _to_device(images, staged.device).contiguous(memory_format=layout),
                _to_device(labels, staged.device),
            )
        return
    indices = torch.from_numpy(order).to(staged.device)
    for batch in data.batch_slices(len(order), batch_size):
        yield staged.train_x[indices[batch]].contiguous(memory_format=layout), staged.train_y[indices[batch]]


def _test_batches(staged, batch_size, layout):
    if staged.STREAM:
        yield from _streamed_batches(staged, staged.test, layout)
        return
    for start in range(0, len(staged.test_y), batch_size):
        images, labels = staged.test_x[start : start + batch_size], staged.test_y[start : start + batch_size]
        if staged.on_host:
            images, labels = _to_device(images, staged.device), _to_device(labels, staged.device)
        yield images.contiguous(memory_format=layout), labels


class _ZeroPadShortcut(torch.nn.Module):
    """Option-A shortcut: subsample by the stride, zero-pad the added channels half on each side."""

    def __init__(self, stride, pad):
        super().__init__()
        self.stride, self.pad = stride, pad

    def forward(self, x):
        return F.pad(x[:, :, :: self.stride, :: self.stride], (0, 0, 0, 0, self.pad, self.pad))


class _Residual(torch.nn.Module):
    def __init__(self, body, shortcut, activation):
        super().__init__()
        self.body, self.shortcut, self.activation = body, shortcut, activation

    def forward(self, x):
        out = self.body(x) + self.shortcut(x)
        return F.relu(out) if self.activation == "relu" else out


class _RowLSTM(torch.nn.Module):
    """An LSTM reading the image row by row; the logits come from the last step's hidden state."""

    def __init__(self, features, units):
        super().__init__()
        self.lstm = torch.nn.LSTM(features, units, batch_first=True)
        self.lstm.bias_hh_l0.requires_grad_(False)  # the spec has one bias vector: the second stays zero

    def forward(self, x):
        rows = x.permute(0, 2, 3, 1).flatten(2)  # (N, C, H, W) -> (N, H, W*C), the neutral row order
        return self.lstm(rows)[0][:, -1]


class _PatchEmbed(torch.nn.Module):
    """A conv of kernel and stride `patch`, its (h, w) grid read as tokens in row-major order."""

    def __init__(self, channels, patch, width):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, width, patch, stride=patch)

    def forward(self, x):
        return self.conv(x).flatten(2).transpose(1, 2)


class _ClassToken(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.token = torch.nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return torch.cat([self.token.expand(len(x), 1, -1), x], dim=1)


class _PositionEmbedding(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.table = torch.nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        return x + self.table


class _Attention(torch.nn.Module):
    """Multi-head self-attention between the fused input and the output projection: through PyTorch's fused kernel,
    F.scaled_dot_product_attention (flash or memory-efficient attention where the device has them), or written out
    (variant -composed) as nanoGPT writes it without flash attention."""

    KERNELS = {False: "torch.nn.functional.scaled_dot_product_attention", True: "composed: matmul, softmax, matmul"}

    def __init__(self, width, heads, causal, composed):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.heads, self.causal, self.composed = heads, causal, composed

    def forward(self, x):
        n, tokens, width = x.shape
        q, k, v = self.qkv(x).view(n, tokens, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attend = _composed_attention if self.composed else F.scaled_dot_product_attention
        mixed = attend(q, k, v, is_causal=self.causal)
        return self.out(mixed.transpose(1, 2).reshape(n, tokens, width))


def _composed_attention(q, k, v, is_causal):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        later = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(later, float("-inf"))
    return F.softmax(scores, dim=-1) @ v


class _TokenPool(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        return x[:, 0] if self.kind == "class" else x.mean(dim=1)


class _TiedHead(torch.nn.Module):
    """The language-model head tied to the token embedding: its table, transposed (GPT-2's, nanoGPT's)."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, x):
        return F.linear(x, self.embedding.weight)


def _leaf_module(layer, in_shape, variant, built):
    """The module of one leaf in the variant; `built` holds the leaves built so far (a tied head finds its embedding
    there)."""
    if isinstance(layer, specs.PatchEmbed):
        return _PatchEmbed(in_shape[-1], layer.patch, layer.width)
    if isinstance(layer, specs.ClassToken):
        return _ClassToken(in_shape[-1])
    if isinstance(layer, specs.PositionEmbedding):
        return _PositionEmbedding(in_shape)
    if isinstance(layer, specs.TokenEmbedding):
        return torch.nn.Embedding(layer.vocabulary, layer.width)
    if isinstance(layer, specs.LayerNorm):
        return torch.nn.LayerNorm(in_shape[-1], eps=layer.epsilon)
    if isinstance(layer, specs.Attention):
        return _Attention(in_shape[-1], layer.heads, layer.causal, variant.composed_attention)
    if isinstance(layer, specs.TokenPool):
        return _TokenPool(layer.kind)
    if isinstance(layer, specs.LMHead):
        if layer.tied:
            return _TiedHead(next(module for module in built if isinstance(module, torch.nn.Embedding)))
        return torch.nn.Linear(in_shape[-1], layer.vocabulary, bias=False)
    if isinstance(layer, specs.Conv):
        return torch.nn.Conv2d(
            in_shape[-1], layer.filters, layer.kernel, stride=layer.stride, padding=layer.padding, bias=layer.bias
        )
    if isinstance(layer, specs.BatchNorm):
        # -syncbn: SyncBatchNorm, which all-reduces the batch statistics over the process group (CUDA tensors only).
        batch_norm = torch.nn.SyncBatchNorm if variant.sync_batch_norm else torch.nn.BatchNorm2d
        # PyTorch's momentum weighs the new batch: 1 - the spec's decay.
        return batch_norm(in_shape[-1], eps=layer.epsilon, momentum=1 - layer.momentum)
    if isinstance(layer, specs.Pool):
        if layer.kind == "avg":
            return torch.nn.AvgPool2d(layer.size, layer.step)
        return torch.nn.MaxPool2d(layer.size, layer.step, padding=layer.padding)
    if isinstance(layer, specs.GlobalAvgPool):
        return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    if isinstance(layer, specs.Flatten):
        return torch.nn.Flatten()
    if isinstance(layer, specs.Dropout):
        return torch.nn.Dropout(layer.rate)
    if isinstance(layer, specs.LSTM):
        return _RowLSTM(in_shape[1] * in_shape[2], layer.units)
    return torch.nn.Linear(in_shape[-1], layer.units)


def _parameters_of(module):
    """The module's weights in the neutral order (channels-first layout), as tensors."""
    if isinstance(module, torch.nn.Linear):
        return [module.weight.T] + ([module.bias] if module.bias is not None else [])
    if isinstance(module, (torch.nn.LayerNorm, _PatchEmbed)):
        return _parameters_of(module.conv) if isinstance(module, _PatchEmbed) else [module.weight, module.bias]
    if isinstance(module, _Attention):
        return _parameters_of(module.qkv) + _parameters_of(module.out)
    if isinstance(module, (_ClassToken, _PositionEmbedding, torch.nn.Embedding)):
        return list(module.parameters())
    if isinstance(module, _BatchNorm):  # BatchNorm2d, SyncBatchNorm
        return [module.weight, module.bias, module.running_mean, module.running_var]
    if isinstance(module, _RowLSTM):
        lstm = module.lstm
        return [lstm.weight_ih_l0.T, lstm.weight_hh_l0.T, lstm.bias_ih_l0 + lstm.bias_hh_l0]
    if isinstance(module, torch.nn.Conv2d):
        return [module.weight] + ([module.bias] if module.bias is not None else [])
    return []


def _load_weights(module, params):
    targets = _parameters_of(module)
    if isinstance(module, _RowLSTM):  # the neutral bias goes to bias_ih; bias_hh stays zero
        module.lstm.bias_hh_l0.data.zero_()
        targets[-1] = module.lstm.bias_ih_l0
    with torch.no_grad():
        for target, value in zip(targets, params):
            target.copy_(torch.from_numpy(np.ascontiguousarray(value)))  # a transposed view writes through


def _sequential(spec, input_shape, weights, leaves, variant):
    """The spec as modules in the variant (its batch norm, its attention); weights (an iterator, depth first) are
    loaded and each leaf appended to `leaves`."""
    modules = []
    for layer, in_shape, out_shape in specs.layer_shapes(spec, input_shape):
        if isinstance(layer, specs.Residual):
            body = _sequential(layer.body, in_shape, weights, leaves, variant)
            if layer.shortcut == "zero_pad":
                shortcut = _ZeroPadShortcut(*specs.zero_pad_geometry(in_shape, out_shape))
            else:
                shortcut = _sequential(layer.shortcut, in_shape, weights, leaves, variant)
            modules.append(_Residual(body, shortcut, layer.activation))
            continue
        module = _leaf_module(layer, in_shape, variant, leaves)
        _load_weights(module, next(weights))
        leaves.append(module)
        modules.append(module)
        activation = getattr(layer, "activation", None)
        if activation:
            modules.append(torch.nn.ReLU() if activation == "relu" else torch.nn.GELU())
    return torch.nn.Sequential(*modules)


def _make_optimizer(parameters, experiment):
    name, rate, decay = experiment["optimizer"], experiment["learning_rate"], experiment["weight_decay"]
    if name == "adam":
        betas = (OPTIMIZER_DEFAULTS["beta_1"], OPTIMIZER_DEFAULTS["beta_2"])
        return torch.optim.Adam(parameters, lr=rate, betas=betas, eps=OPTIMIZER_DEFAULTS["epsilon"], weight_decay=decay)
    if name == "rmsprop":
        # PyTorch adds epsilon outside the square root, the others inside (tests/frameworks/test_adapters.py).
        return torch.optim.RMSprop(
            parameters, lr=rate, alpha=RMSPROP_RHO, eps=OPTIMIZER_DEFAULTS["epsilon"], weight_decay=decay
        )
    return torch.optim.SGD(parameters, lr=rate, momentum=experiment["momentum"], weight_decay=decay)


def build(spec, input_shape, weights, experiment):
    variant = variants.parse(experiment["variant"])
    if variant.mode not in ("eager", "compile"):
        raise ValueError(f"torch adapter runs modes eager and compile, not {variant.mode!r}")
    target = _torch_device(experiment["device"])
    leaves = []
    converted = iter(specs.channels_first_weights(spec, input_shape, weights))
    network = _sequential(spec, input_shape, converted, leaves, variant)
    network = network.to(target, memory_format=_memory_format(variant))
    dtype = getattr(torch, variants.compute_dtype(variant, experiment["device"]))
    trainable = [parameter for parameter in network.parameters() if parameter.requires_grad]
    run = torch.compile(network, mode=variant.compile_mode) if variant.mode == "compile" else network
    # Replicas: DDP wraps the (compiled) network and all-reduces the gradients in backward, bucket by bucket; Dynamo
    # compiles the network inside DDP's forward, where DDPOptimizer splits the graph at DDP's buckets so that the
    # all-reduces overlap backward. (torch.compile of the DDP module instead, as PyTorch's notes write it, runs this
    # network eagerly: Dynamo skips the frame of torch's own nn.Sequential that DDP calls.) Evaluation runs the
    # network without DDP: no collectives, every process the whole test set.
    distributed = _distributed(run, target) if parallel.through_mechanism(parallel.replicas(experiment)) else None
    return _Model(
        network=network,
        run=run if distributed is None else distributed,
        inference=run,
        distributed=distributed,
        leaves=leaves,
        optimizer=_make_optimizer(trainable, experiment),
        device=target,
        variant=variant,
        memory_format=_memory_format(variant),
        autocast_dtype=dtype,
        scaler=torch.amp.GradScaler("cuda", enabled=dtype == torch.float16),
        compile_counters=compile_counters(),
    )


def _distributed(network, target):
    """The network in DistributedDataParallel (which starts every replica from rank 0's parameters and buffers), on
    this process's GPU or on the CPU."""
    return DistributedDataParallel(network, device_ids=[target] if target.type == "cuda" else None)


def _autocast(model):
    variant = model.variant
    return torch.autocast(model.device.type, dtype=model.autocast_dtype, enabled=variant.mixed_precision)


def parameter_count(model):
    return sum(parameter.numel() for parameter in model.network.parameters() if parameter.requires_grad)


def weights(model, spec, input_shape):
    """The current weights in the neutral layout (equivalence tests)."""
    current = [[tensor.detach().float().cpu().numpy() for tensor in _parameters_of(module)] for module in model.leaves]
    return specs.channels_first_weights(spec, input_shape, current, inverse=True)


def engaged(model):
    """What ran, read back: compile graphs and graph breaks, the dtype of the logits' matmul, the weights' layout."""
    network, variant = model.network, model.variant
    first = next(network.parameters())
    kernels = [parameter for parameter in network.parameters() if parameter.dim() == 4]
    # A kernel with one input channel is contiguous in both formats: only a strictly channels-last one tells.
    strictly_channels_last = any(
        kernel.is_contiguous(memory_format=torch.channels_last) and not kernel.is_contiguous() for kernel in kernels
    )
    layout = "NHWC" if strictly_channels_last else "NCHW"
    dense = next(module for module in reversed(model.leaves) if isinstance(module, torch.nn.Linear))
    with torch.no_grad(), _autocast(model):
        matmul_dtype = dense(torch.zeros((1, dense.in_features), device=model.device)).dtype
    result = {
        "variant": variant.name,
        "graph": variant.mode == "compile",
        "torch_compile": variant.mode == "compile",
        "dtype": str(first.dtype).replace("torch.", ""),
        "matmul_dtype": str(matmul_dtype).replace("torch.", ""),
        "layout": layout,
        "loss_scaling": model.scaler.is_enabled(),
    }
    if variant.mode == "compile":
        result.update(compile_engagement(variant.compile_mode, model.compile_counters))
    if any(isinstance(module, _Attention) for module in model.leaves):
        result["attention"] = _Attention.KERNELS[variant.composed_attention]
    if model.distributed is not None:
        result.update(_data_parallel(model.distributed, model.network))
    return result


def _data_parallel(distributed, network):
    """How DDP reduced the gradients, from its own logging data (with no communication hook registered, its
    built-in all-reduce sums the gradients and divides them by the world size), and the network's batch norm."""
    logged = distributed._get_ddp_logging_data()
    average = f"mean (all-reduce of the gradient sums divided by the world size, {logged['world_size']})"
    synchronised = any(isinstance(module, torch.nn.SyncBatchNorm) for module in network.modules())
    return {
        "data_parallel": type(distributed).__name__,
        "gradient_reduction": logged.get("comm_hook") or average,
        "collective": torch.distributed.get_backend(),
        "batch_norm_statistics": (
            "global batch: SyncBatchNorm all-reduces them"
            if synchronised
            else "per replica: each process normalises its slice"
        ),
    }


def compile_counters():
    """torch.compile's process-wide counters now: graphs compiled, graph breaks, CUDA graph skips (also Keras on
    torch: shared, contract.TorchBackend)."""
    from torch._dynamo.utils import counters

    return {
        "compiled_graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"]),
    }


def compile_engagement(mode, before):
    """What torch.compile did since the counters `before` (taken at build): the mode, graphs compiled (none: Dynamo
    gave up and ran eagerly, e.g. at its recompile limit), graph breaks and, where the mode asks for CUDA graphs,
    whether they ran: Inductor skips them, counting each skip, for CPU tensors or what they cannot capture (also
    Keras on torch: shared, contract.TorchBackend)."""
    import torch._inductor

    since = {name: count - before[name] for name, count in compile_counters().items()}
    result = {"compile_mode": mode, "compiled_graphs": since["compiled_graphs"], "graph_breaks": since["graph_breaks"]}
    if torch._inductor.list_mode_options(mode).get("triton.cudagraphs"):
        result["cudagraph_skips"] = since["cudagraph_skips"]
        result["cuda_graphs"] = since["compiled_graphs"] > 0 and since["cudagraph_skips"] == 0
    return result


def _cross_entropy(logits, labels, reduction="mean"):
    """Over the last axis: per image, or per token of a sequence (a language model's next-token loss)."""
    return F.cross_entropy(logits.flatten(0, -2), labels.flatten(), reduction=reduction)


def _begin(model):
    model.network.train()
    return torch.zeros((), device=model.device)


def _step(model, batch, total):
    """One training step; its loss added to the total on the device."""
    images, labels = batch
    model.optimizer.zero_grad(set_to_none=True)
    with _autocast(model):
        loss = _cross_entropy(model.run(images), labels)
    model.scaler.scale(loss).backward()
    model.scaler.step(model.optimizer)
    model.scaler.update()
    total += loss.detach().float()
    return total


def _mean(model, total, steps):
    mean = total / steps
    if model.distributed is not None:  # the global batches' mean: every replica's slice is the same size
        torch.distributed.all_reduce(mean)
        mean /= torch.distributed.get_world_size()
    return mean


_LOOP = loop.Loop(begin=_begin, step=_step, mean=_mean)


def train_epoch(model, staged, order, batch_size):
    return _LOOP.epoch(model, _batches(staged, order, batch_size, model.memory_format))


def fixed_batch_steps(model, staged, order, batch_size):
    return _LOOP.repeating(model, next(_batches(staged, order, batch_size, model.memory_format)))


def unreduced_steps(model, staged, order, batch_size):
    """fixed_batch_steps' steps inside DDP's no_sync, which leaves out the gradients' all-reduce (PyTorch's way to
    accumulate gradients locally): what a step costs without its communication."""
    steps = fixed_batch_steps(model, staged, order, batch_size)

    def unreduced(count):
        with model.distributed.no_sync():
            return steps(count)

    return unreduced


def loader_batches(staged, order, batch_size):
    """The loader's own host batches (uint8 NHWC, labels) of `order`; None: of the evaluation split (tests)."""
    if order is not None:
        staged.train_sampler.items = order
    for images, labels in staged.train if order is not None else staged.test:
        yield images.numpy(), labels.numpy()


def loader_pass(staged, order, batch_size):
    """The training batches of `order` placed on the device, the model removed (the loader's own throughput)."""
    for _ in _batches(staged, order, batch_size, torch.contiguous_format):
        pass


def evaluate(model, staged, batch_size):
    run = model.inference
    model.network.eval()
    loss_sum = torch.zeros((), device=model.device)
    correct = torch.zeros((), dtype=torch.int64, device=model.device)
    with torch.no_grad(), _autocast(model):
        for images, labels in _test_batches(staged, batch_size, model.memory_format):
            logits = run(images).float()
            loss_sum += _cross_entropy(logits, labels, reduction="sum")
            correct += (logits.argmax(dim=-1) == labels).sum()
    count = staged.test_y.numel() if torch.is_tensor(staged.test_y) else staged.test_y.size
    return loss_sum.item() / count, correct.item() / count


def logits(model, images):
    model.network.eval()
    with torch.no_grad(), _autocast(model):
        inputs = torch.from_numpy(_channels_first(images)).to(model.device)
        return model.inference(inputs.contiguous(memory_format=model.memory_format)).float().cpu().numpy()


def sync(device):
    if device == "gpu":
        torch.cuda.synchronize()


def cuda_versions():
    cudnn = torch.backends.cudnn.version()
    return torch.version.cuda, str(cudnn) if cudnn else None


# The BLAS PyTorch's build information names (BLAS_INFO), in words.
_BLAS_NAMES = {"mkl": "MKL", "open": "OpenBLAS", "accelerate": "Accelerate", "flexi": "FlexiBLAS"}


def cpu_kernels():
    """The CPU kernel libraries of the build, as torch.__config__ names them: oneDNN (convolutions, matmuls where
    PyTorch takes it) with its version, and the BLAS (shared, contract.TorchBackend)."""
    build = torch.__config__.show()
    onednn = re.search(r"(?:MKL-DNN|oneDNN) v([\d.]+)", build)
    blas = re.search(r"BLAS_INFO=(\w+)", build)
    parts = [f"oneDNN {onednn.group(1)}" if onednn else "oneDNN"] if torch.backends.mkldnn.is_available() else []
    parts += [f"BLAS {_BLAS_NAMES.get(blas.group(1), blas.group(1))}"] if blas else []
    return ", ".join(parts) or None


def allocator_peak_mb(device):
    return torch.cuda.max_memory_allocated() / 2**20 if device == "gpu" else None


def is_oom(error):
    # CUDA raises OutOfMemoryError; the CPU allocator a RuntimeError naming the failed allocation.
    return isinstance(error, torch.cuda.OutOfMemoryError) or "can't allocate memory" in str(error)


# Operator microbenchmarks (dlbench/ops.py): creation copies the data, as the other frameworks do.
def operators(device, dtype):
    target, kind = _torch_device(device), getattr(torch, dtype)
    return {
        "from_numpy": lambda array: torch.tensor(array, dtype=kind, device=target),
        "from_list": lambda values: torch.tensor(values, dtype=kind, device=target),
        "sigmoid": torch.sigmoid,
        "relu": torch.relu,
        "tanh": torch.tanh,
        "softrelu": F.softplus,
        "softsign": F.softsign,
        "dot": torch.dot,
        "gemm": torch.mm,
        "flatten": lambda x: torch.flatten(x, 1),
        "normalize": lambda x: x / torch.linalg.vector_norm(x, dim=1, keepdim=True),
        "copy": torch.clone,
    }


def ops_input(array, device, dtype):
    return torch.tensor(array, dtype=getattr(torch, dtype), device=_torch_device(device))


def ops_output(value):
    return value.detach().float().cpu().numpy()


def ops_sync(device, value):
    sync(device)
