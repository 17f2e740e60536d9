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
# # T3 — Visual quality: IS and FID (`tab:visual`, `tab:full_image`)
#
# **Claim (paper Tables `tab:visual` and `tab:full_image`).** Visual quality is not DataLens's
# goal, yet at ε = 1 it has the best Inception Score on MNIST and Fashion-MNIST and the best
# FID on Fashion-MNIST; at ε = 10 GS-WGAN leads both metrics.
#
# **What we measure.** The paper's IS uses MNIST/Fashion classifiers that were never published
# and its FID uses ImageNet Inception features (not downloadable here). We score with this
# repository's **domain classifiers** (a small CNN per dataset, trained on the real training
# set, weights committed with their SHA-256 — `datalens_lib/quality`): **IS (domain
# classifier)** from its softmax (10 splits) and **FID (domain features)** from its 128-d
# penultimate layer against the real training set. These are on another scale than the
# paper's numbers, so no difference is taken: compare the **real-data row** and the
# **ranking** of methods. Inception-based IS/FID run with `datalens quality RUN
# --inception-weights FILE` when you supply the weights.
#
# **Whose samples.** Every committed paper-scale run with a *published* 10,000-image subset
# (`data/results/<method>/<config>/<folder>/samples-10k.npz`, `datalens publish-samples`);
# plus, as a pipeline check, the run this notebook trains at the chosen profile. A published
# subset's score is read from the `quality.json` committed beside it (`make quality-records`,
# which runs `datalens quality` with its provenance) when that record scored exactly the
# published file with the committed classifier; otherwise it is scored here. The `scored`
# column names the code (git sha) that computed each number, or "now".

# %% tags=["parameters"]
profile = "smoke"
seed = 0
datasets = ["mnist", "fashion-mnist"]
check_config = "mnist-eps1"
device = "auto"

# %%
import pandas as pd
from IPython.display import Markdown, display

from datalens_lib import book, store
from datalens_lib.quality import report
from datalens_lib.results import PAPER_DIR
from datalens_lib.samples import load_samples

paper = pd.read_csv(PAPER_DIR / "tab_full_image.csv", dtype={"epsilon": str})
rows, entries = [], []
with store.Timer() as timer:
    for ds in datasets:
        rows += report.real_rows(ds, paper)
    published = [p for p in report.published_runs() if p["dataset"] in datasets]
    rows += report.score_rows(published, paper)
    if profile != "paper":  # the pipeline check: this profile's own run
        check = book.run_datalens(check_config, profile, seed=seed, device=device,
                                  evaluate=False)
        x, y = load_samples(f"{check['run_dir']}/samples.npz")
        rows += report.score_rows([{"dataset": check["dataset"], "method": "DataLens",
                                    "epsilon": f"{check['epsilon']:g}", "x": x, "y": y,
                                    "profile": profile,
                                    "source": f"{check_config} ({profile} run)"}], paper)
table = pd.DataFrame(rows)
shown = report.choose_per_cell(rows)
for name, metric in (("tab:visual", "inception_score"), ("tab:full_image", "fid")):
    store.save_result(name, {"profile": profile, "seed": seed, "datasets": datasets},
                      [r for r in shown if r["metric"] == metric], profile=profile, seed=seed,
                      duration_s=timer.seconds)
wide = table.pivot_table(index=["dataset", "epsilon", "method", "source", "profile"],
                         columns="metric", values=["ours", "paper"], aggfunc="first")
wide.columns = [f"{a} {b}" for a, b in wide.columns]
wide = wide.rename(columns={"ours inception_score": "IS (domain classifier)",
                            "ours fid": "FID (domain features)",
                            "paper inception_score": "paper IS", "paper fid": "paper FID"})
wide.reset_index().round(3)

# %% [markdown]
# The real-data row is the real **test** set scored like a generator's samples (the paper's
# own real-data scores are in its `paper IS` and `paper FID` columns). `label_agreement`
# below is how often the domain classifier assigns a sample its conditioning label.

# %%
agree = table[table.metric == "inception_score"][
    ["dataset", "epsilon", "method", "source", "profile", "n", "label_agreement",
     "classifier_sha256", "scored"]]
agree.round(4)

# %% [markdown]
# ## Do the published subsets stand for their runs?
# A 10,000-image subset is only useful if it gives the run's utility back. Each row
# re-evaluates a committed run's subset with the official CNN (paper protocol: best test
# accuracy over epochs) beside the full run's own evaluation. At the same number of epochs the
# subset sees a tenth of the SGD steps; `subset_same_steps` trains it on as many images as
# the full run's evaluation (10x the epochs; the SGD steps of both are in the table). `spread`
# is how far evaluation seeds of the *same full samples* lie apart: the noise of the
# evaluation itself, measured with two seeds (a rough yardstick, not an interval).

# %%
reeval = report.subset_reevaluations()


def _short_schedule(r: tuple) -> str:
    """The subset at the full run's epochs (a tenth of the SGD steps), against the same
    number of steps: the comparison says which gives less, nothing is assumed."""
    short = getattr(r, f"subset_{r.full_epochs}ep", None)
    if not pd.notna(short):
        return ""
    return (f"; at {r.full_epochs} epochs, a tenth of the SGD steps, it gives {short:.4f}"
            + (" (lower than with the full run's number of SGD steps: a short schedule "
               "on 10k images under-trains the classifier)" if short < r.subset_same_steps
               else " (not lower than with the full run's number of SGD steps)"))


if len(reeval):
    reeval = reeval[reeval.dataset.isin(datasets)]
    ok = reeval[reeval.difference.notna()]
    display(Markdown(" ".join(
        f"{r.method} {r.run}: the subset at {r.subset_same_steps_epochs} epochs gives "
        f"{r.subset_same_steps:.4f} against {r.full_seeds.split(',')[0]} for the full run "
        f"({r.difference * 100:+.1f} points; {r.verdict}"
        + (f", spread {r.spread * 100:.1f} points" if pd.notna(r.spread) else "") + ")"
        + _short_schedule(r) + "." for r in ok.itertuples())
        or "No published subset has been re-evaluated yet."))
reeval.round(4)

# %%
rk = report.rankings(table[table.profile == "paper"])
pub = table[(table.profile == "paper") & (table.method != "real data")]
lines = [f"{len(published)} committed paper-scale run(s) have a published sample subset: "
         + (", ".join(sorted({f'{p["method"]} {p["config"]}/{p["folder"]}' for p in published}))
            or "none") + "."]
missing = report.unpublished_runs()
if missing:
    lines.append(f"{len(missing)} committed paper-scale run(s) predate published samples and "
                 "cannot be scored until they are repeated (the GPU and CPU queues publish "
                 "every new run): " + ", ".join(f"`{m}`" for m in missing) + ".")
if len(rk):
    lines.append("Rank agreement with the paper (Spearman over methods): " + "; ".join(
        f"{r.dataset} ε={r.epsilon} {r.metric}: {r.spearman:+.2f} ({r.methods} methods)"
        for r in rk.itertuples()) + ".")
else:
    lines.append("No dataset and budget has two methods with published samples yet, so no "
                 "ranking can be compared with the paper's; the baselines' subsets are added "
                 "as their paper-scale runs are committed.")
if profile != "paper":
    lines.append(f"The `{check_config}` row from the {profile} profile is a pipeline check "
                 "(the scoring runs end to end); it is not a reproduction of any paper cell.")
display(Markdown(" ".join(lines)))
