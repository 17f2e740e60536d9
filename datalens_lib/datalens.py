"""DataLens training (paper Algorithm 1), as the official code runs it.

Per generator step ("epoch" in the official code):

1. every teacher takes ``d_step`` Adam steps (``pretrain_teacher`` on the first step) on its
   fixed real batch and on fakes G(z, y_teacher) conditioned on its own real labels;
2. B = min(30, partition size) synthetic samples G(z, y) with uniform random labels are the
   B TopAgg queries: each teacher's signal is -d/dx of its batch-mean BCE(D(x), 1);
3. TopAgg (Alg. 3) returns g_bar in {-1, 0, 1}^d per query; x_hat = G(z) + gamma g_bar, and
   the generator takes an Adam step on sum (G(z) - x_hat)^2.

Privacy: with TopAgg each query is (lambda, 2 k lambda / sigma^2)-RDP (sensitivity 2 sqrt(k),
Lemma 1); the other compressors (``aggregator``) state their own sensitivity and ledger
(``aggregation.base``, ``privacy.gaussian.CompressorAccountant``). Training stops before the
step whose B queries would push epsilon (``conversion``) past the budget. Teachers see
disjoint partitions (``data.partition``), so one record affects one teacher's votes only,
for the neighbouring relation of the chosen partition: the official class-ordered split keeps
that promise only for neighbours that share their labels, the label-free
``partition="shuffled"`` for any replaced record (``data.partition``; the run record states
which).

Runs checkpoint every ``checkpoint_every`` steps (temp file + rename) and ``resume=True``
continues from the last checkpoint with the same RNG streams, ending with the same result as an
uninterrupted run (the same samples and privacy ledger; float32 CPU kernels are not bitwise
reproducible across processes, so teacher losses may differ at ~1e-7 between any two runs).
A run is complete when ``run.json`` says ``"status": "complete"``; it is written last, after
``samples.npz``.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._validate import nonneg_int
from .aggregation import make_aggregator
from .config import TrainConfig
from .data import NEIGHBOURING, get_spec, load_dataset, teacher_partition
from .ensemble import TeacherEnsemble, split_shapes
from .methods.harness import Run
from .models import Generator
from .privacy import (
    DATA_DEPENDENT,
    TopAggAccountant,
    data_independent_ledgers,
    topagg_epsilon,
    topagg_max_queries,
)
from .privacy.gaussian import CompressorAccountant


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` fails clearly without a GPU."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and torch.cuda.is_available():
        set_cuda_precision()
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no GPU")
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    return torch.device(device)


def set_cuda_precision() -> bool:
    """Full float32 on CUDA unless ``DATALENS_TF32=1``: PyTorch lets cuDNN run float32
    convolutions in TF32 (10-bit mantissa) by default, a speed trick that can change results,
    so here it is opt-in. Returns whether TF32 is on; every record's ``hardware.cuda_tf32``
    says which (records without it ran cuDNN convolutions in TF32, PyTorch's default)."""
    tf32 = os.environ.get("DATALENS_TF32", "0") == "1"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    return tf32


def ensemble_state_bytes(cfg: TrainConfig, shape: tuple[int, int, int], y_dim: int) -> int:
    """Bytes of the teachers' float32 parameters plus their two Adam moments."""
    per_teacher = sum(int(np.prod(s)) for s in split_shapes(y_dim, shape).values())
    moment = 2 if cfg.moment_dtype == "bfloat16" else 4
    return cfg.teachers * per_teacher * (4 + 2 * moment)


def check_ensemble_memory(cfg: TrainConfig, shape: tuple[int, int, int], y_dim: int,
                          device: torch.device) -> None:
    """Refuse, before allocating, an ensemble whose state cannot fit the device's free memory
    (e.g. the paper's 4000 MNIST teachers with float32 Adam moments need 26.7 GB)."""
    need = ensemble_state_bytes(cfg, shape, y_dim)
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        import psutil

        free = psutil.virtual_memory().available
    if need > free:
        hint = (" Set moment_dtype=bfloat16 (CLI: --set moment_dtype=bfloat16) to halve the "
                "Adam state, or use fewer teachers." if cfg.moment_dtype == "float32" else "")
        raise ValueError(f"{cfg.teachers} teachers need {need / 2**30:.1f} GiB for parameters "
                         f"and Adam moments ({cfg.moment_dtype}), but only {free / 2**30:.1f} "
                         f"GiB is free on {device}.{hint}")


def expected_steps(cfg: TrainConfig, batch: int, d: int | None = None) -> int:
    """Generator steps the privacy budget allows (capped by ``max_steps``): B queries each.
    Aggregators other than TopAgg need the gradient dimension ``d`` (their sensitivity
    depends on it)."""
    if cfg.aggregator == "topagg":
        queries = topagg_max_queries(cfg.epsilon, cfg.k, cfg.sigma, cfg.delta, cfg.conversion)
    else:
        if d is None:
            raise ValueError(f"aggregator {cfg.aggregator!r} needs the gradient dimension d")
        queries = compressor_accountant(cfg, d).max_queries(cfg.epsilon, cfg.conversion)
    steps = queries // batch
    return steps if cfg.max_steps is None else min(steps, cfg.max_steps)


def compressor_accountant(cfg: TrainConfig, d: int) -> CompressorAccountant:
    """The ledgers of a non-TopAgg aggregator (``aggregation.base``): its official charge
    (``paper``) and its sound sensitivity (``rdp``, ``pld``)."""
    agg = make_aggregator(cfg)
    return CompressorAccountant(agg.noise_multiplier(d, cfg.teachers, charged=True),
                                agg.noise_multiplier(d, cfg.teachers), cfg.delta)


def student_loss(x: torch.Tensor, g_bar: torch.Tensor, gamma: float) -> torch.Tensor:
    """The generator's loss in paper Alg. 1: ``sum (G(z) - x_hat)^2`` with the target
    ``x_hat = G(z) + gamma * g_bar`` held fixed, so ``d loss / d G(z) = -2 gamma g_bar``: the
    samples move along TopAgg's aggregated direction (official code: ``gamma`` = 1e-3)."""
    x_hat = x.detach() + gamma * g_bar
    return ((x - x_hat) ** 2).sum()


#: most generator rows in one sampling call (~1.7 GB of activations without gradients,
#: measured): 64 batches of DataLens's 15 or of the GANs' 64, one of DP-GAN's large 4096
SAMPLE_ROWS = 4096


@torch.no_grad()
def sample_generator(G: Generator, n: int, batch: int, generator: torch.Generator,
                     device: torch.device | str = "cpu", groups_per_call: int = 64
                     ) -> tuple[np.ndarray, np.ndarray]:
    """n images G(z, y) with uniform random labels and z ~ U(-1, 1), as float16, and labels.

    Generated in batches of exactly ``batch`` (BatchNorm in training mode over each batch, as
    during training): when ``batch`` does not divide ``n`` the last batch is filled up and the
    extra images dropped, so no image comes from a smaller batch's statistics (an older version
    put the remainder, e.g. the last 160 of 100k, in one odd-sized batch; issue 12).
    ``groups_per_call`` batches share one forward call with separate BatchNorm statistics (the
    same numbers, fewer and larger kernels), at most :data:`SAMPLE_ROWS` rows (at least one
    batch) per call. The labels and z are drawn from ``generator`` on
    the CPU, so the images do not depend on the device beyond float rounding; the first ``n``
    labels are those of a draw of ``n``."""
    n_pad = -(-n // batch) * batch
    labels = torch.randint(0, G.y_dim, (n_pad,), generator=generator)
    xs = []
    per_call = batch * max(1, min(groups_per_call, SAMPLE_ROWS // batch))
    for s in range(0, n_pad, per_call):
        y = labels[s: s + per_call]
        m = len(y)  # a multiple of batch
        z = torch.rand(m, G.z_dim, generator=generator) * 2 - 1
        x = G(z.to(device), F.one_hot(y.to(device), G.y_dim).to(torch.float32),
              groups=m // batch)
        xs.append(x.cpu().to(torch.float16))
    return torch.cat(xs)[:n].numpy(), labels[:n].numpy().astype(np.int64)


@dataclass
class _State:
    step: int = 0
    teacher_steps: int = 0
    elapsed: float = 0.0


def query_batch(cfg: Any, n_records: int) -> int:
    """B, the queries of one generator step (each teacher's batch): min(batch_cap,
    floor(n / teachers)) over the n records a run of ``cfg`` trains on (its ``train_limit``
    applied to the ``n_records`` of the training set), since the partitions give every
    teacher floor(n / teachers) records. The one home of B for training and the ledgers the
    book computes without training."""
    n = n_records if cfg.train_limit is None else min(n_records, cfg.train_limit)
    return min(cfg.batch_cap, n // cfg.teachers)


class DataLens:
    """DataLens as a method of the shared harness (``methods.harness.Method``): a student
    generator trained with a teacher ensemble and TopAgg; see module doc."""

    name = "datalens"
    config_class = TrainConfig

    def __init__(self, cfg: TrainConfig, *, seed: int = 0, device: str = "auto",
                 data_dir: str | Path | None = None, profile: str = "custom"):
        self.cfg = cfg
        self.seed, self.profile = nonneg_int("seed", seed), profile
        self.device = resolve_device(device)
        d = int(np.prod(get_spec(cfg.dataset).shape))
        if isinstance(cfg, TrainConfig) and not cfg.aggregator.startswith("d2pfed") \
                and cfg.k > d:  # refused before any data is read (D2P-Fed has no k)
            raise ValueError(f"k must be <= the gradient dimension d = {d} of {cfg.dataset}, "
                             f"got {cfg.k}")
        ds = load_dataset(cfg.dataset, data_dir)
        x, y = ds.x_train, ds.y_train
        if cfg.train_limit is not None:
            x, y = x[: cfg.train_limit], y[: cfg.train_limit]
        self.n_private = len(y)  # the private records (the run record's privacy.records)
        self.shape, self.y_dim = ds.shape, ds.num_classes
        self.d = int(np.prod(self.shape))
        self.parts = torch.from_numpy(self._partition(y)).to(self.device)
        self.per_teacher = self.parts.shape[1]
        self.batch = query_batch(cfg, len(ds.y_train))
        self.batches_per_epoch = self.per_teacher // self.batch
        # the private aggregator (G-PATE's harness method has its own, see methods.gpate)
        self.agg = make_aggregator(cfg) if isinstance(cfg, TrainConfig) else None
        if isinstance(cfg, TrainConfig) and cfg.aggregator == "fetchsgd-coded" \
                and cfg.conversion == "paper":
            warnings.warn("fetchsgd-coded stops on the official code's ledger, which charges "
                          "TopAgg's 2 sqrt(k) and is not a valid bound: this run has no "
                          "meaningful DP guarantee (see its record's rdp epsilon)", stacklevel=2)
        self.acc = self._make_accountant()
        if self.total_steps() == 0:  # refuse before the ensemble is allocated
            one = self.acc.epsilon_if(self.batch, cfg.conversion)
            raise ValueError(f"epsilon {cfg.epsilon} is below what one generator step costs "
                             f"({self.batch} queries: epsilon {one:.4g} under the "
                             f"{cfg.conversion!r} conversion)")
        self.x = torch.from_numpy(x).to(self.device)
        self.y = torch.from_numpy(y).to(self.device)

        self.gen_cpu = torch.Generator().manual_seed(self.seed)
        self.gen_dev = torch.Generator(device=self.device).manual_seed(self.seed + 1)
        torch.manual_seed(self.seed + 2)
        self.G = Generator(cfg.z_dim, self.y_dim, self.shape).to(self.device)
        self.g_opt = torch.optim.Adam(self.G.parameters(), lr=cfg.lr_generator,
                                      betas=(0.5, 0.999))
        moment = torch.bfloat16 if cfg.moment_dtype == "bfloat16" else None
        check_ensemble_memory(cfg, self.shape, self.y_dim, self.device)
        compute = torch.bfloat16 if cfg.compute_dtype == "bfloat16" else None
        self.ens = TeacherEnsemble(cfg.teachers, self.y_dim, self.shape, chunk=cfg.chunk,
                                   lr=cfg.lr_teacher, moment_dtype=moment, device=self.device,
                                   generator=torch.Generator().manual_seed(self.seed + 3),
                                   compute_dtype=compute,
                                   init_slots=getattr(cfg, "init_slots", None),
                                   adam_slots=getattr(cfg, "adam_slots", None))
        self.state = _State()
        self.history: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ one generator step

    def _onehot(self, y: torch.Tensor) -> torch.Tensor:
        return F.one_hot(y, self.y_dim).to(torch.float32)

    def _train_teachers(self, z: torch.Tensor) -> float:
        cfg, st = self.cfg, self.state
        n_steps = cfg.pretrain_teacher if st.step == 0 and cfg.pretrain_teacher else cfg.d_step
        b0 = (st.step % self.batches_per_epoch) * self.batch
        losses = []
        table = None
        if cfg.teacher_fakes == "class_table":
            with torch.no_grad():  # [Y, B, C, H, W]: G(z_j, c) for every class c
                labels = torch.arange(self.y_dim, device=self.device).repeat_interleave(
                    self.batch)
                table = self.G(z.repeat(self.y_dim, 1), self._onehot(labels)).view(
                    self.y_dim, self.batch, *self.shape)
        cols = torch.arange(self.batch, device=self.device)
        if table is None:
            uniq_fakes, which = self._fakes_by_label_sequence(z, b0)
        for sl in self.ens.slices():
            idx = self.parts[sl, b0: b0 + self.batch]
            x_real, y_real = self.x[idx], self.y[idx]
            if table is not None:
                fakes = table[y_real, cols[None, :]]
            else:
                fakes = uniq_fakes[which[sl]]
            for j in range(n_steps):
                loss = self.ens.train_step(sl, x_real, fakes, y_real, st.teacher_steps + j + 1)
            losses.append(loss)
        st.teacher_steps += n_steps
        return float(torch.cat(losses).mean())

    @torch.no_grad()
    def _fakes_by_label_sequence(self, z: torch.Tensor, b0: int) -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
        """The official per-teacher fakes G(z, y_teacher) (BatchNorm over the teacher's own
        batch), computed once per distinct label sequence: teachers whose batches carry the same
        labels in the same order get identical fakes, so this is exact. The class-balanced
        partition deals each teacher's records in class order, so at N = 4000 on MNIST the 4000
        teachers share about 10 sequences. Returns fakes [U, B, C, H, W] and, per teacher, the
        row to use [N]."""
        y_all = self.y[self.parts[:, b0: b0 + self.batch]]  # [N, B]
        uniq, which = torch.unique(y_all, dim=0, return_inverse=True)
        out = []
        for s in range(0, uniq.shape[0], self.cfg.chunk):
            rows = uniq[s: s + self.cfg.chunk]
            n = rows.shape[0]
            out.append(self.G(z.repeat(n, 1), self._onehot(rows.reshape(-1)), groups=n)
                       .view(n, self.batch, *self.shape))
        return torch.cat(out), which

    def _generator_step(self, z: torch.Tensor) -> dict[str, Any]:
        cfg = self.cfg
        y_q = torch.randint(0, self.y_dim, (self.batch,), generator=self.gen_cpu).to(self.device)
        x_q = self.G(z, self._onehot(y_q))
        ctx = self.agg.context(self.d, self.gen_dev, self.device)
        votes = None
        for sl in self.ens.slices():
            part = self.agg.partial(self.ens.query_gradients(sl, x_q, y_q), ctx, self.gen_dev)
            votes = part if votes is None else votes + part  # (never mutate a partial)
        out, noisy = self.agg.release(votes, ctx, cfg.teachers, self.gen_dev)
        # without thresholding the noisy sum is scaled to a mean vote (our choice; ablation only)
        g_bar = (out if cfg.threshold else noisy / cfg.teachers).to(x_q.dtype)
        loss = student_loss(x_q, g_bar.view_as(x_q), cfg.gamma)
        self.g_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.g_opt.step()
        log_q = None
        if self._tracks_data_dependent():
            log_q = self.acc.add_votes(votes.double().cpu().numpy(), cfg.beta, cfg.teachers)
        else:
            self.acc.add_queries(self.batch)
        return {"agreed_dims": float((out != 0).float().sum(1).mean()) if cfg.threshold
                else None, "min_log_q": None if log_q is None else float(np.min(log_q))}

    def step(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        z = (torch.rand(self.batch, self.cfg.z_dim, generator=self.gen_cpu) * 2 - 1).to(
            self.device)
        d_loss = self._train_teachers(z)
        info = self._generator_step(z)
        self.state.step += 1
        dt = time.perf_counter() - t0
        self.state.elapsed += dt
        rec = {"step": self.state.step, "queries": self.acc.queries,
               "epsilon": self.acc.epsilon(self.cfg.conversion), "d_loss": d_loss,
               "seconds": dt, **info}
        if self._tracks_data_dependent():
            rec["epsilon_data_dependent"] = self._data_dependent_epsilon()
        self.history.append(rec)
        return rec

    def _partition(self, y: np.ndarray) -> np.ndarray:
        """Disjoint teacher partitions of the kind ``cfg.partition`` (``data.partition``)."""
        return teacher_partition(self.cfg.partition, y, self.cfg.teachers, self.seed)

    def _make_accountant(self) -> TopAggAccountant | CompressorAccountant:
        """TopAgg's ledger (paper Theorem 3), or a compressor's two ledgers
        (``compressor_accountant``); G-PATE's harness method overrides this."""
        if self.cfg.aggregator == "topagg":
            return TopAggAccountant(self.cfg.k, self.cfg.sigma, self.cfg.delta)
        return compressor_accountant(self.cfg, self.d)

    def _tracks_data_dependent(self) -> bool:
        """The data-dependent bound (Thms. 4-5) is TopAgg's, with its threshold."""
        cfg = self.cfg
        return cfg.data_dependent and cfg.threshold and cfg.aggregator == "topagg"

    def _data_dependent_epsilon(self) -> float:
        return self.acc.data_dependent_epsilon()

    def can_step(self) -> bool:
        if self.cfg.max_steps is not None and self.state.step >= self.cfg.max_steps:
            return False
        return self.acc.epsilon_if(self.batch, self.cfg.conversion) <= self.cfg.epsilon

    # ------------------------------------------------------------------ harness contract

    exact_snapshots = True  # the settings do not depend on the budget

    @property
    def steps_done(self) -> int:
        return self.state.step

    def epsilon_after_next_step(self) -> float:
        return self.acc.epsilon_if(self.batch, self.cfg.conversion)

    def epsilon_spent(self) -> dict[str, float]:
        if isinstance(self.acc, CompressorAccountant):
            return self.acc.ledgers()
        return {c: self.acc.epsilon(c) for c in ("paper", "rdp", "pld")}

    def generator_state(self) -> dict[str, torch.Tensor]:
        return self.G.state_dict()

    def load_generator_state(self, state: dict[str, torch.Tensor]) -> None:
        self.G.load_state_dict(state)

    @property
    def train_seconds(self) -> float:
        return self.state.elapsed

    def total_steps(self) -> int:
        return expected_steps(self.cfg, self.batch, self.d)

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": self.cfg.to_dict(), "seed": self.seed, "state": vars(self.state),
            "G": self.G.state_dict(), "g_opt": self.g_opt.state_dict(),
            "ensemble": self.ens.state_dict(), "accountant": self.acc.state_dict(),
            "gen_cpu": self.gen_cpu.get_state(), "gen_dev": self.gen_dev.get_state(),
            "history": self.history,
        }

    def load_state_dict(self, st: dict[str, Any]) -> None:
        """Continue from ``st`` (a checkpoint, loaded on the CPU): tensors are copied into
        this run's own, on its device."""
        if type(self.cfg).from_dict(st["config"]) != self.cfg or st["seed"] != self.seed:
            raise ValueError("the checkpoint was written by a different config or seed; use "
                             "another output folder or delete it")
        self.state = _State(**st["state"])
        self.G.load_state_dict(st["G"])
        self.g_opt.load_state_dict(st["g_opt"])
        self.ens.load_state_dict(st["ensemble"])
        self.acc = type(self.acc).from_state_dict(st["accountant"])
        self.gen_cpu.set_state(st["gen_cpu"])
        self.gen_dev.set_state(st["gen_dev"])
        self.history = st["history"]

    def sample(self, n: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n synthetic images of the student generator (see ``sample_generator``)."""
        return sample_generator(self.G, n, self.batch, generator, self.device)

    def record(self) -> dict[str, Any]:
        """DataLens's part of ``run.json`` (the harness adds the shared fields)."""
        cfg = self.cfg
        eps = self.epsilon_spent()
        if self._tracks_data_dependent():
            eps[DATA_DEPENDENT] = self.acc.data_dependent_epsilon()
        rec: dict[str, Any] = {
            "conversion": cfg.conversion, "epsilon": eps, "queries": self.acc.queries,
            "batch": self.batch, "teachers": cfg.teachers, "per_teacher": self.per_teacher,
            "teacher_parameters": self.ens.num_parameters,
            "privacy": {"mechanism": "TopAgg (paper Alg. 3)",
                        "sensitivity": "L2 2*sqrt(k) per query (Lemma 1)",
                        "accountant": "Gaussian RDP 2*k*lambda/sigma^2 per query, composed "
                                      "over queries (Theorem 3)",
                        "neighbouring": NEIGHBOURING[cfg.partition],
                        "event": repr(self.acc.event()),
                        "dp_guarantee": "epsilon under paper, rdp and pld (data-independent "
                                        "conversions of the same ledger) for that "
                                        "neighbouring relation; data_dependent is not a DP "
                                        "release"},
        }
        if cfg.aggregator != "topagg":
            rec["privacy"] = {**self.agg.describe(
                self.d, cfg.teachers, tuple(data_independent_ledgers(eps))),
                              "neighbouring": rec["privacy"]["neighbouring"],
                              "z_charged": self.acc.z_charged, "z_sound": self.acc.z_sound,
                              "event": repr(self.acc.event())}  # the sound ledger's
        if cfg.adam_slots is not None:  # issue 12: the official code's shared Adam state
            coupled = cfg.teachers // cfg.adam_slots
            k_eff = cfg.k * coupled**2  # sensitivity 2 sqrt(k) * coupled = 2 sqrt(k_eff)
            eps["coupled_rdp"] = topagg_epsilon(self.acc.queries, k_eff, cfg.sigma, cfg.delta,
                                                "rdp")
            rec["privacy"]["event"] = repr(self.acc.event(k_eff))  # the coupled sensitivity
            rec["privacy"]["dp_guarantee"] = (
                f"NOT the ledgers above: adam_slots = {cfg.adam_slots} makes {coupled} teachers "
                "(trained on different partitions) share one Adam state, so one record can "
                f"change the votes of {coupled} teachers, not one; the vote sum's sensitivity "
                f"is then up to {coupled} x 2 sqrt(k), and epsilon['coupled_rdp'] is the "
                "ledger at that sensitivity (the only DP guarantee of this run)")
            rec["privacy"]["dp_ledgers"] = ["coupled_rdp"]  # the only DP guarantee
        elif cfg.aggregator == "topagg":
            # the keys of eps that are a DP guarantee (harness.check_dp_ledgers); the other
            # compressors' come from Aggregator.describe (less an official charge below the
            # sound sensitivity)
            rec["privacy"]["dp_ledgers"] = data_independent_ledgers(eps)
        if cfg.init_slots is not None:
            rec["note_init"] = (f"teachers initialised from {cfg.init_slots} distinct draws "
                                "(teacher t from teacher t mod init_slots; data-independent, "
                                "no privacy effect)")
        if cfg.compute_dtype == "bfloat16":
            rec["note_compute"] = ("teacher forward/backward passes in bfloat16 (opt-in; "
                                   "float32 master weights, Adam, BatchNorm statistics and "
                                   "losses); see datalens_lib.ensemble")
        if cfg.moment_dtype == "bfloat16":
            rec["note_moments"] = ("teacher Adam moments stored in bfloat16 (parameters "
                                   "float32) to fit 24 GiB; see datalens_lib.ensemble")
        return rec


class DataLensTrainer(DataLens):
    """DataLens with its output folder: ``run()`` trains through the shared harness
    (``methods.harness.Run``: checkpoints, resume, samples, ``run.json``)."""

    def __init__(self, cfg: TrainConfig, out_dir: str | Path, *, seed: int = 0,
                 device: str = "auto", data_dir: str | Path | None = None,
                 checkpoint_every: int = 10, progress: bool = True, profile: str = "custom"):
        super().__init__(cfg, seed=seed, device=device, data_dir=data_dir, profile=profile)
        self.harness = Run(self, out_dir, checkpoint_every=checkpoint_every, progress=progress)

    @property
    def out(self) -> Path:
        return self.harness.out

    @property
    def checkpoint_path(self) -> Path:
        return self.harness.checkpoint_path

    @property
    def checkpoint_every(self) -> int:
        return self.harness.checkpoint_every

    @checkpoint_every.setter
    def checkpoint_every(self, steps: int) -> None:
        self.harness.checkpoint_every = int(steps)

    def save_checkpoint(self) -> None:
        self.harness.save_checkpoint()

    def load_checkpoint(self) -> bool:
        return self.harness.load_checkpoint()

    def run(self, resume: bool = False, stop_after: int | None = None) -> dict[str, Any]:
        """Train until the privacy budget (or ``max_steps``) is reached, then write
        ``samples.npz`` and ``run.json`` (see ``methods.harness.Run.run``)."""
        return self.harness.run(resume=resume, stop_after=stop_after)

