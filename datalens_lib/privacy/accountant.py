"""Data-independent privacy accounting for TopAgg (paper Lemma 1, Theorem 3).

Mechanism: one TopAgg query releases ``sum_i g~_i + N(0, sigma^2 I)`` where each teacher's
compressed gradient ``g~_i`` has at most k non-zero entries in {-1, +1}. Replacing one
teacher's data changes that teacher's vote vector only, so the L2 sensitivity of the vote sum
is ``2 sqrt(k)`` (Lemma 1: all k signs flipped). By the Gaussian mechanism's RDP
(Mironov 2017) one query is (lambda, 2 k lambda / sigma^2)-RDP for every order lambda > 1;
thresholding is post-processing, and T queries compose additively (Theorem 3).

Equivalently, one query is a Gaussian mechanism with sensitivity 1 and noise multiplier
``sigma / (2 sqrt(k))``; that is how the query is handed to dp-accounting.

Three conversions from the composed mechanism to (epsilon, delta)-DP:

``paper``
    ``eps = min_lambda T * 2 k lambda / sigma^2 + log(1/delta) / (lambda - 1)`` over the
    official code's order grid [1.1, 2, 3, ..., 199] (Mironov 2017, Prop. 3). Reproduces the
    paper's numbers.
``rdp``
    dp-accounting's ``RdpAccountant`` (its improved RDP-to-DP conversion) on a dense grid.
``pld``
    dp-accounting's ``PLDAccountant`` (privacy loss distributions; tight for Gaussians up to
    discretisation).

All arithmetic is float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import dp_accounting
import numpy as np
from dp_accounting import pld, rdp

from .._validate import (
    choice,
    nonneg_int,
    positive_float,
    positive_int,
    probability_open,
    rdp_orders,
    square,
)

#: Orders used by the official DataLens code: 1.1, then 2..199.
PAPER_ORDERS: np.ndarray = np.concatenate([[1.1], np.arange(2, 200)]).astype(np.float64)

#: Dense order grid for the ``rdp`` conversion (dp-accounting's default grid extended).
RDP_ORDERS: tuple[float, ...] = tuple(  # a superset of PAPER_ORDERS, so rdp <= paper
    [1.0 + x / 20.0 for x in range(1, 100)]
    + list(range(6, 200))
    + list(range(200, 512, 4))
    + [512, 768, 1024, 2048, 4096]
)

CONVERSIONS = ("paper", "rdp", "pld")

#: The key of a run's ``epsilon`` that holds a data-dependent ledger (TopAgg's Lemma 2 charge
#: of ``privacy.data_dependent``, G-PATE's official Papernot et al. 2018 ledger): its value is
#: a function of the clean votes, so it is never a DP guarantee on its own.
DATA_DEPENDENT = "data_dependent"


def data_independent_ledgers(epsilon: dict[str, float]) -> list[str]:
    """The keys of a run's ``epsilon`` that are data-independent ledgers, in order: the
    candidates for its ``privacy.dp_ledgers`` (``methods.harness.check_dp_ledgers``)."""
    return [c for c in epsilon if c != DATA_DEPENDENT]


def delta_note(delta: float, n: int) -> str | None:
    """None when ``delta < 1/n``; otherwise the sentence a run record carries. With
    ``delta >= 1/n`` an (ε, δ) guarantee admits a mechanism that publishes each of the ``n``
    records outright with probability δ, i.e. about δ·n records in all (the usual advice is
    δ well below 1/n). The paper's δ = 1e-5 is above 1/n for its CelebA training sets, so
    those configs keep it (faithful) and their records say so; DP-GAN refuses it."""
    positive_float("delta", delta)
    positive_int("n", n)
    if delta < 1 / n:
        return None
    return (f"delta = {delta:g} is not below 1/n = {1 / n:.3g} for these {n} records: the "
            "guarantee allows publishing each record with probability delta (about "
            f"{delta * n:.2g} records in all); kept as the config's (the paper's) setting")


def noise_multiplier(k: int, sigma: float) -> float:
    """sigma divided by TopAgg's L2 sensitivity 2 sqrt(k) (paper Lemma 1)."""
    k = positive_int("k", k)
    sigma = positive_float("sigma", sigma)
    return sigma / (2.0 * math.sqrt(k))


def topagg_rdp(orders, k: int, sigma: float) -> np.ndarray:
    """RDP of one TopAgg query at each order: 2 k lambda / sigma^2 (paper Theorem 3)."""
    k = positive_int("k", k)
    sigma = positive_float("sigma", sigma)
    orders = rdp_orders("RDP orders", orders)
    with np.errstate(divide="ignore", over="ignore"):  # extreme sigma: RDP inf or 0
        return 2.0 * k * orders / square(sigma)


