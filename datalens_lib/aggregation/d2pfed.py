"""D2P-Fed (Wang et al. 2020) adapted to DataLens: k-level stochastic quantisation instead of
top-k stochastic signs (paper appendix, Algs. 7 ``StoKlevelGrad`` and 8), in two variants.

``d2pfed-coded`` -- as the official code runs it (AI-secure/DataLens ``rdp_utils.py``,
``stochastic_klevel`` and ``k_level_sgd_aggregate``, flag ``--klevelsgd``, ``--klevel 4``):
    no rotation (commented out there: "extremely slow"), no normalisation; the interval
    [-c, c] is cut into ``levels - 1`` equal pieces and a coordinate in piece r (values below
    -c fall in the first, above c in the last) becomes -levels/2 + r or -levels/2 + r + 1,
    the upper one with probability equal to its position in the piece. The outputs are
    -levels/2 ... levels/2 - 1 in unit steps, so the quantiser is biased (for 4 levels a zero
    gradient maps to -1 or 0, mean -1/2). Every teacher votes on all d coordinates.
    Sensitivity: each coordinate moves by at most levels - 1, so (levels - 1) sqrt(d). The
    official ledger charges lambda levels^2 d / sigma^2 per query (``rdp_gaussian`` with
    sigma / sqrt(levels^2 d)), i.e. a sensitivity of levels sqrt(2 d): more than needed, so
    that ledger is sound too, only loose.

``d2pfed-paper`` -- as the paper's Alg. 7 describes it, made well defined:
    clip each coordinate to [-c, c]; rotate by R = H diag(s) / sqrt(D), with H the D x D
    Walsh-Hadamard matrix, D = d padded to a power of two and s random signs drawn once per
    generator step and shared by all teachers (public randomness, as in D2P-Fed); divide by
    the infinity norm to land in [-1, 1]; quantise unbiasedly to the ``levels`` equally spaced
    levels -1 ... 1 (round up with probability equal to the position between the two nearest
    levels). The sum over teachers gets N(0, sigma^2) on each of its D coordinates, is rotated
    back (R^T: the noise stays N(0, sigma^2 I)), cropped to d, and thresholded at +-beta N.
    Alg. 7 as printed mixes two level grids (b[r] = -k/2 + 2r and m[r] on [-c, c]) and Alg. 8
    thresholds without rotating back; we use the unbiased quantiser of the D2P-Fed paper and
    rotate back before the threshold, because a threshold in the rotated basis would not
    select gradient coordinates. Sensitivity: every rotated coordinate of a teacher's vote lies
    in [-1, 1], so 2 sqrt(D) (attained: a gradient on one coordinate rotates to +-1/sqrt(D)
    everywhere, which normalises to +-1 exactly).

The sensitivities above are to one teacher's vote; neighbouring datasets (one record replaced)
change one teacher's votes (``aggregation.base``), and each query is a Gaussian mechanism
composed over queries (``privacy.gaussian.CompressorAccountant``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .._validate import choice, nonneg_float, positive_float, positive_int
from .base import Aggregator, check_grads, threshold_votes

VARIANTS = ("coded", "paper")


def _levels(levels: int) -> int:
    return positive_int("levels", levels, minimum=2)


def fwht(x: torch.Tensor) -> torch.Tensor:
    """Unnormalised fast Walsh-Hadamard transform H x along the last axis (Sylvester order;
    H is symmetric and H H = D I). The last axis must be a power of two.

    Written here (O(D log D), a few lines) because torch has no Hadamard transform and a dense
    scipy matrix would cost O(D^2) per vector."""
    D = x.shape[-1]
    if D < 1 or D & (D - 1):
        raise ValueError(f"the last axis must be a power of two, got {D}")
    shape = x.shape
    y = x.reshape(-1, D)
    h = 1
    while h < D:
        y = y.view(-1, D // (2 * h), 2, h)
        y = torch.stack((y[:, :, 0] + y[:, :, 1], y[:, :, 0] - y[:, :, 1]), dim=2)
        h *= 2
    return y.reshape(shape)


def padded_dim(d: int) -> int:
    """The smallest power of two >= d (784 -> 1024)."""
    d = positive_int("d", d)
    return 1 << (d - 1).bit_length()


def rotate(x: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """R x = H diag(s) pad(x) / sqrt(D) along the last axis (orthonormal)."""
    D = signs.shape[-1]
    pad = torch.zeros(*x.shape[:-1], D - x.shape[-1], dtype=x.dtype, device=x.device)
    return fwht(torch.cat([x, pad], dim=-1) * signs.to(x.dtype)) / math.sqrt(D)


def unrotate(y: torch.Tensor, signs: torch.Tensor, d: int) -> torch.Tensor:
    """R^T y = diag(s) H y / sqrt(D), cropped to the first d coordinates."""
    D = y.shape[-1]
    return (fwht(y) * signs.to(y.dtype) / math.sqrt(D))[..., :d]


def klevel_coded(grads: torch.Tensor, levels: int, c: float,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """The official ``stochastic_klevel`` (see module doc), elementwise on any tensor: levels
    -levels/2, -levels/2 + 1, ..., levels/2 - 1 (half-integers when ``levels`` is odd)."""
    levels = _levels(levels)
    c = positive_float("c", c)
    if not torch.isfinite(grads).all():
        raise ValueError("grads contains NaN or infinite values")
    pos = (grads.double() + c) * ((levels - 1) / (2.0 * c))  # position in units of a piece
    piece = pos.floor().clamp(0, levels - 2)
    prob = pos - piece  # < 0 below -c, > 1 above c: the lower / upper level for sure
    u = torch.rand(grads.shape, generator=generator, device=grads.device, dtype=torch.float64)
    q = piece - levels / 2.0 + (u <= prob).double()
    return q.to(grads.dtype)


def klevel_index(u: torch.Tensor, levels: int,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Unbiased stochastic quantisation of ``u`` in [-1, 1] as level indices r in
    {0, ..., levels - 1} (float64 integers) of the levels -1 + 2r / (levels - 1):
    E[level] = u, always one of the two levels around u."""
    levels = _levels(levels)
    pos = (u.double().clamp(-1.0, 1.0) + 1.0) * ((levels - 1) / 2.0)
    lo = pos.floor().clamp(max=levels - 2)
    r = torch.rand(u.shape, generator=generator, device=u.device, dtype=torch.float64)
    return lo + (r < pos - lo).double()


