"""Inception-based IS and FID through torch-fidelity, with weights the user supplies.

The paper's FID (and the usual IS) use the 2015 TensorFlow Inception network. torch-fidelity
(maintained, numerically matched to the TensorFlow reference) ships it as
``weights-inception-2015-12-05-6726825d.pth`` (the ``6726825d`` in the name is the start of
the file's SHA-256, torch.hub's convention). This machine cannot download it, so the user
passes the file (``weights=`` or ``DATALENS_INCEPTION_WEIGHTS``); it is checked before use and
any problem is a clear error naming the file to supply.

torch-fidelity needs torchvision built for the installed torch (``pip install
'datalens-lib[inception]'`` next to a matching torchvision); it is an optional extra because
the CPU torchvision wheel is not on every package index (not on this project's). Grey images
are repeated to three channels, as torch-fidelity and the paper's references do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..samples import check_images, to_uint8, user_file
from .scores import frechet_distance, gaussian_stats

WEIGHTS_NAME = "weights-inception-2015-12-05-6726825d.pth"
WEIGHTS_URL = ("https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/"
               + WEIGHTS_NAME)
SHA256_PREFIX = "6726825d"


def resolve_weights(weights: str | Path | None = None) -> tuple[Path, str]:
    """The checked Inception weights file and its SHA-256 (module doc)."""
    return user_file(weights, env="DATALENS_INCEPTION_WEIGHTS", name=WEIGHTS_NAME,
                     url=WEIGHTS_URL, sha256_prefix=SHA256_PREFIX,
                     needed_for="Inception-based IS/FID")


def _extractor(path: Path):
    try:
        from torch_fidelity import FeatureExtractorInceptionV3
    except Exception as e:  # ImportError, or torchvision built for another torch
        raise ImportError(
            "Inception-based IS/FID need torch-fidelity and a torchvision built for the "
            "installed torch: pip install 'datalens-lib[inception]' (" + str(e) + ")") from e
    return FeatureExtractorInceptionV3("inception-v3-compat", ["2048", "logits_unbiased"],
                                       feature_extractor_weights_path=str(path))


def _features(extractor, x: np.ndarray, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    import torch

    u8 = to_uint8(x)
    if u8.shape[1] == 1:
        u8 = np.repeat(u8, 3, axis=1)
    feats, logits = [], []
    with torch.no_grad():
        for s in range(0, len(u8), batch_size):
            f, lg = extractor(torch.from_numpy(u8[s: s + batch_size]))
            feats.append(f.double().numpy())
            logits.append(lg.double())
    return np.concatenate(feats), torch.cat(logits)


def inception_scores(x: np.ndarray, real_x: np.ndarray, *, weights: str | Path | None = None,
                     splits: int = 10, batch_size: int = 200) -> dict[str, Any]:
    """Inception IS of ``x`` and Inception FID of ``x`` against ``real_x`` (module doc)."""
    path, sha = resolve_weights(weights)
    x, _ = check_images(x, np.zeros(len(x), np.int64), where="images")
    real_x, _ = check_images(real_x, np.zeros(len(real_x), np.int64), where="real images")
    ext = _extractor(path)
    from torch_fidelity.metric_isc import isc_features_to_metric

    f, logits = _features(ext, x, batch_size)
    fr, _ = _features(ext, real_x, batch_size)
    isc = isc_features_to_metric(logits, splits=splits)
    return {"n": len(x), "inception_is": isc["inception_score_mean"],
            "inception_is_std": isc["inception_score_std"],
            "inception_fid": frechet_distance(*gaussian_stats(f), *gaussian_stats(fr)),
            "weights_sha256": sha}
