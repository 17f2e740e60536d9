"""The DP-SGD chapters' tables: our cells (committed paper-scale summaries, else a run at the
notebook's profile) beside the paper's mean and standard deviation.

A row's ``difference`` exists only for paper-profile cells; a smoke or cpu row is a pipeline
check (the status page and the notebooks never compare it with the paper).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..results import PAPER_DIR
from .train import (
    CONTROL_COMPRESSING,
    SEARCH_PARAMETERS,
    OpacusMNISTCNN,
    cell_name,
    committed_searches,
    committed_summaries,
    control_cell,
    paper_hyperparameters,
    run_cell,
    run_control,
    search_brackets,
)

#: our method of each paper method label of ``data/paper/tab_dpsgd.csv``
PAPER_METHODS = {"TopAgg": "normtopk", "TopAgg norm-based": "normtopk",
                 "TopAgg dim-based": "dimtopk", "GM-DP": "gmdp"}


def table_cells(artifact: str, ks: list[float], dim_ks: list[float] | None = None
                ) -> list[tuple[str, str, str, float]]:
    """The columns of a DP-SGD table as :func:`cell_table` takes them: (the paper's method
    label and parameter, exactly as ``data/paper/tab_dpsgd.csv`` writes them, so that every
    row finds its paper number; our method; k). ``tab:dpsgd-ablation`` labels its NormTopK
    columns "TopAgg norm-based" and its dimension-based ones "TopAgg dim-based" (``dim_ks``);
    ``tab:dpsgd-mnist`` and ``tab:dpsgd-cifar`` label NormTopK "TopAgg"."""
    known = ("tab:dpsgd-mnist", "tab:dpsgd-cifar", "tab:dpsgd-ablation")
    if artifact not in known:
        raise ValueError(f"artifact must be one of {known}, got {artifact!r}")
    norm = "TopAgg norm-based" if artifact == "tab:dpsgd-ablation" else "TopAgg"
    cells = [(norm, f"k={k:g}", PAPER_METHODS[norm], k) for k in ks]
    if dim_ks:
        if artifact != "tab:dpsgd-ablation":
            raise ValueError(f"{artifact} has no dimension-based top-k columns")
        cells += [("TopAgg dim-based", f"k={k:g}", "dimtopk", k) for k in dim_ks]
    return cells + [("GM-DP", "", "gmdp", 1.0)]


def paper_rows(csv: str, artifact: str) -> pd.DataFrame:
    df = pd.read_csv(PAPER_DIR / csv, dtype={"parameter": str}, keep_default_na=False)
    return df[df.artifact == artifact]


def paper_value(paper: pd.DataFrame, method: str, parameter: str, epsilon: float,
                metric: str) -> float | None:
    sel = paper[(paper.method == method) & (paper.parameter == parameter)
                & (paper.metric == metric) & (pd.to_numeric(paper.epsilon) == epsilon)]
    return float(sel.value.iloc[0]) if len(sel) else None


def _row(summ: dict[str, Any], paper: pd.DataFrame, label: str, parameter: str,
         epsilon: float, dataset: str) -> dict[str, Any]:
    """One table row. ``steps`` is the T the seeds ran and ``steps_set_by`` the ledger that
    set it (None: T was fixed); ``eps_paper`` is ε under that ledger (the simple RDP
    conversion on orders up to 1024, a sound guarantee), ``eps_opacus_rdp`` what Opacus 1.6's
    own RDP accountant reports for the same run (its default orders stop at 63, so below
    ε ≈ 0.1 it reports more than the budget), ``eps_prv`` the PRV accountant's (the
    tightest); all None without noise."""
    ours, prof = 100 * summ["final"]["mean"], summ["profile"]
    p = paper_value(paper, label, parameter, epsilon, "test_accuracy_percent")
    eps = summ.get("epsilon_spent") or {}
    return {"dataset": dataset, "method": label, "epsilon": epsilon, "parameter": parameter,
            "profile": prof, "seeds": len(summ["seeds"]), "ours": ours,
            "ours_std": 100 * (summ["final"]["std"] or 0.0),
            "ours_best": 100 * summ["best"]["mean"], "paper": p,
            "paper_std": paper_value(paper, label, parameter, epsilon, "std_percent"),
            "difference": ours - p if prof == "paper" and p is not None else None,
            "steps": summ.get("steps"), "steps_set_by": summ.get("steps_set_by"),
            "eps_paper": eps.get("paper"), "eps_opacus_rdp": eps.get("opacus_hook_rdp"),
            "eps_prv": eps.get("prv"), "cell": summ["cell"],
            "hyperparameters": summ["config"].get("hyperparameter_source", "given")}


def cell_table(dataset: str, cells: list[tuple[str, str, str, float]], epsilons: list[float],
               paper: pd.DataFrame, *, profile: str, seeds: list[int],
               device: str = "cpu") -> pd.DataFrame:
    """``cells``: (paper method label, paper parameter, our method, k) per column of the
    table; one row per (ε, cell), for the budgets asked and every budget with a committed
    paper-scale cell of these columns. Cells not committed are trained at ``profile`` on
    ``device`` (``cpu``, ``cuda`` or ``auto``)."""
    committed = committed_summaries(dataset, "paper")
    names = {cell_name(method, k, 1.0).rsplit("-eps", 1)[0] for _, _, method, k in cells}
    landed = {math.inf if s["epsilon"] is None else float(s["epsilon"])
              for c, s in committed.items() if c.rsplit("-eps", 1)[0] in names}
    rows = []
    for eps in sorted(set(epsilons) | landed):
        for label, parameter, method, k in cells:
            summ = committed.get(cell_name(method, k, eps)) or run_cell(
                dataset, eps, method, k, profile, seeds=seeds, device=device)
            rows.append(_row(summ, paper, label, parameter, eps, dataset))
    return pd.DataFrame(rows)


def control_table(dataset: str, epsilons: list[float], ks: list[float], paper: pd.DataFrame,
                  *, profile: str, seeds: list[int], root=None,
                  device: str = "cpu") -> pd.DataFrame:
    """``tab:control``: the five scenarios (``scope`` flat) for each (ε, k) asked, trained at
    ``profile`` when not committed, and for every (ε, k) with a committed paper-scale TopAgg
    scenario; then the committed per-layer cells of the three compressing scenarios of that
    (ε, k), if any (ours, ``scope`` layer; never trained here), beside the same paper value:
    they test the reading that the paper's NormTopK ran within each layer. Scenarios not
    committed are trained on ``device`` (``cpu``, ``cuda`` or ``auto``)."""
    committed = committed_summaries(dataset, "paper", root)
    pairs = {(float(e), float(k)) for e in epsilons for k in ks}
    pairs |= {(float(s["epsilon"]), float(s["k"])) for c, s in committed.items()
              if c.startswith("control-k") and c.endswith("-topagg")}
    rows = []

    def add(summ: dict[str, Any], name: str, eps: float, k: float, scope: str) -> None:
        r = _row(summ, paper, name, f"k={k:g}", eps, dataset)
        eps_true = summ["config"]["epsilon"]
        r["epsilon_spent"] = math.inf if eps_true is None else eps_true
        r["scope"] = scope
        rows.append(r)

    for eps, k in sorted(pairs):
        have = {name: committed.get(control_cell(k, eps, name)) for name in CONTROL_SCENARIOS}
        if None in have.values():
            have = run_control(dataset, eps, k, profile, seeds=seeds, device=device)
        for name in CONTROL_SCENARIOS:
            add(have[name], name, eps, k, "flat")
        for name in CONTROL_SCENARIOS:
            summ = committed.get(control_cell(k, eps, name, "layer"))
            if name in CONTROL_COMPRESSING and summ is not None:
                add(summ, name, eps, k, "layer")
    return pd.DataFrame(rows)


#: ``tab:control``'s columns, in the paper's order
CONTROL_SCENARIOS = ("TopK-GM-DP", "TopAgg", "TopK-SGD", "GM-DP", "clipped SGD")


def similar_or_better(table: pd.DataFrame, top: str = "TopAgg", base: str = "GM-DP",
                      parameter: str | None = None) -> list[tuple[float, float, float, str]]:
    """The appendix's claim ("similar or even better" than GM-DP) per private budget: for each
    finite ε with paper-scale cells of both, (ε, ``top`` minus ``base`` final accuracy in
    points, their pooled standard deviation over seeds, ``top``'s parameter). ``top``'s cell is
    its best over the parameters in ``table`` (so k is chosen on test accuracy, as a reader of
    the paper's table would), or the one with ``parameter`` (no choice). ε = ∞ is left out:
    the claim is about private training."""
    out = []
    sub = table[(table.profile == "paper") & (table.epsilon < math.inf)]
    for eps, g in sub.groupby("epsilon"):
        b = g[g.method == base]
        t = g[(g.method == top) & ((g.parameter == parameter) if parameter else True)]
        if len(b) and len(t):
            best = t.loc[t.ours.idxmax()]
            out.append((float(eps), best.ours - float(b.ours.iloc[0]),
                        math.hypot(best.ours_std, float(b.ours_std.iloc[0])), best.parameter))
    return out


def search_table(dataset: str, root=None, profile: str = "paper") -> pd.DataFrame:
    """The committed validation-split searches (``train.run_search``) of ``profile``, one row
    per cell: its selection scope (``flat`` or ``layer``), grid size, how many points fit no
    step in the budget and how many trained, the clean choice (best
    validation accuracy) and the test-selected one (the paper's way), each with its
    hyper-parameters and its single-seed test accuracy in percent; and the committed
    paper-scale cell trained with the clean choice (``clean_cell_final``/``_std``: final test
    accuracy over its seeds, percent; None where the cell is not committed or trained with
    other settings; the standard deviation None below two seeds)."""
    rows = []
    cells = committed_summaries(dataset, profile, root)
    for cell, s in committed_searches(dataset, root).items():
        if s.get("profile") != profile:
            continue
        grid = {r["point"]: r for r in s["grid"]}
        v, t = grid[s["selected_validation"]["point"]], grid[s["selected_test"]["point"]]

        def hp(r: dict[str, Any]) -> str:
            return ", ".join(f"{p}={r[p]:g}" for p in SEARCH_PARAMETERS)
        infeasible = sum(str(r.get("status", "")).startswith("infeasible") for r in s["grid"])
        summ = cells.get(cell)
        trained = summ is not None and all(
            summ["config"].get(p) == v[p] for p in SEARCH_PARAMETERS)
        std = summ["final"]["std"] if trained else None
        rows.append({"cell": cell, "epsilon": s["epsilon"],
                     "scope": (s.get("overrides") or {}).get("scope", "flat"),
                     "points": len(grid), "infeasible_points": infeasible,
                     "trained_points": len(grid) - infeasible,
                     "validation_records": s["validation"], "profile": s["profile"],
                     "clean_choice": hp(v), "clean_validation": 100 * v["final_validation"],
                     "clean_test_final": 100 * v["final"], "test_choice": hp(t),
                     "test_choice_best": 100 * t["best"], "same_choice": v is t,
                     "clean_cell_final": 100 * summ["final"]["mean"] if trained else None,
                     "clean_cell_std": None if std is None else 100 * std})
    return pd.DataFrame(rows, columns=SEARCH_COLUMNS)


SEARCH_COLUMNS = ["cell", "epsilon", "scope", "points", "infeasible_points", "trained_points",
                  "validation_records",
                  "profile", "clean_choice", "clean_validation", "clean_test_final",
                  "test_choice", "test_choice_best", "same_choice", "clean_cell_final",
                  "clean_cell_std"]


def search_points(dataset: str, cell: str, root=None) -> pd.DataFrame:
    """One committed search's grid (``<cell>/search/search.json``), one row per point: its
    settings, steps and status, validation and test accuracy in percent (final; best over
    evaluations for the test set), and which point each rule chose (``clean_choice``: best
    validation accuracy; ``test_choice``: best test accuracy at any evaluation)."""
    searches = committed_searches(dataset, root)
    if cell not in searches:
        raise ValueError(f"no committed search for {cell!r} on {dataset}; committed: "
                         f"{', '.join(sorted(searches)) or 'none'}")
    s = searches[cell]

    def pct(v: Any) -> float | None:
        return None if v is None else 100 * v
    return pd.DataFrame([
        {"point": r["point"], **{p: r[p] for p in SEARCH_PARAMETERS}, "steps": r["steps"],
         "status": r.get("status", "trained"), "validation": pct(r["final_validation"]),
         "test_final": pct(r["final"]), "test_best": pct(r["best"]),
         "clean_choice": r["point"] == s["selected_validation"]["point"],
         "test_choice": r["point"] == s["selected_test"]["point"]} for r in s["grid"]])


def search_verdict(searches: pd.DataFrame) -> list[str]:
    """Sentences on :func:`search_table`'s rows: how often the clean (validation) and the
    test-selected choice agree, and what selecting on test data and reporting the best
    evaluation adds over the clean protocol, against the clean choice's own single-seed final
    accuracy (same seed) and against its committed multi-seed cell.

    Agreement is counted over the flat-selection searches in which at least two points could
    train (where one point alone fits the budget, both rules must pick it: no evidence either
    way). Per-layer searches are counted apart, and only their agreement is reported: the
    gap figures are the flat selection's, the selection the paper's tables use."""
    if searches.empty:
        return ["No validation-split search is committed: nothing to measure."]
    flat = searches[searches.scope == "flat"]
    layer = searches[searches.scope != "flat"]

    def agreement(rows: pd.DataFrame) -> tuple[int, int, int]:
        real = rows[rows.trained_points >= 2]
        return int(real.same_choice.sum()), len(real), len(rows) - len(real)
    out = []
    if len(flat):
        same, n, forced = agreement(flat)
        out.append(
            f"{len(flat)} committed flat-selection search{'es' if len(flat) > 1 else ''} (ε ∈ {{"
            + ", ".join(f"{e:g}" for e in sorted(set(flat.epsilon))) + "}): "
            + (f"of the {n} in which at least two points could train, the validation split "
               f"and the test set choose the same point in {same}" if n else
               "in none could more than one point train")
            + (f"; in {forced} only one point fits the budget, so both rules had to pick it."
               if forced else "."))
        gap = flat.test_choice_best - flat.clean_test_final
        out.append(
            "Choosing on the test set and reporting the best evaluation (the paper's protocol, "
            "if it selected on test data) reads "
            f"{gap.mean():+.2f} points on average (from {gap.min():+.2f} to {gap.max():+.2f}) "
            "above the clean choice's own final test accuracy, the same seed: that much of a "
            "single run's number is selection, not training.")
        cell = flat.dropna(subset=["clean_cell_final"])
        if len(cell):
            g = cell.test_choice_best - cell.clean_cell_final
            out.append(
                f"Against the committed cells trained with the clean choice ({len(cell)} of "
                f"{len(flat)}; final accuracy, mean over seeds), the test-selected single number "
                f"is {g.mean():+.2f} points higher on average (from {g.min():+.2f} to "
                f"{g.max():+.2f}).")
    if len(layer):
        same, n, forced = agreement(layer)
        out.append(f"Per-layer selection ({len(layer)} search{'es' if len(layer) > 1 else ''}, "
                   "counted apart; only its agreement is measured): "
                   + (f"of the {n} in which at least two points could train, the two rules "
                      f"agree in {same}" if n else "in none could more than one point train")
                   + (f"; in {forced} only one point fits the budget." if forced else "."))
    return out


#: the paper's label (``tab:dpsgd-search``'s method column) of each of our methods
SEARCH_LABELS = {"normtopk": "TopAgg", "gmdp": "GM-DP", "dimtopk": "TopAgg dim-based"}

SETTINGS_COLUMNS = ["epsilon", "method", "parameter", *SEARCH_PARAMETERS, "source",
                    "taken_from", "cell"]


def settings_table(dataset: str, root=None) -> pd.DataFrame:
    """``tab:dpsgd-search`` as we ran it: one row per committed paper-scale private cell (flat
    selection; the control scenarios take TopAgg's settings and are left out), the C, σ, B,
    lr it trained with, and ``source``: ``paper row`` (the paper's setting at this budget),
    ``nearest paper row`` (a budget the paper did not search, without a search of ours: the
    nearest searched budget's row, :func:`train.paper_hyperparameters`) or ``validation
    search`` (ours). For searched cells ``taken_from`` says which of the two bracketing rows
    (:func:`train.search_brackets`) each chosen value is."""
    rows = []
    for cell, s in sorted(committed_summaries(dataset, "paper", root).items()):
        cfg = s["config"]
        if (cell.startswith("control-") or s["epsilon"] is None
                or cfg.get("scope", "flat") != "flat" or s["method"] not in SEARCH_LABELS):
            continue
        eps, method, k = float(s["epsilon"]), s["method"], float(s["k"])
        src = str(cfg.get("hyperparameter_source", ""))
        used = {p: cfg[p] for p in SEARCH_PARAMETERS}
        taken = ""
        if src.startswith("validation"):
            kind, parts = "validation search", []
            for p in SEARCH_PARAMETERS:
                hits = [f"ε={b:g}" for b in search_brackets(dataset, eps)
                        if paper_hyperparameters(dataset, b, method, k)[p] == used[p]]
                parts.append(f"{p}: {' and '.join(hits) if hits else 'neither'}")
            taken = "; ".join(parts)
        elif "nearest searched budget" in src:
            kind = "nearest paper row"
        elif src.startswith("tab:dpsgd-search"):
            kind = "paper row" if "the paper has none" not in src else "MNIST's paper row"
        else:
            kind = src or "given"
        rows.append({"epsilon": eps, "method": SEARCH_LABELS[method],
                     "parameter": "" if method == "gmdp" else f"k={k:g}", **used,
                     "source": kind, "taken_from": taken, "cell": cell})
    return pd.DataFrame(rows, columns=SETTINGS_COLUMNS).sort_values(
        ["epsilon", "method", "parameter"], ignore_index=True)


SCOPE_COLUMNS = ["epsilon", "k", "seeds", "per_layer", "per_layer_std", "flat", "flat_std",
                 "gmdp", "gmdp_std", "per_layer_minus_flat"]


def scope_table(dataset: str, root=None) -> pd.DataFrame:
    """Committed paper-scale NormTopK cells with ``scope="layer"`` (ours, not in the paper: top-k
    within each parameter tensor) beside the flat cell of the same k and ε and GM-DP at that ε,
    final test accuracy in percent (mean and standard deviation over seeds). Reads records
    only: it never trains."""
    committed = committed_summaries(dataset, "paper", root)

    def acc(s: dict[str, Any] | None) -> tuple[float | None, float | None]:
        if s is None:
            return None, None
        return 100 * s["final"]["mean"], 100 * (s["final"]["std"] or 0.0)

    rows = []
    for c, s in sorted(committed.items()):
        if (s["method"] != "normtopk" or s["config"].get("scope") != "layer"
                or c.startswith("control-")):  # control cells: control_table
            continue
        eps = math.inf if s["epsilon"] is None else float(s["epsilon"])
        layer, layer_sd = acc(s)
        flat, flat_sd = acc(committed.get(cell_name("normtopk", s["k"], eps)))
        gm, gm_sd = acc(committed.get(cell_name("gmdp", 1.0, eps)))
        rows.append({"epsilon": eps, "k": s["k"], "seeds": len(s["seeds"]),
                     "per_layer": layer, "per_layer_std": layer_sd, "flat": flat,
                     "flat_std": flat_sd, "gmdp": gm, "gmdp_std": gm_sd,
                     "per_layer_minus_flat": None if flat is None else layer - flat})
    return pd.DataFrame(rows, columns=SCOPE_COLUMNS)


def control_observations(acc: dict[str, float], sd: dict[str, float] | None = None
                         ) -> dict[str, Any]:
    """The appendix's observations on ``tab:control`` (paper l.755-760), measured on one
    (ε, k) of accuracies by scenario (``acc``, percent; ``sd``: their standard deviations over
    seeds, optional):

    - ``noise``: what noise costs, without compression (clipped SGD - GM-DP) and with it
      (TopK-SGD - TopK-GM-DP); ``compression``: what compression costs, without noise
      (clipped SGD - TopK-SGD) and with it (GM-DP - TopK-GM-DP);
    - ``noise_larger``: the paper's second observation, noise costs more than compression in
      both pairs;
    - ``topagg_vs_gmdp`` (TopAgg - GM-DP) and ``similar_or_better``: the third, TopAgg within
      the pooled standard deviation of the two cells or above (strictly not below without
      ``sd``)."""
    need = ("TopAgg", "TopK-GM-DP", "TopK-SGD", "GM-DP", "clipped SGD")
    missing = [n for n in need if acc.get(n) is None]
    if missing:
        raise ValueError(f"tab:control needs every scenario; missing {missing}")
    noise = {"without compression": acc["clipped SGD"] - acc["GM-DP"],
             "with compression": acc["TopK-SGD"] - acc["TopK-GM-DP"]}
    compression = {"without noise": acc["clipped SGD"] - acc["TopK-SGD"],
                   "with noise": acc["GM-DP"] - acc["TopK-GM-DP"]}
    diff = acc["TopAgg"] - acc["GM-DP"]
    spread = 0.0
    if sd is not None and sd.get("TopAgg") is not None and sd.get("GM-DP") is not None:
        spread = math.sqrt((sd["TopAgg"] ** 2 + sd["GM-DP"] ** 2) / 2)
    return {"noise": noise, "compression": compression,
            "noise_larger": (noise["without compression"] > compression["without noise"]
                             and noise["with compression"] > compression["with noise"]),
            "topagg_vs_gmdp": diff, "pooled_sd": spread,
            "similar_or_better": diff >= -spread}


def plot_budget_curves(table: pd.DataFrame, title: str, ax: Any = None,
                       max_epsilon: float = math.inf) -> Any:
    """``fig:dpsgd``: accuracy against ε for each column of a :func:`cell_table` (one line per
    method and k, ±1 standard deviation over seeds as a band), filled markers for paper-scale
    cells, hollow for pipeline checks, the paper's points as crosses (where ``paper`` has
    them). ``max_epsilon``: only budgets up to it (the paper's panel b shows CIFAR-10 under
    small ε). ε = ∞ is off the log axis and left to the table. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    sub = table[(table.epsilon < math.inf) & (table.epsilon <= max_epsilon)]
    for (label, par), g in sub.groupby(["method", "parameter"], sort=False):
        g = g.sort_values("epsilon")
        ours = pd.to_numeric(g.ours, errors="coerce")
        sd = pd.to_numeric(g.ours_std, errors="coerce").fillna(0.0)
        at_paper = (g.profile == "paper").to_numpy()
        name = f"ours: {label}" + (f" {par}" if par else "")
        # the line and band join paper-scale cells only (a pipeline check is no point of the
        # curve); a column without any is drawn dotted through its checks
        x, y, e = ((g.epsilon[at_paper], ours[at_paper], sd[at_paper]) if at_paper.any()
                   else (g.epsilon, ours, sd * 0))
        line, = ax.plot(x, y, "-" if at_paper.any() else ":", label=name)
        ax.fill_between(x, y - e, y + e, color=line.get_color(), alpha=0.2)
        ax.plot(g.epsilon[at_paper], ours[at_paper], "o", color=line.get_color())
        ax.plot(g.epsilon[~at_paper], ours[~at_paper], "o", mfc="none",
                color=line.get_color())
        ax.plot(g.epsilon, pd.to_numeric(g.paper, errors="coerce"), "x",
                color=line.get_color(), markersize=8)
    ax.set_xscale("log")
    ax.set_xlabel("ε (δ = 1e-5)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{title}: ours (lines, ±1 sd; hollow: pipeline check) and the paper (x)",
                 fontsize=9)
    if max_epsilon == math.inf and (table.epsilon == math.inf).any():
        ax.annotate("ε = ∞ is off the log axis: see the table", (0.99, 0.01),
                    xycoords="axes fraction", ha="right", fontsize=7)
    ax.legend(fontsize=7, loc="lower center")
    return ax


def kept_coordinates(root: Path | None = None) -> pd.DataFrame:
    """How many of an example's gradient coordinates flat NormTopK keeps on the MNIST CNN, per
    k, from the committed ``benchmarks/bench_dpsgd.py`` record(s)
    (``benchmarks/results/dpsgd-*.json``: the median and largest count over a batch of
    per-example gradients of a model after some SGD steps), beside the number of coordinates
    ``d`` of :class:`.train.OpacusMNISTCNN` (counted here). One row per record and k."""
    d = sum(p.numel() for p in OpacusMNISTCNN().parameters())
    folder = Path(root) if root else Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = []
    for f in sorted(folder.glob("dpsgd-*.json")):
        rec = json.loads(f.read_text())
        for r in rec.get("rows", []):
            if "kept_median" in r:
                rows.append({"record": f.name, "git_sha": str(rec.get("git_sha", ""))[:7],
                             "k": r["k"], "kept_median": int(r["kept_median"]),
                             "kept_max": int(r["kept_max"]), "d": d,
                             "median_fraction": r["kept_median"] / d})
    return pd.DataFrame(rows, columns=["record", "git_sha", "k", "kept_median", "kept_max", "d",
                                       "median_fraction"])
