"""The book's front door: how much of each paper artifact is reproduced, and how well.

One row per artifact of the paper (``data/paper/artifacts.csv``: every table and figure with
results, reproduced or not), computed from the results store (what the notebooks wrote) and
the paper's transcribed numbers (``data/paper/*.csv``):

* **cells**: the paper's cells of that artifact (its CSV rows of the compared metric) and how
  many of them we have *at paper scale* (``profile == "paper"``; ``paper cells covered``:
  a cell of ours with the paper cell's dataset, method, ε and parameter, not a variant of its
  setting; :func:`missing_cells` lists the others and why each is missing). ``at paper
  scale`` counts our paper-scale cells, with those the paper has no number for;
* **median |ours − paper|** over the paper-scale cells only. A smoke or cpu-profile result is a
  pipeline check: it is counted as such and never compared with a paper number (a profile that
  changes only the evaluation's length trains the paper setting and is stored as ``paper``:
  ``config.trains_paper_setting``);
* rows marked ``comparable: False`` (numbers on another scale than the paper's, such as IS
  and FID from our domain classifiers) count as paper-scale cells but never enter the median;
  so do paper-profile rows run otherwise than the paper's number
  (:func:`results.compared_with_paper`: the CPU family's bfloat16 Adam moments and 30-epoch
  evaluation, a shorter evaluation, a variant setting);
* a **verdict**: ``agrees`` (median |difference| within ``tolerance``), ``differs``,
  ``pipeline check only`` (ran, but not at paper scale), ``needs user data`` (every cell we
  lack needs a dataset that cannot be downloaded here), ``not run``, or for artifacts without
  numbers to compare (figures, timings on other hardware) ``shown at paper scale``.

:func:`cell_table` lists the cells behind those counts: every paper-scale cell of ours beside
the paper's number, with ``ours − paper`` where the cell is compared and the reason where not.

The tolerance is a parameter (default 2 points of accuracy) because most cells have a single
training seed (the status page counts the main settings that have several); with several
seeds per cell, the seed spread is the natural tolerance.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from . import store
from .results import PAPER_DIR, PAPER_METHODS, compared_with_paper, run_family, why_not_compared

VERDICTS = ("agrees", "differs", "shown at paper scale", "pipeline check only",
            "needs user data", "not run")


@dataclass(frozen=True)
class Artifact:
    artifact: str
    kind: str
    title: str
    page: str | None
    stores: tuple[str, ...]
    metric: str | None
    user_data: tuple[str, ...]


def artifacts() -> list[Artifact]:
    """Every paper artifact with results, in the paper's order (``data/paper/artifacts.csv``)."""
    df = pd.read_csv(PAPER_DIR / "artifacts.csv", dtype=str, keep_default_na=False)
    return [Artifact(r.artifact, r.kind, r.title, r.page or None,
                     tuple(s for s in r.store.split(";") if s), r.paper_metric or None,
                     tuple(s for s in r.user_data.split(";") if s))
            for r in df.itertuples()]


def paper_cells(art: Artifact) -> pd.DataFrame:
    """The paper's cells of ``art`` in the compared metric (empty when not transcribed)."""
    frames = [pd.read_csv(p, dtype={"parameter": str}, keep_default_na=False)
              for p in sorted(PAPER_DIR.glob("tab_*.csv"))]
    df = pd.concat(frames, ignore_index=True)
    return df[(df.artifact == art.artifact) & (df.metric == (art.metric or ""))]


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def our_rows(art: Artifact, root=None) -> list[dict[str, Any]]:
    """Our cells of ``art``: the rows of the best stored result of each of its store names,
    one per cell (a paper-profile row wins over a smaller profile's row of the same cell)."""
    rows: dict[tuple, dict[str, Any]] = {}
    for name in art.stores:
        rec = store.best(store.load_results(name, root=root))
        if rec is None:
            continue
        res = rec["result"]
        cells = res if isinstance(res, list) else res.get("rows", [])
        for c in cells:
            if not isinstance(c, dict):
                continue
            c = {**c, "method": c.get("method", "DataLens"),
                 "profile": c.get("profile", rec["profile"])}
            fam = c.get("family")  # a table without the column: the profile's default
            c["family"] = run_family(c["profile"], None) if fam is None or fam != fam else fam
            # the CPU family's row of a cell is kept beside the other (T5 shows both); any
            # other rows of a cell are one cell, the largest profile winning
            key = tuple(str(c.get(k)) for k in ("dataset", "method", "epsilon", "parameter",
                                                 "config", "teachers")) + (
                c["family"] == "cpu",)
            old = rows.get(key)
            if old is None or store.PROFILE_RANK.get(c.get("profile"), 0) > \
                    store.PROFILE_RANK.get(old.get("profile"), 0):
                rows[key] = c
    return list(rows.values())


