"""The domain classifiers behind "IS (domain classifier)" and "FID (domain features)".

Why our own network: the paper's IS uses pretrained MNIST/Fashion classifiers (99 % / 93 %
test accuracy, following GS-WGAN) that were never published, and its FID uses ImageNet
Inception features; neither file can be downloaded here. So each dataset gets a small CNN
trained by this repository on the real training set, deterministic given its seed, whose
weights are committed (``weights/<dataset>.pt``) with a record (``weights/<dataset>.json``:
SHA-256 of the weights, test accuracy, training settings, provenance). Loading checks the
SHA-256, so a score always names the exact network that produced it.

Architecture: conv 5x5 (32) + ReLU + max-pool 2 -> conv 5x5 (64) + ReLU + max-pool 2 ->
adaptive average pool to 7x7 -> linear 3136 -> 128 + ReLU (the *features*) -> dropout 0.5 ->
linear 128 -> classes (the *logits*). Trained with Adam (lr 1e-3), batch 128, 5 epochs, seed
0 (about 0.46 M parameters, 1.8 MB). FID is computed against the real *training* set's
features, the real-data reference row is the real *test* set.
"""

from __future__ import annotations

import functools
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from .._validate import positive_float, positive_int
from ..data import load_dataset, resolve_dataset_dir
from ..provenance import atomic_write_bytes, atomic_write_json, provenance
from ..samples import check_images, sha256_file
from .scores import frechet_distance, gaussian_stats, inception_score

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
#: bumped whenever :func:`score_images` would give other numbers for the same images and
#: weights (formulas, splits, features, reference set): a committed score of another version
#: is scored again, never shown (``quality.report.stored_score``)
SCORES_VERSION = 1
FEATURES = 128


