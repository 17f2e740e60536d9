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
# # T2 — Small privacy budgets (`tab:lowdp`)
#
# **Claim (paper Table `tab:lowdp`).** DataLens keeps the best utility among the compared
# methods for ε ∈ {0.2, 0.4, 0.6, 0.8, 1.0} (δ = 1e-5) on MNIST and Fashion-MNIST.
#
# **What we run.** The ε = 1 configuration with a smaller budget: the same k, σ and β, so
# training simply stops after fewer generator steps (the paper does not list other settings
# for these budgets). At the `smoke` profile σ is rescaled so that every budget allows three
# steps of the tiny model. Each cell shows the largest profile available: this notebook's run,
# or a committed paper-scale one (a run with that budget, else that budget's snapshot of a
# committed ε = 1 run: the next section; of several, the float32 family's, then a snapshot the
# committed run took itself (or recovered from a re-run identical to it) before one recovered
# from a re-run that drifted from it, then the lowest training seed: `book.committed_snapshot`;
# the columns *run* and *seed* say which). So one row may mix training seeds and run
# families (the ε = 1 cell is the float32 run where there is one): the section "Every method"
# below gives each family's mean over its seeds. Utility uses the paper protocol (max over
# epochs); the clean protocol is shown beside it.

# %% tags=["parameters"]
profile = "smoke"
seed = 0
datasets = ["mnist", "fashion-mnist"]
epsilons = [0.2, 0.4, 0.6, 0.8, 1.0]
device = "auto"

# %%

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from datalens_lib import book, store

rows = []
with store.Timer() as timer:
    for ds in datasets:
        config = f"{ds}-eps1"
        for eps in epsilons:
            over = book.smoke_overrides(config, eps) if profile == "smoke" else {"epsilon": eps}
            mine = book.run_datalens(config, profile, seed=seed, overrides=over, device=device)
            # a committed run of that budget, else the budget snapshot of a committed ε = 1 run
            # (the same run up to that step: below)
            shown = book.best_of(mine, book.committed_match(config, {"epsilon": eps})
                                 or book.committed_snapshot(config, eps))
            prof, fam = book.shown_profile(shown)  # a paper-setting run is paper scale
            rows.append({"dataset": ds, "epsilon": eps, "profile": prof,
                         "family": fam, "eval_epochs": shown.get("eval_epochs"),
                         "run": book.run_folder(shown),
                         "seed": shown.get("seed"),
                         "ours": shown["acc_paper"], "ours_clean": shown["acc_clean"],
                         "steps": shown["steps"], "steps_at_this_profile": mine["steps"],
                         "epsilon_spent": shown["epsilon_spent"]["paper"]})
table = book.compare(rows, "tab_lowdp.csv", ("dataset", "epsilon"))
store.save_result("tab:lowdp", {"profile": profile, "seed": seed, "datasets": datasets,
                                "epsilons": epsilons}, table.to_dict("records"),
                  profile=profile, seed=seed, duration_s=timer.seconds)
table

# %%
fig, axes = plt.subplots(1, len(datasets), figsize=(4 * len(datasets), 3), squeeze=False)
for ax, ds in zip(axes[0], datasets, strict=True):
    t = table[table["dataset"] == ds]
    ax.plot(t["epsilon"], t["paper"], "o-", label="paper")
    profiles = ", ".join(sorted(set(t["profile"].dropna()))) or "-"
    ax.plot(t["epsilon"], t["ours"], "s-", label=f"ours (paper protocol; {profiles})")
    ax.plot(t["epsilon"], t["ours_clean"], "^--", label=f"ours (clean protocol; {profiles})")
    ax.set_title(ds)
    ax.set_xlabel("ε")
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=7)
plt.tight_layout()
plt.show()

# %%
display(Markdown(book.agreement_paragraph(table)))
col = "steps_at_this_profile"
mono = all((table[table.dataset == d][col].diff().dropna() >= 0).all() for d in datasets)
display(Markdown(
    f"At the {profile} profile the number of generator steps the budget allows "
    + ("never decreases" if mono else "does not always grow")
    + f" with ε ({', '.join(str(int(s)) for s in table[col])} steps in table order)."))

