"""Vectorised ensemble of N teacher discriminators (paper Alg. 1, Phase II).

All teachers' parameters are stacked along a leading teacher axis and processed in chunks of
``chunk`` teachers, so no autograd graph or activation ever spans the whole ensemble:

* convolutions of all teachers of a chunk run as one grouped convolution;
* the one-hot label channels that the conditional DCGAN concatenates to every layer are
  constant images, so their contribution to a convolution is a per-(teacher, class) spatial
  bias map: the label part of the kernel contracted with the pattern of taps that fall inside
  the image (border effects of the zero padding included), added per sample by a one-hot
  batched matmul, instead of convolving ten constant channels;
* fully connected layers are batched matrix products (``_BatchedAffine``: GEMM orientations
  chosen for speed, the weight gradient contiguous), their label columns a per-class bias.

Each teacher has its own Adam state (``StackedAdam``) and its own initialisation by default.
Two opt-in switches reproduce how the official code trains its teachers in ``teachers_batch``
batches of ``batch_teachers`` slots (README: 80 x 50; model.py ``train_together``; issue 12):
``init_slots = S`` gives teacher t the initial weights of teacher t mod S (the official code
saves the S slots' initial weights once and restores every batch from them), and
``adam_slots = S`` makes the teachers t = s, s + S, s + 2S, ... share one Adam state (moments
and step count), updated in teacher order (the official teacher saver holds only trainable
variables, so a slot's Adam moments and beta powers pass from one batch's teacher to the
next). Shared Adam state lets one record's gradient reach every teacher of its slot: the
privacy consequences are stated where a run records them (``datalens.DataLens.record``).
With ``moment_dtype=torch.bfloat16``
the Adam moments are stored in bfloat16 (parameters stay float32): at N = 4000 on MNIST that
is 8.9 GB of weights + 8.9 GB of moments instead of 26.7 GB, which is what lets the paper's
configuration run in 24 GiB. Each chunk's moments are widened to float32, updated and rounded
back on storage in one compiled pass (``adam_narrow_moments_``); the rounding changes each
moment by at most 2^-8 relatively (documented in the run record).

The result equals a loop over ordinary ``models.Discriminator`` modules (tested in float64).
Not built on ``torch.func.vmap``: on CPU plain vmap over conv layers was measured barely faster
than the loop, and vmap cannot exploit the constant label channels.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from ._validate import positive_float, positive_int
from .models import (
    KERNEL,
    conv_same,
    discriminator_shapes,
    init_discriminator_,
    normalise,
    same_pad,
)

_LEAK = 0.2


@functools.lru_cache(maxsize=16)
def _kernel_support(hw: tuple[int, int], dtype: torch.dtype, device: str) -> torch.Tensor:
    """[25, H/2, W/2]: 1 where kernel tap k of a 5x5/2 SAME conv falls inside the image."""
    deltas = torch.eye(KERNEL * KERNEL, dtype=dtype, device=device).view(-1, 1, KERNEL, KERNEL)
    ones = torch.ones(1, 1, *hw, dtype=dtype, device=device)
    return conv_same(ones, deltas)[0]


def _label_maps(w_y: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """Contribution of constant one-hot label channels to a 5x5/2 SAME conv.

    A constant channel contributes, at each output position, the sum of the kernel taps that
    fall inside the image (zero padding elsewhere), so the maps are a contraction of the label
    kernel with the tap-support pattern: ``w_y`` [n, co, Y, 5, 5] -> [n, Y, co * H/2 * W/2].
    """
    n, co, y_dim = w_y.shape[:3]
    support = _kernel_support(tuple(hw), w_y.dtype, str(w_y.device))  # [25, h, w]
    maps = torch.einsum("ncyk,khw->nychw", w_y.reshape(n, co, y_dim, -1), support)
    return maps.reshape(n, y_dim, -1)


CONV_LAYOUTS = ("auto", "channels_last", "contiguous")


def conv_layout(device: torch.device | str) -> str:
    """Memory format of the convolutions on ``device``: the teachers' grouped ones and the
    utility evaluation's CNN (``evaluate.EvalCNN``). A speed choice: either gives the same
    numbers up to float rounding (``tests/test_ensemble.py``, ``tests/test_evaluate.py``).
    ``auto`` (the default): channels-last on CPU (oneDNN: ~3x faster forward, 1.5x backward
    on the teachers' shapes; the evaluation's NCHW max-pool is ~7x slower than channels-last)
    and NCHW on CUDA (cuDNN has no fast channels-last grouped kernels here and converts
    layouts around each call: 0.46 s against 1.05 s per 4000-teacher step on an H200,
    ``benchmarks/README.md``). ``DATALENS_CONV_LAYOUT`` overrides it; run records carry the
    choice as ``hardware.conv_layout``, evaluation records as ``conv_layout``."""
    layout = os.environ.get("DATALENS_CONV_LAYOUT", "auto")
    if layout not in CONV_LAYOUTS:
        raise ValueError(f"DATALENS_CONV_LAYOUT must be one of {', '.join(CONV_LAYOUTS)}, got "
                         f"{layout!r}")
    if layout == "auto":
        return "contiguous" if torch.device(device).type == "cuda" else "channels_last"
    return layout


def conv_memory_format(device: torch.device | str) -> torch.memory_format:
    """The ``torch.memory_format`` of :func:`conv_layout`."""
    return (torch.channels_last if conv_layout(device) == "channels_last"
            else torch.contiguous_format)


def _grouped_conv(x: torch.Tensor, w_x: torch.Tensor, w_y: torch.Tensor, b: torch.Tensor,
                  onehot: torch.Tensor, teacher_major: bool = False) -> torch.Tensor:
    """x [B, n, c_in, H, W] -> conv of cat(x, onehot(y)) with per-teacher kernels split into
    the image part w_x [n, co, c_in, 5, 5] and the label part w_y [n, co, Y, 5, 5];
    onehot [n, B, Y]. Returns [B, n, co, H/2, W/2], in the convolution's memory layout, or
    with ``teacher_major`` stored as a contiguous [n, B, co, H/2, W/2] (what the per-teacher
    flatten of the dense layer reads without a copy, so that the elementwise layers in between
    and their backward see one layout: ATen's mixed-layout elementwise kernels ran up to ~30x
    slower here)."""
    bsz, n, c_in = x.shape[:3]
    co = w_x.shape[1]
    hw = x.shape[-2:]
    cl = conv_memory_format(x.device)
    h = F.conv2d(same_pad(x.reshape(bsz, n * c_in, *hw)).contiguous(memory_format=cl),
                 w_x.reshape(n * co, c_in, KERNEL, KERNEL).contiguous(memory_format=cl),
                 stride=2, groups=n)
    h = h.view(bsz, n, co, *h.shape[-2:])
    # label contribution per (teacher, sample): one-hot [n, B, Y] @ maps [n, Y, co*h*w]
    lab = torch.bmm(onehot, _label_maps(w_y, hw)).view(n, bsz, *h.shape[2:])
    if teacher_major:  # the sum takes the layout of its first operand, the contiguous lab
        return (lab + h.transpose(0, 1) + b[:, None, :, None, None]).transpose(0, 1)
    return h + lab.transpose(0, 1) + b[None, :, :, None, None]


class _BatchedAffine(torch.autograd.Function):
    """Per-teacher affine map h [n, B, F] -> h w^T + b [n, B, O] with w [n, O, F], b [n, O],
    with hand-chosen batched GEMMs (the same function as ``baddbmm`` under autograd, tested in
    float64 in ``tests/test_ensemble.py``).

    Why a custom backward: on the 2058 -> 256 layer (B = 30) MKL's batched GEMM runs the
    product in the orientation [B x F] . [F x O] ~1.7x faster than [O x F] . [F x B], and the
    input gradient as go . w ~1.7x faster than w^T . go (measured on the project's 2-core
    AMD EPYC, 2026-11-28, ``benchmarks/README.md``); autograd of the forward orientation would
    return the weight gradient transposed (a copy before the fused Adam kernel). Here the
    weight gradient go^T . h comes out contiguous in w's own layout [n, O, F]."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(h, w)
        return torch.baddbmm(b[:, None, :], h, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, go: torch.Tensor):
        h, w = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad
        return (torch.bmm(go, w) if need_h else None,
                torch.bmm(go.transpose(1, 2), h) if need_w else None,
                go.sum(1) if need_b else None)


