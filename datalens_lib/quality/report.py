"""T3 (``tab:visual``, ``tab:full_image``): IS and FID of every run whose samples we have.

Sources, in order of trust:

* **published subsets** of committed paper-scale runs: ``data/results/<method>/<config>/
  <folder>/samples-10k.npz`` named by ``run.json`` → ``published_samples``
  (``datalens publish-samples``); anyone can re-score them;
* **pipeline checks**: a run the notebook trains at a reduced profile (smoke, cpu); never
  put next to a paper number as a difference.

Our numbers are "IS (domain classifier)" and "FID (domain features)"
(:mod:`datalens_lib.quality.classifier`), on another scale than the paper's (an unpublished
MNIST/Fashion classifier for IS, ImageNet Inception for FID): each row is marked
``comparable: False`` so the status page counts it as shown at paper scale but never takes a
difference; compare the real-data row and the methods' ranking instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..results import RESULTS_DIR, recorded_run_profile, setting_label
from ..samples import load_samples, sha256_file
from .classifier import SCORES_VERSION, load_domain_classifier, score_images

METRICS = {"is": "inception_score", "fid": "fid"}


def published_runs(root: Path | None = None) -> list[dict[str, Any]]:
    """Every committed run with a published sample subset present on disk, labelled as the
    utility tables label it (``results.comparison``): a run whose recorded profile trains the
    paper setting and changes only the evaluation (:func:`config.trains_paper_setting`,
    DP-GAN's small-batch ``cpu`` runs) is at the ``paper`` profile (``recorded_profile`` keeps
    its own; its samples do not depend on the evaluation), and a run of a ``-large`` config
    (DPImageBench's large-batch DP-GAN) is a variant, "DP-GAN (large batch)", whose
    ``paper_method`` names the paper's cell it stands beside (:func:`results.setting_label`,
    :func:`results.recorded_run_profile`)."""
    out = []
    for run_json in sorted((root or RESULTS_DIR).glob("*/*/*/run.json")):
        rec = json.loads(run_json.read_text())
        pub = rec.get("published_samples")
        if not pub or not (run_json.parent / pub["file"]).exists():
            continue
        method, config = run_json.parents[2].name, run_json.parents[1].name
        label, name, large = setting_label(method, config)
        eps = rec.get("target_epsilon", rec["config"].get("epsilon"))
        out.append({"method": label, "paper_method": name,
                    "variant": large, "dataset": rec["config"]["dataset"],
                    "epsilon": "inf" if eps is None else f"{eps:g}",
                    "config": config, "folder": run_json.parent.name,
                    "profile": recorded_run_profile(method, config, rec),
                    "recorded_profile": rec["profile"], "path": run_json.parent / pub["file"],
                    "published": pub, "git_sha": rec.get("git_sha")})
    return out


def unpublished_runs(root: Path | None = None) -> list[str]:
    """Committed paper-profile runs whose samples are not published (``method/config/folder``):
    they cannot be scored until the run is repeated with ``datalens publish-samples``."""
    out = []
    for run_json in sorted((root or RESULTS_DIR).glob("*/*/*/run.json")):
        rec = json.loads(run_json.read_text())
        if rec.get("profile") == "paper" and not rec.get("published_samples"):
            out.append("/".join(run_json.parent.parts[-3:]))
    return out


def _paper(csv: pd.DataFrame, dataset: str, method: str, epsilon: str, metric: str):
    sel = csv[(csv.dataset == dataset) & (csv.method == method) & (csv.metric == metric)
              & (pd.to_numeric(csv.epsilon, errors="coerce")
                 == (np.inf if epsilon == "inf" else float(epsilon)))]
    return float(sel.value.iloc[0]) if len(sel) else None


def stored_score(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The committed ``quality.json`` of a published run (``datalens quality <folder>``,
    with its provenance) when it scored exactly this subset with the committed classifier:
    the same file name and SHA-256 as ``published_samples`` and the file on disk, all of its
    rows, the classifier whose weights are committed now, the scores' current
    ``SCORES_VERSION``. Otherwise None: score it again."""
    if "path" not in entry or "published" not in entry:
        return None
    path = Path(entry["path"]).parent / "quality.json"
    if not path.exists():
        return None
    q = json.loads(path.read_text())
    _, clf = load_domain_classifier(entry["dataset"])
    if (q.get("samples") != Path(entry["path"]).name or q.get("limit") is not None
            or q.get("scores_version") != SCORES_VERSION
            or q.get("dataset") != entry["dataset"]
            or q.get("samples_sha256") != entry["published"]["sha256"]
            or q.get("classifier", {}).get("sha256") != clf["sha256"]
            or sha256_file(entry["path"]) != q["samples_sha256"]):
        return None
    return q


def stale_quality_records(root: Path | None = None, *, every: bool = False) -> list[Path]:
    """Published runs without a current committed score (:func:`stored_score`; ``every``: all
    published runs): the folders ``make quality-records [FORCE=1]`` scores with ``datalens
    quality`` before they are committed."""
    return [Path(p["path"]).parent for p in published_runs(root)
            if every or stored_score(p) is None]


