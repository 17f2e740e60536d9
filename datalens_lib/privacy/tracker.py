"""Running privacy ledger of a training run that issues TopAgg queries (paper Alg. 1, Thm. 3).

Tracks, per order of ``PAPER_ORDERS``, the composed data-independent RDP (2 k lambda / sigma^2
per query, sensitivity 2 sqrt(k)) and, when clean votes are supplied, the composed
data-dependent RDP (``data_dependent.py``; not a DP release by itself).
"""

from __future__ import annotations

import dp_accounting
import numpy as np

from .._validate import (
    choice,
    finite_array,
    nonneg_int,
    positive_float,
    positive_int,
    probability_open,
    square,
)
from .accountant import (
    CONVERSIONS,
    PAPER_ORDERS,
    noise_multiplier,
    rdp_to_epsilon_paper,
    topagg_epsilon,
)
from .data_dependent import data_dependent_rdp, topagg_log_q_tilde


class TopAggAccountant:
    """Accumulates TopAgg queries and reports epsilon under each conversion."""

    def __init__(self, k: int, sigma: float, delta: float):
        self.k = positive_int("k", k)
        self.sigma = positive_float("sigma", sigma)
        self.delta = probability_open("delta", delta)
        self.orders = PAPER_ORDERS
        self.queries = 0
        self.dependent_rdp = np.zeros_like(self.orders)
        self.dependent_queries = 0

    def event(self, k: int | None = None) -> dp_accounting.DpEvent:
        """The data-independent ledger as a dp_accounting event: each query a Gaussian
        mechanism of noise multiplier sigma / (2 sqrt(k)) (Lemma 1), composed (``k``: another
        top-k for the same noise, e.g. a coupled sensitivity)."""
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.GaussianDpEvent(noise_multiplier(k or self.k, self.sigma)),
            self.queries)

    def add_queries(self, n: int) -> None:
        """Record ``n`` queries without votes (data-independent accounting only)."""
        self.queries += nonneg_int("n", n)

    def add_votes(self, votes, beta: float, n_teachers: int) -> np.ndarray:
        """Record one query per row of the clean vote sums ``votes`` [Q, d]; returns log q~ [Q]."""
        votes = np.atleast_2d(finite_array("votes", votes, what="finite vote sums"))
        log_q = np.atleast_1d(topagg_log_q_tilde(votes, self.sigma, beta, n_teachers))
        for lq in log_q:
            self.dependent_rdp += data_dependent_rdp(float(lq), self.orders, self.k, self.sigma)
        self.queries += len(log_q)
        self.dependent_queries += len(log_q)
        return log_q

    def epsilon(self, conversion: str = "paper") -> float:
        """Data-independent epsilon of all queries so far (paper Theorem 3)."""
        choice("conversion", conversion, CONVERSIONS)
        return topagg_epsilon(self.queries, self.k, self.sigma, self.delta, conversion)

    def epsilon_if(self, extra_queries: int, conversion: str = "paper") -> float:
        """Data-independent epsilon after ``extra_queries`` more queries."""
        return topagg_epsilon(self.queries + nonneg_int("extra_queries", extra_queries),
                              self.k, self.sigma, self.delta, conversion)

    def data_dependent_epsilon(self) -> float:
        """Data-dependent epsilon (paper conversion) of the queries recorded with votes, plus
        the data-independent RDP of those recorded without. Not a DP release by itself."""
        if self.queries == 0:
            return 0.0
        plain = self.queries - self.dependent_queries
        total = self.dependent_rdp + plain * 2.0 * self.k * self.orders / square(self.sigma)
        return rdp_to_epsilon_paper(total, self.orders, self.delta)[0]

    def state_dict(self) -> dict:
        return {"k": self.k, "sigma": self.sigma, "delta": self.delta, "queries": self.queries,
                "dependent_queries": self.dependent_queries,
                "dependent_rdp": self.dependent_rdp.tolist()}

    @classmethod
    def from_state_dict(cls, state: dict) -> TopAggAccountant:
        acc = cls(state["k"], state["sigma"], state["delta"])
        acc.queries = int(state["queries"])
        acc.dependent_queries = int(state["dependent_queries"])
        acc.dependent_rdp = np.asarray(state["dependent_rdp"], dtype=np.float64)
        return acc
