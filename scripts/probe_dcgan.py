"""The DC-GAN discriminator probe (``methods.dcgan.discriminator_probe``) as a record: trains
a config's first EPOCHS epochs once per setting, measuring D's logits, the variety of the
fakes within a class and (``--agreement``) the domain classifier's label agreement on fixed
fakes after every epoch, then trains the final D and a fresh D alone against the final G; writes
the series with their provenance to OUT (temp file, then rename).

    python scripts/probe_dcgan.py --config fashion-mnist-epsinf --profile cpu --epochs 3 \\
        --train-limit 16000 --agreement \\
        --out data/results/dcgan/fashion-mnist-epsinf/cpu/probe-discriminator.json

The settings (``--settings``, default all three): carpedm20's (two generator steps per D step,
separate real and fake batches: the committed cells), the same with one joint batch for D,
and one generator step per D step (the queued ``cpu-g1`` cells). ``--train-limit`` trains on
the first N training images (an epoch is N / 64 batches; 0: all of them): a diagnosis, not a
result. The example is the committed record's command. One torch thread by default
(``--threads``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from datalens_lib.config import load_config
from datalens_lib.methods.dcgan import DCGAN, discriminator_probe
from datalens_lib.provenance import atomic_write_json, provenance
from datalens_lib.quality.classifier import agreement_score

SETTINGS = {
    "g_steps=2": {"g_steps": 2},
    "g_steps=2,joint_d_batch": {"g_steps": 2, "joint_d_batch": True},
    "g_steps=1": {"g_steps": 1},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="fashion-mnist-epsinf")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-limit", type=int, default=16000)
    ap.add_argument("--alone-batches", type=int, default=150)
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--agreement", action="store_true",
                    help="score the probe's fakes with the domain classifier")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    series = {}
    t0 = time.time()
    score, classifier = None, None
    for name in a.settings:
        cfg = load_config(a.config, a.profile, method="dcgan",
                          train_limit=a.train_limit or None, **SETTINGS[name])
        m = DCGAN(cfg, seed=a.seed, device="cpu", profile=a.profile)
        if a.agreement and score is None:
            score, classifier = agreement_score(cfg.dataset)
        out = discriminator_probe(m, a.epochs, alone_batches=a.alone_batches, score=score,
                                  progress=True)
        series[name] = {"config": cfg.to_dict(), **out}
        print(name, out["rows"][-1], out["alone"], flush=True)
    atomic_write_json(a.out, {
        "what": "DC-GAN discriminator probe (methods.dcgan.discriminator_probe)",
        "method": "dcgan", "config": a.config, "profile": a.profile, "seed": a.seed,
        "epochs": a.epochs, "train_limit": a.train_limit, "threads": a.threads,
        "classifier_sha256": classifier, "series": series,
        "seconds": time.time() - t0, "provenance": provenance()})


if __name__ == "__main__":
    main()
