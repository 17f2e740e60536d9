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
# # T1 — Utility of the synthetic data (`tab:image`)
#
# **Claim (paper Table `tab:image`).** A classifier trained only on DataLens's synthetic images
# reaches, on the real test set, the accuracies in the *paper* column below (δ = 1e-5), ahead
# of DP-GAN, PATE-GAN, G-PATE and GS-WGAN at ε = 1.
#
# **What we run.** Paper Algorithm 1 with the official README's settings (configs
# `<dataset>-eps<ε>`), then the official evaluation CNN on the generated images. We report two
# protocols: *paper* (the maximum test accuracy over training epochs — what the official
# script prints, which selects on the test set) and *clean* (accuracy after the fixed schedule).
# Each cell shows the largest profile available (paper > cpu > smoke); committed paper-profile
# runs are reused, never recomputed here.

# %% tags=["parameters"]
profile = "smoke"
seed = 0
datasets = ["mnist", "fashion-mnist"]
epsilons = [1, 10]
user_data_datasets = ["celeba-gender", "celeba-hair", "places365"]
device = "auto"
gpate_stop_on = "sound"  # "data_dependent": G-PATE's official stopping rule (not DP)

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from datalens_lib import book, store
from datalens_lib.data import load_dataset, official_split_overlap

rows, records = [], []
with store.Timer() as timer:
    for ds in datasets + user_data_datasets:
        for eps in epsilons:
            config = f"{ds}-eps{eps}"
            need = book.data_status(ds)
            if need or config not in book.available_configs():
                why = need or "no official configuration for this dataset"
                rows.append({"dataset": ds, "epsilon": eps, "profile": "-", "family": None,
                             "eval_epochs": None, "ours": None, "ours_clean": None,
                             "steps": None, "status": why})
                continue
            mine = book.run_datalens(config, profile, seed=seed, device=device)
            shown = book.best_of(mine, book.committed_match(config))
            records.append(mine)
            prof, fam = book.shown_profile(shown)  # a paper-setting run is paper scale
            rows.append({"dataset": ds, "epsilon": eps, "profile": prof,
                         "family": fam, "eval_epochs": shown.get("eval_epochs"),
                         "ours": shown["acc_paper"], "ours_clean": shown["acc_clean"],
                         "steps": shown["steps"], "status": "ok"})
table = book.compare(rows, "tab_image.csv", ("dataset", "epsilon"))
store.save_result("tab:image", {"profile": profile, "seed": seed, "datasets": datasets,
                                "epsilons": epsilons}, table.to_dict("records"),
                  profile=profile, seed=seed, duration_s=timer.seconds)
table[["dataset", "epsilon", "profile", "family", "eval_epochs", "paper", "ours", "difference",
       "ours_clean", "steps", "status"]]

# %%
done = table.dropna(subset=["ours"])
if len(done):
    fig, ax = plt.subplots(figsize=(7, 3))
    labels = [f"{r.dataset}\nε={r.epsilon} ({r.profile})" for r in done.itertuples()]
    x = range(len(done))
    ax.bar([i - 0.27 for i in x], done["paper"], 0.27, label="paper")
    ax.bar(list(x), done["ours"], 0.27, label="ours, paper protocol")
    ax.bar([i + 0.27 for i in x], done["ours_clean"], 0.27, label="ours, clean protocol")
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=7)
    plt.show()

# %%
display(Markdown(book.agreement_paragraph(table)))
at_scale = done[done["difference"].notna()]  # the cells compared with the paper's setting
if len(at_scale):
    gap = (at_scale["ours"] - at_scale["ours_clean"]).mean()
    display(Markdown(
        f"Selecting the best epoch on the test set (paper protocol) adds {gap:+.4f} accuracy on "
        f"average over the clean protocol in the {len(at_scale)} cells above compared with the "
        "paper: the paper's numbers are optimistic in that sense."))