def _linear(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-teacher affine map h [n, B, F] -> [n, B, O] with w [n, O, F], b [n, O]
    (see ``_BatchedAffine``)."""
    return _BatchedAffine.apply(h, w, b)


def _wide(t: torch.Tensor) -> torch.Tensor:
    """``t`` in at least float32 (statistics and losses of a bfloat16 forward)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def _bn(h: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, dims) -> torch.Tensor:
    """Training-mode BatchNorm (``models.normalise``); statistics in at least float32 whatever
    ``h``'s dtype."""
    return normalise(_wide(h), gamma, beta, dims).to(h.dtype)


def ensemble_logits(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                    y_dim: int, bn_groups: int = 1) -> torch.Tensor:
    """Logits of n teachers on their own batches: x [n, B, C, H, W], y [n, B] -> [n, B].

    BatchNorm uses each teacher's batch statistics (training mode, as the official code); with
    ``bn_groups`` = 2 the batch is two batches (real, fake) normalised separately, as if D
    were called twice, in one pass (half the weight traffic).
    """
    n, bsz = x.shape[:2]
    gb = bsz // bn_groups
    x = x.to(p["w0x"].dtype)  # the compute dtype is the parameters' (see TeacherEnsemble)
    onehot = F.one_hot(y, y_dim).to(x.dtype)  # [n, B, Y]
    h = F.leaky_relu(_grouped_conv(x.transpose(0, 1), p["w0x"], p["w0y"], p["b0"], onehot),
                     _LEAK)
    h = _grouped_conv(h, p["w1x"], p["w1y"], p["b1"], onehot, teacher_major=True)
    hs = h.shape
    h = _bn(h.view(bn_groups, gb, *hs[1:]), p["g1"][None, None, :, :, None, None],
            p["be1"][None, None, :, :, None, None], (1, 4, 5)).view(hs)
    h = F.leaky_relu(h, _LEAK)
    h = h.transpose(0, 1).reshape(n, bsz, -1)  # [n, B, F]  (NCHW flatten per sample)
    h = _linear(h, p["w2x"], p["b2"]) + torch.bmm(onehot, p["w2y"].transpose(1, 2))
    h = _bn(h.view(n, bn_groups, gb, -1), p["g2"][:, None, None, :], p["be2"][:, None, None, :],
            (2,)).view(n, bsz, -1)
    h = F.leaky_relu(h, _LEAK)
    out = _linear(h, p["w3x"], p["b3"]) + torch.bmm(onehot, p["w3y"].transpose(1, 2))
    return out.squeeze(-1)


def adam_narrow_moments_(p: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor,
                         hyper: torch.Tensor) -> None:
    """One Adam step (Kingma & Ba 2015, Alg. 1) on ``p`` with moments ``m``, ``v`` stored in a
    narrower dtype: widened to ``p``'s dtype, updated there, rounded back to their own dtype.

    ``hyper`` = [lr / (1 - b1^t), b1, b2, eps, sqrt(1 - b2^t), 1 - b1, 1 - b2] (a tensor, so
    that the step number does not trigger recompilation; 1 - b computed in float64). The
    arithmetic is that of PyTorch's fused CPU Adam kernel up to float rounding (a compiled loop
    may contract multiply-adds differently): ``m = lerp(m, g, 1 - b1)``,
    ``v = b2 v + (1 - b2) g^2``,
    ``p -= lr_t m / (sqrt(v) / sqrt(1 - b2^t) + eps)``. Compiled with ``torch.compile`` (see
    ``_adam_kernel``) this is one pass over p, g, m, v; run eagerly it is the same arithmetic
    in several passes.
    """
    h = hyper.to(p.dtype)
    gf = g.to(p.dtype)
    mf = torch.lerp(m.to(p.dtype), gf, h[5])
    vf = v.to(p.dtype) * h[2] + h[6] * gf * gf
    p.sub_(h[0] * mf / (vf.sqrt() / h[4] + h[3]))
    m.copy_(mf)
    v.copy_(vf)


@functools.cache
def _adam_kernel(device_type: str):
    """``adam_narrow_moments_`` (also used when the gradients come in bfloat16) compiled by
    TorchInductor into one fused loop (C++ on CPU,
    Triton on CUDA); measured 4x faster than widening, PyTorch's fused kernel and rounding
    back (8 vs 33 ms for 16 MNIST teachers on 2 cores). Falls back to the eager function
    where compilation is unavailable (no C++ compiler) or disabled with
    ``DATALENS_COMPILE=0``; the arithmetic is the same either way."""
    if os.environ.get("DATALENS_COMPILE", "1") == "0":
        return adam_narrow_moments_
    # one graph per (dtypes of p, g, m, v) and for 1-element tensors (always specialised);
    # a process that builds ensembles of several kinds (the tests) needs more than the default 8
    cfg = torch._dynamo.config  # `recompile_limit` (older releases: `cache_size_limit`)
    name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    setattr(cfg, name, max(getattr(cfg, name), 64))
    try:
        # cpp.dynamic_threads: without it TorchInductor's CPU code decides from the first
        # (probe) call's sizes whether to emit an OpenMP loop, and the kernel ran on one
        # thread whatever its size: 0.78 against 0.42 ms per MNIST teacher on 2 cores
        # (benchmarks/README.md); with it the loop is parallel and OpenMP sizes the team
        fn = torch.compile(adam_narrow_moments_, dynamic=True, fullgraph=True,
                           options={"cpp.dynamic_threads": True})
        probe = torch.zeros(4, device=device_type)
        narrow = torch.zeros(4, dtype=torch.bfloat16, device=device_type)
        fn(probe, probe.clone(), narrow, narrow.clone(),
           adam_hyper(1e-3, 0.5, 0.999, 1e-8, 1, device_type))
    except Exception as err:  # noqa: BLE001 -- any compiler failure: run eagerly
        warnings.warn(f"torch.compile unavailable ({type(err).__name__}: {err}); the Adam "
                      "update with narrow moments runs eagerly (slower, same arithmetic)",
                      stacklevel=2)
        return adam_narrow_moments_

    def kernel(*args: torch.Tensor) -> None:
        """The compiled loop; a later compilation failure (another dtype combination)
        falls back to the eager function for the rest of the process."""
        nonlocal fn
        try:
            fn(*args)
        except Exception as err:  # noqa: BLE001 -- compiler failure: arithmetic is the same
            if fn is adam_narrow_moments_:
                raise
            warnings.warn(f"torch.compile failed ({type(err).__name__}); the Adam update "
                          "runs eagerly from now on", stacklevel=2)
            fn = adam_narrow_moments_
            fn(*args)

    return kernel


def adam_hyper(lr: float, b1: float, b2: float, eps: float, step: int,
               device: torch.device | str) -> torch.Tensor:
    """``hyper`` of ``adam_narrow_moments_`` for Adam step ``step`` (1-based), in float64."""
    return torch.tensor([lr / (1 - b1 ** step), b1, b2, eps, math.sqrt(1 - b2 ** step),
                         1 - b1, 1 - b2], dtype=torch.float64, device=device)


class StackedAdam:
    """Adam (Kingma & Ba 2015) with one independent state per teacher, stepped chunk by chunk.

    Hand-written because ``torch.optim.Adam`` keeps one state per tensor, not per slice, and
    its CPU fused kernel silently mis-updates when a gradient's strides differ from its
    parameter's. Defaults follow the official code: lr 1e-3, betas (0.5, 0.999), eps 1e-8.
    Parameters are float32 or float64. Moments of the parameters' dtype are updated by
    PyTorch's fused Adam kernel; a narrower ``moment_dtype`` (bfloat16 halves the state) is
    updated by ``adam_narrow_moments_`` (widened, updated, rounded back, in one fused pass).
    """

    def __init__(self, params: dict[str, torch.Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.5, 0.999), eps: float = 1e-8,
                 moment_dtype: torch.dtype | None = None, slots: int | None = None):
        self.lr = positive_float("lr", lr)
        self.betas, self.eps = betas, positive_float("eps", eps)
        first = next(iter(params.values()))
        if first.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"parameters must be float32 or float64, got {first.dtype}")
        self.moment_dtype = moment_dtype or first.dtype
        # shared slots (opt-in, see module doc): one state per slot, its own step count
        self.slots = None if slots is None else positive_int("slots", slots)
        rows = first.shape[0] if slots is None else self.slots
        self.m = {k: torch.zeros((rows, *v.shape[1:]), dtype=self.moment_dtype, device=v.device)
                  for k, v in params.items()}
        self.v = {k: torch.zeros((rows, *v.shape[1:]), dtype=self.moment_dtype, device=v.device)
                  for k, v in params.items()}
        self.slot_steps = [0] * (self.slots or 0)

    def _state_slice(self, sl: slice) -> tuple[slice, int | None]:
        """The rows of the Adam state that teachers ``sl`` use, and (shared slots) the slots'
        common step number after this update."""
        if self.slots is None:
            return sl, None
        s0, n = sl.start % self.slots, sl.stop - sl.start
        if s0 + n > self.slots:
            raise ValueError(f"teachers {sl.start}..{sl.stop - 1} wrap around the {self.slots} "
                             "Adam slots; use a chunk that divides the number of slots")
        steps = set(self.slot_steps[s0: s0 + n])
        if len(steps) != 1:
            raise ValueError("the slots of one chunk must have taken the same number of steps")
        for i in range(s0, s0 + n):
            self.slot_steps[i] += 1
        return slice(s0, s0 + n), steps.pop() + 1

    @torch.no_grad()
    def update(self, params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor],
               sl: slice, step: int) -> None:
        """Apply Adam step number ``step`` (1-based) to ``params[k][sl]`` with ``grads[k]``.
        With shared slots the step number is the slot's own count of updates (every teacher
        of the slot counts, as the official per-slot beta powers do), not ``step``."""
        ms, slot_step = self._state_slice(sl)
        step = step if slot_step is None else slot_step
        b1, b2 = self.betas
        first = next(iter(params.values()))
        names = list(grads)
        if self.moment_dtype != first.dtype or grads[names[0]].dtype != first.dtype:
            kernel = _adam_kernel(first.device.type)
            hyper = adam_hyper(self.lr, b1, b2, self.eps, step, first.device)
            for k in names:  # flat views: one compiled kernel for every tensor and chunk
                kernel(params[k][sl].view(-1), grads[k].reshape(-1), self.m[k][ms].view(-1),
                       self.v[k][ms].view(-1), hyper)
            return
        # PyTorch's fused Adam kernel, on contiguous slices (it mis-updates tensors whose
        # gradient strides differ from the parameter's, hence the .contiguous())
        torch._fused_adam_(
            [params[k][sl] for k in names], [grads[k].contiguous() for k in names],
            [self.m[k][ms] for k in names], [self.v[k][ms] for k in names], [],
            [torch.tensor(float(step), device=first.device) for _ in names],
            lr=self.lr, beta1=b1, beta2=b2, weight_decay=0.0, eps=self.eps, amsgrad=False,
            maximize=False)

    def state_dict(self) -> dict:
        out = {"m": self.m, "v": self.v}
        if self.slots is not None:
            out["slot_steps"] = list(self.slot_steps)
        return out

    def load_state_dict(self, state: dict) -> None:
        """Copy the saved moments into the existing buffers (converting dtype and device), so
        that resuming a paper-size run from a memory-mapped checkpoint needs no second copy
        of the ensemble in memory."""
        if (self.slots is None) != ("slot_steps" not in state):
            raise ValueError("the Adam state was saved with a different adam_slots setting")
        if self.slots is not None:
            self.slot_steps = [int(x) for x in state["slot_steps"]]
        for mine, saved in ((self.m, state["m"]), (self.v, state["v"])):
            if set(saved) != set(mine):
                raise ValueError(f"Adam state has tensors {sorted(saved)}, expected "
                                 f"{sorted(mine)}")
            for k, t in saved.items():
                if t.shape != mine[k].shape:
                    raise ValueError(f"Adam state {k!r} has shape {tuple(t.shape)}, expected "
                                     f"{tuple(mine[k].shape)}")
                mine[k].copy_(t)


