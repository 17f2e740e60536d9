"""Benchmark one DataLens generator step of the teacher ensemble (MNIST shapes, B = 15).

For N in --teachers: the vectorised ``TeacherEnsemble`` (2 Adam steps of every teacher + the
query gradients) against a per-teacher loop of ordinary ``nn.Module`` discriminators with
``torch.optim.Adam``, measured in the same process; prints seconds per step, ms per teacher and
the speed-up ratio. ``--peak-n 4000`` then builds the paper-size ensemble (bfloat16 Adam
moments on CPU) in a fresh process, times one full step of it and reports its peak RSS.

``--profile-n 200 1000`` adds a ``torch.profiler`` table of one step at those N, grouped into
grouped convolutions, batched GEMMs (the fully connected layers), the Adam update, copies and
the rest (BatchNorm, activations, losses). The FLOPs of one step per teacher are counted from
the layer shapes (``flops_per_teacher``), and the machine's limits are measured in the same
run: a 4096^2 float32 and bfloat16 GEMM and a 1 GiB copy (memory bandwidth).

    python benchmarks/bench_ensemble.py [--device cpu|cuda] [--teachers 50 200 1000] \
        [--moments float32|bfloat16] [--compute float32|bfloat16] [--chunk 12] \
        [--peak-n 4000] [--profile-n 200 1000] \
        [--record benchmarks/results/ensemble-<machine>.json]

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

from datalens_lib.datalens import set_cuda_precision  # noqa: E402
from datalens_lib.ensemble import TeacherEnsemble, conv_layout  # noqa: E402
from datalens_lib.models import DF_DIM, DFC_DIM, KERNEL, Discriminator  # noqa: E402
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
    """One generator step's teacher work: 2 Adam steps of every chunk, then the queries."""
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


