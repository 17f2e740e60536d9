"""TopAgg: DP gradient compression and aggregation (paper Algs. 2-3)."""

from .topagg import (
    NORMALIZATIONS,
    TopAgg,
    TopAggResult,
    noisy_threshold,
    topagg,
    topk_sto_sign,
    topk_sto_sign_sparse,
    vote_sum,
)

__all__ = [
    "NORMALIZATIONS",
    "TopAgg",
    "TopAggResult",
    "noisy_threshold",
    "topagg",
    "topk_sto_sign",
    "topk_sto_sign_sparse",
    "vote_sum",
]
