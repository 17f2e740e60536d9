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
# # F1 — Data-dependent vs data-independent privacy bound (`fig:dept_bound`)
#
# **Claim (paper Figure `fig:dept_bound`, Sec. 4).** For TopAgg's high-dimensional output the
# data-independent bound (Theorem 3) is tighter than the data-dependent bound of Papernot et
# al. (Theorems 4–5): with d ≥ 784 noisy coordinates the most likely output is improbable
# (q̃ ≈ 1), so the data-dependent bound brings nothing.
#
# **What we compute.** During each run we record, per query, q̃ from the *clean* vote counts
# (exact per-coordinate probabilities, in log space) and the data-dependent RDP
# min(Theorem 6 bound, data-independent) per order, composed over queries. By construction this
# is never looser than the data-independent bound, so the question is only whether it is
# tighter. (A data-dependent ε is not itself a DP release.)

# %% tags=["parameters"]
profile = "smoke"
seed = 0
configs = ["mnist-eps1", "fashion-mnist-eps1"]
device = "auto"

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from datalens_lib import book, store
from datalens_lib.privacy import data_dependent_rdp, topagg_rdp

runs = {}
for name in configs:
    mine = book.run_datalens(name, profile, seed=seed, device=device, evaluate=False)
    runs[name] = book.best_of(mine, book.committed_match(name))

fig, axes = plt.subplots(1, len(configs), figsize=(4.5 * len(configs), 3), squeeze=False)
rows = []
for ax, (name, run) in zip(axes[0], runs.items(), strict=True):
    h = pd.DataFrame(run["history"])
    ax.plot(h["step"], h["epsilon"], label="data-independent (Thm. 3)")
    ax.plot(h["step"], h["epsilon_data_dependent"], "--", label="data-dependent (Thms. 4-6)")
    ax.set_title(f"{name} ({run['profile']})")
    ax.set_xlabel("generator step")
    ax.set_ylabel("ε")
    ax.legend(fontsize=7)
    gap = (h["epsilon"] - h["epsilon_data_dependent"]).abs().max()
    rows.append({"config": name, "profile": run["profile"], "steps": len(h),
                 "final_eps_independent": h["epsilon"].iloc[-1],
                 "final_eps_dependent": h["epsilon_data_dependent"].iloc[-1],
                 "max_abs_gap": gap, "largest_log_q_tilde": h["min_log_q"].max(),
                 "smallest_log_q_tilde": h["min_log_q"].min()})
plt.tight_layout()
plt.show()
table = pd.DataFrame(rows)
store.save_result("fig:dept_bound", {"profile": profile, "seed": seed, "configs": configs},
                  table.to_dict("records"), profile=profile, seed=seed)
table

# %% [markdown]
# Where would the data-dependent bound help? For one query of the MNIST ε = 1 paper setting
# (its k and σ, read from the config), the per-query RDP at λ = 24 as a function of log q̃:

# %%
base = book.load_config("mnist-eps1", "paper")
log_qs = -np.logspace(-3, 3, 60)
lam = np.array([24.0])
indep = float(topagg_rdp(lam, base.k, base.sigma)[0])
dep = [float(data_dependent_rdp(lq, lam, base.k, base.sigma)[0]) for lq in log_qs]
ax_title = f"k = {base.k}, σ = {base.sigma:g}"
fig, ax = plt.subplots(figsize=(5, 3))
ax.semilogx(-log_qs, dep, label="data-dependent")
ax.axhline(indep, color="k", ls=":", label="data-independent")
ax.set_xlabel("−log q̃")
ax.set_ylabel("RDP of one query at λ = 24")
ax.set_title(ax_title, fontsize=8)
ax.legend(fontsize=7)
plt.show()
first = next((float(-lq) for lq, d in zip(log_qs, dep, strict=True) if d < indep * 0.999),
             None)

# %%
t = table
text = []
for r in t.itertuples():
    same = r.max_abs_gap < 1e-9
    text.append(f"`{r.config}` ({r.profile}): after {r.steps} steps the data-independent ε is "
                f"{r.final_eps_independent:.4f} and the data-dependent ε "
                f"{r.final_eps_dependent:.4f} — "
                + ("identical: " if same else f"{r.max_abs_gap:.2e} apart at most: ")
                + f"the largest per-step log q̃ was {r.largest_log_q_tilde:.3g}.")
text.append(
    "The paper's figure shows the data-dependent curve *above* the data-independent one; an exact "
    "data-dependent bound cannot be looser, because Theorem 6 may always fall back to the "
    "data-independent RDP (we take the minimum per order). A curve above the data-independent "
    "one can only come from plotting Theorem 6's bound without that fall-back (the official "
    "training code does take the minimum per query, with q̃ from a union bound on the noisy "
    "votes).")
# the claim's verdict, from the rows above: the bound bought nothing in every run shown, and
# (where the curve above says where it starts to help) every step's -log q̃ stayed below that
nothing = bool(len(t)) and bool((t["max_abs_gap"] < 1e-9).all())
# (`first` is for the paper setting's k and sigma: compared with the paper-profile runs only)
at_paper = t[t["profile"] == "paper"]
below = first is not None and bool(len(at_paper)) and bool(
    (-at_paper["smallest_log_q_tilde"] < first).all())
scale = ("" if set(t["profile"]) == {"paper"} else
         " (a pipeline check: not every run shown is at the paper profile, whose dimensions "
         "the claim is about)")
if nothing:
    text.append("What matters for the claim agrees in every run shown: the data-dependent "
                "analysis bought nothing" + scale + ".")
elif len(t):
    text.append("Unlike the paper's claim, the data-dependent analysis was tighter in "
                f"{int((t['max_abs_gap'] >= 1e-9).sum())} of the {len(t)} runs shown" + scale
                + ".")
if first is not None:
    text.append(f"For one query it would start to help only once −log q̃ exceeds about "
                f"{first:.3g} (q̃ ≲ {np.exp(-first):.1e})"
                + ("; the largest −log q̃ of any step of the paper-profile runs shown stayed "
                   "below that." if below else "."))
display(Markdown(" ".join(text)))
