"""Framework-neutral model specs: every model is declared once here and built by each adapter.

Conventions of the neutral layout (what `initial_weights` produces and adapters convert from):
images are NHWC, conv kernels HWIO (kh, kw, in, out), dense kernels (in, out), and Flatten reads an
(h, w, c) feature map in h, w, c order. Pure Python + NumPy only: the driver imports it too.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Conv:
    filters: int
    kernel: int
    activation: str | None = None
    stride: int = 1


@dataclass(frozen=True)
class Pool:
    kind: str  # "avg" | "max"
    size: int


@dataclass(frozen=True)
class Flatten:
    pass


@dataclass(frozen=True)
class Dense:
    units: int
    activation: str | None = None


MODELS = {
    "mlp": lambda classes: [Flatten(), Dense(128, "relu"), Dense(classes)],
    "cnn": lambda classes: [Conv(64, 3, "relu"), Conv(32, 3, "relu"), Flatten(), Dense(classes)],
    "lenet": lambda classes: [
        Conv(6, 5, "relu"),
        Pool("avg", 2),
        Conv(16, 3, "relu"),
        Pool("avg", 2),
        Flatten(),
        Dense(120, "relu"),
        Dense(84, "relu"),
        Dense(classes),
    ],
}


def model_spec(name, num_classes):
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    return MODELS[name](num_classes)


def conv_output_size(size, kernel, stride):
    return (size - kernel) // stride + 1


def layer_shapes(spec, input_shape):
    """[(layer, input shape, output shape)] with shapes as (h, w, c) or (features,)."""
    shapes, shape = [], tuple(input_shape)
    for layer in spec:
        if isinstance(layer, Conv):
            h, w, _ = shape
            out = (conv_output_size(h, layer.kernel, layer.stride), conv_output_size(w, layer.kernel, layer.stride))
            out_shape = (*out, layer.filters)
        elif isinstance(layer, Pool):
            h, w, c = shape
            out_shape = (h // layer.size, w // layer.size, c)
        elif isinstance(layer, Flatten):
            out_shape = (math.prod(shape),)
        elif isinstance(layer, Dense):
            out_shape = (layer.units,)
        else:
            raise TypeError(f"unknown layer {layer!r}")
        if min(out_shape) < 1:
            raise ValueError(f"input {tuple(input_shape)} is too small for {layer} (output {out_shape})")
        shapes.append((layer, shape, out_shape))
        shape = out_shape
    return shapes


def parameter_shapes(spec, input_shape):
    """Per layer, the neutral shapes of its parameters (kernel, bias); [] for layers without any."""
    result = []
    for layer, in_shape, _ in layer_shapes(spec, input_shape):
        if isinstance(layer, Conv):
            result.append([(layer.kernel, layer.kernel, in_shape[-1], layer.filters), (layer.filters,)])
        elif isinstance(layer, Dense):
            result.append([(in_shape[0], layer.units), (layer.units,)])
        else:
            result.append([])
    return result


def parameter_count(spec, input_shape):
    return sum(math.prod(shape) for shapes in parameter_shapes(spec, input_shape) for shape in shapes)


def flops_per_image(spec, input_shape):
    """Forward FLOPs per image, counting a multiply-add as 2 (conv, dense, pooling adds)."""
    total = 0
    for layer, in_shape, out_shape in layer_shapes(spec, input_shape):
        if isinstance(layer, Conv):
            total += 2 * layer.kernel * layer.kernel * in_shape[-1] * math.prod(out_shape)
        elif isinstance(layer, Dense):
            total += 2 * in_shape[0] * layer.units
        elif isinstance(layer, Pool):
            total += layer.size * layer.size * math.prod(out_shape)
    return total


def initial_weights(spec, input_shape, seed):
    """Glorot-uniform kernels and zero biases in the neutral layout, from the seed alone.

    Every adapter loads these, so all frameworks start training from bit-identical weights.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = []
    for shapes in parameter_shapes(spec, input_shape):
        if not shapes:
            weights.append([])
            continue
        kernel_shape, bias_shape = shapes
        receptive = math.prod(kernel_shape[:-2])
        fan_in, fan_out = receptive * kernel_shape[-2], receptive * kernel_shape[-1]
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        kernel = rng.uniform(-limit, limit, size=kernel_shape).astype("float32")
        weights.append([kernel, np.zeros(bias_shape, dtype="float32")])
    return weights


def channels_first_weights(spec, input_shape, weights):
    """The neutral weights for a channels-first (NCHW) network.

    Conv kernels become OIHW; a dense layer that reads a flattened (h, w, c) feature map gets its input
    rows reordered to (c, h, w), the order in which a channels-first Flatten emits them. Dense kernels stay
    (in, out). The two networks then compute the same function.
    """
    converted, flattened_from = [], None
    for (layer, in_shape, _), params in zip(layer_shapes(spec, input_shape), weights):
        if isinstance(layer, Flatten):
            flattened_from = in_shape if len(in_shape) == 3 else None
        if isinstance(layer, Conv):
            kernel, bias = params
            params = [kernel.transpose(3, 2, 0, 1), bias]
        elif isinstance(layer, Dense) and flattened_from is not None:
            kernel, bias = params
            h, w, c = flattened_from
            rows = kernel.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(h * w * c, -1)
            params, flattened_from = [rows, bias], None
        converted.append(params)
    return converted
