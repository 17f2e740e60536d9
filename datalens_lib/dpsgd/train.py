"""DP-SGD runs of the paper's appendix: TopAgg (NormTopK), dimension-based top-k and GM-DP.

Setup (paper appendix "Experimental Setup"; ``../shared/notes/dpsgd.md``): MNIST 60k/10k, the
CNN of Opacus's MNIST example, inputs normalised with mean 0.1307 and std 0.3081, plain SGD
(no momentum, no schedule: the paper states neither), Poisson sampling with rate q = B / n
through Opacus's ``DPDataLoader``, per-example gradients from Opacus's ``GradSampleModule``,
the mechanism from :class:`~datalens_lib.dpsgd.optimizer.TopAggDPOptimizer`, and the number
of steps T set by the budget under the ``paper`` ledger
(:func:`~datalens_lib.privacy.subsampled.dpsgd_steps_for_budget`); the record holds ε under
every ledger of :mod:`datalens_lib.privacy.subsampled` and the ε that Opacus's own RDP
accountant, attached to the optimizer, reports at the end.

Methods: ``normtopk`` (TopAgg, k in (0, 1)), ``dimtopk`` (``tab:dpsgd-ablation``), ``gmdp``
(k = 1: Opacus DP-SGD exactly), ``sgd`` (k = 1, ε = ∞: clipped SGD). At ε = ∞ every method
keeps its clipping and compression and adds no noise (the paper's ε = ∞ column); the number
of steps is then fixed (10 epochs, our choice: the paper does not state it).

Hyper-parameters: ``tab:dpsgd-search`` gives C, σ, B and lr for MNIST at ε ∈ {0.05, 0.2, 1.0};
:func:`paper_hyperparameters` returns that row for those budgets and, for the others, the row
of the nearest searched budget (in log ε), written into the record. For those other budgets
:func:`run_search` is the clean protocol: a grid spanned by the paper's choices at the
neighbouring searched budgets (:func:`search_grid`), each point trained on the training set
minus a held-out validation split and chosen on it; the test-selected point (the paper's way)
is recorded beside it, and ``datalens dpsgd --search DIR`` trains the cell's seeds with the
clean choice. Budgets that share a grid (ε = 0.3, 0.5, 0.7) share their runs too: a run's
first T steps are the run with T steps (:func:`is_prefix`), so :func:`run_search_family`
trains each point and seed once, to the largest budget, and reads the others off it.

Accuracy: the test accuracy after the last step (``final``, the clean protocol) and the
maximum over evaluations every ``eval_every`` steps (``best``, which selects on test data as
the paper's protocol may have).
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from .._validate import choice, interval, positive_float, positive_int, probability_open
from ..config import PROFILES  # the same three as DataLens's configs
from ..data import load_dataset
from ..privacy.subsampled import (
    dpsgd_epsilon,
    dpsgd_event,
    dpsgd_ledgers,
    dpsgd_steps_for_budget,
    opacus_epsilon,
)
from ..results import PAPER_DIR
from .compress import SCOPES

METHODS = ("normtopk", "dimtopk", "gmdp", "sgd")
#: training-set sizes (the sample rate q = B / n must be known before loading the data)
TRAIN_SIZES = {"mnist": 60_000, "fashion-mnist": 60_000, "cifar10": 50_000}


def train_size(dataset: str, limit: int | None = None) -> int:
    if dataset not in TRAIN_SIZES:
        raise ValueError(f"DP-SGD runs know the training-set size of {sorted(TRAIN_SIZES)}, "
                         f"not {dataset!r}")
    return min(limit, TRAIN_SIZES[dataset]) if limit else TRAIN_SIZES[dataset]
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


class OpacusMNISTCNN(nn.Module):
    """The CNN of Opacus's ``examples/mnist.py`` (26,010 parameters): conv 8x8/2 (16) + ReLU +
    max-pool 2/1 -> conv 4x4/2 (32) + ReLU + max-pool 2/1 -> linear 512 -> 32 + ReLU -> 10."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 8, 2, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 4, 2)
        self.fc1 = nn.Linear(32 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 1)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 1)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