def _batch(n: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (torch.rand(n, B, *SHAPE, device=device), torch.rand(n, B, *SHAPE, device=device),
            torch.randint(0, Y, (n, B), device=device), torch.rand(B, *SHAPE, device=device),
            torch.randint(0, Y, (B,), device=device))


def timed_step(ens: TeacherEnsemble, data: tuple, step: int, device: torch.device) -> float:
    sync(device)
    t = time.perf_counter()
    vectorised_step(ens, *data, step)
    sync(device)
    return time.perf_counter() - t


def measure_peak(n_teachers: int, chunk: int, device: torch.device,
                 compute: torch.dtype | None = None) -> dict:
    """Build the paper-size ensemble, time one full step (after a warm-up step) and report the
    peak RSS. Run in a fresh process (see ``main``): peak RSS is a process's lifetime maximum,
    and freeing the paper-size ensemble in the timing process leaves its allocator slower."""
    if device.type == "cuda":
        set_cuda_precision()  # a spawned process starts with PyTorch's defaults
    moments = torch.bfloat16 if device.type == "cpu" else None
    ens = TeacherEnsemble(n_teachers, Y, SHAPE, chunk=chunk, device=device, moment_dtype=moments,
                          compute_dtype=compute)
    data = _batch(n_teachers, device)
    timed_step(ens, data, 0, device)
    seconds = timed_step(ens, data, 1, device)
    peak = {"teachers": n_teachers, "parameters_per_teacher": ens.num_parameters,
            "moment_dtype": str(ens.adam.moment_dtype).removeprefix("torch."),
            "compute_dtype": str(ens.compute_dtype).removeprefix("torch."),
            "peak_rss_gib": peak_rss_gib(), "vectorised_s_per_step": seconds,
            "ms_per_teacher": 1000 * seconds / n_teachers}
    if device.type == "cuda":
        peak["cuda_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(f"N={n_teachers}: {ens.num_parameters} parameters per teacher, Adam moments "
          f"{peak['moment_dtype']}; {seconds:.2f} s/step ({peak['ms_per_teacher']:.2f} "
          f"ms/teacher); peak RSS {peak['peak_rss_gib']:.2f} GiB"
          + (f", CUDA peak {peak['cuda_peak_gib']:.2f} GiB" if device.type == "cuda" else ""),
          flush=True)
    return peak


_CATEGORIES = (  # (category, substrings of profiler op or kernel names), first match wins
    ("grouped convolutions", ("convolution", "conv", "dgrad", "fprop", "wgrad")),
    ("batched GEMMs (linear layers)", ("bmm", "baddbmm", "aten::mm", "addmm", "gemm")),
    ("Adam update", ("compiled", "_fused_adam", "fusedadam", "triton_")),
    ("copies and casts", ("copy_", "_to_copy", "clone", "contiguous", "tensortransform",
                          "memcpy")),
)


def profile_step(ens: TeacherEnsemble, data: tuple, device: torch.device) -> dict:
    """Self time of one step's ops, grouped into ``_CATEGORIES`` (+ "other")."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        vectorised_step(ens, *data, 5)
        sync(device)
    # on CUDA only the device's own events (kernels, copies) count: an aten op's device time
    # repeats its kernels', and the profiler's own buffer events are host time
    cuda = device.type == "cuda"
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    shares: dict[str, float] = {}
    top = []
    for ev in prof.key_averages():
        if cuda and ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        t = getattr(ev, attr) / 1e6
        name = ev.key.lower()
        cat = next((c for c, keys in _CATEGORIES if any(k in name for k in keys)), "other")
        if ev.key.startswith("## Call") or ev.key.startswith("Torch-Compiled"):
            cat = "Adam update"
        shares[cat] = shares.get(cat, 0.0) + t
        top.append((t, ev.key))
    total = sum(shares.values())
    top = [{"op": k, "seconds": t} for t, k in sorted(top, reverse=True)[:8]]
    return {"total_self_s": total, "seconds": shares,
            "share": {k: v / total for k, v in shares.items()}, "top_ops": top}


def flops_per_teacher() -> float:
    """FLOPs of one step per teacher (2 teacher Adam steps on 2B images, then B queries),
    counted from the layer shapes: multiply-adds x 2 of the 5x5/2 convolutions and the
    2058 -> 256 layer, forward and backward (weight and input gradients where autograd needs
    them: no input gradient of the first layer in a teacher step, no weight gradients in a
    query). The label channels (a per-class bias here) and the 256 -> 1 layer are < 1 %.
    (``torch.utils.flop_counter`` counts the input gradient of a strided convolution as if the
    stride were 1, so it is not used.)"""
    c, h, w = SHAPE
    c1, c2 = c + Y, DF_DIM + Y
    flat = c2 * (h // 4) * (w // 4)

    def layers(batch: int) -> tuple[float, float, float]:
        conv0 = 2 * batch * (h // 2) * (w // 2) * c1 * c * KERNEL**2
        conv1 = 2 * batch * (h // 4) * (w // 4) * c2 * c1 * KERNEL**2
        lin = 2 * batch * flat * DFC_DIM
        return conv0, conv1, lin

    conv0, conv1, lin = layers(2 * B)
    teacher_step = 2 * conv0 + 3 * conv1 + 3 * lin  # forward + weight grads + input grads
    query = 2 * sum(layers(B))  # forward + input gradients
    return 2 * teacher_step + query


def machine_limits(device: torch.device) -> dict:
    """Sustained GEMM rate (4096^2, float32 and bfloat16) and copy bandwidth (1 GiB)."""
    out = {}
    for dt in (torch.float32, torch.bfloat16):
        a = torch.randn(4096, 4096, device=device).to(dt)
        a @ a
        sync(device)
        t = time.perf_counter()
        for _ in range(3):
            a @ a
        sync(device)
        out[f"gemm_{str(dt).removeprefix('torch.')}_gflops"] = (
            3 * 2 * 4096**3 / (time.perf_counter() - t) / 1e9)
    x = torch.empty(2**28, device=device)
    y = torch.empty_like(x)
    y.copy_(x)
    sync(device)
    t = time.perf_counter()
    y.copy_(x)
    sync(device)
    out["copy_gb_per_s"] = 2 * x.numel() * 4 / (time.perf_counter() - t) / 1e9  # read + write
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--teachers", type=int, nargs="+", default=[50, 200, 1000])
    ap.add_argument("--chunk", type=int, default=12)
    ap.add_argument("--moments", default="float32", choices=["float32", "bfloat16"],
                    help="Adam moment dtype of the timed ensembles (the loop's is float32)")
    ap.add_argument("--compute", default="float32", choices=["float32", "bfloat16"],
                    help="compute dtype of the timed ensembles (bfloat16: the opt-in)")
    ap.add_argument("--loop-max", type=int, default=200, help="largest N timed with the loop")
    ap.add_argument("--peak-n", type=int, default=0, help="N for the peak-RSS measurement")
    ap.add_argument("--profile-n", type=int, nargs="*", default=[],
                    help="N (among --teachers) to profile one step of")
    ap.add_argument("--conv-layout", choices=["channels_last", "contiguous"], default=None,
                    help="memory format of the grouped convolutions (DATALENS_CONV_LAYOUT; "
                    "default: the device's, ensemble.conv_layout)")
    ap.add_argument("--record", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()
    if args.conv_layout:  # the environment: the --peak-n process (spawned) inherits it
        os.environ["DATALENS_CONV_LAYOUT"] = args.conv_layout
    if args.chunk < 1 or min(args.teachers) < 1 or args.peak_n < 0:
        ap.error("--chunk and --teachers must be positive, --peak-n non-negative")
    if not set(args.profile_n) <= set(args.teachers):
        ap.error("--profile-n must be a subset of --teachers")
    rows: list[dict] = []
    device = torch.device(args.device)
    if device.type == "cuda":
        set_cuda_precision()  # as training does: TF32 only with DATALENS_TF32=1
    moments = torch.bfloat16 if args.moments == "bfloat16" else None
    compute = torch.bfloat16 if args.compute == "bfloat16" else None
    name = (torch.cuda.get_device_name(0) if device.type == "cuda"
            else platform.processor() or hardware()["cpu"])
    print(f"device {device} ({name}), torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, THP_MEM_ALLOC_ENABLE={os.environ['THP_MEM_ALLOC_ENABLE']}")
    limits = machine_limits(device)
    flops = flops_per_teacher()
    print(f"machine: float32 GEMM {limits['gemm_float32_gflops']:.0f} GFLOP/s, bfloat16 GEMM "
          f"{limits['gemm_bfloat16_gflops']:.0f} GFLOP/s, copy {limits['copy_gb_per_s']:.1f} "
          f"GB/s; one step = {flops / 1e6:.0f} MFLOP per teacher", flush=True)
    for n in args.teachers:
        ens = TeacherEnsemble(n, Y, SHAPE, chunk=min(args.chunk, n), device=device,
                              moment_dtype=moments, compute_dtype=compute)
        data = _batch(n, device)
        timed_step(ens, data, 0, device)  # warm-up (and compilation)
        tv = min(timed_step(ens, data, s, device) for s in (1, 2))
        row = {"teachers": n, "vectorised_s_per_step": tv, "ms_per_teacher": 1000 * tv / n,
               "gflops": flops * n / tv / 1e9}
        line = (f"N={n:5d}  vectorised {tv:7.2f} s/step ({1000 * tv / n:6.2f} ms/teacher, "
                f"{row['gflops']:.0f} GFLOP/s)")
        if n <= args.loop_max:
            mods = [Discriminator(Y, SHAPE).to(device) for _ in range(n)]
            opts = [torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.5, 0.999)) for m in mods]
            loop_step(mods[:2], opts[:2], *data)
            sync(device)
            t = time.perf_counter()
            loop_step(mods, opts, *data)
            sync(device)
            tl = time.perf_counter() - t
            line += f"   loop {tl:7.2f} s/step ({1000 * tl / n:6.2f} ms/teacher)   " \
                    f"speed-up x{tl / tv:.2f}"
            row.update(loop_s_per_step=tl, speed_up=tl / tv)
        print(line, flush=True)
        if n in args.profile_n:
            row["profile"] = prof = profile_step(ens, data, device)
            print("  profile: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in
                                            sorted(prof["share"].items(), key=lambda kv: -kv[1])),
                  flush=True)
        rows.append(row)
        ens = mods = opts = data = None  # free this N before building the next
        gc.collect()
    peak = None
    if args.peak_n:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            peak = pool.submit(measure_peak, args.peak_n, args.chunk, device,
                               compute).result()
    if args.record:
        atomic_write_json(args.record, {
            "benchmark": "bench_ensemble", "date": datetime.datetime.now(datetime.UTC).isoformat(),
            "device": str(device), "device_name": name, "batch": B, "chunk": args.chunk,
            "moments": args.moments, "compute": args.compute,
            "conv_layout": conv_layout(device),
            "threads": torch.get_num_threads(),
            "flops_per_teacher_step": flops, "machine": limits, "steps": rows, "peak": peak,
            **provenance()})
        print(f"wrote {args.record}")


if __name__ == "__main__":
    main()
