"""The status page (datalens_lib.status): every paper artifact listed, coverage counted at paper
scale only, smoke results never compared with the paper, and HTML that fits the page."""

import math
import re

import pandas as pd
import pytest
from conftest import SHARED

from datalens_lib import book, status, store
from datalens_lib.aggregation import AGGREGATORS
from datalens_lib.results import PAPER_DIR

PAPER_TEX = SHARED.parent / "paper" / "000_9b649959b7e50e15.txt"


def test_every_result_artifact_of_the_paper_is_listed():
    listed = [a.artifact for a in status.artifacts()]
    assert len(listed) == len(set(listed))
    transcribed = set()
    for p in PAPER_DIR.glob("tab_*.csv"):
        transcribed |= set(pd.read_csv(p).artifact)
    assert transcribed - {"sec:runtime"} <= set(listed)  # sec:runtime feeds tab:time's page
    for a in ("tab:visual", "tab:full_image", "tab:compression", "fig:dpsgd", "fig:vis",
              "fig:dept_bound", "tab:control"):
        assert a in listed
    if PAPER_TEX.exists():
        tex = PAPER_TEX.read_text()
        for a in listed:
            assert f"\\label{{{a}}}" in tex, a
    pages = {a.page for a in status.artifacts() if a.page}
    from datalens_lib.runner import NOTEBOOKS
    assert pages <= set(NOTEBOOKS)


def _save(root, name, rows, profile="paper"):
    store.save_result(name, {"n": len(rows), "p": profile}, rows, profile=profile, root=root)


def test_a_cell_takes_the_seed_mean_of_a_table_before_its_single_run(tmp_path):
    """tab:lowdp and tab:image list a CPU cell's mean over training seeds ('(all methods)',
    '(training seeds)') before a table's single run of the same cell (artifacts.csv's store
    order: the first store wins among rows of the same profile)."""
    one = {"dataset": "fashion-mnist", "epsilon": 0.4, "profile": "paper", "family": "cpu",
           "eval_epochs": 30, "paper": 0.3863}
    _save(tmp_path, "tab:lowdp", [{**one, "ours": 0.2586}])
    _save(tmp_path, "tab:lowdp (all methods)", [{**one, "method": "DataLens", "ours": 0.2859,
                                                 "seeds": 2}])
    # tab:image: the rows as T1 writes them, the seeds' mean from book.seed_cells and a
    # single CPU run as the methods table ('(all methods)', book.methods_table) shows it
    spread = pd.DataFrame([{"family": "cpu", "dataset": "mnist", "epsilon": 1,
                            "config": "mnist-eps1", "seeds": 3, "mean": 0.6638, "sd": 0.0369,
                            "max": 0.7061, "eval_epochs": 30, "paper": 0.7123}])
    _save(tmp_path, "tab:image (all methods)", [
        {"method": "DataLens", "paper_method": "DataLens", "dataset": "mnist", "epsilon": "1",
         "paper": 0.7123, "profile": "paper", "family": "cpu", "ours": 0.6377,
         "eval_epochs": 30, "variant": False}])
    _save(tmp_path, "tab:image (training seeds)", book.seed_cells(spread))
    t = status.cell_table(root=tmp_path)
    assert len(t[t.artifact == "tab:image"]) == 1  # one cell, not two
    t = t.set_index("artifact")["ours"]
    assert t["tab:lowdp"] == 0.2859 and t["tab:image"] == 0.6638


def test_coverage_and_verdict_use_paper_scale_cells_only(tmp_path):
    art = next(a for a in status.artifacts() if a.artifact == "tab:image")
    empty = status.summarise(art, root=tmp_path)
    assert empty["verdict"] == "not run" and empty["at paper scale"] == 0
    assert empty["paper cells"] == 55 and empty["median |ours - paper|"] is None
    rows = [
        {"dataset": "mnist", "epsilon": 1, "ours": 0.70, "paper": 0.7123, "profile": "paper"},
        {"dataset": "mnist", "epsilon": 10, "ours": 0.77, "paper": 0.8066, "profile": "paper"},
        # a smoke cell far from the paper: a pipeline check, never in the median
        {"dataset": "fashion-mnist", "epsilon": 1, "ours": 0.10, "paper": 0.6478,
         "profile": "smoke", "difference": -0.5478},
        {"dataset": "celeba-hair", "epsilon": 1, "ours": math.nan, "paper": 0.6,
         "profile": "-", "status": "needs the user's data"},
    ]
    _save(tmp_path, "tab:image", rows)
    row = status.summarise(art, tolerance=0.05, root=tmp_path)
    assert row["at paper scale"] == 2 and row["pipeline checks"] == 1
    assert row["median |ours - paper|"] == pytest.approx((0.0123 + 0.0366) / 2)
    assert row["verdict"] == "agrees"
    assert status.summarise(art, tolerance=0.02, root=tmp_path)["verdict"] == "differs"
    with pytest.raises(ValueError, match="^tolerance must be > 0"):
        status.summarise(art, tolerance=0, root=tmp_path)
    # the baselines' record adds methods; a paper-scale row wins over a smoke row of a cell
    _save(tmp_path, "tab:image (all methods)", [
        {"dataset": "mnist", "method": "G-PATE", "epsilon": 1, "ours": 0.5, "paper": 0.5218,
         "profile": "smoke"},
        {"dataset": "mnist", "method": "DataLens", "epsilon": 1, "ours": 0.1, "paper": 0.7123,
         "profile": "smoke"}])
    row = status.summarise(art, tolerance=0.05, root=tmp_path)
    assert row["at paper scale"] == 2 and row["pipeline checks"] == 2
    m = status.method_matrix(root=tmp_path)
    dl = m[(m.artifact == "tab:image") & (m.method == "DataLens")].iloc[0]
    assert dl.n == 2 and dl.of == 10
    assert dl["median difference"] == pytest.approx((-0.0123 - 0.0366) / 2)
    gp = m[(m.artifact == "tab:image") & (m.method == "G-PATE")].iloc[0]
    assert gp.n == 0 and math.isnan(gp["median difference"])


