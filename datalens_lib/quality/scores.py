"""Inception Score and Fréchet distance (the formulas; the networks live elsewhere).

Inception Score (Salimans et al. 2016, as computed by the implementation the paper follows):
``IS = exp(E_x KL(p(y|x) || p(y)))`` with ``p(y)`` the mean prediction over the split, computed
on ``splits`` equal consecutive splits; the mean and standard deviation over splits are
reported. Invariant to a permutation of the classes; 1 when every image gets the same
prediction, at most the number of classes.

Fréchet distance (Heusel et al. 2017) between N(mu1, S1) and N(mu2, S2):
``|mu1 - mu2|^2 + tr(S1) + tr(S2) - 2 tr((S1 S2)^(1/2))``, in float64. The matrix square
root is ``scipy.linalg.sqrtm`` of ``S1 S2`` (the usual FID numerics); when the product is
singular enough for the result to be non-finite, ``eps`` is added to both diagonals, and an
imaginary part larger than ``imag_tol`` (relative) is an error rather than silently dropped.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg


def inception_score(probs: np.ndarray, splits: int = 10) -> tuple[float, float]:
    """Mean and standard deviation of the IS over ``splits`` splits of ``probs`` [n, C]."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"probs must be [n, classes] with at least 2 classes, got {p.shape}")
    if not (isinstance(splits, int) and 1 <= splits <= len(p)):
        raise ValueError(f"splits must be an integer in [1, {len(p)}], got {splits!r}")
    if (p < 0).any() or not np.allclose(p.sum(1), 1.0, atol=1e-4):
        raise ValueError("probs must be probability vectors (non-negative rows summing to 1)")
    scores = []
    for part in np.array_split(p, splits):
        py = part.mean(0, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            kl = np.where(part > 0, part * (np.log(part) - np.log(py)), 0.0).sum(1)
        scores.append(float(np.exp(kl.mean())))
    return float(np.mean(scores)), float(np.std(scores))


def gaussian_stats(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (unbiased) covariance of ``features`` [n, d], float64."""
    f = np.asarray(features, dtype=np.float64)
    if f.ndim != 2 or len(f) < 2:
        raise ValueError(f"features must be [n >= 2, d], got {f.shape}")
    return f.mean(0), np.cov(f, rowvar=False)


def frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray,
                     sigma2: np.ndarray, *, eps: float = 1e-6, imag_tol: float = 1e-3) -> float:
    """Fréchet distance between two Gaussians (module doc)."""
    mu1, mu2 = np.atleast_1d(np.asarray(mu1, np.float64)), np.atleast_1d(np.asarray(mu2,
                                                                                  np.float64))
    s1, s2 = np.atleast_2d(np.asarray(sigma1, np.float64)), np.atleast_2d(
        np.asarray(sigma2, np.float64))
    if mu1.shape != mu2.shape or s1.shape != s2.shape or s1.shape != (len(mu1), len(mu1)):
        raise ValueError(f"shapes do not match: mu {mu1.shape} / {mu2.shape}, sigma "
                         f"{s1.shape} / {s2.shape}")
    diff = mu1 - mu2
    with warnings.catch_warnings():  # singular products are expected (dead ReLU features);
        warnings.simplefilter("ignore", linalg.LinAlgWarning)  # the checks below decide
        covmean = linalg.sqrtm(s1 @ s2)
    if not np.isfinite(covmean).all():
        off = np.eye(len(s1)) * eps
        covmean = linalg.sqrtm((s1 + off) @ (s2 + off))
    if np.iscomplexobj(covmean):
        scale = max(1.0, float(np.abs(covmean.real).max()))
        if np.abs(covmean.imag).max() > imag_tol * scale:
            raise ValueError(f"the matrix square root has an imaginary part of "
                             f"{np.abs(covmean.imag).max():.3g}: covariances are not PSD?")
        covmean = covmean.real
    return float(diff @ diff + np.trace(s1) + np.trace(s2) - 2.0 * np.trace(covmean))