class DomainClassifier(nn.Module):
    """The domain classifier (module doc); ``forward`` returns (logits, features)."""

    def __init__(self, channels: int, num_classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, FEATURES)
        self.fc2 = nn.Linear(FEATURES, num_classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        h = F.adaptive_avg_pool2d(h, 7)
        feat = F.relu(self.fc1(h.flatten(1)))
        return self.fc2(F.dropout(feat, 0.5, self.training)), feat


def train_domain_classifier(dataset: str, *, seed: int = 0, epochs: int = 5, lr: float = 1e-3,
                            batch_size: int = 128, limit: int | None = None,
                            data_dir: str | Path | None = None, progress: bool = True
                            ) -> tuple[DomainClassifier, dict[str, Any]]:
    """Train the domain classifier of ``dataset`` (module doc); deterministic given ``seed``
    on a given machine and thread count. Returns the model (eval mode) and its record."""
    positive_int("epochs", epochs)
    positive_int("batch_size", batch_size)
    positive_float("lr", lr)
    ds = load_dataset(dataset, data_dir)
    x, y = ds.x_train[:limit], ds.y_train[:limit]
    torch.manual_seed(seed)
    model = DomainClassifier(ds.shape[0], ds.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    xt, yt = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y)
    t0 = time.perf_counter()
    model.train()
    for _ in tqdm(range(epochs), desc=f"domain classifier {dataset}", disable=not progress):
        perm = torch.randperm(len(xt), generator=gen)
        for s in range(0, len(perm), batch_size):
            idx = perm[s: s + batch_size]
            loss = F.cross_entropy(model(xt[idx])[0], yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    model.eval()
    acc = float((predict(model, ds.x_test)[0].argmax(1) == ds.y_test).mean())
    rec = {"dataset": dataset, "seed": seed, "epochs": epochs, "lr": lr,
           "batch_size": batch_size, "optimizer": "Adam", "train_images": len(x),
           "test_accuracy": acc, "train_seconds": time.perf_counter() - t0,
           "threads": torch.get_num_threads(),
           "architecture": "conv5x5(32)-pool-conv5x5(64)-pool-avgpool7-fc128-dropout.5-fc",
           "parameters": sum(p.numel() for p in model.parameters())}
    return model, rec


def save_domain_classifier(model: DomainClassifier, rec: dict[str, Any],
                           folder: str | Path = WEIGHTS_DIR) -> Path:
    """Write ``<dataset>.pt`` and its record ``<dataset>.json`` (with the SHA-256)."""
    folder = Path(folder)
    pt = folder / f"{rec['dataset']}.pt"
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    buf = io.BytesIO()  # a buffer, not the temp file: the archive's inner folder name would
    torch.save(state, buf)  # be the temp name, and equal weights would get another SHA-256
    atomic_write_bytes(pt, buf.getvalue())
    atomic_write_json(folder / f"{rec['dataset']}.json",
                      {**rec, "weights": pt.name, "sha256": sha256_file(pt), **provenance()})
    return pt


@functools.lru_cache(maxsize=8)
def load_domain_classifier(dataset: str, folder: str | Path = WEIGHTS_DIR
                           ) -> tuple[DomainClassifier, dict[str, Any]]:
    """The committed classifier of ``dataset`` and its record; the weights' SHA-256 must
    equal the record's (a clear error otherwise)."""
    folder = Path(folder)
    meta, pt = folder / f"{dataset}.json", folder / f"{dataset}.pt"
    if not meta.exists() or not pt.exists():
        have = sorted(p.stem for p in folder.glob("*.json"))
        raise FileNotFoundError(
            f"no domain classifier for {dataset!r} in {folder} (have: {have or 'none'}); train "
            f"one with `datalens domain-classifier --dataset {dataset}`")
    rec = json.loads(meta.read_text())
    sha = sha256_file(pt)
    if sha != rec["sha256"]:
        raise ValueError(f"{pt}: SHA-256 {sha[:16]}… does not match its record "
                         f"{rec['sha256'][:16]}…; the weights were changed or corrupted")
    state = torch.load(pt, map_location="cpu", weights_only=True)
    model = DomainClassifier(state["conv1.weight"].shape[1], state["fc2.weight"].shape[0])
    model.load_state_dict(state)
    model.eval()
    return model, rec


@torch.no_grad()
def predict(model: DomainClassifier, x: np.ndarray, batch_size: int = 2000
            ) -> tuple[np.ndarray, np.ndarray]:
    """Softmax probabilities [n, C] and features [n, 128] (float64) of float32 images."""
    model.eval()
    probs, feats = [], []
    for s in range(0, len(x), batch_size):
        logits, f = model(torch.from_numpy(np.ascontiguousarray(x[s: s + batch_size],
                                                                dtype=np.float32)))
        probs.append(torch.softmax(logits.double(), 1).numpy())
        feats.append(f.double().numpy())
    return np.concatenate(probs), np.concatenate(feats)


def agreement_score(dataset: str
                    ) -> tuple[Callable[[torch.Tensor, torch.Tensor], dict[str, float]], str]:
    """A generator probe's ``score(fakes, labels)`` (``methods.dpgan.discriminator_probe``,
    ``methods.dcgan.discriminator_probe``) and the classifier's SHA-256: the share of fakes
    ``dataset``'s domain classifier assigns to their conditioning label (``label_agreement``,
    chance 1/C) and its mean top probability (``top_probability``); the weights' SHA-256 is
    checked on loading."""
    model, rec = load_domain_classifier(dataset)

    def score(fake: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
        probs = predict(model, fake.float().cpu().numpy())[0]
        return {"label_agreement": float((probs.argmax(1) == labels.cpu().numpy()).mean()),
                "top_probability": float(probs.max(1).mean())}

    return score, rec["sha256"]


def reference_stats(dataset: str, data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Feature mean and covariance of ``dataset``'s real training set (the FID reference),
    computed once per process for each dataset folder and classifier (60k images: the
    costliest part of a score)."""
    _, rec = load_domain_classifier(dataset)
    return _reference_stats(dataset, str(resolve_dataset_dir(dataset, data_dir)), rec["sha256"])


@functools.lru_cache(maxsize=8)
def _reference_stats(dataset: str, folder: str, classifier_sha256: str
                     ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`reference_stats` keyed by what it depends on: the folder the data are read from
    (so another ``DATALENS_DATA_DIR`` is another entry) and the classifier's weights."""
    model, _ = load_domain_classifier(dataset)
    return gaussian_stats(predict(model, load_dataset(dataset, folder).x_train)[1])


def score_images(x: np.ndarray, y: np.ndarray | None, dataset: str, *, splits: int = 10,
                 data_dir: str | None = None) -> dict[str, Any]:
    """IS (domain classifier) and FID (domain features) of images ``x`` for ``dataset``.

    ``x``: uint8 or [0, 1] floats, NCHW or NHW. With labels ``y``, also the classifier's
    accuracy on them (how often a generated image is recognised as its conditioning class).
    """
    model, rec = load_domain_classifier(dataset)
    ds_shape = (model.conv1.in_channels,)
    labels = np.zeros(len(x), np.int64) if y is None else y
    x, labels = check_images(x, labels, num_classes=model.fc2.out_features, where="images")
    if x.shape[1] != ds_shape[0]:
        raise ValueError(f"images have {x.shape[1]} channels, the {dataset} classifier "
                         f"expects {ds_shape[0]}")
    probs, feats = predict(model, x)
    is_mean, is_std = inception_score(probs, splits=min(splits, len(x)))
    mu, sigma = reference_stats(dataset, data_dir)
    out = {"n": len(x), "is": is_mean, "is_std": is_std, "splits": min(splits, len(x)),
           "fid": frechet_distance(*gaussian_stats(feats), mu, sigma),
           "classifier": {"dataset": dataset, "sha256": rec["sha256"],
                          "test_accuracy": rec["test_accuracy"]}}
    if y is not None:
        out["label_agreement"] = float((probs.argmax(1) == labels).mean())
    return out
