"""DC-GAN: the paper's non-private reference (the ε = ∞ column of ``tab:image``).

The paper says only that it uses the DCGAN of carpedm20/DCGAN-tensorflow with its defaults
(l.336); how it was trained is not stated. We train the conditional DCGAN of ``models.py``
non-privately on the whole training set with that repository's defaults: Adam (lr 2e-4, beta1
0.5), batch 64, 25 epochs, and two generator steps after every discriminator step (its trick
against a discriminator that wins too fast); z ~ U(-1, 1), the labels of each real batch
condition the fakes of that step; a last incomplete batch is dropped, as there. Its MNIST
model is the one DataLens's ``models.py`` follows, with the default widths of its DCGAN class
(``main.py`` passes none for MNIST): the generator is the same (gf_dim 64, gfc_dim 1024), the
discriminator wider than DataLens's (df_dim 64 and dfc_dim 1024 against 32 and 256), so
``df_dim``/``dfc_dim`` default to carpedm20's. Records written before these were settings
(the committed MNIST ``cpu-datalens-d`` run) ran DataLens's discriminator and say so.

Our choices where neither says: BatchNorm uses batch statistics in training and sampling, as
in DataLens's own generator (carpedm20's sampler uses moving averages), and samples are drawn
in batches of 64 with uniform labels (``datalens.sample_generator``). One harness step is one
epoch. Privacy: none (ε = ∞); the record says so.

The logged losses sit at log 4 (D) and log 2 (G) from the first epoch on. D sees real and fake
images in separate batches (as in carpedm20) and normalises its last hidden layer with
training-mode BatchNorm, which fixes each unit's batch mean and variance, so the batch-mean
logits of a real and a fake batch can differ only through higher moments; with two generator
steps per D step, D ends up giving no signal at all. First seen by hand on the Fashion-MNIST
cpu run after its 10 epochs (2026-11-29; its generator had collapsed to nearly one image per
class), then recorded by :func:`discriminator_probe` (``scripts/probe_dcgan.py``;
``data/results/dcgan/fashion-mnist-epsinf/cpu/probe-discriminator.json``: 3 epochs on the
first 16k Fashion-MNIST images): D's logits on real and on fake end with the same mean and
spread (d_loss 1.388), while the same D trained alone for 150 batches against that generator
separates them (1.40 -> 0.50), as does a fresh one (0.67), and the fakes' variety within a
class shrinks epoch by epoch. One joint D batch of real and fake (``joint_d_batch``) leaves D
at log 4 too, while one generator step per D step (``g_steps = 1``) lets D learn a little
(1.36) and the variety within a class grows; the CPU queue runs that variant (``cpu-g1``)
beside the faithful cells. The
MNIST samples stay recognisable, class-conditional digits. carpedm20's own MNIST example
behaves alike: its users report d_loss and g_loss near 1.3 and 0.7 for days of training while
the samples sharpen (carpedm20/DCGAN-tensorflow issue #55, and the MNIST pull request #24).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from .._validate import boolean, interval, positive_float, positive_int
from ..config import config_from_dict
from ..data import load_dataset
from ..models import DF_DIM, DFC_DIM, Discriminator, Generator


@dataclass(frozen=True)
class DCGANConfig:
    """A DC-GAN run (non-private; ``epsilon`` must be ``inf``)."""

    dataset: str
    epsilon: float = math.inf
    epochs: int = 25
    batch_size: int = 64
    lr: float = 2e-4
    beta1: float = 0.5
    g_steps: int = 2  # generator steps per discriminator step (carpedm20)
    # D on one batch of the real and the fake images together (its BatchNorm statistics over
    # both), in D's step and in the generator's, instead of carpedm20's separate batches: a
    # diagnostic variant (scripts/probe_dcgan.py), off in every committed run
    joint_d_batch: bool = False
    z_dim: int = 100
    # the discriminator's widths: carpedm20's defaults (its conv to df_dim + y_dim channels,
    # its linear layer of dfc_dim units); DataLens's own discriminator is 32 and 256
    df_dim: int = 64
    dfc_dim: int = 1024
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
        if self.epsilon is None or self.epsilon != math.inf:
            raise ValueError(f"DC-GAN is non-private: epsilon must be inf, got {self.epsilon}")
        for name in ("epochs", "batch_size", "g_steps", "z_dim", "df_dim", "dfc_dim",
                     "n_samples", "eval_epochs", "eval_batch_size"):
            positive_int(name, getattr(self, name))
        for name in ("lr", "eval_lr"):
            positive_float(name, getattr(self, name))
        interval("beta1", self.beta1, 0, 1)
        boolean("joint_d_batch", self.joint_d_batch)
        if self.train_limit is not None:
            positive_int("train_limit", self.train_limit)
        if self.eval_test_limit is not None:
            positive_int("eval_test_limit", self.eval_test_limit)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["epsilon"] = None  # JSON has no infinity: null means ε = ∞ here
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DCGANConfig:
        """A config from JSON. A config without the discriminator's widths was written before
        they were settings (2026-11-28), when DC-GAN ran DataLens's discriminator: it gets
        DataLens's widths, so an old record or checkpoint reads as what it ran."""
        d = dict(d)
        if d.get("epsilon", math.inf) is None:
            d["epsilon"] = math.inf
        d.setdefault("df_dim", DF_DIM)
        d.setdefault("dfc_dim", DFC_DIM)
        return config_from_dict(cls, d, "DC-GAN ")


