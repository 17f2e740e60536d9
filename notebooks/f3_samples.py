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
# **What we show.** Ten samples per class from the *published* 10,000-image subset of the
# committed paper-scale run of each configuration (`data/results/datalens/<config>/<folder>/
# samples-10k.npz`, written by `datalens publish-samples`; float32 compute preferred over
# bfloat16). Where no paper-scale subset is committed yet, the notebook falls back to the run
# it trains at the chosen profile and labels the grid a **pipeline check**: smoke images come
# from 3 generator steps of a 10-teacher model and are not expected to look like digits.

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
from datalens_lib.quality import report
from datalens_lib.samples import load_samples

published = {}
for p in report.published_runs():
    if p["method"] == "DataLens":
        published.setdefault(p["config"], []).append(p)
shown = []
for name in configs:
    cands = sorted(published.get(name, []),
                   key=lambda p: (p["profile"] != "paper", p["folder"] != "paper",
                                  "bf16" in p["folder"], p["folder"]))
    if cands:
        src = cands[0]
        path, label = src["path"], f"{src['folder']} (paper scale, published subset)"
        kind = "paper"
    else:
        run = book.run_datalens(name, profile, seed=seed, device=device, evaluate=False)
        path = Path(run["run_dir"]) / "samples.npz"
        label, kind = f"{profile} profile, {run['steps']} steps: pipeline check", profile
    x, y = load_samples(path)
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
    fig.suptitle(f"{name}: {label}", fontsize=9)
    plt.show()
    shown.append({"config": name, "profile": kind, "source": str(path),
                  "mean_pixel": float(x.mean())})
store.save_result("fig:vis", {"profile": profile, "seed": seed, "configs": configs}, shown,
                  profile=profile, seed=seed)
checks = [s["config"] for s in shown if s["profile"] != "paper"]
display(Markdown(
    f"{len(shown) - len(checks)} of {len(shown)} grids come from committed paper-scale runs."
    + (f" Pipeline checks (no paper-scale subset committed yet): {', '.join(checks)}."
       if checks else "")))