# %% [markdown]
# ## Why our numbers differ from the paper's
#
# How far our paper-scale DataLens cells sit from the paper's is computed below from the
# table above. Reading the official code beside ours gives four candidate explanations (issue
# 12). Each one is measured here as a variant run or a variant evaluation against its
# baseline, from committed records only: *effect* under the paper protocol (the best epoch on
# the test set, what the paper reports), *effect_clean* under the clean one (the last epoch).
# A row marked *queued* has no record yet; it is queued in `scripts/cpu_queue.sh` (and
# `scripts/gpu_queue.sh` for a lent GPU).
#
# 1. **Seeds and selection.** The paper reports one run per cell, the best epoch on the test
#    set, and the best cell of a hyper-parameter search. The first table below gives our
#    spread over training seeds; *max* is what a best-of-n selection would report, and
#    *interval_low* / *interval_high* bound one more run of our setting (a 95 % prediction
#    interval from our seeds, `book.one_run_interval`). *paper_inside* says whether the
#    paper's single run could be one of ours: a number above the interval is not explained
#    by the training seed. *expected_best* reads the selection: the mean of the best of
#    *search* runs of our setting (*search*: the paper's β search in `tab:hyperparam`, six
#    values at ε = 1), mean + sd × E[max of *search* standard normals]
#    (`book.expected_max_of_normals`). It is what the paper would report on average if its
#    cell were the best of that search and β changed nothing; *expected_best_low* / *_high*
#    put the ends of σ's 95 % interval in place of our sd (from three seeds σ may be 0.52 to
#    6.3 times it), so the point estimate alone says little. *paper_search_mean* / *_max* are
#    the paper's own β cells: their max minus their mean is what selection added in the
#    paper's runs only if β did nothing there. *paper_search_rho*, their rank correlation
#    with β, and *paper_search_p*, its exact permutation p-value, say whether they trend
#    with β (at the 5 % level). The second table gives the
#    evaluation's own spread: the same samples scored with other seeds of the evaluation
#    classifier, each a single number of the kind the paper reports. The third puts our
#    β cells (T4's, the CPU family) beside the paper's, with the gap at each β
#    (`book.beta_gap`). A gap that changes with β says that the paper's accuracy and ours
#    respond to β differently (the two changes say which side moves); a gap not shown to
#    change leaves β's part open unless the test could have seen a change as large as the gap.
#    The test (`book.beta_gap_trend`) is the weighted slope of the gap on β against our
#    training-seed noise (pooled over every β cell with several seeds), the paper's cells
#    assumed as noisy as one run of ours; *ours_seed0_change* is the seed-matched view (seed 0
#    at every β), and *lack_of_fit_p* says whether the cells scatter about the line more than
#    that noise allows (then the noise at the β values with one seed is larger than where
#    seeds measure it, *noise_betas*, the gap is not linear in β, or the paper's cells are
#    noisier than one run of ours; the slope's verdict waits).
# 2. **Teachers as the official code trains them.** Its 4000 teachers run as 80 batches of 50
#    slots. The 50 slots' initial weights are saved once and every batch restores them, so
#    there are only 50 distinct initialisations. The teacher saver holds trainable variables
#    only, so Adam's moments and step count pass from one batch's teacher to the next
#    (model.py: one `AdamOptimizer` per slot, `saver_d` over `d_` variables). Our switches
#    `init_slots` and `adam_slots` reproduce both (opt-in). One detail differs: the official
#    split deals the classes in turn and cuts parts of 15 records, so teacher i's labels
#    start at class 0 or 5 by the parity of i, and the 80 teachers of a slot (i = s + 50b)
#    share one label sequence. Our split (`data.partition`) gives teachers their label
#    multisets in a random order, so the teachers of a slot do not all share one.
#    **Privacy:** shared Adam state lets one record change the votes of all 80 teachers of
#    its slot, not one. The sensitivity of the vote sum is then up to 80 × 2√k, so the
#    published ε does not hold for the official runs. Such a run records the ledger at the
#    coupled sensitivity (`coupled_rdp`) as its only DP guarantee.
# 3. **Evaluation details.** G-PATE's MNIST evaluation uses lr 1e-3, and the official
#    Fashion-MNIST script fills a 100k-row array from one 10k pickle: the other 90k rows are
#    zero images with zero targets, which add no loss but count in every batch mean. Measured
#    on 10k rows of a run, our published subset: a uniformly random 10k of its rows, each
#    distributed as a row of its first 10k (i.i.d. batches with i.i.d. uniform labels; the
#    subset takes rows from every batch where the first 10k are whole batches, coupled by
#    BatchNorm's batch statistics, and it is rounded to uint8).
#    The 10k rows alone, for 30 epochs (a tenth of our evaluation's SGD steps) and for 300
#    (the same number of steps); and padded as the script does, for its 600 epochs
#    (`datalens evaluate --pad-to 100000`). The spread between two evaluation seeds on the
#    same samples sets the scale of any effect. The lr 1e-3 evaluation runs our 30 epochs at
#    half our learning rate, so it may not have converged by then: below the table, each
#    evaluation variant's best epoch says whether it was still improving when it stopped
#    (`book.late_best_epoch_text`; the records have the per-epoch accuracies).
# 4. **Smaller fixes.** Samples are now generated in batches of exactly B, because BatchNorm
#    uses batch statistics (`datalens.sample_generator`). Runs sampled before that fix drew
#    their last 160 of 100k rows, 0.16 % of the evaluation classifier's data, from one batch of
#    160; which runs those are is computed below the table from each record's commit
#    (`book.sampled_exact_b`). Where seed 0 of a setting was sampled before the fix and a
#    variant after it, an effect against seed 0 compares samples drawn after the fix with a
#    baseline drawn before it; the effect of the fix on the accuracy is not measured. The
#    paper text's ε = 10 settings differ from the README's, so they run as a variant. The README's
#    Fashion-MNIST ε = 1 command writes to a folder named `..._pt_30_...` but passes
#    `--pretrain_teacher 10` (30 or 10 teacher steps on the first generator step). We run 10,
#    as passed, and 30 as a variant.
# 5. **Adam moments' precision (ours).** Every CPU cell keeps the 4000 teachers' Adam moments
#    in bfloat16 so that they fit in 24 GiB (`datalens_lib.ensemble`); the paper's code keeps
#    float32. At 2000 teachers float32 fits, so the precision is measured there on
#    Fashion-MNIST, against the bfloat16 cell of the same setting, each side at the same
#    training seeds (queue jobs 129-131). The noise is that setting's own seed spread, larger at
#    2000 teachers than at 4000.
#
# Each effect is one variant number minus one baseline number, so it is read against the noise
# of such a difference (`book.gap_analysis`): a run variant against the spread of training seeds
# of its baseline's setting where that setting has two or more committed seeds (a grid cell's
# spread can differ from the default setting's: item 5), else of its baseline's family; an
# evaluation variant against the spread of evaluation seeds on the same samples.
# *beyond_noise* marks an effect that a two-sided 5 % test of "no effect" rejects, under the
# paper protocol: larger than t × √2 standard deviations of that spread, t
# the quantile of Student's t with one degree of freedom fewer than *noise_seeds*
# (`book.NOISE_LEVEL`). A standard deviation from two or three seeds is rough, and the test
# then asks for a large effect (t = 12.7 with two seeds, 4.3 with three). A variant run at
# more than one training seed, each beside its baseline at the same seed (*seed_pairs*), gives
# the mean of those differences, and the threshold shrinks by √(seed_pairs). The last
# paragraph of this section, *the answer so far*, sorts the measured candidates by what they
# do (`book.gap_verdict`): beyond the noise and raising our number, beyond it and lowering
# our number, or within it (not ruled out either); a positive effect measured at a main
# cell's setting is also given as a share of that cell's gap. The label-free split is not a
# candidate but the price of soundness.
#
# The official partition also differs from ours. It draws n / 10 records of each class, taking
# the classes in turn, cuts that sequence into one consecutive part per teacher, and wraps a
# class that runs out back to its start: the first records of the
# smaller classes sit in two partitions, so each of them changes two teachers' votes, and the
# last records of the larger classes are never used (counted from the data below,
# `data.official_split_overlap`). Ours is disjoint (`data.partition`).
#
# Both splits are class-ordered, so they are functions of the labels: changing one record's
# label moves records of other classes to other teachers. Our DataLens ε is therefore a DP
# guarantee for neighbours that differ in one record's image with its label kept. The
# official split does not give even that: each of its duplicated records changes two
# teachers' votes. The label-free split `partition = shuffled` gives the standard
# replace-one guarantee; its utility cost is the *label-free teacher split* row of the table
# below (see the privacy chapter, "Which neighbouring datasets the guarantee covers").