def _scale(art: Artifact) -> float:
    """Units of the artifact's metric per unit of accuracy: 100 for ``*_percent`` metrics (the
    tolerance is given, and the heat-map drawn, in accuracy as a fraction)."""
    return 100.0 if (art.metric or "").endswith("_percent") else 1.0


def _is_compared(c: dict[str, Any]) -> bool:
    """A paper-scale cell with both numbers on the same scale (a row marked
    ``comparable: False``, e.g. IS from our domain classifier against the paper's IS from an
    unpublished one, is shown at paper scale but never enters a difference)."""
    return (c.get("profile") == "paper" and c.get("comparable", True) is not False
            and compared_with_paper(c.get("profile"), c.get("family"), c.get("eval_epochs"),
                                    c.get("variant"))
            and _finite(c.get("ours")) and _finite(c.get("paper")))


def summarise(art: Artifact, tolerance: float = 0.02, root=None) -> dict[str, Any]:
    """The status row of one artifact (module docstring)."""
    if not (isinstance(tolerance, (int, float)) and tolerance > 0):
        raise ValueError(f"tolerance must be > 0, got {tolerance!r}")
    paper = paper_cells(art) if art.metric else pd.DataFrame(columns=["dataset"])
    ours = our_rows(art, root=root)
    compared = [c for c in ours if _is_compared(c)]
    have = _covered_keys(ours, paper)
    # a cell ran when it has a number (tables) or any record at some profile (figures, timing)
    ran = [c for c in ours if _finite(c.get("ours")) or (not art.metric and c.get("profile"))]
    at_paper = [c for c in ran if c.get("profile") == "paper"]
    # shown at paper scale, never in the median: another scale (comparable False), or the
    # paper setting run otherwise (the CPU family, a shorter evaluation, a variant)
    other_scale = [c for c in at_paper if c.get("comparable", True) is False
                   or not compared_with_paper(c.get("profile"), c.get("family"),
                                              c.get("eval_epochs"), c.get("variant"))]
    med = float(pd.Series([abs(c["ours"] - c["paper"]) for c in compared]).median()) \
        if compared else None
    if compared:
        verdict = "agrees" if med <= tolerance * _scale(art) else "differs"
    elif at_paper and (not art.metric or other_scale):
        verdict = "shown at paper scale"
    elif ran:
        verdict = "pipeline check only"
    elif len(paper) and set(paper.dataset) <= set(art.user_data):
        verdict = "needs user data"
    else:
        verdict = "not run"
    return {"artifact": art.artifact, "kind": art.kind, "title": art.title,
            "paper cells": len(paper) if len(paper) else None,
            "at paper scale": len(compared) + len(other_scale) if art.metric
            else len(at_paper),
            "paper cells covered": sum(_cell_key(r) in have
                                       for r in paper.to_dict("records")) if len(paper) else 0,
            "pipeline checks": sum(c.get("profile") != "paper" for c in ran),
            "median |ours - paper|": med, "verdict": verdict, "page": art.page,
            "needs user data": ", ".join(art.user_data)}


def status_table(tolerance: float = 0.02, root=None) -> pd.DataFrame:
    """One row per paper artifact (:func:`summarise`)."""
    return pd.DataFrame([summarise(a, tolerance, root) for a in artifacts()])


def not_compared_because(c: dict[str, Any]) -> str:
    """Why a paper-scale cell of ours stands beside the paper's number without a difference
    (``""`` when it is compared: :func:`_is_compared`): another scale, no paper number, or
    the failed condition of :func:`results.compared_with_paper`
    (:func:`results.why_not_compared`)."""
    if c.get("comparable", True) is False:
        return "another scale (our domain classifier, not the paper's)"
    if not _finite(c.get("paper")):
        return "the paper has no number for this cell"
    return why_not_compared(c.get("profile"), c.get("family"), c.get("eval_epochs"),
                            c.get("variant"))


