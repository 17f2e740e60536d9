"""TopAgg inside DP-SGD as an Opacus optimizer (paper Algorithm "DP SGD training via TopAgg").

``TopAggDPOptimizer`` subclasses Opacus's ``DPOptimizer`` and overrides only its two
mechanism stages, the way Opacus's own per-layer and adaptive-clipping optimizers do:

``clip_and_accumulate``
    per-example gradients of all parameters flattened to ``[B, d]`` (``scope="flat"``, the
    paper's vector notation) or taken parameter by parameter (``scope="layer"``); each row
    clipped to ``max_grad_norm`` C exactly as Opacus clips (factor C / (||g|| + 1e-6), at most
    1); compressed by ``norm_topk`` or ``dim_topk`` (:mod:`.compress`); re-clipped to the
    stated sensitivity as a floating-point guard; summed into ``p.summed_grad``.
``add_noise``
    N(0, (sigma * Delta)^2) per coordinate with Delta = sqrt(k) C (norm selection) or C
    (dimension selection), from Opacus's own noise generator (secure mode available).

Neighbouring relation: add/remove one example (Poisson sampling with rate q = B / n, Opacus's
``DPDataLoader``). Since the noise is sigma times the sensitivity, the privacy accountant sees
noise multiplier sigma and sample rate q: ``noise_multiplier`` keeps its Opacus meaning and
Opacus's accountants (RDP, PRV) attach unchanged. With k >= 1 (norm selection) every stage is
Opacus's own code, so k = 1 *is* GM-DP (Opacus DP-SGD), bit for bit.

Per-layer scope keeps a fraction k of each layer's squared norm: sum_l k ||g_l||^2 = k ||g||^2,
so its sensitivity is the same sqrt(k) C.

On the compression path (k < 1) an example whose gradient has a non-finite norm contributes
zero, and the re-clip leaves every row at most the sensitivity in float64 terms. As in Opacus's
default (``secure_mode=False``) the noise comes from a seeded, non-cryptographic generator:
the guarantee holds up to floating-point and PRNG attacks; pass ``secure_mode=True`` for
Opacus's hardened sampler.
"""

from __future__ import annotations

import torch
from opacus.optimizers import DPOptimizer
from opacus.optimizers.optimizer import (
    _check_processed_flag,
    _generate_noise,
    _mark_as_processed,
)

from .._validate import nonneg_float, positive_float, positive_int
from .compress import SCOPES, SELECTIONS, _check_k, norm_topk_selection, sensitivity


