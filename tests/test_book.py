import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import MISSING_DATA
from test_results import PAPER_TEX

from datalens_lib import book, cli, provenance, store
from datalens_lib.results import paper_values
from datalens_lib.runner import NOTEBOOKS, NOTEBOOKS_DIR, run_notebook


def test_store_roundtrip_best_profile_and_hash(tmp_path):
    p1 = store.save_result("tab:x", {"a": 1, "b": [1, 2]}, {"v": 1}, profile="smoke", seed=0,
                           root=tmp_path)
    store.save_result("tab:x", {"a": 1, "b": [1, 2]}, {"v": 2}, profile="cpu", root=tmp_path)
    assert store.params_hash({"b": [1, 2], "a": 1}) == store.params_hash({"a": 1, "b": [1, 2]})
    assert store.params_hash({"a": 2}) != store.params_hash({"a": 1})
    rec = store.load_result("tab:x", {"a": 1, "b": [1, 2]}, "smoke", root=tmp_path)
    assert rec["result"] == {"v": 1} and {"git_sha", "packages", "hardware"} <= set(rec)
    assert store.best(store.load_results("tab:x", root=tmp_path))["profile"] == "cpu"
    assert store.all_artifacts(tmp_path) == ["tab:x"]
    assert p1.name.startswith("smoke-") and not list(tmp_path.rglob("*.tmp"))
    with pytest.raises(ValueError, match="profile"):
        store.save_result("tab:x", {}, 1, profile="huge", root=tmp_path)


def test_compare_and_agreement_text():
    rows = [{"dataset": "mnist", "epsilon": 1, "profile": "paper", "ours": 0.70, "steps": 86},
            {"dataset": "fashion-mnist", "epsilon": 10, "profile": "smoke", "ours": 0.2,
             "steps": 3},
            {"dataset": "celeba-hair", "epsilon": 1, "profile": "-", "ours": None,
             "steps": None}]
    df = book.compare(rows, "tab_image.csv", ("dataset", "epsilon"))
    assert str(df["steps"].dtype) == "Int64" and "86.0" not in df.to_string()
    assert df["paper"].tolist() == [0.7123, 0.7061, 0.6061]
    assert df["difference"].iloc[0] == pytest.approx(0.70 - 0.7123)
    assert pd.isna(df["difference"].iloc[1])  # a smoke cell is no difference from the paper
    text = book.agreement_paragraph(df)
    assert "1 of 1 cells are within 0.05" in text and "-0.0123" in text
    assert "1 cell(s) ran at the smoke profile, a reduced setting" in text
    assert "not compared with the paper" in text and "1 cell(s) have no result" in text
    assert "-0.5061" not in text  # the smoke cell's gap is never printed as a difference
    empty = book.agreement_paragraph(pd.DataFrame({"ours": [None], "paper": [0.5]}))
    assert "No accuracy" in empty


@pytest.mark.parametrize("csv_name", ["tab_components.csv", "tab_hyperparam.csv",
                                      "tab_time.csv", "tab_dpsgd.csv",
                                      "tab_visual_compression.csv"])
def test_more_paper_tables_match_source(csv_name):
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    tex = PAPER_TEX.read_text()
    for r in paper_values(csv_name):
        assert f"{r['value']:.2f}" in tex, r


def test_full_image_table_is_transcribed_from_its_own_table():
    """tab:full_image: IS and FID, every method and the real-data row, from the table itself."""
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    tex = PAPER_TEX.read_text()
    at = tex.index("\\label{tab:full_image}")
    region = tex[tex.rindex("\\begin{table*}", 0, at): at]
    rows = paper_values("tab_full_image.csv")
    assert len(rows) == 66 and {r["metric"] for r in rows} == {"inception_score", "fid"}
    for r in rows:
        assert f"{r['value']:.2f}" in region, r