CELL_COLUMNS = ("artifact", "page", "dataset", "method", "epsilon", "parameter", "family",
                "paper", "ours", "ours - paper", "not compared because")


def cell_table(root=None) -> pd.DataFrame:
    """Every cell of ours at paper scale beside the paper's number: one row per cell of
    :func:`our_rows` (a CPU-family row beside a float32 one) with a finite number of ours, in
    the artifacts' order. ``ours - paper`` is given only for the cells the status page compares
    (:func:`_is_compared`, in the artifact's own unit); the others say why not
    (:func:`not_compared_because`). Smoke and cpu-profile rows are pipeline checks and never
    listed. Columns: :data:`CELL_COLUMNS`."""
    out = []
    for art in artifacts():
        if not art.metric:
            continue
        eps = _one_budget(paper_cells(art))  # a table at one budget stores rows without ε
        for c in our_rows(art, root=root):
            if c.get("profile") != "paper" or not _finite(c.get("ours")):
                continue
            compared = _is_compared(c)
            why = "" if compared else not_compared_because(c)
            out.append({"artifact": art.artifact, "page": art.page,
                        "dataset": c.get("dataset"), "method": c.get("method"),
                        "epsilon": _cell_key(c, eps)[2],
                        "parameter": _text(c.get("parameter")), "family": c.get("family"),
                        "paper": c.get("paper") if _finite(c.get("paper")) else math.nan,
                        "ours": float(c["ours"]),
                        "ours - paper": float(c["ours"] - c["paper"]) if compared else math.nan,
                        "not compared because": why})
    return pd.DataFrame(out, columns=list(CELL_COLUMNS))


MISSING_COLUMNS = ("artifact", "page", "dataset", "method", "epsilon", "parameter", "paper",
                   "why", "note")

#: the reasons :func:`missing_cells` gives, in the order it checks them (the first that holds)
MISSING_REASONS = ("needs the user's data", "method not implemented yet",
                   "only a variant of the paper's setting ran at paper scale",
                   "a pipeline check only", "not run at paper scale yet")

Key = tuple[str, str, str, str]


def _epsilon_key(x: Any) -> str:
    """ε as a cell key: the paper's CSVs print one budget as ``1``, ``1.0`` or ``1.00`` and
    ours store floats (with rounding noise: 0.30000000000000004), so numbers are compared as
    numbers to 6 significant digits (``inf`` and ``∞`` included)."""
    try:
        v = math.inf if str(x).strip() == "∞" else float(x)
    except (TypeError, ValueError):
        return _text(x)
    return "" if math.isnan(v) else f"{v:.6g}"


def _cell_key(c: dict[str, Any], epsilon: str = "") -> Key:
    """The name of one cell of a paper table: dataset, method, ε, parameter. ``epsilon``
    names the budget of a row without one (the tables at one budget, tab:hyperparam,
    tab:components, tab:compression, store their rows without ε)."""
    eps = _epsilon_key(c.get("epsilon"))
    return (_text(c.get("dataset")), _text(c.get("method")), eps or epsilon,
            _text(c.get("parameter")))


def _one_budget(paper: pd.DataFrame) -> str:
    """The ε of every cell of a paper table when there is one, else ``""``."""
    budgets = {_epsilon_key(e) for e in paper.get("epsilon", [])}
    return budgets.pop() if len(budgets) == 1 else ""


def _covers(c: dict[str, Any]) -> bool:
    """A row of ours stands for the paper's cell of its key: a number of ours at paper scale
    for the paper's setting (any run family or scale; a variant of the setting does not)."""
    return c.get("profile") == "paper" and _finite(c.get("ours")) and c.get("variant") is not True


def _covered_keys(ours: list[dict[str, Any]], paper: pd.DataFrame) -> set[Key]:
    """The keys of the paper's cells that rows of ``ours`` cover (:func:`_covers`)."""
    eps = _one_budget(paper)
    return {_cell_key(c, eps) for c in ours if _covers(c)}


