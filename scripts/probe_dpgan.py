"""The DP-GAN discriminator probe (``methods.dpgan.discriminator_probe``) as a record: trains a
config's first STEPS discriminator steps once per ``clip_fake`` setting, measuring D every EVERY
steps, and writes both series with their provenance to OUT (temp file, then rename).

    python scripts/probe_dpgan.py --config mnist-eps10 --profile cpu --steps 500 --every 100 \\
        --out data/results/dpgan/mnist-eps10/cpu/probe-discriminator.json

Seed 0 with the profile's settings is the committed run's own trajectory (``clip_fake``
false) for those steps. One torch thread by default (``--threads``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from datalens_lib.config import load_config
from datalens_lib.methods.dpgan import DPGAN, discriminator_probe
from datalens_lib.provenance import atomic_write_json, provenance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="mnist-eps10")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    series = {}
    t0 = time.time()
    for clip_fake in (False, True):
        cfg = load_config(a.config, a.profile, method="dpgan", clip_fake=clip_fake)
        m = DPGAN(cfg, seed=a.seed, device="cpu", profile=a.profile)
        rows = discriminator_probe(m, a.steps, a.every)
        series[f"clip_fake={str(clip_fake).lower()}"] = {
            "config": cfg.to_dict(), "sigma": m.sigma, "rows": rows}
        print(rows[-1], flush=True)
    atomic_write_json(a.out, {
        "what": "DP-GAN discriminator probe (methods.dpgan.discriminator_probe)",
        "method": "dpgan", "config": a.config, "profile": a.profile, "seed": a.seed,
        "steps": a.steps, "every": a.every, "threads": a.threads, "series": series,
        "seconds": time.time() - t0, "provenance": provenance()})


if __name__ == "__main__":
    main()