def _latex_cells(line: str) -> list[float]:
    """The numbers of one LaTeX table row after its label, cell by cell ("83.86 $\\pm$
    {\\small 1.49}" gives 83.86 and 1.49; "--" gives nothing)."""
    cells = [re.sub(r"\\multicolumn\{\d+\}\{[^}]*\}", "", c)
             for c in line.split("\\\\")[0].split("&")[1:]]
    return [float(x) for c in cells for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", c)]


def test_dpsgd_search_table_is_transcribed_from_its_own_table():
    """Cell by cell: each subtable (dataset, ε from its caption), each row (C, σ, B, lr), the
    columns k = 0.6, 0.7, 0.8 and GM-DP in the paper's order."""
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    tex = PAPER_TEX.read_text()
    at = tex.index("\\label{tab:dpsgd-search}")
    region = tex[at: tex.index("\\end{table*}", at)]
    names = {"MNIST": "mnist", "CIFAR-10": "cifar10"}
    metrics = {"$c$": "max_grad_norm", "$\\sigma$": "sigma", "batch size": "batch_size",
               "learning rate": "lr"}
    columns = [("TopAgg", "k=0.6"), ("TopAgg", "k=0.7"), ("TopAgg", "k=0.8"), ("GM-DP", "")]
    want = {}
    for sub in region.split("\\begin{subtable}")[1:]:
        m = re.search(r"\\caption\{\\small ([\w-]+) \(\$\\varepsilon=([\d.]+)\$\)\}", sub)
        ds, eps = names[m.group(1)], float(m.group(2))
        for line in sub.splitlines():
            label = line.split("&")[0].strip()
            if label in metrics:
                vals = _latex_cells(line)
                assert len(vals) == 4, line
                for (method, par), v in zip(columns, vals, strict=True):
                    want[(ds, method, eps, par, metrics[label])] = v
    rows = paper_values("tab_dpsgd_search.csv")
    assert len(want) == len(rows) == 96
    got = {(r["dataset"], r["method"], float(r["epsilon"]), r["parameter"] or "", r["metric"]):
           float(r["value"]) for r in rows}
    assert got == want


def test_control_table_is_transcribed_from_its_own_table():
    """Cell by cell: the two result subtables (ε = 0.1, then 1.0, k = 0.8, as the caption
    says), rows NormTopK (TopK-GM-DP, TopAgg, TopK-SGD) and no compression (GM-DP, --,
    clipped SGD), each cell a mean and a standard deviation."""
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    tex = PAPER_TEX.read_text()
    at = tex.index("\\label{tab:control}")
    region = tex[at: tex.index("\\end{table}", at)]
    region = region[region.index("Experimental results on MNIST"):]  # the results' caption
    assert "$\\eps=0.1$ and $k=0.8$; (below) $\\eps=1.0$ and $k=0.8$" in region
    lines = [ln for ln in region.splitlines() if "$\\pm$" in ln]
    assert len(lines) == 4
    want = {}
    for eps, (top, bottom) in zip((0.1, 1.0), (lines[0:2], lines[2:4]), strict=True):
        assert top.strip().startswith("\\texttt{NormTopK}")
        assert bottom.strip().startswith("no compression")
        for names, line in ((("TopK-GM-DP", "TopAgg", "TopK-SGD"), top),
                            (("GM-DP", "clipped SGD"), bottom)):
            vals = _latex_cells(line)
            assert len(vals) == 2 * len(names), line
            for i, name in enumerate(names):
                want[(name, eps, "test_accuracy_percent")] = vals[2 * i]
                want[(name, eps, "std_percent")] = vals[2 * i + 1]
    rows = paper_values("tab_control.csv")
    assert {r["parameter"] for r in rows} == {"k=0.8"} and {r["dataset"] for r in rows} == {
        "mnist"}
    got = {(r["method"], float(r["epsilon"]), r["metric"]): float(r["value"]) for r in rows}
    assert len(rows) == 20 and got == want


_DATASET_NAMES = {"MNIST": "mnist", "Fashion": "fashion-mnist", "Fashion-MNIST": "fashion-mnist",
                  "CelebA-Gender": "celeba-gender", "CelebA-Hair": "celeba-hair"}


def _table_region(tex: str, label: str) -> str:
    """The LaTeX of the table (or table*) environment holding ``label``."""
    at = tex.index(f"\\label{{{label}}}")
    start = max(tex.rindex("\\begin{table}", 0, at) if "\\begin{table}" in tex[:at] else -1,
                tex.rindex("\\begin{table*}", 0, at))
    return tex[start: tex.index("\\end{table", at)]


def _row_name(line: str) -> str | None:
    """The dataset of a table row (``\\textbf{MNIST} & ...``,
    ``{\\textbf{Fashion-MNIST}} & ...``)."""
    m = re.match(r"\s*\{?\\textbf\{([\w-]+)\}\}?\s*&", line)
    return _DATASET_NAMES.get(m.group(1)) if m else None


def test_hyperparam_table_is_transcribed_cell_by_cell():
    """tab:hyperparam: in each block the column headers (k and teachers, or beta) and each
    dataset row, cell by cell (every one of the 48 CSV values found in its own cell)."""
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    region = _table_region(PAPER_TEX.read_text(), "tab:hyperparam")
    want, header = {}, None
    for line in region.splitlines():
        cells = [c.strip() for c in line.split("\\\\")[0].split("&")]
        if line.strip().startswith("&") and "Top-" not in line:  # k and teachers values
            vals = [re.sub(r"[{}]", "", c) for c in cells[1:]]
            header = [f"k={v}" for v in vals[:3]] + [f"teachers={v}" for v in vals[3:]]
        elif line.strip().startswith("$\\beta$"):
            header = [f"beta={re.findall(r'[0-9.]+', c)[-1]}" for c in cells[1:]]
        elif (ds := _row_name(line)) is not None:
            vals = _latex_cells(line)
            assert header is not None and len(vals) == len(header) == 6, line
            for par, v in zip(header, vals, strict=True):
                want[(ds, par)] = v
    rows = paper_values("tab_hyperparam.csv")
    got = {(r["dataset"], r["parameter"]): float(r["value"]) for r in rows}
    assert len(rows) == len(got) == len(want) == 48 and got == want


def test_components_table_is_transcribed_cell_by_cell():
    """tab:components: the rows of each dataset block in order (full, then no top-k, no
    stochastic quantization, no thresholding, as the check/cross marks say)."""
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    region = _table_region(PAPER_TEX.read_text(), "tab:components")
    marks = {("cmark", "cmark", "cmark"): "full", ("xmark", "cmark", "cmark"): "no top-k",
             ("cmark", "xmark", "cmark"): "no stochastic sign",
             ("cmark", "cmark", "xmark"): "no thresholding"}
    want, ds = {}, None
    for line in region.splitlines():
        m = re.search(r"\\multirow\{4\}\{\*\}\{(?:\\makecell\{)?\\textbf\{(\w+)-?\}"
                      r"(?:\\textbf\{(\w+)\})?", line)
        if m:
            ds = {"MNIST": "mnist", "FashionMNIST": "fashion-mnist",
                  "CelebAGender": "celeba-gender", "CelebAHair": "celeba-hair"}[
                m.group(1) + (m.group(2) or "")]
        got_marks = tuple(re.findall(r"\\(cmark|xmark)", line))
        if len(got_marks) == 3:
            vals = _latex_cells(line.replace("\\cmark", "").replace("\\xmark", ""))
            want[(ds, marks[got_marks])] = vals[-1]
    rows = paper_values("tab_components.csv")
    got = {(r["dataset"], r["parameter"]): float(r["value"]) for r in rows}
    assert len(rows) == len(got) == len(want) == 16 and got == want


def test_compression_table_is_transcribed_cell_by_cell():
    """tab:compression: columns TopAgg, D2P-Fed, FetchSGD in the paper's order, one row per
    dataset."""
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    region = _table_region(PAPER_TEX.read_text(), "tab:compression")
    want = {}
    for line in region.splitlines():
        if (ds := _row_name(line)) is not None:
            vals = _latex_cells(line)
            assert len(vals) == 3, line
            for method, v in zip(("TopAgg", "D2P-Fed", "FetchSGD"), vals, strict=True):
                want[(ds, method)] = v
    rows = [r for r in paper_values("tab_visual_compression.csv")
            if r["artifact"] == "tab:compression"]
    got = {(r["dataset"], r["method"]): float(r["value"]) for r in rows}
    assert len(rows) == len(got) == len(want) == 12 and got == want


def test_every_aggregator_is_a_cell_of_its_own_in_the_compression_table():
    """book.compressor_label: the aggregators the official code runs carry the paper's method
    names of tab:compression (so the paper's numbers join them); the variants carry labels of
    their own, name the paper cell they vary and are marked as variants, so that no two
    aggregators share a cell of the status page (two unlabelled variants once did, and one of
    them dropped out of its cell list)."""
    from datalens_lib.aggregation import AGGREGATORS

    labels = {a: book.compressor_label(a) for a in AGGREGATORS}
    assert len({label for label, _, _ in labels.values()}) == len(AGGREGATORS)
    paper = {r["method"] for r in paper_values("tab_visual_compression.csv")
             if r["artifact"] == "tab:compression"}
    for a, (label, paper_method, variant) in labels.items():
        assert paper_method in paper, a
        assert variant == (label not in paper) == (a not in book.PAPER_COMPRESSOR), a
    assert labels["fetchsgd-sound"][1] == "FetchSGD" and labels["d2pfed-paper"][1] == "D2P-Fed"
    with pytest.raises(ValueError, match="unknown aggregator"):
        book.compressor_label("topk")


def test_compression_verdict_judges_each_compressor_against_topagg_of_its_family():
    """T5's conclusion: a compressor's difference from TopAgg's cell of the same family against
    that family's seed noise (one pair: beyond above t(0.975, 2) x sqrt(2) x sd = 0.0608 for
    sd 0.01 over 3 seeds), its steps, its ledger; pipeline checks and lone cells say nothing."""
    table = pd.DataFrame([
        {"dataset": "mnist", "aggregator": a, "method": m, "profile": prof, "family": "cpu",
         "ours": o, "steps": st, "paper": p}
        for a, m, prof, o, st, p in (
            ("topagg", "TopAgg", "paper", 0.64, 86, 0.7123),
            ("fetchsgd-coded", "FetchSGD", "paper", 0.69, 86, 0.6935),
            ("d2pfed-coded", "D2P-Fed", "paper", 0.13, 2, 0.1424),
            ("topagg", "TopAgg", "smoke", 0.2, 3, 0.7123))])
    ledgers = pd.DataFrame([
        {"dataset": "mnist", "aggregator": "fetchsgd-coded", "paper_ledger_is_dp": False,
         "epsilon_sound_rdp": 3.1e6, "steps": 86},
        {"dataset": "mnist", "aggregator": "d2pfed-coded", "paper_ledger_is_dp": True,
         "epsilon_sound_rdp": 0.34, "steps": 2}])
    spread = pd.DataFrame([{"config": "mnist-eps1", "family": "cpu", "sd": 0.01, "seeds": 3}])
    text = book.compression_verdict(table, ledgers, spread)
    assert text.startswith("mnist (cpu family, TopAgg 0.6400): ")
    assert "*FetchSGD* 0.6900 after 86 generator steps, +0.0500 against TopAgg (within" in text
    assert "*D2P-Fed* 0.1300 after 2 generator steps, -0.5100 against TopAgg (beyond" in text
    assert "not a DP guarantee (sound ε 3.1e+06 at the 86 steps that ledger allows)" in text
    # the sound ε is the ledger's, at its own steps: a run that took others says so
    ledgers.loc[0, "steps"] = 90
    assert ("(sound ε 3.1e+06 at the 90 steps that ledger allows; this run took 86)"
            in book.compression_verdict(table, ledgers, spread))
    # the paper's differences with our sign: compressor minus TopAgg
    assert "The paper's, against its TopAgg: FetchSGD -0.0188; D2P-Fed -0.5699" in text
    assert "0.2000" not in text  # the smoke cell is a pipeline check
    assert book.compression_verdict(table[table.profile == "smoke"], ledgers, spread) == ""
    lone = book.compression_verdict(table[table.aggregator != "topagg"], ledgers, spread)
    assert lone == ""  # nothing to judge without TopAgg's cell


def test_dpsgd_tables_are_transcribed_cell_by_cell():
    """tab:dpsgd (MNIST and CIFAR-10) and tab:dpsgd-ablation: each eps row (a row may span
    several source lines), each column in the paper's order, mean and standard deviation."""
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    tex = PAPER_TEX.read_text()
    top = [("TopAgg", f"k={k}") for k in ("0.6", "0.7", "0.8")]
    blocks = {"tab:dpsgd-mnist": ("mnist", top + [("GM-DP", "")], "\\end{subtable}"),
              "tab:dpsgd-cifar": ("cifar10", top + [("GM-DP", "")], "\\end{subtable}"),
              "tab:dpsgd-ablation": ("mnist", [("TopAgg norm-based", f"k={k}")
                                               for k in ("0.6", "0.7", "0.8")]
                                     + [("TopAgg dim-based", f"k={k}")
                                        for k in ("0.2", "0.4", "0.6")]
                                     + [("GM-DP", "")], "\\end{table*}")}
    want = {}
    for art, (ds, cols, end) in blocks.items():
        at = tex.index(f"\\label{{{art}}}")
        body = tex[tex.index("\\midrule", at): tex.index(end, at)]
        body = body.replace("\\midrule", "").replace("\\bottomrule", "")
        for row in body.split("\\\\"):
            m = re.search(r"\$\\eps=([\d.]+|\\infty)\$", row)
            if not m:
                continue
            eps = math.inf if m.group(1) == "\\infty" else float(m.group(1))
            vals = _latex_cells("eps & " + row[m.end():].lstrip(" &"))  # cells after the label
            assert len(vals) == 2 * len(cols), row
            for i, (method, par) in enumerate(cols):
                want[(art, ds, method, eps, par, "test_accuracy_percent")] = vals[2 * i]
                want[(art, ds, method, eps, par, "std_percent")] = vals[2 * i + 1]
    rows = paper_values("tab_dpsgd.csv")
    got = {(r["artifact"], r["dataset"], r["method"], float(r["epsilon"]), r["parameter"] or "",
            r["metric"]): float(r["value"]) for r in rows}
    assert len(rows) == len(got) == len(want) == 210 and got == want


def test_smoke_overrides_allow_three_steps():
    over = book.smoke_overrides("mnist-eps1", 0.2)
    from datalens_lib.privacy import topagg_max_queries
    cfg = book.load_config("mnist-eps1", "smoke", **over)
    assert topagg_max_queries(0.2, cfg.k, cfg.sigma, cfg.delta) == book.SMOKE_QUERIES


NB = '''# %% tags=["parameters"]
x = 1
fail = False
# %%
if fail:
    raise RuntimeError("asked to fail")
print("x is", x * 2)
'''


@pytest.mark.slow
def test_run_notebook_executes_skips_and_fails_cleanly(tmp_path):
    src = tmp_path / "tiny.py"
    src.write_text(NB)
    out_dir = tmp_path / "out"
    r = run_notebook(src, {"x": 21}, output_dir=out_dir, canonical=True)
    assert r["status"] == "ok"
    nb = json.loads((out_dir / "tiny.ipynb").read_text())
    assert "x is 42" in json.dumps(nb["cells"])
    assert run_notebook(src, {"x": 21}, output_dir=out_dir, canonical=True)["status"] == "skipped"
    again = run_notebook(src, {"x": 21}, output_dir=out_dir, force=True, canonical=True)
    assert again["status"] == "ok"
    bad = run_notebook(src, {"fail": True}, output_dir=out_dir, canonical=True)
    assert bad["status"] == "failed" and "asked to fail" in bad["error"]
    assert "x is 42" in (out_dir / "tiny.ipynb").read_text()  # the good output is kept
    assert not list(out_dir.glob(".tiny.*"))


def test_every_book_notebook_has_a_parameters_cell_with_profile():
    for name in NOTEBOOKS:
        src = (NOTEBOOKS_DIR / f"{name}.py").read_text()
        cell = src.split('# %% tags=["parameters"]', 1)[1].split("# %%", 1)[0]
        assert 'profile = "smoke"' in cell and "seed = 0" in cell, name


def test_cli_run_unknown_notebook(capsys):
    assert cli.main(["run", "no_such_notebook"]) == 2
    assert "not found" in capsys.readouterr().err


def test_committed_runs_table_lists_every_run_with_its_hardware():
    from datalens_lib.results import RESULTS_DIR

    table = book.committed_runs_table()
    n = len(list((RESULTS_DIR / "datalens").glob("*/*/run.json")))
    assert len(table) == n
    if n:
        assert table["device"].str.len().min() > 0
        assert set(table["adam_moments"]) <= {"float32", "bfloat16"}
        assert (table["ours_clean"] <= table["ours"]).all()


def test_run_summaries_name_the_aggregator():
    """T6 sets only TopAgg runs beside the paper's TopAgg time: the summary names each DataLens
    run's aggregator (records before the field: TopAgg) and none for another method."""
    runs = {Path(r["run_dir"]).name: r["aggregator"]
            for r in book.committed_runs() if r["config"] == "mnist-eps1"}
    assert runs["paper"] == "topagg" and runs["paper-cpu-d2pfed-coded"] == "d2pfed-coded"
    assert runs["paper-cpu-fetchsgd-sound"] == "fetchsgd-sound"
    assert {r["aggregator"] for r in book.committed_runs(method="gpate")} == {None}


def test_reference_results_take_the_longest_schedule(tmp_path):
    d = tmp_path / "reference" / "mnist"
    d.mkdir(parents=True)
    for n, acc in ((2, 0.9), (10, 0.95)):
        (d / f"eval-{n}ep.json").write_text(json.dumps(
            {"epochs": n, "paper": acc, "clean": acc - 0.01, "best_epoch": n}))
    (ref,) = book.reference_results(tmp_path).to_dict("records")
    assert ref["eval_epochs"] == 10 and ref["real_data_paper_protocol"] == 0.95
    assert book.reference_results(tmp_path / "none").empty


def test_schedule_table_reads_prefixes_of_one_evaluation(tmp_path):
    run = tmp_path / "datalens" / "mnist-eps1" / "paper"
    run.mkdir(parents=True)
    rec = json.loads((Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
                      / "mnist-eps1" / "paper" / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(rec))
    accs = [0.1, 0.5, 0.4, 0.7, 0.6, 0.65]
    (run / "eval-6ep.json").write_text(json.dumps(
        {"epochs": 6, "paper": 0.7, "clean": 0.65, "test_accuracy_per_epoch": accs}))
    t = book.schedule_table(tmp_path, lengths=(2, 3, 10)).set_index("epochs")
    assert list(t.index) == [2, 3, 6]  # 10 > 6 evaluated epochs; the longest is always listed
    assert t.loc[3, "paper_protocol"] == 0.5 and t.loc[3, "clean_protocol"] == 0.4
    assert t.loc[6, "paper_protocol"] == 0.7 and t.loc[6, "change_vs_longest"] == 0
    assert t.loc[2, "change_vs_longest"] == pytest.approx(-0.2)
    cfg = {**rec["config"], "chunk": 16, "moment_dtype": "bfloat16"}  # compute-only changes
    check = book.schedule_check(cfg, 2, full=6, root=tmp_path)
    assert check["measured_on"] == [{"run": "mnist-eps1/paper", "paper_protocol_at_short": 0.5,
                                     "paper_protocol_at_full": 0.7, "change": -0.2}]
    other = {**cfg, "sigma": cfg["sigma"] / 2}  # another setting: nothing measured for it
    assert book.schedule_check(other, 2, full=6, root=tmp_path)["measured_on"] == []
    assert book.schedule_check(cfg, 2, full=600, root=tmp_path)["measured_on"] == []  # 6 < 600


def test_linear_fit_recovers_a_line_and_scores_noise():
    fit = book.linear_fit([1000, 2000, 4000], [12.5, 24.5, 48.5])
    assert fit["slope"] == pytest.approx(0.012) and fit["intercept"] == pytest.approx(0.5)
    assert fit["r2"] == pytest.approx(1.0)
    assert book.linear_fit([1, 2, 3, 4], [1.0, 3.0, 1.0, 3.0])["r2"] < 0.5


def test_ensemble_benchmarks_reads_steps_and_the_paper_size_row(tmp_path):
    rec = {"benchmark": "bench_ensemble", "device": "cpu", "device_name": "Some CPU",
           "git_sha": "abcdef0123", "moments": "float32", "compute": "bfloat16",
           "steps": [{"teachers": 200, "vectorised_s_per_step": 2.0, "speed_up": 3.5},
                     {"teachers": 1000, "vectorised_s_per_step": 9.0}],
           "peak": {"teachers": 4000, "vectorised_s_per_step": 40.0, "moment_dtype": "bfloat16",
                    "compute_dtype": "bfloat16", "peak_rss_gib": 17.5}}
    (tmp_path / "a.json").write_text(json.dumps(rec))
    (tmp_path / "other.json").write_text(json.dumps({"benchmark": "bench_evaluate"}))
    old = {"benchmark": "bench_ensemble", "device": "cpu", "steps": [
        {"teachers": 50, "vectorised_s_per_step": 1.0}], "peak": {"teachers": 4000,
                                                                  "peak_rss_gib": 17.0}}
    (tmp_path / "b.json").write_text(json.dumps(old))
    gpu = {"benchmark": "bench_ensemble", "device": "cuda", "device_name": "Some GPU",
           "hardware": {"cpu_family_model": "25/17"},
           "steps": [{"teachers": 50, "vectorised_s_per_step": 0.1}]}
    (tmp_path / "c.json").write_text(json.dumps(gpu))
    (tmp_path / "d.json").write_text(json.dumps({**old, "hardware": {"cpu_family_model": "26/2"},
                                                 "device_name": "Some CPU"}))
    t = book.ensemble_benchmarks(tmp_path)
    # CPU hosts that share a model name are told apart by family/model; a GPU is not
    assert list(t["device"].iloc[-2:]) == ["Some GPU", "Some CPU, family/model 26/2"]
    t = t.iloc[:-2]
    assert list(t["teachers"]) == [200, 1000, 4000, 50]
    assert list(t["ms_per_teacher"]) == pytest.approx([10.0, 9.0, 10.0, 20.0])
    assert list(t["adam_moments"]) == ["float32", "float32", "bfloat16", "float32"]
    assert list(t["compute"]) == ["bfloat16", "bfloat16", "bfloat16", "float32"]
    assert t["speed_up_vs_loop"].iloc[0] == 3.5 and pd.isna(t["speed_up_vs_loop"].iloc[1])
    assert t["device"].iloc[0] == "Some CPU" and t["git_sha"].iloc[0] == "abcdef0"
    assert t["device"].iloc[3] == "cpu"  # old records without a device name


def test_compute_label_names_tf32_on_cuda_runs():
    """CUDA runs without a recorded TF32 state ran cuDNN convolutions in TF32 (PyTorch's
    default); CPU runs and runs with TF32 off are plain float32."""
    cfg = {"compute_dtype": "float32"}
    assert book.compute_label({"config": cfg, "device": "cuda", "hardware": {}}) == \
        "float32 (TF32 convs)"
    off = {"cuda_tf32": {"cudnn_convolutions": False, "matmul": False}}
    assert book.compute_label({"config": cfg, "device": "cuda", "hardware": off}) == "float32"
    assert book.compute_label({"config": cfg, "device": "cpu", "hardware": {}}) == "float32"
    assert book.compute_label({"config": {"compute_dtype": "bfloat16"}, "device": "cuda",
                               "hardware": {}}) == "bfloat16"


def test_benchmark_runs_are_only_paper_run_records(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"benchmark": "paper_run", "teachers": 4}))
    (tmp_path / "b.json").write_text(json.dumps({"benchmark": "bench_ensemble"}))
    assert [r["record"] for r in book.benchmark_runs(tmp_path)] == ["a"]


