"""G-PATE's gradient aggregator (Long et al. 2021, "G-PATE", Sec. 4; official
AI-secure/G-PATE): random projection, per-dimension histogram voting, Confident-GNMax.

Per query j (one synthetic sample) and a fresh random projection P_j in R^{d x p} (entries
N(0, 1/p)): every teacher's gradient g_ij is projected, u_ij = g_ij P_j, clipped to [-s, s] and
placed in one of ``bins`` equal bins of [-s, s] per projected dimension. The counts over
teachers form a histogram per (query, dimension) -- additive over teacher chunks
(``projected_histogram``). Confident-GNMax (Papernot et al. 2018) then answers a dimension only
if its largest count plus N(0, sigma_1^2) reaches ``threshold_frac * N``; the answer is the
centre of the bin that wins under N(0, sigma_2^2) noise, else 0 (``confident_gnmax``). The
answers are back-projected, r_j P_j^T (``back_project``).

Privacy: replacing one record changes one teacher's histogram entry in each dimension: the
largest count moves by at most 1 (the threshold check has sensitivity 1) and the histogram by
sqrt 2 in L2 (GNMax); see ``privacy.gaussian.gpate_noise_multiplier``.
"""

from __future__ import annotations

import math

import torch

from .._validate import interval, positive_float, positive_int
from .base import check_grads


def random_projection(queries: int, d: int, proj_dim: int, generator: torch.Generator,
                      device: torch.device | str = "cpu") -> torch.Tensor:
    """Fresh Gaussian projections [Q, d, p] with N(0, 1/p) entries, one per query."""
    p = positive_int("proj_dim", proj_dim)
    return torch.randn(positive_int("queries", queries), positive_int("d", d), p,
                       generator=generator, device=device) / math.sqrt(p)


def projected_histogram(grads: torch.Tensor, proj: torch.Tensor, clip: float,
                        bins: int) -> torch.Tensor:
    """Counts [Q, p, bins] of the teachers' projected, clipped gradients.

    grads [Q, n, d] (queries, teachers of this chunk, dims), proj [Q, d, p]. A value exactly
    at +s falls in the last bin."""
    grads = check_grads(grads)
    if not isinstance(proj, torch.Tensor) or proj.dim() != 3 \
            or grads.shape[0] != proj.shape[0] or grads.shape[2] != proj.shape[1]:
        raise ValueError(f"grads [Q, n, d] and proj [Q, d, p] do not match: "
                         f"{tuple(grads.shape)}, {tuple(getattr(proj, 'shape', ()))}")
    s = positive_float("clip", clip)
    bins = positive_int("bins", bins)
    u = torch.bmm(grads.to(proj.dtype), proj)  # [Q, n, p]
    if not torch.isfinite(u).all():
        raise ValueError("grads must be finite: non-finite teacher gradients (or their "
                         "projections) reached the G-PATE histogram")
    u = u.clamp_(-s, s)
    idx = ((u + s) * (bins / (2 * s))).floor_().clamp_(0, bins - 1).long()
    counts = torch.zeros(u.shape[0], u.shape[2], bins, device=u.device, dtype=torch.float64)
    counts.scatter_add_(2, idx.transpose(1, 2), torch.ones_like(idx.transpose(1, 2),
                                                                dtype=torch.float64))
    return counts


def confident_gnmax(counts: torch.Tensor, n_teachers: int, sigma_thresh: float,
                    sigma_vote: float, threshold_frac: float, clip: float,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor,
                                                                       torch.Tensor]:
    """Answers [Q, p] (bin centres, 0 where the threshold check fails) and the mask of
    answered dimensions, from clean counts [Q, p, bins]."""
    n = positive_int("n_teachers", n_teachers)
    s1, s2 = positive_float("sigma_thresh", sigma_thresh), positive_float("sigma_vote",
                                                                          sigma_vote)
    threshold_frac = interval("threshold_frac", threshold_frac, 0, 1, low_closed=False,
                              high_closed=True)
    s = positive_float("clip", clip)
    bins = counts.shape[-1]
    noise1 = torch.randn(counts.shape[:-1], generator=generator, device=counts.device,
                         dtype=counts.dtype)
    answered = counts.max(-1).values + s1 * noise1 >= threshold_frac * n
    noise2 = torch.randn(counts.shape, generator=generator, device=counts.device,
                         dtype=counts.dtype)
    winner = (counts + s2 * noise2).argmax(-1)
    centre = -s + (winner.to(counts.dtype) + 0.5) * (2 * s / bins)
    return torch.where(answered, centre, torch.zeros_like(centre)), answered


def back_project(answers: torch.Tensor, proj: torch.Tensor) -> torch.Tensor:
    """r_j P_j^T: answers [Q, p], proj [Q, d, p] -> [Q, d]."""
    return torch.bmm(proj, answers.to(proj.dtype).unsqueeze(-1)).squeeze(-1)