def test_verdicts_for_figures_smoke_only_and_user_data(tmp_path):
    arts = {a.artifact: a for a in status.artifacts()}
    _save(tmp_path, "fig:dept_bound", [{"config": "mnist-eps1", "profile": "paper"}])
    assert status.summarise(arts["fig:dept_bound"], root=tmp_path)["verdict"] == \
        "shown at paper scale"
    _save(tmp_path, "tab:components", [{"dataset": "mnist", "parameter": "full", "ours": 0.2,
                                        "paper": 0.7123}], profile="smoke")
    comp = status.summarise(arts["tab:components"], root=tmp_path)
    assert comp["verdict"] == "pipeline check only" and comp["median |ours - paper|"] is None
    assert status.summarise(arts["tab:dpsgd-cifar"], root=tmp_path)["verdict"] == \
        "needs user data"
    assert status.summarise(arts["tab:dpsgd-mnist"], root=tmp_path)["verdict"] == "not run"


def test_status_html_fits_the_page(tmp_path):
    _save(tmp_path, "tab:image", [{"dataset": "mnist", "epsilon": 1, "ours": 0.70,
                                   "paper": 0.7123, "profile": "paper", "steps": 86.0}])
    table = status.status_table(root=tmp_path)
    assert set(table.verdict) <= set(status.VERDICTS)
    html = status.to_html(table)
    assert not re.search(r"\bnan\b", html, re.I) and "None" not in html
    assert not re.search(r">\s*\d+\.0\s*<", html)  # counts print as integers
    assert ">1 / 55<" in html and ">0.012<" in html
    assert '<a href="t1_main_utility.html"><code>tab:image</code></a>' in html
    assert "<code>tab:visual</code>" in html  # listed without a page
    fig = status.heatmap(status.method_matrix(root=tmp_path))
    assert fig.axes[0].get_yticklabels()[0].get_text() == "tab:image"


def test_rows_on_another_scale_are_shown_but_never_compared(tmp_path):
    """IS from our domain classifier against the paper's IS: at paper scale, no difference."""
    art = next(a for a in status.artifacts() if a.artifact == "tab:visual")
    rows = [{"dataset": "mnist", "method": "DataLens", "epsilon": "1", "ours": 7.9,
             "paper": 4.37, "profile": "paper", "comparable": False},
            {"dataset": "mnist", "method": "real data", "epsilon": "inf", "ours": 9.9,
             "paper": 9.86, "profile": "paper", "comparable": False}]
    _save(tmp_path, "tab:visual", rows)
    row = status.summarise(art, root=tmp_path)
    assert row["verdict"] == "shown at paper scale" and row["at paper scale"] == 2
    assert row["median |ours - paper|"] is None
    m = status.method_matrix(root=tmp_path)
    assert m[(m.artifact == "tab:visual") & (m.method == "DataLens")].iloc[0].n == 0
    rows[0]["comparable"] = True  # the same row on the paper's scale enters the median
    _save(tmp_path / "b", "tab:visual", rows[:1])
    assert status.summarise(art, root=tmp_path / "b")["median |ours - paper|"] == \
        pytest.approx(3.53)


def test_percent_metrics_use_the_tolerance_in_points(tmp_path):
    art = next(a for a in status.artifacts() if a.artifact == "tab:dpsgd-mnist")
    _save(tmp_path, "tab:dpsgd-mnist", [
        {"dataset": "mnist", "method": "GM-DP", "epsilon": 1.0, "parameter": "",
         "ours": 94.41, "paper": 95.41, "profile": "paper"}])
    assert status.summarise(art, tolerance=0.02, root=tmp_path)["verdict"] == "agrees"
    assert status.summarise(art, tolerance=0.005, root=tmp_path)["verdict"] == "differs"
    m = status.method_matrix(root=tmp_path)
    gm = m[(m.artifact == "tab:dpsgd-mnist") & (m.method == "GM-DP")].iloc[0]
    assert gm["median difference"] == pytest.approx(-0.01)


def test_cpu_family_and_short_evaluations_are_shown_but_never_compared(tmp_path):
    """The paper setting run by the CPU queue (bfloat16 Adam moments) or evaluated for fewer
    than 30 epochs (the measured schedule check): paper scale, never in the median."""
    from datalens_lib import book
    from datalens_lib.results import compared_with_paper

    assert compared_with_paper("paper") and compared_with_paper(None)
    assert compared_with_paper("paper", "gpu", 600.0, False)
    assert compared_with_paper("paper", float("nan"), float("nan"))  # missing columns
    assert not compared_with_paper("smoke")
    assert not compared_with_paper("paper", "cpu")
    assert compared_with_paper("paper", "gpu", 30) and not compared_with_paper("paper", "gpu", 5)
    assert not compared_with_paper("paper", "gpu", 600, variant=True)
    assert book.run_family({"profile": "paper", "moment_dtype": "bfloat16"}) == "cpu"
    assert book.run_family({"profile": "paper", "moment_dtype": "float32"}) == "gpu"
    assert book.run_family({"profile": "cpu", "moment_dtype": "bfloat16"}) == "-"
    art = next(a for a in status.artifacts() if a.artifact == "tab:hyperparam")
    rows = [{"dataset": "mnist", "method": "DataLens", "parameter": "k=100", "ours": 0.50,
             "paper": 0.5889, "profile": "paper", "family": "cpu", "eval_epochs": 30},
            {"dataset": "mnist", "method": "DataLens", "parameter": "k=200", "ours": 0.68,
             "paper": 0.7123, "profile": "paper", "family": "gpu", "eval_epochs": 30}]
    diff = book.with_difference(pd.DataFrame(rows))["difference"].tolist()
    assert math.isnan(diff[0]) and diff[1] == pytest.approx(-0.0323)
    _save(tmp_path, "tab:hyperparam", rows)
    row = status.summarise(art, root=tmp_path)
    assert row["at paper scale"] == 2 and row["median |ours - paper|"] == pytest.approx(0.0323)
    _save(tmp_path / "b", "tab:hyperparam", rows[:1])  # the CPU family alone
    row = status.summarise(art, root=tmp_path / "b")
    assert row["verdict"] == "shown at paper scale" and row["median |ours - paper|"] is None
    text = book.agreement_paragraph(book.with_difference(pd.DataFrame(rows)))
    assert "1 of 1 cells" in text and "1 paper-setting cell(s) are shown but not compared" in text
    assert "bfloat16" in text


