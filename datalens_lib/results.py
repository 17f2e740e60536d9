"""Read the committed run records and put them beside the paper's numbers.

Layout: ``data/results/datalens/<config>/<profile>/run.json`` (training record, see
``datalens.DataLensTrainer.record``) and ``eval-<epochs>ep.json`` (utility evaluation).
The paper's numbers come only from ``data/paper/*.csv``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from .config import trains_paper_setting
from .provenance import REPO_ROOT
from .store import PROFILE_RANK

RESULTS_DIR = REPO_ROOT / "data" / "results"
PAPER_DIR = REPO_ROOT / "data" / "paper"
#: the shortest evaluation compared with the paper's numbers (600 epochs there, the configs'
#: ``eval_epochs``). A shorter evaluation's paper-protocol value is the maximum over its first
#: epochs only; over every committed run evaluated for 600 epochs, the maximum over the first
#: 30 is at most 0.0002 below the 600-epoch one, and over the first 5 up to 0.29 below
#: (``book.schedule_table``, T1; ``datalens evaluate`` records this check in a short
#: evaluation's ``schedule_check``). So 30 epochs are compared, fewer are not.
MIN_COMPARED_EVAL_EPOCHS = 30


#: ``tab:image``'s method names and our registry's (``datalens_lib.methods.METHODS`` plus the
#: methods not implemented yet)
PAPER_METHODS = {"DataLens": "datalens", "DC-GAN": "dcgan", "G-PATE": "gpate",
                 "DP-GAN": "dpgan", "PATE-GAN": "pategan", "GS-WGAN": "gswgan"}
#: our registry's keys -> the paper's method names (the inverse of :data:`PAPER_METHODS`)
PAPER_NAMES = {v: k for k, v in PAPER_METHODS.items()}
#: the suffix of a config in DPImageBench's large-batch DP-GAN setting (``<dataset>-eps1-large``:
#: as many fakes as real examples per step, ``methods.dpgan``), a variant of the paper's setting
LARGE_BATCH_SUFFIX = "-large"


def setting_label(method: str, config: str) -> tuple[str, str, bool]:
    """How the tables name a run of our registry's ``method`` in ``config``: ``(label,
    paper_method, variant)``. ``paper_method`` is the paper's name of the method (its cell's
    key); a config of DPImageBench's large-batch setting (:data:`LARGE_BATCH_SUFFIX`) is a
    variant of that cell, labelled "<method> (large batch)" and never compared with the paper's
    number. A method the paper does not name keeps our key."""
    name = PAPER_NAMES.get(method, method)
    large = config.endswith(LARGE_BATCH_SUFFIX)
    return (f"{name} (large batch)" if large else name), name, large


def shown_profile_of(profile: str, paper_training: bool) -> str:
    """The profile a run recorded at ``profile`` is shown and compared at: ``paper`` where it
    trains the paper setting and changes only the evaluation (``paper_training``:
    :func:`config.trains_paper_setting`, e.g. DP-GAN's small-batch ``cpu`` runs: paper-scale
    training, a 30-epoch evaluation, which :func:`compared_with_paper` judges on its own), else
    its own."""
    return "paper" if paper_training else profile


def recorded_run_profile(method: str, config: str, rec: dict[str, Any]) -> str:
    """:func:`shown_profile_of` a committed run of ``method`` and ``config`` from its record
    ``rec`` (``run.json``): whether it trains the config's paper setting is
    :func:`config.trains_paper_setting` of its recorded config."""
    return shown_profile_of(rec["profile"], trains_paper_setting(
        config, rec["profile"], method, recorded=rec["config"]))


def run_family(profile: str | None, moment_dtype: str | None) -> str:
    """``gpu``: a paper-profile run with the paper's float32 Adam moments (the GPU queue's);
    ``cpu``: a paper-profile run with bfloat16 moments (the CPU queue's, the only way 4000
    teachers fit 24 GiB, evaluated for 30 epochs); ``-``: another profile (a pipeline check).
    Methods without Adam moments of their own count as ``gpu`` at the paper profile. (A run
    whose profile changes only the evaluation's length is passed here as ``paper``:
    :func:`config.trains_paper_setting`.)"""
    if profile != "paper":
        return "-"
    return "cpu" if moment_dtype == "bfloat16" else "gpu"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and x != x)


def compared_with_paper(profile: str | None, family: str | None = None,
                        eval_epochs: float | None = None, variant: bool | None = None) -> bool:
    """Whether a cell of ours is compared with the paper's number (given a difference, counted
    in the status page's medians): the paper profile (a smoke or cpu profile is a pipeline
    check, unless it changes only the evaluation's length and is passed as ``paper``:
    :func:`config.trains_paper_setting`), not the CPU family (``family == "cpu"``: the paper
    setting with bfloat16 Adam moments, compared within its family only), evaluated for at
    least
    :data:`MIN_COMPARED_EVAL_EPOCHS` epochs, and not a variant of the setting the paper's
    number is for (``variant``). Missing columns (None or NaN) do not disqualify a cell; a row
    with no profile at all is compared (a paper-only table). :func:`why_not_compared` says
    which condition fails."""
    return not why_not_compared(profile, family, eval_epochs, variant)


def why_not_compared(profile: str | None, family: str | None = None,
                     eval_epochs: float | None = None, variant: bool | None = None) -> str:
    """The first condition of :func:`compared_with_paper` that a cell fails, in words (the
    status page's cell list shows it), or ``""`` when the cell is compared."""
    if not _missing(profile) and profile != "paper":
        return f"{profile} profile: a pipeline check"
    if family == "cpu":
        return "CPU family (bfloat16 Adam moments): compared within its family"
    if variant is True:
        return "a variant of the paper's setting"
    if not _missing(eval_epochs) and float(eval_epochs) < MIN_COMPARED_EVAL_EPOCHS:
        return (f"{float(eval_epochs):g}-epoch evaluation (fewer than "
                f"{MIN_COMPARED_EVAL_EPOCHS})")
    return ""


def paper_values(artifact_file: str = "tab_image.csv", root: Path | None = None
                 ) -> list[dict[str, Any]]:
    """Rows of a transcribed paper table (``value`` as float, ``epsilon`` as str)."""
    path = (root or PAPER_DIR) / artifact_file
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["value"] = float(r["value"])
    return rows


def paper_value(dataset: str, epsilon: float | None, method: str = "DataLens",
                artifact_file: str = "tab_image.csv", root: Path | None = None) -> float | None:
    """The paper's number of one cell; ``epsilon`` None or inf is the ε = ∞ column."""
    inf = epsilon is None or epsilon == float("inf")
    for r in paper_values(artifact_file, root):
        if r["dataset"] != dataset or r["method"] != method:
            continue
        if (r["epsilon"] == "inf") if inf else (
                r["epsilon"] != "inf" and abs(float(r["epsilon"]) - epsilon) < 1e-9):
            return r["value"]
    return None


def latest_eval(run_dir: Path) -> dict[str, Any] | None:
    """The evaluation with the most epochs in a run folder (``eval-<epochs>ep.json``)."""
    evals = sorted(Path(run_dir).glob("eval-*ep.json"),
                   key=lambda p: int(p.stem.split("-")[1][:-2]))
    return json.loads(evals[-1].read_text()) if evals else None


#: the folders of a config's main run at each profile (others are seeds and variants)
MAIN_FOLDERS = ("paper", "paper-cpu-fast", "cpu", "smoke")


def _rank(r: dict[str, Any]) -> tuple[bool, int, bool]:
    """A main run's claim to its cell: compared with the paper first, then the largest
    profile shown, then a run recorded at the paper profile before one shown as paper because
    its profile changes only the evaluation (whose evaluation is the shorter)."""
    return r["compared"], PROFILE_RANK.get(r["profile"], 0), r["recorded_profile"] == "paper"


def comparison(root: Path | None = None, paper_root: Path | None = None
               ) -> list[dict[str, Any]]:
    """``tab:image``, every method with committed runs: per method and config its main run
    (:data:`MAIN_FOLDERS`; one compared with the paper first, then the largest profile)
    beside the paper's number under both evaluation protocols; ``difference`` only where
    :func:`compared_with_paper` allows it (``profile``: ``paper`` for a run whose recorded
    profile, ``recorded_profile``, trains the paper setting: :func:`config.trains_paper_setting`),
    ``epsilon_spent`` under the ledger that stopped the
    run (``ledger``: the record's ``conversion``, e.g. ``paper`` for DataLens and G-PATE,
    Opacus's ``rdp`` for DP-GAN; None without noise)."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for run_file in sorted((root or RESULTS_DIR).glob("*/*/*/run.json")):
        method, config, folder = run_file.parts[-4:-1]
        if method not in PAPER_NAMES or folder not in MAIN_FOLDERS:
            continue
        rec = json.loads(run_file.read_text())
        ev = latest_eval(run_file.parent)
        profile = recorded_run_profile(method, config, rec)
        fam = run_family(profile, rec["config"].get("moment_dtype"))
        eps = rec.get("target_epsilon")
        label, paper_method, large = setting_label(method, config)
        ledger = rec.get("conversion", "paper")  # the one that stopped the run
        r = {"method": label, "config": config, "folder": folder,
             "dataset": rec["config"]["dataset"],
             "epsilon": float("inf") if eps is None else eps, "profile": profile,
             "recorded_profile": rec["profile"],
             "family": fam, "eval_epochs": ev["epochs"] if ev else None,
             "ours_paper_protocol": ev["paper"] if ev else None,
             "ours_clean_protocol": ev["clean"] if ev else None, "steps": rec["steps"],
             "ledger": ledger, "epsilon_spent": (rec.get("epsilon") or {}).get(ledger)}
        r["paper_method"] = paper_method
        r["compared"] = ev is not None and compared_with_paper(r["profile"], fam,
                                                               r["eval_epochs"], large)
        old = best.get((method, config))
        if old is None or _rank(r) > _rank(old):
            best[(method, config)] = r
    out = []
    for r in (best[k] for k in sorted(best)):
        paper = paper_value(r["dataset"], r["epsilon"], r["paper_method"], root=paper_root)
        ours = r["ours_paper_protocol"]
        out.append({**{k: v for k, v in r.items() if k not in ("compared", "paper_method")},
                    "paper": paper,
                    "difference": ours - paper if r["compared"] and paper is not None
                    and ours is not None else None})
    return out
