"""Privacy accounting: TopAgg's data-independent (Thm. 3) and data-dependent (Thms. 4-5)
ledgers (``accountant``, ``data_dependent``, ``tracker``), the other compressors' and G-PATE's
Gaussian ledgers (``gaussian``), and DP-SGD's / DP-GAN's Poisson-subsampled Gaussian
(``subsampled``). Each module states its mechanism's sensitivity and neighbouring relation."""

from .accountant import (
    CONVERSIONS,
    DATA_DEPENDENT,
    PAPER_ORDERS,
    data_independent_ledgers,
    noise_multiplier,
    rdp_to_epsilon_paper,
    topagg_epsilon,
    topagg_max_queries,
    topagg_rdp,
    topagg_sigma_for_queries,
)
from .data_dependent import data_dependent_rdp, outcome_log_probs, topagg_log_q_tilde
from .tracker import TopAggAccountant

__all__ = [
    "CONVERSIONS",
    "DATA_DEPENDENT",
    "PAPER_ORDERS",
    "TopAggAccountant",
    "data_dependent_rdp",
    "data_independent_ledgers",
    "noise_multiplier",
    "outcome_log_probs",
    "rdp_to_epsilon_paper",
    "topagg_epsilon",
    "topagg_log_q_tilde",
    "topagg_max_queries",
    "topagg_rdp",
    "topagg_sigma_for_queries",
]