def test_snapshot_table_reads_exact_evaluated_snapshots(tmp_path):
    run = tmp_path / "gpate" / "mnist-eps1" / "paper"
    run.mkdir(parents=True)
    from datalens_lib.config import load_config

    cfg = load_config("mnist-eps1", "paper", method="gpate").to_dict()
    rec = {"method": "gpate", "config": cfg, "target_epsilon": 1.0,
           "profile": "paper", "seed": 0, "steps": 131, "epsilon": {"paper": 0.99},
           "timings": {"train_seconds": 1.0, "seconds_per_step": 0.1}, "device": "cpu",
           "hardware": {}, "history": [], "git_sha": "x",
           "snapshots": [{"budget": 0.2, "step": 9, "samples": "samples-eps0.2.npz",
                          "exact": True},
                         {"budget": 0.4, "step": 30, "samples": "samples-eps0.4.npz",
                          "exact": True},
                         {"budget": 0.6, "missing": "passed"}]}
    (run / "run.json").write_text(json.dumps(rec))
    (run / "snapshot-eps0.2-eval-30ep.json").write_text(json.dumps(
        {"paper": 0.3, "clean": 0.25, "epochs": 30}))
    t = book.snapshot_table(tmp_path)
    assert len(t) == 1  # 0.4 not evaluated, 0.6 missing
    r = t.iloc[0]
    assert (r["method"], r["epsilon"], r["step"], r["ours"]) == ("G-PATE", 0.2, 9, 0.3)
    assert r["paper"] == pytest.approx(0.223)  # data/paper/tab_lowdp.csv
    # the paper's setting on the GPU family, a 30-epoch evaluation: compared
    assert (r["family"], bool(r["variant"])) == ("gpu", False)
    assert r["difference"] == pytest.approx(0.3 - 0.223)
    assert r["rerun"] is None  # taken by the run itself
    # the 0.4 snapshot recovered by a run trained again (its evaluation names the check)
    for identical, first, want in (
            (True, None, "identical"),
            (False, {"row": 12, "field": "d_loss"}, "differs from step 13 (d_loss)"),
            (False, None, "only 20 of 30 steps compared")):
        (run / "snapshot-eps0.4-eval-30ep.json").write_text(json.dumps(
            {"paper": 0.4, "clean": 0.35, "epochs": 30, "snapshot": {
                "budget": 0.4, "step": 30 if identical else 31, "record": "snapshots.json",
                "prefix_of": {
                    "identical": identical, "first_difference": first, "rows_compared": 20,
                    "rows_needed": 30, "snapshot_differences": []}}}))
        t = book.snapshot_table(tmp_path).set_index("epsilon")
        assert t.loc[0.4, "rerun"] == want
        # (the committed run took it at step 30: a recovery at step 31 is another privacy side)
        assert bool(t.loc[0.4, "rerun_same_privacy"]) is identical
        assert t.loc[0.4, "step"] == (30 if identical else 31)
    # the same step, PLD in its last bits: the same privacy side; rdp off by 1e-6: not
    rec["snapshots"][1]["epsilon"] = {"pld": 0.27279732168122095, "rdp": 0.3}
    (run / "run.json").write_text(json.dumps(rec))
    for eps, same in (({"pld": 0.27279732168122045, "rdp": 0.3}, True),
                      ({"pld": 0.27279732168122095, "rdp": 0.3000003}, False)):
        (run / "snapshot-eps0.4-eval-30ep.json").write_text(json.dumps(
            {"paper": 0.4, "clean": 0.35, "epochs": 30, "snapshot": {
                "budget": 0.4, "step": 30, "epsilon": eps, "prefix_of": {
                    "identical": False, "first_difference": {"row": 3, "field": "d_loss"}}}}))
        t = book.snapshot_table(tmp_path).set_index("epsilon")
        assert bool(t.loc[0.4, "rerun_same_privacy"]) is same


