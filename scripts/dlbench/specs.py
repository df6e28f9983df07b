"""Framework-neutral model specs: every model is declared once here and built by each adapter.

Conventions of the neutral layout (what `initial_weights` produces and adapters convert from):
images are NHWC, conv kernels HWIO (kh, kw, in, out), dense kernels (in, out), and Flatten reads an
(h, w, c) feature map in h, w, c order. Padding is explicit and symmetric (PyTorch's and MXNet's convention;
TensorFlow's "SAME" pads bottom/right only for stride 2 on even sizes, so the TF and Keras adapters pad
explicitly). Batch norm: `momentum` is the decay of the running averages (Keras/MXNet; PyTorch's momentum is
1 - this), running variance from the biased batch variance (PyTorch updates it with the unbiased one: a
documented difference, tests/frameworks/test_adapters.py). An LSTM reads an image row by row (h steps of w*c
features), gates in the order input, forget, cell, output, with one bias vector (frameworks with two keep the
second frozen at zero). Weights are one list per leaf layer, in `leaves` order (depth first; a residual block's
body before its shortcut). Pure Python + NumPy only: the driver imports it too.

Attention models: a sequence is a (tokens, width) shape and a dense layer applies to its last axis. Patch embedding
is a conv whose kernel equals its stride, its output tokens in row-major (h, w) order. Multi-head self-attention
keeps one fused input projection, kernel (width, 3 * width) whose columns are [query | key | value], each split
head-major into heads of width / heads columns, then an output projection (width, width); scores are scaled by
1 / sqrt(head width), causal attention masks every later token. GELU is the exact one (erf), LayerNorm takes the
biased variance. A tied language-model head multiplies by the transposed token embedding and has no weights of its
own (GPT-2's); an untied one has a bias-free kernel (width, vocabulary). Blocks are pre-LN, residuals without an
activation (Residual with activation None).
"""

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Conv:
    filters: int
    kernel: int
    activation: str | None = None
    stride: int = 1
    padding: int = 0
    bias: bool = True


@dataclass(frozen=True)
class BatchNorm:
    activation: str | None = None
    momentum: float = 0.9
    epsilon: float = 1e-5


@dataclass(frozen=True)
class Pool:
    kind: str  # "avg" | "max"
    size: int
    stride: int | None = None  # None: the pool size
    padding: int = 0  # max pools only; they follow a ReLU, so zero padding equals -inf padding

    @property
    def step(self):
        return self.stride or self.size


@dataclass(frozen=True)
class GlobalAvgPool:
    pass


@dataclass(frozen=True)
class Flatten:
    pass


@dataclass(frozen=True)
class Dense:
    units: int
    activation: str | None = None


@dataclass(frozen=True)
class PatchEmbed:
    """ViT's patch embedding: (h, w, c) -> (h/patch * w/patch, width), a conv of kernel and stride `patch`."""

    patch: int
    width: int


@dataclass(frozen=True)
class ClassToken:
    """A learned token put before the sequence: (tokens, width) -> (tokens + 1, width)."""


@dataclass(frozen=True)
class PositionEmbedding:
    """A learned vector per position, added: (tokens, width), a table as long as the sequence it reads."""


@dataclass(frozen=True)
class TokenEmbedding:
    """Token ids to vectors: (tokens,) -> (tokens, width), a (vocabulary, width) table."""

    vocabulary: int
    width: int


@dataclass(frozen=True)
class LayerNorm:
    epsilon: float = 1e-5


@dataclass(frozen=True)
class Attention:
    """Multi-head self-attention over (tokens, width) with its output projection."""

    heads: int
    causal: bool = False


@dataclass(frozen=True)
class TokenPool:
    """(tokens, width) -> (width,): "class" takes the first token (a ClassToken's), "mean" averages them."""

    kind: str


@dataclass(frozen=True)
class LMHead:
    """(tokens, width) -> (tokens, vocabulary) logits: tied, the token embedding's table transposed (GPT-2's)."""

    vocabulary: int
    tied: bool = True


