"""Benchmark what a paper-scale cell costs after training: sampling 100k images and the
utility evaluation (the official CNN, SGD lr 2e-3, batch 512) on them.

* **Evaluation**: seconds per epoch of ``evaluate.train_classifier`` on ``--n`` images in its
  two memory formats (``DATALENS_CONV_LAYOUT``: channels-last, the CPU default, and NCHW),
  against the same loop with the official layer order (ReLU before max-pool, out-of-place
  ReLUs, NCHW), in the same process; the projected 30-epoch time; and a numerics check:
  seeded ``--check-epochs`` runs of the library (channels-last) and of the official order
  (NCHW) on ``--check-n`` images must give the same per-epoch test accuracies up to float
  rounding (the same function, the same dropout masks: ATen's). The library's default dropout
  masks on the CPU (``evaluate.DropoutStreams``) are timed against ATen's in the same layout.
* **Dropout effect** (``--effect-samples FILE``): the same sample file evaluated with ATen's
  masks and with the streams for ``--effect-seeds`` classifier seeds each: what the choice of
  masks changes in a result.
* **Pool gradient buffer** (``--pool-pairs K``): the library's classifier with its first
  max-pool's gradient written into a reused buffer (``evaluate._MaxPool2x2``) against the
  same classifier with ``F.max_pool2d`` (a fresh, zero-filled gradient every batch), K
  interleaved pairs of ``--pool-batches`` training batches of 512, with a check that both
  end on bit-identical parameters. Interleaved pairs, because single timings on the
  project's Xeon host vary by 15-20 %.
* **Sampling**: seconds for ``--samples`` images with ``datalens.sample_generator`` (64 batches
  of 15 per call, BatchNorm per batch) against one call per batch of 15 (the official
  sampler's loop), the latter timed on a tenth of the images and scaled.

Timing data are random images: the cost does not depend on their content.

    python benchmarks/bench_evaluate.py [--n 100000] [--samples 100000] \
        [--record benchmarks/results/evaluate-<machine>.json]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import datalens_lib.evaluate as ev  # noqa: E402
from datalens_lib.datalens import sample_generator  # noqa: E402
from datalens_lib.models import Generator  # noqa: E402
from datalens_lib.provenance import atomic_write_json, provenance  # noqa: E402

SHAPE, Y = (1, 28, 28), 10


class OfficialOrderCNN(ev.EvalCNN):
    """The evaluation CNN with the Keras layer order, as the library ran it before."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.dropout(F.max_pool2d(F.relu(self.conv1(x)), 2), 0.2, self.training)
        x = F.dropout(F.relu(self.conv2(x)), 0.25, self.training)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def _train(model_cls: type, x, y, xt, yt, epochs: int, layout: str, rng: str,
           seed: int = 0) -> dict:
    saved, env = ev.EvalCNN, os.environ.get("DATALENS_CONV_LAYOUT")
    ev.EvalCNN = model_cls  # train_classifier builds ev.EvalCNN
    os.environ["DATALENS_CONV_LAYOUT"] = layout
    try:
        res = ev.train_classifier(x, y, xt, yt, Y, epochs=epochs, seed=seed, progress=False,
                                  dropout_rng=rng)
        assert res["conv_layout"] == layout and res["dropout_rng"] == rng
        return res
    finally:
        ev.EvalCNN = saved
        if env is None:
            os.environ.pop("DATALENS_CONV_LAYOUT")
        else:
            os.environ["DATALENS_CONV_LAYOUT"] = env


#: what is timed: (name, model class, memory format, dropout masks); the official order draws
#: ATen's masks whatever it is given (its forward calls F.dropout)
VARIANTS = (("library", ev.EvalCNN, "channels_last", "streams"),
            ("library_aten_dropout", ev.EvalCNN, "channels_last", "torch"),
            ("library_nchw", ev.EvalCNN, "contiguous", "torch"),
            ("official_order", OfficialOrderCNN, "contiguous", "torch"))


