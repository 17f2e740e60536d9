"""Data-dependent RDP bound for TopAgg (paper Theorems 4-5; Papernot et al. 2018, Thm. 6).

For one TopAgg query with clean vote sums ``f`` (before noise), threshold ``tau = beta N`` and
noise ``sigma``, every output coordinate is independent:

    P[+1] = Phi((f - tau) / sigma),  P[-1] = Phi((-tau - f) / sigma),  P[0] = 1 - P[+1] - P[-1].

The most likely output g* takes each coordinate's most likely value, and

    q~ = P[M(D) != g*] = 1 - prod_j max(P_j[+1], P_j[-1], P_j[0])       (paper Theorem 5)

(the paper prints Theorem 5 with approximate per-coordinate terms; this module uses the exact
probabilities above). Everything is computed in log space with ``scipy.special.log_ndtr`` in
float64, so d = 12288 coordinates do not underflow.

Papernot et al.'s Theorem 6 then bounds the order-lambda RDP of that query on this dataset by a
function of q~ and of the mechanism's data-independent RDP at two higher orders mu1, mu2. For
TopAgg the data-independent RDP is ``2 k mu / sigma^2`` (a Gaussian with noise multiplier
``s = sigma / (2 sqrt(k))``); mu2 = s sqrt(log(1/q~)) and mu1 = mu2 + 1 are the choices that
Papernot et al. use for GNMax. Per query we keep min(data-dependent, data-independent).

Important: a data-dependent epsilon depends on the private data, so it is **not itself a
differentially private release**; publishing it needs e.g. smooth sensitivity (Papernot et al.
2018, Sec. 4). The book uses it only to compare with the data-independent bound, as the paper's
Figure ``fig:dept_bound`` does. Hand-written because no maintained library implements
Theorem 6 for a multi-dimensional thresholded Gaussian vote.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, logsumexp

from .._validate import (
    finite_array,
    nonneg_float,
    positive_float,
    positive_int,
    rdp_orders,
    square,
)


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - exp(x)) for x <= 0, accurate everywhere (-inf at x = 0)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    small = x > -math.log(2.0)
    with np.errstate(divide="ignore"):
        out[small] = np.log(-np.expm1(x[small]))
    out[~small] = np.log1p(-np.exp(x[~small]))
    return out


def _log_ndtr_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Phi(b) - Phi(a)) for a <= b, stable in both tails."""
    upper = a > 0  # both in the upper tail: Phi(b) - Phi(a) = Phi(-a) - Phi(-b)
    hi = np.where(upper, log_ndtr(-a), log_ndtr(b))
    lo = np.where(upper, log_ndtr(-b), log_ndtr(a))
    with np.errstate(invalid="ignore"):
        return hi + _log1mexp(np.minimum(lo - hi, 0.0))


def outcome_log_probs(votes, sigma: float, threshold: float) -> np.ndarray:
    """log P[+1], log P[-1], log P[0] per coordinate, stacked on a new last axis (float64)."""
    sigma = positive_float("sigma", sigma)
    threshold = nonneg_float("threshold", threshold)
    # NaN votes would give a NaN log q~, which data_dependent_rdp used to read as "no bound"
    f = finite_array("votes", votes, what="finite vote sums")
    pos = log_ndtr((f - threshold) / sigma)
    neg = log_ndtr((-threshold - f) / sigma)
    zero = _log_ndtr_diff((-threshold - f) / sigma, (threshold - f) / sigma)
    return np.stack([pos, neg, zero], axis=-1)