@dataclass(frozen=True)
class Dropout:
    rate: float


@dataclass(frozen=True)
class LSTM:
    units: int


@dataclass(frozen=True)
class Residual:
    """activation(body(x) + shortcut(x)). shortcut: a layer tuple (() is the identity) or "zero_pad", He et al.'s
    option A: subsample by the body's stride and zero-pad the new channels, half on each side, no parameters."""

    body: tuple
    shortcut: tuple | str = ()
    activation: str | None = "relu"


def zero_pad_geometry(in_shape, out_shape):
    """(stride, channels padded on each side) of an option-A shortcut from a block's input to its output shape."""
    return in_shape[0] // out_shape[0], (out_shape[-1] - in_shape[-1]) // 2


def conv_bn(filters, kernel, stride=1, activation="relu"):
    return [Conv(filters, kernel, stride=stride, padding=kernel // 2, bias=False), BatchNorm(activation)]


def cifar_resnet(blocks_per_stage, classes):
    """He et al. 2016 section 4.2: 6n+2 layers, 16/32/64 filters, option-A shortcuts."""
    layers = conv_bn(16, 3)
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(blocks_per_stage):
            stride = 2 if stage > 0 and block == 0 else 1
            body = tuple(conv_bn(filters, 3, stride) + conv_bn(filters, 3, activation=None))
            layers.append(Residual(body, "zero_pad" if stride == 2 else ()))
    return layers + [GlobalAvgPool(), Dense(classes)]


def imagenet_resnet(blocks, bottleneck, classes):
    """He et al. 2016 ImageNet ResNets as torchvision builds them (stride in the 3x3 conv, projection shortcuts)."""
    layers = conv_bn(64, 7, 2) + [Pool("max", 3, stride=2, padding=1)]
    channels = 64
    for stage, (width, count) in enumerate(zip((64, 128, 256, 512), blocks)):
        for block in range(count):
            stride = 2 if stage > 0 and block == 0 else 1
            if bottleneck:
                body = conv_bn(width, 1) + conv_bn(width, 3, stride) + conv_bn(4 * width, 1, activation=None)
            else:
                body = conv_bn(width, 3, stride) + conv_bn(width, 3, activation=None)
            out = body[-2].filters
            shortcut = tuple(conv_bn(out, 1, stride, activation=None)) if stride != 1 or out != channels else ()
            layers.append(Residual(tuple(body), shortcut))
            channels = out
    return layers + [GlobalAvgPool(), Dense(classes)]


VGG16_CONVS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg16(classes, cifar):
    """13 3x3 convs and 3 dense layers (Simonyan & Zisserman, config D). cifar: batch norm after every conv and a
    512-512 classifier with dropout (the CIFAR-10 VGG of the MXNet/PyTorch comparisons)."""
    layers = []
    for entry in VGG16_CONVS:
        if entry == "M":
            layers.append(Pool("max", 2))
        elif cifar:
            layers += conv_bn(entry, 3)
        else:
            layers.append(Conv(entry, 3, "relu", padding=1))
    if cifar:
        head = [Dropout(0.5), Dense(512, "relu"), Dropout(0.5), Dense(512, "relu")]
    else:
        head = [Dense(4096, "relu"), Dropout(0.5), Dense(4096, "relu"), Dropout(0.5)]
    return layers + [Flatten()] + head + [Dense(classes)]


def transformer_block(width, heads, causal=False, epsilon=1e-5, mlp_ratio=4):
    """A pre-LN block: x + attention(norm(x)), then x + mlp(norm(x)), the MLP's hidden layer GELU."""
    attention = Residual((LayerNorm(epsilon), Attention(heads, causal)), (), None)
    mlp = Residual((LayerNorm(epsilon), Dense(mlp_ratio * width, "gelu"), Dense(width)), (), None)
    return [attention, mlp]


def vit(patch, width, depth, heads, classes):
    """Dosovitskiy et al. 2021: patches, a class token and learned positions, pre-LN blocks (LayerNorm epsilon
    1e-6), the class token's final state classified."""
    blocks = [layer for _ in range(depth) for layer in transformer_block(width, heads, epsilon=1e-6)]
    return [
        PatchEmbed(patch, width),
        ClassToken(),
        PositionEmbedding(),
        *blocks,
        LayerNorm(1e-6),
        TokenPool("class"),
    ] + [Dense(classes)]


def gpt(width, depth, heads, vocabulary):
    """GPT-2 (Radford et al. 2019, as nanoGPT builds it): token and position embeddings, causal pre-LN blocks, a final
    LayerNorm and a head tied to the token embedding. The context is the token dataset's (the input's length)."""
    blocks = [layer for _ in range(depth) for layer in transformer_block(width, heads, causal=True)]
    return [TokenEmbedding(vocabulary, width), PositionEmbedding(), *blocks, LayerNorm(), LMHead(vocabulary)]


# The images the adapters' equivalence tests build a model at, in every framework on CPU
# (tests/support/probe_adapter.py): MNIST's (and the digits') and CIFAR-10's shapes.
MNIST_SHAPE, CIFAR_SHAPE = (28, 28, 1), (32, 32, 3)
TOKENS_SHAPE = (16,)  # a context of 16 tokens: the language models' test input


@dataclass(frozen=True)
class Model:
    """A model of the registry: its layers for a number of classes, and the input shapes its equivalence tests build
    it at in every framework on CPU (parameter counts, logits, one training step). By default CIFAR-10's 32x32x3,
    at which every model here builds and steps in seconds: the ImageNet networks too (their counts at 224x224 are
    checked against the published ones by tests/unit/test_specs.py). A model too large for a CPU at any small input
    says so with test_shapes=() (tests/unit/test_specs.py holds every other to a CPU budget)."""

    layers: Callable[[int], list]
    test_shapes: tuple = (CIFAR_SHAPE,)


SMALL_IMAGES = (MNIST_SHAPE, CIFAR_SHAPE)  # the small models: one channel and three
MODELS = {
    "mlp": Model(lambda classes: [Flatten(), Dense(128, "relu"), Dense(classes)], SMALL_IMAGES),
    "cnn": Model(lambda classes: [Conv(64, 3, "relu"), Conv(32, 3, "relu"), Flatten(), Dense(classes)], SMALL_IMAGES),
    "lenet": Model(
        lambda classes: [
            Conv(6, 5, "relu"),
            Pool("avg", 2),
            Conv(16, 3, "relu"),
            Pool("avg", 2),
            Flatten(),
            Dense(120, "relu"),
            Dense(84, "relu"),
            Dense(classes),
        ],
        SMALL_IMAGES,
    ),
    "resnet20": Model(lambda classes: cifar_resnet(3, classes)),
    "resnet56": Model(lambda classes: cifar_resnet(9, classes)),
    "resnet18": Model(lambda classes: imagenet_resnet((2, 2, 2, 2), False, classes)),
    "resnet50": Model(lambda classes: imagenet_resnet((3, 4, 6, 3), True, classes)),
    "vgg16": Model(lambda classes: vgg16(classes, cifar=False)),
    "vgg16-cifar": Model(lambda classes: vgg16(classes, cifar=True)),
    "lstm": Model(lambda classes: [LSTM(128), Dense(classes)], SMALL_IMAGES),
    # ViT-S/16 and ViT-B/16 are the 224x224 shapes (their counts checked against the published ones); at 32x32 a 16
    # pixel patch leaves 4 tokens, which still runs every construct.
    "vit-tiny": Model(lambda classes: vit(4, 128, 4, 4, classes)),
    "vit-s16": Model(lambda classes: vit(16, 384, 12, 6, classes)),
    "vit-b16": Model(lambda classes: vit(16, 768, 12, 12, classes), ()),
    # Language models: `classes` is the token dataset's vocabulary, the input's length its context.
    "gpt-tiny": Model(lambda vocabulary: gpt(128, 2, 4, vocabulary), (TOKENS_SHAPE,)),
    "gpt2-small": Model(lambda vocabulary: gpt(768, 12, 12, vocabulary), ()),
}
LSTM_NAME = re.compile(r"lstm(\d+)")  # lstm<hidden units>, e.g. lstm256; plain `lstm` has 128


def known_model(name):
    return name in MODELS or LSTM_NAME.fullmatch(name) is not None


def model_spec(name, num_classes):
    if name in MODELS:
        return MODELS[name].layers(num_classes)
    if match := LSTM_NAME.fullmatch(name):
        return [LSTM(int(match.group(1))), Dense(num_classes)]
    raise ValueError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}, lstm<hidden units>")


def without_dropout(spec):
    """The spec with its dropout layers removed (dropout masks come from each framework's own generator)."""
    kept = []
    for layer in spec:
        if isinstance(layer, Residual):
            layer = replace(layer, body=tuple(without_dropout(layer.body)))
        if not isinstance(layer, Dropout):
            kept.append(layer)
    return kept


def conv_output_size(size, kernel, stride, padding=0):
    return (size + 2 * padding - kernel) // stride + 1


def output_shape(layer, shape):
    """The output shape of one layer for an input shape (h, w, c) or (features,)."""
    if isinstance(layer, (Conv, Pool)):
        if len(shape) != 3:
            raise ValueError(f"{layer} needs an image input, got shape {shape}")
        if isinstance(layer, Pool) and layer.padding and layer.kind != "max":
            raise ValueError(f"{layer}: only max pools may pad (average pools differ in what they count)")
        kernel, stride = (layer.kernel, layer.stride) if isinstance(layer, Conv) else (layer.size, layer.step)
        h, w = (conv_output_size(side, kernel, stride, layer.padding) for side in shape[:2])
        return (h, w, layer.filters if isinstance(layer, Conv) else shape[2])
    if isinstance(layer, GlobalAvgPool):
        return (shape[-1],)
    if isinstance(layer, Flatten):
        return (math.prod(shape),)
    if isinstance(layer, Dense):
        return (*shape[:-1], layer.units)
    if isinstance(layer, (BatchNorm, Dropout)):
        return shape
    if isinstance(layer, PatchEmbed):
        if len(shape) != 3 or shape[0] % layer.patch or shape[1] % layer.patch:
            raise ValueError(f"{layer} needs an image whose sides the patch divides, got shape {shape}")
        return (shape[0] // layer.patch * (shape[1] // layer.patch), layer.width)
    if isinstance(layer, TokenEmbedding):
        if len(shape) != 1:
            raise ValueError(f"{layer} reads a sequence of token ids, got shape {shape}")
        return (shape[0], layer.width)
    if isinstance(layer, (ClassToken, PositionEmbedding, LayerNorm, Attention, TokenPool, LMHead)):
        if len(shape) != 2:
            raise ValueError(f"{layer} needs a sequence (tokens, width), got shape {shape}")
        if isinstance(layer, Attention) and shape[1] % layer.heads:
            raise ValueError(f"{layer}: {layer.heads} heads do not divide the width {shape[1]}")
        if isinstance(layer, ClassToken):
            return (shape[0] + 1, shape[1])
        if isinstance(layer, TokenPool):
            return (shape[1],)
        return (shape[0], layer.vocabulary) if isinstance(layer, LMHead) else shape
    if isinstance(layer, LSTM):
        if len(shape) != 3:
            raise ValueError(f"{layer} reads an image row by row, got shape {shape}")
        return (layer.units,)
    if isinstance(layer, Residual):
        body = layer_shapes(layer.body, shape)[-1][2] if layer.body else shape
        if isinstance(layer.shortcut, str):
            stride = shape[0] // body[0]
            shortcut = (conv_output_size(shape[0], 1, stride), conv_output_size(shape[1], 1, stride), body[2])
        else:
            shortcut = layer_shapes(layer.shortcut, shape)[-1][2] if layer.shortcut else shape
        if body != shortcut:
            raise ValueError(f"residual body gives {body} but its shortcut {shortcut}")
        return body
    raise TypeError(f"unknown layer {layer!r}")


def same_padding_is_symmetric(layer, in_shape):
    """Whether TensorFlow's "SAME" padding of this conv or pool equals the spec's symmetric padding on this input
    (always for stride 1 and odd kernels; for stride 2 on even sizes "SAME" pads one more after than before)."""
    kernel, stride = (layer.kernel, layer.stride) if isinstance(layer, Conv) else (layer.size, layer.step)
    for size in in_shape[:2]:
        total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
        if total // 2 != layer.padding or total - total // 2 != layer.padding:
            return False
    return True


def layer_shapes(spec, input_shape):
    """[(layer, input shape, output shape)] for the top-level layers, shapes as (h, w, c) or (features,)."""
    shapes, shape = [], tuple(input_shape)
    for layer in spec:
        if isinstance(layer, LMHead) and layer.tied and TokenEmbedding(layer.vocabulary, shape[-1]) not in spec:
            raise ValueError(f"{layer} is tied to a token embedding of its vocabulary and width {shape[-1]}: none")
        out_shape = output_shape(layer, shape)
        if min(out_shape) < 1:
            raise ValueError(f"input {tuple(input_shape)} is too small for {layer} (output {out_shape})")
        shapes.append((layer, shape, out_shape))
        shape = out_shape
    return shapes


def plan(spec, input_shape):
    """The spec as nested tuples with shapes resolved once, for adapters that apply it with ops per call: static and
    hashable (part of a jitted graph's definition), so a call only runs ops. A leaf step is (layer, input shape,
    index of its weights among `leaves`); a residual step (layer, body steps, shortcut steps or option A's
    (stride, pad): zero_pad_geometry)."""
    indices = itertools.count()

    def steps(layers, shape):
        planned = []
        for layer, in_shape, out_shape in layer_shapes(layers, shape):
            if not isinstance(layer, Residual):
                planned.append((layer, in_shape, next(indices)))
                continue
            body = steps(layer.body, in_shape)
            if layer.shortcut == "zero_pad":
                shortcut = zero_pad_geometry(in_shape, out_shape)
            else:
                shortcut = steps(layer.shortcut, in_shape)
            planned.append((layer, body, shortcut))
        return tuple(planned)

    return steps(spec, input_shape)


def leaves(spec, input_shape):
    """[(layer, input shape, output shape)] depth first, residual blocks replaced by their body then shortcut."""
    result = []
    for layer, in_shape, out_shape in layer_shapes(spec, input_shape):
        if isinstance(layer, Residual):
            result += leaves(layer.body, in_shape)
            if not isinstance(layer.shortcut, str):
                result += leaves(layer.shortcut, in_shape)
        else:
            result.append((layer, in_shape, out_shape))
    return result


def parameter_shapes(layer, in_shape):
    """The neutral shapes of one leaf's weights, trainable first, and how many of them are trainable."""
    if isinstance(layer, Conv):
        shapes = [(layer.kernel, layer.kernel, in_shape[-1], layer.filters)] + [(layer.filters,)] * layer.bias
        return shapes, len(shapes)
    if isinstance(layer, Dense):
        return [(in_shape[-1], layer.units), (layer.units,)], 2
    if isinstance(layer, PatchEmbed):
        return [(layer.patch, layer.patch, in_shape[-1], layer.width), (layer.width,)], 2
    if isinstance(layer, ClassToken):
        return [(in_shape[-1],)], 1
    if isinstance(layer, PositionEmbedding):
        return [in_shape], 1
    if isinstance(layer, TokenEmbedding):
        return [(layer.vocabulary, layer.width)], 1
    if isinstance(layer, LayerNorm):
        return [(in_shape[-1],)] * 2, 2
    if isinstance(layer, Attention):
        width = in_shape[-1]
        return [(width, 3 * width), (3 * width,), (width, width), (width,)], 4
    if isinstance(layer, LMHead) and not layer.tied:
        return [(in_shape[-1], layer.vocabulary)], 1
    if isinstance(layer, BatchNorm):
        return [(in_shape[-1],)] * 4, 2  # gamma, beta; running mean and variance are state
    if isinstance(layer, LSTM):
        features, units = in_shape[1] * in_shape[2], layer.units
        return [(features, 4 * units), (units, 4 * units), (4 * units,)], 3
    return [], 0


def parameter_count(spec, input_shape):
    """Trainable parameters (batch-norm running statistics are state, as in every framework's count)."""
    total = 0
    for layer, in_shape, _ in leaves(spec, input_shape):
        shapes, trainable = parameter_shapes(layer, in_shape)
        total += sum(math.prod(shape) for shape in shapes[:trainable])
    return total


def flops_per_image(spec, input_shape):
    """Forward FLOPs per example (an image, or a sequence of tokens), a multiply-add counted as 2: conv, patch
    embedding, dense, LSTM gates, attention's projections and its own 4 * tokens^2 * width (scores and weighted sum,
    the full square even where causal, as PaLM and nanoGPT count it), the language-model head; pooling, batch-norm
    and LayerNorm (scale and shift), position embeddings and residual additions per element. Activations, softmax
    and embedding look-ups are not counted."""
    total = 0
    for layer, in_shape, out_shape in layer_shapes(spec, input_shape):
        if isinstance(layer, Conv):
            total += 2 * layer.kernel * layer.kernel * in_shape[-1] * math.prod(out_shape)
        elif isinstance(layer, PatchEmbed):
            total += 2 * layer.patch * layer.patch * in_shape[-1] * math.prod(out_shape)
        elif isinstance(layer, (Dense, LMHead)):
            total += 2 * math.prod(in_shape) * out_shape[-1]
        elif isinstance(layer, Attention):
            tokens, width = in_shape
            total += 2 * tokens * width * 4 * width + 4 * tokens * tokens * width
        elif isinstance(layer, (LayerNorm, PositionEmbedding)):
            total += (2 if isinstance(layer, LayerNorm) else 1) * math.prod(in_shape)
        elif isinstance(layer, Pool):
            total += layer.size * layer.size * math.prod(out_shape)
        elif isinstance(layer, GlobalAvgPool):
            total += math.prod(in_shape)
        elif isinstance(layer, BatchNorm):
            total += 2 * math.prod(out_shape)
        elif isinstance(layer, LSTM):
            steps, features = in_shape[0], in_shape[1] * in_shape[2]
            total += steps * (2 * (features + layer.units) * 4 * layer.units + 3 * layer.units)
        elif isinstance(layer, Residual):
            shortcut = layer.shortcut if not isinstance(layer.shortcut, str) else []
            total += flops_per_image(layer.body, in_shape) + flops_per_image(shortcut, in_shape)
            total += math.prod(out_shape)
    return total


def reads_tokens(spec):
    """Whether a model reads token ids (a language model) rather than images."""
    return isinstance(spec[0], TokenEmbedding)


def attention_layers(spec):
    """The self-attention layers of a spec, at any depth."""
    found = []
    for layer in spec:
        if isinstance(layer, Residual):
            found += attention_layers(layer.body)
        elif isinstance(layer, Attention):
            found.append(layer)
    return found


def training_flops_per_token(spec, input_shape):
    """A language model's training FLOPs per token as nanoGPT and PaLM count them, for MFU comparable with theirs:
    6 N + 12 L T d, N the parameters without the position embeddings, L the attention layers, T the context, d the
    width (the forward's 2 N + 4 L T d, backward twice that)."""
    tokens, width = layer_shapes(spec, input_shape)[0][2]
    positions = sum(
        math.prod(in_shape) for layer, in_shape, _ in leaves(spec, input_shape) if isinstance(layer, PositionEmbedding)
    )
    parameters = parameter_count(spec, input_shape) - positions
    return 6 * parameters + 12 * len(attention_layers(spec)) * tokens * width


def orthogonal(rng, rows, columns):
    """A (rows, columns) matrix with orthonormal rows or columns (Saxe et al.), as Keras' recurrent default."""
    import numpy as np

    q, r = np.linalg.qr(rng.normal(size=(max(rows, columns), min(rows, columns))))
    q = q * np.sign(np.diag(r))
    return q if rows >= columns else q.T


def leaf_weights(layer, in_shape, rng):
    import numpy as np

    shapes, _ = parameter_shapes(layer, in_shape)
    if isinstance(layer, BatchNorm):
        ones, zeros = np.ones(shapes[0], "float32"), np.zeros(shapes[0], "float32")
        return [ones, zeros, zeros.copy(), ones.copy()]
    if isinstance(layer, LSTM):
        kernel = glorot(rng, shapes[0])
        recurrent = orthogonal(rng, *shapes[1]).astype("float32")
        bias = np.zeros(shapes[2], "float32")
        bias[layer.units : 2 * layer.units] = 1.0  # forget gate open at the start (Jozefowicz et al. 2015)
        return [kernel, recurrent, bias]
    if isinstance(layer, LayerNorm):
        return [np.ones(shapes[0], "float32"), np.zeros(shapes[1], "float32")]
    if isinstance(layer, (ClassToken, PositionEmbedding, TokenEmbedding)):
        return [(EMBEDDING_STD * rng.normal(size=shapes[0])).astype("float32")]
    if isinstance(layer, Attention):
        return [glorot(rng, shapes[0]), np.zeros(shapes[1], "float32"), glorot(rng, shapes[2])] + [
            np.zeros(shapes[3], "float32")
        ]
    if not shapes:
        return []
    return [glorot(rng, shapes[0])] + [np.zeros(shape, "float32") for shape in shapes[1:]]


EMBEDDING_STD = 0.02  # GPT-2's and ViT's initial embeddings (tokens, positions, the class token)


def glorot(rng, kernel_shape):
    receptive = math.prod(kernel_shape[:-2])
    fan_in, fan_out = receptive * kernel_shape[-2], receptive * kernel_shape[-1]
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=kernel_shape).astype("float32")


def initial_weights(spec, input_shape, seed):
    """Per leaf: Glorot-uniform kernels, zero biases, unit batch-norm and LayerNorm scales, orthogonal recurrent
    kernels, embeddings normal with EMBEDDING_STD, in the neutral layout, from the seed alone. Every adapter loads
    these, so all frameworks start bit-identical."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [leaf_weights(layer, in_shape, rng) for layer, in_shape, _ in leaves(spec, input_shape)]


def channels_first_weights(spec, input_shape, weights, inverse=False):
    """The neutral weights for a channels-first (NCHW) network (inverse: back to neutral).

    Conv kernels become OIHW; a dense layer that reads a flattened (h, w, c) feature map gets its input
    rows reordered to (c, h, w), the order in which a channels-first Flatten emits them. Dense kernels stay
    (in, out). The two networks then compute the same function.
    """
    converted, flattened_from = [], None
    for (layer, in_shape, _), params in zip(leaves(spec, input_shape), weights):
        if isinstance(layer, Flatten):
            flattened_from = in_shape if len(in_shape) == 3 else None
        if isinstance(layer, (Conv, PatchEmbed)):
            params = [params[0].transpose((2, 3, 1, 0) if inverse else (3, 2, 0, 1))] + params[1:]
        elif isinstance(layer, Dense) and flattened_from is not None:
            kernel, bias = params
            h, w, c = flattened_from
            order = ((c, h, w), (1, 2, 0, 3)) if inverse else ((h, w, c), (2, 0, 1, 3))
            rows = kernel.reshape(*order[0], -1).transpose(order[1]).reshape(h * w * c, -1)
            params, flattened_from = [rows, bias], None
        converted.append(params)
    return converted