def index_to_level(q: torch.Tensor, levels: int, count: int = 1) -> torch.Tensor:
    """Levels of (a sum over ``count`` teachers of) indices: 2 q / (levels - 1) - count."""
    return q * (2.0 / (levels - 1)) - float(count)


def klevel_unbiased(u: torch.Tensor, levels: int,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """Unbiased stochastic quantisation of ``u`` in [-1, 1] to ``levels`` equally spaced
    levels -1, ..., 1: E[q] = u, and q is always one of the two levels around u."""
    return index_to_level(klevel_index(u, levels, generator), levels).to(u.dtype)


class Rotation(NamedTuple):
    """One step's public rotation: signs s [D] and the gradient dimension d."""

    signs: torch.Tensor
    d: int


@dataclass(frozen=True)
class D2PFed(Aggregator):
    """D2P-Fed inside DataLens (module doc). ``variant``: ``coded`` or ``paper``."""

    sigma: float
    beta: float
    c: float | None = 1e-5
    levels: int = 4
    variant: str = "coded"

    def __post_init__(self) -> None:
        positive_float("sigma", self.sigma)
        nonneg_float("beta", self.beta)
        _levels(self.levels)
        choice("variant", self.variant, VARIANTS)
        if self.c is not None:
            positive_float("c", self.c)
        elif self.variant == "coded":
            raise ValueError("c must be a positive finite number: d2pfed-coded needs a "
                             "clipping constant c (the official code divides by it), got None")

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"d2pfed-{self.variant}"

    # The official ``rdp_gaussian`` returns the smaller of this data-independent charge and a
    # data-dependent (Papernot et al. 2018, Thm. 6) bound computed from the noisy votes; at the
    # paper's sigma the data-dependent branch's condition fails, so the two coincide there.
    # (Its comment reads the sensitivity as levels sqrt(d); the GNMax convention of
    # ``rdp_gaussian`` turns sigma / sqrt(levels^2 d) into levels sqrt(2 d).)

    def context(self, d: int, generator: torch.Generator | None,
                device: torch.device | str = "cpu") -> Rotation | None:
        """The paper variant's rotation (signs drawn once per step); none as coded."""
        if self.variant == "coded":
            return None
        bits = torch.randint(0, 2, (padded_dim(d),), generator=generator, device=device)
        return Rotation(bits.to(torch.float64) * 2.0 - 1.0, positive_int("d", d))

    def _indices(self, grads: torch.Tensor, ctx: Rotation | None,
                 generator: torch.Generator | None) -> torch.Tensor:
        """The paper variant's level indices in the rotated basis, [..., D] float64."""
        if ctx is None:
            raise ValueError("the paper variant needs the step's rotation signs (context)")
        if not torch.isfinite(grads).all():
            raise ValueError("grads contains NaN or infinite values")
        g = grads if self.c is None else grads.clamp(-self.c, self.c)
        y = rotate(g.double(), ctx.signs)
        scale = y.abs().amax(dim=-1, keepdim=True)
        u = y / torch.where(scale > 0, scale, 1.0)  # an all-zero gradient stays 0
        return klevel_index(u, self.levels, generator)

    def compress(self, grads: torch.Tensor, ctx: Rotation | None,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Each teacher's quantised vote vector (Alg. 7): [..., d] -> [..., d] (coded) or
        [..., D] in the rotated basis (paper)."""
        if self.variant == "coded":
            return klevel_coded(grads, self.levels, self.c, generator)
        return index_to_level(self._indices(grads, ctx, generator), self.levels).to(grads.dtype)

    def partial(self, grads: torch.Tensor, ctx: Rotation | None,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Summed votes [Q, m]. Sums are exact: the coded levels are small (half-)integers
        and the paper variant sums integer level indices in float64 before the affine map to
        levels, so floating-point rounding cannot add to the sensitivity (Casacuberta et al.
        2022)."""
        grads = check_grads(grads)
        if self.variant == "coded":
            return self.compress(grads, ctx, generator).sum(dim=1)
        q = self._indices(grads, ctx, generator).sum(dim=1)
        return index_to_level(q, self.levels, grads.shape[1])

    def release(self, stat: torch.Tensor, ctx: Rotation | None, n_teachers: int,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Alg. 8 Phases II-III: + N(0, sigma^2) per coordinate, (rotate back,) threshold."""
        n_teachers = positive_int("n_teachers", n_teachers)
        noise = torch.randn(stat.shape, generator=generator, device=stat.device,
                            dtype=torch.float64)
        noisy = stat.double() + self.sigma * noise
        if self.variant == "paper":
            if ctx is None:
                raise ValueError("the paper variant needs the step's rotation signs")
            noisy = unrotate(noisy, ctx.signs, ctx.d)
        return threshold_votes(noisy, self.beta, n_teachers).to(torch.float32), noisy

    def sensitivity(self, d: int, n_teachers: int) -> float:
        d = positive_int("d", d)
        if self.variant == "coded":
            return (self.levels - 1) * math.sqrt(d)
        return 2.0 * math.sqrt(padded_dim(d))

    def charged_sensitivity(self, d: int, n_teachers: int) -> float:
        """As coded: the official charge lambda levels^2 d / sigma^2, i.e. levels sqrt(2 d)."""
        d = positive_int("d", d)
        if self.variant == "coded":
            return self.levels * math.sqrt(2.0 * d)
        return self.sensitivity(d, n_teachers)