def _variant_key(c: dict[str, Any], epsilon: str) -> Key:
    """The paper cell a variant row of ours is a variant of: its ``paper_method`` where given
    (the tables' rows of DP-GAN's large-batch setting, "DP-GAN (large batch)", carry it:
    :func:`results.setting_label`, as do T5's variants of the paper's compressors:
    :func:`book.compressor_label`), else its own method's."""
    method = c.get("paper_method") or _text(c.get("method"))
    return _cell_key({**c, "method": method}, epsilon)


def _implemented(method: str) -> bool:
    """Whether the harness has the paper's generator ``method`` (a name of
    :data:`results.PAPER_METHODS`; the other names, DP-SGD's and the compressors', are ours)."""
    from .methods import METHODS

    key = PAPER_METHODS.get(method)
    return key is None or key in METHODS


def missing_cells(root=None) -> pd.DataFrame:
    """The paper's numbered cells that have no cell of ours at paper scale, and why (``why``,
    the first of :data:`MISSING_REASONS` that holds): the dataset cannot be downloaded here
    (``needs the user's data (<dataset>)``, even where a pipeline check of it ran on a small
    stand-in), the method is one the harness does not have yet (PATE-GAN, GS-WGAN), only a
    variant of the paper's setting ran at paper scale (:func:`_variant_key`), only a pipeline
    check ran (``a pipeline check only (<profile> profile)``: a smoke or cpu-profile number of
    that cell), or nothing ran. ``note`` is the notebook's own word on a cell it stored without
    a number (e.g. DP-GAN's budgets: queued or not), else ``""``.

    A cell of the paper is matched to ours by :func:`_cell_key` (dataset, method, ε as a number,
    parameter; a row of ours without ε has the budget of a paper table at one budget) and is
    covered by a row of :func:`_covers`; the status table's ``paper cells covered`` counts
    those, so the two add up to the paper's cells. These are the paper's cells without a
    non-variant row in :func:`cell_table`. Columns: :data:`MISSING_COLUMNS`, in the artifacts'
    and then the paper CSVs' order."""
    out = []
    for art in artifacts():
        if not art.metric:
            continue
        ours, paper = our_rows(art, root=root), paper_cells(art)
        have, eps = _covered_keys(ours, paper), _one_budget(paper)
        checks: dict[Key, set[str]] = {}  # the profiles of the pipeline checks of a cell
        variants: set[Key] = set()
        notes: dict[Key, str] = {}
        for c in ours:
            if not _finite(c.get("ours")):
                if isinstance(c.get("status"), str) and c["status"]:
                    notes.setdefault(_cell_key(c, eps), c["status"])
            elif c.get("profile") == "paper" and c.get("variant") is True:
                variants.add(_variant_key(c, eps))
            elif c.get("profile") != "paper":
                checks.setdefault(_cell_key(c, eps), set()).add(str(c.get("profile")))
        for r in paper.to_dict("records"):
            key = _cell_key(r)
            if key in have:
                continue
            if r["dataset"] in art.user_data:
                why = f"needs the user's data ({r['dataset']})"
            elif not _implemented(r["method"]):
                why = "method not implemented yet"
            elif key in variants:
                why = "only a variant of the paper's setting ran at paper scale"
            elif key in checks:
                why = f"a pipeline check only ({', '.join(sorted(checks[key]))} profile)"
            else:
                why = "not run at paper scale yet"
            value = pd.to_numeric(r["value"], errors="coerce")
            out.append({"artifact": art.artifact, "page": art.page, "dataset": key[0],
                        "method": key[1], "epsilon": key[2], "parameter": key[3],
                        "paper": float(value), "why": why, "note": notes.get(key, "")})
    return pd.DataFrame(out, columns=list(MISSING_COLUMNS))


