"""Utility evaluation (paper Sec. 5.1, "Evaluation Metrics"): train a classifier on synthetic
data, test it on the real test set.

The classifier is the official evaluation CNN (Keras): Conv(32, 3x3, ReLU) -> MaxPool 2 ->
Dropout .2 -> Conv(64, 3x3, ReLU) -> Dropout .25 -> Dense 64 (ReLU) -> Dense C (softmax),
Glorot-uniform weights, categorical cross-entropy, plain SGD (MNIST/Fashion: lr 2e-3, batch
512, 600 epochs; CelebA: lr 1e-4, batch 256, 250 epochs). Two protocols are reported:

``paper``
    the maximum test accuracy over epochs -- what the official script prints (the real test
    set is its Keras validation set, so this *selects on test data*);
``clean``
    the test accuracy after the fixed schedule (last epoch): no selection on test data.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from . import failpoints
from ._validate import choice, positive_float, positive_int
from .data import load_dataset
from .ensemble import conv_layout
from .provenance import atomic_save
from .records import load_checkpoint
from .samples import load_samples

PROTOCOLS = ("paper", "clean")
#: where the classifier's dropout masks come from (:class:`DropoutStreams`; ``train_classifier``)
DROPOUT_RNGS = ("streams", "torch")


def dropout_nchw_order(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """``F.dropout(x, p, training)`` with the mask drawn in NCHW order whatever ``x``'s memory
    format. ATen's CPU dropout fills ``empty_like(x)`` with Bernoulli draws in memory order, so
    a channels-last activation would drop other units than the official NCHW one from the same
    seed; drawing on a contiguous tensor of ``x``'s shape (then dividing by 1 - p and
    multiplying, as ATen does) keeps the NCHW masks and values exactly
    (``tests/test_evaluate.py``). A contiguous ``x`` takes ``F.dropout`` itself (on CUDA its
    fused kernel)."""
    if not training or p == 0 or x.is_contiguous():
        return F.dropout(x, p, training)
    noise = torch.empty(x.shape, dtype=x.dtype, device=x.device).bernoulli_(1 - p)
    noise.div_(1 - p)
    return x * noise.contiguous(memory_format=torch.channels_last)


def channels_last_strides(x: torch.Tensor) -> torch.Tensor:
    """``x`` (N, C, H, W) with channels-last strides. ``contiguous(memory_format=
    channels_last)`` leaves a one-channel NCHW tensor as it is (it already counts as
    channels-last-contiguous), and oneDNN then writes the first convolution's output in NCHW,
    which the channels-last max-pool needs copied (and its gradient copied back): on the
    project's Xeon host the first layer's forward and backward took 2x as long that way
    (``benchmarks/README.md``). A one-channel tensor gets the channels-last strides as a view
    of the same memory."""
    if x.dim() == 4 and x.shape[1] == 1 and x.is_contiguous():
        n, _, h, w = x.shape
        return x.as_strided(x.shape, (h * w, 1, w, 1))
    return x.contiguous(memory_format=torch.channels_last)


class DropoutStreams:
    """Dropout masks for the evaluation CNN from ``streams`` seeded CPU generators that draw
    in parallel (the evaluation's default dropout on the CPU, ``dropout_rng="streams"``).

    The mask of an activation of shape (N, C, H, W) is a float32 uniform U per unit, in NCHW
    order whatever the activation's memory format; a unit is kept iff U >= p and kept units are
    scaled by 1 / (1 - p). That is the official Keras/TensorFlow rule (``random_uniform >=
    rate`` on float32 draws), not ATen's ``bernoulli_``, which draws a float64 per unit from
    one Mersenne twister in a serial loop: a third of a one-thread training step of the CNN at
    batch 512, on one core however many the step has (``benchmarks/README.md``). Here the flat
    NCHW mask is cut into ``streams`` equal contiguous shares, share i is drawn from its own
    ``torch.Generator`` (32-bit seeds from ``numpy.random.SeedSequence((seed, 0xD0))``), and the
    shares are drawn concurrently in threads (ATen releases the GIL), or one after another when
    torch has one thread (a one-thread queue lane). The masks depend on the seed and
    the number of streams only, never on the thread count or the memory layout; their states are
    part of the evaluation's checkpoint (:meth:`state`).

    A speed choice that changes seeded runs (other masks from the same seed, the same
    distribution): ``dropout_rng="torch"`` keeps ATen's draws from the global generator, as
    every evaluation before this class did; the difference in accuracy between the two is
    measured in ``benchmarks/README.md``."""

    def __init__(self, seed: int, streams: int = 2):
        self.streams = positive_int("streams", streams)
        # (32-bit seeds: a CPU torch.Generator seeds its Mersenne twister from 32 bits; a
        # negative seed maps to its two's complement, as torch.manual_seed does)
        seeds = np.random.SeedSequence((int(seed) % 2 ** 64, 0xD0)).generate_state(
            self.streams, dtype=np.uint32)
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self._pool: ThreadPoolExecutor | None = None

    def uniform(self, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """The next float32 uniforms in [0, 1) of ``shape`` (contiguous: NCHW order)."""
        out = torch.empty(shape, dtype=torch.float32)
        flat = out.view(-1)
        bounds = np.linspace(0, flat.numel(), self.streams + 1).astype(np.int64)
        jobs = [(g, flat[a:b]) for g, a, b in zip(self.generators, bounds[:-1], bounds[1:],
                                                 strict=True)]
        if self.streams == 1 or torch.get_num_threads() < 2:  # (one core: one after another)
            for g, part in jobs:
                torch.rand(part.shape, generator=g, out=part)
            return out
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.streams, thread_name_prefix="dropout")
        for f in [self._pool.submit(torch.rand, part.shape, generator=g, out=part)
                  for g, part in jobs]:
            f.result()
        return out

    def __call__(self, x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
        """``x`` with units dropped with probability ``p`` (identity when not training)."""
        if not training or p == 0:
            return x
        keep = self.uniform(x.shape).ge_(p)  # (1.0 / 0.0 in place of a bool tensor)
        if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
                and not x.is_contiguous():
            keep = keep.contiguous(memory_format=torch.channels_last)
        return x * keep.mul_(1.0 / (1.0 - p)).to(x.device, x.dtype)

    def state(self) -> list[torch.Tensor]:
        return [g.get_state() for g in self.generators]

    def set_state(self, states: list[torch.Tensor]) -> None:
        if len(states) != self.streams:
            raise ValueError(f"{len(states)} generator states for {self.streams} streams")
        for g, s in zip(self.generators, states, strict=True):
            g.set_state(s)

    def __getstate__(self) -> dict[str, Any]:  # (a thread pool does not pickle)
        return {**self.__dict__, "_pool": None}


class _MaxPool2x2(torch.autograd.Function):
    """``F.max_pool2d(h, 2)`` whose backward writes the gradient of ``h`` into a buffer kept
    from one batch to the next (``buffers``, keyed by shape, strides, dtype and device) instead of a
    new tensor. The same ATen kernels, so the same indices (ties included) and the same
    numbers, bit for bit (``tests/test_evaluate.py``).

    Why: on the CPU the gradient of the first layer's output ([512, 32, 26, 26], 44 MB) is
    allocated, zero-filled and freed every batch; glibc serves a block that large with fresh
    ``mmap`` pages and unmaps it on free, so the zero fill page-faults through all of it:
    12.5 ms of a ~100-ms training batch in a profile on the project's Xeon host, against
    ~2.4 ms for the same fill in reused memory (``benchmarks/README.md``). Reusing this one
    buffer is what ``mallopt`` did for every allocation (tried and dropped: it can stop
    reusing memory altogether), for the one tensor where it matters. The gradient handed to
    the convolution's backward is the buffer itself, read there and dead before the next
    batch writes it (the classifier's training never keeps a gradient of an activation)."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, buffers: dict) -> torch.Tensor:  # type: ignore[override]
        out, idx = torch.ops.aten.max_pool2d_with_indices(h, [2, 2], [2, 2])
        ctx.save_for_backward(h, idx)
        ctx.buffers = buffers
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        h, idx = ctx.saved_tensors
        key = (tuple(h.shape), h.stride(), h.dtype, h.device)
        buf = ctx.buffers.get(key)
        if buf is None:  # (empty_like keeps h's strides: the layout the kernel writes)
            buf = ctx.buffers[key] = torch.empty_like(h)
        torch.ops.aten.max_pool2d_with_indices_backward.grad_input(
            g, h, [2, 2], [2, 2], [0, 0], [1, 1], False, idx, grad_input=buf)
        return buf, None


class EvalCNN(nn.Module):
    """The official evaluation classifier (see module doc).

    ``channels_last`` (a speed choice, set by :func:`train_classifier` from
    :func:`ensemble.conv_layout`: on by default on the CPU, off on CUDA): the convolutions,
    max-pool and elementwise layers run channels-last (oneDNN's fast kernels; the NCHW
    max-pool is ~7x slower on the CPU), the dropout masks stay the NCHW ones
    (:func:`dropout_nchw_order`), and the first dense layer reads the activation in its memory
    order with its weight columns permuted to match (parameters stay in the official order).
    The same function: outputs and gradients equal the NCHW path's up to float rounding
    (``tests/test_evaluate.py``).

    ``dropout``: where the dropout masks come from: a :class:`DropoutStreams` (what
    :func:`train_classifier` uses on the CPU by default), or None for ATen's dropout on the
    global generator (:func:`dropout_nchw_order`; the evaluations before ``DropoutStreams``)."""

    def __init__(self, shape: tuple[int, int, int], num_classes: int,
                 channels_last: bool = False, dropout: DropoutStreams | None = None):
        super().__init__()
        self.channels_last = channels_last
        self.dropout = dropout
        c, h, w = shape
        self.conv1 = nn.Conv2d(c, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        hh, ww = (h - 2) // 2 - 2, (w - 2) // 2 - 2
        self.fc1 = nn.Linear(64 * hh * ww, 64)
        self.fc2 = nn.Linear(64, num_classes)
        self._pool_grads: dict = {}  # (_MaxPool2x2; not state: rebuilt on the first batch)
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.xavier_uniform_(m.weight)  # Keras' default glorot_uniform
                nn.init.zeros_(m.bias)

    def _pool(self, h: torch.Tensor) -> torch.Tensor:
        """The first max-pool (2x2), its gradient in a reused buffer (:class:`_MaxPool2x2`)."""
        return _MaxPool2x2.apply(h, self._pool_grads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # max-pool before ReLU: relu(maxpool(h)) == maxpool(relu(h)) exactly (ReLU is
        # monotone), with the ReLU on a quarter of the elements; ReLUs in place where autograd
        # does not need their input. Same numbers, fewer passes over the largest activation.
        if self.channels_last:
            x = channels_last_strides(x)
        h = self.conv1(x)  # (channels-last in, channels-last out: no layout copy either way)
        drop = dropout_nchw_order if self.dropout is None else self.dropout
        h = drop(F.relu(self._pool(h), inplace=True), 0.2, self.training)
        h = drop(F.relu(self.conv2(h), inplace=True), 0.25, self.training)
        if self.channels_last:
            # the dense layer's weight columns permuted from the official (c, h, w) order to
            # the activation's memory order (h, w, c): the same products summed in another
            # order, no copy of the activation, and its gradient stays channels-last (mixed
            # layouts make the elementwise backward kernels several times slower)
            n, c, hh, ww = h.shape
            w = self.fc1.weight.view(-1, c, hh, ww).permute(0, 2, 3, 1).reshape(
                self.fc1.out_features, -1)
            z = F.linear(h.permute(0, 2, 3, 1).reshape(n, -1), w, self.fc1.bias)
        else:
            z = self.fc1(h.flatten(1))
        return self.fc2(F.relu(z, inplace=True))


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 2048) -> float:
    model.eval()
    correct = 0
    for s in range(0, len(x), batch):
        correct += int((model(x[s: s + batch]).argmax(1) == y[s: s + batch]).sum())
    return correct / len(x)


def train_classifier(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                     y_test: np.ndarray, num_classes: int, *, epochs: int = 600,
                     lr: float = 2e-3, batch_size: int = 512, seed: int = 0,
                     device: str | torch.device = "cpu", progress: bool = True,
                     checkpoint: str | Path | None = None,
                     checkpoint_every: int = 10, pad_to: int | None = None,
                     dropout_rng: str | None = None) -> dict[str, Any]:
    """Train ``EvalCNN`` with SGD and return per-epoch test accuracies and both protocols.

    ``dropout_rng`` (one of :data:`DROPOUT_RNGS`; None: ``"streams"`` on the CPU, ``"torch"``
    on CUDA, whose fused dropout is fast): ``"streams"`` draws the dropout masks from
    :class:`DropoutStreams` seeded by ``seed``, ``"torch"`` from the global generator with
    ATen's dropout, as evaluations did before ``DropoutStreams`` existed. Either is the
    official rule (Keras's dropout 0.2 and 0.25); they differ in the masks a seed gives.

    With ``checkpoint``, the state (model, optimiser, RNG, accuracies so far) is saved every
    ``checkpoint_every`` epochs and after the last one (temp file + rename). The optimiser is
    constant-rate SGD, so an n-epoch schedule is exactly the first n epochs of a longer one:
    a later call with the same data, lr, batch size and seed but more epochs *continues* from
    the checkpoint (an interrupted call resumes the same way), and a call with fewer epochs
    than the checkpoint holds is answered from the stored per-epoch accuracies.

    ``pad_to`` (the official Fashion-MNIST evaluation script's behaviour, an opt-in variant):
    the training set is ``pad_to`` rows, the samples followed by rows of zero images with
    all-zero target vectors (``np.zeros((100000, 794))`` filled from one 10k pickle). Keras's
    categorical cross-entropy gives such a row zero loss and zero gradient, but it still counts
    in the batch mean and in the epoch's shuffle: here each batch of ``batch_size`` shuffled
    row indices trains on its real rows only, with their loss summed and divided by
    ``batch_size``; a batch without real rows is skipped (plain SGD: a zero gradient changes
    nothing). The zero rows are never computed.
    """
    epochs = positive_int("epochs", epochs)
    lr = positive_float("lr", lr)
    batch_size = positive_int("batch_size", batch_size)
    if len(x_train) != len(y_train) or len(x_train) == 0:
        raise ValueError("x_train and y_train must be non-empty and of equal length")
    if pad_to is not None and positive_int("pad_to", pad_to) < len(x_train):
        raise ValueError(f"pad_to ({pad_to}) is below the {len(x_train)} samples: it pads the "
                         "training set with zero rows, it does not cut it (see limit)")
    if dropout_rng is not None:
        choice("dropout_rng", dropout_rng, DROPOUT_RNGS)
    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    xtr = torch.as_tensor(np.asarray(x_train, dtype=np.float32), device=device)
    ytr = torch.as_tensor(np.asarray(y_train, dtype=np.int64), device=device)
    xte = torch.as_tensor(np.asarray(x_test, dtype=np.float32), device=device)
    yte = torch.as_tensor(np.asarray(y_test, dtype=np.int64), device=device)
    key = [lr, batch_size, seed, len(xtr), len(xte), _fingerprint(x_train, y_train)]
    if pad_to is not None:  # (keys of unpadded evaluations stay as they were)
        key.append(pad_to)
    ckpt = Path(checkpoint) if checkpoint is not None else None
    # on the CPU: RNG states must be CPU byte tensors; model and optimiser states are
    # moved to the model's device by their load_state_dict
    # (an unreadable one: CheckpointError naming it, before anything is written)
    st = load_checkpoint(ckpt) if ckpt is not None and ckpt.exists() else None
    # a checkpoint of this evaluation continues in the layout and with the dropout masks it
    # was started with (either way, on either device; older checkpoints name neither and
    # drew ATen's masks), unless dropout_rng asks for other masks; a new one takes the
    # device's layout (channels-last: its own key, other float rounding) and dropout_rng
    # (streams: its own key, other masks)
    layout = conv_layout(device)
    rng = dropout_rng or ("torch" if device.type == "cuda" else "streams")
    if st is not None:
        for cl, r in itertools.product(("channels_last", "contiguous"),
                                       (dropout_rng,) if dropout_rng else DROPOUT_RNGS):
            if st["args"] == _checkpoint_key(key, cl, r):
                layout, rng = cl, r
    key = _checkpoint_key(key, layout, rng)
    streams = DropoutStreams(seed) if rng == "streams" else None
    model = EvalCNN(tuple(xtr.shape[1:]), num_classes,
                    channels_last=layout == "channels_last", dropout=streams).to(device)
    if model.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    accs: list[float] = []
    # the first epoch after which a weight is not finite (the SGD diverged: from then on the
    # classifier predicts one class, and the clean protocol reports that class's share)
    nonfinite_from: int | None = None
    rows = len(xtr) if pad_to is None else pad_to  # the epoch's shuffle covers the zero rows
    times: list[float] = []  # cumulative training seconds after each epoch
    if st is not None:
        if st["args"] == key:
            accs = list(st["accs"])
            times = list(st["times"])
            nonfinite_from = st.get("nonfinite_from")  # absent from older checkpoints
            if len(accs) >= epochs:  # a longer schedule already ran: its prefix is the answer
                res = _classifier_result(accs[:epochs], lr, batch_size, seed, len(xtr),
                                         times[epochs - 1], len(accs), nonfinite_from,
                                         layout, rng)
                return res if pad_to is None else {**res, "pad_to": pad_to}
            model.load_state_dict(st["model"])
            opt.load_state_dict(st["opt"])
            gen.set_state(st["gen"])
            torch.set_rng_state(st["torch_rng"])  # ATen's dropout draws from it
            if streams is not None:
                streams.set_state(st["dropout_rng"])
            if device.type == "cuda" and st.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(st["cuda_rng"], device)
    resumed_at = len(accs)
    t0, before = time.perf_counter(), (times[-1] if times else 0.0)
    for epoch in tqdm(range(len(accs), epochs), disable=not progress, desc="classifier",
                      unit="epoch", initial=len(accs), total=epochs):
        model.train()
        perm = torch.randperm(rows, generator=gen).to(device)
        for s in range(0, rows, batch_size):
            idx = perm[s: s + batch_size]
            if pad_to is None:
                loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            else:  # the real rows' loss summed over the whole batch's size (docstring)
                real = idx[idx < len(xtr)]
                if not len(real):
                    continue
                loss = F.cross_entropy(model(xtr[real]), ytr[real], reduction="sum") / len(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if nonfinite_from is None and not all(bool(torch.isfinite(p).all())
                                              for p in model.parameters()):
            nonfinite_from = epoch + 1
        accs.append(accuracy(model, xte, yte))
        times.append(before + time.perf_counter() - t0)
        failpoints.hit("step")  # (tests/test_kill.py)
        if ckpt is not None and ((epoch + 1) % checkpoint_every == 0 or epoch + 1 == epochs):
            state = {"args": key, "accs": accs, "model": model.state_dict(),
                     "opt": opt.state_dict(), "gen": gen.get_state(),
                     "torch_rng": torch.get_rng_state(),
                     "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda"
                     else None, "times": times, "nonfinite_from": nonfinite_from,
                     "dropout_rng": streams.state() if streams is not None else None}
            atomic_save(ckpt, lambda tmp, st=state: torch.save(st, tmp))
    res = _classifier_result(accs, lr, batch_size, seed, len(xtr), times[-1], resumed_at,
                             nonfinite_from, layout, rng)
    if pad_to is not None:
        res["pad_to"] = pad_to
    return res


def _checkpoint_key(key: list[Any], layout: str, rng: str) -> list[Any]:
    """An evaluation checkpoint's key: ``key`` and what changes its float rounding or its
    dropout masks. Keys of the older NCHW and ATen-dropout checkpoints are unchanged."""
    return [*key, *(["channels_last"] if layout == "channels_last" else []),
            *(["dropout=streams"] if rng == "streams" else [])]


def _classifier_result(accs: list[float], lr: float, batch_size: int, seed: int, n_train: int,
                       seconds: float, resumed_at: int, nonfinite_from: int | None = None,
                       layout: str = "contiguous", rng: str = "torch") -> dict[str, Any]:
    """``conv_layout``: the classifier's memory format (``EvalCNN.channels_last``; absent from
    records written before it existed, which ran NCHW);
    ``dropout_rng``: where its dropout masks came from (``train_classifier``; absent from
    records written before it existed, which drew ATen's, ``"torch"``);
    ``continued_from_epoch``: epochs taken from a checkpoint (0: all trained in this call);
    ``seconds``: training time of the whole schedule, summed over the calls that made it;
    ``diverged_at_epoch``: the first epoch after which the classifier's weights were not finite
    (None: finite throughout, or unknown for epochs resumed from an older checkpoint)."""
    if nonfinite_from is not None and nonfinite_from > len(accs):
        nonfinite_from = None  # a prefix of the schedule that ends before the divergence
    return {"test_accuracy_per_epoch": accs, "paper": max(accs), "clean": accs[-1],
            "diverged_at_epoch": nonfinite_from,
            "shorter_schedules": schedule_sensitivity(accs),
            "best_epoch": int(np.argmax(accs)) + 1, "epochs": len(accs), "lr": lr,
            "batch_size": batch_size, "seed": seed, "seconds": seconds,
            "continued_from_epoch": resumed_at, "n_train": n_train, "conv_layout": layout,
            "dropout_rng": rng}


def _fingerprint(x: np.ndarray, y: np.ndarray) -> str:
    """Cheap identity of a training set (all labels, every 97th image) so that a checkpoint
    is never continued on other data of the same size."""
    h = hashlib.sha256(np.ascontiguousarray(y).tobytes())
    h.update(np.ascontiguousarray(np.asarray(x)[::97]).tobytes())
    return h.hexdigest()[:16]


def schedule_sensitivity(accs: list[float], lengths=(10, 30, 100, 300)) -> dict[str, Any]:
    """Both protocols for shorter schedules. The optimiser is constant-rate SGD, so a run of n
    epochs is exactly the first n epochs of a longer run with the same seed."""
    return {str(n): {"paper": max(accs[:n]), "clean": accs[n - 1]}
            for n in lengths if n <= len(accs)}


def _eval_checkpoint(samples: Path, seed: int, lr: float = 2e-3,
                     limit: int | None = None, pad_to: int | None = None,
                     dropout_rng: str | None = None, test_limit: int | None = None) -> Path:
    """``.eval-seed<S>.ckpt`` beside ``samples.npz`` (the name earlier evaluations resume
    from); other sample files (budget snapshots) get their own ``.eval-<stem>-seed<S>.ckpt``,
    and evaluation variants (another learning rate than the book's 2e-3, the first ``limit``
    samples, zero-row padding, dropout masks named explicitly, the first ``test_limit`` test
    images) theirs, so that no variant
    overwrites another's checkpoint."""
    stem = "" if samples.name == "samples.npz" else f"{samples.stem}-"
    variant = (f"lr{lr:g}-" if lr != 2e-3 else "") + (
        f"first{limit}-" if limit is not None else "") + (
        f"padto{pad_to}-" if pad_to is not None else "") + (
        f"dropout{dropout_rng}-" if dropout_rng is not None else "") + (
        f"test{test_limit}-" if test_limit is not None else "")
    return samples.parent / f".eval-{stem}{variant}seed{seed}.ckpt"


def evaluate_samples(samples: str | Path, dataset: str, *, epochs: int = 600, lr: float = 2e-3,
                     batch_size: int = 512, seed: int = 0, device: str = "cpu",
                     data_dir: str | Path | None = None, limit: int | None = None,
                     progress: bool = True, pad_to: int | None = None,
                     dropout_rng: str | None = None,
                     test_limit: int | None = None) -> dict[str, Any]:
    """Utility of a synthetic sample file (x, y; ``datalens_lib.samples``: float in [0, 1] or
    uint8, checked) on ``dataset``'s real test set (``test_limit``: its first images only, the
    smoke profiles' ``eval_test_limit``). ``dropout_rng`` given explicitly (see
    :func:`train_classifier`) is a variant with a checkpoint of its own."""
    if test_limit is not None:
        positive_int("test_limit", test_limit)
    ds = load_dataset(dataset, data_dir)
    # float16 samples stay float16 here: the resume fingerprint is over the stored values
    x, y = load_samples(samples, shape=ds.shape, num_classes=ds.num_classes,
                        keep_float_dtype=True)
    if limit is not None:
        x, y = x[:limit], y[:limit]
    xt, yt = ds.x_test[:test_limit], ds.y_test[:test_limit]  # views: None keeps them all
    res = train_classifier(x, y, xt, yt, ds.num_classes, epochs=epochs, lr=lr,
                           batch_size=batch_size, seed=seed, device=device, progress=progress,
                           checkpoint=_eval_checkpoint(Path(samples), seed, lr, limit, pad_to,
                                                       dropout_rng, test_limit),
                           pad_to=pad_to, dropout_rng=dropout_rng)
    res["dataset"] = dataset
    res["n_test"] = len(yt)
    if test_limit is not None:
        res["test_limit"] = test_limit  # accuracies on the first ``test_limit`` test images
    if limit is not None:
        res["limit"] = limit  # only the first ``limit`` samples were used
    return res


def evaluate_real(dataset: str, **kw: Any) -> dict[str, Any]:
    """Non-private reference: the same classifier on the real training data (``limit``: only
    the first records)."""
    data_dir = kw.pop("data_dir", None)
    limit = kw.pop("limit", None)
    ds = load_dataset(dataset, data_dir)
    x, y = ds.x_train[:limit], ds.y_train[:limit]
    res = train_classifier(x, y, ds.x_test, ds.y_test, ds.num_classes, **kw)
    res["dataset"] = dataset
    return res


def protocol_value(result: dict[str, Any], protocol: str) -> float:
    return float(result[choice("protocol", protocol, PROTOCOLS)])