def rdp_to_epsilon_paper(rdp_values, orders, delta: float) -> tuple[float, float]:
    """(epsilon, best order) by the simple conversion eps = R(lambda) + log(1/delta)/(lambda-1).

    This is the conversion of Mironov (2017, Prop. 3) that the official code uses.
    """
    delta = probability_open("delta", delta)
    orders = rdp_orders("orders", orders)
    rdp = np.asarray(rdp_values, dtype=np.float64)
    if rdp.shape != orders.shape:
        raise ValueError(f"rdp_values and orders must have one value per order, got shapes "
                         f"{rdp.shape} and {orders.shape}")
    if np.isnan(rdp).any() or (rdp < 0).any():
        raise ValueError("rdp_values must be >= 0 (+inf allowed), not NaN or negative")
    eps = rdp + math.log(1.0 / delta) / (orders - 1.0)
    i = int(np.argmin(eps))
    return float(eps[i]), float(orders[i])


#: the largest noise multiplier handed to dp-accounting: it squares the multiplier in Python
#: floats, which overflow past ~1.3e154. A larger one is charged as this one, which can only
#: over-state epsilon (more noise never costs more); epsilon is 0.0 there anyway.
MAX_ACCOUNTANT_Z = 1e150


def accountant_z(z: float) -> float:
    """``z`` capped at :data:`MAX_ACCOUNTANT_Z` for dp-accounting (conservative)."""
    return min(z, MAX_ACCOUNTANT_Z)


def _check(k, sigma, delta, conversion):
    return (positive_int("k", k), positive_float("sigma", sigma),
            probability_open("delta", delta), choice("conversion", conversion, CONVERSIONS))


def _epsilon(queries: int, k: int, sigma: float, delta: float, conversion: str) -> float:
    if queries == 0:
        return 0.0  # no query answered, nothing released
    if conversion == "paper":
        return rdp_to_epsilon_paper(queries * topagg_rdp(PAPER_ORDERS, k, sigma),
                                    PAPER_ORDERS, delta)[0]
    event = dp_accounting.GaussianDpEvent(accountant_z(noise_multiplier(k, sigma)))
    if conversion == "rdp":
        acc = rdp.RdpAccountant(orders=list(RDP_ORDERS))
    else:
        acc = pld.PLDAccountant()
    acc.compose(event, queries)
    return float(acc.get_epsilon(delta))


def topagg_epsilon(queries: int, k: int, sigma: float, delta: float,
                   conversion: str = "paper") -> float:
    """epsilon after ``queries`` TopAgg queries with top-k ``k`` and noise ``sigma``.

    Sensitivity 2 sqrt(k) (Lemma 1); accountant: RDP of the Gaussian mechanism composed over
    the queries, converted with ``conversion`` (``paper``, ``rdp`` or ``pld``; see module doc).
    """
    queries = nonneg_int("queries", queries)
    k, sigma, delta, conversion = _check(k, sigma, delta, conversion)
    return _epsilon(queries, k, sigma, delta, conversion)


def _largest_within(f: Callable[[int], float], target: float, upper_limit: int) -> int:
    """Largest integer T >= 0 with f(T) <= target, for f non-decreasing and f(0) = 0."""
    if f(1) > target:
        return 0
    lo, hi = 1, 2
    while f(hi) <= target:
        lo, hi = hi, hi * 2
        if hi > upper_limit:
            raise ValueError(f"more than {upper_limit} queries fit the budget; "
                             "check epsilon, sigma and k")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if f(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo


def topagg_max_queries(epsilon: float, k: int, sigma: float, delta: float,
                       conversion: str = "paper") -> int:
    """Largest number of TopAgg queries T whose epsilon stays within ``epsilon``.

    epsilon(T) <= epsilon < epsilon(T + 1) under the chosen conversion.
    """
    epsilon = positive_float("epsilon", epsilon)
    k, sigma, delta, conversion = _check(k, sigma, delta, conversion)
    return _largest_within(lambda t: _epsilon(t, k, sigma, delta, conversion), epsilon,
                           upper_limit=2**40)


def topagg_sigma_for_queries(queries: int, epsilon: float, k: int, delta: float,
                             conversion: str = "paper", rtol: float = 1e-6) -> float:
    """Smallest noise sigma (to relative tolerance ``rtol``, rounded up) such that ``queries``
    TopAgg queries stay within ``epsilon``."""
    queries = positive_int("queries", queries)
    epsilon = positive_float("epsilon", epsilon)
    rtol = positive_float("rtol", rtol)
    k, _, delta, conversion = _check(k, 1.0, delta, conversion)

    def eps(s: float) -> float:
        return _epsilon(queries, k, s, delta, conversion)

    # Bracket around the `paper` answer (cheap closed form): the tighter conversions need a
    # smaller sigma, but never absurdly small ones that would make the PLD grid explode.
    def eps_paper(s: float) -> float:
        return _epsilon(queries, k, s, delta, "paper")

    hi = 1.0
    while eps_paper(hi) > epsilon:
        hi *= 2.0
        if hi > 1e15:
            raise ValueError("no finite sigma reaches that epsilon")
    while eps(hi) > epsilon:
        hi *= 2.0
    lo = hi / 2.0
    while eps(lo) <= epsilon:
        hi, lo = lo, lo / 2.0
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo * hi)
        if eps(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi
