"""TopAgg: top-k stochastic-sign compression and noisy vote aggregation (paper Algs. 2-3).

Shapes: ``grads`` is [Q, N, d] -- Q queries (one per synthetic sample), N teachers, d
dimensions. Each teacher keeps its k largest-magnitude coordinates (Alg. 2, line 2) and votes
+1/-1 on each of them, so its vote vector has exactly k non-zero entries in {-1, +1} (or fewer
with ``stochastic=False`` and exact zeros). The vote sum therefore has L2 sensitivity
``2 sqrt(k)`` to any one teacher (paper Lemma 1), and adding ``N(0, sigma^2)`` to each of its d
coordinates is (lambda, 2 k lambda / sigma^2)-RDP per query (Theorem 3); thresholding at
``+-beta N`` is post-processing. Accountant: ``datalens_lib.privacy``. Neighbouring records
(one record replaced, its label kept under the class-ordered split) change one teacher's
votes: ``aggregation.base`` and ``data.partition.NEIGHBOURING``.

The compressed votes are never materialised densely: top-k indices and signs ([Q, N, k]) are
scattered straight into the [Q, d] vote sum, so memory is O(Q N k + Q d) beyond the input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._validate import boolean, choice, nonneg_float, positive_float, positive_int
from .base import Aggregator, check_grads, threshold_votes

NORMALIZATIONS = ("paper", "official")


def _check_k(k: int, d: int) -> int:
    k = positive_int("k", k)
    if k > d:
        raise ValueError(f"k must be <= the gradient dimension d = {d}, got {k}")
    return k


def _check_c(c: float | None) -> float | None:
    return None if c is None else positive_float("c", c)


def topk_sto_sign_sparse(grads: torch.Tensor, k: int, c: float | None,
                         generator: torch.Generator | None = None, normalize: str = "paper",
                         stochastic: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``TopkStoSignGrad`` (paper Alg. 2) in sparse form: (indices [..., k], signs [..., k]).

    The top-k coordinates are chosen on |g| (ties broken by ``torch.topk``: always exactly k).
    Normalisation of the kept values:

    ``paper``
        clip every coordinate to [-c, c] (skipped when ``c`` is None), divide by the clipped
        vector's max magnitude (Alg. 2, lines 3-4); P[+1] = (1 + g^) / 2.
    ``official``
        b = min(max|g|, c) (b = max|g| when c is None), P[+1] = 1/2 + g / (2 b) clamped to
        [0, 1], as the official TF code does: coordinates with |g| >= b get a deterministic sign.

    The two coincide mathematically (clip-then-divide equals divide-then-clamp by b); both are
    kept so that the choice is explicit in configs and the equality is tested. An all-zero
    gradient gives P[+1] = 1/2 (random signs), never NaN. ``stochastic=False`` returns the
    plain sign of the raw gradient (0 for exact zeros).
    """
    choice("normalize", normalize, NORMALIZATIONS)
    boolean("stochastic", stochastic)
    c = _check_c(c)
    k = _check_k(k, grads.shape[-1])
    vals, idx = torch.topk(grads.abs(), k, dim=-1, sorted=False)
    # NaN and +-inf rank first in topk, so checking the kept values checks the whole input
    if not torch.isfinite(vals).all():
        raise ValueError("grads contains NaN or infinite values")
    g = torch.gather(grads, -1, idx)
    if not stochastic:
        return idx, torch.sign(g)
    # max |g| of the whole vector is among the top-k; b = min(max|g|, c) = max |clip(g, c)|
    scale = vals.amax(dim=-1, keepdim=True)
    if c is not None:
        scale = scale.clamp(max=c)
    scale = torch.where(scale > 0, scale, 1.0)  # all-zero gradient: g_hat = 0, P[+1] = 1/2
    if normalize == "paper":
        g_hat = (g if c is None else g.clamp(-c, c)).div_(scale)  # Alg. 2 lines 3-4
    else:
        g_hat = (g / scale).clamp_(-1.0, 1.0)  # P[+1] = 1/2 + g / 2b, clamped to [0, 1]
    # +1 with probability (1 + g_hat) / 2  <=>  2u - 1 < g_hat for u ~ U[0, 1)
    u = torch.rand(g_hat.shape, generator=generator, device=grads.device, dtype=g_hat.dtype)
    signs = torch.where(u.mul_(2.0).sub_(1.0) < g_hat, 1.0, -1.0).to(grads.dtype)
    return idx, signs


def topk_sto_sign(grads: torch.Tensor, k: int, c: float | None,
                  generator: torch.Generator | None = None, normalize: str = "paper",
                  stochastic: bool = True) -> torch.Tensor:
    """``TopkStoSignGrad`` (paper Alg. 2), dense: same shape as ``grads``, values in {-1,0,1}.

    Works on any tensor whose last axis is the gradient dimension. See
    :func:`topk_sto_sign_sparse` for the normalisation options.
    """
    if not isinstance(grads, torch.Tensor) or not grads.is_floating_point():
        raise ValueError("grads must be a floating-point torch.Tensor")
    idx, signs = topk_sto_sign_sparse(grads, k, c, generator, normalize, stochastic)
    return torch.zeros_like(grads).scatter_(-1, idx, signs)


