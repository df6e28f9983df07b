"""A float64 NumPy forward pass of any neutral spec (NHWC, inference mode): the reference every adapter's logits
are compared with. Written from the spec's definitions only, independently of every adapter."""

import numpy as np
from dlbench import specs


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def windows(x, size, stride, padding, fill=0.0):
    """(n, oh, ow, c, size, size) sliding windows of an NHWC batch, padded symmetrically with `fill`."""
    x = np.pad(x, [(0, 0), (padding, padding), (padding, padding), (0, 0)], constant_values=fill)
    return np.lib.stride_tricks.sliding_window_view(x, (size, size), axis=(1, 2))[:, ::stride, ::stride]


def leaf(layer, in_shape, x, params):
    if isinstance(layer, specs.Conv):
        x = np.einsum("nhwcij,ijco->nhwo", windows(x, layer.kernel, layer.stride, layer.padding), params[0])
        return x + params[1] if layer.bias else x
    if isinstance(layer, specs.BatchNorm):
        gamma, beta, mean, variance = params
        return (x - mean) / np.sqrt(variance + layer.epsilon) * gamma + beta
    if isinstance(layer, specs.Pool):
        patches = windows(x, layer.size, layer.step, layer.padding, fill=-np.inf)
        return patches.max(axis=(4, 5)) if layer.kind == "max" else patches.mean(axis=(4, 5))
    if isinstance(layer, specs.GlobalAvgPool):
        return x.mean(axis=(1, 2))
    if isinstance(layer, specs.Flatten):
        return x.reshape(len(x), -1)
    if isinstance(layer, specs.Dropout):
        return x
    if isinstance(layer, specs.LSTM):
        kernel, recurrent, bias = params
        rows = x.reshape(len(x), in_shape[0], -1)
        hidden = cell = np.zeros((len(x), layer.units))
        for step in range(in_shape[0]):
            i, f, g, o = np.split(rows[:, step] @ kernel + hidden @ recurrent + bias, 4, axis=1)
            cell = sigmoid(f) * cell + sigmoid(i) * np.tanh(g)
            hidden = sigmoid(o) * np.tanh(cell)
        return hidden
    return x @ params[0] + params[1]


def apply(spec, input_shape, x, params):
    for layer, in_shape, out_shape in specs.layer_shapes(spec, input_shape):
        if isinstance(layer, specs.Residual):
            body = apply(layer.body, in_shape, x, params)
            if layer.shortcut == "zero_pad":
                stride, pad = specs.zero_pad_geometry(in_shape, out_shape)
                shortcut = np.pad(x[:, ::stride, ::stride], [(0, 0), (0, 0), (0, 0), (pad, pad)])
            else:
                shortcut = apply(layer.shortcut, in_shape, x, params)
            x = body + shortcut
        else:
            x = leaf(layer, in_shape, x, [p.astype(np.float64) for p in next(params)])
        if getattr(layer, "activation", None) == "relu":
            x = np.maximum(x, 0)
    return x


def forward(spec, input_shape, weights, images):
    return apply(spec, input_shape, images.astype(np.float64), iter(weights))