def test_gap_analysis_and_seed_spread_from_records(tmp_path):
    """Issue 12's measured explanations: variant against baseline, queued when missing."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
    rec = json.loads((committed / "mnist-eps1" / "paper" / "run.json").read_text())

    def run(folder, acc, seed=0, epochs=30, config="mnist-eps1"):
        d = tmp_path / "datalens" / config / folder
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**rec, "seed": seed}))
        (d / f"eval-{epochs}ep.json").write_text(json.dumps(
            {"epochs": epochs, "paper": acc, "clean": acc - 0.1}))
        return d

    base = run("paper-cpu-fast", 0.60)
    run("paper-cpu-official-slots", 0.66)
    (base / "eval-30ep-lr0.001.json").write_text(json.dumps(
        {"epochs": 30, "paper": 0.58, "clean": 0.55, "best_epoch": 29}))
    run("paper", 0.70, epochs=600)
    run("paper-seed1", 0.72, seed=1, epochs=600)
    run("paper-seed2", 0.68, seed=2, epochs=600)
    g = book.gap_analysis(tmp_path)
    slots = g[g.variant == "paper-cpu-official-slots"].iloc[0]
    assert slots["status"] == "measured" and slots["effect"] == pytest.approx(0.06)
    assert slots["effect_clean"] == pytest.approx(0.06)  # clean: each run's acc - 0.1
    lr = g[g.variant == "paper-cpu-fast/eval-30ep-lr0.001.json"].iloc[0]
    assert lr["effect"] == pytest.approx(-0.02)
    assert lr["effect_clean"] == pytest.approx(0.55 - 0.50)  # the baseline's clean is 0.50
    # item 3: the variant's best epoch, read from its record (29 of 30: still improving)
    assert (lr["variant_best_epoch"], lr["variant_epochs"]) == (29, 30)
    text = book.late_best_epoch_text(g)
    assert text.startswith("Still improving in the last 10% of their epochs")
    assert "(paper-cpu-fast/eval-30ep-lr0.001.json: best epoch 29 of 30)" in text
    assert "Best epoch before" in book.late_best_epoch_text(g, last_share=0.02)
    assert book.late_best_epoch_text(g[g.variant == "paper-cpu-official-slots"]) == ""
    with pytest.raises(ValueError, match="^last_share"):
        book.late_best_epoch_text(g, last_share=1.0)
    queued = g[g.status.str.startswith("queued")]
    assert {"init-slots" in str(v) for v in queued.variant} == {False}  # nothing committed
    # Fashion-MNIST's official slots, init-slots, 30 first teacher steps, text, shuffled split,
    # float32 moments, 10k rows alone at 30 and 300 epochs, 10k padded with zero rows
    assert len(queued) == 9
    assert set(queued[queued.explanation.str.startswith("official teacher slots")].config) == {
        "fashion-mnist-eps1"}  # MNIST's is measured above
    # the label-free split measures the price of soundness, not a gap candidate
    assert list(g[g.explanation.str.startswith("label-free")].candidate) == [False]
    assert g[~g.explanation.str.startswith("label-free")].candidate.all()
    padded = tmp_path / "datalens" / "fashion-mnist-eps1" / "paper-cpu-fast"
    padded.mkdir(parents=True)
    (padded / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": 0.59}))
    (padded / "samples-10k-eval-600ep-padto100000.json").write_text(json.dumps(
        {"epochs": 600, "paper": 0.55, "pad_to": 100000}))
    (padded / "samples-10k-eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": 0.47}))
    g = book.gap_analysis(tmp_path)
    pad = g[g.variant == "paper-cpu-fast/samples-10k-eval-600ep-padto100000.json"].iloc[0]
    alone = g[g.variant == "paper-cpu-fast/samples-10k-eval-30ep.json"].iloc[0]
    assert alone["explanation"].endswith("10k rows alone, 30 epochs")
    assert alone["effect"] == pytest.approx(-0.12)
    assert len(g[g.status.str.startswith("queued")]) == 7  # the 300-epoch one still queued
    assert pad["config"] == "fashion-mnist-eps1" and pad["effect"] == pytest.approx(-0.04)
    assert pd.isna(pad["effect_clean"])  # neither record has a clean protocol
    run("paper-cpu-seed1", 0.64, seed=1)
    spread = book.seed_spread(tmp_path).set_index(["config", "family"])
    sp = spread.loc[("mnist-eps1", "gpu")]
    assert sp["seeds"] == 3 and sp["mean"] == pytest.approx(0.70)
    assert sp["max"] == 0.72 and sp["sd"] == pytest.approx(0.02)
    assert sp["paper"] == 0.7123
    # one more seed: 0.70 +- t(0.975, 2) 0.02 sqrt(4/3) = 0.70 +- 0.0994, the paper's inside
    assert sp["interval_high"] == pytest.approx(0.70 + 4.3027 * 0.02 * (4 / 3) ** 0.5, abs=1e-4)
    assert sp["interval_low"] == pytest.approx(0.70 - 4.3027 * 0.02 * (4 / 3) ** 0.5, abs=1e-4)
    assert sp["paper_inside"] is True
    # selection: the best of the paper's 6-value beta search of runs like ours, on average
    # 0.70 + 0.02 x 1.2672 (E[max of 6 standard normals])
    assert sp["search"] == 6 and sp["expected_best"] == pytest.approx(0.70 + 0.02 * 1.2672,
                                                                      abs=1e-4)
    assert sp["paper_search_mean"] == pytest.approx(4.0701 / 6)  # the paper's 6 beta cells
    assert sp["paper_search_max"] == 0.7123 and sp["paper_search_rho"] == pytest.approx(
        0.9429, abs=1e-4)  # ranks 1 2 3 4 6 5: 1 - 6 x 2 / (6 x 35)
    # exact: 12 of the 720 pairings have |rho| >= 0.9429 (ranks 123456, 123465, 124356, ...
    # and their reversals)
    assert sp["paper_search_p"] == pytest.approx(12 / 720)
    # sigma's 95% chi-square interval from 2 degrees of freedom: sd x 0.5207 to sd x 6.2847
    assert sp["expected_best_low"] == pytest.approx(0.70 + 0.5207 * 0.02 * 1.2672, abs=1e-4)
    assert sp["expected_best_high"] == pytest.approx(0.70 + 6.2847 * 0.02 * 1.2672, abs=1e-4)
    cpu = spread.loc[("mnist-eps1", "cpu")]  # paper-cpu-fast and paper-cpu-seed1, not variants
    assert cpu["seeds"] == 2 and cpu["mean"] == pytest.approx(0.62)
    # an eps = 10 cell: no beta search in the paper there, so no selection estimate; nor with
    # one seed (no sd)
    for folder, acc, seed, epochs in (("paper", 0.80, 0, 600), ("paper-seed1", 0.82, 1, 600),
                                      ("paper-cpu-fast", 0.75, 0, 30)):
        d = run(folder, acc, seed=seed, epochs=epochs, config="mnist-eps10")
        (d / "run.json").write_text(json.dumps({**rec, "seed": seed, "target_epsilon": 10.0,
                                                "config": {**rec["config"], "epsilon": 10.0}}))
    more = book.seed_spread(tmp_path).set_index(["config", "family"])
    assert more.loc[("mnist-eps10", "gpu"), "search"] == 0
    assert pd.isna(more.loc[("mnist-eps10", "gpu"), "expected_best"])
    assert more.loc[("mnist-eps10", "cpu"), "seeds"] == 1
    assert pd.isna(more.loc[("mnist-eps10", "cpu"), "expected_best_high"])
    for folder in ("paper", "paper-seed1", "paper-cpu-fast"):
        shutil.rmtree(tmp_path / "datalens" / "mnist-eps10" / folder)
    # two seeds 0.02 apart: 0.62 +- 12.706 0.0141 sqrt(1.5) = 0.62 +- 0.22, 0.7123 inside
    assert cpu["paper_inside"] is True
    # the evaluation's own spread: other classifier seeds on the same samples, the lr variant
    # and a run evaluated once left out
    assert book.eval_seed_spread(tmp_path).empty
    for s, acc in ((1, 0.64), (2, 0.56)):
        (base / f"eval-30ep-seed{s}.json").write_text(json.dumps(
            {"epochs": 30, "paper": acc, "clean": acc - 0.02}))
    ev = book.eval_seed_spread(tmp_path)
    assert ev[["config", "folder", "epochs"]].values.tolist() == [
        ["mnist-eps1", "paper-cpu-fast", 30]]
    e = ev.iloc[0]
    assert e["eval_seeds"] == 3 and e["mean"] == pytest.approx(0.60)  # 0.60, 0.64, 0.56
    assert e["sd"] == pytest.approx(0.04) and (e["min"], e["max"]) == (0.56, 0.64)
    assert e["clean_mean"] == pytest.approx((0.50 + 0.62 + 0.54) / 3)
    # a record whose seed is not its name's, or another schedule, is not one of these seeds
    (base / "eval-30ep-seed3.json").write_text(json.dumps(
        {"epochs": 30, "paper": 0.9, "clean": 0.9, "seed": 0}))
    (base / "eval-30ep-seed4.json").write_text(json.dumps(
        {"epochs": 30, "paper": 0.9, "clean": 0.9, "seed": 4, "lr": 0.001}))
    ev = book.eval_seed_spread(tmp_path)
    assert len(ev) == 1 and ev.iloc[0]["eval_seeds"] == 3 and ev.iloc[0]["max"] == 0.64
    # each effect against its noise: a run variant against its baseline family's training
    # seeds, an evaluation variant against its baseline samples' evaluation seeds
    g = book.gap_analysis(tmp_path).set_index("variant")
    slots = g.loc["paper-cpu-official-slots"]  # cpu family: 0.60, 0.64 -> sd 0.0283
    assert slots["noise_source"] == "training seeds" and slots["noise_seeds"] == 2
    assert slots["noise_sd"] == pytest.approx(0.04 / 2 ** 0.5)
    assert slots["beyond_noise"] is False  # 0.06 <= t(0.975, 1) sqrt(2) 0.0283 = 0.51
    lr = g.loc["paper-cpu-fast/eval-30ep-lr0.001.json"]  # eval seeds 0.60, 0.64, 0.56
    assert lr["noise_source"] == "evaluation seeds" and lr["noise_seeds"] == 3
    assert lr["noise_sd"] == pytest.approx(0.04) and lr["beyond_noise"] is False
    alone = g.loc["paper-cpu-fast/samples-10k-eval-30ep.json"]  # one evaluation seed only
    assert pd.isna(alone["noise_sd"]) and alone["beyond_noise"] is None
    (padded / "run.json").write_text(json.dumps(rec))  # (eval_seed_spread reads runs)
    for s, acc in ((0, 0.59), (1, 0.60), (2, 0.58)):  # fashion: sd 0.01
        (padded / f"eval-30ep{f'-seed{s}' if s else ''}.json").write_text(json.dumps(
            {"epochs": 30, "paper": acc, "clean": acc}))
    g = book.gap_analysis(tmp_path).set_index("variant")
    alone = g.loc["paper-cpu-fast/samples-10k-eval-30ep.json"]
    # t(0.975, 2) sqrt(2) 0.01 = 0.0608: -0.12 is beyond it, -0.04 is not
    assert alone["noise_sd"] == pytest.approx(0.01) and alone["beyond_noise"] is True
    pad = g.loc["paper-cpu-fast/samples-10k-eval-600ep-padto100000.json"]
    assert pad["beyond_noise"] is False
    run("paper-cpu-seed2", 0.50, seed=2)  # a third cpu seed widens the noise: sd 0.0721
    assert book.gap_analysis(tmp_path).set_index("variant").loc[
        "paper-cpu-official-slots", "noise_seeds"] == 3
    # a variant read against a grid cell of its own (float32 against bfloat16 moments, both
    # at 2000 teachers), with the training-seed noise of its family (fashion cpu: one seed)
    run("paper-cpu-teachers2000", 0.45, config="fashion-mnist-eps1")
    run("paper-cpu-teachers2000-float32", 0.50, config="fashion-mnist-eps1")
    run("paper-cpu-fast", 0.70, config="mnist-eps10")  # (not this variant's baseline)
    f32 = book.gap_analysis(tmp_path).set_index("variant").loc["paper-cpu-teachers2000-float32"]
    assert f32["baseline"] == "paper-cpu-teachers2000" and f32["status"] == "measured"
    assert f32["effect"] == pytest.approx(0.05) and f32["config"] == "fashion-mnist-eps1"
    assert f32["noise_source"] == "training seeds" and pd.isna(f32["noise_sd"])  # one seed
    for s, acc in ((1, 0.60), (2, 0.62)):  # fashion cpu seeds 0.59 (eval), 0.60, 0.62
        run(f"paper-cpu-seed{s}", acc, seed=s, config="fashion-mnist-eps1")
    f32 = book.gap_analysis(tmp_path).set_index("variant").loc["paper-cpu-teachers2000-float32"]
    assert f32["noise_seeds"] == 3 and f32["noise_sd"] == pytest.approx(0.0153, abs=1e-4)
    assert f32["beyond_noise"] is False  # 0.05 <= t(0.975, 2) sqrt(2) 0.0153 = 0.093
    assert f32["seed_pairs"] == 1
    assert book.NOISE_LEVEL == 0.05
    # a second training seed of both sides: the mean paired difference, read against the
    # noise of a mean of two differences (threshold 0.093 / sqrt(2) = 0.066)
    run("paper-cpu-teachers2000-float32-seed1", 0.55, seed=1, config="fashion-mnist-eps1")
    half = book.gap_analysis(tmp_path).set_index("variant").loc["paper-cpu-teachers2000-float32"]
    assert half["seed_pairs"] == 1 and half["effect"] == pytest.approx(0.05)  # no baseline yet
    run("paper-cpu-teachers2000-seed1", 0.46, seed=1, config="fashion-mnist-eps1")
    f32 = book.gap_analysis(tmp_path).set_index("variant").loc["paper-cpu-teachers2000-float32"]
    assert f32["seed_pairs"] == 2 and f32["effect"] == pytest.approx((0.05 + 0.09) / 2)
    assert f32["ours_baseline"] == pytest.approx(0.455)
    assert f32["effect_clean"] == pytest.approx(0.07)
    # the baseline setting now has two seeds of its own (0.45, 0.46): its spread, not the
    # default setting's, is the noise; t(0.975, 1) sqrt(2) 0.00707 / sqrt(2) = 0.0898 > 0.07
    assert f32["noise_source"] == "training seeds of the baseline setting"
    assert f32["noise_seeds"] == 2 and f32["noise_sd"] == pytest.approx(0.01 / 2 ** 0.5)
    assert f32["beyond_noise"] is False
    assert book.beyond_noise(0.07, 0.0153, 3, pairs=2) is True  # the default's: 0.066
    assert book.beyond_noise(0.07, 0.0153, 3) is False  # one pair: 0.093
    # the default setting's variants pair with the seed folders: official-slots seed 1
    # against paper-cpu-seed1 (0.64 here)
    run("paper-cpu-official-slots-seed1", 0.60, seed=1)
    slots = book.gap_analysis(tmp_path).set_index("variant").loc["paper-cpu-official-slots"]
    assert slots["seed_pairs"] == 2 and slots["effect"] == pytest.approx((0.06 - 0.04) / 2)
    # neither further seed is a grid cell or a training seed of the default setting
    assert book.is_gap_variant_folder("fashion-mnist-eps1", "paper-cpu-teachers2000-float32-seed1")
    assert not book.is_gap_variant_folder("fashion-mnist-eps1", "paper-cpu-teachers2000-seed1")
    assert book.seed_folder_family("paper-cpu-official-slots-seed1") is None
    with pytest.raises(ValueError, match="pairs"):
        book.beyond_noise(0.1, 0.01, 3, pairs=0)


def test_beta_gap_trend_tells_a_gap_that_grows_with_beta_from_a_constant_one(tmp_path):
    """Issue 12 item 1 read with Table 4: the gap at each beta of the paper's search, and its
    weighted slope on beta against the CPU family's seed noise. A gap that grows or shrinks
    with beta beyond the noise is named; one the same at every beta is not; GPU-family runs,
    other settings, other evaluation lengths and a second run of a seed are never cells."""
    import numpy as np

    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
    rec = json.loads((committed / "fashion-mnist-eps1" / "paper" / "run.json").read_text())

    def run(folder, acc, seed=0, **cfg):
        d = tmp_path / "datalens" / "fashion-mnist-eps1" / folder
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps(
            {**rec, "seed": seed, "config": {**rec["config"], "moment_dtype": "bfloat16",
                                             **cfg}}))
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": acc,
                                                      "clean": acc}))

    paper = book.beta_search("fashion-mnist", 1.0)
    assert paper[0.0] == 0.5859 and paper[0.9] == 0.6478  # the config's own beta is 0.9

    def write(offset):  # ours = the paper's cell - offset(beta)
        for seed, jitter in ((0, 0.0), (1, 0.005), (2, -0.005)):  # sd 0.005 at beta 0.9
            run("paper-cpu-fast" if seed == 0 else f"paper-cpu-seed{seed}",
                paper[0.9] - offset(0.9) + jitter, seed=seed)
        for beta in (0.0, 0.1):
            run(f"paper-cpu-beta{beta}", paper[beta] - offset(beta), beta=beta)
        run("paper-cpu-beta0.1-zz", 0.99, beta=0.1)  # seed 0 again: the first folder counts
        run("paper-cpu-beta0.1-float32", 0.99, beta=0.1, moment_dtype="float32")  # GPU family
        run("paper-cpu-beta0.1-long", 0.99, seed=1, beta=0.1)  # a 600-epoch evaluation
        long = tmp_path / "datalens" / "fashion-mnist-eps1" / "paper-cpu-beta0.1-long"
        (long / "eval-30ep.json").rename(long / "eval-600ep.json")
        (long / "eval-600ep.json").write_text(json.dumps({"epochs": 600, "paper": 0.99,
                                                           "clean": 0.99}))
        run("paper-cpu-official-slots", 0.99, adam_slots=50, init_slots=50)  # a gap variant
        run("paper-cpu-k300", 0.10, k=300)  # another setting
        table = book.beta_gap(tmp_path)
        return table, book.beta_gap_trend(table)

    # ours flat at 0.58: the gap grows from 0.0059 (beta 0) to 0.0678 (beta 0.9)
    table, trend = write(lambda beta: paper[beta] - 0.58)
    fm = table[table.dataset == "fashion-mnist"].set_index("beta")
    assert fm.loc[0.9, "ours_seeds"] == 3 and fm.loc[0.9, "ours"] == pytest.approx(0.58)
    assert fm.loc[0.9, "ours_seed0"] == pytest.approx(0.58)
    assert fm.loc[0.0, "gap"] == pytest.approx(0.0059) and fm.loc[0.1, "ours_seeds"] == 1
    assert fm.loc[0.1, "ours"] == pytest.approx(0.58)
    assert fm["ours"].isna().sum() == 3 and pd.isna(fm.loc[0.5, "gap"])
    r = trend.set_index("config").loc["fashion-mnist-eps1"]
    assert r["cells"] == 3 and r["noise_df"] == 2 and r["noise_cells"] == 1
    assert r["sd"] == pytest.approx(0.005) and fm.loc[0.9, "ours_sd"] == pytest.approx(0.005)
    assert pd.isna(fm.loc[0.1, "ours_sd"])
    beta = np.array([0.0, 0.1, 0.9])
    weight = 1 / np.array([2.0, 2.0, 4 / 3])  # variance sd^2 (1 + 1/seeds)
    gap = np.array([0.0059, 0.0303, 0.0678])
    slope = np.polyfit(beta, gap, 1, w=np.sqrt(weight))[0]  # polyfit weighs residuals
    assert r["gap_change"] == pytest.approx(slope * 0.9)
    assert r["ours_change"] == pytest.approx(0.0, abs=1e-12)
    assert r["ours_seed0_change"] == pytest.approx(0.0, abs=1e-12)
    assert r["paper_change"] == pytest.approx(slope * 0.9)
    assert r["default_gap"] == pytest.approx(0.0678)
    centred = beta - (weight * beta).sum() / weight.sum()
    assert r["threshold"] == pytest.approx(
        4.3027 * 0.005 / math.sqrt((weight * centred ** 2).sum()) * 0.9, rel=1e-4)
    assert r["beyond_noise"] is True  # +0.054 against +-0.035
    from scipy.stats import f as fisher  # scatter about the line: weighted RSS / sd^2, 1 df

    a, b = np.polyfit(beta, gap, 1, w=np.sqrt(weight))[::-1]
    rss = (weight * (gap - a - b * beta) ** 2).sum()
    assert r["lack_of_fit_p"] == pytest.approx(fisher.sf(rss / 0.005 ** 2, 1, 2))
    assert (r["lack_of_fit_p"] < 0.05) == ("more than that noise allows"
                                           in book._beta_clause(trend))
    assert "the gap grows with β beyond the noise" in book._beta_clause(trend)
    spread = book.seed_spread(tmp_path)
    assert "the gap grows with β" in book.gap_verdict(pd.DataFrame(), spread, trend)
    assert "β's effect" not in book.gap_verdict(pd.DataFrame(), spread)

    # ours 0.06 under the paper at every beta: no change in the gap, and a test able to see
    # a change as large as the gap
    _, same = write(lambda beta: 0.06)
    s = same.set_index("config").loc["fashion-mnist-eps1"]
    assert s["gap_change"] == pytest.approx(0.0, abs=1e-9) and s["beyond_noise"] is False
    assert s["threshold"] < s["default_gap"]
    assert s["lack_of_fit_p"] == pytest.approx(1.0)  # on the line exactly
    assert book._beta_clause(same).endswith("a change with β is not shown. ")
    # ours dipping at beta 0.1 (the committed cells' shape): the line misfits the cells
    _, dip = write(lambda beta: {0.0: -0.01, 0.1: 0.058, 0.9: 0.067}[beta])
    d = dip.set_index("config").loc["fashion-mnist-eps1"]
    assert d["lack_of_fit_p"] < 0.05 and d["beyond_noise"] is True
    assert "the slope exceeds the pooled-noise threshold, but" in book._beta_clause(dip)
    assert "grows with β beyond the noise" not in book._beta_clause(dip)  # no verdict
    # ours above the paper at a high beta: the gap shrinks
    _, shrinks = write(lambda beta: 0.06 - 0.1 * beta)
    s = shrinks.set_index("config").loc["fashion-mnist-eps1"]
    assert s["gap_change"] == pytest.approx(-0.09) and s["beyond_noise"] is True
    seed0 = [paper[b] - 0.06 + 0.1 * b for b in beta]  # unweighted: one run each
    assert s["ours_seed0_change"] == pytest.approx(np.polyfit(beta, seed0, 1)[0] * 0.9)
    assert "the gap shrinks with β beyond the noise" in book._beta_clause(shrinks)
    # a noisy family: not shown, and the test too weak for a change the size of the gap
    run("paper-cpu-seed1", 0.6478 - 0.06 + 0.05, seed=1)
    run("paper-cpu-seed2", 0.6478 - 0.06 - 0.05, seed=2)
    table = book.beta_gap(tmp_path)
    noisy = book.beta_gap_trend(table)
    assert noisy.iloc[-1]["beyond_noise"] is False
    assert "too noisy to tell" in book._beta_clause(noisy)
    # a second seed at beta 0.1 (0.01 above the first): the noise is pooled over both cells,
    # (2 x 0.005^2 + 1 x 0.0071^2) / 3, with 3 degrees of freedom, and beta 0.1 weighs more
    _, _ = write(lambda beta: 0.06)
    run("paper-cpu-beta0.1-seed1", paper[0.1] - 0.06 + 0.01, seed=1, beta=0.1)
    table = book.beta_gap(tmp_path)
    pooled = book.beta_gap_trend(table).set_index("config").loc["fashion-mnist-eps1"]
    fm = table[table.dataset == "fashion-mnist"].set_index("beta")
    assert fm.loc[0.1, "ours_seeds"] == 2 and fm.loc[0.1, "ours_seed0"] == pytest.approx(
        paper[0.1] - 0.06)
    assert fm.loc[0.1, "ours_sd"] == pytest.approx(0.01 / math.sqrt(2))
    assert pooled["noise_df"] == 3 and pooled["noise_cells"] == 2
    assert pooled["noise_betas"] == "0.1, 0.9"  # the β cells whose seeds measure the noise
    assert pooled["sd"] == pytest.approx(math.sqrt((2 * 0.005 ** 2 + 0.01 ** 2 / 2) / 3))
    weight = 1 / np.array([2.0, 1.5, 4 / 3])
    centred = beta - (weight * beta).sum() / weight.sum()
    assert pooled["threshold"] == pytest.approx(  # t(0.975, 3) = 3.1824
        3.1824 * pooled["sd"] / math.sqrt((weight * centred ** 2).sum()) * 0.9, rel=1e-4)
    gap = np.array([0.06, 0.055, 0.06])
    assert pooled["gap_change"] == pytest.approx(
        np.polyfit(beta, gap, 1, w=np.sqrt(weight))[0] * 0.9)
    assert "pooled over the seeds of 2 β cell(s), β 0.1, 0.9, 3 degrees of freedom" in \
        book._beta_clause(book.beta_gap_trend(table))
    # two more cells off the line (beta 0.3 and 0.5): the scatter's F test has cells - 2 = 3
    # and noise_df = 3 degrees of freedom (two cells with seeds)
    run("paper-cpu-beta0.3", paper[0.3] - 0.06 - 0.02, beta=0.3)
    run("paper-cpu-beta0.5", paper[0.5] - 0.05, beta=0.5)
    table = book.beta_gap(tmp_path)
    five = book.beta_gap_trend(table).set_index("config").loc["fashion-mnist-eps1"]
    b5 = np.array([0.0, 0.1, 0.3, 0.5, 0.9])
    w5 = 1 / np.array([2.0, 1.5, 2.0, 2.0, 4 / 3])
    g5 = np.array([0.06, 0.055, 0.08, 0.05, 0.06])
    a, b = np.polyfit(b5, g5, 1, w=np.sqrt(w5))[::-1]
    rss = (w5 * (g5 - a - b * b5) ** 2).sum()
    assert five["cells"] == 5 and five["noise_cells"] == 2
    assert five["lack_of_fit_p"] == pytest.approx(fisher.sf(rss / 3 / five["sd"] ** 2, 3, 3))
    for extra in ("0.3", "0.5"):
        shutil.rmtree(tmp_path / "datalens" / "fashion-mnist-eps1" / f"paper-cpu-beta{extra}")
    shutil.rmtree(tmp_path / "datalens" / "fashion-mnist-eps1" / "paper-cpu-beta0.1-seed1")
    # fewer than three cells: no test
    shutil.rmtree(tmp_path / "datalens" / "fashion-mnist-eps1" / "paper-cpu-beta0.1")
    for extra in ("zz", "float32", "long"):
        shutil.rmtree(tmp_path / "datalens" / "fashion-mnist-eps1" / f"paper-cpu-beta0.1-{extra}")
    table = book.beta_gap(tmp_path)
    two = book.beta_gap_trend(table).set_index("config")
    assert two.loc["fashion-mnist-eps1", "cells"] == 2
    assert two.loc["fashion-mnist-eps1", "beyond_noise"] is None
    assert book._beta_clause(two) == ""


def test_gap_verdict_sorts_the_measured_candidates_by_what_they_do():
    """T1's answer: a candidate beyond the noise that raises ours is named with its share of
    the gap of its run family's main cell (none for a variant at another setting), one that
    lowers ours and one within the noise are named as such; a price-of-soundness variant is
    no candidate; unmeasured ones are counted as open; a paper number inside our one-run
    interval does not rule the seed out, one outside does."""
    spread = pd.DataFrame([
        {"config": "mnist-eps1", "family": "cpu", "seeds": 3, "mean": 0.60, "sd": 0.01,
         "max": 0.61, "paper": 0.65, "interval_low": 0.55, "interval_high": 0.66,
         "paper_inside": True},
        {"config": "mnist-eps1", "family": "gpu", "seeds": 2, "mean": 0.62, "sd": 0.01,
         "max": 0.63, "paper": 0.65, "interval_low": 0.50, "interval_high": 0.64,
         "paper_inside": False},
        {"config": "mnist-eps10", "family": "cpu", "seeds": 2, "mean": 0.80, "sd": 0.01,
         "max": 0.81, "paper": 0.78, "interval_low": 0.70, "interval_high": 0.90,
         "paper_inside": True},
        {"config": "fashion-mnist-eps1", "family": "cpu", "seeds": 1, "mean": 0.5, "sd": None,
         "max": 0.5, "paper": 0.6, "interval_low": None, "interval_high": None,
         "paper_inside": None}])

    def row(label, effect, beyond, candidate=True, baseline="paper-cpu-fast",
            config="mnist-eps1", seed_pairs=1.0):
        return {"explanation": label, "config": config, "candidate": candidate,
                "baseline": baseline, "variant": "v", "effect": effect,
                "beyond_noise": beyond, "seed_pairs": seed_pairs}

    gaps = pd.DataFrame([row("closer", 0.03, True), row("lower", -0.10, True),
                         row("small", 0.01, False),
                         row("paired", 0.015, False, seed_pairs=2.0),
                         row("gpu closer", 0.02, True, baseline="paper"),
                         row("gpu past", 0.05, True, baseline="paper-seed1"),
                         row("grid", 0.02, True, baseline="paper-cpu-teachers2000"),
                         row("above paper", 0.02, True, config="mnist-eps10"),
                         row("price", 0.20, True, candidate=False),
                         row("open", None, None), row("rough", 0.02, None)])
    text = book.gap_verdict(gaps, spread)
    assert ("the paper's 0.6500 sits 0.0500 above our mean over 3 training seeds, inside our "
            "95% interval for one more run (one more run of ours could land there: the "
            "training seed alone is not ruled out)") in text
    assert "β search" not in text  # no expected best given: no words on selection
    chosen = spread.assign(search=6, expected_best=[0.63, None, 0.79, None],
                           expected_best_low=[0.61, None, 0.78, None],
                           expected_best_high=[0.70, None, 0.85, None],
                           paper_search_mean=[0.62, None, 0.70, None],
                           paper_search_max=[0.65, None, 0.75, None],
                           paper_search_rho=[0.94, None, 0.1, None],
                           paper_search_p=[0.017, None, 0.9, None])
    text6 = book.gap_verdict(gaps, chosen)
    assert ("ruled out) (selection: the best of the paper's 6-value β search, if every value "
            "gave runs like ours, would average 0.6300, 0.6100 to 0.7000 over our sd's 95% "
            "interval from 3 seeds; the paper's own 6 β cells average 0.6200 and its reported "
            "number is their max, 0.0300 above that mean: what selection added in its runs if "
            "β did nothing; they rise with β (Spearman ρ 0.94, exact p 0.017, a trend at the 5% "
            "level), so that difference is not selection alone); ") in text6
    # a reported number that is not the search's max is said to be so; no trend, no claim
    assert ("their max is 0.7500, not its reported number, 0.0500 above that mean: what "
            "selection added in its runs if β did nothing; no trend with β shown (Spearman ρ "
            "0.10, exact p 0.900))") in text6
    assert ("sits 0.0300 above our mean over 2 training seeds, outside our 95% interval for one "
            "more run (at the 5% level the training seed alone does not account") in text
    assert "the paper's 0.7800 sits 0.0200 below our mean" in text
    assert "fashion-mnist-eps1" not in text  # one seed: no spread to read the gap against
    raising = text.split("raising our number: ")[1].split(". ")[0]
    assert "closer (mnist-eps1, +0.0300, 60% of the gap of mnist-eps1's main cell)" in raising
    assert "gpu closer (mnist-eps1, +0.0200, 67% of the gap" in raising  # its family's gap
    assert "gpu past (mnist-eps1, +0.0500, more than the gap of mnist-eps1's main cell" in raising
    assert "grid (mnist-eps1, +0.0200);" in raising  # another setting: no share
    assert "above paper (mnist-eps10, +0.0200)" in raising  # ours above the paper: no share
    assert "lower" not in raising and "small" not in raising
    assert "lowering our number: lower (mnist-eps1, -0.1000)" in text
    assert "have, which is not the same as no effect): small (mnist-eps1, +0.0100, 20%" in text
    # an effect averaged over seed pairs says over how many
    assert "paired (mnist-eps1, +0.0150, mean of 2 seed pairs, 30% of the gap" in text
    assert "price" not in text
    assert "noise not yet known: rough" in text
    assert text.endswith("1 candidate measurement(s) are still open (queued, or their baseline "
                         "is).")
    quiet = book.gap_verdict(gaps[gaps.explanation.isin(["small", "open"])], spread)
    assert "is yet shown to raise our number beyond the noise; those within it are not" in quiet
    assert "raising our number:" not in quiet
    assert "No candidate is measured yet" in book.gap_verdict(
        gaps[gaps.explanation == "open"], spread.iloc[:0])
    empty = book.gap_verdict(pd.DataFrame(), spread)
    assert "Every candidate" not in empty and "still open" not in empty


def test_seed_spread_says_whether_one_run_of_ours_reaches_the_paper(tmp_path):
    """Issue 12, item 1: the paper's number against the prediction interval for one more
    training seed of our setting (``book.one_run_interval``)."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
    rec = json.loads((committed / "mnist-eps1" / "paper" / "run.json").read_text())
    for s, acc in enumerate((0.60, 0.64, 0.62)):  # three seeds, sd 0.02
        d = tmp_path / "datalens" / "mnist-eps1" / (f"paper-cpu-seed{s}" if s else "paper-cpu-fast")
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**rec, "seed": s}))
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": acc, "clean": acc}))

    def cpu():
        return book.seed_spread(tmp_path).set_index(["config", "family"]).loc[
            ("mnist-eps1", "cpu")]

    # 0.62 +- t(0.975, 2) 0.02 sqrt(4/3) = 0.62 +- 0.0994: the paper's 0.7123 is inside
    assert cpu()["interval_high"] == pytest.approx(0.62 + 4.3027 * 0.02 * (4 / 3) ** 0.5,
                                                   abs=1e-4)
    assert cpu()["interval_low"] == pytest.approx(0.62 - 4.3027 * 0.02 * (4 / 3) ** 0.5,
                                                  abs=1e-4)
    assert cpu()["paper_inside"] is True
    # T1 stores these cells for the status page: the seeds' mean beside the paper's number
    (cell,) = book.seed_cells(root=tmp_path)
    assert cell["ours"] == pytest.approx(0.62) and cell["ours_sd"] == pytest.approx(0.02)
    assert (cell["seeds"], cell["family"], cell["epsilon"], cell["eval_epochs"],
            cell["paper"], cell["ours_max"]) == (3, "cpu", "1", 30, 0.7123, 0.64)
    gpu = tmp_path / "datalens" / "mnist-eps1" / "paper"  # a float32 cell: T1 compares it
    gpu.mkdir(parents=True)
    (gpu / "run.json").write_text(json.dumps(rec))
    (gpu / "eval-600ep.json").write_text(json.dumps({"epochs": 600, "paper": 0.7, "clean": 0.7}))
    assert set(book.seed_spread(tmp_path)["family"]) == {"cpu", "gpu"}
    assert [c["family"] for c in book.seed_cells(root=tmp_path)] == ["cpu"]
    shutil.rmtree(gpu)
    for s, acc in ((3, 0.61), (4, 0.63), (5, 0.62)):  # six seeds, sd 0.0141: up to 0.6593
        d = tmp_path / "datalens" / "mnist-eps1" / f"paper-cpu-seed{s}"
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**rec, "seed": s}))
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": acc, "clean": acc}))
    assert cpu()["interval_high"] == pytest.approx(0.6593, abs=1e-4)
    assert cpu()["paper_inside"] is False
    assert book.one_run_interval(0.6, None, 1) is None  # one seed: no interval
    assert book.one_run_interval(0.6, 0.01, 1) is None


