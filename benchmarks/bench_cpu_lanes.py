"""Throughput of DP-SGD training on a small CPU: one process with every torch thread against
as many concurrent processes of one thread each (issue 13; what ``scripts/cpu_queue.sh``'s
DP-SGD lanes rest on).

For each setting (GM-DP and TopAgg NormTopK k = 0.7, the Opacus MNIST CNN, expected batch B),
``--steps`` whole training steps (``train_dpsgd``: Poisson batches, per-example gradients, the
mechanism, SGD; ε = ∞ so the number of steps is fixed, the work per step is a noisy step's) run
first in one process with ``--threads`` threads, then in ``--threads`` concurrent processes
with one thread each. ``speed_up``: steps per second of all the one-thread processes together
over those of the single process, measured in the same run (data loading and the final test
pass are inside both timings).

``--evaluate``: the same comparison for the utility evaluation (``evaluate.train_classifier``,
the official CNN, SGD batch 512, a test pass per epoch) on ``--eval-images`` real MNIST
training images for ``--eval-epochs`` epochs, each process with its own classifier seed: what
the queue's evaluation lanes rest on (``scripts/cpu_queue.sh`` evaluates a run's samples and
its budget snapshots in lanes of one thread).

``--dpgan``: the same for DP-GAN training (``methods.dpgan``, paper profile of each of
``--dpgan-configs``: ``--dpgan-steps`` discriminator steps, each with its generator step, after
one untimed warm-up step): whether the queue's DP-GAN cells gain from lanes too. ``--dcgan``:
the same for the non-private DC-GAN (``methods.dcgan``, ``--dpgan-configs`` default
``mnist-epsinf``; a step is one batch: a discriminator step and its generator steps, timed as
one epoch over ``--dpgan-steps`` batches of the training set).

    python benchmarks/bench_cpu_lanes.py [--record benchmarks/results/cpu-lanes-<machine>.json]
    python benchmarks/bench_cpu_lanes.py --evaluate [--record ...]
    python benchmarks/bench_cpu_lanes.py --dpgan [--record ...]
    python benchmarks/bench_cpu_lanes.py --dcgan [--record ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from dataclasses import replace

SETTINGS = [("gmdp", 1.0, 128), ("normtopk", 0.7, 128), ("gmdp", 1.0, 512),
            ("normtopk", 0.7, 512)]


def _worker(method: str, k: float, batch: int, steps: int, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    from datalens_lib.dpsgd.train import make_config, train_dpsgd

    cfg = make_config("mnist", float("inf"), method, k, "paper", steps=steps,
                      eval_every=10**6, batch_size=batch)
    t0 = time.perf_counter()
    train_dpsgd(cfg, seed=0, progress=False)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def _eval_worker(images: int, epochs: int, threads: int, seed: int) -> None:
    import torch

    torch.set_num_threads(threads)
    from datalens_lib.evaluate import evaluate_real

    t0 = time.perf_counter()
    evaluate_real("mnist", limit=images, epochs=epochs, seed=seed, progress=False)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def _dpgan_worker(method: str, config: str, steps: int, threads: int, seed: int) -> None:
    import warnings

    import torch

    torch.set_num_threads(threads)
    from datalens_lib.config import load_config
    from datalens_lib.methods import method_class

    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    if method == "dcgan":  # its harness step is an epoch: one epoch of `steps` batches
        cfg = load_config(config, "paper", method=method)
        m = method_class(method)(replace(cfg, train_limit=steps * cfg.batch_size), seed=seed,
                                 device="cpu", profile="paper")
        t0 = time.perf_counter()  # (first-call allocations included: one batch of `steps`)
        m.step()
        print(json.dumps({"seconds": time.perf_counter() - t0}))
        return
    m = method_class(method)(load_config(config, "paper", method=method), seed=seed,
                             device="cpu", profile="paper")
    m.step()  # (warm-up: first-call allocations)
    t0 = time.perf_counter()
    for _ in range(steps):
        m.step()
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def _timed(cmds: list[list[str]]) -> float:
    """Wall seconds of the workers ``cmds`` run at once, each timing itself: the slowest."""
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for cmd in cmds]
    secs = []
    for p, cmd in zip(ps, cmds, strict=True):
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"worker failed ({p.returncode}): {cmd}")
        secs.append(json.loads(out.strip().splitlines()[-1])["seconds"])
    return max(secs)


def _run(method: str, k: float, batch: int, steps: int, threads: int, procs: int) -> float:
    """Wall seconds until all ``procs`` processes of ``threads`` threads have finished
    (``method`` "evaluate": ``batch`` images, ``steps`` epochs, process i with seed i)."""
    if method == "evaluate":
        cmds = [[sys.executable, __file__, "--eval-worker", str(batch), str(steps),
                 str(threads), str(i)] for i in range(procs)]
    else:
        cmds = [[sys.executable, __file__, "--worker", method, str(k), str(batch), str(steps),
                 str(threads)]] * procs
    t0 = time.perf_counter()
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for cmd in cmds]
    for p in ps:
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"worker failed ({p.returncode}): {cmds[0]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--record", default=None)
    ap.add_argument("--evaluate", action="store_true",
                    help="compare the utility evaluation instead of DP-SGD training")
    ap.add_argument("--eval-images", type=int, default=20000)
    ap.add_argument("--eval-epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1,
                    help="alternate the two arrangements this many times (this host is noisy)")
    ap.add_argument("--dpgan", action="store_true",
                    help="compare DP-GAN training instead of DP-SGD training")
    ap.add_argument("--dcgan", action="store_true",
                    help="the same for DC-GAN (non-private; configs default mnist-epsinf)")
    ap.add_argument("--dpgan-configs", nargs="+", default=None,
                    help="default: mnist-eps1 mnist-eps1-large (--dpgan), mnist-epsinf (--dcgan)")
    ap.add_argument("--dpgan-steps", type=int, default=100)
    ap.add_argument("--worker", nargs=5, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--eval-worker", nargs=4, type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dpgan-worker", nargs=5, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.dpgan_worker:
        m, c, st, t, sd = a.dpgan_worker
        _dpgan_worker(m, c, int(st), int(t), int(sd))
        return
    if a.dpgan and a.dcgan:
        ap.error("--dpgan and --dcgan: one at a time")
    if a.dpgan or a.dcgan:
        gan = "dcgan" if a.dcgan else "dpgan"
        configs = a.dpgan_configs or (["mnist-epsinf"] if a.dcgan
                                      else ["mnist-eps1", "mnist-eps1-large"])
        rows = []
        for config in configs:
            for rep in range(a.repeats):
                def cmd(threads: int, seed: int, config: str = config) -> list[str]:
                    return [sys.executable, __file__, "--dpgan-worker", gan, config,
                            str(a.dpgan_steps), str(threads), str(seed)]

                one = _timed([cmd(a.threads, 0)])
                lanes = _timed([cmd(1, i) for i in range(a.threads)])
                row = {"method": gan, "config": config, "steps": a.dpgan_steps,
                       "repeat": rep, "one_process_s_per_step": one / a.dpgan_steps,
                       "lanes_s_per_step_each": lanes / a.dpgan_steps,
                       "speed_up": a.threads * one / lanes}
                rows.append(row)
                print(f"{gan} {config}: one process of {a.threads} threads "
                      f"{one / a.dpgan_steps * 1e3:.1f} ms/step; {a.threads} processes of 1 "
                      f"thread {lanes / a.dpgan_steps * 1e3:.1f} ms/step each: "
                      f"{row['speed_up']:.2f}x the steps per second", flush=True)
        _record(a, rows, gan)
        return
    if a.worker:
        m, k, b, s, t = a.worker
        _worker(m, float(k), int(b), int(s), int(t))
        return
    if a.eval_worker:
        _eval_worker(*a.eval_worker)
        return
    settings = [("evaluate", 0.0, a.eval_images)] if a.evaluate else SETTINGS
    steps = a.eval_epochs if a.evaluate else a.steps
    unit = "epoch" if a.evaluate else "step"
    rows = []
    for method, k, batch in settings:
        for rep in range(a.repeats):
            one = _run(method, k, batch, steps, a.threads, 1)
            lanes = _run(method, k, batch, steps, 1, a.threads)
            row = ({"method": method, "images": batch, "epochs": steps} if a.evaluate else
                   {"method": method, "k": k, "batch": batch, "steps": steps})
            row |= {"repeat": rep, f"one_process_s_per_{unit}": one / steps,
                    f"lanes_s_per_{unit}_each": lanes / steps,
                    "speed_up": (a.threads * steps / lanes) / (steps / one)}
            rows.append(row)
            what = (f"evaluate {batch} images" if a.evaluate
                    else f"{method:8s} k={k:g} B={batch:3d}")
            print(f"{what}: one process of {a.threads} threads {one / steps:.3f} s/{unit}; "
                  f"{a.threads} processes of 1 thread {lanes / steps:.3f} s/{unit} each: "
                  f"{row['speed_up']:.2f}x the {unit}s per second", flush=True)
    _record(a, rows, "evaluate" if a.evaluate else "dpsgd")


def _record(a: argparse.Namespace, rows: list[dict], what: str) -> None:
    if a.record:
        from datalens_lib.provenance import atomic_write_json, provenance

        atomic_write_json(a.record, {"benchmark": "bench_cpu_lanes", "threads": a.threads,
                                     "what": what,
                                     "date": datetime.datetime.now(datetime.UTC).isoformat(),
                                     "rows": rows, **provenance()})


if __name__ == "__main__":
    main()
