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


def build_network(model):
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
    """A practitioner's loop: the dataset as tensors on the device, autocast (with GradScaler for float16) and
    channels_last where asked, cuDNN autotuning and TF32 on."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    target = torch.device("cuda" if device == "gpu" else "cpu")
    layout = torch.channels_last if channels_last else torch.contiguous_format
    images = torch.from_numpy(arrays["train_x"].transpose(0, 3, 1, 2).copy()).to(target, memory_format=layout)
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
                loss = F.cross_entropy(network(images[batch]), labels[batch])
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        if device == "gpu":
            torch.cuda.synchronize()

    return epoch, sum(parameter.numel() for parameter in network.parameters())
