"""Benchmark TopAgg on the paper's shapes: Q = 15 queries, N = 4000 teachers, d = 784 / 12288.

Prints wall-clock seconds per call and the ratio of the sparse scatter_add path used by
`datalens_lib.aggregation` to a dense-mask implementation, both measured in this run.

    python benchmarks/bench_topagg.py [--repeats 3] [--teachers 4000]
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from datalens_lib.aggregation import topagg, topk_sto_sign


def dense_mask_votes(grads, k, c, generator):
    """Reference: materialise the dense [Q, N, d] compressed votes, then sum."""
    return topk_sto_sign(grads, k, c, generator).sum(1)


def timeit(fn, repeats):
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--teachers", type=int, default=4000)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"{platform.processor() or platform.machine()}")
    for d, k in ((784, 200), (12288, 700)):
        q, n = 15, args.teachers
        grads = torch.randn(q, n, d, generator=torch.Generator().manual_seed(0)) * 1e-5
        gen = torch.Generator().manual_seed(1)
        sparse = timeit(lambda g=grads, k=k, r=gen: topagg(g, k, 5000.0, 0.7, 1e-5, r),
                        args.repeats)
        dense = timeit(lambda g=grads, k=k, r=gen: dense_mask_votes(g, k, 1e-5, r), args.repeats)
        print(f"[Q={q}, N={n}, d={d}, k={k}]  topagg (topk + scatter_add): {sparse:.3f} s   "
              f"dense mask: {dense:.3f} s   speed-up x{dense / sparse:.2f}")


if __name__ == "__main__":
    main()
