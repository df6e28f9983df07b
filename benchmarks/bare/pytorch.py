import torch
import torch.nn.functional as F
from torch import nn


def make_epoch(arrays, batch_size, learning_rate):
    images = torch.from_numpy(arrays["train_x"].transpose(0, 3, 1, 2).copy())
    labels = torch.from_numpy(arrays["train_y"].astype("int64"))
    network = nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(6, 16, 3), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )  # fmt: skip
    optimizer = torch.optim.Adam(network.parameters(), lr=learning_rate, eps=1e-7)

    def epoch(order):
        order = torch.from_numpy(order)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(network(images[batch]), labels[batch]).backward()
            optimizer.step()

    return epoch