def test_lowdp_methods_table_averages_snapshots_per_family(tmp_path, monkeypatch):
    """tab:lowdp from budget snapshots of committed eps = 1 runs: seeds of one family are
    averaged and compared with the paper; the CPU family is shown apart, never compared;
    methods without snapshots say why. The datasets count as present (the table's logic does
    not read them), so the test runs the same in a clone without ``../shared/datasets``."""
    import json
    import shutil

    from datalens_lib import book
    from datalens_lib.config import load_config

    monkeypatch.setattr(book, "data_status", lambda dataset: None)

    def commit(folder, seed, moments, acc, epochs):
        d = tmp_path / "datalens" / "mnist-eps1" / folder
        d.mkdir(parents=True)
        cfg = load_config("mnist-eps1", "paper", moment_dtype=moments).to_dict()
        rec = {"config": cfg, "target_epsilon": 1.0, "profile": "paper", "seed": seed,
               "steps": 86, "epsilon": {"paper": 0.99}, "device": "cpu", "hardware": {},
               "history": [], "git_sha": "x",
               "timings": {"train_seconds": 1.0, "seconds_per_step": 1.0},
               "snapshots": [{"budget": 0.2, "step": 9, "exact": True, "samples": "s.npz",
                              "epsilon": {"paper": 0.19, "rdp": 0.13}}]}
        (d / "run.json").write_text(json.dumps(rec))
        (d / f"snapshot-eps0.2-eval-{epochs}ep.json").write_text(json.dumps(
            {"paper": acc, "clean": acc - 0.1, "epochs": epochs}))

    commit("paper", 0, "float32", 0.40, 600)
    (tmp_path / "datalens" / "mnist-eps1" / "paper" / "eval-600ep.json").write_text(json.dumps(
        {"paper": 0.70, "clean": 0.5, "epochs": 600}))  # the eps = 1 column: the run itself
    commit("paper-seed1", 1, "float32", 0.44, 600)
    commit("paper-cpu-fast", 0, "bfloat16", 0.30, 30)
    t = book.lowdp_methods_table(root=tmp_path)
    cell = t[(t.method == "DataLens") & (t.dataset == "mnist") & (t.epsilon == 0.2)]
    gpu, cpu = cell[cell.family == "gpu"].iloc[0], cell[cell.family == "cpu"].iloc[0]
    assert (gpu.seeds, gpu.ours, gpu.eval_epochs) == (2, pytest.approx(0.42), 600)
    assert gpu.difference == pytest.approx(0.42 - gpu.paper)
    assert cpu.seeds == 1 and math.isnan(cpu.difference)
    # eps spent at the snapshot under each ledger; a cell with a paper-profile result needs
    # no paper command
    assert gpu.ledgers == "paper 0.19, rdp 0.13" and pd.isna(gpu.paper_command)
    other = t[(t.method == "DP-GAN") & (t.dataset == "mnist") & (t.epsilon == 0.2)].iloc[0]
    assert other.profile == "-" and "one run per budget (not queued" in other.status
    assert "not implemented" in t[t.method == "PATE-GAN"].iloc[0].status
    one = t[(t.method == "DataLens") & (t.dataset == "mnist") & (t.epsilon == 1.0)].iloc[0]
    assert (one.family, one.seeds, one.ours) == ("gpu", 1, 0.70)
    assert "no committed ε = 1 run yet" in t[(t.method == "DP-GAN") & (t.epsilon == 1.0)
                                            ].iloc[0].status
    # DP-GAN's large-batch setting has a row of its own per cell (T1's "(large batch)" rows)
    assert len(t[t.method != "DataLens"]) == 50 and t.ours.notna().sum() == 3
    assert len(t[t.method == "DP-GAN (large batch)"]) == 10
    # a missing cell says what it would cost and how to run it: DP-GAN one run per budget,
    # the snapshot methods the eps = 1 run's snapshot
    assert "--set epsilon=0.2 --out runs/dpgan/mnist-eps1/paper-epsilon0.2" in other.paper_command
    assert other.measured_cost.startswith("not measured yet")
    gp = t[(t.method == "G-PATE") & (t.dataset == "mnist") & (t.epsilon == 0.4)].iloc[0]
    assert "--snapshot-budgets 0.2 0.4 0.6 0.8" in gp.paper_command
    assert gp.paper_command.endswith("datalens evaluate runs/gpate/mnist-eps1/paper "
                                     "--snapshot 0.4 --epochs 30")
    # the eps = 1 cell's command is the same run (whichever cell runs first keeps the row's
    # snapshots), evaluated as itself
    gp1 = t[(t.method == "G-PATE") & (t.dataset == "mnist") & (t.epsilon == 1.0)].iloc[0]
    assert gp1.paper_command == gp.paper_command.replace(" --snapshot 0.4", "")
    assert pd.isna(t[t.method == "PATE-GAN"].iloc[0].paper_command)
    # a committed run that took a snapshot but has no evaluation of it says so
    run_json = tmp_path / "datalens" / "mnist-eps1" / "paper-seed1" / "run.json"
    rec = json.loads(run_json.read_text())
    rec["snapshots"].append({"budget": 0.4, "step": 20, "exact": True, "samples": "s4.npz"})
    run_json.write_text(json.dumps(rec))
    t = book.lowdp_methods_table(root=tmp_path)
    d4 = t[(t.method == "DataLens") & (t.dataset == "mnist") & (t.epsilon == 0.4)].iloc[0]
    assert d4.status.startswith("snapshot taken by mnist-eps1/paper-seed1 but not evaluated")
    assert pd.isna(d4.ours)

    # a DP-GAN run of the eps = 1 config trained with budget 0.2 (its noise calibrated to it,
    # nothing else changed) is the eps = 0.2 cell, not an eps = 1 one; with another setting
    # changed too it is a variant and left out
    def dpgan_run(folder, acc, config="mnist-eps1", profile="cpu", **over):
        d = tmp_path / "dpgan" / config / folder
        d.mkdir(parents=True)
        cfg = load_config(config, profile, method="dpgan", **over).to_dict()
        rec = {"config": cfg, "target_epsilon": cfg["epsilon"], "profile": profile, "seed": 0,
               "steps": 100, "epsilon": {"rdp": 0.2}, "device": "cpu",
               "hardware": {"cpu": "x", "cores": 2}, "history": [], "git_sha": "x",
               "timings": {"train_seconds": 3600.0, "seconds_per_step": 1.0}}
        (d / "run.json").write_text(json.dumps(rec))
        (d / "eval-30ep.json").write_text(json.dumps({"paper": acc, "clean": acc,
                                                      "epochs": 30}))

    dpgan_run("cpu-eps0.2", 0.15, epsilon=0.2)
    dpgan_run("cpu-eps0.4-lr", 0.99, epsilon=0.4, lr_d=0.1)
    t = book.lowdp_methods_table(root=tmp_path)
    dp = t[(t.method == "DP-GAN") & (t.dataset == "mnist")].set_index("epsilon")
    # the small-batch cpu profile changes only the evaluation: the paper's training, shown
    # and compared as the paper profile (30 epochs of evaluation), no paper command needed
    assert dp.loc[0.2, "ours"] == 0.15 and dp.loc[0.2, "profile"] == "paper"
    assert dp.loc[0.2, "difference"] == pytest.approx(0.15 - dp.loc[0.2, "paper"])
    assert dp.loc[0.2, "ledgers"] == "rdp 0.2" and pd.isna(dp.loc[0.2, "paper_command"])
    assert dp.loc[0.4, "measured_cost"].endswith("on x, 2 cores")  # threads not recorded
    assert pd.isna(dp.loc[0.4, "ours"]) and pd.isna(dp.loc[1.0, "ours"])
    assert dp.loc[0.4, "measured_cost"].startswith("1.00 h training (100 steps)")
    # the config's own run, once committed, is the eps = 1 cell and what a cost is read from
    dpgan_run("cpu", 0.2)
    rec = json.loads((tmp_path / "dpgan" / "mnist-eps1" / "cpu" / "run.json").read_text())
    rec["timings"]["train_seconds"] = 7200.0
    (tmp_path / "dpgan" / "mnist-eps1" / "cpu" / "run.json").write_text(json.dumps(rec))
    dp = book.lowdp_methods_table(root=tmp_path)
    dp = dp[(dp.method == "DP-GAN") & (dp.dataset == "mnist")].set_index("epsilon")
    assert dp.loc[1.0, "ours"] == 0.2 and dp.loc[0.2, "ours"] == 0.15
    assert dp.loc[0.4, "measured_cost"].startswith("2.00 h training (100 steps)")
    dpgan_run("cpu-rerun", 0.3)  # seed 0 again (another run of the same seed): counted once
    dp = book.lowdp_methods_table(root=tmp_path)
    one = dp[(dp.method == "DP-GAN") & (dp.dataset == "mnist") & (dp.epsilon == 1.0)].iloc[0]
    assert one.seeds == 1 and one.ours == 0.2
    # the same seed recorded at the paper profile wins over the cpu runs shown as paper
    # (their training is the paper's, their evaluation shorter), whatever the folder order
    dpgan_run("z-paper", 0.25, profile="paper")
    dp = book.lowdp_methods_table(root=tmp_path)
    one = dp[(dp.method == "DP-GAN") & (dp.dataset == "mnist") & (dp.epsilon == 1.0)].iloc[0]
    assert one.seeds == 1 and one.ours == 0.25 and one.profile == "paper"
    shutil.rmtree(tmp_path / "dpgan" / "mnist-eps1" / "z-paper")

    # the large-batch setting's budget run is its own row ("DP-GAN (large batch)"), never
    # the small-batch cell and never compared with the paper, even at the paper profile
    d = tmp_path / "dpgan" / "mnist-eps1-large" / "paper-eps0.2"
    d.mkdir(parents=True)
    cfg = load_config("mnist-eps1-large", "paper", method="dpgan", epsilon=0.2).to_dict()
    (d / "run.json").write_text(json.dumps(
        {"config": cfg, "target_epsilon": 0.2, "profile": "paper", "seed": 0, "steps": 2195,
         "epsilon": {"rdp": 0.2}, "device": "cuda", "hardware": {}, "history": [],
         "git_sha": "x", "timings": {"train_seconds": 60.0, "seconds_per_step": 1.0}}))
    (d / "eval-600ep.json").write_text(json.dumps({"paper": 0.8, "clean": 0.79,
                                                   "epochs": 600}))
    t = book.lowdp_methods_table(root=tmp_path)
    big = t[(t.method == "DP-GAN (large batch)") & (t.dataset == "mnist")].set_index("epsilon")
    assert big.loc[0.2, "ours"] == 0.8 and big.loc[0.2, "profile"] == "paper"
    # the variant's rows name the paper's cell they stand beside (status.missing_cells)
    assert set(big["paper_method"]) == {"DP-GAN"} and big["variant"].all()
    assert math.isnan(big.loc[0.2, "difference"]) and bool(big.loc[0.2, "variant"])
    assert pd.isna(big.loc[0.2, "paper_command"])  # at the paper profile
    small = t[(t.method == "DP-GAN") & (t.dataset == "mnist")].set_index("epsilon")
    assert big.loc[0.2, "paper"] == small.loc[0.2, "paper"]  # the paper's DP-GAN number
    assert small.loc[0.2, "ours"] == 0.15  # the small-batch cell is unchanged
    # a missing large-batch cell names its own config and the large-batch run's cost
    assert pd.isna(big.loc[0.4, "ours"])
    assert "one run per budget (queued in scripts/cpu_queue.sh" in big.loc[0.4, "status"]
    assert ("--config mnist-eps1-large --profile paper --set epsilon=0.4"
            in big.loc[0.4, "paper_command"])
    assert "(2195 steps)" in big.loc[0.4, "measured_cost"]  # the large-batch run's cost
    assert "(2195 steps)" not in small.loc[0.4, "measured_cost"]
    # a large-batch run with another setting changed too is a variant: left out
    v = tmp_path / "dpgan" / "mnist-eps1-large" / "paper-eps0.6-lr"
    v.mkdir(parents=True)
    cfg = load_config("mnist-eps1-large", "paper", method="dpgan", epsilon=0.6,
                      lr_d=0.1).to_dict()
    (v / "run.json").write_text(json.dumps(
        {"config": cfg, "target_epsilon": 0.6, "profile": "paper", "seed": 0, "steps": 2195,
         "epsilon": {"rdp": 0.6}, "device": "cuda", "hardware": {}, "history": [],
         "git_sha": "x", "timings": {"train_seconds": 60.0, "seconds_per_step": 1.0}}))
    (v / "eval-600ep.json").write_text(json.dumps({"paper": 0.9, "clean": 0.9, "epochs": 600}))
    t = book.lowdp_methods_table(root=tmp_path)
    big = t[(t.method == "DP-GAN (large batch)") & (t.dataset == "mnist")].set_index("epsilon")
    assert pd.isna(big.loc[0.6, "ours"]) and big.loc[0.2, "ours"] == 0.8
    # a result at a profile that trains less than the paper (the large-batch cpu profile's
    # 15 of 150 epochs) is not compared, and still says what the paper-scale cell costs and
    # how to run it
    dpgan_run("cpu-eps0.8", 0.5, config="mnist-eps1-large", epsilon=0.8)
    t = book.lowdp_methods_table(root=tmp_path)
    b8 = t[(t.method == "DP-GAN (large batch)") & (t.dataset == "mnist")
           & (t.epsilon == 0.8)].iloc[0]
    assert (b8.ours, b8.profile) == (0.5, "cpu") and math.isnan(b8.difference)
    assert "--config mnist-eps1-large --profile paper --set epsilon=0.8" in b8.paper_command
    assert b8.measured_cost.startswith("0.02 h training (2195 steps) at the paper profile")
    # with no dataset here no cell has a command to give, and the columns still exist (the
    # notebook selects them), empty, while every cell says which data it needs
    monkeypatch.setattr(book, "data_status", lambda dataset: f"needs data: {dataset}")
    t = book.lowdp_methods_table(root=tmp_path / "nothing")
    assert {"measured_cost", "paper_command"} <= set(t.columns)
    assert t.paper_command.isna().all() and t.measured_cost.isna().all()
    assert (t.status == "needs data: " + t.dataset).all()


