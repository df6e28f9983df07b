from functools import partial

import jax
import jax.numpy as jnp
import optax
from flax import nnx


class ConvBN(nnx.Module):
    """Flax's default "SAME" padding pads stride 2 bottom/right only: the FLOPs and shapes are the spec's."""

    def __init__(self, inputs, outputs, kernel, stride, dtype, rngs):
        self.conv = nnx.Conv(inputs, outputs, (kernel, kernel), stride, use_bias=False, dtype=dtype, rngs=rngs)
        self.norm = nnx.BatchNorm(outputs, momentum=0.9, epsilon=1e-5, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        return self.norm(self.conv(x))


class Basic(nnx.Module):
    """ResNet-20's block: two 3x3 convs, option-A shortcut (subsample, zero-pad the new channels)."""

    def __init__(self, inputs, outputs, stride, dtype, rngs):
        self.first = ConvBN(inputs, outputs, 3, stride, dtype, rngs)
        self.second = ConvBN(outputs, outputs, 3, 1, dtype, rngs)
        self.stride, self.pad = stride, (outputs - inputs) // 2

    def __call__(self, x):
        y = self.second(nnx.relu(self.first(x)))
        if self.stride > 1:
            x = jnp.pad(x[:, :: self.stride, :: self.stride], ((0, 0), (0, 0), (0, 0), (self.pad, self.pad)))
        return nnx.relu(y + x)


class Bottleneck(nnx.Module):
    """ResNet-50's block as torchvision builds it: stride in the 3x3 conv, projection shortcut where shapes change."""

    def __init__(self, inputs, width, stride, dtype, rngs):
        self.body = nnx.List(
            [
                ConvBN(inputs, width, 1, 1, dtype, rngs),
                ConvBN(width, width, 3, stride, dtype, rngs),
                ConvBN(width, 4 * width, 1, 1, dtype, rngs),
            ]
        )
        changes = stride != 1 or inputs != 4 * width
        self.shortcut = ConvBN(inputs, 4 * width, 1, stride, dtype, rngs) if changes else None

    def __call__(self, x):
        y = nnx.relu(self.body[1](nnx.relu(self.body[0](x))))
        return nnx.relu(self.body[2](y) + (self.shortcut(x) if self.shortcut else x))


class LeNet(nnx.Module):
    def __init__(self, channels, dtype, rngs):
        self.convs = nnx.List(
            [
                nnx.Conv(channels, 6, (5, 5), padding="VALID", dtype=dtype, rngs=rngs),
                nnx.Conv(6, 16, (3, 3), padding="VALID", dtype=dtype, rngs=rngs),
            ]
        )
        self.dense = nnx.List([nnx.Linear(i, o, dtype=dtype, rngs=rngs) for i, o in ((400, 120), (120, 84), (84, 10))])

    def __call__(self, x):
        for conv in self.convs:
            x = nnx.avg_pool(nnx.relu(conv(x)), (2, 2), (2, 2))
        x = x.reshape(x.shape[0], -1)
        return self.dense[2](nnx.relu(self.dense[1](nnx.relu(self.dense[0](x)))))


class ResNet(nnx.Module):
    """ResNet-20 (32x32) or ResNet-50 (ImageNet stem): stem, blocks, global average pooling, dense."""

    def __init__(self, model, channels, dtype, rngs):
        self.imagenet = model == "resnet50"
        outputs, kernel, stride = (64, 7, 2) if self.imagenet else (16, 3, 1)
        self.stem = ConvBN(channels, outputs, kernel, stride, dtype, rngs)
        blocks, inputs = [], outputs
        if self.imagenet:
            for stage, (width, count) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
                for block in range(count):
                    blocks.append(Bottleneck(inputs, width, 2 if stage > 0 and block == 0 else 1, dtype, rngs))
                    inputs = 4 * width
        else:
            for outputs in (16, 32, 64):
                for _ in range(3):
                    blocks.append(Basic(inputs, outputs, 2 if outputs != inputs else 1, dtype, rngs))
                    inputs = outputs
        self.blocks = nnx.List(blocks)
        self.head = nnx.Linear(inputs, 10, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.stem(x))
        if self.imagenet:
            x = nnx.max_pool(x, (3, 3), (2, 2), "SAME")
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(axis=(1, 2)))


class Block(nnx.Module):
    """GPT-2's pre-LN block: causal nnx.MultiHeadAttention (JAX's fused kernel, through nnx.dot_product_attention),
    then the exact-GELU MLP, each added to the residual stream."""

    def __init__(self, width, heads, dtype, rngs):
        self.attention_norm = nnx.LayerNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(heads, width, decode=False, dtype=dtype, rngs=rngs)
        self.mlp_norm = nnx.LayerNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)
        self.hidden = nnx.Linear(width, 4 * width, dtype=dtype, rngs=rngs)
        self.output = nnx.Linear(4 * width, width, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = x + self.attention(self.attention_norm(x), is_causal=True)
        return x + self.output(nnx.gelu(self.hidden(self.mlp_norm(x)), approximate=False))


class GPT(nnx.Module):
    """nanoGPT in NNX: token and learned position embeddings, the blocks, a final LayerNorm and the head tied to the
    token embedding (nnx.Embed.attend)."""

    def __init__(self, vocabulary, context, width, depth, heads, dtype, rngs):
        self.tokens = nnx.Embed(vocabulary, width, dtype=dtype, rngs=rngs)
        self.positions = nnx.Embed(context, width, dtype=dtype, rngs=rngs)
        self.blocks = nnx.List([Block(width, heads, dtype, rngs) for _ in range(depth)])
        self.norm = nnx.LayerNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)

    def __call__(self, tokens):
        x = self.tokens(tokens) + self.positions(jnp.arange(tokens.shape[-1]))
        for block in self.blocks:
            x = block(x)
        return self.tokens.attend(self.norm(x))


def build_network(model, input_shape, dtype, rngs):
    if model == "gpt-tiny":
        return GPT(256, input_shape[0], 128, 2, 4, dtype, rngs)
    if model == "lenet":
        return LeNet(input_shape[-1], dtype, rngs)
    return ResNet(model, input_shape[-1], dtype, rngs)


def make_epoch(arrays, batch_size, learning_rate, model, device, mixed_precision, channels_last):
    """Flax's performance guide: the model and optimiser split once, a jax.jit functional step with the state donated;
    the dataset as JAX arrays on the device, each batch gathered inside the step; mixed precision as Flax runs it,
    bfloat16 compute on float32 parameters (no loss scaling). Flax runs NHWC only (channels_last changes nothing)."""
    images, labels = jax.device_put((arrays["train_x"], arrays["train_y"]))
    dtype = jnp.bfloat16 if mixed_precision else jnp.float32
    network = build_network(model, images.shape[1:], dtype, nnx.Rngs(0))
    optimizer = nnx.Optimizer(network, optax.adam(learning_rate, eps=1e-7), wrt=nnx.Param)
    graphdef, state = nnx.split((network, optimizer))

    @partial(jax.jit, donate_argnums=0)
    def step(state, images, labels, batch):
        network, optimizer = nnx.merge(graphdef, state)

        def loss_fn(network):
            logits = network(images[batch]).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels[batch]).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(network)
        optimizer.update(network, grads)
        return nnx.state((network, optimizer)), loss

    def epoch(order):
        nonlocal state
        order = jnp.asarray(order)
        for start in range(0, len(order), batch_size):
            state, loss = step(state, images, labels, order[start : start + batch_size])
        loss.block_until_ready()

    return epoch, sum(param.size for param in jax.tree.leaves(nnx.state(network, nnx.Param)))
