"""The DP-GAN discriminator probe (``methods.dpgan.discriminator_probe``) as a record: trains a
config's first STEPS discriminator steps once per ``clip_fake`` setting (both by default),
measuring D every EVERY steps, and writes the series with their provenance to OUT (temp file,
then rename). ``--agreement`` also scores the probe's fixed fakes with the dataset's domain
classifier (``quality.classifier``): the share recognised as their conditioning label
(``label_agreement``, chance 0.1) and the classifier's mean top probability, i.e. whether G
learns, which D's logits alone do not say.

    python scripts/probe_dpgan.py --config mnist-eps10 --profile cpu --steps 500 --every 100 \\
        --out data/results/dpgan/mnist-eps10/cpu/probe-discriminator.json
    python scripts/probe_dpgan.py --config mnist-eps10 --profile cpu --steps 3000 --every 250 \\
        --agreement --threads 2 \\
        --out data/results/dpgan/mnist-eps10/cpu/probe-discriminator-3000.json

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
from datalens_lib.quality.classifier import agreement_score


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="mnist-eps10")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clip-fake", choices=["both", "false", "true"], default="both")
    ap.add_argument("--agreement", action="store_true",
                    help="score the probe's fakes with the domain classifier")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    series = {}
    t0 = time.time()
    settings = {"both": (False, True), "false": (False,), "true": (True,)}[a.clip_fake]
    score, classifier = None, None
    for clip_fake in settings:
        cfg = load_config(a.config, a.profile, method="dpgan", clip_fake=clip_fake)
        m = DPGAN(cfg, seed=a.seed, device="cpu", profile=a.profile)
        if a.agreement and score is None:
            score, classifier = agreement_score(cfg.dataset)
        rows = discriminator_probe(m, a.steps, a.every, score=score, progress=True)
        series[f"clip_fake={str(clip_fake).lower()}"] = {
            "config": cfg.to_dict(), "sigma": m.sigma, "rows": rows}
        print(rows[-1], flush=True)
    atomic_write_json(a.out, {
        "what": "DP-GAN discriminator probe (methods.dpgan.discriminator_probe)",
        "method": "dpgan", "config": a.config, "profile": a.profile, "seed": a.seed,
        "steps": a.steps, "every": a.every, "threads": a.threads,
        "classifier_sha256": classifier, "series": series,
        "seconds": time.time() - t0, "provenance": provenance()})


if __name__ == "__main__":
    main()