def score_rows(entries: list[dict[str, Any]], paper: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per (entry, metric): ours beside the paper's ``tab:full_image`` value. A
    published run's committed score (:func:`stored_score`) is read, not recomputed; the
    ``scored`` column says which (the git sha of the code that scored it, or "now")."""
    rows = []
    for e in entries:
        s = stored_score(e)
        if s is None:
            x, y = (e["x"], e["y"]) if "x" in e else load_samples(e["path"])
            s = score_images(x, y, e["dataset"])
        for key, metric in METRICS.items():
            paper_method = e.get("paper_method", e["method"])
            rows.append({"dataset": e["dataset"], "method": e["method"],
                         "paper_method": paper_method,
                         "epsilon": e["epsilon"], "metric": metric, "ours": s[key],
                         "paper": _paper(paper, e["dataset"], paper_method, e["epsilon"],
                                         metric),
                         "profile": e["profile"], "variant": bool(e.get("variant")),
                         "comparable": False,
                         "source": e["source"] if "source" in e
                         else f"{e['config']}/{e['folder']}",
                         "n": s["n"], "label_agreement": s.get("label_agreement"),
                         "scored": s.get("git_sha") or "now",
                         "classifier_sha256": s["classifier"]["sha256"][:12]})
    return rows


def real_rows(dataset: str, paper: pd.DataFrame) -> list[dict[str, Any]]:
    """The real-data reference: the real test set scored like a generator's samples."""
    from ..data import load_dataset

    ds = load_dataset(dataset)
    return score_rows([{"dataset": dataset, "method": "real data", "epsilon": "inf",
                        "profile": "paper", "x": ds.x_test, "y": ds.y_test,
                        "source": "real test set (10,000)"}], paper)


def subset_reevaluations(root: Path | None = None) -> pd.DataFrame:
    """Issue 14's check that a published subset stands for its run: for every published run,
    the utility (paper protocol: best test accuracy over epochs) of the full run's samples
    (``eval-<E>ep.json``, the longest evaluation committed; other evaluation seeds of the same
    samples from ``eval-<E>ep-seed<S>.json``) beside the 10k subset's
    (``samples-10k-eval-<E>ep.json`` and, seeing as many images as the full run's evaluation,
    ``samples-10k-eval-<10E>ep.json``: about as many SGD steps, e.g. 6,000 batches of 512
    against 5,880, both counted in the table).

    ``spread``: the largest gap between evaluation seeds of the full samples (None with one
    seed; with two it is a rough yardstick, not an interval); ``verdict``: whether the subset
    at about the same number of SGD steps lies within that spread of the full run's seed-0
    evaluation."""
    rows = []
    for pub in published_runs(root):
        d = pub["path"].parent
        done = sorted(int(m.group(1)) for f in d.glob("eval-*ep.json")
                      if (m := re.fullmatch(r"eval-(\d+)ep\.json", f.name)))
        if not done:
            continue
        epochs = done[-1]  # the run's own evaluation (the longest, when there are several)
        full = json.loads((d / f"eval-{epochs}ep.json").read_text())
        if full.get("seed", 0) != 0:  # (before --seed named its record, it could overwrite)
            continue
        seeds = [full["paper"]] + [json.loads(f.read_text())["paper"] for f in
                                   sorted(d.glob(f"eval-{epochs}ep-seed*.json"))]
        n_full, n_sub = full["n_train"], pub["published"]["n"]
        same_steps = epochs * n_full // n_sub  # as many images seen (batches: about as many)
        batch = full.get("batch_size", 512)
        sub = {}
        for e in sorted({epochs, same_steps}):
            f = d / f"{pub['path'].stem}-eval-{e}ep.json"
            sub[e] = json.loads(f.read_text())["paper"] if f.exists() else None
        spread = max(seeds) - min(seeds) if len(seeds) > 1 else None
        at_steps = sub[same_steps]
        diff = None if at_steps is None else at_steps - full["paper"]
        verdict = ("not yet evaluated" if diff is None else "one evaluation seed: spread "
                   "unknown" if spread is None else "within the evaluation-seed spread"
                   if abs(diff) <= spread else "outside the evaluation-seed spread")
        rows.append({"dataset": pub["dataset"], "epsilon": pub["epsilon"],
                     "method": pub["method"], "run": f"{pub['config']}/{pub['folder']}",
                     "full_epochs": epochs, "full_images": n_full,
                     "full_seeds": ", ".join(f"{a:.4f}" for a in seeds), "spread": spread,
                     "subset_images": n_sub, f"subset_{epochs}ep": sub[epochs],
                     "subset_same_steps_epochs": same_steps, "subset_same_steps": at_steps,
                     "sgd_steps_full": epochs * -(-n_full // batch),
                     "sgd_steps_subset": same_steps * -(-n_sub // batch),
                     "difference": diff, "verdict": verdict})
    return pd.DataFrame(rows)


def choose_per_cell(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (dataset, method, ε, metric) for the status page: the ``paper`` folder
    first, then float32 compute before bfloat16, then by name."""
    def rank(r):
        src = str(r.get("source", ""))
        return (r["profile"] != "paper", not src.endswith("/paper"), "bf16" in src, src)

    best: dict[tuple, dict[str, Any]] = {}
    for r in sorted(rows, key=rank):
        best.setdefault((r["dataset"], r["method"], r["epsilon"], r["metric"]), r)
    return list(best.values())


def rankings(df: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, ε and metric with at least two methods having both numbers: Spearman's
    rank correlation between our values and the paper's across methods (real data and
    variants left out)."""
    out = []
    sub = df[(df.method != "real data") & df.ours.notna() & df.paper.notna()]
    if "variant" in sub:  # a variant (DP-GAN's large batch) is not the paper's method
        sub = sub[~sub["variant"].fillna(False).astype(bool)]
    for (dataset, eps, metric), g in sub.groupby(["dataset", "epsilon", "metric"]):
        g = g.drop_duplicates("method")
        if len(g) < 2:
            continue
        rho = g.ours.rank().corr(g.paper.rank())
        out.append({"dataset": dataset, "epsilon": eps, "metric": metric, "methods": len(g),
                    "spearman": rho})
    return pd.DataFrame(out, columns=["dataset", "epsilon", "metric", "methods", "spearman"])