def _text(x: Any) -> str:
    """A key column as the book prints it: ``""`` for missing, ``1`` for 1.0, else ``str``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _num_html(x: Any, signed: bool = False) -> str:
    if not _finite(x):
        return "—"
    return f"{x:+.4g}" if signed else f"{x:.4g}"


def _text_html(x: Any) -> str:
    return "∞" if str(x) == "inf" else html.escape(str(x))


def _artifact_html(art: str, page: Any) -> str:
    return (f'<a href="{html.escape(page)}.html"><code>{html.escape(art)}</code></a>'
            if isinstance(page, str) else f"<code>{html.escape(art)}</code>")


_CELLS_STYLE = ("<style>table.datalens-cells{font-size:0.85em}"
                "table.datalens-cells td.n{text-align:right;padding:0 0.6em;white-space:nowrap}"
                "table.datalens-cells td.why{font-size:0.9em}</style>")


def missing_counts(missing: pd.DataFrame) -> str:
    """How many cells of :func:`missing_cells` miss for each reason, most frequent first:
    ``"reason: n; reason: n"``."""
    return "; ".join(f"{why}: {n}" for why, n in missing.why.value_counts().items())


def _blocks_html(frame: pd.DataFrame, head: tuple[str, ...], row, summary) -> str:
    """One collapsible block per artifact of ``frame`` (in its order): the summary line
    ``summary(group)`` after the artifact's name, a table with the header cells ``head`` and
    a row of ``row(record)`` (its ``<td>`` cells) per record."""
    blocks = []
    for art, g in frame.groupby("artifact", sort=False):
        rows = "".join(f"<tr>{row(r)}</tr>" for r in g.to_dict("records"))
        th = "".join(f"<th>{h}</th>" for h in head)
        blocks.append(f"<details><summary>{_artifact_html(art, g['page'].iloc[0])}: "
                      f"{summary(g)}</summary><table class='datalens-cells'>"
                      f"<thead><tr>{th}</tr></thead><tbody>{rows}</tbody></table></details>")
    return _CELLS_STYLE + "".join(blocks)


def missing_html(missing: pd.DataFrame) -> str:
    """:func:`missing_cells` as HTML: one collapsible block per artifact, its summary line
    counting the missing cells by reason, the notebook's note beside the reason, every text
    escaped, ``∞`` for an infinite ε."""
    if missing.empty:
        return "<p>Every numbered cell of the paper has a cell of ours at paper scale.</p>"
    text = _text_html
    return _blocks_html(
        missing, ("dataset", "method", "ε", "parameter", "paper",
                  "why we have no paper-scale cell", "the notebook's note"),
        lambda r: (f"<td>{text(r['dataset'])}</td><td>{text(r['method'])}</td>"
                   f"<td>{text(r['epsilon'])}</td><td>{text(r['parameter'])}</td>"
                   f"<td class='n'>{_num_html(r['paper'])}</td>"
                   f"<td class='why'>{text(r['why'])}</td>"
                   f"<td class='why'>{text(r['note'])}</td>"),
        lambda g: f"{len(g)} missing ({html.escape(missing_counts(g))})")


def cells_html(cells: pd.DataFrame) -> str:
    """:func:`cell_table` as HTML: one collapsible block per artifact (its summary line counts
    the cells with a paper number, those without, and the compared ones), numbers in the
    artifact's unit, ``—`` for nothing, ``∞`` for an infinite ε, every text escaped."""
    if cells.empty:
        return "<p>No cell of ours is at paper scale yet.</p>"
    num, text, td = _num_html, _text_html, "class='n'"

    def summary(g: pd.DataFrame) -> str:
        paper = int(g["paper"].notna().sum())
        extra = len(g) - paper
        return (f"{paper} cell(s) with a paper number" + (f", {extra} without" if extra else "")
                + f"; {int(g['ours - paper'].notna().sum())} compared")

    return _blocks_html(
        cells, ("dataset", "method", "ε", "parameter", "family", "paper", "ours",
                "ours − paper", "not compared because"),
        lambda r: (f"<td>{text(r['dataset'])}</td><td>{text(r['method'])}</td>"
                   f"<td>{text(r['epsilon'])}</td><td>{text(r['parameter'])}</td>"
                   f"<td>{text(r['family'])}</td><td {td}>{num(r['paper'])}</td>"
                   f"<td {td}>{num(r['ours'])}</td><td {td}>{num(r['ours - paper'], True)}</td>"
                   f"<td class='why'>{text(r['not compared because'])}</td>"),
        summary)