def test_lowdp_eps1_column_counts_a_seed_once(tmp_path):
    """The eps = 1 column of tab:lowdp counts training seeds: ``paper-cpu`` (seed 0 before the
    fast path) is another run of ``paper-cpu-fast``'s seed, left out as T1's seed spread
    leaves it out."""
    import json

    from datalens_lib import book
    from datalens_lib.config import load_config

    for folder, seed, acc in (("paper-cpu", 0, 0.65), ("paper-cpu-fast", 0, 0.64),
                              ("paper-cpu-seed1", 1, 0.70)):
        d = tmp_path / "datalens" / "mnist-eps1" / folder
        d.mkdir(parents=True)
        cfg = load_config("mnist-eps1", "paper", moment_dtype="bfloat16").to_dict()
        rec = {"config": cfg, "target_epsilon": 1.0, "profile": "paper", "seed": seed,
               "steps": 86, "epsilon": {"paper": 0.99}, "device": "cpu", "hardware": {},
               "history": [], "git_sha": "x",
               "timings": {"train_seconds": 1.0, "seconds_per_step": 1.0}}
        (d / "run.json").write_text(json.dumps(rec))
        (d / "eval-30ep.json").write_text(json.dumps({"paper": acc, "clean": acc - 0.01,
                                                      "epochs": 30}))
    t = book.lowdp_methods_table(root=tmp_path)
    one = t[(t.method == "DataLens") & (t.dataset == "mnist") & (t.epsilon == 1.0)].iloc[0]
    assert (one.family, one.seeds) == ("cpu", 2) and one.ours == pytest.approx(0.67)
    spread = book.seed_spread(root=tmp_path).iloc[0]
    assert spread.seeds == 2 and spread["mean"] == pytest.approx(0.67)


