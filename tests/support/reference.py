"""A float64 NumPy forward pass of any neutral spec (NHWC, inference mode): the reference every adapter's logits
are compared with. Written from the spec's definitions only, independently of every adapter."""

import math

import numpy as np
from dlbench import specs

erf = np.frompyfunc(math.erf, 1, 1)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gelu(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)).astype(np.float64))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(layer, x, params):
    qkv_kernel, qkv_bias, out_kernel, out_bias = params
    n, tokens, width = x.shape
    heads = lambda block: block.reshape(n, tokens, layer.heads, -1).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (heads(block) for block in np.split(x @ qkv_kernel + qkv_bias, 3, axis=-1))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(width // layer.heads)
    if layer.causal:
        scores = np.where(np.tril(np.ones((tokens, tokens), bool)), scores, -np.inf)
    mixed = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(n, tokens, width)
    return mixed @ out_kernel + out_bias


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
    if isinstance(layer, specs.PatchEmbed):
        n, h, w, c, p = *x.shape, layer.patch
        patches = x.reshape(n, h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, -1, p * p * c)
        return patches @ params[0].reshape(p * p * c, -1) + params[1]
    if isinstance(layer, specs.ClassToken):
        return np.concatenate([np.broadcast_to(params[0], (len(x), 1, x.shape[-1])), x], axis=1)
    if isinstance(layer, specs.PositionEmbedding):
        return x + params[0]
    if isinstance(layer, specs.TokenEmbedding):
        return params[0][x.astype(np.int64)]
    if isinstance(layer, specs.LayerNorm):
        mean, variance = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + layer.epsilon) * params[0] + params[1]
    if isinstance(layer, specs.Attention):
        return attention(layer, x, params)
    if isinstance(layer, specs.TokenPool):
        return x[:, 0] if layer.kind == "class" else x.mean(axis=1)
    if isinstance(layer, specs.LMHead):
        return x @ params[0]  # the tied head's: the transposed token embedding (apply hands it over)
    return x @ params[0] + params[1]


def apply(spec, input_shape, x, params, embedding=None):
    """The spec's forward pass; `embedding` is the token embedding table a tied head reads (found on the way)."""
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
            weights = [p.astype(np.float64) for p in next(params)]
            if isinstance(layer, specs.TokenEmbedding):
                embedding = weights[0]
            if isinstance(layer, specs.LMHead) and layer.tied:
                weights = [embedding.T]
            x = leaf(layer, in_shape, x, weights)
        activation = getattr(layer, "activation", None)
        if activation == "relu":
            x = np.maximum(x, 0)
        elif activation == "gelu":
            x = gelu(x)
    return x


def forward(spec, input_shape, weights, inputs):
    """Logits of images (NHWC floats) or token ids (integers, kept as they are)."""
    inputs = inputs if np.issubdtype(inputs.dtype, np.integer) else inputs.astype(np.float64)
    return apply(spec, input_shape, inputs, iter(weights))