# %%
for ds in datasets:
    if book.data_status(ds):  # the labels need the data
        continue
    o = official_split_overlap(load_dataset(ds).y_train)
    display(Markdown(
        f"{ds}: the official split draws {o['draws_per_class']:,} records per class against "
        f"{o['smallest']:,} to {o['largest']:,} in the data; {o['duplicated']:,} draws repeat a "
        f"record already drawn (it then sits in more than one partition) and {o['unused']:,} "
        "records are never used."))

# %%
spread = book.seed_spread()
display(spread.round(4))
# the CPU family's cells (mean over its training seeds) beside the paper's, for the status
# page's cell list (`datalens results --cells`), which the table at the top does not feed;
# made from committed records only, whatever this notebook's profile, so stored at the paper
# profile's rank: the newest build's record wins (`store.best` ranks the profile first)
store.save_result("tab:image (training seeds)", {"profile": profile},
                  book.seed_cells(spread), profile="paper", seed=seed)
eval_spread = book.eval_seed_spread()
display(eval_spread.round(4))
betas = book.beta_gap()
beta_trend = book.beta_gap_trend(betas)
display(betas.round(4), beta_trend.round(4))
gaps = book.gap_analysis()
display(gaps[["explanation", "config", "baseline", "variant", "seed_pairs", "ours_baseline",
              "ours_variant", "effect", "effect_clean", "noise_sd", "noise_seeds",
              "noise_source", "beyond_noise", "status"]].round(4))