def test_cell_table_lists_every_paper_scale_cell_and_says_why_one_is_not_compared(tmp_path):
    """The status page's cell-by-cell view: paper-scale cells only (a smoke row is a pipeline
    check), ours - paper for the compared ones in the artifact's unit, a reason for each of the
    others, in the artifacts' order; the HTML has one collapsible block per artifact."""
    hyper = [
        {"dataset": "mnist", "parameter": "k=200", "ours": 0.68, "paper": 0.7123,
         "profile": "paper", "family": "gpu", "eval_epochs": 600},
        {"dataset": "mnist", "parameter": "k=300", "ours": 0.683, "paper": 0.6753,
         "profile": "paper", "family": "cpu", "eval_epochs": 30},
        {"dataset": "fashion-mnist", "parameter": "k=100", "ours": 0.2, "paper": 0.5738,
         "profile": "paper", "family": "gpu", "eval_epochs": 5},
        {"dataset": "fashion-mnist", "parameter": "beta=0", "ours": 0.6, "paper": 0.5859,
         "profile": "paper", "family": "gpu", "eval_epochs": 600, "variant": True},
        {"dataset": "mnist", "parameter": "k=100", "ours": 0.17, "paper": 0.5889,
         "profile": "smoke", "family": "-", "eval_epochs": 2},
        {"dataset": "mnist", "parameter": "teachers=2000", "ours": None, "paper": 0.5841,
         "profile": "paper", "family": "gpu"},
        {"dataset": "mnist", "parameter": "teachers=3000", "ours": 0.72, "paper": 0.7061,
         "profile": "paper", "family": "gpu", "eval_epochs": "600"},  # above the paper
        {"dataset": "mnist", "parameter": "beta=0.1", "ours": 0.6, "paper": 0.645,
         "profile": "paper", "family": "gpu", "eval_epochs": "5"}]  # epochs as text
    _save(tmp_path, "tab:hyperparam", hyper)
    _save(tmp_path, "tab:image", [
        {"dataset": "mnist", "epsilon": 1.0, "ours": 0.70, "paper": 0.7123, "profile": "paper",
         "family": "gpu", "eval_epochs": 600.0}])
    # T1's CPU-family cell, the mean over training seeds (book.seed_cells), beside the GPU one
    _save(tmp_path, "tab:image (training seeds)", [
        {"method": "DataLens", "dataset": "mnist", "epsilon": "1", "profile": "paper",
         "family": "cpu", "seeds": 3, "ours": 0.66, "ours_sd": 0.04,
         "ours_max": 0.71, "eval_epochs": 30, "paper": 0.7123}])
    _save(tmp_path, "tab:visual", [
        {"dataset": "mnist", "epsilon": "1", "method": "DataLens", "ours": 3.8, "paper": 4.37,
         "profile": "paper", "family": "gpu", "comparable": False},
        {"dataset": "mnist", "epsilon": "inf", "method": "real <data> & co", "ours": 9.7,
         "paper": 9.86, "profile": "paper", "family": "gpu", "comparable": False}])
    # T5's variants of the paper's compressors, labelled as T5 labels them
    # (book.compressor_label): each a cell of its own
    variants = {a: book.compressor_label(a) for a in AGGREGATORS}
    variants = {a: v for a, v in variants.items() if v[2]}
    _save(tmp_path, "tab:compression", [
        {"dataset": "mnist", "method": label, "paper_method": paper_method, "variant": True,
         "aggregator": a, "ours": 0.15, "paper": None, "profile": "paper", "family": "gpu",
         "eval_epochs": 30} for a, (label, paper_method, _) in variants.items()])
    _save(tmp_path, "tab:dpsgd-mnist", [
        {"dataset": "mnist", "method": "GM-DP", "epsilon": 0.05, "parameter": "", "ours": 77.9,
         "paper": 78.4, "profile": "paper", "family": "gpu"}])
    t = status.cell_table(root=tmp_path)
    assert list(t.columns) == list(status.CELL_COLUMNS)
    order = [a.artifact for a in status.artifacts()]
    assert list(t.artifact) == sorted(t.artifact, key=order.index)  # the paper's order
    assert len(variants) == 2  # d2pfed-paper, fetchsgd-sound
    assert len(t) == 11 + len(variants) and "smoke" not in set(t.family)
    assert (t.family != "-").all()
    image = t[t.artifact == "tab:image"].set_index("family")
    assert image.loc["cpu", "ours"] == 0.66 and image.loc["gpu", "ours"] == 0.70
    assert image.loc["cpu", "not compared because"].startswith("CPU family")
    assert sorted(t[t.artifact == "tab:compression"].method) == sorted(
        label for label, _, _ in variants.values())  # one row per variant aggregator
    by = {(r["artifact"], r["dataset"], r["parameter"]): r for r in t.to_dict("records")
          if r["family"] != "cpu" or r["artifact"] != "tab:image"}  # the GPU cell of tab:image
    assert by[("tab:image", "mnist", "")]["epsilon"] == "1"
    assert by[("tab:hyperparam", "mnist", "k=300")]["epsilon"] == "1"  # the table's budget
    assert by[("tab:compression", "mnist", "")]["epsilon"] == "1"
    diff = {k: r["ours - paper"] for k, r in by.items()}
    assert diff[("tab:image", "mnist", "")] == pytest.approx(0.70 - 0.7123)
    assert diff[("tab:hyperparam", "mnist", "k=200")] == pytest.approx(0.68 - 0.7123)
    assert diff[("tab:dpsgd-mnist", "mnist", "")] == pytest.approx(77.9 - 78.4)  # points
    assert diff[("tab:hyperparam", "mnist", "teachers=3000")] == pytest.approx(0.72 - 0.7061)
    compared = t[t["ours - paper"].notna()]
    assert (compared["not compared because"] == "").all() and len(compared) == 4
    rest = t[t["ours - paper"].isna()].set_index(["artifact", "parameter"])[
        "not compared because"]
    assert rest.str.len().gt(0).all()  # every other cell says why
    assert rest[("tab:hyperparam", "k=300")].startswith("CPU family")
    assert rest[("tab:hyperparam", "k=100")].startswith("5-epoch evaluation")
    assert rest[("tab:hyperparam", "beta=0.1")].startswith("5-epoch evaluation")  # "5" too
    assert rest[("tab:hyperparam", "beta=0")] == "a variant of the paper's setting"
    assert rest[("tab:visual", "")].str.startswith("another scale").all()
    assert (rest[("tab:compression", "")] == "the paper has no number for this cell").all()
    assert t.set_index("artifact").loc["tab:compression", "paper"].isna().all()
    # the reasons agree with the status page's own count of compared cells
    for art in status.artifacts():
        if art.metric:
            row = status.summarise(art, root=tmp_path)
            n = int(t[(t.artifact == art.artifact)]["ours - paper"].notna().sum())
            assert (row["median |ours - paper|"] is None) == (n == 0), art.artifact
    html = status.cells_html(t)
    assert html.count("<details>") == t.artifact.nunique() == 5
    where = [html.index(f"<code>{a}</code>") for a in dict.fromkeys(t.artifact)]
    assert where == sorted(where)  # blocks in the paper's order, not alphabetical
    assert "<code>tab:hyperparam</code></a>: 6 cell(s) with a paper number; 2 compared" in html
    assert "<code>tab:compression</code></a>: 0 cell(s) with a paper number, 2 without; 0 " \
        "compared" in html
    n = "<td class='n'>"
    assert f"{n}0.7123</td>{n}0.68</td>{n}-0.0323</td>" in html  # paper, ours, signed diff
    assert f"{n}0.7061</td>{n}0.72</td>{n}+0.0139</td>" in html
    assert "real &lt;data&gt; &amp; co" in html and "<data>" not in html  # escaped
    assert "<td>∞</td>" in html and "<td>inf</td>" not in html
    assert html.count("<tr>") == len(t) + t.artifact.nunique()  # a head row per block
    assert status.cells_html(status.cell_table(root=tmp_path / "empty")).startswith("<p>No ")


