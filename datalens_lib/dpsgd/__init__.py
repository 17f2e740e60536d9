"""TopAgg inside DP-SGD (the paper's appendix): compression (:mod:`.compress`), the Opacus
optimizer (:mod:`.optimizer`) and the training runs (:mod:`.train`); the accountant is
:mod:`datalens_lib.privacy.subsampled`."""

from .compress import dim_topk, norm_topk, sensitivity
from .optimizer import TopAggDPOptimizer

__all__ = ["TopAggDPOptimizer", "dim_topk", "norm_topk", "sensitivity"]
