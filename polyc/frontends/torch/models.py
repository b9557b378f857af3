"""Small reference models for tests, examples and benchmarks (no torchvision needed).

Like ``tvm.relay.testing``, these are the networks the frontend is checked on: a
3-layer MLP, a ResNet-18-style network, a MobileNetV2 inverted-residual block and a
transformer encoder block. Weights are random (seeded by the caller); batch-norm
statistics are randomised too so that folding them is exercised. Import torch first.
"""

from __future__ import annotations

import torch
from torch import nn


def randomize_batch_norms(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give every batch norm non-trivial running statistics and affine parameters."""
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.1)
    return model


class MLP(nn.Module):
    """Three linear layers with ReLU and GELU between them."""

    def __init__(self, inputs: int = 64, hidden: int = 128, outputs: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(inputs, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, outputs)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = nn.functional.gelu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with a residual (1x1 projection on a stride)."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18's topology (torchvision's layout): a 7x7 stem, four stages of two
    basic blocks, global average pooling and a classifier. ``width`` scales the
    channel counts (64 is the real network)."""

    def __init__(self, num_classes: int = 1000, width: int = 64):
        super().__init__()
        w = width
        self.conv1 = nn.Conv2d(3, w, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        chans = [w, 2 * w, 4 * w, 8 * w]
        stages = []
        cin = w
        for n, cout in enumerate(chans):
            stride = 1 if n == 0 else 2
            stages.append(
                nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout))
            )
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, 1x1 linear projection."""

    def __init__(self, cin: int, cout: int, stride: int = 1, expand: int = 6):
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_residual else y


class TransformerBlock(nn.Module):
    """A post-norm transformer encoder block: multi-head self-attention and a GELU
    MLP, each with a residual and a layer norm (``nn.TransformerEncoderLayer``'s
    computation, written out)."""

    def __init__(self, width: int = 256, heads: int = 8, hidden: int = 1024):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)
        self.norm2 = nn.LayerNorm(width)

    def forward(self, x):
        a, _ = self.attn(x, x, x, need_weights=False)
        x = self.norm1(x + a)
        return self.norm2(x + self.fc2(nn.functional.gelu(self.fc1(x))))