def test_methods_table_rows_name_the_paper_cell_they_stand_beside(monkeypatch, tmp_path):
    """T1's rows (book.methods_table) carry the paper's method name; DP-GAN's large-batch
    setting is a variant row of its own beside the paper's DP-GAN cell, which the status
    page's missing-cell list reads (``paper_method``) instead of parsing the label. Training is
    replaced by a fixed paper-profile summary: the labelling is what is under test."""
    from datalens_lib import book

    def fake_run(key, cfg, profile, **_):
        return {"profile": "paper", "family": "gpu", "acc_paper": 0.5, "acc_clean": 0.5,
                "eval_epochs": 600, "neighbouring": "add/remove",
                "epsilon_spent": {"rdp": 1.0}, "dp_guarantee": "rdp", "config": cfg}

    monkeypatch.setattr(book, "run_method", fake_run)
    monkeypatch.setattr(book, "committed_setting", lambda *a, **k: [])
    monkeypatch.setattr(book, "data_status", lambda dataset: None)
    t = book.methods_table("paper", datasets=["mnist"])
    dp = t[t.paper_method == "DP-GAN"].set_index(["method", "epsilon"])
    assert set(dp.index.get_level_values(0)) == {"DP-GAN", "DP-GAN (large batch)"}
    assert dp["variant"].to_dict() == {k: k[0] != "DP-GAN" for k in dp.index}
    assert pd.isna(dp.loc[("DP-GAN (large batch)", "1"), "difference"])  # never compared
    assert not pd.isna(dp.loc[("DP-GAN", "1"), "difference"])
    assert (t.method == t.paper_method).sum() == len(t) - len(dp) // 2
    # stored alone, the large-batch rows make the paper's DP-GAN cells "only a variant ran"
    _save(tmp_path, "tab:image (all methods)",
          t[t.method == "DP-GAN (large batch)"].to_dict("records"))
    m = status.missing_cells(root=tmp_path)
    why = m[(m.artifact == "tab:image") & (m.dataset == "mnist") & (m.method == "DP-GAN")]
    assert set(why.why) == {"only a variant of the paper's setting ran at paper scale"}


