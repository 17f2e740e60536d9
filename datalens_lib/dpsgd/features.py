"""CIFAR-10 for the DP-SGD appendix: frozen ImageNet ResNet-18 features, cached to disk.

The paper (appendix "Experimental Setup") trains a linear head on a frozen ImageNet-pretrained
ResNet-18 with DP-SGD. Neither CIFAR-10 nor the torchvision weights can be downloaded on the
machines this book is built on, and torchvision's PyPI wheel does not import beside the CPU
torch 2.13 here, so :class:`ResNet18` is a plain-torch ResNet-18 whose state-dict keys and
shapes are torchvision's ``resnet18`` (``conv1``, ``bn1``, ``layer1.0.conv1``, …,
``layer2.0.downsample.0``, ``fc``): torchvision's ``resnet18-f37072fd.pth`` (IMAGENET1K_V1)
loads into it unchanged. The user supplies that file (``weights=`` or
``DATALENS_RESNET18_WEIGHTS``); its SHA-256 must start with ``f37072fd`` (torch.hub's naming
convention), otherwise a clear error names the file to supply.

Features: images resized to 224 px (bilinear; the paper does not state the size -- its
non-private 87.85 % fits ImageNet resolution, an inference), normalised with ImageNet's mean
and standard deviation, the network in eval mode (BatchNorm frozen), the 512-d output of the
global average pool. Cached per (weights SHA-256, split, size) as float16 ``.npz`` (written
atomically) -- one 224-px pass over 60k images is about 110 TFLOP, 30-40 min on 2 cores.

DP: the features are a fixed public function of each image (public weights), so training the
head with DP-SGD on them keeps DP-SGD's guarantee for the image data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ..provenance import atomic_save, runs_root
from ..samples import user_file

WEIGHTS_NAME = "resnet18-f37072fd.pth"
WEIGHTS_URL = "https://download.pytorch.org/models/" + WEIGHTS_NAME
SHA256_PREFIX = "f37072fd"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                         nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """ResNet-18 with torchvision's parameter names (module doc); ``width`` 64 is the real
    network, smaller widths exist for tests. ``features`` returns the pooled 8·width-d
    vector."""

    def __init__(self, num_classes: int = 1000, width: int = 64):
        super().__init__()
        w = width
        self.conv1 = nn.Conv2d(3, w, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        chans = [w, w, 2 * w, 4 * w, 8 * w]
        for i in range(1, 5):
            stride = 1 if i == 1 else 2
            setattr(self, f"layer{i}", nn.Sequential(BasicBlock(chans[i - 1], chans[i], stride),
                                                     BasicBlock(chans[i], chans[i], 1)))
        self.fc = nn.Linear(8 * w, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return F.adaptive_avg_pool2d(x, 1).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def resolve_weights(weights: str | Path | None = None) -> tuple[Path, str]:
    """The checked ResNet-18 weights file and its SHA-256 (module doc)."""
    return user_file(weights, env="DATALENS_RESNET18_WEIGHTS", name=WEIGHTS_NAME,
                     url=WEIGHTS_URL, sha256_prefix=SHA256_PREFIX,
                     needed_for="the CIFAR-10 DP-SGD runs (ImageNet ResNet-18)")


def load_resnet18(weights: str | Path | None = None) -> tuple[ResNet18, str]:
    """The frozen network (eval mode, no gradients) and its weights' SHA-256."""
    path, sha = resolve_weights(weights)
    state = torch.load(path, map_location="cpu", weights_only=True)
    width = state["conv1.weight"].shape[0]
    model = ResNet18(state["fc.weight"].shape[0], width)
    model.load_state_dict(state)
    model.eval().requires_grad_(False)
    return model, sha


@torch.no_grad()
def extract_features(model: ResNet18, x: np.ndarray, *, size: int = 224, batch: int = 64,
                     progress: bool = True) -> np.ndarray:
    """Pooled features (float32) of images ``x`` (float in [0, 1], NCHW, 3 channels)."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"images must be [n, 3, h, w], got {x.shape}")
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    out = []
    for s in tqdm(range(0, len(x), batch), disable=not progress, desc="resnet18 features"):
        xb = torch.from_numpy(np.ascontiguousarray(x[s: s + batch], dtype=np.float32))
        if xb.shape[-1] != size:
            xb = F.interpolate(xb, size=(size, size), mode="bilinear", align_corners=False)
        out.append(model.features((xb - mean) / std).numpy())
    return np.concatenate(out)


def cached_features(dataset: str, *, weights: str | Path | None = None, size: int = 224,
                    cache_dir: Path | None = None, data_dir=None, progress: bool = True,
                    loaded: tuple[ResNet18, str] | None = None) -> dict[str, np.ndarray]:
    """``x_train``, ``y_train``, ``x_test``, ``y_test`` as features, from the cache
    ``<runs>/features/<dataset>-resnet18-<sha12>-<size>px.npz`` or computed and cached."""
    from ..data import load_dataset

    model, sha = loaded or load_resnet18(weights)  # ``loaded``: a network already checked
    cache = (cache_dir or runs_root() / "features") / f"{dataset}-resnet18-{sha[:12]}-{size}px.npz"
    if cache.exists():
        with np.load(cache) as f:
            return {k: f[k].astype(np.float32) if k.startswith("x") else f[k] for k in f.files}
    ds = load_dataset(dataset, data_dir)
    out = {"x_train": extract_features(model, ds.x_train, size=size, progress=progress),
           "y_train": ds.y_train,
           "x_test": extract_features(model, ds.x_test, size=size, progress=progress),
           "y_test": ds.y_test}
    out = {k: v.astype(np.float16) if k.startswith("x") else v for k, v in out.items()}

    def save(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **out)

    atomic_save(cache, save)  # the first call returns what later calls read: float16 values
    return {k: v.astype(np.float32) if k.startswith("x") else v for k, v in out.items()}