def topagg_log_q_tilde(votes, sigma: float, beta: float, n_teachers: int) -> np.ndarray:
    """log q~ = log P[TopAgg output != its most likely output], from the clean vote sums.

    ``votes`` is [d] (one query) or [Q, d]; returns a scalar array or [Q]. Where the product in
    Theorem 5 rounds to 1 in float64, the union bound sum_j P_j[not mode] (a valid upper bound
    on q~, exact to first order) is used instead.
    """
    n_teachers = positive_int("n_teachers", n_teachers)
    beta = nonneg_float("beta", beta)
    lp = outcome_log_probs(votes, sigma, beta * n_teachers)
    mode = np.argmax(lp, axis=-1)
    others = np.where(np.arange(3) == mode[..., None], -np.inf, lp)
    log_r = logsumexp(others, axis=-1)  # log P_j[coordinate j differs from its mode]
    log_one_minus_q = _log1mexp(log_r).sum(axis=-1)
    union = logsumexp(log_r, axis=-1)
    with np.errstate(divide="ignore"):
        exact = _log1mexp(np.minimum(log_one_minus_q, 0.0))
    use_union = log_one_minus_q > -1e-12
    return np.minimum(np.where(use_union, union, exact), 0.0)


def _log_q(log_q) -> float:
    """``log_q`` as a float: a real number (a numpy scalar or 0-d array too), never NaN (a NaN
    used to fall through to the data-independent value without a word), a bool or text."""
    value = math.nan
    if not isinstance(log_q, (bool, np.bool_, str, bytes)) and np.ndim(log_q) == 0:
        try:
            value = float(log_q)
        except (TypeError, ValueError):
            pass
    if math.isnan(value):
        raise ValueError(f"log q~ must be a number <= 0, got {log_q!r}")
    return value


def data_dependent_rdp(log_q: float, orders, k: int, sigma: float) -> np.ndarray:
    """Per-order RDP of one TopAgg query given log q~: min(Thm. 6 bound, 2 k lambda / sigma^2).

    Falls back to the data-independent value wherever Theorem 6's conditions (lambda <= mu1,
    mu2 > 1, q~ e^{eps2} < 1 and q~ <= e^{(mu2-1) eps2} / (mu1/(mu1-1) * mu2/(mu2-1))^mu2)
    do not hold, so the result is never looser than the data-independent bound.
    """
    k = positive_int("k", k)
    sigma = positive_float("sigma", sigma)
    return gaussian_data_dependent_rdp(log_q, orders, square(sigma) / (2.0 * k))


def gaussian_data_dependent_rdp(log_q: float, orders, var: float) -> np.ndarray:
    """Papernot et al. (2018) Theorem 6 for a mechanism whose data-independent RDP is
    ``lambda / var``, given log q (q: probability of an outcome other than the most likely
    one), with their choice mu2 = sqrt(var log(1/q)), mu1 = mu2 + 1; the data-independent value
    wherever the theorem's conditions fail. TopAgg: var = sigma^2 / (2k); GNMax with noise
    sigma: var = sigma^2; their threshold check with noise sigma_1: var = 2 sigma_1^2."""
    var = positive_float("var", var)
    orders = rdp_orders("orders", orders)
    log_q = _log_q(log_q)
    if log_q > 0:
        raise ValueError(f"log q~ must be <= 0, got {log_q}")
    independent = orders / var
    if log_q == 0.0 or not math.isfinite(log_q):
        if log_q == -math.inf:
            raise ValueError("log q~ = -inf: q~ must be a strictly positive upper bound")
        return independent
    mu2 = math.sqrt(var * -log_q)
    mu1 = mu2 + 1.0
    eps1, eps2 = mu1 / var, mu2 / var
    if mu2 <= 1.0 or -log_q <= eps2:
        return independent
    cond = (mu2 - 1.0) * eps2 - mu2 * (math.log(mu1 / (mu1 - 1.0)) + math.log(mu2 / (mu2 - 1.0)))
    if log_q > cond:
        return independent
    log_1mq = float(_log1mexp(np.array(log_q)))
    log_a = log_1mq - float(_log1mexp(np.array((log_q + eps2) * (mu2 - 1.0) / mu2)))
    log_b = eps1 - log_q / (mu1 - 1.0)
    lam1 = orders - 1.0
    bound = np.logaddexp(log_1mq + lam1 * log_a, log_q + lam1 * log_b) / lam1
    valid = orders <= mu1
    return np.where(valid, np.minimum(bound, independent), independent)