class TeacherEnsemble:
    """N conditional-DCGAN teacher discriminators with stacked parameters and Adam states.

    ``compute_dtype=torch.bfloat16`` (opt-in; default: the parameters' dtype) runs the
    teachers' forward and backward passes in bfloat16 -- convolutions and matrix products on
    bfloat16 copies of each chunk's weights, BatchNorm statistics and losses in float32 --
    while the parameters and the Adam update stay float32 (mixed precision with float32
    master weights). The query gradients handed to TopAgg are returned in float32.
    """

    def __init__(self, n_teachers: int, y_dim: int, shape: tuple[int, int, int], *,
                 chunk: int = 32, lr: float = 1e-3, moment_dtype: torch.dtype | None = None,
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                 generator: torch.Generator | None = None,
                 compute_dtype: torch.dtype | None = None, init_slots: int | None = None,
                 adam_slots: int | None = None):
        self.n = positive_int("n_teachers", n_teachers)
        self.compute_dtype = compute_dtype or dtype
        if self.compute_dtype not in (dtype, torch.bfloat16):
            raise ValueError(f"compute_dtype must be the parameters' dtype ({dtype}) or "
                             f"torch.bfloat16, got {self.compute_dtype}")
        self._work: dict[str, torch.Tensor] = {}  # compute-dtype copies of one chunk
        self.chunk = positive_int("chunk", chunk)
        self.y_dim, self.shape = positive_int("y_dim", y_dim), tuple(shape)
        self.device = torch.device(device)
        full_shapes = discriminator_shapes(y_dim, self.shape)
        self.params = {k: torch.empty((self.n, *s), dtype=dtype, device=self.device)
                       for k, s in split_shapes(y_dim, self.shape).items()}
        # initialise on CPU with the given generator, chunk by chunk, for reproducibility
        for sl in self.slices():
            full = {k: torch.empty((sl.stop - sl.start, *s), dtype=dtype)
                    for k, s in full_shapes.items()}
            if generator is None:
                init_discriminator_(full)
            else:
                _seeded_init_(full, generator)
            for k, v in split_params(full, y_dim).items():
                self.params[k][sl] = v.to(self.device)
        self.init_slots = None if init_slots is None else positive_int("init_slots", init_slots)
        if self.init_slots is not None:  # teacher t starts from teacher t mod S's draw
            for t0 in range(self.init_slots, self.n, self.init_slots):
                n = min(self.init_slots, self.n - t0)
                for v in self.params.values():
                    v[t0: t0 + n] = v[:n]
        if adam_slots is not None:
            adam_slots = positive_int("adam_slots", adam_slots)
            if self.n % adam_slots or adam_slots % min(self.chunk, self.n):
                raise ValueError(f"adam_slots ({adam_slots}) must divide the number of teachers "
                                 f"({self.n}) and be a multiple of the chunk "
                                 f"({min(self.chunk, self.n)}), so that a chunk never holds two "
                                 "teachers of one slot")
        self.adam = StackedAdam(self.params, lr=lr, moment_dtype=moment_dtype,
                                slots=adam_slots)

    @property
    def num_parameters(self) -> int:
        """Parameters of one teacher."""
        return sum(v[0].numel() for v in self.params.values())

    def teacher_state(self, t: int) -> dict[str, torch.Tensor]:
        """Teacher ``t``'s parameters in the layout of ``models.Discriminator``."""
        return join_params({k: v[t] for k, v in self.params.items()})

    def slices(self) -> Iterator[slice]:
        for s in range(0, self.n, self.chunk):
            yield slice(s, min(s + self.chunk, self.n))

    def chunk_params(self, sl: slice, requires_grad: bool = False) -> dict[str, torch.Tensor]:
        """Teachers ``sl``'s parameters in the compute dtype: views of the stored parameters,
        or (``compute_dtype`` narrower) copies into reused buffers."""
        out = {k: v[sl] for k, v in self.params.items()}
        if self.compute_dtype != next(iter(out.values())).dtype:
            n = sl.stop - sl.start
            for k, v in out.items():
                if k not in self._work or self._work[k].shape[0] < n:
                    self._work[k] = torch.empty((max(self.chunk, n), *v.shape[1:]),
                                                dtype=self.compute_dtype, device=v.device)
            out = {k: self._work[k][:n].copy_(v) for k, v in out.items()}
        if requires_grad:  # leaves sharing storage: Adam updates in place after autograd.grad
            out = {k: v.detach().requires_grad_() for k, v in out.items()}
        return out

    def train_step(self, sl: slice, x_real: torch.Tensor, x_fake: torch.Tensor,
                   y: torch.Tensor, step: int) -> torch.Tensor:
        """One Adam step of teachers ``sl`` on BCE(D(real), 1) + BCE(D(fake), 0).

        x_real, x_fake [n, B, C, H, W]; y [n, B] (the fakes are conditioned on the teachers' own
        real labels, as in the official code); real and fake batches are normalised separately.
        Returns each teacher's loss [n].
        """
        p = self.chunk_params(sl, requires_grad=True)
        bsz = x_real.shape[1]
        logits = ensemble_logits(p, torch.cat([x_real, x_fake], 1), torch.cat([y, y], 1),
                                 self.y_dim, bn_groups=2)
        logits = _wide(logits)
        loss = F.softplus(-logits[:, :bsz]).mean(1) + F.softplus(logits[:, bsz:]).mean(1)
        names = list(p)
        grads = torch.autograd.grad(loss.sum(), [p[k] for k in names])
        self.adam.update(self.params, dict(zip(names, grads, strict=True)), sl, step)
        return loss.detach()

    def query_gradients(self, sl: slice, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """-d/dx of each teacher's batch-mean BCE(D_i(x), 1) for the shared query batch.

        x [B, C, H, W], y [B] -> [B, n, C*H*W] (queries, teachers, dims): the [Q, N, d] input of
        TopAgg. The 1/B of the batch mean is kept, as in the official code.
        """
        n = sl.stop - sl.start
        p = self.chunk_params(sl)
        xr = (x.detach().to(self.compute_dtype).unsqueeze(0).expand(n, *x.shape).clone()
              .requires_grad_())
        logits = _wide(ensemble_logits(p, xr, y.unsqueeze(0).expand(n, -1), self.y_dim))
        (g,) = torch.autograd.grad(F.softplus(-logits).mean(1).sum(), xr)
        return (-g).to(x.dtype).flatten(2).transpose(0, 1)

    def state_dict(self) -> dict:
        return {"params": self.params, "adam": self.adam.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """In place (see ``StackedAdam.load_state_dict``)."""
        if set(state["params"]) != set(self.params):
            raise ValueError(f"ensemble state has parameters {sorted(state['params'])}, "
                             f"expected {sorted(self.params)}")
        for k, v in state["params"].items():
            self.params[k].copy_(v)
        self.adam.load_state_dict(state["adam"])


_SPLIT = {"w0": 2, "w1": 2, "w2": 2, "w3": 2}  # weight -> axis of the (input) channels


def split_shapes(y_dim: int, shape: tuple[int, int, int]) -> dict[str, tuple[int, ...]]:
    """Parameter shapes with every weight split into its image part and its label part."""
    out: dict[str, tuple[int, ...]] = {}
    for k, s in discriminator_shapes(y_dim, shape).items():
        if k in _SPLIT:
            out[k + "x"] = (*s[:1], s[1] - y_dim, *s[2:])
            out[k + "y"] = (*s[:1], y_dim, *s[2:])
        else:
            out[k] = s
    return out


def split_params(full: dict[str, torch.Tensor], y_dim: int) -> dict[str, torch.Tensor]:
    """[n, ...] full-layout parameters -> split layout (the label inputs come last)."""
    out = {}
    for k, v in full.items():
        if k in _SPLIT:
            cin = v.shape[_SPLIT[k]]
            out[k + "x"], out[k + "y"] = torch.split(v, [cin - y_dim, y_dim], dim=_SPLIT[k])
        else:
            out[k] = v
    return out


def join_params(split: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One teacher's split parameters -> the layout of ``models.Discriminator``."""
    out = {}
    for k, v in split.items():
        if k[:-1] in _SPLIT and k.endswith("x"):
            out[k[:-1]] = torch.cat([v, split[k[:-1] + "y"]], dim=_SPLIT[k[:-1]] - 1)
        elif not (k[:-1] in _SPLIT and k.endswith("y")):
            out[k] = v
    return out


def _seeded_init_(params: dict[str, torch.Tensor], gen: torch.Generator) -> None:
    """Official initialisation drawn from ``gen`` (truncated normal by rejection)."""
    with torch.no_grad():
        for name, p in params.items():
            if name in ("w0", "w1"):
                t = torch.randn(p.shape, generator=gen) * 0.02
                bad = t.abs() > 0.04
                while bad.any():
                    t[bad] = torch.randn(int(bad.sum()), generator=gen) * 0.02
                    bad = t.abs() > 0.04
                p.copy_(t)
            elif name in ("w2", "w3"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    init_bias_ = {k: v for k, v in params.items() if k not in ("w0", "w1", "w2", "w3")}
    for k, v in init_bias_.items():
        v.fill_(1.0 if k in ("g1", "g2") else 0.0)