def test_missing_cells_list_the_papers_cells_without_ours_and_say_why(tmp_path):
    """The complement of cell_table for the paper's cells: a cell of the paper is covered by a
    paper-scale number of ours with its dataset, method, ε (as a number: the paper prints 1 and
    1.0) and parameter, of any run family or scale, but not by a smoke row, a variant, or a
    row without a number; the others say why they are missing."""
    _save(tmp_path, "tab:image", [
        {"dataset": "mnist", "epsilon": 1.0, "ours": 0.66, "paper": 0.7123, "profile": "paper",
         "family": "cpu", "eval_epochs": 30},  # CPU family: covered, not compared
        {"dataset": "mnist", "epsilon": 10, "ours": math.nan, "paper": 0.8066,
         "profile": "paper", "status": "queued <here>"},  # no number: not covered; a note
        {"dataset": "fashion-mnist", "epsilon": 10, "ours": 0.3, "paper": 0.7061,
         "profile": "smoke"},
        {"dataset": "fashion-mnist", "epsilon": 1, "ours": 0.6, "paper": 0.6478,
         "profile": "paper", "variant": True, "config": "fashion-mnist-eps1-large"},
        {"dataset": "fashion-mnist", "epsilon": 1, "ours": 0.2, "paper": 0.6478,
         "profile": "smoke"},  # a pipeline check beside the variant: the variant is named
        {"dataset": "celeba-hair", "epsilon": 1, "ours": 0.5, "paper": 0.6,
         "profile": "smoke"}])  # a stand-in's pipeline check: the user's data is the reason
    _save(tmp_path, "tab:lowdp", [  # a budget stored as text, one the paper prints as 1.0
        {"dataset": "mnist", "epsilon": "1.00", "ours": 0.66, "paper": 0.7123, "profile": "paper"},
        {"dataset": "mnist", "epsilon": 0.6000000000000001, "ours": 0.5, "profile": "paper"}])
    _save(tmp_path, "tab:hyperparam", [  # a table at one budget stores rows without ε
        {"dataset": "mnist", "parameter": "k=300", "ours": 0.683, "paper": 0.6753,
         "profile": "paper", "family": "cpu"},
        {"dataset": "mnist", "parameter": "k=100", "ours": 0.17, "profile": "smoke"}])
    _save(tmp_path, "tab:image (all methods)", [  # without ε in a table of several budgets
        {"dataset": "mnist", "method": "G-PATE", "ours": 0.5, "profile": "paper"},
        {"dataset": "mnist", "method": "DP-GAN (large batch)", "paper_method": "DP-GAN",
         "epsilon": "10", "ours": 0.6, "profile": "cpu", "variant": True},  # not "ran"
        {"dataset": "fashion-mnist", "method": "DP-GAN (large batch)", "paper_method": "DP-GAN",
         "epsilon": "10", "ours": 0.6, "profile": "paper", "variant": True},
        # a partly empty paper_method column (NaN, stored as null): the row's own method
        {"dataset": "fashion-mnist", "method": "G-PATE", "paper_method": math.nan,
         "epsilon": "10", "ours": 0.4, "profile": "paper", "variant": True}])
    _save(tmp_path, "tab:visual", [  # another scale still covers the cell
        {"dataset": "mnist", "method": "DataLens", "epsilon": "1", "ours": 3.8, "paper": 4.37,
         "profile": "paper", "comparable": False}])
    m = status.missing_cells(root=tmp_path)
    assert list(m.columns) == list(status.MISSING_COLUMNS)
    order = [a.artifact for a in status.artifacts()]
    assert list(m.artifact) == sorted(m.artifact, key=order.index)
    key = m.set_index(["artifact", "dataset", "method", "epsilon", "parameter"])
    assert not key.index.duplicated().any()
    why = key["why"]
    for covered in [("tab:image", "mnist", "DataLens", "1", ""),
                    ("tab:lowdp", "mnist", "DataLens", "1", ""),
                    ("tab:visual", "mnist", "DataLens", "1", ""),
                    ("tab:hyperparam", "mnist", "DataLens", "1", "k=300"),
                    ("tab:lowdp", "mnist", "DataLens", "0.6", "")]:  # ε with rounding noise
        assert covered not in why.index, covered
    assert why[("tab:hyperparam", "mnist", "DataLens", "1", "k=100")] == \
        "a pipeline check only (smoke profile)"  # a row without ε, one budget
    assert why[("tab:image", "celeba-hair", "DataLens", "1", "")] == \
        "needs the user's data (celeba-hair)"
    assert why[("tab:image", "mnist", "PATE-GAN", "1", "")] == "method not implemented yet"
    assert why[("tab:lowdp", "mnist", "GS-WGAN", "0.2", "")] == "method not implemented yet"
    assert why[("tab:image", "fashion-mnist", "DP-GAN", "10", "")] == \
        "only a variant of the paper's setting ran at paper scale"  # "(large batch)"
    assert why[("tab:image", "mnist", "DP-GAN", "10", "")] == "not run at paper scale yet"
    assert why[("tab:image", "fashion-mnist", "G-PATE", "10", "")] == \
        "only a variant of the paper's setting ran at paper scale"
    assert set(why) <= {w for w in why if w.startswith(status.MISSING_REASONS)}
    note = key["note"]
    assert note[("tab:image", "mnist", "DataLens", "10", "")] == "queued <here>"
    assert (note.drop(("tab:image", "mnist", "DataLens", "10", "")) == "").all()
    assert why[("tab:image", "mnist", "DataLens", "10", "")] == "not run at paper scale yet"
    assert why[("tab:image", "fashion-mnist", "DataLens", "10", "")] == \
        "a pipeline check only (smoke profile)"
    assert why[("tab:image", "fashion-mnist", "DataLens", "1", "")] == \
        "only a variant of the paper's setting ran at paper scale"
    assert why[("tab:image", "celeba-hair", "DataLens", "1", "")] == \
        "needs the user's data (celeba-hair)"
    assert why[("tab:image", "mnist", "G-PATE", "1", "")] == "not run at paper scale yet"
    assert why[("tab:lowdp", "mnist", "DataLens", "0.2", "")] == "not run at paper scale yet"
    assert key.loc[("tab:image", "mnist", "DataLens", "10", ""), "paper"] == 0.8066
    assert ("tab:image", "mnist", "DC-GAN", "inf", "") in why.index  # ε = ∞ as a key
    # the status table's coverage counts exactly the paper's cells not listed here
    table = status.status_table(root=tmp_path)
    for r in table.to_dict("records"):
        if r["paper cells"] is not None and not pd.isna(r["paper cells"]):
            assert r["paper cells covered"] + int((m.artifact == r["artifact"]).sum()) == \
                r["paper cells"], r["artifact"]
    assert (table.loc[table["paper cells"].isna(), "paper cells covered"] == 0).all()
    cov = table.set_index("artifact")["paper cells covered"]
    assert cov["tab:image"] == cov["tab:visual"] == 1 and cov["tab:lowdp"] == 2
    assert cov["tab:hyperparam"] == 1
    arts = {a.artifact: a for a in status.artifacts()}
    assert status._one_budget(status.paper_cells(arts["tab:image"])) == ""  # 1, 10 and ∞
    assert status._one_budget(status.paper_cells(arts["tab:components"])) == "1"
    assert ">1 / 55<" in status.to_html(table)
    html = status.missing_html(m)
    assert html.count("<details>") == m.artifact.nunique()
    assert "<code>tab:image</code></a>: 54 missing (" in html
    assert "a pipeline check only (smoke profile): 1" in html and "<td>∞</td>" in html
    assert status.missing_counts(m).startswith(f"not run at paper scale yet: "
                                               f"{(m.why == 'not run at paper scale yet').sum()}; ")
    assert html.count("<tr>") == len(m) + m.artifact.nunique()
    assert "<td class='why'>queued &lt;here&gt;</td>" in html
    assert "the user&#x27;s data" in html and "user's data" not in html  # escaped
    assert status.missing_html(m.iloc[:0]).startswith("<p>Every ")
