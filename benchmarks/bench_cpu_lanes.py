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

    python benchmarks/bench_cpu_lanes.py [--record benchmarks/results/cpu-lanes-<machine>.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time

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


def _run(method: str, k: float, batch: int, steps: int, threads: int, procs: int) -> float:
    """Wall seconds until all ``procs`` processes of ``threads`` threads have finished."""
    cmd = [sys.executable, __file__, "--worker", method, str(k), str(batch), str(steps),
           str(threads)]
    t0 = time.perf_counter()
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    for p in ps:
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"worker failed ({p.returncode}): {cmd}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--record", default=None)
    ap.add_argument("--worker", nargs=5, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        m, k, b, s, t = a.worker
        _worker(m, float(k), int(b), int(s), int(t))
        return
    rows = []
    for method, k, batch in SETTINGS:
        one = _run(method, k, batch, a.steps, a.threads, 1)
        lanes = _run(method, k, batch, a.steps, 1, a.threads)
        row = {"method": method, "k": k, "batch": batch, "steps": a.steps,
               "one_process_s_per_step": one / a.steps,
               "lanes_s_per_step_each": lanes / a.steps,
               "speed_up": (a.threads * a.steps / lanes) / (a.steps / one)}
        rows.append(row)
        print(f"{method:8s} k={k:g} B={batch:3d}: one process of {a.threads} threads "
              f"{row['one_process_s_per_step'] * 1e3:.1f} ms/step; {a.threads} processes of 1 "
              f"thread {row['lanes_s_per_step_each'] * 1e3:.1f} ms/step each: "
              f"{row['speed_up']:.2f}x the steps per second", flush=True)
    if a.record:
        from datalens_lib.provenance import atomic_write_json, provenance

        atomic_write_json(a.record, {"benchmark": "bench_cpu_lanes", "threads": a.threads,
                                     "date": datetime.datetime.now(datetime.UTC).isoformat(),
                                     "rows": rows, **provenance()})


if __name__ == "__main__":
    main()
