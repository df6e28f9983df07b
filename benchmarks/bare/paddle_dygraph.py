from contextlib import nullcontext

import paddle
import paddle.nn.functional as F
from paddle import nn


def conv_bn(layout, inputs, outputs, kernel, stride=1):
    return [
        nn.Conv2D(inputs, outputs, kernel, stride, kernel // 2, bias_attr=False, data_format=layout),
        nn.BatchNorm2D(outputs, data_format=layout),
    ]


class Basic(nn.Layer):
    """ResNet-20's block: two 3x3 convs, option-A shortcut (subsample, zero-pad the new channels)."""

    def __init__(self, layout, inputs, outputs, stride):
        super().__init__()
        body = conv_bn(layout, inputs, outputs, 3, stride) + [nn.ReLU()] + conv_bn(layout, outputs, outputs, 3)
        self.body = nn.Sequential(*body)
        self.stride, self.pad, self.axis = stride, (outputs - inputs) // 2, layout.index("C")

    def forward(self, x):
        if self.stride == 1:
            return F.relu(self.body(x) + x)
        step = self.stride
        shortcut = x[:, ::step, ::step, :] if self.axis == 3 else x[:, :, ::step, ::step]
        zeros = paddle.zeros_like(shortcut[:, :, :, : self.pad] if self.axis == 3 else shortcut[:, : self.pad])
        return F.relu(self.body(x) + paddle.concat([zeros, shortcut, zeros], axis=self.axis))


class Bottleneck(nn.Layer):
    """ResNet-50's block as torchvision builds it: stride in the 3x3 conv, projection shortcut where shapes change."""

    def __init__(self, layout, inputs, width, stride):
        super().__init__()
        layers = conv_bn(layout, inputs, width, 1) + [nn.ReLU()] + conv_bn(layout, width, width, 3, stride)
        self.body = nn.Sequential(*layers, nn.ReLU(), *conv_bn(layout, width, 4 * width, 1))
        changes = stride != 1 or inputs != 4 * width
        self.shortcut = nn.Sequential(*conv_bn(layout, inputs, 4 * width, 1, stride)) if changes else nn.Identity()

    def forward(self, x):
        return F.relu(self.body(x) + self.shortcut(x))


class Block(nn.Layer):
    """A pre-LN GPT block of Paddle's layers, its causal attention through the fused F.scaled_dot_product_attention
    (nn.MultiHeadAttention writes attention out as matmul, softmax, matmul)."""

    def __init__(self, width, heads):
        super().__init__()
        self.norm1, self.qkv, self.out = nn.LayerNorm(width), nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.heads = heads

    def forward(self, x):
        q, k, v = self.qkv(self.norm1(x)).reshape([0, 0, 3, self.heads, -1]).unbind(axis=2)  # (N, T, heads, dim)
        x = x + self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True).flatten(2))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Layer):
    """Token and position embeddings, pre-LN blocks, a final LayerNorm, the head tied to the token embedding (a matmul
    with its table, as PaddleNLP's GPT head computes it)."""

    def __init__(self, vocabulary, context, width, depth, heads):
        super().__init__()
        self.word_embeddings, self.position_embeddings = nn.Embedding(vocabulary, width), nn.Embedding(context, width)
        self.blocks = nn.LayerList([Block(width, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)

    def forward(self, tokens):
        x = self.word_embeddings(tokens) + self.position_embeddings(paddle.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return paddle.matmul(self.norm(x), self.word_embeddings.weight, transpose_y=True)


def build_network(model, layout):
    if model == "gpt-tiny":  # 64 tokens of a 256-byte vocabulary
        return GPT(vocabulary=256, context=64, width=128, depth=2, heads=4)
    if model == "lenet":  # 28x28x1
        return nn.Sequential(
            nn.Conv2D(1, 6, 5, data_format=layout),
            nn.ReLU(),
            nn.AvgPool2D(2, data_format=layout),
            nn.Conv2D(6, 16, 3, data_format=layout),
            nn.ReLU(),
            nn.AvgPool2D(2, data_format=layout),
            nn.Flatten(),
            nn.Linear(400, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, 10),
        )
    if model == "resnet20":  # 32x32x3
        layers, inputs = [*conv_bn(layout, 3, 16, 3), nn.ReLU()], 16
        for outputs in (16, 32, 64):
            for _ in range(3):
                layers.append(Basic(layout, inputs, outputs, 2 if outputs != inputs else 1))
                inputs = outputs
        head = [nn.AdaptiveAvgPool2D(1, data_format=layout), nn.Flatten(), nn.Linear(64, 10)]
        return nn.Sequential(*layers, *head)
    layers = [*conv_bn(layout, 3, 64, 7, 2), nn.ReLU(), nn.MaxPool2D(3, 2, 1, data_format=layout)]  # resnet50
    inputs = 64
    for stage, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for block in range(blocks):
            layers.append(Bottleneck(layout, inputs, width, 2 if stage > 0 and block == 0 else 1))
            inputs = 4 * width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2D(1, data_format=layout), nn.Flatten(), nn.Linear(2048, 10))


def make_epoch(arrays, batch_size, learning_rate, model, device, mixed_precision, channels_last):
    """The dynamic graph, as Paddle's guides train: the dataset (images, or token ids and their next tokens) as tensors
    on the device, data_format NHWC where asked, auto_cast O1 with GradScaler (float16; Paddle's AMP runs on GPU
    only), TF32 and kernel autotuning on."""
    paddle.set_device("gpu:0" if device == "gpu" else "cpu")
    paddle.base.core.set_cublas_switch(True)
    paddle.incubate.autotune.set_config({"kernel": {"enable": True}})
    layout = "NHWC" if channels_last else "NCHW"
    inputs = arrays["train_x"]  # NHWC images, or token ids
    inputs = paddle.to_tensor(inputs if channels_last or model == "gpt-tiny" else inputs.transpose(0, 3, 1, 2))
    labels = paddle.to_tensor(arrays["train_y"].astype("int64"))
    network = build_network(model, layout)
    optimizer = paddle.optimizer.Adam(learning_rate, epsilon=1e-7, parameters=network.parameters())
    scaler = paddle.amp.GradScaler(enable=mixed_precision)

    def epoch(order):
        order = paddle.to_tensor(order)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            with paddle.amp.auto_cast(level="O1") if mixed_precision else nullcontext():
                loss = F.cross_entropy(network(paddle.gather(inputs, batch)), paddle.gather(labels, batch))
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.clear_grad()
        if device == "gpu":
            paddle.device.synchronize()

    return epoch, sum(parameter.size for parameter in network.parameters() if not parameter.stop_gradient)