def _committed_cell_writer(root: Path, config: str):
    """A writer of committed-looking DataLens cells of ``config`` under ``root``: the committed
    paper run's record with config overrides, and a 30-epoch evaluation."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
    rec = json.loads((committed / config / "paper" / "run.json").read_text())

    def run(folder, acc, **cfg):
        d = root / "datalens" / config / folder
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**rec, "config": {**rec["config"], **cfg}}))
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": acc,
                                                      "clean": acc}))
    return run


def test_committed_match_finds_the_setting_and_the_cpu_family_only_when_asked(tmp_path):
    """T4/T7 read a committed grid cell by its settings: a GPU (float32 moments) run first,
    the CPU family's bfloat16-moment run only with cpu_family=True; other settings never."""
    run = _committed_cell_writer(tmp_path, "mnist-eps1")

    run("paper-k100", 0.5, k=100)
    run("paper-cpu-k300", 0.4, k=300, moment_dtype="bfloat16", chunk=12)
    run("paper-cpu-k300-bf16", 0.3, k=300, moment_dtype="bfloat16", compute_dtype="bfloat16")
    hit = book.committed_match("mnist-eps1", {"k": 100}, tmp_path)
    assert hit["acc_paper"] == 0.5 and hit["run_dir"].endswith("paper-k100")
    assert book.committed_match("mnist-eps1", {"k": 300}, tmp_path) is None
    cpu = book.committed_match("mnist-eps1", {"k": 300}, tmp_path, cpu_family=True)
    assert cpu["run_dir"].endswith("paper-cpu-k300")  # not the bfloat16-compute one
    assert book.committed_match("mnist-eps1", {"k": 300, "moment_dtype": "float32"}, tmp_path,
                                cpu_family=True) is None
    assert book.committed_match("mnist-eps1", {"k": 250}, tmp_path, cpu_family=True) is None