def vote_sum(grads: torch.Tensor, k: int, c: float | None,
             generator: torch.Generator | None = None, normalize: str = "paper",
             stochastic: bool = True) -> torch.Tensor:
    """Clean vote sums sum_i g~_i [Q, d] of a block of teachers (Alg. 3, Phase I and the sum).

    Vote sums of disjoint teacher blocks add up, so an ensemble too large for memory can be
    processed in chunks and the partial sums added before :func:`noisy_threshold`.
    """
    grads = check_grads(grads)
    q, n, d = grads.shape
    idx, signs = topk_sto_sign_sparse(grads, k, c, generator, normalize, stochastic)
    votes = torch.zeros(q, d, dtype=grads.dtype, device=grads.device)
    return votes.scatter_add_(1, idx.reshape(q, -1), signs.reshape(q, -1))


def noisy_threshold(votes: torch.Tensor, sigma: float, beta: float, n_teachers: int,
                    generator: torch.Generator | None = None,
                    threshold: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian vote + threshold (Alg. 3, Phases II-III): returns (output, noisy votes).

    Noise N(0, sigma^2) is drawn in float64 for every coordinate. With ``threshold`` the output
    is +1 where noisy >= beta N, -1 where noisy <= -beta N, 0 elsewhere; without it the output
    is the noisy vote sum itself (the ``tab:components`` ablation; still (lambda, 2 k lambda /
    sigma^2)-RDP since thresholding is only post-processing).
    """
    sigma = positive_float("sigma", sigma)
    beta = nonneg_float("beta", beta)
    n_teachers = positive_int("n_teachers", n_teachers)
    boolean("threshold", threshold)
    noise = torch.randn(votes.shape, generator=generator, device=votes.device,
                        dtype=torch.float64)
    noisy = votes.to(torch.float64) + sigma * noise
    if not threshold:
        return noisy, noisy
    return threshold_votes(noisy, beta, n_teachers).to(votes.dtype), noisy


@dataclass(frozen=True)
class TopAggResult:
    """``output`` [Q, d] in {-1, 0, 1} (noisy sum when thresholding is off), ``votes`` the clean
    vote sums [Q, d] (for the data-dependent bound; never released), ``noisy_votes`` [Q, d]."""

    output: torch.Tensor
    votes: torch.Tensor
    noisy_votes: torch.Tensor


def topagg(grads: torch.Tensor, k: int, sigma: float, beta: float, c: float | None,
           generator: torch.Generator | None = None, normalize: str = "paper",
           stochastic: bool = True, threshold: bool = True) -> TopAggResult:
    """TopAgg (paper Alg. 3) on ``grads`` [Q, N, d]: one private aggregation per query.

    ``beta`` is a fraction of the number of teachers N. Sensitivity 2 sqrt(k) per query
    (Lemma 1); account each of the Q queries with ``datalens_lib.privacy`` (Theorem 3).
    Ablations (``tab:components``): ``k = d`` (no top-k), ``stochastic=False`` (plain sign),
    ``threshold=False`` (noisy vote sum).
    """
    grads = check_grads(grads)
    votes = vote_sum(grads, k, c, generator, normalize, stochastic)
    output, noisy = noisy_threshold(votes, sigma, beta, grads.shape[1], generator, threshold)
    return TopAggResult(output=output, votes=votes, noisy_votes=noisy)


@dataclass(frozen=True)
class TopAgg(Aggregator):
    """TopAgg's parameters, validated once; call it on [Q, N, d] gradients. Also the
    ``topagg`` aggregator of the training loop (``aggregation.base``): statistic = vote sums,
    release = Gaussian vote + threshold, sensitivity 2 sqrt(k) (Lemma 1).

    >>> agg = TopAgg(k=200, sigma=5000.0, beta=0.7, c=1e-5)
    >>> agg.l2_sensitivity  # L2 sensitivity of the vote sum (Lemma 1)
    28.284271247461902
    """

    k: int
    sigma: float
    beta: float
    c: float | None = None
    normalize: str = "paper"
    stochastic: bool = True
    threshold: bool = True

    def __post_init__(self):
        positive_int("k", self.k)
        positive_float("sigma", self.sigma)
        nonneg_float("beta", self.beta)
        _check_c(self.c)
        choice("normalize", self.normalize, NORMALIZATIONS)
        boolean("stochastic", self.stochastic)
        boolean("threshold", self.threshold)

    name = "topagg"

    @property
    def l2_sensitivity(self) -> float:
        """L2 sensitivity of the vote sum (Lemma 1)."""
        return 2.0 * math.sqrt(self.k)

    def sensitivity(self, d: int, n_teachers: int) -> float:
        return self.l2_sensitivity

    def partial(self, grads: torch.Tensor, ctx: None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
        return vote_sum(grads, self.k, self.c, generator, self.normalize, self.stochastic)

    def release(self, stat: torch.Tensor, ctx: None, n_teachers: int,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return noisy_threshold(stat, self.sigma, self.beta, n_teachers, generator,
                               self.threshold)

    def __call__(self, grads: torch.Tensor,
                 generator: torch.Generator | None = None) -> TopAggResult:
        return topagg(grads, self.k, self.sigma, self.beta, self.c, generator, self.normalize,
                      self.stochastic, self.threshold)
