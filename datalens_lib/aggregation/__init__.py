"""Private gradient aggregators: TopAgg (paper Algs. 2-3) and, for ``tab:compression``,
D2P-Fed (Algs. 7-8) and FetchSGD (Alg. 9) behind one interface (``base.Aggregator``)."""

from .base import AGGREGATORS, Aggregator, threshold_votes
from .d2pfed import D2PFed
from .fetchsgd import CountSketch, FetchSGD
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


def make_aggregator(cfg) -> Aggregator:
    """The aggregator a DataLens config names (``TrainConfig.aggregator``)."""
    name = cfg.aggregator
    if name == "topagg":
        return TopAgg(cfg.k, cfg.sigma, cfg.beta, cfg.c, cfg.normalize, cfg.stochastic,
                      cfg.threshold)
    family, variant = name.split("-")
    if family == "d2pfed":
        return D2PFed(cfg.sigma, cfg.beta, cfg.c, cfg.levels, variant)
    if family == "fetchsgd":
        return FetchSGD(cfg.k, cfg.sigma, cfg.beta, cfg.c, cfg.sketch_rows, cfg.sketch_cols,
                        cfg.sketch_seed, variant, cfg.normalize)
    raise ValueError(f"unknown aggregator {name!r}; expected one of {AGGREGATORS}")


__all__ = [
    "AGGREGATORS",
    "Aggregator",
    "CountSketch",
    "D2PFed",
    "FetchSGD",
    "NORMALIZATIONS",
    "TopAgg",
    "TopAggResult",
    "make_aggregator",
    "noisy_threshold",
    "threshold_votes",
    "topagg",
    "topk_sto_sign",
    "topk_sto_sign_sparse",
    "vote_sum",
]
