"""PyTorch adapter (eager). Layout NCHW; neutral weights converted by specs.channels_first_weights."""

import numpy as np
import torch
import torch.nn.functional as F

from .. import specs
from . import OPTIMIZER_DEFAULTS

FRAMEWORK = "torch"


def version():
    return torch.__version__


def torch_device(device):
    return torch.device("cuda:0" if device == "gpu" else "cpu")


def configure(device, threads, seed):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    if device == "gpu" and not torch.cuda.is_available():
        raise RuntimeError("device gpu requested but torch.cuda.is_available() is False in this env")
    return {"intra_op_threads": torch.get_num_threads(), "device_name": str(torch_device(device))}


def stage(arrays, device):
    target = torch_device(device)

    def images(key):
        # A real copy: for one channel, ascontiguousarray keeps the transposed strides, (N, 1, H, W) with a
        # channel stride of 1, and oneDNN then silently runs the convolutions channels-last.
        return torch.from_numpy(arrays[key].transpose(0, 3, 1, 2).copy()).to(target)

    def labels(key):
        return torch.from_numpy(arrays[key].astype(np.int64)).to(target)

    return {"train_x": images("train_x"), "train_y": labels("train_y"), "test_x": images("test_x"),
            "test_y": labels("test_y"), "device": target}  # fmt: skip


def layer_module(layer, in_shape):
    if isinstance(layer, specs.Conv):
        return torch.nn.Conv2d(in_shape[-1], layer.filters, layer.kernel, stride=layer.stride)
    if isinstance(layer, specs.Pool):
        pool = torch.nn.AvgPool2d if layer.kind == "avg" else torch.nn.MaxPool2d
        return pool(layer.size)
    if isinstance(layer, specs.Flatten):
        return torch.nn.Flatten()
    return torch.nn.Linear(in_shape[0], layer.units)


def load_weights(module, params):
    if not params:
        return
    kernel, bias = params
    if isinstance(module, torch.nn.Linear):
        kernel = kernel.T
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel)))
        module.bias.copy_(torch.from_numpy(bias))


def make_optimizer(parameters, experiment):
    name, rate = experiment["optimizer"], experiment["learning_rate"]
    if name == "adam":
        betas = (OPTIMIZER_DEFAULTS["beta_1"], OPTIMIZER_DEFAULTS["beta_2"])
        return torch.optim.Adam(parameters, lr=rate, betas=betas, eps=OPTIMIZER_DEFAULTS["epsilon"])
    return torch.optim.SGD(parameters, lr=rate, momentum=experiment["momentum"])


def build(spec, input_shape, weights, experiment):
    if experiment["variant"] != "eager":
        raise ValueError(f"torch adapter runs variant 'eager' only, not {experiment['variant']!r}")
    layers = []
    converted = specs.channels_first_weights(spec, input_shape, weights)
    for (layer, in_shape, _), params in zip(specs.layer_shapes(spec, input_shape), converted):
        module = layer_module(layer, in_shape)
        load_weights(module, params)
        layers.append(module)
        if getattr(layer, "activation", None) == "relu":
            layers.append(torch.nn.ReLU())
    target = torch_device(experiment["device"])
    network = torch.nn.Sequential(*layers).to(target)
    return {"network": network, "optimizer": make_optimizer(network.parameters(), experiment), "device": target}


def parameter_count(model):
    return sum(parameter.numel() for parameter in model["network"].parameters())


def engaged(model):
    first = next(model["network"].parameters())
    return {"variant": "eager", "graph": False, "dtype": str(first.dtype).replace("torch.", ""), "layout": "NCHW"}


def train_epoch(model, staged, order, batch_size):
    network, optimizer = model["network"], model["optimizer"]
    network.train()
    indices = torch.from_numpy(order).to(staged["device"])
    total = torch.zeros((), device=staged["device"])
    steps = len(order) // batch_size
    for step in range(steps):
        batch = indices[step * batch_size : (step + 1) * batch_size]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(network(staged["train_x"][batch]), staged["train_y"][batch])
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / steps


def evaluate(model, staged, batch_size):
    network = model["network"]
    network.eval()
    loss_sum = torch.zeros((), device=staged["device"])
    correct = torch.zeros((), dtype=torch.int64, device=staged["device"])
    with torch.no_grad():
        for start in range(0, len(staged["test_y"]), batch_size):
            images, labels = staged["test_x"][start : start + batch_size], staged["test_y"][start : start + batch_size]
            logits = network(images)
            loss_sum += F.cross_entropy(logits, labels, reduction="sum")
            correct += (logits.argmax(dim=1) == labels).sum()
    count = len(staged["test_y"])
    return loss_sum.item() / count, correct.item() / count


def logits(model, images):
    model["network"].eval()
    with torch.no_grad():
        inputs = torch.from_numpy(images.transpose(0, 3, 1, 2).copy()).to(model["device"])
        return model["network"](inputs).cpu().numpy()


def sync(device):
    if device == "gpu":
        torch.cuda.synchronize()


def allocator_peak_mb(device):
    return torch.cuda.max_memory_allocated() / 2**20 if device == "gpu" else None


def is_oom(error):
    # CUDA raises OutOfMemoryError; the CPU allocator a RuntimeError naming the failed allocation.
    return isinstance(error, torch.cuda.OutOfMemoryError) or "can't allocate memory" in str(error)


# Operator microbenchmarks (dlbench/ops.py): creation copies the data, as the other frameworks do.
def operators(device, dtype):
    target, kind = torch_device(device), getattr(torch, dtype)
    return {
        "from_numpy": lambda array: torch.tensor(array, dtype=kind, device=target),
        "from_list": lambda values: torch.tensor(values, dtype=kind, device=target),
        "sigmoid": torch.sigmoid, "relu": torch.relu, "tanh": torch.tanh, "softrelu": F.softplus,
        "softsign": F.softsign, "dot": torch.dot, "gemm": torch.mm, "flatten": lambda x: torch.flatten(x, 1),
        "normalize": lambda x: x / torch.linalg.vector_norm(x, dim=1, keepdim=True), "copy": torch.clone,
    }  # fmt: skip


def ops_input(array, device, dtype):
    return torch.tensor(array, dtype=getattr(torch, dtype), device=torch_device(device))


def ops_output(value):
    return value.detach().float().cpu().numpy()


def ops_sync(device, value):
    sync(device)