def bench_evaluation(n: int, check_n: int, check_epochs: int) -> dict:
    rng = np.random.default_rng(0)
    x = rng.random((n, *SHAPE), dtype=np.float32)
    y = rng.integers(0, Y, n)
    xt, yt = x[:10000], y[:10000]
    out = {"n_train": n, "n_test": len(xt), "batch_size": 512}
    for _, cls, layout, masks in VARIANTS:  # warm-up: oneDNN builds its kernels on first use
        _train(cls, x[:2048], y[:2048], xt[:2048], yt[:2048], 1, layout, masks)
    for name, cls, layout, masks in VARIANTS:
        res = _train(cls, x, y, xt, yt, 1, layout, masks)
        out[f"{name}_s_per_epoch"] = res["seconds"]
        print(f"evaluation, {name:20s} ({layout:13s}, {masks:7s}): {res['seconds']:6.1f} "
              f"s/epoch on {n} images (30 epochs: {30 * res['seconds'] / 60:5.1f} min)",
              flush=True)
    out["speed_up"] = out["official_order_s_per_epoch"] / out["library_s_per_epoch"]
    out["layout_speed_up"] = (out["library_nchw_s_per_epoch"]
                              / out["library_aten_dropout_s_per_epoch"])
    out["dropout_streams_speed_up"] = (out["library_aten_dropout_s_per_epoch"]
                                       / out["library_s_per_epoch"])
    out["projected_30_epochs_min"] = 30 * out["library_s_per_epoch"] / 60
    # numerics: a seeded short run of each on a learnable problem (class-dependent means)
    cx = (rng.random((check_n, *SHAPE), dtype=np.float32) * 0.1
          + (np.arange(check_n) % Y)[:, None, None, None].astype(np.float32) / (Y - 1))
    cy = np.arange(check_n) % Y
    # (with ATen's masks, which the official order draws: the same function and masks)
    a = _train(ev.EvalCNN, cx, cy, cx[:1000], cy[:1000], check_epochs, "channels_last",
               "torch", seed=3)
    b = _train(OfficialOrderCNN, cx, cy, cx[:1000], cy[:1000], check_epochs, "contiguous",
               "torch", seed=3)
    diff = float(np.max(np.abs(np.subtract(a["test_accuracy_per_epoch"],
                                           b["test_accuracy_per_epoch"]))))
    out["numerics"] = {"epochs": check_epochs, "n": check_n, "dropout_rng": "torch",
                       "library": a["test_accuracy_per_epoch"],
                       "official_order": b["test_accuracy_per_epoch"],
                       "max_abs_accuracy_difference": diff}
    print(f"evaluation speed-up x{out['speed_up']:.2f} (layout alone x"
          f"{out['layout_speed_up']:.2f}, dropout streams alone x"
          f"{out['dropout_streams_speed_up']:.2f}); seeded {check_epochs}-epoch runs: "
          f"max |accuracy difference| {diff:.4g}", flush=True)
    return out


class FreshPoolGradCNN(ev.EvalCNN):
    """The library's classifier with ``F.max_pool2d`` in place of ``evaluate._MaxPool2x2``:
    a new, zero-filled gradient of the first layer's output every batch, as before."""

    def _pool(self, h: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(h, 2)


def bench_pool_grad(pairs: int, batches: int) -> dict:
    """Interleaved pairs (module doc): ms per training batch of 512 with each pool."""
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.random((batches * 512, *SHAPE), dtype=np.float32))
    x[:, :, :4] = 0  # a blank margin, as in MNIST: ties in the pooling windows
    y = torch.from_numpy(rng.integers(0, Y, len(x)))

    def run(cls: type) -> tuple[float, list[torch.Tensor]]:
        torch.manual_seed(1)
        m = cls(SHAPE, Y, channels_last=True, dropout=ev.DropoutStreams(0))
        m = m.to(memory_format=torch.channels_last).train()
        opt = torch.optim.SGD(m.parameters(), lr=2e-3)
        t = 0.0
        for b in range(batches + 3):  # (3 warm-up batches)
            if b == 3:
                t = time.perf_counter()
            i = slice((b % batches) * 512, (b % batches + 1) * 512)
            loss = F.cross_entropy(m(x[i]), y[i])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return (time.perf_counter() - t) / batches * 1e3, [p.detach() for p in m.parameters()]

    reused, fresh, equal = [], [], True
    for _ in range(pairs):
        (a, pa), (b, pb) = run(FreshPoolGradCNN), run(ev.EvalCNN)
        fresh.append(a)
        reused.append(b)
        equal &= all(torch.equal(u, v) for u, v in zip(pa, pb, strict=True))
    ratios = [f / r for f, r in zip(fresh, reused, strict=True)]
    print(f"pool gradient buffer: ms per batch fresh {np.median(fresh):.1f}, reused "
          f"{np.median(reused):.1f} (medians of {pairs} pairs); paired ratios "
          f"{min(ratios):.2f}-{max(ratios):.2f}, median x{np.median(ratios):.2f}; "
          f"bit-identical parameters: {equal}", flush=True)
    return {"pairs": pairs, "batches": batches, "fresh_ms_per_batch": fresh,
            "reused_ms_per_batch": reused, "paired_ratios": ratios,
            "median_speed_up": float(np.median(ratios)), "bit_identical": bool(equal)}