def test_committed_match_takes_the_lowest_seed_and_its_seed_folder(tmp_path):
    """Two runs of seed 0 of the CPU setting (``paper-cpu``, before issue 9's fast path, and
    ``paper-cpu-fast``, the seed folder the seed tables count) and seeds 1 and 2: T5's TopAgg
    cell is seed 0's seed-folder run, the baseline its compressor runs were run beside (it
    once showed ``paper-cpu``, first in folder order)."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
    rec = json.loads((committed / "mnist-eps1" / "paper" / "run.json").read_text())
    cpu = {**rec["config"], "moment_dtype": "bfloat16", "chunk": 12}
    for folder, seed, acc in (("paper-cpu-seed2", 2, 0.65), ("paper-cpu", 0, 0.6537),
                              ("paper-cpu-seed1", 1, 0.70), ("paper-cpu-fast", 0, 0.6377)):
        d = tmp_path / "datalens" / "mnist-eps1" / folder
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**rec, "seed": seed, "config": cpu}))
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": acc,
                                                      "clean": acc}))
    hit = book.committed_match("mnist-eps1", {"moment_dtype": "bfloat16"}, tmp_path)
    assert hit["run_dir"].endswith("paper-cpu-fast") and hit["acc_paper"] == 0.6377
    shutil.rmtree(tmp_path / "datalens" / "mnist-eps1" / "paper-cpu-fast")
    hit = book.committed_match("mnist-eps1", {"moment_dtype": "bfloat16"}, tmp_path)
    assert hit["run_dir"].endswith("paper-cpu") and hit["seed"] == 0  # seed 0's other run


def test_sampled_exact_b_reads_each_record_commit_against_the_fix():
    """T1's item 4: a run whose samples were drawn before the exact-B fix is told by its
    record's commit (the one at its end where it was resumed); git that cannot place a commit
    says None, never a guess."""
    fix = book.EXACT_B_SAMPLING_COMMIT
    if provenance.git_is_ancestor(fix, "HEAD") is None:
        pytest.skip("not a git checkout with the fix commit in its history")
    before = subprocess.run(["git", "rev-parse", f"{fix}~1"], cwd=provenance.REPO_ROOT,
                            capture_output=True, text=True).stdout.strip()
    assert book.sampled_exact_b({"git_sha": fix}) is True
    assert book.sampled_exact_b({"git_sha": before + "-dirty"}) is False
    # resumed after the fix: its samples were drawn at the end
    assert book.sampled_exact_b({"git_sha": before, "git_sha_at_end": fix}) is True
    assert book.sampled_exact_b({"git_sha": "0" * 40}) is None  # not in this history
    assert book.sampled_exact_b({}) is None
    runs = pd.DataFrame([
        {"config": "mnist-eps1", "folder": "paper", "exact_b_samples": False},
        {"config": "mnist-eps1", "folder": "paper-cpu-seed1", "exact_b_samples": True},
        {"config": "mnist-eps10", "folder": "paper-cpu-fast", "exact_b_samples": None}])
    assert book.sampled_before_fix_text(runs) == (
        f"Runs sampled before the exact-B fix (their record's commit precedes {fix[:7]}): "
        "`mnist-eps1/paper`; 1 run(s) sampled after it; 1 run(s) whose commit git cannot "
        "place here.")
    assert "): none; 1 run(s) sampled after it." in book.sampled_before_fix_text(runs[1:2])
    # the committed records: the four float32 paper runs are among those sampled before it
    table = book.committed_runs_table()
    old = table[table["exact_b_samples"] == False]  # noqa: E712
    assert {"paper"} <= set(old["folder"]) and len(old[old.folder == "paper"]) == 4


def test_run_folder_names_runs_and_snapshots_alike():
    """T2/T4/T7's run column: the folder name, whether the row shows a run or a snapshot."""
    assert book.run_folder({"run_dir": "/x/data/results/datalens/mnist-eps1/paper-cpu-fast"}
                           ) == "paper-cpu-fast"
    assert book.run_folder({"run": "mnist-eps1/paper-cpu-seed1", "run_dir": None}
                           ) == "paper-cpu-seed1"
    assert book.run_folder({"steps": 3}) is None


def test_grid_seeds_lists_the_grid_cells_with_several_training_seeds(tmp_path):
    """T4/T7 show seed 0 of a grid cell (seed-matched effects); book.grid_seeds gives the cells
    with further seeds, never the default setting's seed folders or T1's gap variants."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
    rec = json.loads((committed / "fashion-mnist-eps1" / "paper" / "run.json").read_text())
    for folder, seed, acc in (("paper-cpu-beta0.1", 0, 0.55), ("paper-cpu-beta0.1-seed1", 1, 0.54),
                              ("paper-cpu-k300", 0, 0.60),  # one seed: not listed
                              ("paper-cpu-fast", 0, 0.58), ("paper-cpu-seed1", 1, 0.57),
                              ("paper-cpu-official-slots", 0, 0.57),  # a gap variant
                              ("paper-cpu-official-slots-seed1", 1, 0.56)):
        d = tmp_path / "datalens" / "fashion-mnist-eps1" / folder
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**rec, "seed": seed}))
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": acc,
                                                      "clean": acc}))
    t = book.grid_seeds(tmp_path)
    assert t.to_dict("records") == [
        {"config": "fashion-mnist-eps1", "cell": "paper-cpu-beta0.1", "seeds": 2, "seed0": 0.55,
         "mean": pytest.approx(0.545), "sd": pytest.approx(0.01 / 2 ** 0.5), "max": 0.55}]
    assert book.grid_seeds(tmp_path / "none").empty
    # T4/T7 keep the cells their table shows, a further seed's folder included; a row without
    # a committed run (run None, or no run column at all) shows none
    shown = book.grid_seeds_shown(pd.DataFrame([
        {"dataset": "fashion-mnist", "run": "paper-cpu-beta0.1-seed1"},
        {"dataset": "fashion-mnist", "run": None}]), tmp_path)
    assert shown["cell"].tolist() == ["paper-cpu-beta0.1"]
    assert book.grid_seeds_shown(pd.DataFrame([{"dataset": "mnist",
                                                "run": "paper-cpu-beta0.1"}]), tmp_path).empty
    assert book.grid_seeds_shown(pd.DataFrame([{"dataset": "fashion-mnist"}]), tmp_path).empty


def test_coupled_runs_lists_the_shared_adam_runs_with_their_only_guarantee(tmp_path):
    """T1's item 2: a run whose teachers share Adam state (official slots) carries the coupled
    ledger, its only DP guarantee; a run with per-teacher Adam state (50 initialisations only)
    has none and is not listed."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "datalens"
    for folder in ("paper-cpu-official-slots", "paper-cpu-init-slots"):
        d = tmp_path / "datalens" / "mnist-eps1" / folder
        d.mkdir(parents=True)
        shutil.copy(committed / "mnist-eps1" / folder / "run.json", d / "run.json")
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": 0.6,
                                                      "clean": 0.6}))
    t = book.coupled_runs(tmp_path)
    assert list(t.folder) == ["paper-cpu-official-slots"]
    r = t.iloc[0]
    # 80 teachers per slot: the coupled ledger is far above the budget the run stopped on
    assert r.epsilon_paper <= 1.0 < 100 < r.coupled_over_budget == r.epsilon_coupled_rdp
    assert "coupled_rdp" in r.dp_guarantee and r.ours == 0.6
    assert book.coupled_runs(tmp_path / "none").empty
    # a shared-Adam record without its coupled ledger is not silently left out
    rec_path = tmp_path / "datalens" / "mnist-eps1" / "paper-cpu-official-slots" / "run.json"
    rec = json.loads(rec_path.read_text())
    del rec["epsilon"]["coupled_rdp"]
    rec_path.write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="no coupled_rdp ledger"):
        book.coupled_runs(tmp_path)


def test_committed_match_never_shows_a_gap_variant_as_a_grid_cell(tmp_path):
    """The float32-moment teachers = 2000 run is T1's gap variant: T4's cell of that value
    stays the CPU family's bfloat16 run, so the grid is one family."""
    run = _committed_cell_writer(tmp_path, "fashion-mnist-eps1")

    run("paper-cpu-teachers2000", 0.44, teachers=2000, moment_dtype="bfloat16")
    run("paper-cpu-teachers2000-float32", 0.47, teachers=2000, moment_dtype="float32")
    assert "paper-cpu-teachers2000-float32" in book.gap_variant_folders("fashion-mnist-eps1")
    assert book.committed_match("fashion-mnist-eps1", {"teachers": 2000}, tmp_path) is None
    hit = book.committed_match("fashion-mnist-eps1", {"teachers": 2000}, tmp_path,
                               cpu_family=True)
    assert hit["run_dir"].endswith("paper-cpu-teachers2000") and hit["acc_paper"] == 0.44
    # the same folder name is an ordinary cell of a config the variant is not queued for
    assert book.gap_variant_folders("mnist-eps1").isdisjoint({"paper-cpu-teachers2000-float32"})