class DCGAN:
    """The non-private conditional DCGAN (harness ``Method``; see module doc)."""

    name = "dcgan"
    config_class = DCGANConfig

    def __init__(self, cfg: DCGANConfig, *, seed: int = 0, device: str = "auto",
                 data_dir: str | Path | None = None, profile: str = "custom"):
        from ..datalens import resolve_device

        self.cfg, self.seed, self.profile = cfg, int(seed), profile
        self.device = resolve_device(device)
        ds = load_dataset(cfg.dataset, data_dir)
        x, y = ds.x_train, ds.y_train
        if cfg.train_limit is not None:
            x, y = x[: cfg.train_limit], y[: cfg.train_limit]
        if len(x) < cfg.batch_size:
            raise ValueError(f"batch_size {cfg.batch_size} exceeds the {len(x)} training "
                             "images")
        self.shape, self.y_dim = ds.shape, ds.num_classes
        self.x = torch.from_numpy(x).to(self.device)
        self.y = torch.from_numpy(y).to(self.device)
        self.gen = torch.Generator().manual_seed(self.seed)  # shuffles, z
        torch.manual_seed(self.seed + 2)
        self.G = Generator(cfg.z_dim, self.y_dim, self.shape).to(self.device)
        self.D = Discriminator(self.y_dim, self.shape, cfg.df_dim, cfg.dfc_dim).to(self.device)
        betas = (cfg.beta1, 0.999)
        self.g_opt = torch.optim.Adam(self.G.parameters(), lr=cfg.lr, betas=betas)
        self.d_opt = torch.optim.Adam(self.D.parameters(), lr=cfg.lr, betas=betas)
        self.epoch, self.elapsed = 0, 0.0
        self.history: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ harness contract

    @property
    def steps_done(self) -> int:
        return self.epoch

    @property
    def train_seconds(self) -> float:
        return self.elapsed

    def total_steps(self) -> int:
        return self.cfg.epochs

    def can_step(self) -> bool:
        return self.epoch < self.cfg.epochs

    def _onehot(self, y: torch.Tensor) -> torch.Tensor:
        return F.one_hot(y, self.y_dim).to(torch.float32)

    def logits(self, D: Discriminator, x: torch.Tensor, y: torch.Tensor, fake: torch.Tensor,
               y_fake: torch.Tensor, *, real: bool = True
               ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """``D``'s logits on real images ``x`` and on ``fake`` (one-hot labels ``y``,
        ``y_fake``): carpedm20's two batches, each normalised by its own BatchNorm statistics
        (``real=False``: the fake batch only, as in a generator step), or, with
        ``joint_d_batch``, one batch of both (its real half is always computed then)."""
        if self.cfg.joint_d_batch:
            out = D(torch.cat([x, fake]), torch.cat([y, y_fake]))
            return out[: len(x)], out[len(x):]
        return (D(x, y) if real else None), D(fake, y_fake)

    def d_loss(self, D: Discriminator, x: torch.Tensor, y: torch.Tensor, fake: torch.Tensor,
               y_fake: torch.Tensor) -> torch.Tensor:
        """D's non-saturating loss: softplus(-D(real)) + softplus(D(fake)), batch means
        (:meth:`logits`)."""
        real_logit, fake_logit = self.logits(D, x, y, fake, y_fake)
        return F.softplus(-real_logit).mean() + F.softplus(fake_logit).mean()

    def step(self) -> dict[str, Any]:
        """One epoch: for every full batch, a discriminator step on real and fake, then
        ``g_steps`` generator steps on the same z and labels (non-saturating loss)."""
        t0 = time.perf_counter()
        b = self.cfg.batch_size
        perm = torch.randperm(len(self.x), generator=self.gen).to(self.device)
        d_losses, g_losses = [], []
        for s in range(0, len(perm) - b + 1, b):
            idx = perm[s: s + b]
            x, oh = self.x[idx], self._onehot(self.y[idx])
            z = (torch.rand(b, self.cfg.z_dim, generator=self.gen) * 2 - 1).to(self.device)
            with torch.no_grad():  # a constant for D's step (the same images, no graph)
                fake = self.G(z, oh)
            d_loss = self.d_loss(self.D, x, oh, fake, oh)
            self.d_opt.zero_grad(set_to_none=True)
            d_loss.backward()
            self.d_opt.step()
            for _ in range(self.cfg.g_steps):
                g_loss = F.softplus(-self.logits(self.D, x, oh, self.G(z, oh), oh,
                                                 real=False)[1]).mean()
                self.g_opt.zero_grad(set_to_none=True)
                g_loss.backward()
                self.g_opt.step()
            d_losses.append(float(d_loss.detach()))
            g_losses.append(float(g_loss.detach()))
        self.epoch += 1
        dt = time.perf_counter() - t0
        self.elapsed += dt
        row = {"step": self.epoch, "d_loss": float(np.mean(d_losses)),
               "g_loss": float(np.mean(g_losses)), "batches": len(d_losses), "seconds": dt}
        self.history.append(row)
        return row

    def sample(self, n: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        from ..datalens import sample_generator

        return sample_generator(self.G, n, self.cfg.batch_size, generator, self.device)

    def state_dict(self) -> dict[str, Any]:
        return {"config": self.cfg.to_dict(), "seed": self.seed, "epoch": self.epoch,
                "elapsed": self.elapsed, "G": self.G.state_dict(), "D": self.D.state_dict(),
                "g_opt": self.g_opt.state_dict(), "d_opt": self.d_opt.state_dict(),
                "gen": self.gen.get_state(), "torch_rng": torch.get_rng_state(),
                "history": self.history}

    def load_state_dict(self, st: dict[str, Any]) -> None:
        if DCGANConfig.from_dict(st["config"]) != self.cfg or st["seed"] != self.seed:
            raise ValueError("the checkpoint was written by a different config or seed; use "
                             "another output folder or delete it")
        self.epoch, self.elapsed = int(st["epoch"]), float(st["elapsed"])
        self.G.load_state_dict(st["G"])
        self.D.load_state_dict(st["D"])
        self.g_opt.load_state_dict(st["g_opt"])
        self.d_opt.load_state_dict(st["d_opt"])
        self.gen.set_state(st["gen"])
        torch.set_rng_state(st["torch_rng"])
        self.history = list(st["history"])

    def record(self) -> dict[str, Any]:
        return {"epsilon": {}, "batch": self.cfg.batch_size, "train_images": len(self.x),
                "privacy": {"mechanism": "none: non-private reference (the ε = ∞ column)",
                            "event": "NonPrivateDpEvent()", "dp_guarantee": "none",
                            "dp_ledgers": []}}


def discriminator_probe(m: DCGAN, epochs: int, n: int = 256, seed: int = 12345,
                        alone_batches: int = 150,
                        score: Callable[[torch.Tensor, torch.Tensor], dict[str, float]]
                        | None = None, progress: bool = False) -> dict[str, Any]:
    """Train ``m`` for ``epochs`` epochs and measure it before the first and after each, on one
    fixed probe set: ``n`` real training images (drawn once) and ``n`` fakes (fixed z and
    uniform labels). A diagnostic of the module doc's finding (D gives G no signal with two
    generator steps per D step, and the generator collapses within each class), not part of
    any run. Copies of G and D are measured (the run's own BatchNorm state and optimizers are
    untouched), and the probe draws its randomness from its own generator, so the epochs it
    wraps are the run's own (same seed: the same trajectory as an unprobed run).

    Per row, D in training mode as in the run (separate real and fake batches, or one joint
    batch where ``joint_d_batch``): the mean and standard deviation of its logits on the real
    and on the fake set; the run's mean ``d_loss``/``g_loss`` over the epoch; and the
    variety within a class: the mean pairwise L2 distance between fakes of one label, averaged
    over labels, beside the same for the real set (``within_class_fake`` /
    ``within_class_real``: a generator collapsed to one image per class has a ratio near 0).
    ``score(fakes, labels)`` (optional, e.g. the domain classifier's label agreement) joins
    each row. ``n`` must leave some class with two probe images.

    After the last epoch, ``alone``: whether anything was left to learn. A copy of the final D,
    and a fresh D, each trained alone (the run's Adam settings) for ``alone_batches`` batches
    against the frozen final G on the same fresh real batches and z (``alone_batches`` >= 20):
    D's loss over the first and the last ten of those batches (log 4 = 1.386 is chance).
    ``progress``: tqdm bars over the epochs and the batches alone (``scripts/probe_dcgan.py``)."""
    import copy

    positive_int("epochs", epochs)
    positive_int("n", n)
    if alone_batches < 20:
        raise ValueError(f"alone_batches must be at least 20 (two windows of ten), got "
                         f"{alone_batches}")
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(m.x), (n,), generator=g).to(m.device)
    xr, lr_ = m.x[idx], m.y[idx]
    zf = (torch.rand(n, m.cfg.z_dim, generator=g) * 2 - 1).to(m.device)
    lf = torch.randint(0, m.y_dim, (n,), generator=g).to(m.device)
    yr, yf = m._onehot(lr_), m._onehot(lf)

    def within_class(x: torch.Tensor, labels: torch.Tensor) -> float:
        d = [float(torch.pdist(xc).mean()) for c in range(m.y_dim)
             if len(xc := x[labels == c].flatten(1).double()) > 1]
        if not d:
            raise ValueError(f"n = {n} probe images leave no class with two of them")
        return float(np.mean(d))

    real_spread = within_class(xr, lr_)

    def measure(row: dict[str, Any]) -> dict[str, Any]:
        with torch.no_grad():
            fake = copy.deepcopy(m.G)(zf, yf)
            r, f = m.logits(copy.deepcopy(m.D), xr, yr, fake, yf)
        out = {"epoch": m.epoch, "logit_real": float(r.mean()), "logit_real_sd": float(r.std()),
               "logit_fake": float(f.mean()), "logit_fake_sd": float(f.std()),
               "within_class_fake": within_class(fake, lf), "within_class_real": real_spread,
               **{k: row[k] for k in ("d_loss", "g_loss") if k in row}}
        if score is not None:
            out.update(score(fake, lf))
        return out

    rows = [measure({})]
    for _ in tqdm(range(epochs), disable=not progress, unit="epoch", desc="probe dcgan"):
        rows.append(measure(m.step()))

    def alone(D: Discriminator) -> dict[str, float]:
        # the same real batches and z for the final and the fresh D (a generator of its own)
        ga = torch.Generator().manual_seed(seed + 2)
        G = copy.deepcopy(m.G)
        opt = torch.optim.Adam(D.parameters(), lr=m.cfg.lr, betas=(m.cfg.beta1, 0.999))
        b, losses = m.cfg.batch_size, []
        for _ in tqdm(range(alone_batches), disable=not progress, unit="batch",
                      desc="probe dcgan, D alone"):
            i = torch.randint(0, len(m.x), (b,), generator=ga).to(m.device)
            z = (torch.rand(b, m.cfg.z_dim, generator=ga) * 2 - 1).to(m.device)
            y = m._onehot(m.y[i])
            with torch.no_grad():
                fake = G(z, y)
            loss = m.d_loss(D, m.x[i], y, fake, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        return {"first10": float(np.mean(losses[:10])), "last10": float(np.mean(losses[-10:]))}

    with torch.random.fork_rng(devices=[]):  # the fresh D's initialisation; the caller's
        torch.manual_seed(seed + 1)          # global random state is left as it was
        fresh = Discriminator(m.y_dim, m.shape, m.cfg.df_dim, m.cfg.dfc_dim).to(m.device)
    return {"rows": rows, "alone": {"final_d": alone(copy.deepcopy(m.D)),
                                    "fresh_d": alone(fresh), "batches": alone_batches}}