def bench_dropout_effect(samples: Path, dataset: str, seeds: int, epochs: int) -> dict:
    """What the dropout masks change in a result: ``evaluate_samples`` of one sample file with
    ATen's masks and with ``DropoutStreams``, for classifier seeds 0 .. seeds - 1 each (the
    official schedule otherwise; the training seed of the samples is fixed)."""
    from datalens_lib.data import load_dataset
    from datalens_lib.samples import load_samples

    ds = load_dataset(dataset)
    x, y = load_samples(samples, shape=ds.shape, num_classes=ds.num_classes)
    out: dict = {"samples": str(samples), "dataset": dataset, "epochs": epochs,
                 "n_train": len(x)}
    for rng in ev.DROPOUT_RNGS:
        runs = [ev.train_classifier(x, y, ds.x_test, ds.y_test, ds.num_classes, epochs=epochs,
                                    seed=s, progress=False, dropout_rng=rng)
                for s in range(seeds)]
        out[rng] = {p: [r[p] for r in runs] for p in ev.PROTOCOLS}
        out[rng]["seconds"] = [r["seconds"] for r in runs]
        print(f"dropout {rng:7s}: paper {np.mean(out[rng]['paper']):.4f} +- "
              f"{np.std(out[rng]['paper'], ddof=1) if seeds > 1 else 0:.4f}, clean "
              f"{np.mean(out[rng]['clean']):.4f} +- "
              f"{np.std(out[rng]['clean'], ddof=1) if seeds > 1 else 0:.4f} over {seeds} "
              f"classifier seeds ({epochs} epochs, {len(x)} images)", flush=True)
    return out


def bench_sampling(n: int) -> dict:
    torch.manual_seed(0)
    G = Generator(50, Y, SHAPE)
    sample_generator(G, 960, 15, torch.Generator().manual_seed(0))  # warm-up
    t = time.perf_counter()
    sample_generator(G, n, 15, torch.Generator().manual_seed(1))
    grouped = time.perf_counter() - t
    m = max(15, n // 10 // 15 * 15)
    t = time.perf_counter()
    sample_generator(G, m, 15, torch.Generator().manual_seed(1), groups_per_call=1)
    per_batch = (time.perf_counter() - t) * n / m
    print(f"sampling {n} images: {grouped:6.1f} s grouped (64 batches per call); one call "
          f"per batch of 15 {per_batch:6.1f} s (timed on {m}); x{per_batch / grouped:.2f}",
          flush=True)
    return {"n": n, "grouped_s": grouped, "per_batch_s": per_batch,
            "speed_up": per_batch / grouped}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000, help="training images for the timing")
    ap.add_argument("--samples", type=int, default=100000)
    ap.add_argument("--check-n", type=int, default=5000)
    ap.add_argument("--check-epochs", type=int, default=3)
    ap.add_argument("--effect-samples", type=Path, default=None,
                    help="a sample file (.npz) to evaluate with both dropout masks")
    ap.add_argument("--effect-dataset", default="mnist")
    ap.add_argument("--effect-seeds", type=int, default=3)
    ap.add_argument("--effect-epochs", type=int, default=30)
    ap.add_argument("--pool-pairs", type=int, default=0,
                    help="interleaved pairs timing the first max-pool's gradient buffer")
    ap.add_argument("--pool-batches", type=int, default=30)
    ap.add_argument("--skip", choices=("evaluation", "sampling"), action="append", default=[])
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    if min(args.n, args.samples, args.check_n, args.check_epochs, args.effect_seeds,
           args.effect_epochs) < 1:
        ap.error("--n, --samples, --check-n, --check-epochs, --effect-seeds and "
                 "--effect-epochs must be positive")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}", flush=True)
    rec = {"benchmark": "bench_evaluate",
           "date": datetime.datetime.now(datetime.UTC).isoformat(),
           "threads": torch.get_num_threads()}
    if "evaluation" not in args.skip:
        rec["evaluation"] = bench_evaluation(args.n, args.check_n, args.check_epochs)
    if "sampling" not in args.skip:
        rec["sampling"] = bench_sampling(args.samples)
    if args.pool_pairs > 0:
        rec["pool_grad_buffer"] = bench_pool_grad(args.pool_pairs, max(1, args.pool_batches))
    if args.effect_samples is not None:
        rec["dropout_effect"] = bench_dropout_effect(args.effect_samples, args.effect_dataset,
                                                     args.effect_seeds, args.effect_epochs)
    if args.record:
        rec.update(provenance())
        atomic_write_json(args.record, rec)
        print(f"wrote {args.record}")


if __name__ == "__main__":
    main()
