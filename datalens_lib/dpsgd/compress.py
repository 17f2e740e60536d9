"""Per-example gradient compression inside DP-SGD (paper appendix "TopAgg for DP SGD
Training", Algorithm "DP SGD training via TopAgg").

``norm_topk(g, k)`` (the paper's NormTopK, 0 < k <= 1): for each row g of ``[B, d]``, sort the
coordinates by g_i^2 in decreasing order and keep the longest prefix whose squared sum stays
within k * ||g||^2; zero the rest. So ||out|| <= sqrt(k) * ||g||, and for a row clipped to C the
L2 sensitivity of the sum under add/remove-one is sqrt(k) * C.

``dim_topk(g, k)`` (``tab:dpsgd-ablation``'s "dimension-based" variant, which the paper does not
define; we read it as): keep the ceil(k * d) largest-magnitude coordinates. It bounds the norm
by ||g|| only (a row whose mass sits in few coordinates keeps it all), so its sensitivity is
C, not sqrt(k) * C.

Our choices where the paper is silent:

* k >= 1 is the identity (a cumulative sum compared with k * total could otherwise drop the
  last coordinate by rounding);
* when even the largest coordinate exceeds k * ||g||^2 the norm selection is empty and the
  row becomes zero (the literal rule; sensitivity is unaffected);
* exactly tied values at the boundary are broken by the sort's order (deterministic).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from .._validate import _shown, positive_float, positive_int


def _check_k(k: float) -> float:
    try:
        return positive_float("k", k)
    except ValueError:
        raise ValueError(f"k must be a finite number > 0 (a fraction; k >= 1 keeps all), got "
                         f"{_shown(k)}") from None


def _check_prefilter(prefilter: int | None) -> None:
    if prefilter is not None:
        positive_int("prefilter (None: a full sort)", prefilter)


def _check_rows(g: torch.Tensor, *, finite: bool = True) -> torch.Tensor:
    """``g``: per-example rows [B, d], floating point (and finite where ``finite``)."""
    if not isinstance(g, torch.Tensor) or g.dim() != 2 or not g.is_floating_point():
        what = (f"a {g.dtype} tensor of shape {tuple(g.shape)}" if isinstance(g, torch.Tensor)
                else type(g).__name__)
        raise ValueError(f"g must be a floating-point tensor of per-example rows [B, d], got "
                         f"{what}")
    if finite and not bool(torch.isfinite(g).all()):
        raise ValueError("g contains NaN or infinite values")
    return g


#: NormTopK first looks at each row's PREFILTER largest squares (``torch.topk``); a row whose
#: selection does not end inside them is looked at again with 4x as many, and so on, up to a
#: full sort of that row. Same output as a full sort of every row (up to the order of exactly
#: tied values), several times faster for d in the tens of thousands (a DP-SGD model's
#: gradient): on the Opacus MNIST CNN (d = 26,010, B = 512, after 300 SGD steps) the selection
#: at k = 0.8 has a median of ~1,600 coordinates and up to ~3,000
#: (``benchmarks/results/dpsgd-cpu-2core.json``), so a few rows need more than 2048 and only
#: those are looked at again.
PREFILTER = 2048


def norm_topk_selection(g: torch.Tensor, k: float, prefilter: int | None = PREFILTER
                        ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """NormTopK's selection (module doc) of each row of ``g`` [B, d] (0 < k < 1, B >= 1)
    without writing the compressed rows: groups ``(rows, idx, kept)``, where ``idx`` [r, w]
    are the columns of the w largest squares of the rows ``rows`` in decreasing order and
    ``kept`` [r, w] marks NormTopK's prefix among them. Every row is in exactly one group;
    ``prefilter=None`` sorts every row in full (the reference)."""
    if not 0 < _check_k(k) < 1:
        raise ValueError(f"k: the selection needs 0 < k < 1 (k >= 1 keeps every coordinate: "
                         f"norm_topk returns the row), got {k!r}")
    _check_prefilter(prefilter)
    _check_rows(g, finite=False)  # (the optimizer's rows are finite: it zeroes the others)
    sq = g.square()
    limit = k * sq.sum(dim=1)
    d = g.shape[1]
    rows = torch.arange(len(sq), device=g.device)  # rows whose selection is still open
    width = d if prefilter is None else min(prefilter, d)
    while rows.numel():
        sub = sq if len(rows) == len(sq) else sq[rows]
        if width < d:
            s, idx = torch.topk(sub, width, dim=1, largest=True, sorted=True)
        else:
            s, idx = torch.sort(sub, dim=1, descending=True, stable=True)
        c = torch.cumsum(s, dim=1)
        # closed: the prefix's sum reaches the limit, so the selection ends inside it (a full
        # sort closes every row). At equality the whole prefix is kept and every coordinate
        # after it is either zero (kept or not, the same row) or passes the limit; a zero row
        # (limit 0) closes in the first pass.
        closed = c[:, -1] >= limit[rows] if width < d else torch.ones_like(rows,
                                                                         dtype=torch.bool)
        if bool(closed.all()):
            yield rows, idx, c <= limit[rows, None]
        elif bool(closed.any()):
            yield rows[closed], idx[closed], c[closed] <= limit[rows[closed], None]
        rows = rows[~closed]
        width = min(4 * width, d)


def norm_topk(g: torch.Tensor, k: float, prefilter: int | None = PREFILTER) -> torch.Tensor:
    """NormTopK of each row of ``g`` [B, d] (module doc); ``prefilter=None`` sorts every row
    in full (the reference)."""
    k = _check_k(k)
    _check_prefilter(prefilter)
    _check_rows(g)
    if k >= 1 or g.numel() == 0:
        return g
    keep = torch.zeros_like(g, dtype=torch.bool)
    for rows, idx, kept in norm_topk_selection(g, k, prefilter):
        keep[rows] = torch.zeros(len(rows), g.shape[1], dtype=torch.bool,
                                 device=g.device).scatter_(1, idx, kept)
    return g * keep


def dim_topk(g: torch.Tensor, k: float) -> torch.Tensor:
    """Keep the ceil(k * d) largest-magnitude coordinates of each row of ``g`` [B, d]."""
    k = _check_k(k)
    _check_rows(g)
    if k >= 1 or g.numel() == 0:
        return g
    m = max(1, math.ceil(k * g.shape[1]))
    idx = torch.topk(g.abs(), m, dim=1, sorted=False).indices
    return torch.zeros_like(g).scatter_(1, idx, g.gather(1, idx))


SELECTIONS = {"norm": norm_topk, "dim": dim_topk}
#: where the selection runs: over the concatenation of all parameter gradients (``flat``, the
#: paper's vector notation) or within each parameter tensor (``layer``, ours); either way
#: ||out||^2 <= k ||g||^2 per example, so the sensitivity is the same
SCOPES = ("flat", "layer")


def sensitivity(selection: str, k: float, max_grad_norm: float) -> float:
    """L2 sensitivity of the sum of compressed, clipped rows under add/remove-one."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {sorted(SELECTIONS)}, got {selection!r}")
    k = _check_k(k)
    max_grad_norm = positive_float("max_grad_norm", max_grad_norm)
    return (math.sqrt(min(k, 1.0)) if selection == "norm" else 1.0) * max_grad_norm
