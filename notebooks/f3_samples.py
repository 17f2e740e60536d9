# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # F3 — Generated images per class (`fig:vis`)
#
# **Claim (paper Figure `fig:vis`).** DataLens's samples are recognisable digits and clothes at
# ε = 1 and ε = 10.
#
# **What we show.** Ten samples per class from the largest-profile run whose images are on
# this machine (the committed paper-profile records do not include their 100k images; run
# `datalens train --profile paper` to regenerate them).

# %% tags=["parameters"]
profile = "smoke"
seed = 0
configs = ["mnist-eps1", "fashion-mnist-eps1", "mnist-eps10", "fashion-mnist-eps10"]
per_class = 10
device = "auto"

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from datalens_lib import book, store

shown = []
for name in configs:
    cands = [book.run_datalens(name, profile, seed=seed, device=device, evaluate=False)]
    cands += [r for r in book.committed_runs() if r.get("config") == name]
    have = [r for r in cands if (Path(r["run_dir"]) / "samples.npz").exists()]
    run = book.best_of(*have)
    with np.load(Path(run["run_dir"]) / "samples.npz") as f:
        x, y = f["x"].astype(np.float32), f["y"]
    classes = int(y.max()) + 1
    fig, axes = plt.subplots(classes, per_class, figsize=(per_class * 0.6, classes * 0.6))
    for c in range(classes):
        idx = np.flatnonzero(y == c)[:per_class]
        for j in range(per_class):
            ax = axes[c][j]
            ax.axis("off")
            if j < len(idx):
                img = x[idx[j]].transpose(1, 2, 0).squeeze()
                ax.imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=1)
    fig.suptitle(f"{name} ({run['profile']} profile, {run['steps']} steps)", fontsize=9)
    plt.show()
    shown.append({"config": name, "profile": run["profile"], "run_dir": run["run_dir"],
                  "mean_pixel": float(x.mean())})
store.save_result("fig:vis", {"profile": profile, "seed": seed, "configs": configs}, shown,
                  profile=profile, seed=seed)
display(Markdown(" ".join(
    f"`{s['config']}` images come from the {s['profile']} profile." for s in shown)
    + " Smoke-profile images come from 3 generator steps of a 10-teacher model and are not "
      "expected to look like digits."))
