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
import numpy as np
from dp_accounting import pld, rdp
from scipy.special import log_ndtr, logsumexp

from .._validate import (
    choice,
    nonneg_int,
    positive_float,
    positive_int,
    probability_open,
    square,
)
from .accountant import (
    CONVERSIONS,
    PAPER_ORDERS,
    RDP_ORDERS,
    _largest_within,
    accountant_z,
    rdp_to_epsilon_paper,
)
from .data_dependent import gaussian_data_dependent_rdp


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
        with np.errstate(divide="ignore", over="ignore"):  # extreme z: RDP inf or 0
            rdp_values = queries * PAPER_ORDERS / (2.0 * square(z))
        return rdp_to_epsilon_paper(rdp_values, PAPER_ORDERS, delta)[0]
    acc = rdp.RdpAccountant(orders=list(RDP_ORDERS)) if conversion == "rdp" else \
        pld.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(accountant_z(z)), queries)
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


#: Below this sound noise multiplier the ``pld`` conversion is skipped: epsilon is then in the
#: hundreds or more and dp-accounting's PLD grid takes minutes to build (z = 0.1 already does).
PLD_MIN_Z = 0.3


class CompressorAccountant:
    """The two ledgers of a compressor inside DataLens (``aggregation.base``), per query one
    Gaussian mechanism:

    ``paper``
        the official code's charge: noise multiplier ``z_charged`` = sigma / the sensitivity
        it assumes, converted as there (Mironov 2017 Prop. 3 on ``PAPER_ORDERS``). A DP
        guarantee only where that sensitivity is valid (``sound_charge``).
    ``rdp``, ``pld``
        the sound sensitivity (``z_sound``), converted by dp-accounting; ``pld`` is left out
        when ``z_sound`` < ``PLD_MIN_Z`` (see there).

    Training stops on the config's ``conversion`` (``paper`` by default, as the official
    code stops)."""

    def __init__(self, z_charged: float, z_sound: float, delta: float):
        self.z_charged = positive_float("z_charged", z_charged)
        self.z_sound = positive_float("z_sound", z_sound)
        self.delta = probability_open("delta", delta)
        self.queries = 0

    @property
    def sound_charge(self) -> bool:
        """Whether the ``paper`` ledger charges at least the sound sensitivity."""
        return self.z_charged <= self.z_sound * (1 + 1e-12)

    def add_queries(self, n: int) -> None:
        self.queries += nonneg_int("n", n)

    def _z(self, conversion: str) -> float:
        choice("conversion", conversion, CONVERSIONS)
        return self.z_charged if conversion == "paper" else self.z_sound

    def epsilon(self, conversion: str = "paper") -> float:
        return gaussian_epsilon(self.queries, self._z(conversion), self.delta, conversion)

    def epsilon_if(self, extra_queries: int, conversion: str = "paper") -> float:
        return gaussian_epsilon(self.queries + nonneg_int("extra_queries", extra_queries),
                                self._z(conversion), self.delta, conversion)

    def max_queries(self, epsilon: float, conversion: str = "paper") -> int:
        return gaussian_max_queries(epsilon, self._z(conversion), self.delta, conversion)

    def ledgers(self) -> dict[str, float]:
        """epsilon under ``paper``, ``rdp`` and (unless skipped) ``pld``."""
        out = {c: self.epsilon(c) for c in ("paper", "rdp")}
        if self.z_sound >= PLD_MIN_Z:
            out["pld"] = self.epsilon("pld")
        return out

    def event(self) -> dp_accounting.DpEvent:
        """The sound ledger as a dp_accounting event."""
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(self.z_sound),
                                                 self.queries)

    def state_dict(self) -> dict:
        return {"z_charged": self.z_charged, "z_sound": self.z_sound, "delta": self.delta,
                "queries": self.queries}

    @classmethod
    def from_state_dict(cls, state: dict) -> CompressorAccountant:
        acc = cls(state["z_charged"], state["z_sound"], state["delta"])
        acc.queries = int(state["queries"])
        return acc