def test_diverged_evaluations_lists_only_records_that_say_so(tmp_path):
    from datalens_lib.book import diverged_evaluations

    assert diverged_evaluations(tmp_path).empty
    d = tmp_path / "gpate" / "mnist-eps1" / "paper"
    d.mkdir(parents=True)
    base = {"epochs": 600, "paper": 0.39, "clean": 0.098, "best_epoch": 49}
    (d / "eval-600ep.json").write_text(json.dumps({**base, "diverged_at_epoch": 51}))
    (d / "eval-30ep.json").write_text(json.dumps({**base, "diverged_at_epoch": None}))
    old = tmp_path / "datalens" / "mnist-eps1" / "paper"
    old.mkdir(parents=True)
    (old / "eval-600ep.json").write_text(json.dumps(base))  # older record: no field
    t = diverged_evaluations(tmp_path)
    assert len(t) == 1
    r = t.iloc[0]
    assert (r.method, r.config, r.folder, r.record) == ("gpate", "mnist-eps1", "paper",
                                                        "eval-600ep.json")
    assert r.diverged_at_epoch == 51 and r.clean_protocol == 0.098


def test_the_methods_table_shows_only_runs_of_the_asked_stopping_rule(tmp_path):
    """G-PATE's cell stopped on the official data-dependent ledger (not DP; paper ledger 1.35
    at eps = 1) must never stand for the sound-stop cell, nor the reverse; a cpu-profile run is
    matched against its own profile."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "gpate"
    rec = json.loads((committed / "mnist-eps1" / "paper" / "run.json").read_text())

    def run(folder, acc, profile="paper", **cfg):
        d = tmp_path / "gpate" / "mnist-eps1" / folder
        d.mkdir(parents=True)
        base = book.load_config("mnist-eps1", profile, method="gpate").to_dict()
        conf = {**(rec["config"] if profile == "paper" else base), **cfg}
        (d / "run.json").write_text(json.dumps({**rec, "profile": profile, "config": conf}))
        (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": acc,
                                                      "clean": acc}))

    run("paper", 0.38, stop_on="sound")
    run("paper-official-stop", 0.53, stop_on="data_dependent")
    sound = book.committed_setting("gpate", "mnist-eps1", {"stop_on": "sound"}, tmp_path)
    assert [Path(s["run_dir"]).name for s in sound] == ["paper"]
    dd = book.committed_setting("gpate", "mnist-eps1", {"stop_on": "data_dependent"}, tmp_path)
    assert [Path(s["run_dir"]).name for s in dd] == ["paper-official-stop"]
    # its record (written before methods.gpate.dp_guarantee) named the ledgers at the steps
    # taken as its guarantee; the book says it has none (its stop is a function of the votes)
    assert dd[0]["dp_guarantee"].startswith("no DP guarantee")
    assert "cap of 1000 steps would be DP" in dd[0]["dp_guarantee"]
    assert "cap" not in sound[0]["dp_guarantee"]
    assert len(book.committed_setting("gpate", "mnist-eps1", None, tmp_path)) == 1  # config's
    run("cpu", 0.3, profile="cpu")
    assert "cpu" in [Path(s["run_dir"]).name for s in book.committed_setting(
        "gpate", "mnist-eps1", {"stop_on": "sound"}, tmp_path)]
    # a setting nobody ran: nothing, rather than the nearest run
    assert book.committed_setting("gpate", "mnist-eps1", {"sigma_vote": 1.0}, tmp_path) == []


def test_stopping_rule_table_labels_each_runs_stopping_ledger(tmp_path):
    """T1's G-PATE stopping table: each committed paper run with the ledger that stopped it
    (the default sound paper ledger, a sound PLD stop, the official data-dependent rule) and
    the paper's value of its cell; cpu-profile runs are not listed."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "gpate"
    rec = json.loads((committed / "mnist-eps1" / "paper" / "run.json").read_text())

    def run(folder, acc, profile="paper", **cfg):
        d = tmp_path / "gpate" / "mnist-eps1" / folder
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**rec, "profile": profile,
                                                "config": {**rec["config"], **cfg}}))
        (d / "eval-600ep.json").write_text(json.dumps({"epochs": 600, "paper": acc,
                                                       "clean": acc / 2}))

    run("paper", 0.38, stop_on="sound")
    run("paper-official-stop", 0.53, stop_on="data_dependent")
    run("paper-pld-stop", 0.5, stop_on="sound", conversion="pld")
    run("paper-teachers2000", 0.45, stop_on="sound", teachers=2000)  # not a stopping variant
    run("cpu", 0.2, profile="cpu")
    t = book.stopping_rule_table(tmp_path).set_index("folder")
    assert sorted(t.index) == ["paper", "paper-official-stop", "paper-pld-stop"]
    assert t.loc["paper", "stop"] == "sound (paper)"
    assert t.loc["paper-pld-stop", "stop"] == "sound (pld)"
    assert t.loc["paper-official-stop", "stop"] == "data_dependent"
    assert t.loc["paper-pld-stop", "ours"] == 0.5 and t.loc["paper", "ours_clean"] == 0.19
    assert (t["paper"] == 0.581).all()  # tab:image's G-PATE MNIST eps = 1
    assert {"eps_paper", "eps_rdp", "eps_pld", "eps_data_dependent"} <= set(t.columns)
    # always running the official rule's cap (1000 steps) costs far more than its budget of 1
    off = t.loc["paper-official-stop"]
    assert off["cap_pld"] > 2 * off["eps_pld"] and off["cap_rdp"] > off["cap_pld"] > 1
    assert t.loc["paper", "cap_pld"] != t.loc["paper", "cap_pld"]  # none for a sound stop
    text = book.stopping_rule_paragraph(t.reset_index())
    assert "stopped by data_dependent: 131 steps against 131" in text  # (the copied record)
    assert "no DP guarantee: its number of steps is a function of the clean votes" in text
    assert "covers the noisy answers only" in text
    assert f"{off['cap_pld']:.4g} (PLD)" in text
    assert "stopped by sound (pld)" in text and "a DP guarantee at the budget" in text
    assert "Without a default" not in text
    # a config whose runs lack the default sound stop is named, not passed over
    no_base = t.reset_index()
    no_base = no_base[no_base["stop"] != "sound (paper)"]
    text = book.stopping_rule_paragraph(no_base)
    assert "Without a default sound-stop run to compare with: mnist-eps1 (seed" in text
    assert "stopped by" not in text


def test_a_gpate_record_older_than_a_config_field_takes_its_default(tmp_path):
    """run_matches fills keys a record predates with the config class's defaults: a record
    without ``stop_on`` is a sound-stop run, never the official-stop cell."""
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "gpate"
    rec = json.loads((committed / "mnist-eps1" / "paper" / "run.json").read_text())
    d = tmp_path / "gpate" / "mnist-eps1" / "paper"
    d.mkdir(parents=True)
    old = {k: v for k, v in rec["config"].items() if k != "stop_on"}
    (d / "run.json").write_text(json.dumps({**rec, "config": old}))
    (d / "eval-30ep.json").write_text(json.dumps({"epochs": 30, "paper": 0.3, "clean": 0.3}))
    assert len(book.committed_setting("gpate", "mnist-eps1", {"stop_on": "sound"},
                                      tmp_path)) == 1
    assert book.committed_setting("gpate", "mnist-eps1", {"stop_on": "data_dependent"},
                                  tmp_path) == []


def test_gpate_ledger_steps_match_the_committed_sound_run():
    """The steps each sound ledger allows, computed without training, equal what the
    committed paper run of MNIST eps = 1 (stopped on the paper ledger) took; the tighter
    ledgers allow more, PLD the most; the official run's steps stay under its cap."""
    if book.data_status("mnist"):
        pytest.skip(f"{MISSING_DATA} needs MNIST (the training set size sets the batch)")
    t = book.gpate_ledger_steps().set_index("config")
    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "gpate"
    rec = json.loads((committed / "mnist-eps1" / "paper" / "run.json").read_text())
    assert rec["config"]["conversion"] == "paper" and rec["config"]["stop_on"] == "sound"
    row = t.loc["mnist-eps1"]
    assert row["steps_paper"] == rec["steps"] == 131
    assert row["batch"] == rec["batch"] == 15 and t.loc["mnist-eps10", "batch"] == 30
    assert row["steps_paper"] < row["steps_rdp"] < row["steps_pld"]
    # always running the official rule's cap costs more than its run's own ledger says
    off = json.loads((committed / "mnist-eps1" / "paper-official-stop" / "run.json").read_text())
    assert row["cap_pld"] > off["epsilon"]["pld"] and row["official_max_steps"] == 1000


def test_cells_not_at_paper_scale_get_a_command_and_a_measured_cost(tmp_path):
    d = tmp_path / "gpate" / "mnist-eps1" / "paper"
    d.mkdir(parents=True)
    rec = {"config": {"dataset": "mnist"}, "target_epsilon": 1.0, "profile": "paper",
           "seed": 0, "steps": 131, "epsilon": {"paper": 0.99}, "device": "cuda",
           "hardware": {"gpu": "NVIDIA H200"}, "history": [], "git_sha": "x",
           "timings": {"train_seconds": 7200.0, "seconds_per_step": 55.0}, "method": "gpate"}
    (d / "run.json").write_text(json.dumps(rec))
    assert book.measured_cost("gpate", "mnist-eps1", tmp_path) == (
        "2.00 h training (131 steps) at the paper profile on NVIDIA H200")
    assert book.measured_cost("gpate", "mnist-eps10", tmp_path).endswith(
        "(not this setting: mnist-eps1)")
    assert book.measured_cost("dpgan", "mnist-eps1", tmp_path).startswith("not measured yet")
    cmd = book.paper_command("dpgan", "mnist-eps10-large")
    assert "--method dpgan --config mnist-eps10-large --profile paper" in cmd
    assert "--resume" in cmd and "datalens evaluate runs/dpgan/mnist-eps10-large/paper" in cmd


def test_the_books_runs_evaluate_with_their_configs_test_limit(tmp_path, monkeypatch):
    """book.run_method hands the config's eval_test_limit to the evaluation: a smoke cell
    scores on the first 1,000 real test images and says so (cpu and paper: the whole set)."""
    from conftest import real_dataset_dir

    monkeypatch.setenv("DATALENS_DATA_DIR", str(real_dataset_dir("mnist").parent))
    s = book.run_datalens("mnist-eps1", "smoke", runs_root=tmp_path, device="cpu")
    ev = json.loads((Path(s["run_dir"]) / "eval-2ep.json").read_text())
    assert ev["test_limit"] == ev["n_test"] == 1000


def test_dpgan_probe_paragraph_reads_its_numbers_from_the_records(tmp_path):
    """T1's probe sentence: every figure comes from the probe and quality records (steps after
    step 0 only), and a missing probe names the script instead of a number."""
    assert "No 1,500-step discriminator probe" in book.dpgan_probe_paragraph(tmp_path)
    folder = tmp_path / "dpgan" / "mnist-eps10" / "cpu"
    folder.mkdir(parents=True)

    def row(step, real, fake, loss, agree):
        return {"step": step, "logit_real": real, "logit_fake": fake, "d_loss": loss,
                "label_agreement": agree}

    rec = {"steps": 40, "seed": 3, "every": 20, "series": {
        "clip_fake=true": {"rows": [row(0, 0.9, 0.9, 9.0, 0.9), row(20, -0.031, 0.01, 1.5, 0.1),
                                    row(40, 0.02, 0.0, 1.25, 0.2)]},
        "clip_fake=false": {"rows": [row(0, 0.9, 0.9, 9.0, 0.99), row(20, -2.0, -2.0, 2.5, 0.27),
                                     row(40, -2.0, -2.0, 2.6, 0.61)]}}}
    (folder / "probe-discriminator-1500.json").write_text(json.dumps(rec))
    text = book.dpgan_probe_paragraph(tmp_path)
    assert "40 steps" in text and "seed 3" in text and "every 20 steps" in text
    assert "within 0.031 of 0" in text and "between 1.250 and 1.500" in text
    assert "0.27-0.61 after step 0" in text and "quality.json" not in text
    (folder / "quality.json").write_text(json.dumps({"label_agreement": 0.456}))
    assert "final published samples score 0.46" in book.dpgan_probe_paragraph(tmp_path)
    assert "calls every image fake" not in text  # no 500-step probe committed here
    # the 500-step probe: the committed setting's D calls every image fake from the first
    # measurement after which both mean logits stay below 0 (a later rise resets it)
    short = {"steps": 60, "seed": 0, "every": 20, "series": {"clip_fake=false": {"rows": [
        row(0, 0.9, 0.9, 9.0, 0.9), row(20, -1.0, -1.5, 2.9, 0.1),
        row(40, 0.1, -1.2, 2.7, 0.1), row(60, -2.5, -2.25, 2.75, 0.1)]}}}
    (folder / "probe-discriminator.json").write_text(json.dumps(short))
    text = book.dpgan_probe_paragraph(tmp_path)
    assert text.startswith("In the committed setting the discriminator's mean logit is below 0 "
                           "on real and on fake images alike from step 60 on")
    assert "between -2.50 and -2.25, the loss between 2.75 and 2.75" in text
    short["series"]["clip_fake=false"]["rows"][-1] = row(60, -2.5, 0.5, 2.75, 0.1)
    (folder / "probe-discriminator.json").write_text(json.dumps(short))
    assert "calls every image fake" not in book.dpgan_probe_paragraph(tmp_path)
    # the committed probes: from the first measurement on
    assert "fake images alike from step 100 on" in book.dpgan_probe_paragraph()


