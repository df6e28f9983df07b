from contextlib import nullcontext

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.contrib import amp
from mxnet.gluon import nn


def conv_bn(layout, filters, kernel, stride=1):
    return [
        nn.Conv2D(filters, kernel, stride, kernel // 2, use_bias=False, layout=layout),
        nn.BatchNorm(axis=layout.index("C")),
    ]


class Basic(gluon.HybridBlock):
    """ResNet-20's block: two 3x3 convs, option-A shortcut (subsample, zero-pad the new channels)."""

    def __init__(self, layout, inputs, outputs, stride):
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(*conv_bn(layout, outputs, 3, stride), nn.Activation("relu"), *conv_bn(layout, outputs, 3))
        self.stride, self.pad, self.axis = stride, (outputs - inputs) // 2, layout.index("C")

    def hybrid_forward(self, F, x):
        if self.stride == 1:
            return F.relu(self.body(x) + x)
        steps = [1, 1, 1, 1]
        steps[2 if self.axis == 1 else 1], steps[3 if self.axis == 1 else 2] = self.stride, self.stride
        shortcut = F.slice(x, begin=(None,) * 4, end=(None,) * 4, step=tuple(steps))
        zeros = F.zeros_like(F.slice_axis(shortcut, axis=self.axis, begin=0, end=self.pad))
        return F.relu(self.body(x) + F.concat(zeros, shortcut, zeros, dim=self.axis))


class Bottleneck(gluon.HybridBlock):
    """ResNet-50's block as torchvision builds it: stride in the 3x3 conv, projection shortcut where shapes change."""

    def __init__(self, layout, inputs, width, stride):
        super().__init__()
        self.body, self.shortcut = nn.HybridSequential(), None
        self.body.add(
            *conv_bn(layout, width, 1),
            nn.Activation("relu"),
            *conv_bn(layout, width, 3, stride),
            nn.Activation("relu"),
            *conv_bn(layout, 4 * width, 1),
        )
        if stride != 1 or inputs != 4 * width:
            self.shortcut = nn.HybridSequential()
            self.shortcut.add(*conv_bn(layout, 4 * width, 1, stride))

    def hybrid_forward(self, F, x):
        return F.relu(self.body(x) + (self.shortcut(x) if self.shortcut else x))


class CausalSelfAttention(gluon.HybridBlock):
    """GluonNLP's self-attention on MXNet's interleaved attention operators, tokens first (MXNet 1.x has no fused
    scaled-dot-product attention); causal through softmax's lengths: query i sees the first i + 1 keys."""

    def __init__(self, width, heads):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Dense(3 * width, flatten=False), nn.Dense(width, flatten=False), heads

    def hybrid_forward(self, F, x):
        qkv = self.qkv(x)
        scores = F.contrib.interleaved_matmul_selfatt_qk(qkv, heads=self.heads)  # (N * heads, tokens, tokens)
        visible = F.contrib.arange_like(scores, start=1, axis=-1).astype("int32").expand_dims(0)
        lengths = F.broadcast_like(visible, scores, lhs_axes=(0,), rhs_axes=(0,))
        weights = F.softmax(scores, length=lengths, use_length=True, axis=-1)
        return self.proj(F.contrib.interleaved_matmul_selfatt_valatt(qkv, weights, heads=self.heads))


class Block(gluon.HybridBlock):
    """A pre-LN GPT block: x + attention(norm(x)), then x + mlp(norm(x)) with exact GELU."""

    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.attention, self.ln2 = nn.LayerNorm(), CausalSelfAttention(width, heads), nn.LayerNorm()
        self.mlp = nn.HybridSequential()
        self.mlp.add(nn.Dense(4 * width, flatten=False), nn.GELU(), nn.Dense(width, flatten=False))

    def hybrid_forward(self, F, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(gluon.HybridBlock):
    """GluonNLP's GPT-2 in the interleaved operators' layout (tokens, N, width): token and position embeddings, the
    blocks, a final LayerNorm and a head tied to the token embedding (it shares the embedding's parameters)."""

    def __init__(self, vocabulary=256, context=64, width=128, depth=2, heads=4):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width, weight_initializer=mx.init.Normal(0.02))
        self.position = self.params.get("position", shape=(context, 1, width), init=mx.init.Normal(0.02))
        self.blocks = nn.HybridSequential()
        self.blocks.add(*(Block(width, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm()
        self.head = nn.Dense(vocabulary, use_bias=False, flatten=False, in_units=width, params=self.embed.params)

    def hybrid_forward(self, F, tokens, position):
        x = F.broadcast_add(self.embed(F.transpose(tokens)), position)
        return F.swapaxes(self.head(self.norm(self.blocks(x))), 0, 1)  # logits (N, tokens, vocabulary)


def build_network(model, layout):
    if model == "gpt-tiny":
        return GPT()
    network = nn.HybridSequential()
    if model == "lenet":
        network.add(
            nn.Conv2D(6, 5, activation="relu", layout=layout),
            nn.AvgPool2D(2, layout=layout),
            nn.Conv2D(16, 3, activation="relu", layout=layout),
            nn.AvgPool2D(2, layout=layout),
            nn.Flatten(),
            nn.Dense(120, activation="relu"),
            nn.Dense(84, activation="relu"),
            nn.Dense(10),
        )
        return network
    if model == "resnet20":
        network.add(*conv_bn(layout, 16, 3), nn.Activation("relu"))
        inputs = 16
        for outputs in (16, 32, 64):
            for _ in range(3):
                network.add(Basic(layout, inputs, outputs, 2 if outputs != inputs else 1))
                inputs = outputs
    else:  # resnet50
        network.add(*conv_bn(layout, 64, 7, 2), nn.Activation("relu"), nn.MaxPool2D(3, 2, 1, layout=layout))
        inputs = 64
        for stage, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
            for block in range(blocks):
                network.add(Bottleneck(layout, inputs, width, 2 if stage > 0 and block == 0 else 1))
                inputs = 4 * width
    network.add(nn.GlobalAvgPool2D(layout=layout), nn.Flatten(), nn.Dense(10))
    return network


def make_epoch(arrays, batch_size, learning_rate, model, device, mixed_precision, channels_last):
    """hybridize + Trainer, the dataset as NDArrays on the device; mixed precision through mx.contrib.amp (GPU)."""
    if mixed_precision:
        amp.init()
    context, layout = mx.gpu(0) if device == "gpu" else mx.cpu(), "NHWC" if channels_last else "NCHW"
    inputs = arrays["train_x"] if channels_last or model == "gpt-tiny" else arrays["train_x"].transpose(0, 3, 1, 2)
    images = mx.nd.array(inputs, ctx=context)  # token ids as float32, which Embedding reads
    labels = mx.nd.array(arrays["train_y"], ctx=context)
    network = build_network(model, layout)
    network.initialize(mx.init.Xavier(), ctx=context)
    network.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(network.collect_params(), "adam", {"learning_rate": learning_rate, "epsilon": 1e-7})
    if mixed_precision:
        amp.init_trainer(trainer)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def epoch(order):
        order = mx.nd.array(order, ctx=context, dtype="int64")
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            with autograd.record():
                loss = loss_fn(network(mx.nd.take(images, batch)), mx.nd.take(labels, batch))
                with amp.scale_loss(loss, trainer) if mixed_precision else nullcontext(loss) as scaled:
                    autograd.backward(scaled)
            trainer.step(batch_size)
        mx.nd.waitall()

    network(images[:1])  # deferred initialisation: the parameters get their shapes
    trainable = [param for param in network.collect_params().values() if param.grad_req != "null"]
    return epoch, sum(param.data().size for param in trainable)