class GPATEDataDependentLedger:
    """The official G-PATE code's ledger (AI-secure/G-PATE ``rdp_utils.gnmax_thresh_aggregator``
    with Papernot et al. 2018's ``pate_core``), kept as the ``data_dependent`` ledger of a
    G-PATE record (its ``paper`` ledger is the simple RDP conversion of the sound,
    data-independent one, :func:`gpate_noise_multiplier`): **not a DP guarantee** -- it depends
    on the private votes and is released without smooth-sensitivity sanitisation. Per query and
    projected dimension:

    - the threshold check, always: with p = P[max count + N(0, sigma_1^2) >= t] computed from
      the clean counts (max rounded, as there), log q = min(log p, log(1 - p)) and Theorem 6
      for var = 2 sigma_1^2 (sensitivity 1);
    - GNMax, only when the check passed: log q from the union bound
      sum_{i != i*} P[N(0, 2 sigma_2^2) > n_i* - n_i] (capped at 1 - 1/bins) and Theorem 6
      for var = sigma_2^2.

    A fixed outcome (log q = -inf) costs 0, as there. Orders and conversion: the official
    ones (``PAPER_ORDERS``, Mironov 2017 Prop. 3)."""

    def __init__(self, sigma_thresh: float, sigma_vote: float, threshold: float,
                 delta: float):
        self.s1 = positive_float("sigma_thresh", sigma_thresh)
        self.s2 = positive_float("sigma_vote", sigma_vote)
        self.t = positive_float("threshold", threshold)
        self.delta = probability_open("delta", delta)
        self.rdp = np.zeros_like(PAPER_ORDERS)

    def _rdp(self, log_q: float, var: float) -> np.ndarray:
        if log_q == -math.inf:
            return np.zeros_like(PAPER_ORDERS)
        return gaussian_data_dependent_rdp(min(log_q, 0.0), PAPER_ORDERS, var)

    def add(self, counts: np.ndarray, answered: np.ndarray) -> None:
        """counts [..., bins] (clean histograms), answered [...] (the released outcome)."""
        counts = np.asarray(counts, dtype=np.float64)
        flat = counts.reshape(-1, counts.shape[-1])
        ans = np.asarray(answered, dtype=bool).reshape(-1)
        bins = flat.shape[1]
        for c, a in zip(flat, ans, strict=True):
            log_p = float(log_ndtr((round(float(c.max())) - self.t) / self.s1))
            log_q = min(log_p, _log1mexp_scalar(log_p))
            self.rdp += self._rdp(log_q, 2.0 * self.s1**2)
            if a:
                gap = c.max() - np.delete(c, int(c.argmax()))
                log_q = float(logsumexp(log_ndtr(-gap / (math.sqrt(2.0) * self.s2))))
                self.rdp += self._rdp(min(log_q, math.log(1.0 - 1.0 / bins)), self.s2**2)

    def epsilon(self) -> float:
        if not self.rdp.any():
            return 0.0
        return rdp_to_epsilon_paper(self.rdp, PAPER_ORDERS, self.delta)[0]

    def state_dict(self) -> dict:
        return {"sigma_thresh": self.s1, "sigma_vote": self.s2, "threshold": self.t,
                "delta": self.delta, "rdp": self.rdp.tolist()}

    @classmethod
    def from_state_dict(cls, st: dict) -> GPATEDataDependentLedger:
        led = cls(st["sigma_thresh"], st["sigma_vote"], st["threshold"], st["delta"])
        led.rdp = np.asarray(st["rdp"], dtype=np.float64)
        return led


def _log1mexp_scalar(x: float) -> float:
    """log(1 - exp(x)) for x <= 0 (-inf at 0)."""
    if x >= 0:
        return -math.inf
    return math.log(-math.expm1(x)) if x > -0.693 else math.log1p(-math.exp(x))
