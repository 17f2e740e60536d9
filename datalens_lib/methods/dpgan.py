"""DP-GAN: a conditional DCGAN whose discriminator is trained with DP-SGD (Opacus).

The code the paper cites (illidanlab/dpgan, a TF1 WGAN) clips weights and noises the
batch-mean gradient, with no per-sample clipping and no accountant: it is not DP as written
(shared notes, ``baselines.md``). This is the version a DP researcher would run instead, as
DPImageBench does: DP-SGD on the discriminator through Opacus (``GradSampleModule`` per-sample
gradients, ``DPOptimizer`` clipping to C and Gaussian noise sigma C, averaged over the expected
batch), Poisson sampling of the real batch with rate q = B / n, and the generator's steps as
post-processing (they touch no private record).

One discriminator step, two ways (``clip_fake``):

* ``False`` (ours, the small-batch profiles): the real Poisson batch's loss goes through
  DP-SGD; the fake half of the loss (D on G(z, y) with uniform labels) depends on no record,
  so its exact gradient is added to the privatised one before the Adam update (adaptive
  composition: D and G are functions of earlier private releases). **Measured, it does not
  train D** (``discriminator_probe``; record ``data/results/dpgan/mnist-eps10/cpu/
  probe-discriminator.json``: the committed run's first 500 steps, seed 0). Clipping caps the
  real half's pull: per-example gradients have median norm 11-15 against C = 1, so their
  clipped mean has norm 0.49 at the start; the fake half's exact pull is not capped (5.99 at
  the start). Within 100 steps D lowers its logit on every input until the fake pull, shrunk
  by the sigmoid, equals the capped real pull (0.76 against 0.75 at step 100, 0.80 / 0.82 at
  step 500), and it stays there: mean logits -2.76 on real and -2.70 on fake at step 100,
  -2.65 / -2.64 at step 500. D calls everything fake and tells nothing apart, so G gets no
  signal about the data; every committed small-batch run's ``d_loss`` stays at 2.55-2.95 (~
  softplus(2.65) + softplus(-2.65)) at eps = 1 and 10 alike. The committed small-batch records
  (classifier accuracy 0.21-0.28) measure this failure of the setting, not DP-SGD's cost.
  With ``clip_fake`` on (same record) D stays balanced (mean logits within 0.04 of 0 and
  d_loss ~log 4 over the 500 steps; whether it then learns to separate needs the full run):
  the small-batch cells with ``clip_fake`` are queued as ``cpu-clipfake``
  (``scripts/cpu_queue.sh``);
* ``True`` (DPImageBench's DP-GAN, the ``-large`` profiles): as many fakes as real examples
  go through the per-sample-gradient discriminator in the same backward pass, so Opacus sums
  real example i's gradient and fake i's into one per-example gradient, clips that pair to C
  and noises the sum. With DPImageBench's C = 1e-3 this matters: added outside the clip, the
  fake gradient (norm ~10 on the smoke run) would swamp the private one (~1e-3 of signal),
  and D would barely see real data. Sensitivity C needs the fakes to be i.i.d. whatever
  their number k (the Poisson batch size): then removing one record removes one pair and
  leaves the law of the others unchanged (couple their draws). k fakes drawn as one batch
  of G would not be: G's BatchNorm uses the batch's statistics, so every fake would depend
  on k, a function of the data (measured once at initialisation: a fake moved by up to
  0.012 between batches of 64 and 65). Here the k fakes follow a reference batch of B
  fakes that is not used (``Generator.forward(reference=B)``): every BatchNorm normalises
  them with the reference batch's statistics, and given it each fake is a function of its
  own (z, y) alone. B keeps the statistics at the size the generator trains with; the
  price is B extra generator rows per discriminator step (fixed 2026-11-28, before any
  large-batch run was committed).

How the clipped sum is computed (the same sum, up to the order of float additions):

* ``clip_fake`` off: **ghost clipping** (Opacus's fast gradient clipping,
  ``GradSampleModuleFastGradientClipping`` with ``use_ghost_clipping``; Li et al. 2022): a
  first backward of the mean real loss lets Opacus's hooks compute each example's gradient
  norm -- for the linear layers, which hold 529,931 of the discriminator's 555,655
  parameters, from activations and backprops alone, without the [B x 2,068 x 256] per-example
  gradient -- and a second backward of sum_i min(1, C / |g_i|) l_i (hooks off) gives the
  clipped sum; ``DPOptimizerFastGradientClipping`` then adds the noise and divides by B.
  Its speed against the per-example gradients: ``benchmarks/bench_dpgan.py`` and its record;
* ``clip_fake`` on: per-example gradients (``GradSampleModule``, ``DPOptimizer``). Ghost
  clipping cannot pair two passes: Opacus keeps one norm per layer and pass (the last pass's
  replaces the first's), while the pair's norm needs |g_real + g_fake|, which Opacus's
  per-sample gradients do sum. At an expected batch of 4096 they take ~9 GB per pass, so
  ``physical_batch`` splits the pairs into physical batches whose clipped gradients Opacus
  sums before the one noise draw (as DPImageBench's ``max_physical_batch_size`` does).

Both are tested against a replay that clips example by example (``tests/test_methods.py``).

Every ``n_critic`` discriminator steps the generator takes one step. Losses: ``bce``
(non-saturating, as DataLens's DCGAN) or ``hinge`` (DPImageBench's DP-GAN).

The discriminator is the DataLens/DCGAN one (``models.Discriminator``: labels concatenated at
every layer) with GroupNorm in place of BatchNorm, whose batch statistics would mix records and
break per-sample clipping; the generator is ``models.Generator``.

Privacy: add/remove-one neighbours; the clipped sum has L2 sensitivity C (``max_grad_norm``:
one record adds or removes one clipped example, or one clipped real/fake pair with
``clip_fake``) and gets N(0, sigma^2 C^2); each discriminator step is a Poisson-subsampled Gaussian
(``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))``) composed over T steps; sigma is
calibrated so that the planned T steps spend the budget under ``rdp`` (Opacus's RDP
accountant, the conversion used for stopping); the record holds every ledger of
``privacy.subsampled`` (also Opacus PRV, dp_accounting PLD and the simple RDP conversion), all
data-independent. Two fine points: the rate q = B / n uses the record count n, treated as
public (the usual DP-SGD convention); and the sampling compares float32 uniforms with q, as
Opacus's own sampler does (the DP-SGD appendix uses it), so the realised rate is
ceil(q 2^24) / 2^24, at most 2^-24 above the accounted q (relative 1.7e-5 at B = 64, n = 60,000).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from .._validate import boolean, choice, interval, positive_float, positive_int, probability_open
from ..config import config_from_dict
from ..data import load_dataset
from ..models import DF_DIM, DFC_DIM, KERNEL, Generator, cond_concat, same_pad
from ..privacy.accountant import _largest_within
from ..privacy.subsampled import LEDGERS, dpsgd_epsilon, dpsgd_event, dpsgd_ledgers


@dataclass(frozen=True)
class DPGANConfig:
    """A DP-GAN run. ``batch_size`` is the expected Poisson batch; ``epochs`` fixes the number
    of discriminator steps T = epochs * n / batch_size; ``noise_multiplier`` None: calibrated."""

    dataset: str
    epsilon: float
    delta: float = 1e-5
    batch_size: int = 64
    epochs: float = 20.0
    max_grad_norm: float = 1.0  # C
    noise_multiplier: float | None = None  # sigma; None: the smallest that fits the budget
    n_critic: int = 1  # discriminator steps per generator step
    loss: str = "bce"
    lr_d: float = 2e-4
    lr_g: float = 2e-4
    beta1: float = 0.5
    z_dim: int = 100
    groups: int = 2  # GroupNorm groups (replacing BatchNorm)
    clip_fake: bool = False  # True: fake i is clipped with real i (DPImageBench; module doc)
    # clip_fake only: the pairs go through the per-example gradients in physical batches of
    # at most this many (Opacus's virtual steps; None: the whole Poisson batch at once)
    physical_batch: int | None = None
    train_limit: int | None = None
    n_samples: int = 100_000
    eval_epochs: int = 600
    eval_lr: float = 2e-3
    eval_batch_size: int = 512
    # smoke profiles only: accuracy on the first N real test images (a pipeline check needs
    # no 10,000-image test pass per epoch); None: the whole test set, as the paper
    eval_test_limit: int | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        positive_float("epsilon", self.epsilon)
        probability_open("delta", self.delta)
        for name in ("batch_size", "n_critic", "z_dim", "groups", "n_samples", "eval_epochs",
                     "eval_batch_size"):
            positive_int(name, getattr(self, name))
        if self.eval_test_limit is not None:
            positive_int("eval_test_limit", self.eval_test_limit)
        for name in ("epochs", "max_grad_norm", "lr_d", "lr_g", "eval_lr"):
            positive_float(name, getattr(self, name))
        if self.noise_multiplier is not None:
            positive_float("noise_multiplier", self.noise_multiplier)
        interval("beta1", self.beta1, 0, 1)
        choice("loss", self.loss, ("bce", "hinge"))
        boolean("clip_fake", self.clip_fake)
        if self.train_limit is not None:
            positive_int("train_limit", self.train_limit)
        if self.physical_batch is not None:
            positive_int("physical_batch", self.physical_batch)
            if not self.clip_fake:
                raise ValueError("physical_batch applies to clip_fake only: ghost clipping "
                                 "(clip_fake false) keeps no per-example gradients")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DPGANConfig:
        return config_from_dict(cls, d, "DP-GAN ")


#: the ledger that calibrates sigma and stops a run (``privacy.subsampled.LEDGERS``)
LEDGER = "rdp"


def calibrate_sigma(epsilon: float, q: float, steps: int, delta: float,
                    rtol: float = 1e-4) -> float:
    """Smallest sigma (to ``rtol``, rounded up) with ``steps`` DP-SGD steps within epsilon
    under :data:`LEDGER` (``privacy.subsampled``: Opacus's RDP accountant, the one Opacus
    itself applies to the optimizer this method uses)."""
    epsilon = positive_float("epsilon", epsilon)
    positive_int("steps", steps)
    positive_float("rtol", rtol)
    lo, hi = 0.1, 1.0
    while dpsgd_epsilon(steps, q, hi, delta, LEDGER) > epsilon:
        lo, hi = hi, hi * 2
        if hi > 1e6:
            raise ValueError("no noise multiplier below 1e6 reaches that epsilon")
    while hi / lo - 1 > rtol:
        mid = math.sqrt(lo * hi)
        if dpsgd_epsilon(steps, q, mid, delta, LEDGER) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


class DPDiscriminator(nn.Module):
    """``models.Discriminator`` with ``nn`` layers Opacus can sample per example and GroupNorm
    instead of BatchNorm (see module doc)."""

    def __init__(self, y_dim: int, shape: tuple[int, int, int], groups: int = 2):
        super().__init__()
        c, h, w = shape
        c1, c2 = c + y_dim, DF_DIM + y_dim
        self.conv0 = nn.Conv2d(c + y_dim, c1, KERNEL, stride=2)
        self.conv1 = nn.Conv2d(c1 + y_dim, c2, KERNEL, stride=2)
        self.norm1 = nn.GroupNorm(_groups(groups, c2), c2)
        self.fc2 = nn.Linear(c2 * (h // 4) * (w // 4) + y_dim, DFC_DIM)
        self.norm2 = nn.GroupNorm(_groups(groups, DFC_DIM), DFC_DIM)
        self.fc3 = nn.Linear(DFC_DIM + y_dim, 1)
        with torch.no_grad():
            for conv in (self.conv0, self.conv1):
                nn.init.trunc_normal_(conv.weight, std=0.02, a=-0.04, b=0.04)
                conv.bias.zero_()
            for fc in (self.fc2, self.fc3):
                fc.weight.normal_(0.0, 0.02)
                fc.bias.zero_()

    def forward(self, x: torch.Tensor, y_onehot: torch.Tensor) -> torch.Tensor:
        h = F.leaky_relu(self.conv0(same_pad(cond_concat(x, y_onehot))), 0.2)
        h = F.leaky_relu(self.norm1(self.conv1(same_pad(cond_concat(h, y_onehot)))), 0.2)
        h = torch.cat([h.flatten(1), y_onehot], 1)
        h = F.leaky_relu(self.norm2(self.fc2(h)), 0.2)
        return self.fc3(torch.cat([h, y_onehot], 1)).squeeze(1)


def _groups(groups: int, channels: int) -> int:
    """The largest divisor of ``channels`` not above ``groups``."""
    return max(g for g in range(1, groups + 1) if channels % g == 0)


class DPGAN:
    """DP-GAN as a harness method (see module doc); one harness step = one discriminator
    step (plus the generator step every ``n_critic``)."""

    name = "dpgan"
    config_class = DPGANConfig

    def __init__(self, cfg: DPGANConfig, *, seed: int = 0, device: str = "auto",
                 data_dir: str | Path | None = None, profile: str = "custom"):
        from opacus import GradSampleModule
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizer, DPOptimizerFastGradientClipping

        from ..datalens import resolve_device

        self.cfg, self.seed, self.profile = cfg, int(seed), profile
        self.device = resolve_device(device)
        ds = load_dataset(cfg.dataset, data_dir)
        x, y = ds.x_train, ds.y_train
        if cfg.train_limit is not None:
            x, y = x[: cfg.train_limit], y[: cfg.train_limit]
        self.n = self.n_private = len(x)
        if cfg.batch_size > self.n:
            raise ValueError(f"batch_size {cfg.batch_size} exceeds the {self.n} training images")
        if cfg.delta >= 1 / self.n:
            raise ValueError(f"delta = {cfg.delta} is not below 1/n = {1 / self.n:.3g}: no "
                             "meaningful guarantee")
        self.q = cfg.batch_size / self.n
        self.planned = max(1, round(cfg.epochs * self.n / cfg.batch_size))
        self.sigma = cfg.noise_multiplier or calibrate_sigma(cfg.epsilon, self.q, self.planned,
                                                             cfg.delta)
        # the ledger is data-independent: the steps the budget allows are known in advance
        fits = _largest_within(lambda t: dpsgd_epsilon(t, self.q, self.sigma, cfg.delta,
                                                       LEDGER), cfg.epsilon, upper_limit=2**40)
        if fits == 0:
            raise ValueError(f"epsilon {cfg.epsilon} is below what one discriminator step "
                             f"costs with noise multiplier {self.sigma:.4g}")
        self.planned = min(self.planned, fits)
        self.shape, self.y_dim = ds.shape, ds.num_classes
        self.x = torch.from_numpy(x).to(self.device)
        self.y = torch.from_numpy(y).to(self.device)
        self.gen = torch.Generator().manual_seed(self.seed)  # Poisson sampling, z, labels
        self.noise_gen = torch.Generator(device=self.device).manual_seed(self.seed + 1)
        torch.manual_seed(self.seed + 2)
        self.G = Generator(cfg.z_dim, self.y_dim, self.shape).to(self.device)
        disc = DPDiscriminator(self.y_dim, self.shape, cfg.groups).to(self.device)
        self.ghost = not cfg.clip_fake  # one discriminator pass per backward (module doc)
        if self.ghost:
            self.D = GradSampleModuleFastGradientClipping(
                disc, max_grad_norm=cfg.max_grad_norm, use_ghost_clipping=True,
                loss_reduction="mean")
        else:
            self.D = GradSampleModule(disc, loss_reduction="mean")
        betas = (cfg.beta1, 0.999)
        self.g_opt = torch.optim.Adam(self.G.parameters(), lr=cfg.lr_g, betas=betas)
        d_opt = DPOptimizerFastGradientClipping if self.ghost else DPOptimizer
        self.d_opt = d_opt(torch.optim.Adam(self.D.parameters(), lr=cfg.lr_d, betas=betas),
                           noise_multiplier=self.sigma, max_grad_norm=cfg.max_grad_norm,
                           expected_batch_size=cfg.batch_size, loss_reduction="mean",
                           generator=self.noise_gen)
        self.d_steps, self.elapsed = 0, 0.0
        self.history: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ harness contract

    @property
    def steps_done(self) -> int:
        return self.d_steps

    @property
    def train_seconds(self) -> float:
        return self.elapsed

    def total_steps(self) -> int:
        return self.planned

    # snapshots at smaller budgets are *not* runs with those budgets: sigma is calibrated to
    # the budget, so a smaller budget means more noise per step (exact_snapshots False)
    exact_snapshots = False

    def epsilon_after_next_step(self) -> float:
        return self.epsilon(steps=self.d_steps + 1)

    def epsilon_spent(self) -> dict[str, float]:
        return dpsgd_ledgers(self.d_steps, self.q, self.sigma, self.cfg.delta)

    def generator_state(self) -> dict[str, torch.Tensor]:
        return self.G.state_dict()

    def load_generator_state(self, state: dict[str, torch.Tensor]) -> None:
        self.G.load_state_dict(state)

    def epsilon(self, conversion: str = LEDGER, steps: int | None = None) -> float:
        return dpsgd_epsilon(self.d_steps if steps is None else steps, self.q, self.sigma,
                             self.cfg.delta, conversion)

    def can_step(self) -> bool:
        return self.d_steps < self.planned  # planned steps fit the budget (see __init__)

    def _onehot(self, y: torch.Tensor) -> torch.Tensor:
        return F.one_hot(y, self.y_dim).to(torch.float32)

    def _d_loss(self, logits: torch.Tensor, real: bool) -> torch.Tensor:
        """Per-example losses."""
        if self.cfg.loss == "hinge":
            return F.relu(1 - logits) if real else F.relu(1 + logits)
        return F.softplus(-logits) if real else F.softplus(logits)

    def _fake(self, b: int, grad: bool = False, reference: int = 0
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """b fakes G(z, y) and their one-hot labels, without an autograd graph unless ``grad``
        (the generator's step; a discriminator step uses them as constants: the same images
        bit for bit, and 1.6 GiB of activations not kept for 4096 fakes). ``reference`` R > 0
        (``clip_fake``'s private pairs): R more fakes are drawn first and dropped, and their
        BatchNorm statistics normalise the b fakes, which are then i.i.d. whatever b is
        (module doc: why a batch of b fakes would break sensitivity C)."""
        n = reference + b
        y = torch.randint(0, self.y_dim, (n,), generator=self.gen).to(self.device)
        z = (torch.rand(n, self.cfg.z_dim, generator=self.gen) * 2 - 1).to(self.device)
        with torch.set_grad_enabled(grad):
            fake = self.G(z, self._onehot(y), reference=reference)
        return fake[reference:], self._onehot(y[reference:])

    def _ghost_clipped_backward(self, per: torch.Tensor) -> None:
        """Leave sum_i min(1, C / |grad l_i|) grad l_i in the discriminator's ``.grad``: the
        two backward passes of Opacus's ``DPTensorFastGradientClipping.backward`` (module
        doc), written out because the loss here is not one ``criterion(output, target)``."""
        per.mean().backward(retain_graph=True)  # hooks: each example's gradient norm
        self.d_opt.zero_grad()  # drops this pass's (unclipped) gradient, keeps the norms
        coef = self.D.get_clipping_coef().to(per.device)  # min(1, C / (|g_i| + 1e-6))
        self.D.disable_hooks()
        try:
            (coef * per).sum().backward()
        finally:
            self.D.enable_hooks()

    def _paired_backward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``clip_fake``: per-example gradients of real example i's loss plus fake i's, for
        the Poisson batch ``idx``, left for ``pre_step`` to clip, sum and noise. The k fakes
        are drawn at once after a reference batch of B (module doc: why). With
        ``physical_batch`` P the pairs go through the discriminator P at a time: each
        physical batch but the last is clipped and summed into Opacus's ``summed_grad`` by a
        skipped ``pre_step`` (``signal_skip_step``, as Opacus's ``BatchMemoryManager`` does)
        and its per-example gradients dropped; the last one's are left for the step's
        ``pre_step``, which adds them, the noise once, and divides by B. The discriminator has
        no batch statistics (GroupNorm), so each pair's gradient, and hence the clipped sum, is
        the same up to the order of float additions; the memory of the per-example gradients
        (two [P x 555,655] tensors while Opacus sums a pair's two passes) shrinks from k to P
        rows. Returns the real logits and the mean fake loss (diagnostics)."""
        k = len(idx)
        fake, fy = self._fake(k, reference=self.cfg.batch_size)
        p = self.cfg.physical_batch or k
        reals, fakes = [], []
        for s in range(0, k, p):
            j = idx[s: s + p]
            real = self.D(self.x[j], self._onehot(self.y[j]))
            fake_per = self._d_loss(self.D(fake[s: s + p], fy[s: s + p]), False)
            # mean loss: Opacus rescales per-example gradients to the examples' own losses
            # and divides the noisy sum by the expected batch size (loss_reduction "mean")
            with warnings.catch_warnings():  # Opacus's hooks announce themselves on inputs
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                (self._d_loss(real, True) + fake_per).mean().backward()  # (no grad: benign)
            if s + p < k:  # a virtual step: clip and accumulate, no noise, no update
                self.d_opt.signal_skip_step(do_skip=True)
                self.d_opt.pre_step()
                self.d_opt.zero_grad(set_to_none=True)  # keeps summed_grad, drops the rest
            reals.append(real.detach())
            fakes.append(fake_per.detach())
        return torch.cat(reals), torch.cat(fakes).mean()

    def step(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        cfg, b = self.cfg, self.cfg.batch_size
        mask = torch.rand(self.n, generator=self.gen) < self.q  # Poisson sampling
        idx = mask.nonzero().squeeze(1).to(self.device)
        # nothing of a step that raised half-way (after a virtual step of _paired_backward)
        # reaches this one: a left-over skip signal would skip this step's noise, a left-over
        # "skipped" flag would keep the old clipped sum through zero_grad (Opacus internals)
        self.d_opt._step_skip_queue.clear()
        self.d_opt._is_last_step_skipped = False
        self.d_opt.zero_grad(set_to_none=True)
        fake_loss = torch.zeros(())
        if len(idx):
            if cfg.clip_fake:  # one fake per real example, in the same per-example gradients
                real, fake_loss = self._paired_backward(idx)
            else:
                real = self.D(self.x[idx], self._onehot(self.y[idx]))
                with warnings.catch_warnings():  # Opacus's hooks announce themselves on
                    warnings.filterwarnings("ignore", message="Full backward hook is firing")
                    self._ghost_clipped_backward(self._d_loss(real, True))  # inputs: benign
            if self.ghost:  # the fast-clipping optimizer only noises: .grad must be clipped
                norms = self.D.per_sample_gradient_norms
                if norms is None or len(norms) != len(idx):
                    raise RuntimeError("ghost clipping: no per-example norms for this batch")
                self.D.per_sample_gradient_norms = None  # never reused by a later step
            if not self.d_opt.pre_step():  # (clip per example,) sum, add N(0, s^2 C^2), / B
                raise RuntimeError("DP-SGD: the optimizer skipped the noise of a step")
        else:  # an empty Poisson batch still releases the noise
            for p in self.D.parameters():
                p.grad = torch.normal(0.0, self.sigma * cfg.max_grad_norm, p.shape,
                                      generator=self.noise_gen, device=self.device) / b
        d_real = float(self._d_loss(real, True).mean().detach()) if len(idx) else float("nan")
        if not cfg.clip_fake:
            fake, fy = self._fake(b)
            self.D.disable_hooks()  # the fake half touches no record: its exact gradient
            try:
                fake_loss = self._d_loss(self.D(fake, fy), False).mean()
                with warnings.catch_warnings():  # Opacus's hooks, disabled, still announce
                    warnings.filterwarnings("ignore", message="Full backward hook is firing")
                    fake_loss.backward()
            finally:
                self.D.enable_hooks()
        self.d_opt.original_optimizer.step()
        self.d_opt.zero_grad(set_to_none=True)  # no per-example state outlives the step
        self.d_steps += 1
        row: dict[str, Any] = {"step": self.d_steps, "real_batch": int(len(idx)),
                               "d_loss": d_real + float(fake_loss.detach())}
        if self.d_steps % cfg.n_critic == 0:
            self.D.disable_hooks()
            try:
                fake, fy = self._fake(b, grad=True)
                logits = self.D(fake, fy)
                g_loss = -logits.mean() if cfg.loss == "hinge" else F.softplus(-logits).mean()
                self.g_opt.zero_grad(set_to_none=True)
                g_loss.backward()
                self.g_opt.step()
            finally:
                self.D.enable_hooks()
            self.D.zero_grad(set_to_none=True)
            row["g_loss"] = float(g_loss.detach())
        dt = time.perf_counter() - t0
        self.elapsed += dt
        row["seconds"] = dt
        if self.d_steps % max(1, self.planned // 200) == 0 or not self.can_step():
            row["epsilon"] = self.epsilon()  # about 200 rows per run (the accountant is slow)
            self.history.append(row)
        return row

    def sample(self, n: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        from ..datalens import sample_generator

        return sample_generator(self.G, n, self.cfg.batch_size, generator, self.device)

    def state_dict(self) -> dict[str, Any]:
        return {"config": self.cfg.to_dict(), "seed": self.seed, "d_steps": self.d_steps,
                "privacy": self._privacy_key(),
                "elapsed": self.elapsed, "G": self.G.state_dict(),
                "D": self.D._module.state_dict(), "g_opt": self.g_opt.state_dict(),
                "d_opt": self.d_opt.original_optimizer.state_dict(),
                "gen": self.gen.get_state(), "noise_gen": self.noise_gen.get_state(),
                "history": self.history}

    def load_state_dict(self, st: dict[str, Any]) -> None:
        if DPGANConfig.from_dict(st["config"]) != self.cfg or st["seed"] != self.seed:
            raise ValueError("the checkpoint was written by a different config or seed; use "
                             "another output folder or delete it")
        if st.get("privacy") != self._privacy_key():
            # a resumed run must charge every step at the noise it was taken with
            raise ValueError(f"the checkpoint's mechanism {st.get('privacy')} differs from this "
                             f"run's {self._privacy_key()} (another calibration or data size); "
                             "use another output folder or delete it")
        self.d_steps, self.elapsed = int(st["d_steps"]), float(st["elapsed"])
        self.G.load_state_dict(st["G"])
        self.D._module.load_state_dict(st["D"])
        self.g_opt.load_state_dict(st["g_opt"])
        self.d_opt.original_optimizer.load_state_dict(st["d_opt"])
        self.gen.set_state(st["gen"])
        self.noise_gen.set_state(st["noise_gen"])
        self.history = list(st["history"])

    def _privacy_key(self) -> dict[str, Any]:
        """What the ledger charges each step with: a resumed run must have taken its earlier
        steps with the same."""
        key = {"sigma": self.sigma, "sample_rate": self.q, "train_images": self.n,
               "planned_steps": self.planned}
        if self.cfg.clip_fake:  # a run begun with fakes drawn as one batch of k cannot resume
            key["paired_fakes"] = "reference batch of B"
        return key

    def record(self) -> dict[str, Any]:
        return {
            "epsilon": dpsgd_ledgers(self.d_steps, self.q, self.sigma, self.cfg.delta),
            "conversion": LEDGER, "noise_multiplier": self.sigma, "sample_rate": self.q,
            "batch": self.cfg.batch_size, "train_images": self.n,
            "privacy": {
                "mechanism": "DP-SGD on the discriminator (Opacus): Poisson sampling, "
                             "per-example clipping, Gaussian noise"
                             + ("; each real example clipped together with one fake (the "
                                "fakes i.i.d. given a reference batch of B that fixes their "
                                "BatchNorm statistics)"
                                if self.cfg.clip_fake else
                                "; the fake half's exact gradient added after the release"),
                "sensitivity": f"L2 C = {self.cfg.max_grad_norm} per example",
                "accountant": f"PoissonSampledDpEvent(q = {self.q:.6g}, "
                              f"GaussianDpEvent({self.sigma:.6g})) x {self.d_steps} steps; "
                              "Opacus RDP (stopping), Opacus PRV, dp_accounting PLD and the "
                              "simple RDP conversion (privacy.subsampled)",
                "neighbouring": "add or remove one record",
                "event": repr(dpsgd_event(self.q, self.sigma, self.d_steps)),
                "dp_guarantee": "epsilon under every ledger (data-independent)",
                "dp_ledgers": list(LEDGERS),
            },
        }


def discriminator_probe(m: DPGAN, steps: int, every: int, n: int = 256,
                        seed: int = 12345,
                        score: Callable[[torch.Tensor, torch.Tensor], dict[str, float]]
                        | None = None, progress: bool = False) -> list[dict[str, float]]:
    """Train ``m`` for ``steps`` discriminator steps and measure its discriminator before the
    first and after every ``every``-th, on one fixed probe set: ``n`` real training images
    (drawn once) and ``n`` fakes (fixed z and labels, from a copy of G at that point, so the
    run's own BatchNorm state is untouched). A diagnostic of the module doc's finding (why the
    small-batch setting's D calls everything fake), not part of any run.

    Per row: the mean logits on the real and the fake set; ``fake_pull``, the norm of the fake
    half's exact mean-loss gradient (what ``step`` adds outside the clip when ``clip_fake`` is
    off); ``real_pull_clipped``, the norm of (1/n) sum_i min(1, C / |g_i|) g_i over the real
    examples' loss gradients g_i (the real half's clipped mean before the noise: at most C);
    ``real_grad_median``, the median |g_i|; and ``noise_per_coordinate`` = sigma C / B, the
    standard deviation of the noise each coordinate of that mean receives. The probe draws its
    randomness from its own generator and leaves no gradient behind, so the steps it wraps
    are the run's own (same seed: the same trajectory as an unprobed run).

    ``score(fakes, labels)`` (optional) measures the generator on the same fixed fakes and
    their integer labels, e.g. a domain classifier's label agreement (``scripts/probe_dpgan.py``):
    whether G learns, which D's logits alone do not say; its items join each row.
    ``progress``: a tqdm bar over the steps (``scripts/probe_dpgan.py`` shows one)."""
    import copy

    positive_int("steps", steps)
    positive_int("every", every)
    positive_int("n", n)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, m.n, (n,), generator=g).to(m.device)
    xr, yr = m.x[idx], m._onehot(m.y[idx])
    zf = (torch.rand(n, m.cfg.z_dim, generator=g) * 2 - 1).to(m.device)
    yf = m._onehot(torch.randint(0, m.y_dim, (n,), generator=g).to(m.device))
    params = [p for p in m.D.parameters() if p.requires_grad]
    c = m.cfg.max_grad_norm

    def flat_grad(loss: torch.Tensor) -> torch.Tensor:
        return torch.cat([t.reshape(-1) for t in torch.autograd.grad(loss, params)])

    def pulls(fake: torch.Tensor) -> tuple[float, float, float]:
        fake_pull = flat_grad(m._d_loss(m.D(fake, yf), False).mean()).norm()
        clipped = torch.zeros(sum(p.numel() for p in params), device=m.device)
        norms = []
        for i in range(n):
            gi = flat_grad(m._d_loss(m.D(xr[i:i + 1], yr[i:i + 1]), True).sum())
            norms.append(float(gi.norm()))
            clipped += gi * min(1.0, c / max(norms[-1], 1e-12))
        return float(fake_pull), float((clipped / n).norm()), float(np.median(norms))

    def measure(step: int) -> dict[str, float]:
        with torch.no_grad():
            fake = copy.deepcopy(m.G)(zf, yf)
        m.D.disable_hooks()
        try:
            with warnings.catch_warnings():  # Opacus's hooks, disabled, still announce
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                with torch.no_grad():
                    lr, lf = m.D(xr, yr), m.D(fake, yf)
                fake_pull, real_pull, median = pulls(fake)
        finally:
            m.D.enable_hooks()
        row = {"step": step, "logit_real": float(lr.mean()), "logit_fake": float(lf.mean()),
               "fake_pull": fake_pull, "real_pull_clipped": real_pull,
               "real_grad_median": median,
               "noise_per_coordinate": m.sigma * c / m.cfg.batch_size}
        if score is not None:
            row.update(score(fake.detach(), yf.argmax(1)))
        return row

    rows = [measure(m.d_steps)]
    for _ in tqdm(range(steps), disable=not progress, unit="step",
                  desc=f"probe dpgan clip_fake={m.cfg.clip_fake}"):
        row = m.step()
        if m.d_steps % every == 0:
            rows.append({**measure(m.d_steps), "d_loss": row["d_loss"]})
    return rows