@dataclass(frozen=True)
class DPSGDConfig:
    """One DP-SGD run (module doc). ``steps``: fixed T (ε = ∞ needs it); otherwise T is the
    largest step count whose ε under the ``paper`` ledger stays within ``epsilon``."""

    dataset: str = "mnist"
    method: str = "normtopk"
    k: float = 0.7
    epsilon: float = 1.0
    delta: float = 1e-5
    sigma: float = 1.6
    max_grad_norm: float = 12.0
    batch_size: int = 512
    lr: float = 0.1
    steps: int | None = None
    scope: str = "flat"
    eval_every: int = 100
    train_limit: int | None = None
    test_limit: int | None = None
    # records of the training set held out as a validation split (0: none; the grid search
    # trains on the rest, see ``run_search``)
    validation: int = 0
    hyperparameter_source: str = "given"

    def __post_init__(self) -> None:
        choice("method", self.method, METHODS)
        choice("scope", self.scope, SCOPES)
        interval("k", self.k, 0, 1, low_closed=False, high_closed=True)
        if self.method in ("gmdp", "sgd") and self.k != 1:
            raise ValueError(f"{self.method} is k = 1; use method normtopk for k < 1")
        if self.method in ("normtopk", "dimtopk") and self.k >= 1:
            raise ValueError(f"{self.method} needs k < 1 (k = 1 is gmdp)")
        probability_open("delta", self.delta)
        interval("epsilon (inf for no privacy)", self.epsilon, 0, math.inf, low_closed=False,
                 high_closed=True)
        if self.method == "sgd" and math.isfinite(self.epsilon):
            raise ValueError("method sgd adds no noise: epsilon must be inf")
        if math.isinf(self.epsilon) and self.steps is None:
            raise ValueError("epsilon = inf needs a fixed number of steps")
        for name in ("batch_size", "eval_every"):
            positive_int(name, getattr(self, name))
        for name in ("max_grad_norm", "lr"):
            positive_float(name, getattr(self, name))
        if math.isfinite(self.epsilon):
            positive_float("sigma", self.sigma)
        for name in ("steps", "train_limit", "test_limit"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))
        positive_int("validation", self.validation, minimum=0)
        if self.validation and self.validation >= train_size(self.dataset, self.train_limit):
            raise ValueError(f"validation ({self.validation}) must leave training records: "
                             f"the training set has {train_size(self.dataset, self.train_limit)}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["epsilon"] = None if math.isinf(self.epsilon) else self.epsilon
        return d

    def matches(self, recorded: dict[str, Any]) -> bool:
        """Whether a record's ``config`` is this config (fields added after the record was
        written take their defaults)."""
        return {"validation": 0, **recorded} == self.to_dict()

    @property
    def train_examples(self) -> int:
        """n, the records DP-SGD trains on (the sample rate is B / n)."""
        return train_size(self.dataset, self.train_limit) - self.validation


def _search_rows(dataset: str) -> tuple[str, pd.DataFrame]:
    """``tab:dpsgd-search``'s rows for ``dataset`` and the dataset they were searched on
    (Fashion-MNIST is not in the appendix, our offline extra: MNIST's settings, said so)."""
    searched = {"fashion-mnist": "mnist"}.get(dataset, dataset)
    df = pd.read_csv(PAPER_DIR / "tab_dpsgd_search.csv", dtype={"parameter": str},
                     keep_default_na=False)
    df = df[df.dataset == searched]
    if df.empty:
        raise ValueError(f"tab:dpsgd-search has no {dataset} rows")
    return searched, df


def searched_budgets(dataset: str) -> list[float]:
    """The budgets ε whose C, σ, B, lr ``tab:dpsgd-search`` gives for ``dataset`` (MNIST's for
    Fashion-MNIST), ascending; every other budget takes the nearest row or a search."""
    return sorted({float(e) for e in _search_rows(dataset)[1].epsilon})


def paper_hyperparameters(dataset: str, epsilon: float, method: str, k: float
                          ) -> dict[str, Any]:
    """C, σ, B, lr of ``tab:dpsgd-search`` for this cell (nearest searched ε in log scale
    where the paper lists none, the smaller one on a tie; dimension-based top-k uses the
    NormTopK row of the same k, or of k = 0.6 for k outside {0.6, 0.7, 0.8}). The returned
    ``hyperparameter_source`` says which row was taken."""
    searched, df = _search_rows(dataset)
    eps_grid = searched_budgets(dataset)
    # ties (0.1 sits halfway between 0.05 and 0.2 in log scale) go to the smaller budget
    near = min(eps_grid, key=lambda e: (round(abs(math.log(e) - math.log(epsilon)), 9), e))
    if method == "gmdp":
        sel, what = df[df.method == "GM-DP"], "GM-DP"
    else:
        kk = k if f"k={k:g}" in set(df.parameter) else 0.6
        sel, what = df[df.parameter == f"k={kk:g}"], f"TopAgg k={kk:g}"
    sel = sel[sel.epsilon.astype(float) == near]
    v = {r.metric: float(r.value) for r in sel.itertuples()}
    return {"sigma": v["sigma"], "max_grad_norm": v["max_grad_norm"],
            "batch_size": int(v["batch_size"]), "lr": v["lr"],
            "hyperparameter_source": f"tab:dpsgd-search {searched} eps={near:g} {what}"
            + ("" if searched == dataset else f" (used for {dataset}: the paper has none)")
            + ("" if near == epsilon else f" (nearest searched budget to {epsilon:g})")}


def _data(cfg: DPSGDConfig, data_dir=None) -> tuple[dict[str, torch.Tensor], Any,
                                                     dict[str, Any]]:
    """Train/test tensors, a factory of the model to train and what the record says about
    them: MNIST and
    Fashion-MNIST images through the Opacus MNIST CNN, or CIFAR-10 through frozen ResNet-18
    features (:mod:`.features`; the user's weights) and a linear head."""
    if cfg.dataset == "cifar10":
        from .features import cached_features, load_resnet18

        net, sha = load_resnet18()  # loaded and hashed once
        f = cached_features("cifar10", data_dir=data_dir, loaded=(net, sha))
        x = {"train": f["x_train"], "test": f["x_test"]}
        y = {"train": f["y_train"], "test": f["y_test"]}
        dim = x["train"].shape[1]

        def model() -> nn.Module:
            return nn.Linear(dim, 10)
        info = {"model": "linear head on frozen ImageNet ResNet-18 features",
                "features": {"network": "resnet18", "weights_sha256": sha,
                             "dim": int(x["train"].shape[1])}}
    else:
        ds = load_dataset(cfg.dataset, data_dir)
        x = {"train": (np.asarray(ds.x_train, np.float32) - MNIST_MEAN) / MNIST_STD,
             "test": (np.asarray(ds.x_test, np.float32) - MNIST_MEAN) / MNIST_STD}
        y = {"train": ds.y_train, "test": ds.y_test}
        classes = ds.num_classes

        def model() -> nn.Module:
            return OpacusMNISTCNN(classes)
        info = {"model": "Opacus MNIST CNN (26,010 parameters)"}
    lim = {"train": cfg.train_limit, "test": cfg.test_limit}
    t = {f"{a}_{s}": torch.from_numpy(np.asarray(v[s][: lim[s]], np.float32 if a == "x"
                                                 else np.int64))
         for a, v in (("x", x), ("y", y)) for s in ("train", "test")}
    if cfg.validation:
        train, val = validation_split(len(t["y_train"]), cfg.validation)
        t["x_val"], t["y_val"] = t["x_train"][val], t["y_train"][val]
        t["x_train"], t["y_train"] = t["x_train"][train], t["y_train"][train]
        info["validation"] = {"examples": cfg.validation, "seed": VALIDATION_SEED,
                              "selection": "a seeded permutation of the training indices; "
                                           "the first `examples` are held out"}
    return t, model, info


#: the validation split's permutation seed: fixed, so every grid point and seed of a search
#: holds out the same records
VALIDATION_SEED = 20211115


def validation_split(n: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices of ``n`` training records, ``size`` of them held out by a
    permutation with :data:`VALIDATION_SEED` (independent of the data)."""
    positive_int("size", size)
    if size >= n:
        raise ValueError(f"size ({size}) must be below the {n} training records")
    perm = torch.from_numpy(np.random.default_rng(VALIDATION_SEED).permutation(n))
    return perm[size:].sort().values, perm[:size].sort().values


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 2000) -> float:
    model.eval()
    hits = sum(int((model(x[s: s + batch]).argmax(1) == y[s: s + batch]).sum())
               for s in range(0, len(x), batch))
    model.train()
    return hits / len(x)


def train_dpsgd(cfg: DPSGDConfig, *, seed: int = 0, data_dir=None,
                progress: bool = True, device: str = "cpu") -> dict[str, Any]:
    """Train one DP-SGD run (module doc); returns its record (no file is written).

    ``device``: ``cpu``, ``cuda`` or ``auto`` (:func:`datalens_lib.datalens.resolve_device`).
    The model is initialised on the CPU from ``seed`` and then moved, Poisson sampling stays
    on the CPU (the same batches on every device), and the noise comes from a generator on
    the device seeded with ``seed + 2``: a CUDA run draws other noise than a CPU run with the
    same seed (and CUDA kernels are not bit-reproducible), so seeds compare across devices
    only in distribution."""
    return train_dpsgd_with_prefixes(cfg, (), seed=seed, data_dir=data_dir,
                                     progress=progress, device=device)[0]


def prefix_steps(cfg: DPSGDConfig) -> int:
    """T of ``cfg``: its fixed ``steps``, else the most steps its budget allows under the
    ``paper`` ledger (as :func:`train_dpsgd` sets it; 0 when not one step fits)."""
    if cfg.steps is not None:
        return cfg.steps
    return dpsgd_steps_for_budget(cfg.epsilon, cfg.batch_size / cfg.train_examples, cfg.sigma,
                                  cfg.delta, "paper")


def is_prefix(short: DPSGDConfig, long: DPSGDConfig) -> bool:
    """Whether a run of ``short`` is the first steps of a run of ``long`` with the same seed:
    every setting equal except the budget and T (``epsilon``, ``steps``), both private, and
    ``short``'s T (at least one step) at most ``long``'s. SGD here has no schedule, Poisson
    sampling and noise come from generators seeded once, and an evaluation draws no random
    number, so nothing of a run before step T depends on how many steps follow: its first T
    steps *are* the run with T steps (a test checks the records bit for bit on the CPU).
    This is the argument DataLens's T2 snapshots rest on (issue 10), here for DP-SGD's
    searched budgets: one run to ε = 0.7 also yields the ε = 0.3 and 0.5 runs of the same
    setting (:func:`run_search`, :func:`run_cell`'s ``prefixes``)."""
    if not (math.isfinite(short.epsilon) and math.isfinite(long.epsilon)):
        return False
    a, b = short.to_dict(), long.to_dict()
    for d in (a, b):
        d.pop("epsilon"), d.pop("steps")
    if a != b:
        return False
    t = prefix_steps(short)
    return 0 < t <= prefix_steps(long)


class _Evaluation(NamedTuple):
    """One evaluation during :func:`train_dpsgd_with_prefixes`."""
    step: int
    test: float  # test accuracy
    validation: float | None  # validation accuracy (None without a validation split)
    seconds: float  # training seconds so far, evaluations included
    opacus_epsilon: float | None  # Opacus's hook RDP ε so far (at a record's last step only)
    scheduled: bool  # on cfg's own evaluation schedule (not only a prefix's end)
    eval_seconds: float  # seconds the evaluation took


def train_dpsgd_with_prefixes(cfg: DPSGDConfig, prefixes: Any = (), *, seed: int = 0,
                              data_dir=None, progress: bool = True, device: str = "cpu"
                              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`train_dpsgd`, and the records of the ``prefixes`` (configs that are
    :func:`is_prefix` of ``cfg``; any other is refused) read off the same run: each is what
    :func:`train_dpsgd` returns for that config and seed, plus ``derived_from`` (the budget
    and T of the run it was read from) and the time spent up to its T. ``cfg``'s own record
    is the one :func:`train_dpsgd` returns: the extra evaluations at the prefixes' T do not
    enter its ``evaluations`` nor its ``best``."""
    from opacus import GradSampleModule
    from opacus.accountants import RDPAccountant
    from opacus.data_loader import DPDataLoader
    from torch.utils.data import TensorDataset

    from ..datalens import resolve_device
    from .optimizer import TopAggDPOptimizer

    prefixes = list(prefixes)
    for pc in prefixes:
        if not is_prefix(pc, cfg):
            raise ValueError(f"{pc} is not a prefix of {cfg}: only the budget and T may "
                             "differ, and its T must be at most the run's")
    dev = resolve_device(device)  # a bad or absent device fails before the data are loaded
    t, make_model, info = _data(cfg, data_dir)
    xtr, ytr, xte, yte = t["x_train"], t["y_train"], t["x_test"], t["y_test"]
    n = len(xtr)
    q = cfg.batch_size / n
    if q > 1:
        raise ValueError(f"batch_size {cfg.batch_size} exceeds the {n} training examples")
    private = math.isfinite(cfg.epsilon)  # ε = ∞: clipping and compression, no noise
    if private and cfg.delta >= 1 / n:
        raise ValueError(f"delta = {cfg.delta} is not below 1/n = {1 / n:.3g}: no meaningful "
                         "guarantee")
    steps = cfg.steps if cfg.steps is not None else dpsgd_steps_for_budget(
        cfg.epsilon, q, cfg.sigma, cfg.delta, "paper")
    if steps == 0:
        raise ValueError(f"not one step fits epsilon = {cfg.epsilon} with sigma = {cfg.sigma}")
    if private and cfg.steps is not None:  # a fixed T must still fit the stated budget
        spent = dpsgd_epsilon(steps, q, cfg.sigma, cfg.delta, "paper")
        if spent > cfg.epsilon * (1 + 1e-9):
            raise ValueError(f"{steps} steps spend epsilon = {spent:.4g} > {cfg.epsilon} "
                             "(paper ledger); lower steps or raise sigma")
    ends = []  # each prefix's T, set as its own run sets it (the q of the data loaded here)
    for pc in prefixes:
        end = pc.steps if pc.steps is not None else dpsgd_steps_for_budget(
            pc.epsilon, q, pc.sigma, pc.delta, "paper")
        if not 0 < end <= steps:
            raise ValueError(f"the prefix at epsilon = {pc.epsilon} takes {end} steps, not "
                             f"1 to the run's {steps}")
        if dpsgd_epsilon(end, q, pc.sigma, pc.delta, "paper") > pc.epsilon * (1 + 1e-9):
            raise ValueError(f"{end} steps overspend the prefix budget {pc.epsilon}")
        ends.append(end)
    at = set(ends)  # the steps where a prefix ends
    torch.manual_seed(seed)
    model = GradSampleModule(make_model().to(dev))
    sample_gen = torch.Generator().manual_seed(seed + 1)
    noise_gen = torch.Generator(device=dev).manual_seed(seed + 2)
    xte, yte = xte.to(dev), yte.to(dev)
    xval, yval = (t["x_val"].to(dev), t["y_val"].to(dev)) if cfg.validation else (None, None)
    # Poisson sampling at the accounted rate q = B / n (``from_data_loader`` would use
    # 1 / ceil(n / B), a slightly smaller rate); Opacus compares float32 uniforms with q, so
    # the realised rate is ceil(q 2^24) / 2^24, at most 2^-24 above q (book/privacy.md)
    loader = DPDataLoader(TensorDataset(xtr, ytr), sample_rate=q, generator=sample_gen)
    if loader.sample_rate != q:
        raise RuntimeError(f"the loader samples at {loader.sample_rate}, not q = {q}")
    opt = TopAggDPOptimizer(torch.optim.SGD(model.parameters(), lr=cfg.lr),
                            noise_multiplier=cfg.sigma if private else 0.0,
                            max_grad_norm=cfg.max_grad_norm,
                            expected_batch_size=cfg.batch_size, k=cfg.k,
                            selection="dim" if cfg.method == "dimtopk" else "norm",
                            scope=cfg.scope, generator=noise_gen)
    accountant = RDPAccountant()
    if private:
        opt.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=q))
    evals: list[_Evaluation] = []
    warnings.filterwarnings("ignore", message="Full backward hook is firing")  # Opacus, benign
    t0 = time.perf_counter()
    done = 0
    bar = tqdm(total=steps, disable=not progress, unit="step",
               desc=f"dpsgd {cfg.method} k={cfg.k:g} eps={cfg.epsilon:g} seed={seed}")
    while done < steps:
        for xb, yb in loader:
            xb, yb = xb.to(dev), yb.to(dev)
            loss = F.cross_entropy(model(xb), yb) if len(xb) else None
            opt.zero_grad(set_to_none=True)
            if loss is not None:
                loss.backward()
            else:  # an empty Poisson batch still is a step (noise only); Opacus's convention
                for p in model.parameters():
                    p.grad_sample = torch.zeros(0, *p.shape, device=dev)
            opt.step()
            done += 1
            bar.update(1)
            own = done % cfg.eval_every == 0 or done == steps
            if own or done in at:
                te = time.perf_counter()
                evals.append(_Evaluation(
                    done, accuracy(model, xte, yte),
                    accuracy(model, xval, yval) if cfg.validation else None,
                    time.perf_counter() - t0,
                    opacus_epsilon(accountant, cfg.delta)
                    if private and (done in at or done == steps) else None, own,
                    time.perf_counter() - te))
            if done == steps:
                break
    bar.close()

    def record(c: DPSGDConfig, end: int) -> dict[str, Any]:
        mine = [e for e in evals if e.step <= end and (e.scheduled or e.step == end)]
        last = mine[-1]
        # the time up to its T, less the evaluations only the other records asked for
        seconds = last.seconds - sum(e.eval_seconds for e in evals
                                     if e.step < end and not e.scheduled)
        test = [[e.step, e.test] for e in mine]
        accs = [a for _, a in test]
        rec = {"config": c.to_dict(), "seed": seed, "steps": end, "sample_rate": q, **info,
               "train_examples": n, "test_examples": len(xte),
               "final": accs[-1], "best": max(accs), "evaluations": test,
               "train_seconds": seconds, "seconds_per_step": seconds / end,
               "device": str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
               "privacy": {"neighbouring": "add/remove one example",
                           "mechanism": "Poisson-subsampled Gaussian, noise multiplier sigma "
                           "relative to the sensitivity",
                           "sensitivity": opt.sensitivity,
                           "noise_std": (c.sigma if private else 0.0) * opt.sensitivity,
                           "steps_set_by": None if c.steps is not None else "paper ledger"}}
        if c.validation:
            val = [[e.step, e.validation] for e in mine]
            rec.update({"validation_examples": c.validation, "final_validation": val[-1][1],
                        "best_validation": max(v for _, v in val),
                        "validation_evaluations": val})
        rec["privacy"]["event"] = (repr(dpsgd_event(q, c.sigma, end)) if private
                                   else "NonPrivateDpEvent()")
        if private:
            rec["epsilon"] = dpsgd_ledgers(end, q, c.sigma, c.delta)
            rec["epsilon"]["opacus_hook_rdp"] = last.opacus_epsilon
            rec["privacy"]["dp_ledgers"] = list(rec["epsilon"])
            rec["privacy"]["dp_guarantee"] = (
                "every ledger is a data-independent DP guarantee (prv and pld are the "
                "tightest), up to floating-point and PRNG attacks (secure_mode off, as "
                "Opacus's default); the hyper-parameters come from the paper's search on the "
                "private data, whose privacy cost no ledger includes")
        else:
            rec["epsilon"] = None
            rec["privacy"]["dp_guarantee"] = "none (no noise)"
            rec["privacy"]["dp_ledgers"] = []
        return rec

    derived = []
    for pc, end in zip(prefixes, ends, strict=True):
        rec = record(pc, end)
        rec["derived_from"] = {
            "epsilon": cfg.epsilon, "steps": steps,
            "note": "the first steps of a run with the same settings and seed and a larger "
                    "budget (train.is_prefix): the same run as one trained with this budget "
                    "alone; train_seconds is the time up to its last step, less the "
                    "evaluations only the other budgets asked for"}
        derived.append(rec)
    return record(cfg, steps), derived


#: the ``cpu`` profile's step cap: the paper setting's first steps (a pipeline check at the
#: real data, model and batch size; a few minutes per cell on a 2-core CPU)
CPU_STEPS = 100


def make_config(dataset: str, epsilon: float, method: str, k: float, profile: str,
                **overrides: Any) -> DPSGDConfig:
    """The config of one cell: ``paper`` takes C, σ, B, lr from ``tab:dpsgd-search``
    (:func:`paper_hyperparameters`); ``cpu`` is that setting cut to its first
    :data:`CPU_STEPS` steps (fewer when the budget allows fewer; ε then stays under the
    budget), as DataLens's ``cpu`` profile runs the paper setting's first steps; ``smoke``
    shrinks the data, runs 3 steps and raises σ until they fit the budget. ``cpu`` and
    ``smoke`` are pipeline checks, never compared with the paper. ``overrides`` win over every
    profile (their names are checked by the dataclass)."""
    choice("profile", profile, PROFILES)
    choice("method", method, METHODS)
    k = 1.0 if method == "gmdp" else k
    eps_for_search = 1.0 if math.isinf(epsilon) else epsilon
    if method == "sgd":
        k = 1.0
    hp = paper_hyperparameters(dataset, eps_for_search, "gmdp" if k == 1 else method, k)
    base: dict[str, Any] = {"dataset": dataset, "method": method, "k": k, "epsilon": epsilon,
                            **hp}
    if math.isinf(epsilon):
        base["steps"] = 10 * train_size(dataset) // hp["batch_size"]  # 10 epochs: our choice
    if profile == "smoke":
        base.update({"train_limit": 2048, "test_limit": 500, "steps": 3, "eval_every": 1,
                     "batch_size": 64})
    base.update(overrides)
    fields = set(DPSGDConfig.__dataclass_fields__)
    unknown = set(base) - fields
    if unknown:
        raise ValueError(f"unknown DP-SGD setting(s) {sorted(unknown)}; known: {sorted(fields)}")
    if profile == "cpu" and "steps" not in overrides:
        cap = base.get("steps")  # ε = ∞: the fixed 10 epochs
        if cap is None:  # the steps the budget allows under the ledger that sets T
            q = base["batch_size"] / (train_size(dataset, base.get("train_limit"))
                                      - base.get("validation", 0))
            cap = dpsgd_steps_for_budget(epsilon, q, base["sigma"], base.get("delta", 1e-5))
        base["steps"] = min(CPU_STEPS, cap) or None  # 0: train_dpsgd says no step fits
    if profile == "smoke" and math.isfinite(epsilon) and "sigma" not in overrides:
        # the smoke data is small (q = B / 2048): raise σ until its 3 steps fit the budget
        q = base["batch_size"] / (train_size(dataset, base["train_limit"])
                                  - base.get("validation", 0))
        while dpsgd_epsilon(base["steps"], q, base["sigma"], base.get("delta", 1e-5)) > epsilon:
            base["sigma"] *= 1.25
    return DPSGDConfig(**base)


#: the hyper-parameters ``tab:dpsgd-search`` lists, which the grid search varies
SEARCH_PARAMETERS = ("sigma", "max_grad_norm", "batch_size", "lr")


def search_brackets(dataset: str, epsilon: float) -> list[float]:
    """The searched budgets of ``tab:dpsgd-search`` next to ``epsilon`` on either side
    (ascending; one budget at a searched one, the nearest outside the searched range): the
    rows :func:`search_grid` takes its values from."""
    grid_eps = searched_budgets(dataset)
    below = [e for e in grid_eps if e <= epsilon]
    above = [e for e in grid_eps if e >= epsilon]
    return sorted({below[-1] if below else above[0], above[0] if above else below[-1]})


def search_grid(dataset: str, epsilon: float, method: str, k: float) -> list[dict[str, Any]]:
    """The grid of one cell's search: for each of :data:`SEARCH_PARAMETERS`, the values the
    paper chose at the searched budgets that bracket ``epsilon`` (in log ε; the nearest one
    outside the searched range) for this method and k (:func:`paper_hyperparameters`), and
    the product of those value sets. At a searched budget it is the paper's row alone.

    Our choice: the paper does not publish its grid, only the winners at three budgets, and a
    grid spanned by the winners on either side is the smallest one that contains what the
    paper would plausibly have picked (ε = 0.5: σ in {3.6, 1.6}, C in {10, 12} for k = 0.7)."""
    if not math.isfinite(epsilon):
        raise ValueError("epsilon = inf trains without noise for a fixed number of steps: "
                         "there is nothing to search")
    rows = [paper_hyperparameters(dataset, e, method, k)
            for e in search_brackets(dataset, epsilon)]
    values = {p: sorted({r[p] for r in rows}) for p in SEARCH_PARAMETERS}
    points: list[dict[str, Any]] = [{}]
    for p in SEARCH_PARAMETERS:
        points = [{**pt, p: v} for pt in points for v in values[p]]
    return points


def _train_and_write(cfg: DPSGDConfig, path: Path, todo: list[tuple[DPSGDConfig, Path]], *,
                     seed: int, profile: str, progress: bool, device: str) -> dict[str, Any]:
    """Train ``cfg`` (seed ``seed``) and write its record to ``path`` and the record of each
    prefix config in ``todo`` to its path (:func:`train_dpsgd_with_prefixes`), each
    atomically, the prefixes first (a kill in between leaves ``path`` missing, so the run is
    trained again, never a main record without its prefixes' records)."""
    from ..provenance import atomic_write_json, provenance

    if todo:
        rec, derived = train_dpsgd_with_prefixes(cfg, [pc for pc, _ in todo], seed=seed,
                                                 progress=progress, device=device)
    else:  # (the tests' fakes replace train_dpsgd)
        rec, derived = train_dpsgd(cfg, seed=seed, progress=progress, device=device), []
    prov = provenance()
    for d, (_, dpath) in zip(derived, todo, strict=True):
        dpath.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(dpath, {**d, "profile": profile, **prov})
    rec.update({"profile": profile, **prov})
    atomic_write_json(path, rec)
    return rec


def _search_base(dataset: str, epsilon: float, method: str, k: float, profile: str,
                 validation: int, overrides: dict[str, Any]) -> DPSGDConfig:
    """The config every point of a search starts from (:func:`run_search`)."""
    clash = set(overrides) & {*SEARCH_PARAMETERS, "validation"}
    if clash:
        raise ValueError(f"the search sets {sorted(clash)} itself; do not override them")
    base = make_config(dataset, epsilon, method, k, profile, **overrides)
    held = min(validation, base.train_examples // 4) if profile == "smoke" else validation
    return make_config(dataset, epsilon, method, k, profile, validation=held,
                       **overrides)  # (the smoke profile raises σ for the smaller n)


def _search_point(base: DPSGDConfig, hp: dict[str, Any], profile: str,
                  overrides: dict[str, Any]) -> tuple[DPSGDConfig, int]:
    """One grid point's config and the steps its σ and B fit in the budget (0: none)."""
    # smoke keeps its small batch, 3 steps and raised sigma (a pipeline check): only the
    # learning rate and the clipping norm vary there
    varied = {p: v for p, v in hp.items() if profile != "smoke" or p in ("lr", "max_grad_norm")}
    cfg = replace(base, **varied, hyperparameter_source="grid search")
    fits = dpsgd_steps_for_budget(base.epsilon, cfg.batch_size / cfg.train_examples,
                                  cfg.sigma, cfg.delta, "paper")
    if profile == "cpu" and "steps" not in overrides:  # the cap of this point's σ and B
        cfg = replace(cfg, steps=min(CPU_STEPS, fits) or None)
    return cfg, fits


def _reusable(path: Path, cfg: DPSGDConfig, seed: int) -> dict[str, Any] | None:
    """The record at ``path`` if it is ``cfg``'s run with ``seed``."""
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return old if cfg.matches(old["config"]) and old.get("seed") == seed else None


def run_search(dataset: str, epsilon: float, method: str, k: float, profile: str, *,
               out: Path, validation: int = 10_000, seed: int = 0,
               progress: bool = False, device: str = "cpu",
               prefixes: dict[float, Path] | None = None,
               **overrides: Any) -> dict[str, Any]:
    """The clean-protocol hyper-parameter search of one cell (issue 13): every point of
    :func:`search_grid` trained once (``seed``) on the training set minus a held-out
    validation split of ``validation`` records (:func:`validation_split`; the smoke profile
    holds out a quarter of its data and varies only lr and C), one ``point<i>.json`` each in
    ``out`` (resumable), then ``search.json``:

    - ``selected_validation``: the point with the best validation accuracy after the last
      step: the clean choice, which never looks at the test set;
    - ``selected_test``: the point with the best test accuracy at any evaluation: selection on
      test data, as the paper's protocol may have done; reported beside the clean one only.

    A point whose σ and B do not fit a single step in the budget (the neighbouring budgets'
    choices need not fit this one) is recorded as infeasible and selected by neither rule.
    ``overrides``: other settings for every point (as ``make_config``'s; not the searched
    ones).

    ``prefixes``: lower budgets (and their search folders) whose grid is this one's; each
    point trained here also writes the record of the same point at every lower budget whose
    run is its prefix (:func:`is_prefix`), which that budget's own search then reuses. The
    caller runs those searches (:func:`run_search_family`).

    Privacy: the search reads private training data (its validation split), and no ledger
    here includes its cost (nor did the paper's); the record says so."""
    from ..provenance import atomic_write_json, provenance

    grid = search_grid(dataset, epsilon, method, k)
    base = _search_base(dataset, epsilon, method, k, profile, validation, overrides)
    lower: dict[float, tuple[DPSGDConfig, Path]] = {}
    for b, folder in (prefixes or {}).items():
        if not b < epsilon:
            raise ValueError(f"prefix budget {b} is not below epsilon = {epsilon}")
        if search_grid(dataset, b, method, k) != grid:
            raise ValueError(f"the grid at epsilon = {b} is not the grid at {epsilon}: its "
                             "points cannot be read off these runs")
        lower[b] = (_search_base(dataset, b, method, k, profile, validation, overrides),
                    Path(folder))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    done: dict[str, dict[str, Any]] = {}  # config -> record (smoke repeats configs)
    for i, hp in enumerate(grid):
        cfg, fits = _search_point(base, hp, profile, overrides)
        used = {p: getattr(cfg, p) for p in SEARCH_PARAMETERS}
        if cfg.steps is None and fits == 0:
            rows.append({"point": i, **used, "steps": 0, "final_validation": None,
                         "final": None, "best": None,
                         "status": "infeasible: not one step fits the budget"})
            continue
        path, key = out / f"point{i}.json", json.dumps(cfg.to_dict(), sort_keys=True)
        rec = _reusable(path, cfg, seed) or done.get(key)
        if rec is None:
            todo = []  # the lower budgets' same point, where it is a prefix and still missing
            for lb, folder in lower.values():
                pc, _ = _search_point(lb, hp, profile, overrides)
                if is_prefix(pc, cfg) and _reusable(folder / f"point{i}.json", pc,
                                                    seed) is None:
                    todo.append((pc, folder / f"point{i}.json"))
            rec = _train_and_write(cfg, path, todo, seed=seed, profile=profile,
                                   progress=progress, device=device)
        done[key] = rec
        rows.append({"point": i, **used, "steps": rec["steps"],
                     "final_validation": rec["final_validation"], "final": rec["final"],
                     "best": rec["best"], "status": "trained"})
    ran = [r for r in rows if r["status"] == "trained"]
    if not ran:
        raise ValueError(f"no point of the {len(grid)}-point grid fits one step in "
                         f"epsilon = {epsilon}")
    by_val = max(ran, key=lambda r: (r["final_validation"], -r["point"]))
    by_test = max(ran, key=lambda r: (r["best"], -r["point"]))
    summ = {"cell": cell_name(method, base.k, epsilon, base.scope), "dataset": dataset,
            "method": method, "k": base.k, "epsilon": epsilon, "profile": profile, "seed": seed,
            "validation": base.validation, "parameters": list(SEARCH_PARAMETERS),
            "grid": rows, "overrides": overrides,
            "selected_validation": {p: by_val[p] for p in ("point", *SEARCH_PARAMETERS)},
            "selected_test": {p: by_test[p] for p in ("point", *SEARCH_PARAMETERS)},
            "privacy": "the search reads the private training set (its validation split); "
                       "its privacy cost is in no ledger of the cell (nor was the paper's)",
            **provenance()}
    atomic_write_json(out / "search.json", summ)
    return summ


def searched_hyperparameters(search: dict[str, Any]) -> dict[str, Any]:
    """The overrides that train a cell with a search's clean (validation) choice."""
    sel = search["selected_validation"]
    return {**{p: sel[p] for p in SEARCH_PARAMETERS},
            "hyperparameter_source": f"validation grid search: point {sel['point']} of "
                                     f"{len(search['grid'])} ({search['validation']} records "
                                     f"held out, seed {search['seed']})"}


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, standard deviation (ddof 1, as over the paper's 10 seeds) and range of the final
    and best accuracies over seeds."""
    out: dict[str, Any] = {"seeds": [r["seed"] for r in records]}
    for key in ("final", "best"):
        v = np.array([r[key] for r in records], dtype=np.float64)
        out[key] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1
                    else None, "min": float(v.min()), "max": float(v.max())}
    return {**out, **privacy_summary(records)}


def privacy_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the seeds of a cell share: the number of steps T, the ledger that set it (None:
    T was fixed, as at ε = ∞, in ``tab:control`` and the ``cpu`` profile) and ε under every
    ledger (``epsilon_spent``; None without noise). The seeds of a cell share one config, so
    T and ε do not depend on the seed; a cell whose seeds disagree on T, on the ledger that set
    it or on ε (beyond float noise: seeds run on different machines) is refused."""
    shared = {(r.get("steps"), r.get("privacy", {}).get("steps_set_by")) for r in records}
    eps = [r.get("epsilon") or {} for r in records]
    same_eps = all(e.keys() == eps[0].keys() and all(
        math.isclose(e[k], eps[0][k], rel_tol=1e-6, abs_tol=1e-12) for k in e) for e in eps)
    if len(shared) != 1 or not same_eps:
        raise ValueError(f"the seeds of one cell disagree on T or ε: {sorted(shared)}, {eps}")
    r = records[0]
    return {"steps": r.get("steps"), "steps_set_by": r.get("privacy", {}).get("steps_set_by"),
            "epsilon_spent": r.get("epsilon")}


def cell_name(method: str, k: float, epsilon: float, scope: str = "flat") -> str:
    """``normtopk-k0.7-eps0.5``, ``gmdp-eps0.5``, ``sgd-epsinf``: a cell's folder name; a
    compressing cell with ``scope="layer"`` (top-k within each parameter tensor, ours: the
    paper's vector notation is the flat one) is ``normtopk-layer-k0.7-eps0.5``."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    kk = "" if method in ("gmdp", "sgd") else f"-k{k:g}"
    if kk and scope == "layer":
        kk = "-layer" + kk
    return f"{method}{kk}-eps{'inf' if math.isinf(epsilon) else f'{epsilon:g}'}"


def run_cell(dataset: str, epsilon: float, method: str, k: float, profile: str, *,
             seeds: list[int], out: Path | None = None, progress: bool = False,
             cfg: DPSGDConfig | None = None, cell: str | None = None,
             device: str = "cpu", prefixes: Any = (), **overrides: Any) -> dict[str, Any]:
    """Train the missing seeds of one cell into ``out`` (default ``<runs>/dpsgd/<dataset>/
    <cell>/<profile>``; one ``seed<S>.json`` each, written atomically, finished seeds
    skipped) and write and return their ``summary.json``. ``cfg``/``cell``: a ready config
    and its folder name (the control scenarios). ``prefixes``: (config, folder) pairs of
    cells whose runs are prefixes of this cell's (:func:`is_prefix`): every seed trained
    here also writes that seed's record into each such folder where it is missing, which
    :func:`run_cell` of that cell then reuses (:func:`run_search_family`)."""
    from ..provenance import atomic_write_json, provenance, runs_root
    from ..store import params_hash

    cfg = cfg or make_config(dataset, epsilon, method, k, profile, **overrides)
    cell = cell or cell_name(method, cfg.k, epsilon, cfg.scope)
    # default folder named by the config's hash: a changed setting never meets old records
    out = Path(out) if out else (runs_root() / "dpsgd" / dataset / cell
                                 / f"{profile}-{params_hash(cfg.to_dict())}")
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for seed in seeds:
        path = out / f"seed{seed}.json"
        if path.exists():
            rec = json.loads(path.read_text())
            if not cfg.matches(rec["config"]):
                raise ValueError(f"{path} was written by another config; use another folder")
        else:
            todo = []  # the prefix cells' same seed, where still missing
            for pc, f in prefixes:
                ppath = Path(f) / f"seed{seed}.json"
                if not is_prefix(pc, cfg) or _reusable(ppath, pc, seed) is not None:
                    continue
                if ppath.exists():  # as run_cell of that cell would say
                    raise ValueError(f"{ppath} was written by another config; use another "
                                     "folder")
                todo.append((pc, ppath))
            rec = _train_and_write(cfg, path, todo, seed=seed, profile=profile,
                                   progress=progress, device=device)
        records.append(rec)
    summ = {"cell": cell, "dataset": dataset, "method": method, "k": cfg.k,
            "epsilon": None if math.isinf(epsilon) else epsilon, "profile": profile,
            "config": cfg.to_dict(), "folder": str(out), **summarise(records), **provenance()}
    atomic_write_json(out / "summary.json", summ)
    return summ


def run_search_family(dataset: str, epsilons: Any, method: str, k: float, profile: str, *,
                      seeds: list[int], search_dir: Any, out_dir: Any,
                      validation: int = 10_000, progress: bool = False, device: str = "cpu",
                      **overrides: Any) -> dict[float, dict[str, Any]]:
    """Several budgets of one method and k, each as ``datalens dpsgd --search`` runs it
    (:func:`run_search` on a held-out split, then :func:`run_cell` with the clean choice;
    a budget ``tab:dpsgd-search`` gives takes its row), with the runs shared where one is a
    prefix of another (:func:`is_prefix`): the budgets between two searched ones share one
    grid, so every point is trained once, to the largest budget, and the lower budgets'
    records are read off on the way; a seed is trained once for all budgets whose clean
    choices are the same point. Every budget's records are those its own search and cell
    would have written (a test checks this bit for bit), each derived one saying so.

    ``search_dir(eps)`` and ``out_dir(eps)``: the folders of a budget's search and seeds.
    Returns each budget's cell summary. Cost on MNIST at ε 0.3/0.5/0.7 (paper scale): about
    0.6 of the three budgets run apart (steps grow about as ε², so the run to 0.7 is most of
    the work)."""
    budgets = sorted({float(e) for e in epsilons}, reverse=True)
    if not budgets or not all(math.isfinite(e) and e > 0 for e in budgets):
        raise ValueError(f"epsilons must be finite budgets > 0, got {epsilons!r}")
    searched = set(searched_budgets(dataset))
    over: dict[float, dict[str, Any]] = {e: {} for e in budgets}
    todo = [e for e in budgets if e not in searched]
    while todo:  # one search per grid, at its largest budget; the others read off it
        top = todo[0]
        grid = search_grid(dataset, top, method, k)
        same = [e for e in todo[1:] if search_grid(dataset, e, method, k) == grid]
        found = {top: run_search(dataset, top, method, k, profile, out=Path(search_dir(top)),
                                 validation=validation, progress=progress, device=device,
                                 prefixes={e: Path(search_dir(e)) for e in same}, **overrides)}
        for e in same:  # their points are on disk now (where prefixes): nothing retrains
            found[e] = run_search(dataset, e, method, k, profile, out=Path(search_dir(e)),
                                  validation=validation, progress=progress, device=device,
                                  **overrides)
        for e, f in found.items():
            over[e] = searched_hyperparameters(f)
        todo = [e for e in todo if e not in found]
    cfgs = {e: make_config(dataset, e, method, k, profile, **{**over[e], **overrides})
            for e in budgets}
    out: dict[float, dict[str, Any]] = {}
    for e in budgets:  # largest first: its seeds write the records of the budgets below
        if e in out:
            continue
        lower = [b for b in budgets if b < e and b not in out and is_prefix(cfgs[b], cfgs[e])]
        out[e] = run_cell(dataset, e, method, k, profile, seeds=seeds, out=Path(out_dir(e)),
                          progress=progress, cfg=cfgs[e], device=device,
                          prefixes=[(cfgs[b], Path(out_dir(b))) for b in lower])
        for b in lower:
            out[b] = run_cell(dataset, b, method, k, profile, seeds=seeds,
                              out=Path(out_dir(b)), progress=progress, cfg=cfgs[b],
                              device=device)
    return out


def committed_summaries(dataset: str, profile: str = "paper",
                        root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Committed cells: ``data/results/dpsgd/<dataset>/<cell>/<profile>/summary.json`` by
    cell name."""
    out = _committed(dataset, f"*/{profile}/summary.json", root)
    for cell, summ in out.items():  # summaries written before they held T and ε: their seeds
        if "steps" not in summ:
            folder = _results_base(dataset, root) / cell / profile
            files = [folder / f"seed{s}.json" for s in summ["seeds"]]
            summ.update(privacy_summary([json.loads(f.read_text()) for f in files])
                        if all(f.exists() for f in files) else privacy_summary([{}]))
    return out


def committed_searches(dataset: str, root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Committed grid searches: ``data/results/dpsgd/<dataset>/<cell>/search/search.json`` by
    cell name."""
    return _committed(dataset, "*/search/search.json", root)


def _results_base(dataset: str, root: Path | None) -> Path:
    from ..results import RESULTS_DIR

    return (root or RESULTS_DIR) / "dpsgd" / dataset


def _committed(dataset: str, pattern: str, root: Path | None) -> dict[str, dict[str, Any]]:
    base = _results_base(dataset, root)
    return {p.parent.parent.name: json.loads(p.read_text()) for p in sorted(base.glob(pattern))}


#: ``tab:control``: the five scenarios, as (compression k or 1, noise std in units of C as a
#: function of TopAgg's sigma and k, or None for no noise)
CONTROL = {"TopAgg": ("k", lambda s, k: s * math.sqrt(k)),
           "TopK-GM-DP": ("k", lambda s, k: s),
           "TopK-SGD": ("k", None),
           "GM-DP": (1.0, lambda s, k: s),
           "clipped SGD": (1.0, None)}


#: the ``tab:control`` scenarios that compress (NormTopK)
CONTROL_COMPRESSING = tuple(n for n, (kk, _) in CONTROL.items() if kk == "k")


def control_cell(k: float, epsilon: float, scenario: str, scope: str = "flat") -> str:
    """``control-k0.8-eps1-topk-sgd``: a ``tab:control`` scenario's folder name;
    ``control-layer-…`` with ``scope="layer"`` (ours)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    tag = "" if scope == "flat" else f"{scope}-"
    return f"control-{tag}k{k:g}-eps{epsilon:g}-{scenario.lower().replace(' ', '-')}"


def control_configs(dataset: str, epsilon: float, k: float, profile: str,
                    **overrides: Any) -> dict[str, DPSGDConfig]:
    """``tab:control``'s scenarios with TopAgg's C, σ, B, lr and number of steps T (at
    ``epsilon``): TopAgg adds N(0, kσ²C²), TopK-GM-DP and GM-DP add N(0, σ²C²), TopK-SGD and
    clipped SGD add nothing. Each config's ``sigma`` is the noise multiplier *relative to its
    own sensitivity* (TopK-GM-DP: σ/√k, since NormTopK's sensitivity is √k C), so its ledgers
    are its true ε (TopK-GM-DP's is below the budget; the noiseless ones have none); the
    ``epsilon`` field of a noisy scenario holds that true ε under the paper ledger."""
    base = make_config(dataset, epsilon, "normtopk", k, profile, **overrides)
    q = base.batch_size / base.train_examples
    steps = base.steps if base.steps is not None else dpsgd_steps_for_budget(
        base.epsilon, q, base.sigma, base.delta)
    out = {}
    for name, (kk, noise) in CONTROL.items():
        kk = k if kk == "k" else kk
        method = ("normtopk" if kk < 1 else "gmdp") if noise else ("normtopk" if kk < 1
                                                                    else "sgd")
        sens = math.sqrt(kk)  # in units of C
        fields = {**asdict(base), "method": method, "k": kk, "steps": steps,
                  "hyperparameter_source": base.hyperparameter_source + f"; control: {name}"}
        if noise is None:
            fields.update(epsilon=math.inf)
        else:
            z = noise(base.sigma, k) / sens
            fields.update(sigma=z, epsilon=dpsgd_epsilon(steps, q, z, base.delta))
        out[name] = DPSGDConfig(**fields)
    return out


def run_control(dataset: str, epsilon: float, k: float, profile: str, *, seeds: list[int],
                out: Path | None = None, progress: bool = False, device: str = "cpu",
                **overrides: Any) -> dict[str, dict[str, Any]]:
    """All ``tab:control`` scenarios (:func:`control_configs`), each a cell
    ``control-k<k>-eps<e>-<scenario>``; returns their summaries by scenario.

    With ``scope="layer"`` (ours: NormTopK within each parameter tensor) only the three
    compressing scenarios run, as cells ``control-layer-k<k>-eps<e>-<scenario>``: GM-DP and
    clipped SGD do not compress, so the scope changes nothing there and the flat cells hold
    them."""
    scope = overrides.get("scope", "flat")
    res = {}
    for name, cfg in control_configs(dataset, epsilon, k, profile, **overrides).items():
        if scope != "flat" and name not in CONTROL_COMPRESSING:
            continue
        cell = control_cell(k, epsilon, name, scope)
        res[name] = run_cell(dataset, epsilon, cfg.method, cfg.k, profile, seeds=seeds,
                             out=(Path(out) / cell) if out else None, progress=progress,
                             cfg=cfg, cell=cell, device=device)
    return res
