"""Benchmark one DP-GAN discriminator step (issue 10: ``methods.dpgan``, the small-batch
``mnist-eps1`` paper setting, Poisson batches of expected size 64) with ghost clipping (what
the method runs when ``clip_fake`` is off) against Opacus's per-example gradients, in the same
process, on the same model and data.

* **The private part**: the real batch's forward, the backward(s) that leave the clipped sum
  in ``.grad``, and ``pre_step`` (noise, division by B).
* **The whole step**: the private part, the fake half's exact gradient, the Adam update and the
  generator step.
* **One cell's projected time**: the planned discriminator steps times the whole step.

The two paths release the same sum up to the order of float additions; the benchmark prints
the largest relative difference of the two clipped sums on one batch as a check.

    python benchmarks/bench_dpgan.py [--record benchmarks/results/dpgan-<machine>.json]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import warnings

import torch
from bench_dpsgd import _best  # (run as a script: benchmarks/ is on the path)


def _per_example(m):
    """The same method with Opacus's per-example gradients (``GradSampleModule``,
    ``DPOptimizer``) over a copy of its discriminator: the ``clip_fake`` path's machinery."""
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    from datalens_lib.methods.dpgan import DPDiscriminator

    cfg = m.cfg
    other = copy.copy(m)
    disc = DPDiscriminator(m.y_dim, m.shape, cfg.groups).to(m.device)
    disc.load_state_dict(m.D._module.state_dict())
    other.D = GradSampleModule(disc, loss_reduction="mean")
    other.d_opt = DPOptimizer(
        torch.optim.Adam(other.D.parameters(), lr=cfg.lr_d, betas=(cfg.beta1, 0.999)),
        noise_multiplier=m.sigma, max_grad_norm=cfg.max_grad_norm,
        expected_batch_size=cfg.batch_size, loss_reduction="mean", generator=m.noise_gen)
    other.ghost = False
    return other


def _private(m, idx):
    """The private part of a step on the real batch ``idx`` (as ``DPGAN.step`` runs it)."""
    m.d_opt.zero_grad(set_to_none=True)
    per = m._d_loss(m.D(m.x[idx], m._onehot(m.y[idx])), True)
    if m.ghost:
        m._ghost_clipped_backward(per)
    else:
        per.mean().backward()
    summed = [p.grad.detach().clone() if m.ghost else None for p in m.D.parameters()]
    m.d_opt.pre_step()
    return summed


def main() -> None:
    from datalens_lib.config import load_config
    from datalens_lib.methods import method_class
    from datalens_lib.provenance import atomic_write_json, provenance

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="mnist-eps1")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--record", default=None)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = load_config(args.config, "paper", method="dpgan")
    ghost = method_class("dpgan")(cfg, seed=0, device=args.device, profile="paper")
    if not ghost.ghost:
        raise SystemExit(f"{args.config} clips real and fake pairs (clip_fake): no ghost path")
    plain = _per_example(ghost)
    idx = torch.arange(cfg.batch_size, device=ghost.device)

    # check: the clipped sums of one batch (noise off for the comparison)
    sigma = ghost.d_opt.noise_multiplier
    ghost.d_opt.noise_multiplier = plain.d_opt.noise_multiplier = 0.0
    a = _private(ghost, idx)
    _private(plain, idx)
    b = [p.grad * cfg.batch_size for p in plain.D.parameters()]  # pre_step divided by B
    rel = max(float((x - y).norm() / y.norm()) for x, y in zip(a, b, strict=True))
    ghost.d_opt.noise_multiplier = plain.d_opt.noise_multiplier = sigma

    out = {"benchmark": "dpgan", "config": args.config, "batch": cfg.batch_size,
           "device": str(ghost.device), "threads": torch.get_num_threads(),
           "reps": args.reps, "planned_steps": ghost.planned,
           "clipped_sum_max_relative_difference": rel,
           "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    for name, m in (("ghost", ghost), ("per_example", plain)):
        out[f"private_s_{name}"] = _best(lambda m=m: _private(m, idx), args.reps)
        out[f"step_s_{name}"] = _best(m.step, args.reps)
    out["private_speedup"] = out["private_s_per_example"] / out["private_s_ghost"]
    out["step_speedup"] = out["step_s_per_example"] / out["step_s_ghost"]
    out["cell_hours_ghost"] = ghost.planned * out["step_s_ghost"] / 3600
    out["cell_hours_per_example"] = ghost.planned * out["step_s_per_example"] / 3600
    for k, v in out.items():
        print(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}")
    if args.record:
        atomic_write_json(args.record, {**out, **provenance()})
        print(f"record: {args.record}")


if __name__ == "__main__":
    main()
