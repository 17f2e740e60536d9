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
# # Reproduction status
#
# Every table and figure of the paper that reports results, reproduced or not: how many of
# the paper's cells we have **at paper scale**, the median |ours − paper| over those cells
# only, and a verdict. Smoke and cpu-profile results are *pipeline checks* — they show that
# the code runs end to end and are never compared with a paper number (a cpu profile that
# changes only the evaluation's length, DP-GAN's small-batch one, trains the paper setting and
# counts as paper scale). Everything here is
# computed by `datalens_lib.status` from the results the notebooks stored and the paper's
# transcribed numbers (`data/paper/`); nothing is typed by hand.

# %% tags=["parameters"]
profile = "smoke"
seed = 0
tolerance = 0.02  # |ours - paper| (accuracy) within which a paper-scale artifact "agrees"

# %%
from IPython.display import HTML, Markdown, display

from datalens_lib import book, status

table = status.status_table(tolerance)
n = table.verdict.value_counts()
counts = ", ".join(f"{n.get(v, 0)} {v}" for v in status.VERDICTS if n.get(v, 0))
have = int(table["paper cells covered"].sum())
total = int(table["paper cells"].fillna(0).sum())
spread = book.seed_spread()  # the four main DataLens settings, per run family
several = int((spread["seeds"] > 1).sum()) if len(spread) else 0
display(Markdown(
    f"**{len(table)} artifacts**: {counts}. **{have} of the paper's {total} numbered cells** "
    f"have a cell of ours at paper scale (compared with the paper's number or not: below). "
    f"An artifact *agrees* when the median |ours − paper| "
    f"over its paper-scale cells is at most {tolerance:g}: one fixed tolerance for every "
    f"artifact rather than each cell's seed spread, since {several} of the {len(spread)} "
    f"(main DataLens setting, run family) cells (`book.seed_spread`) "
    f"{'has' if several == 1 else 'have'} more than one training seed (the DP-SGD notebooks "
    f"give their cells' seed spread)."))
display(HTML(status.to_html(table)))

# %% [markdown]
# ## Artifact × method
#
# Colour: the median (ours − paper) over a method's paper-scale cells in that artifact (blue:
# above the paper, red: below). Each square says how many of the paper's cells for that
# method we have at paper scale; grey squares have none yet, blank ones are not in the paper.

# %%
matrix = status.method_matrix()
fig = status.heatmap(matrix)

# %% [markdown]
# ## Every paper-scale cell, beside the paper's number
#
# One block per artifact (click to open): each cell of ours at paper scale with the paper's
# number, and `ours − paper` where the status page compares the two (in the artifact's own
# unit: accuracy as a fraction, DP-SGD tables in percent). The other cells say why they stand
# beside the paper's number without a difference: the CPU family (bfloat16 Adam moments;
# compared within its family, and in T1's gap analysis with its seed spread), another scale (IS and
# FID from our domain classifiers), a variant of the paper's setting, an evaluation shorter
# than 30 epochs, or no paper number for that cell (ours at a budget or setting the paper's
# table does not list). Smoke and cpu-profile results are pipeline checks and are not listed.
# `status.cell_table()` gives the same rows as a DataFrame.

# %%
cells = status.cell_table()
display(Markdown(
    f"**{len(cells)} cells of ours at paper scale** in {cells.artifact.nunique()} artifacts, "
    f"{int(cells['paper'].notna().sum())} of them with a paper number; "
    f"{int(cells['ours - paper'].notna().sum())} compared with it."))
display(HTML(status.cells_html(cells)))

# %% [markdown]
# ## The paper's cells we do not have yet
#
# Every numbered cell of the paper without a cell of ours at paper scale, and why: its dataset
# cannot be downloaded here (CelebA, Places365 and CIFAR-10 need the user's copy; the loaders
# check it), its method is not in the harness yet (PATE-GAN, GS-WGAN), only a variant of its
# setting ran at paper scale (DP-GAN's large batch), only a pipeline check of it ran (smoke or
# cpu profile), or it has not run at paper scale yet (the CPU and GPU queues, `scripts/`, hold
# the planned DataLens cells; the last column is the notebook's own note where it has one). A
# cell of the paper and one of ours are the same cell when dataset, method, ε and parameter
# agree. `status.missing_cells()` gives the same rows as a DataFrame.

# %%
missing = status.missing_cells()
display(Markdown(
    f"**{len(missing)} of the paper's {total} numbered cells** have no cell of ours at paper "
    f"scale ({status.missing_counts(missing)})." if len(missing)
    else "Every numbered cell of the paper has a cell of ours at paper scale."))
display(HTML(status.missing_html(missing)))
