"""Would training the seeds of a DP-SGD cell together be faster here? (issue 13: "consider
training the seeds of a cell together, e.g. ``torch.func`` over stacked models, if that is
faster on 2 cores; measure it").

One step of S seeds of the paper's MNIST setting (Opacus MNIST CNN, d = 26,010, batches of
``--batch`` examples, NormTopK k = 0.7 over the flat gradient), two ways, in one process and one
torch thread (as a queue lane runs):

* **apart**: S Opacus ``GradSampleModule`` forward + backward passes (per-example gradients),
  each followed by the mechanism stage (``TopAggDPOptimizer.summed``: clip, NormTopK, norm
  guard, the sum of the kept coordinates) on its rows: what S runs of ``train_dpsgd`` do per
  step;
* **stacked**: the S models' parameters stacked, per-example gradients of all S models in one
  ``torch.func`` call (``vmap`` over models of ``vmap`` over examples of ``grad``), then the same
  mechanism stage on each model's rows.

Both see batches of exactly ``--batch`` examples. Real Poisson batches differ in size from seed
to seed, so a stacked trainer would also pad and mask them: the stacked figure is a lower bound
on its cost. The mechanism stage (a selection per row) does the same work either way.

    python benchmarks/bench_dpsgd_seeds.py [--record benchmarks/results/dpsgd-seeds-<machine>.json]
"""

from __future__ import annotations

import argparse
import datetime
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from opacus import GradSampleModule
from torch.func import functional_call, grad, vmap

from datalens_lib.dpsgd.optimizer import TopAggDPOptimizer
from datalens_lib.dpsgd.train import _data, make_config
from datalens_lib.provenance import atomic_write_json, provenance

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dpsgd import _best  # noqa: E402  (the same best-of-reps timer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--k", type=float, default=0.7)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a lane: 1)")
    ap.add_argument("--record", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    cfg = make_config("mnist", 1.0, "normtopk", args.k, "paper")
    t, make_model, _ = _data(cfg)
    s, b = args.seeds, args.batch
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, len(t["y_train"]), (s, b), generator=g)
    xs, ys = t["x_train"][idx], t["y_train"][idx]  # [S, B, 1, 28, 28], [S, B]
    models = []
    for seed in range(s):
        torch.manual_seed(seed)
        models.append(make_model())
    gsms = [GradSampleModule(m) for m in models]
    opts = [TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=cfg.lr), noise_multiplier=0.0,
                              max_grad_norm=cfg.max_grad_norm, expected_batch_size=b, k=args.k,
                              selection="norm", scope="flat") for m in gsms]

    def apart_grads() -> None:
        for m, x, y in zip(gsms, xs, ys, strict=True):
            m.zero_grad(set_to_none=True)
            F.cross_entropy(m(x), y).backward()

    def apart_step() -> None:
        apart_grads()
        for m, o in zip(gsms, opts, strict=True):
            o.summed([p.grad_sample for p in m.parameters()])

    base = make_model()  # unhooked (the GradSampleModules hook the models above)
    names = [n for n, _ in base.named_parameters()]
    stacked = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models])
               for n in names}

    def loss(params, x, y):
        out = functional_call(base, params, (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    per_example = vmap(vmap(grad(loss), in_dims=(None, 0, 0)), in_dims=(0, 0, 0))

    def stacked_grads() -> dict[str, torch.Tensor]:
        return per_example(stacked, xs, ys)  # {name: [S, B, *shape]}

    def stacked_step() -> None:
        gr = stacked_grads()
        for i, o in enumerate(opts):
            o.summed([gr[n][i] for n in names])

    # the two per-example gradients agree (the same models and examples)
    apart_grads()
    ref = torch.cat([torch.cat([p.grad_sample.reshape(b, -1) for p in m.parameters()], 1)
                     for m in gsms], 0)
    gr = stacked_grads()
    mine = torch.cat([torch.cat([gr[n][i].reshape(b, -1) for n in names], 1)
                      for i in range(s)], 0)
    err = float((mine - ref).abs().max() / ref.abs().max())
    out = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "seeds": s,
           "batch": b, "k": args.k, "torch_threads": args.threads,
           "max_relative_difference_of_gradients": err,
           "apart_grad_s": _best(apart_grads, args.reps),
           "stacked_grad_s": _best(stacked_grads, args.reps),
           "apart_step_s": _best(apart_step, args.reps),
           "stacked_step_s": _best(stacked_step, args.reps)}
    out["grad_speedup"] = out["apart_grad_s"] / out["stacked_grad_s"]
    out["step_speedup"] = out["apart_step_s"] / out["stacked_step_s"]
    for k, v in out.items():
        print(f"{k:40s} {v}")
    if args.record:
        atomic_write_json(args.record, {**out, **provenance()})


if __name__ == "__main__":
    main()