display(Markdown(" ".join(t for t in (
    book.late_best_epoch_text(gaps),  # item 3: did each evaluation variant converge?
    book.sampled_before_fix_text(book.committed_runs_table()))  # item 4: which runs
    if t)))


def noise_text(r) -> str:
    if r.beyond_noise is None or pd.isna(r.beyond_noise):
        return f"; its noise is not measured yet (fewer than 2 {r.noise_source})"
    verdict = "beyond" if r.beyond_noise else "within"
    return (f"; under the paper protocol {verdict} the noise of {r.noise_source} (sd "
            f"{r.noise_sd:.4f} over {int(r.noise_seeds)})")


measured = gaps.dropna(subset=["effect"])
lines = [f"{r.explanation} ({r.config}): {r.effect:+.4f}"
         + (f" (mean over {int(r.seed_pairs)} training seeds of variant and baseline)"
            if pd.notna(r.seed_pairs) and r.seed_pairs > 1 else "")
         + (f" (clean protocol {r.effect_clean:+.4f})" if pd.notna(r.effect_clean) else "")
         + noise_text(r) for r in measured.itertuples()]
multi = spread[spread["seeds"] > 1]


def paper_against_seeds(r) -> str:
    if r.paper_inside is None or pd.isna(r.paper_inside):
        return ""
    where = "inside" if r.paper_inside else (
        "above" if r.paper > r.interval_high else "below")
    return (f"; the paper's {r.paper:.4f} is {where} the 95 % interval for one more run of "
            f"ours ({r.interval_low:.4f} to {r.interval_high:.4f})"
            + ("" if r.paper_inside else ", so the training seed does not explain it"))


lines += [f"training seeds of {r.config} ({r.family}): mean {r.mean:.4f}, sd {r.sd:.4f} over "
          f"{r.seeds} seeds, max − mean {r.max - r.mean:+.4f}" + paper_against_seeds(r)
          for r in multi.itertuples()]
lines += [f"evaluation seeds of {r.config}/{r.folder} (same samples, {r.epochs} epochs): "
          f"sd {r.sd:.4f} over {r.eval_seeds} seeds, max − mean {r.max - r.mean:+.4f}"
          for r in eval_spread.itertuples()]
diffs = table["difference"].dropna()
text = (f"Our {len(diffs)} paper-scale DataLens cell(s) sit {-diffs.max():.4f} to "
        f"{-diffs.min():.4f} under the paper's "
        + ("(every one below it). " if (diffs < 0).all() else "(not all below it). ")
        if len(diffs) else "No DataLens cell is at paper scale in this run. ")
text += ("Measured so far: " + "; ".join(lines) + ". ") if lines else "Nothing measured yet. "
text += f"{int((gaps['status'] != 'measured').sum())} variant(s) are still queued"
few = int((spread["seeds"] < 3).sum())
text += (f", and {few} of the {len(spread)} main cells (per run family) have fewer than 3 "
         "training seeds." if len(spread) else ".")
