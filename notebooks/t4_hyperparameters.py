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
# # T4 — Hyper-parameters (`tab:hyperparam`)
#
# **Claim (paper Table `tab:hyperparam`).** At ε = 1 the utility has a best value inside the
# paper's grid for the top-k size k, grows with the number of teachers, and is best at a high
# threshold β (which value of each is best per dataset is read from the paper's table,
# `data/paper/tab_hyperparam.csv`, and printed at the end of this notebook beside ours).
#
# **What we run.** The ε = 1 configuration, changing one hyper-parameter at a time over the
# paper's grid. At the `smoke` profile the grid is scaled to the tiny model (k divided by 20,
# the number of teachers by 400, 30 images per teacher) — those cells exercise the pipeline
# only.

# %% tags=["parameters"]
profile = "smoke"
seed = 0
datasets = ["mnist", "fashion-mnist"]
grid = {"k": [100, 200, 300], "teachers": [2000, 3000, 4000],
        "beta": [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]}
device = "auto"

# %%

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from datalens_lib import book, store
from datalens_lib.config import load_config


def overrides(name, value):
    if profile == "smoke" and name == "k":
        return {"k": max(1, int(value) // 20)}
    if profile == "smoke" and name == "teachers":
        n = max(1, int(value) // 400)
        return {"teachers": n, "train_limit": 30 * n, "chunk": n}
    return {name: value}


rows = []
with store.Timer() as timer:
    for ds in datasets:
        config = f"{ds}-eps1"
        for name, values in grid.items():
            for v in values:
                over = overrides(name, v)
                mine = book.run_datalens(config, profile, seed=seed, overrides=over,
                                         device=device)
                shown = book.best_of(mine, book.committed_match(config, {name: v}, cpu_family=True))
                prof, fam = book.shown_profile(shown)  # a paper-setting run is paper scale
                rows.append({"dataset": ds, "hyperparameter": name, "value": v,
                             "parameter": f"{name}={v:g}",  # as the paper CSV writes it
                             "profile": prof, "family": fam,
                             "run": book.run_folder(shown),
                             "eval_epochs": shown.get("eval_epochs"), "ours": shown["acc_paper"],
                             "ours_clean": shown["acc_clean"], "steps": shown["steps"]})
paper = book.paper_table("tab_hyperparam.csv")[["dataset", "parameter", "value"]]
table = pd.DataFrame(rows).merge(paper.rename(columns={"value": "paper"}),
                                 on=["dataset", "parameter"], how="left")
table = book.with_difference(table)  # paper-profile cells only
store.save_result("tab:hyperparam", {"profile": profile, "seed": seed, "datasets": datasets,
                                     "grid": grid}, table.to_dict("records"), profile=profile,
                  seed=seed, duration_s=timer.seconds)
table

# %%
fig, axes = plt.subplots(len(datasets), len(grid), figsize=(4 * len(grid), 2.8 * len(datasets)),
                         squeeze=False)
for i, ds in enumerate(datasets):
    for j, name in enumerate(grid):
        t = table[(table.dataset == ds) & (table.hyperparameter == name)]
        ax = axes[i][j]
        ax.plot(t["value"], t["paper"], "o-", label="paper")
        ax.plot(t["value"], t["ours"], "s-",
                label=f"ours ({', '.join(sorted(set(t['profile'].dropna())))} profile)")
        ax.set_title(f"{ds}: {name}")
        ax.legend(fontsize=7)
plt.tight_layout()
plt.show()

# %%
display(Markdown(book.agreement_paragraph(table)))
best = []
for (ds, name), t in table.groupby(["dataset", "hyperparameter"]):
    paper_best = t.loc[t["paper"].idxmax(), "value"]
    kinds = sorted({f"{p}/{f}" for p, f in zip(t["profile"], t["family"], strict=True)})
    if len(kinds) == 1 and t["ours"].notna().all() and t["difference"].notna().all():
        # one run family, every cell at the paper's scale (a difference was computed)
        ours_best = t.loc[t["ours"].idxmax(), "value"]
        best.append(f"{ds}/{name}: best value ours {ours_best:g} ({kinds[0]}), "
                    f"paper {paper_best:g}")
    elif len(kinds) == 1 and t["ours"].notna().all():
        best.append(f"{ds}/{name}: paper's best {paper_best:g}; ours ({kinds[0]}) are not all "
                    "compared with the paper (profile, run family or evaluation length differ "
                    "from its setting), so no best value is claimed")
    else:
        best.append(f"{ds}/{name}: paper's best {paper_best:g}; ours mixes profiles or run "
                    f"families ({', '.join(kinds)}), so no best value is claimed")
display(Markdown("; ".join(best) + "."))

# %% [markdown]
# **Each value's effect, ours beside the paper's.** As in T7, our paper-setting cells are the
# CPU family and are compared within it: the effect of a value is its accuracy minus the
# accuracy at the paper's default (k = 200, 4000 teachers, the config's β), in points, one
# training seed per cell (`book.setting_effects`).

# %%
defaults = {(ds, name): f"{name}={getattr(load_config(f'{ds}-eps1'), name):g}"
            for ds in datasets for name in grid}
points = book.effects_in_points(table, defaults, group=("dataset", "hyperparameter"),
                                seed=seed)
display(points.round(1))
display(Markdown(book.effects_paragraph(points, "value")))

# %% [markdown]
# **Cells with more than one training seed.** The table above shows seed 0 of each cell, so that
# every effect is seed-matched against the default's seed 0; where a cell has further seeds,
# their mean and spread (`book.grid_seeds`; the default setting's seeds are T1's):

# %%
more = book.grid_seeds_shown(table)
display(more.round(4) if len(more) else Markdown("No cell of this table has a second seed "
                                                 "yet."))
