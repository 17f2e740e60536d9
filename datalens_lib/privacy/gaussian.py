"""A ledger for methods whose every query is a Gaussian mechanism of one fixed noise
multiplier z (L2 sensitivity 1 after scaling): RDP lambda / (2 z^2) per query.

Several Gaussian releases answered for the same query compose into one such Gaussian:
multipliers z_1 .. z_m give z = (sum_i z_i^-2)^-1/2 (RDP and privacy-loss distributions of
Gaussians compose exactly this way). G-PATE's query is one: per projected dimension a
threshold check (max count + N(0, sigma_1^2), sensitivity 1) and a GNMax vote (histogram +
N(0, sigma_2^2), L2 sensitivity sqrt 2), over p dimensions; see ``gpate_noise_multiplier``.

Conversions as for TopAgg (``accountant.py``): ``paper`` (Mironov 2017 Prop. 3 on the official
order grid), ``rdp`` and ``pld`` (dp-accounting). TopAgg keeps its own functions, which compute
2 k lambda / sigma^2 directly so that its committed numbers stay bit-identical.
"""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting import pld, rdp

from .._validate import choice, nonneg_int, positive_float, positive_int, probability_open
from .accountant import (
    CONVERSIONS,
    PAPER_ORDERS,
    RDP_ORDERS,
    _largest_within,
    rdp_to_epsilon_paper,
)


def gpate_noise_multiplier(sigma_thresh: float, sigma_vote: float, proj_dim: int) -> float:
    """One G-PATE query as one Gaussian: ``proj_dim`` threshold checks (sensitivity 1, noise
    ``sigma_thresh``) and ``proj_dim`` GNMax votes (sensitivity sqrt 2, noise ``sigma_vote``),
    all charged whether or not the threshold passes (data-independent)."""
    s1 = positive_float("sigma_thresh", sigma_thresh)
    s2 = positive_float("sigma_vote", sigma_vote)
    p = positive_int("proj_dim", proj_dim)
    return 1.0 / math.sqrt(p / s1**2 + p * 2.0 / s2**2)


def gaussian_epsilon(queries: int, z: float, delta: float, conversion: str = "paper") -> float:
    """epsilon after ``queries`` Gaussian queries of noise multiplier ``z``."""
    queries = nonneg_int("queries", queries)
    z = positive_float("z", z)
    delta = probability_open("delta", delta)
    choice("conversion", conversion, CONVERSIONS)
    if queries == 0:
        return 0.0
    if conversion == "paper":
        return rdp_to_epsilon_paper(queries * PAPER_ORDERS / (2.0 * z**2), PAPER_ORDERS,
                                    delta)[0]
    acc = rdp.RdpAccountant(orders=list(RDP_ORDERS)) if conversion == "rdp" else \
        pld.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(z), queries)
    return float(acc.get_epsilon(delta))


def gaussian_max_queries(epsilon: float, z: float, delta: float,
                         conversion: str = "paper") -> int:
    """Largest number of queries whose epsilon stays within ``epsilon``."""
    epsilon = positive_float("epsilon", epsilon)
    return _largest_within(lambda t: gaussian_epsilon(t, z, delta, conversion), epsilon,
                           upper_limit=2**40)


class GaussianQueryAccountant:
    """Counts queries of one noise multiplier; epsilon under each conversion."""

    def __init__(self, z: float, delta: float):
        self.z = positive_float("z", z)
        self.delta = probability_open("delta", delta)
        self.queries = 0

    def add_queries(self, n: int) -> None:
        self.queries += nonneg_int("n", n)

    def epsilon(self, conversion: str = "paper") -> float:
        return gaussian_epsilon(self.queries, self.z, self.delta, conversion)

    def epsilon_if(self, extra_queries: int, conversion: str = "paper") -> float:
        return gaussian_epsilon(self.queries + nonneg_int("extra_queries", extra_queries),
                                self.z, self.delta, conversion)

    def event(self) -> dp_accounting.DpEvent:
        """The whole ledger as a dp_accounting event (recomputable under any accountant)."""
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(self.z),
                                                 self.queries)

    def state_dict(self) -> dict:
        return {"z": self.z, "delta": self.delta, "queries": self.queries}

    @classmethod
    def from_state_dict(cls, state: dict) -> GaussianQueryAccountant:
        acc = cls(state["z"], state["delta"])
        acc.queries = int(state["queries"])
        return acc