display(Markdown(text))
display(Markdown(book.gap_verdict(gaps, spread, beta_trend)))

# %% [markdown]
# **What the official teacher slots cost in privacy (item 2).** A run with the official slots
# stops on the same ledgers as ours, computed at TopAgg's one-teacher sensitivity, which does not
# hold when one record reaches every teacher of its slot. Its only DP guarantee is the coupled
# ledger, from its record:

# %%
coupled = book.coupled_runs()
display(coupled.drop(columns=["dp_guarantee"]).round(4))
if len(coupled):
    display(Markdown(
        "The shared-Adam runs spend "
        + "; ".join(f"{r.config}/{r.folder}: ε {r.epsilon_paper:.3g} under the `paper` ledger "
                    f"and {r.epsilon_coupled_rdp:,.4g} under `coupled_rdp` "
                    f"({r.coupled_over_budget:,.3g}× the budget)" for r in coupled.itertuples())
        + ". Whatever accuracy the official slots buy (the verdict above says whether it is "
        "beyond the seed noise) comes with a guarantee two orders of magnitude weaker than "
        "the one the paper states."
        if (coupled["coupled_over_budget"] >= 100).all() else
        "The shared-Adam runs' coupled ledgers are in the table: only they are DP guarantees."))
else:
    display(Markdown("No committed run with shared Adam state yet."))

# %% [markdown]
# ## Every committed run, and where it ran
#
# The same paper setting can have more than one committed run: on a lent GPU and on the
# project's 2-core CPU (there with bfloat16 Adam moments, so that 4000 teachers fit in 24 GiB;
# see `datalens_lib.ensemble`). The *eval_epochs* column says how long the evaluation
# classifier was trained; with fewer than the paper's 600 epochs the *paper protocol* value is
# the maximum over those epochs only.

# %%
runs = book.compare(book.committed_runs_table().to_dict("records"), "tab_image.csv",
                    ("dataset", "epsilon"))
if len(runs):  # a difference only for the paper's setting, float32 moments, >= 30 epochs
    display(runs[["config", "folder", "device", "family", "variant", "adam_moments", "steps",
                  "train_hours", "eval_epochs", "paper", "ours", "difference",
                  "ours_clean"]].round(4))

# %% [markdown]
# ## Every method of `tab:image`
#
# The paper's claim is a comparison: DataLens against DP-GAN, PATE-GAN, G-PATE and GS-WGAN, with a
# non-private DC-GAN as the ε = ∞ reference. Every method runs through the same harness
# (`datalens_lib.methods`), is evaluated by the same classifier and reports its privacy under the
# same accountants; *dp_guarantee* says which of its ledgers is a DP guarantee. A cell shows the
# largest profile available (this notebook's or a committed run); only a paper-profile cell is
# compared with the paper's number (*difference*): a smoke or cpu cell checks the pipeline, except a
# cpu profile that changes only the evaluation's length (DP-GAN's small-batch one, below), which
# trains the paper setting and is shown as paper. Methods not implemented yet say so. *ledgers*
# gives ε under each of a run's ledgers: G-PATE's `data_dependent` one is the official code's (its
# published runs stopped on it; it is not a DP guarantee); our G-PATE cells stop on the sound ledger
# unless the parameter `gpate_stop_on` says otherwise. DP-GAN has two rows: the small-batch setting
# (expected batch 64, as in the code the paper cites; the fake half's exact gradient is added after
# the private release) and DPImageBench's large-batch one (`-large` configs: batch 4096, 150 epochs,
# C = 1e-3, each real example clipped together with one fake, as DPImageBench's Opacus code does;
# our fakes take the BatchNorm statistics of a separate reference batch, so that they do not depend
# on the Poisson batch size and the sensitivity stays C); both sit beside the paper's one DP-GAN
# number. The small-batch runs were recorded at the `cpu` profile, which trains the paper setting
# itself and shortens only the evaluation to 30 epochs (`config.trains_paper_setting`): they are
# paper scale, shown as the paper profile and compared with the paper's number. The committed
# small-batch cells measure a failure of that setting, not DP-SGD's cost: clipping caps the real
# half's pull at C while the fake half's is not capped, so D settles at a low logit on every input
# (`methods/dpgan.py`'s docstring). The same setting with each real example clipped together with
# one fake (`clip_fake`, variant `cpu-clipfake`) balances D; whether it then learns is what its full
# runs (queued) will say. The measurements, from the committed probes of `dpgan/mnist-eps10/cpu`
# (`probe-discriminator.json`, `probe-discriminator-1500.json`), are printed below.
#
# *neighbouring* is the relation each ε is for, and it is not the same for every method: DP-GAN
# (DP-SGD) is DP under adding or removing one record; G-PATE's label-free split gives
# replace-one; DataLens's class-ordered split gives replace-one-image-with-its-label-kept. An
# add/remove guarantee of ε implies a replace-one guarantee of 2ε only, so equal nominal ε are
# not equal guarantees across rows. *family*: `gpu` runs use the paper's float32 Adam moments
# (methods without Adam moments of their own count as `gpu`); a `cpu`-family run (bfloat16
# moments, 30 epochs) is shown but compared within its family only. A cell evaluated for at
# least 30 epochs is compared (*eval_epochs* gives the length; T1's schedule table below says
# how far 30 epochs sit from 600).