def method_matrix(root=None) -> pd.DataFrame:
    """Artifact x method: the median (ours - paper) over paper-scale cells, NaN where no cell
    of that method is at paper scale; with the counts behind it (``n``, ``of``)."""
    out = []
    for art in artifacts():
        if not art.metric:
            continue
        paper = paper_cells(art)
        ours = our_rows(art, root=root)
        for method in sorted(set(paper.method)):
            if method == "real data":
                continue
            cells = [c for c in ours if c["method"] == method and _is_compared(c)]
            d = [(c["ours"] - c["paper"]) / _scale(art) for c in cells]  # as a fraction
            out.append({"artifact": art.artifact, "method": method,
                        "median difference": float(pd.Series(d).median()) if d else math.nan,
                        "n": len(d), "of": int((paper.method == method).sum())})
    return pd.DataFrame(out)


def to_html(table: pd.DataFrame) -> str:
    """The status table as HTML that fits a book page: integers as integers, ``—`` for
    nothing, the verdict coloured, the artifact linked to its page."""
    colours = {"agrees": "#1a7f37", "differs": "#b35900", "shown at paper scale": "#1a7f37",
               "pipeline check only": "#57606a", "needs user data": "#6f42c1",
               "not run": "#8c959f"}

    def cells(r) -> str:
        page = r["page"] if isinstance(r["page"], str) and r["page"] else None  # NaN in a frame
        name = (f'<a href="{page}.html"><code>{r["artifact"]}</code></a>' if page
                else f'<code>{r["artifact"]}</code>')
        total = "—" if r["paper cells"] is None or pd.isna(r["paper cells"]) \
            else str(int(r["paper cells"]))
        have = r["at paper scale"] if total == "—" else r.get("paper cells covered", 0)
        cov = f'{int(have)} / {total}'
        med = r["median |ours - paper|"]
        med = "—" if med is None or pd.isna(med) else f"{med:.3f}"
        checks = int(r["pipeline checks"]) or "—"
        v = r["verdict"]
        num = "style='text-align:right;padding:0 0.8em;white-space:nowrap'"
        return (f"<td>{name}</td><td>{r['title']}</td><td {num}>{cov}</td>"
                f"<td {num}>{checks}</td><td {num}>{med}</td>"
                f"<td style='color:{colours[v]};font-weight:600;padding-left:0.8em'>{v}</td>")

    head = ("<tr><th>artifact</th><th>what</th><th>paper-scale cells</th>"
            "<th>pipeline checks</th><th>median |ours − paper|</th><th>verdict</th></tr>")
    body = "".join(f"<tr>{cells(r)}</tr>" for _, r in table.iterrows())
    return (f"<table class='datalens-status' style='font-size:0.9em;width:100%'>"
            f"<thead>{head}</thead><tbody>{body}</tbody></table>")


def heatmap(matrix: pd.DataFrame):
    """Artifact x method, coloured by the median (ours - paper) over paper-scale cells and
    annotated ``n/of``; grey where the method has no paper-scale cell in that artifact, blank
    where the paper has no such cell. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    arts = list(dict.fromkeys(matrix.artifact))
    methods = list(dict.fromkeys(sorted(matrix.method, key=lambda m: (m != "DataLens", m))))
    val = np.full((len(arts), len(methods)), np.nan)
    fig, ax = plt.subplots(figsize=(1.0 + 0.85 * len(methods), 0.8 + 0.42 * len(arts)))
    lim = max(0.05, float(np.nanmax(np.abs(matrix["median difference"]))) if
              matrix["median difference"].notna().any() else 0.05)
    cols = ["artifact", "method", "median difference", "n", "of"]
    for art, method, med, n, of in matrix[cols].itertuples(index=False):
        i, j = arts.index(art), methods.index(method)
        val[i, j] = med
        if not n:
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color="#d0d7de"))
        ax.text(j, i, f"{n}/{of}", ha="center", va="center", fontsize=8,
                color="black" if not n or abs(med) < 0.6 * lim else "white")
    im = ax.imshow(np.ma.masked_invalid(val), cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    ax.set_xticks(range(len(methods)), methods, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(arts)), arts, fontsize=8)
    ax.set_xlim(-0.5, len(methods) - 0.5)
    ax.set_ylim(len(arts) - 0.5, -0.5)
    fig.colorbar(im, ax=ax, shrink=0.8, label="median ours − paper (paper scale)")
    ax.set_title("Paper-scale cells reproduced (n / paper's cells); grey: none yet",
                 fontsize=9)
    fig.tight_layout()
    return fig
