"""Benchmark one DataLens generator step of the teacher ensemble (MNIST shapes, B = 15).

For N in --teachers: the vectorised ``TeacherEnsemble`` (2 Adam steps of every teacher + the
query gradients) against a per-teacher loop of ordinary ``nn.Module`` discriminators with
``torch.optim.Adam``, measured in the same process; prints seconds per step, ms per teacher and
the speed-up ratio. ``--peak-n 4000`` then builds the paper-size ensemble (bfloat16 Adam
moments on CPU) and reports its peak RSS after one teacher step.

    python benchmarks/bench_ensemble.py [--device cpu|cuda] [--teachers 50 200 1000] \
        [--peak-n 4000] [--record benchmarks/results/ensemble-<machine>.json]

``--record`` also writes the figures with their provenance (git sha, package versions,
hardware, date) as JSON; the committed records are in ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import multiprocessing
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from datalens_lib.ensemble import TeacherEnsemble  # noqa: E402
from datalens_lib.models import Discriminator  # noqa: E402
from datalens_lib.provenance import (  # noqa: E402
    atomic_write_json,
    hardware,
    peak_rss_gib,
    provenance,
)

B, SHAPE, Y = 15, (1, 28, 28), 10


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def vectorised_step(ens, x_real, x_fake, y, xq, yq, step):
    for sl in ens.slices():
        for j in range(2):
            ens.train_step(sl, x_real[sl], x_fake[sl], y[sl], 2 * step + j + 1)
    return [ens.query_gradients(sl, xq, yq) for sl in ens.slices()]


def loop_step(mods, opts, x_real, x_fake, y, xq, yq):
    out = []
    for t, (m, opt) in enumerate(zip(mods, opts, strict=True)):
        oh = F.one_hot(y[t], Y).float()
        for _ in range(2):
            loss = F.softplus(-m(x_real[t], oh)).mean() + F.softplus(m(x_fake[t], oh)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        x = xq.clone().requires_grad_()
        (g,) = torch.autograd.grad(F.softplus(-m(x, F.one_hot(yq, Y).float())).mean(), x)
        out.append(-g.flatten(1))
    return out


def measure_peak(n_teachers: int, chunk: int, device: torch.device) -> dict:
    """Build the paper-size ensemble and take one teacher step. Run in a fresh process (see
    ``main``): peak RSS is a process's lifetime maximum, and freeing the paper-size ensemble
    in the timing process leaves its allocator slower (measured: ~30 vs ~21 ms/teacher)."""
    moments = torch.bfloat16 if device.type == "cpu" else None
    ens = TeacherEnsemble(n_teachers, Y, SHAPE, chunk=chunk, device=device, moment_dtype=moments)
    sl = next(ens.slices())
    n = sl.stop - sl.start
    ens.train_step(sl, torch.rand(n, B, *SHAPE, device=device),
                   torch.rand(n, B, *SHAPE, device=device),
                   torch.randint(0, Y, (n, B), device=device), 1)
    peak = {"teachers": n_teachers, "parameters_per_teacher": ens.num_parameters,
            "moment_dtype": str(ens.adam.moment_dtype).removeprefix("torch."),
            "peak_rss_gib": peak_rss_gib()}
    if device.type == "cuda":
        peak["cuda_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(f"N={n_teachers}: {ens.num_parameters} parameters per teacher, Adam moments "
          f"{peak['moment_dtype']}; peak RSS {peak['peak_rss_gib']:.2f} GiB"
          + (f", CUDA peak {peak['cuda_peak_gib']:.2f} GiB" if device.type == "cuda" else ""),
          flush=True)
    return peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--teachers", type=int, nargs="+", default=[50, 200, 1000])
    ap.add_argument("--chunk", type=int, default=50)
    ap.add_argument("--loop-max", type=int, default=200, help="largest N timed with the loop")
    ap.add_argument("--peak-n", type=int, default=0, help="N for the peak-RSS measurement")
    ap.add_argument("--record", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()
    if args.chunk < 1 or min(args.teachers) < 1 or args.peak_n < 0:
        ap.error("--chunk and --teachers must be positive, --peak-n non-negative")
    rows: list[dict] = []
    device = torch.device(args.device)
    name = (torch.cuda.get_device_name(0) if device.type == "cuda"
            else platform.processor() or hardware()["cpu"])
    print(f"device {device} ({name}), torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, THP_MEM_ALLOC_ENABLE={os.environ['THP_MEM_ALLOC_ENABLE']}")
    for n in args.teachers:
        ens = TeacherEnsemble(n, Y, SHAPE, chunk=min(args.chunk, n), device=device)
        x_real = torch.rand(n, B, *SHAPE, device=device)
        x_fake = torch.rand(n, B, *SHAPE, device=device)
        y = torch.randint(0, Y, (n, B), device=device)
        xq, yq = torch.rand(B, *SHAPE, device=device), torch.randint(0, Y, (B,), device=device)
        vectorised_step(ens, x_real, x_fake, y, xq, yq, 0)  # warm-up
        sync(device)
        t = time.perf_counter()
        vectorised_step(ens, x_real, x_fake, y, xq, yq, 1)
        sync(device)
        tv = time.perf_counter() - t
        row = {"teachers": n, "vectorised_s_per_step": tv}
        line = f"N={n:5d}  vectorised {tv:7.2f} s/step ({1000 * tv / n:6.2f} ms/teacher)"
        if n <= args.loop_max:
            mods = [Discriminator(Y, SHAPE).to(device) for _ in range(n)]
            opts = [torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.5, 0.999)) for m in mods]
            loop_step(mods[:2], opts[:2], x_real, x_fake, y, xq, yq)
            sync(device)
            t = time.perf_counter()
            loop_step(mods, opts, x_real, x_fake, y, xq, yq)
            sync(device)
            tl = time.perf_counter() - t
            line += f"   loop {tl:7.2f} s/step ({1000 * tl / n:6.2f} ms/teacher)   " \
                    f"speed-up x{tl / tv:.2f}"
            row.update(loop_s_per_step=tl, speed_up=tl / tv)
        rows.append(row)
        print(line, flush=True)
        ens = mods = opts = None  # free this N before building the next
        gc.collect()
    peak = None
    if args.peak_n:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            peak = pool.submit(measure_peak, args.peak_n, args.chunk, device).result()
    if args.record:
        atomic_write_json(args.record, {
            "benchmark": "bench_ensemble", "date": datetime.datetime.now(datetime.UTC).isoformat(),
            "device": str(device), "device_name": name, "batch": B, "chunk": args.chunk,
            "threads": torch.get_num_threads(), "steps": rows, "peak": peak, **provenance()})
        print(f"wrote {args.record}")


if __name__ == "__main__":
    main()