# %%
display(Markdown(book.dpgan_probe_paragraph()))

# %%
methods = book.methods_table(profile, seed=seed, datasets=datasets + user_data_datasets,
                             device=device,
                             overrides={"gpate": {"stop_on": gpate_stop_on}})
store.save_result("tab:image (all methods)", {"profile": profile, "seed": seed,
                                              "datasets": datasets + user_data_datasets,
                                              "gpate_stop_on": gpate_stop_on},
                  methods.to_dict("records"), profile=profile, seed=seed)
display(methods[["method", "dataset", "epsilon", "paper", "profile", "family", "ours",
                 "difference", "ours_clean", "eval_epochs", "ledgers", "neighbouring",
                 "dp_guarantee", "status"]])
todo = methods[methods.paper_command.notna()]
if len(todo):  # the cells not at paper scale: what they cost and how to run them
    display(Markdown(f"{len(todo)} method cell(s) are not at paper scale yet. Their measured "
                     "cost (from committed runs of that setting, largest profile) and the "
                     "command that runs each at the paper profile:"))
    display(todo[["method", "dataset", "epsilon", "profile", "measured_cost",
                  "paper_command"]])

# %% [markdown]
# ### G-PATE: which ledger stops the run
#
# The official G-PATE code stops training when its *data-dependent* ε reaches the budget. That
# ε is computed from the votes themselves, so publishing it (and stopping on it) is not a DP
# release. Our G-PATE cells stop on a sound, data-independent ledger: the `paper` conversion
# by default (the loosest), or the tighter PLD one (`conversion = pld`, a variant run). Every
# committed paper-scale G-PATE run that differs from its config only in the stopping rule is
# listed with the ledger that stopped it (*stop*), so the effect of the stopping rule on the
# gap to the paper can be read off directly. A run of the official rule has **no DP
# guarantee**: its number of steps is a function of the clean votes, not of the noisy
# answers, so its `eps_*` (the ledgers at the steps it took) cover the noisy answers only;
# `cap_*` is ε of the data-independent alternative that always runs the rule's cap of steps.

# %%
stops = book.stopping_rule_table()
if len(stops):
    display(stops.round(4))
display(Markdown(book.stopping_rule_paragraph(stops)))

# %% [markdown]
# How many generator steps each sound ledger allows, from the configs and the accountant alone
# (no training): a stop on the tightest one (PLD) is still a DP guarantee at the budget. The
# official rule stops on its data-dependent ε, so the number of steps it takes depends on the
# data and it has no DP guarantee; always running its cap of `max_steps` steps would be DP at
# `cap_rdp` / `cap_pld`.

# %%
allowed = book.gpate_ledger_steps()
if len(allowed):
    display(allowed.round(3))
    display(Markdown("; ".join(
        f"{r.config}: {r.steps_paper} steps under the paper ledger, {r.steps_rdp} under RDP, "
        f"{r.steps_pld} under PLD; the official rule takes at most {r.official_max_steps}, "
        f"and always taking that many would be DP at ε = {r.cap_rdp:.3g} (RDP), "
        f"{r.cap_pld:.3g} (PLD)"
        for r in allowed.itertuples()) + "."))

