import torch
import torch.nn.functional as F
from torch import nn


def conv_bn(inputs, outputs, kernel, stride=1):
    return [nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(outputs)]


class Basic(nn.Module):
    """ResNet-20's block: two 3x3 convs, option-A shortcut (subsample, zero-pad the new channels)."""

    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.body = nn.Sequential(*conv_bn(inputs, outputs, 3, stride), nn.ReLU(), *conv_bn(outputs, outputs, 3))
        self.stride, self.pad = stride, (outputs - inputs) // 2

    def forward(self, x):
        if self.stride == 1:
            return F.relu(self.body(x) + x)
        return F.relu(self.body(x) + F.pad(x[:, :, :: self.stride, :: self.stride], (0, 0, 0, 0, self.pad, self.pad)))


class Bottleneck(nn.Module):
    """ResNet-50's block as torchvision builds it: stride in the 3x3 conv, projection shortcut where shapes change."""

    def __init__(self, inputs, width, stride):
        super().__init__()
        layers = conv_bn(inputs, width, 1) + [nn.ReLU()] + conv_bn(width, width, 3, stride) + [nn.ReLU()]
        self.body = nn.Sequential(*layers, *conv_bn(width, 4 * width, 1))
        changes = stride != 1 or inputs != 4 * width
        self.shortcut = nn.Sequential(*conv_bn(inputs, 4 * width, 1, stride)) if changes else nn.Identity()

    def forward(self, x):
        return F.relu(self.body(x) + self.shortcut(x))


class CausalSelfAttention(nn.Module):
    """nanoGPT's: one projection to q, k and v, F.scaled_dot_product_attention (flash attention where it can)."""

    def __init__(self, width, heads):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.heads = heads

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = (y.view(B, T, self.heads, C // self.heads).transpose(1, 2) for y in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(width), CausalSelfAttention(width, heads), nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's model.py: token and position embeddings, pre-LN blocks, a final LayerNorm, the head tied to wte."""

    def __init__(self, vocabulary, context, width, depth, heads):
        super().__init__()
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocabulary, width),
                "wpe": nn.Embedding(context, width),
                "h": nn.ModuleList(Block(width, heads) for _ in range(depth)),
                "ln_f": nn.LayerNorm(width),
            }
        )
        self.lm_head = nn.Linear(width, vocabulary, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def build_network(model):
    if model == "gpt-tiny":  # 64 tokens of a 256-byte vocabulary
        return GPT(vocabulary=256, context=64, width=128, depth=2, heads=4)
    if model == "gpt2-small":  # GPT-2 124M, nanoGPT's GPTConfig
        return GPT(vocabulary=50257, context=1024, width=768, depth=12, heads=12)
    if model == "lenet":  # 28x28x1
        return nn.Sequential(
            nn.Conv2d(1, 6, 5),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 3),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            nn.Linear(400, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, 10),
        )
    if model == "resnet20":  # 32x32x3
        layers, inputs = [*conv_bn(3, 16, 3), nn.ReLU()], 16
        for outputs in (16, 32, 64):
            for _ in range(3):
                layers.append(Basic(inputs, outputs, 2 if outputs != inputs else 1))
                inputs = outputs
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    layers, inputs = [*conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64  # resnet50
    for stage, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for block in range(blocks):
            layers.append(Bottleneck(inputs, width, 2 if stage > 0 and block == 0 else 1))
            inputs = 4 * width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 10))


def make_epoch(arrays, batch_size, learning_rate, model, device, mixed_precision, channels_last):
    """A practitioner's loop: the dataset (images, or token ids and their next tokens) as tensors on the device,
    autocast (with GradScaler for float16) and channels_last where asked, cuDNN autotuning and TF32 on."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    target = torch.device("cuda" if device == "gpu" else "cpu")
    layout = torch.channels_last if channels_last else torch.contiguous_format
    if model.startswith("gpt"):  # token ids
        inputs = torch.from_numpy(arrays["train_x"].astype("int64")).to(target)
    else:
        inputs = torch.from_numpy(arrays["train_x"].transpose(0, 3, 1, 2).copy()).to(target, memory_format=layout)
    labels = torch.from_numpy(arrays["train_y"].astype("int64")).to(target)
    network = build_network(model).to(target, memory_format=layout)
    optimizer = torch.optim.Adam(network.parameters(), lr=learning_rate, eps=1e-7)
    half = torch.float16 if device == "gpu" else torch.bfloat16
    scaler = torch.amp.GradScaler(enabled=mixed_precision and half == torch.float16)

    def epoch(order):
        order = torch.from_numpy(order).to(target)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(target.type, half, enabled=mixed_precision):
                logits = network(inputs[batch])
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels[batch].view(-1))
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        if device == "gpu":
            torch.cuda.synchronize()

    return epoch, sum(parameter.numel() for parameter in network.parameters())