# %% [markdown]
# ## Budget snapshots of committed ε = 1 runs
#
# DataLens's and G-PATE's settings do not change with the budget, so the run with budget
# b < 1 is exactly the ε = 1 run up to the last step whose spent ε stays within b: a run
# trained with `--snapshot-budgets 0.2 0.4 0.6 0.8` keeps the generator at each of those
# steps and samples it (`datalens_lib.methods.harness`), and `datalens evaluate RUN --snapshot
# B` evaluates it. One paper-scale run thus fills a row of `tab:lowdp`. (DP-GAN calibrates its
# noise to the budget, so its cells need one run per budget.) Cells evaluated for fewer than
# 600 classifier epochs are not the paper's protocol length: compare them with care.
#
# A run folder does not survive a change of machine here. When a committed run's snapshots
# were lost before their evaluation, the queue trains the same config and seed again only up
# to the last snapshot (`datalens train ... --until-last-snapshot --prefix-of RUN`) and
# compares every step trained again with the committed record; the column `rerun` says
# whether they were identical (empty: the run took the snapshot itself).

# %%
snaps = book.snapshot_table()
if len(snaps):
    # ledgers: ε spent at the snapshot under each ledger (the run's DP guarantee: the table
    # of every method below)
    display(snaps.drop(columns=["dp_guarantee", "paper_method"]).round(4))
    reruns = snaps[snaps["rerun"].notna()]
    if len(reruns):
        same = reruns["rerun"].eq("identical")
        privacy = reruns["rerun_same_privacy"].astype(bool)
        display(Markdown(
            f"{len(reruns)} of these snapshots come from a run trained again up to its last "
            f"snapshot: in {int(same.sum())} of them every step trained again equals the "
            "committed run's record (losses, answered or agreed dimensions and spent ε), so "
            "they are that run's own snapshots"
            + ("." if same.all() else
               "; the others are snapshots of a run with the same config and seed whose "
               "training drifted from the committed run's (where: `rerun`; floating-point "
               "sums on a CPU need not be bit for bit the same from one process to the next, "
               "and a vote that flips makes the runs part). "
               f"{int(privacy.sum())} of the {len(reruns)} were taken at the committed run's "
               "step with the same ε under every data-independent ledger "
               "(`rerun_same_privacy`): each is a run with exactly that budget, not the "
               "committed run's own generator.")))
else:
    display(Markdown("No committed ε = 1 run with evaluated budget snapshots yet: the queued "
                     "jobs (`scripts/cpu_queue.sh`, `scripts/gpu_queue.sh`) train with "
                     "`--snapshot-budgets 0.2 0.4 0.6 0.8`."))

# %% [markdown]
# ## Every method of `tab:lowdp`
#
# Each cell of the paper's table beside the mean (and standard deviation, with several training
# seeds) of our committed snapshots at that budget, per run family, with ε spent under each of the
# run's ledgers (*ledgers*) and which of them is a DP guarantee (*dp_guarantee*); only the paper's
# setting with float32 Adam moments, evaluated for at least 30 epochs, is given a difference. Cells
# we do not have say why, and every cell without a paper-profile result gives what it would cost and
# the command that runs it. As in T1, DP-GAN has two settings: the small-batch one (`DP-GAN`, batch
# 64) and DPImageBench's large-batch one (`DP-GAN (large batch)`, batch 4096, each real example
# clipped together with one fake), a variant shown beside the paper's DP-GAN number and never
# compared with it. The budgets below ε = 1 are queued in the large-batch setting only, because of
# what the committed probes of the small-batch discriminator measured
# (`data/results/dpgan/mnist-eps10/cpu/probe-discriminator*.json`, described in
# `data/results/README.md`; printed below).

# %%
display(Markdown(book.dpgan_probe_paragraph()))

# %%
lowdp = book.lowdp_methods_table()
# made from committed records only, whatever this notebook's profile, so stored at the paper
# profile's rank: the newest build's record wins (`store.best` ranks the profile first)
store.save_result("tab:lowdp (all methods)", {"profile": profile}, lowdp.to_dict("records"),
                  profile="paper", seed=seed)
display(lowdp.drop(columns=["measured_cost", "paper_command", "paper_method"],
                   errors="ignore").round(4))
display(Markdown(book.agreement_paragraph(lowdp)))
todo = lowdp[lowdp["paper_command"].notna()]
if len(todo):  # the cells not at paper scale: what each would cost and the command
    display(Markdown(f"{len(todo)} cell(s) of implemented methods have no paper-profile "
                     "result of ours yet (no result, or a smaller profile's). The measured "
                     "cost of a committed run of the ε = 1 setting (the same "
                     "number of steps), and the command that runs each cell at the paper "
                     "profile (DataLens and G-PATE: the ε = 1 run with its budget snapshots, "
                     "which fills a whole row; DP-GAN: one run per budget):"))
    display(todo[["method", "dataset", "epsilon", "profile", "status", "measured_cost",
                  "paper_command"]])