def test_evaluation_cost_reads_each_committed_evaluations_seconds():
    """T1's evaluation cost per device, from the committed records: the H100 runs' 600-epoch
    evaluations and the CPU runs' 30-epoch ones, seconds per epoch = seconds / epochs."""
    cost = book.evaluation_cost()
    assert {"cuda", "cpu"} <= set(cost["device"])
    one = cost[(cost.config == "mnist-eps1") & (cost.folder == "paper")].iloc[0]
    ev = json.loads((book.RESULTS_DIR / "datalens" / "mnist-eps1" / "paper"
                     / "eval-600ep.json").read_text())
    assert (one.device, one.epochs) == ("cuda", 600)
    assert one.seconds_per_epoch == pytest.approx(ev["seconds"] / 600)
    assert (cost["seconds_per_epoch"] > 0).all()


def test_committed_snapshot_is_the_t2_headline_cell(tmp_path):
    """T2's headline cell below eps = 1: the evaluated snapshot of a committed DataLens eps = 1
    run of that config (the paper's setting), float32 family before bfloat16, never a
    variant's or another config's."""
    from datalens_lib.config import load_config

    def run(config, folder, acc, seed=0, profile="paper", drift=False, identical=False,
            **over):
        d = tmp_path / "datalens" / config / folder
        d.mkdir(parents=True)
        cfg = load_config(config, profile, **over).to_dict()
        (d / "run.json").write_text(json.dumps({
            "config": cfg, "target_epsilon": 1.0, "profile": profile, "seed": seed,
            "steps": 86, "epsilon": {"paper": 0.99}, "device": "cpu", "hardware": {},
            "history": [], "git_sha": "x",
            "timings": {"train_seconds": 1.0, "seconds_per_step": 1.0},
            "snapshots": [{"budget": 0.2, "step": 3, "exact": True, "samples": "s.npz",
                           "epsilon": {"paper": 0.18}}]}))
        # drift: the snapshot was recovered from a re-run that parted from the committed run
        check = {"identical": identical, "rows_compared": 3, "rows_needed": 3,
                 "first_difference": None if identical else {"row": 0, "field": "agreed_dims"}}
        (d / "snapshot-eps0.2-eval-30ep.json").write_text(json.dumps(
            {"paper": acc, "clean": acc - 0.1, "epochs": 30,
             **({"snapshot": {"budget": 0.2, "step": 3, "epsilon": {"paper": 0.18},
                              "prefix_of": check}} if drift or identical else {})}))

    run("mnist-eps1", "paper-cpu-seed1", 0.15, seed=1, moment_dtype="bfloat16")
    run("mnist-eps1", "cpu", 0.7, profile="cpu")  # a reduced profile: never the headline
    run("mnist-eps1", "paper-k100", 0.9, k=100)  # a variant
    run("fashion-mnist-eps1", "paper-cpu-fast", 0.5, moment_dtype="bfloat16")
    s = book.committed_snapshot("mnist-eps1", 0.2, tmp_path)
    assert (s["run"], s["family"], s["acc_paper"], s["steps"]) == (
        "mnist-eps1/paper-cpu-seed1", "cpu", 0.15, 3)
    assert s["epsilon_spent"] == {"paper": 0.18}
    assert book.committed_snapshot("mnist-eps1", 0.4, tmp_path) is None
    run("mnist-eps1", "paper", 0.2, seed=2)  # the float32 family wins, whatever its seed
    s = book.committed_snapshot("mnist-eps1", 0.2, tmp_path)
    assert (s["run"], s["family"], s["acc_clean"]) == ("mnist-eps1/paper", "gpu",
                                                       pytest.approx(0.1))
    assert book.committed_snapshot("fashion-mnist-eps1", 0.2, tmp_path)["acc_paper"] == 0.5
    # a committed run's own snapshot before one recovered from a re-run that drifted, even
    # of a lower seed (the seed-0 run's snapshot below was recovered that way)
    shutil.rmtree(tmp_path / "datalens" / "fashion-mnist-eps1" / "paper-cpu-fast")
    run("fashion-mnist-eps1", "paper-cpu-fast", 0.5, moment_dtype="bfloat16", drift=True)
    run("fashion-mnist-eps1", "paper-cpu-seed1", 0.4, seed=1, moment_dtype="bfloat16")
    s = book.committed_snapshot("fashion-mnist-eps1", 0.2, tmp_path)
    assert (s["run"], s["acc_paper"]) == ("fashion-mnist-eps1/paper-cpu-seed1", 0.4)
    # a re-run identical to the committed run is as good as the run's own snapshot: seed order
    shutil.rmtree(tmp_path / "datalens" / "fashion-mnist-eps1" / "paper-cpu-fast")
    run("fashion-mnist-eps1", "paper-cpu-fast", 0.5, moment_dtype="bfloat16", identical=True)
    s = book.committed_snapshot("fashion-mnist-eps1", 0.2, tmp_path)
    assert (s["run"], s["acc_paper"]) == ("fashion-mnist-eps1/paper-cpu-fast", 0.5)


def test_setting_effects_within_one_family_at_the_paper_setting_only(tmp_path):
    """tab:components / tab:hyperparam: a setting's effect (ours − ours at the baseline)
    beside the paper's, given only for paper-setting cells of one run family."""
    rows = [  # dataset, parameter, ours, paper, profile, family, eval_epochs
        ("mnist", "full", 0.6377, 0.7123, "paper", "cpu", 30),
        ("mnist", "no top-k", 0.4291, 0.517, "paper", "cpu", 30),
        ("mnist", "no thresholding", 0.6349, 0.6361, "paper", "gpu", 30),  # other family
        ("mnist", "no stochastic sign", 0.6369, 0.6741, "paper", "cpu", 10),  # short eval
        ("fashion-mnist", "full", 0.30, 0.6478, "smoke", "gpu", 2),
        ("fashion-mnist", "no top-k", 0.20, 0.4775, "smoke", "gpu", 2),
        ("celeba-gender", "full", 0.7, 0.8, "paper", "gpu", 30),  # no baseline named
    ]
    df = pd.DataFrame(rows, columns=["dataset", "parameter", "ours", "paper", "profile",
                                     "family", "eval_epochs"])
    out = book.setting_effects(df, {("mnist",): "full", ("fashion-mnist",): "full"})
    eff = {(r.dataset, r.parameter): (r.effect, r.paper_effect) for r in out.itertuples()}
    assert eff[("mnist", "full")] == (0.0, 0.0)
    assert eff[("mnist", "no top-k")][0] == pytest.approx(0.4291 - 0.6377)
    assert eff[("mnist", "no top-k")][1] == pytest.approx(0.517 - 0.7123)
    assert _none(eff[("mnist", "no thresholding")][0])
    assert eff[("mnist", "no thresholding")][1] == pytest.approx(0.6361 - 0.7123)
    assert _none(eff[("mnist", "no stochastic sign")][0])
    # a smoke cell is a pipeline check: the paper's effect is shown, ours is not
    assert _none(eff[("fashion-mnist", "no top-k")][0])
    assert eff[("fashion-mnist", "no top-k")][1] == pytest.approx(0.4775 - 0.6478)
    assert _none(eff[("celeba-gender", "full")][0]) and _none(eff[("celeba-gender", "full")][1])
    # groups of two columns (tab:hyperparam: dataset and hyperparameter)
    hp = pd.DataFrame([("mnist", "k", "k=200", 0.64, 0.71, "paper", "cpu", 30),
                       ("mnist", "k", "k=300", 0.60, 0.68, "paper", "cpu", 30),
                       ("mnist", "beta", "beta=0.7", 0.64, 0.71, "paper", "cpu", 30),
                       ("mnist", "beta", "beta=0", 0.66, 0.64, "paper", "cpu", 30)],
                      columns=["dataset", "hyperparameter", "parameter", "ours", "paper",
                               "profile", "family", "eval_epochs"])
    out = book.setting_effects(hp, {("mnist", "k"): "k=200", ("mnist", "beta"): "beta=0.7"},
                               group=("dataset", "hyperparameter"))
    got = dict(zip(out["parameter"], out["effect"], strict=True))
    assert got["k=300"] == pytest.approx(-0.04) and got["beta=0"] == pytest.approx(0.02)
    # read against the training-seed spread of the row's family (one number each side)
    spread = pd.DataFrame([("mnist-eps1", "cpu", 4, 0.01), ("fashion-mnist-eps1", "gpu", 1, 0.0)],
                          columns=["config", "family", "seeds", "sd"])
    out = book.setting_effects(df, {("mnist",): "full", ("fashion-mnist",): "full"},
                               noise=spread).set_index("parameter")
    topk = out[out.dataset == "mnist"].loc["no top-k"]
    assert topk.noise_sd == 0.01 and topk.noise_seeds == 4 and topk.beyond_noise is True
    assert out[out.dataset == "mnist"].loc["full"].beyond_noise is False
    assert out[out.dataset == "fashion-mnist"].loc["no top-k"].beyond_noise is None
    assert not book.beyond_noise(0.04, 0.01, 2)  # t(1) = 12.7: two seeds ask for a lot
    assert book.beyond_noise(0.05, 0.01, 4) and not book.beyond_noise(0.04, 0.01, 4)
    # the notebooks' view: baselines dropped, points, and its paragraph
    points = book.effects_in_points(df, {("mnist",): "full", ("fashion-mnist",): "full"},
                                    root=tmp_path)  # no committed runs: no CPU baselines added
    assert list(points[points.parameter == "full"].dataset) == ["celeba-gender"]  # no baseline
    assert points.set_index("parameter").loc["no top-k"].iloc[0].ours_points == \
        pytest.approx(100 * (0.4291 - 0.6377))
    text = book.effects_paragraph(points, "ablation")
    assert text.startswith("1 ablation effect(s) are measured")
    assert "1 have the paper's sign" in text
    assert "0 of the 0 with a noise estimate" in text
    assert "pipeline check" in book.effects_paragraph(points[points.dataset != "mnist"])
    with pytest.raises(ValueError, match="columns"):
        book.setting_effects(df.drop(columns="ours"), {("mnist",): "full"})
    with pytest.raises(ValueError, match="baseline"):
        book.setting_effects(df, {})


def _none(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def test_gap_analysis_shows_a_variant_whose_baseline_is_still_queued(tmp_path):
    """The text settings' eps = 10 run landed before its CPU baseline: its number is shown,
    no effect is claimed, and it counts no seed pair."""
    run = _committed_cell_writer(tmp_path, "mnist-eps10")
    run("paper-cpu-text-k350-s900", 0.75, k=350, sigma=900)
    text = book.gap_analysis(tmp_path).set_index("variant").loc["paper-cpu-text-k350-s900"]
    assert text["status"] == "baseline or evaluation missing" and text["seed_pairs"] == 0
    assert text["ours_variant"] == 0.75 and pd.isna(text["ours_baseline"])
    assert pd.isna(text["effect"]) and text["beyond_noise"] is None
    run("paper-cpu-fast", 0.70)
    text = book.gap_analysis(tmp_path).set_index("variant").loc["paper-cpu-text-k350-s900"]
    assert text["status"] == "measured" and text["effect"] == pytest.approx(0.05)


def test_expected_max_of_normals_and_the_papers_beta_search():
    """The selection estimate's two inputs: E[max of n standard normals] against its closed
    forms (n = 2: 1/√π; n = 3: 3/(2√π)) and a Monte Carlo draw (n = 6), and the size of the
    paper's β search (tab:hyperparam, ε = 1 only)."""
    import numpy as np

    assert book.expected_max_of_normals(1) == pytest.approx(0.0, abs=1e-9)
    assert book.expected_max_of_normals(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-7)
    assert book.expected_max_of_normals(3) == pytest.approx(1.5 / math.sqrt(math.pi), abs=1e-7)
    draws = np.random.default_rng(0).standard_normal((200_000, 6)).max(axis=1).mean()
    assert book.expected_max_of_normals(6) == pytest.approx(draws, abs=0.01)
    with pytest.raises(ValueError, match="n must be >= 1"):
        book.expected_max_of_normals(0)
    assert book.beta_search("mnist", 1.0) == {0.0: 0.6361, 0.1: 0.645, 0.3: 0.689, 0.5: 0.6921,
                                               0.7: 0.7123, 0.9: 0.6956}
    assert book.beta_search("fashion-mnist", 1.0)[0.9] == 0.6478  # tab:image's cell
    assert book.beta_search("mnist", 10.0) == {}