# %% [markdown]
# ## Non-private reference
#
# The evaluation classifier trained on the *real* training set (`datalens reference`), an
# upper bound for any synthetic data. It is not the paper's "DC-GAN (ε = ∞)" column, which
# trains the classifier on samples of a non-private DC-GAN; that column is shown beside it.

# %%
ref = book.reference_results()
if len(ref):
    dcgan = book.paper_table("tab_image.csv", "DC-GAN")[["dataset", "value"]].rename(
        columns={"value": "paper_dcgan_eps_inf"})
    display(ref.merge(dcgan, on="dataset", how="left").round(4))
    rising = ref[ref["best_epoch"] >= ref["eval_epochs"] - 1]
    if len(rising):
        display(Markdown(
            "Still improving at the end of its schedule: " + ", ".join(
                f"{r.dataset} ({r.eval_epochs} epochs, best epoch {r.best_epoch})"
                for r in rising.itertuples())
            + ". Such a reference is a lower bound on the converged one; extend it with "
            "`datalens reference --dataset D --epochs N`, which continues from its checkpoint."))
else:
    display(Markdown("No reference committed yet: run `datalens reference --dataset mnist`."))

# %% [markdown]
# ## How long must the evaluation classifier train?
#
# The paper trains the evaluation CNN for 600 epochs (what that costs on each device is
# computed below from the committed evaluations' `seconds`). The classifier uses constant-rate
# SGD, so a
# shorter schedule is exactly a prefix of the longer one, and both protocols at every length can
# be read off one run's per-epoch test accuracies. The table lists them for every committed
# run; *change_vs_longest* is the paper-protocol value at that length minus the value at the
# run's longest evaluation.

# %%
cost = book.evaluation_cost()
for dev, g in cost.groupby("device"):
    per = g["seconds_per_epoch"]
    at_600 = 600 * per.median()
    display(Markdown(
        f"{dev}: {len(g)} committed evaluation(s), {per.min():.3g}-{per.max():.3g} s per epoch "
        f"(median {per.median():.3g}; the spread includes what ran beside them), so 600 epochs "
        "take " + (f"~{at_600 / 3600:.2g} h" if at_600 >= 3600 else f"~{at_600 / 60:.2g} min")
        + " at the median."))
sched = book.schedule_table()
if len(sched):
    display(sched.pivot_table(index=["config", "folder", "evaluated_epochs"], columns="epochs",
                              values="paper_protocol").round(4))
    display(sched.pivot_table(index=["config", "folder", "evaluated_epochs"], columns="epochs",
                              values="clean_protocol").round(4))
    full = sched[sched["evaluated_epochs"] >= 600]
    lines = []
    for n in sorted(set(full["epochs"]) - {600}):
        worst = -full.loc[full["epochs"] == n, "change_vs_longest"].min()
        lines.append(f"{n} epochs: at most {worst:.4f} below the 600-epoch value"
                     if worst >= 5e-5 else f"{n} epochs: equal to it (to 4 decimals)")
    if lines:
        # the clean protocol (last epoch) at 600 epochs against its best value at the
        # shorter lengths, per run: how much the schedule length moves it
        drop = (full.groupby("run_dir").apply(
            lambda g: g["clean_protocol"].max()
            - g.loc[g["epochs"] == g["epochs"].max(), "clean_protocol"].iloc[0],
            include_groups=False))
        display(Markdown(
            f"Over the {full['run_dir'].nunique()} runs evaluated for the full 600 epochs, the "
            "paper-protocol accuracy after a shorter schedule is, in the worst run — "
            + "; ".join(lines) + f". The clean protocol (last epoch) at 600 epochs sits "
            f"{drop.min():.4f} to {drop.max():.4f} below its best value at the lengths above "
            "(0: the last epoch is its best), so it "
            + ("depends on the schedule length." if drop.max() >= 5e-3 else
               "barely depends on the schedule length here.")))

# %% [markdown]
# An evaluation whose classifier diverged (its weights became inf or NaN) predicts one class
# from then on: its clean protocol is that class's share of the test set, not a utility. Since
# 2026-11-27 each evaluation record says whether and when (`diverged_at_epoch`); earlier
# records do not.

# %%
diverged = book.diverged_evaluations()
if len(diverged):
    display(diverged)
else:
    display(Markdown("No committed evaluation records a diverged classifier."))
