"""Benchmark one DP-SGD step of the paper's MNIST setting (issue 13: Opacus MNIST CNN, d =
26,010, Poisson batches of expected size 512) and where its time goes.

* **Per-example gradients**: Opacus's hook-based ``GradSampleModule`` forward + backward on one
  batch.
* **The mechanism stage** (``TopAggDPOptimizer.process``: clip, NormTopK over the flat
  gradient, the float64 norm guard) at k = 0.6, 0.7, 0.8, on real clipped per-example
  gradients of MNIST taken after ``--warm-steps`` plain SGD steps (the selection's size
  depends on how training has shaped the gradients), against the same stage with NormTopK's
  reference full sort of every row (``prefilter=None``), in the same process; the selection's
  median and largest size per row.
* **The sparse sum** (``TopAggDPOptimizer.summed``, what a training step runs for flat NormTopK:
  the kept coordinates only, added with ``index_add_``) against ``process``'s dense rows summed
  over the batch, in the same process.
* **Whole training steps** (``train_dpsgd``, ``--train-steps`` steps of the ε = 1 k = 0.7 cell:
  batching, per-example gradients, the mechanism, noise, SGD) with the sparse sum and with the
  dense one, in the same process.
* **One seed's projected time** for a cell of ``--steps`` steps (the ε = 1 cells take 1457).

    python benchmarks/bench_dpsgd.py [--record benchmarks/results/dpsgd-<machine>.json]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import time
import warnings
from dataclasses import replace

import torch
import torch.nn.functional as F

from datalens_lib.dpsgd import compress
from datalens_lib.dpsgd.optimizer import TopAggDPOptimizer
from datalens_lib.dpsgd.train import _data, make_config, train_dpsgd
from datalens_lib.provenance import atomic_write_json, provenance


def _best(f, reps: int) -> float:
    f()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--warm-steps", type=int, default=300)
    ap.add_argument("--steps", type=int, default=1457)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--train-steps", type=int, default=100)
    ap.add_argument("--record", default=None)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    from opacus import GradSampleModule

    cfg = make_config("mnist", 1.0, "normtopk", 0.7, "paper")
    t, make_model, _ = _data(cfg)
    torch.manual_seed(0)
    model = GradSampleModule(make_model())
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(0)

    def batch():
        idx = torch.randint(0, len(t["x_train"]), (args.batch,), generator=gen)
        return t["x_train"][idx], t["y_train"][idx]

    def grad_step(xb, yb):
        for p in model.parameters():
            p.grad_sample = p.grad = None
        F.cross_entropy(model(xb), yb).backward()

    xb, yb = batch()
    out: dict = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                 "batch": args.batch, "warm_steps": args.warm_steps,
                 "grad_sample_s": _best(lambda: grad_step(xb, yb), args.reps),
                 "torch_threads": torch.get_num_threads()}
    for _ in range(args.warm_steps):  # plain SGD to give the gradients a trained shape
        grad_step(*batch())
        sgd.step()
    grad_step(xb, yb)
    grads = [p.grad_sample.detach().clone() for p in model.parameters()]
    rows = []
    for k in (0.6, 0.7, 0.8):
        opt = TopAggDPOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                noise_multiplier=1.6, max_grad_norm=12.0,
                                expected_batch_size=args.batch, k=k)
        kept = (torch.cat(opt.process(grads), 1) != 0).sum(1).float()
        fast = _best(lambda opt=opt: opt.process(grads), args.reps)
        dense_sum = _best(lambda opt=opt: [f.sum(0) for f in opt.process(grads)], args.reps)
        sparse_sum = _best(lambda opt=opt: opt.summed(grads), args.reps)
        # the reference: a full sort of every row (the optimizer reads this dict)
        compress.SELECTIONS["norm"] = functools.partial(compress.norm_topk, prefilter=None)
        try:
            full = _best(lambda opt=opt: opt.process(grads), max(1, args.reps // 2))
        finally:
            compress.SELECTIONS["norm"] = compress.norm_topk
        step = out["grad_sample_s"] + sparse_sum
        rows.append({"k": k, "process_s": fast, "process_full_sort_s": full,
                     "speedup": full / fast, "dense_sum_s": dense_sum,
                     "sparse_sum_s": sparse_sum, "sparse_speedup": dense_sum / sparse_sum,
                     "kept_median": float(kept.median()),
                     "kept_max": float(kept.max()), "step_s": step,
                     "seed_projected_min": step * args.steps / 60})
        print(f"k = {k}: sum of processed rows {dense_sum:.3f} s, sparse sum {sparse_sum:.3f} s "
              f"({dense_sum / sparse_sum:.2f}x)")
        print(f"k = {k}: process {fast:.3f} s (full sort {full:.3f} s, {full / fast:.1f}x); "
              f"kept median {kept.median():.0f}, max {kept.max():.0f}; step ~{step:.3f} s, "
              f"{args.steps} steps ~{step * args.steps / 60:.1f} min")
    out["rows"] = rows
    # whole steps: the sparse sum against the dense one (the optimizer's method swapped)
    tcfg = replace(cfg, steps=args.train_steps, eval_every=10 ** 9)
    sparse = TopAggDPOptimizer.summed
    try:
        TopAggDPOptimizer.summed = lambda self, g: [f.sum(0) for f in self.process(g)]
        dense_step = train_dpsgd(tcfg, progress=False)["seconds_per_step"]
    finally:
        TopAggDPOptimizer.summed = sparse
    sparse_step = train_dpsgd(tcfg, progress=False)["seconds_per_step"]
    out["train"] = {"k": cfg.k, "steps": args.train_steps, "dense_step_s": dense_step,
                    "sparse_step_s": sparse_step, "speedup": dense_step / sparse_step}
    print(f"training step (k = {cfg.k}, {args.train_steps} steps): dense sum {dense_step:.3f} s, "
          f"sparse sum {sparse_step:.3f} s ({dense_step / sparse_step:.2f}x)")
    print(f"per-example gradients (Opacus hooks, B = {args.batch}): "
          f"{out['grad_sample_s']:.3f} s")
    if args.record:
        atomic_write_json(args.record, {**out, **provenance()})
        print(f"record: {args.record}")


if __name__ == "__main__":
    main()