class TopAggDPOptimizer(DPOptimizer):
    """DP-SGD with per-example top-k compression before the sum and the noise (module doc)."""

    def __init__(self, optimizer: torch.optim.Optimizer, *, noise_multiplier: float,
                 max_grad_norm: float, expected_batch_size: int | None, k: float = 1.0,
                 selection: str = "norm", scope: str = "flat", **kwargs):
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {sorted(SELECTIONS)}, got "
                             f"{selection!r}")
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        max_grad_norm = positive_float("max_grad_norm", max_grad_norm)
        noise_multiplier = nonneg_float("noise_multiplier", noise_multiplier)
        if expected_batch_size is not None:
            expected_batch_size = positive_int("expected_batch_size", expected_batch_size)
        self.k, self.selection, self.scope = _check_k(k), selection, scope
        super().__init__(optimizer, noise_multiplier=noise_multiplier,
                         max_grad_norm=max_grad_norm, expected_batch_size=expected_batch_size,
                         **kwargs)

    @property
    def compresses(self) -> bool:
        return self.k < 1

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of the summed, processed per-example gradients (add/remove-one)."""
        return sensitivity(self.selection, self.k, self.max_grad_norm)

    def process(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        """Clip each example's gradient to C (Opacus's factor), compress it, and guard its norm
        at the sensitivity; ``grads``: per-parameter [B, ...], returns per-parameter [B, d_p]."""
        flat, factor = self._rows(grads)
        if not len(factor):
            return flat
        if not self.compresses:
            return [f * factor[:, None] for f in flat]
        compress = SELECTIONS[self.selection]
        if self.scope == "flat":  # one [B, d] row per example (clipping is elementwise)
            sizes = [f.shape[1] for f in flat]
            flat = list(torch.split(compress(torch.cat(flat, 1).mul_(factor[:, None]),
                                             self.k), sizes, dim=1))
        else:
            flat = [compress(f * factor[:, None], self.k) for f in flat]
        return self._guard(flat)

    def _guard(self, flat: list[torch.Tensor]) -> list[torch.Tensor]:
        """Scale down the (rare) rows whose norm float rounding could have put above the
        sensitivity: norms in float64 with a margin (1e-6 relative) larger than float32's
        rounding of the rescaled row, so no row ends above it. Only rows whose working-dtype
        norm lies within twice that dtype's error bound for a norm of d terms (2 d u, u its
        unit roundoff) of the margin are measured again in float64; every other row's float64
        factor would be clamped to 1, so the output equals measuring every row in float64.
        Every row is measured in float64 when the bound is too loose (slack >= 0.5) or when
        squares near the bound could underflow (bound^2 / d below 2^24 times the dtype's
        smallest normal number). ``flat``: fresh tensors (the compressor's output), scaled in
        place."""
        bound = self.sensitivity * (1 - 1e-6)
        d = sum(f.shape[1] for f in flat)
        info = torch.finfo(flat[0].dtype)
        slack = 4 * d * info.eps / 2  # > the relative error of a norm of d terms in this dtype
        approx = torch.stack([f.norm(2, dim=1) for f in flat], dim=1).norm(2, dim=1)
        if slack < 0.5 and bound ** 2 / d >= 2 ** 24 * info.tiny:
            rows = (approx >= bound / (1 + slack)).nonzero().flatten()
        else:
            rows = torch.arange(len(approx), device=approx.device)
        if not len(rows):
            return flat
        out = torch.stack([f[rows].double().norm(2, dim=1) for f in flat], dim=1).norm(2, dim=1)
        guard = (bound / out.clamp(min=1e-300)).clamp(max=1.0)
        for f in flat:
            f[rows] = f[rows] * guard.to(f.dtype)[:, None]
        return flat

    def _rows(self, grads: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Each example's gradient as per-parameter rows [B, d_p] in the parameters' dtype,
        and its clip factor C / (||g|| + 1e-6), at most 1 (Opacus's). An example whose norm
        is not finite gets zero rows (a data-independent rule: a NaN row would otherwise make
        the whole release NaN, unbounded sensitivity)."""
        b = len(grads[0])
        flat = [g.reshape(b, p.numel()).to(p.dtype)  # (b, numel): b = 0 is an empty batch
                for g, p in zip(grads, self.params, strict=True)]
        if not b:
            return flat, torch.zeros(0, device=flat[0].device, dtype=flat[0].dtype)
        norms = torch.stack([f.norm(2, dim=1) for f in flat], dim=1).norm(2, dim=1)
        finite = torch.isfinite(norms)
        if not bool(finite.all()):
            flat = [torch.where(finite[:, None], f, torch.zeros_like(f)) for f in flat]
            norms = torch.where(finite, norms, torch.zeros_like(norms))
        return flat, (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)

    def summed(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        """The sum over examples of :meth:`process`'s rows, per parameter (flattened).

        Flat NormTopK (the paper's setting) never writes the dense compressed rows: each
        example keeps a few percent of its coordinates (a median of 540-1,570 of 26,010 on
        the MNIST CNN; ``benchmarks/README.md``), so the same clip, the same selection
        (:func:`.compress.norm_topk_selection`) and the float64 guard run on the kept
        coordinates only, and ``index_add_`` adds them into the sum. The guard measures every
        compressed row in float64 here (it is only its kept coordinates), which is what
        :meth:`_guard` is tested to equal. Equal to ``process`` summed over examples up to the
        order of the float additions (tested); the sensitivity argument is unchanged: each
        example adds one row of norm at most ``bound`` (tested per example). On CUDA,
        ``index_add_`` adds with atomics, so the order of additions (and the last bits of a
        run) varies from run to run unless ``torch.use_deterministic_algorithms`` is on."""
        if not (self.compresses and self.selection == "norm" and self.scope == "flat"):
            return [f.sum(0) for f in self.process(grads)]
        sizes = [p.numel() for p in self.params]
        rows, factor = self._rows(grads)
        flat = torch.cat(rows, 1)  # [B, d], a copy: ``grads`` stay intact
        out = torch.zeros(flat.shape[1], dtype=flat.dtype, device=flat.device)
        if len(flat):
            flat.mul_(factor[:, None])  # clipped (Opacus's factor), as in ``process``
            bound = self.sensitivity * (1 - 1e-6)
            for sel, idx, kept in norm_topk_selection(flat, self.k):
                vals = (flat if len(sel) == len(flat) else flat[sel]).gather(1, idx)
                vals = torch.where(kept, vals, torch.zeros_like(vals))
                n64 = vals.double().norm(2, dim=1)
                guard = (bound / n64.clamp(min=1e-300)).clamp(max=1.0).to(vals.dtype)
                # the guard measured the gathered row; the row adds exactly that vector only
                # because a row's ``idx`` are distinct columns (topk and sort guarantee it: a
                # repeated column would be added twice by index_add_)
                out.index_add_(0, idx[kept], (vals * guard[:, None])[kept])
        return list(torch.split(out, sizes))

    def clip_and_accumulate(self) -> None:
        if not self.compresses:
            return super().clip_and_accumulate()
        for p in self.params:
            _check_processed_flag(p.grad_sample)
        for s, p in zip(self.summed(self.grad_samples), self.params, strict=True):
            grad = s.view_as(p).to(p.dtype)  # (the flat concatenation promotes mixed dtypes)
            p.summed_grad = grad if p.summed_grad is None else p.summed_grad + grad
            _mark_as_processed(p.grad_sample)

    def add_noise(self) -> None:
        if not self.compresses:
            return super().add_noise()
        for p in self.params:
            _check_processed_flag(p.summed_grad)
            noise = _generate_noise(std=self.noise_multiplier * self.sensitivity,
                                    reference=p.summed_grad, generator=self.generator,
                                    secure_mode=self.secure_mode)
            p.grad = (p.summed_grad + noise).view_as(p)
            _mark_as_processed(p.summed_grad)
