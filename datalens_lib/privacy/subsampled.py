"""Privacy of DP-SGD: the Poisson-subsampled Gaussian mechanism composed over steps.

Mechanism (paper appendix, Algorithm "DP SGD training via TopAgg"; also plain GM-DP): each step
samples every example independently with rate q = B / n, sums the processed per-example
gradients (L2 sensitivity Delta: C for clipping, sqrt(k) C after NormTopK) and adds
N(0, (sigma Delta)^2 I). Neighbouring relation: add/remove one example. Because the noise is
sigma times the sensitivity, the accountant sees noise multiplier sigma and rate q whatever k.

Ledgers (all data-independent, all sound; they differ in tightness):

``paper``
    RDP of the subsampled Gaussian (Opacus's ``compute_rdp``, Mironov et al. 2019) converted
    with the simple bound eps = min_a R(a) + log(1/delta) / (a - 1) on a dense order grid up to
    1024. The paper's ε <= 0.1 cells cannot be reached with the Opacus of its time (orders
    <= 63), so it must have used a wider grid; this is our reading of its accountant and the
    ledger that sets the number of steps T for a budget.
``rdp``
    Opacus 1.6's ``RDPAccountant`` (its default orders, Balle et al. 2020 conversion).
``prv``
    Opacus 1.6's ``PRVAccountant`` (privacy random variables; the tightest of the three).
``pld``
    dp-accounting's PLD accountant of the same ``PoissonSampledDpEvent`` (a cross-check).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting import pld
from opacus.accountants import PRVAccountant, RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp

from .._validate import choice, interval, nonneg_int, positive_float, positive_int, probability_open
from .accountant import RDP_ORDERS, _largest_within, rdp_to_epsilon_paper

LEDGERS = ("paper", "rdp", "prv", "pld")
#: the ``paper`` ledger's orders: the dense grid up to 1024
DPSGD_PAPER_ORDERS: tuple[float, ...] = tuple(a for a in RDP_ORDERS if a <= 1024)


def _check(q, sigma, delta, ledger):
    q = interval("sample rate q", q, 0, 1, low_closed=False, high_closed=True)
    return (q, positive_float("sigma", sigma), probability_open("delta", delta),
            choice("ledger", ledger, LEDGERS))


def dpsgd_event(q: float, sigma: float, steps: int) -> dp_accounting.DpEvent:
    """The dp-accounting event of ``steps`` DP-SGD steps (noise multiplier ``sigma``)."""
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)


@functools.lru_cache(maxsize=512)
def _paper_rdp_per_step(q: float, sigma: float) -> np.ndarray:
    """One step's RDP on the ``paper`` orders (Opacus's ``compute_rdp`` with steps = 1; it
    multiplies this vector by the steps, so ε(T) from it is bit-identical to calling it with
    T): cached, since setting T by the budget evaluates ε at ~25 values of T."""
    orders = np.asarray(DPSGD_PAPER_ORDERS)
    rdp = compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=orders)
    rdp.setflags(write=False)
    return rdp


def opacus_epsilon(accountant: Any, delta: float) -> float:
    """ε of an Opacus accountant (RDP or PRV) without Opacus's warning that the optimal order
    is its largest: these ledgers are reported beside the ``paper`` one, which sets T on
    orders up to 1024, and the book says where Opacus's default orders are too few (the PRV
    accountant sizes its domain from the same RDP bound and warns alike). Other warnings
    pass."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
        return float(accountant.get_epsilon(delta))


def dpsgd_epsilon(steps: int, q: float, sigma: float, delta: float,
                  ledger: str = "paper") -> float:
    """ε of ``steps`` DP-SGD steps with sample rate ``q`` and noise multiplier ``sigma``."""
    steps = nonneg_int("steps", steps)
    q, sigma, delta, ledger = _check(q, sigma, delta, ledger)
    if steps == 0:
        return 0.0
    if ledger == "paper":
        orders = np.asarray(DPSGD_PAPER_ORDERS)
        return rdp_to_epsilon_paper(_paper_rdp_per_step(q, sigma) * steps, orders, delta)[0]
    if ledger == "rdp":
        acc = RDPAccountant()
        acc.history = [(sigma, q, steps)]
        return opacus_epsilon(acc, delta)
    if ledger == "prv":
        acc = PRVAccountant()
        acc.history = [(sigma, q, steps)]
        return opacus_epsilon(acc, delta)
    acc = pld.PLDAccountant()
    acc.compose(dpsgd_event(q, sigma, steps))
    return float(acc.get_epsilon(delta))


def dpsgd_steps_for_budget(epsilon: float, q: float, sigma: float, delta: float,
                           ledger: str = "paper", upper_limit: int = 10**7) -> int:
    """Largest number of steps T whose ε (under ``ledger``) stays within ``epsilon``; the
    paper sets T by the budget ("determined by the corresponding privacy budget")."""
    epsilon = positive_float("epsilon", epsilon)  # finite: ε = ∞ has no step limit
    q, sigma, delta, ledger = _check(q, sigma, delta, ledger)
    upper_limit = positive_int("upper_limit", upper_limit)
    return _largest_within(lambda t: dpsgd_epsilon(t, q, sigma, delta, ledger), epsilon,
                           upper_limit)


def dpsgd_ledgers(steps: int, q: float, sigma: float, delta: float) -> dict[str, float]:
    """ε of one run under every ledger (the run record stores all of them)."""
    return {name: dpsgd_epsilon(steps, q, sigma, delta, name) for name in LEDGERS}
