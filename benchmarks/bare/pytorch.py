import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False), nn.BatchNorm2d(outputs)
        self.conv2, self.bn2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False), nn.BatchNorm2d(outputs)
        self.stride, self.pad = stride, (outputs - inputs) // 2

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        if self.stride == 1:
            return F.relu(out + x)
        return F.relu(out + F.pad(x[:, :, :: self.stride, :: self.stride], (0, 0, 0, 0, self.pad, self.pad)))


def build_network(model):
    if model == "lenet":  # 28x28x1
        return nn.Sequential(
            nn.Conv2d(1, 6, 5), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(6, 16, 3), nn.ReLU(), nn.AvgPool2d(2),
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
        )  # fmt: skip
    layers, inputs = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()], 16  # resnet20
    for outputs in (16, 32, 64):
        for _ in range(3):
            layers.append(Block(inputs, outputs, 2 if outputs != inputs else 1))
            inputs = outputs
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def make_epoch(arrays, batch_size, learning_rate, model):
    images = torch.from_numpy(arrays["train_x"].transpose(0, 3, 1, 2).copy())
    labels = torch.from_numpy(arrays["train_y"].astype("int64"))
    network = build_network(model)
    optimizer = torch.optim.Adam(network.parameters(), lr=learning_rate, eps=1e-7)

    def epoch(order):
        order = torch.from_numpy(order)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(network(images[batch]), labels[batch]).backward()
            optimizer.step()

    return epoch
