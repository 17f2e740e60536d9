import json
import re
from pathlib import Path

import pytest
from conftest import SHARED

from datalens_lib import cli
from datalens_lib.results import (
    PAPER_DIR,
    PAPER_METHODS,
    PAPER_NAMES,
    comparison,
    paper_value,
    paper_values,
    setting_label,
    shown_profile_of,
)

PAPER_TEX = SHARED.parent / "paper" / "000_9b649959b7e50e15.txt"


def test_settings_are_labelled_once_for_every_table():
    """One rule names a run's setting (results.setting_label) and one promotes a run that
    trains the paper setting to the paper profile (shown_profile_of); the tables' own
    lists of settings per paper cell (book.paper_settings) follow them."""
    from datalens_lib import book

    assert {PAPER_METHODS[v]: v for v in PAPER_NAMES.values()} == PAPER_NAMES
    assert setting_label("dpgan", "mnist-eps1") == ("DP-GAN", "DP-GAN", False)
    assert setting_label("dpgan", "mnist-eps10-large") == ("DP-GAN (large batch)", "DP-GAN", True)
    assert setting_label("datalens", "mnist-eps1-largest") == ("DataLens", "DataLens", False)
    assert setting_label("mine", "x") == ("mine", "mine", False)  # a name the paper lacks
    assert shown_profile_of("cpu", True) == "paper" and shown_profile_of("cpu", False) == "cpu"
    assert shown_profile_of("smoke", False) == "smoke"
    assert book.paper_settings("DP-GAN", "mnist-eps1") == [
        ("DP-GAN", "mnist-eps1", False), ("DP-GAN (large batch)", "mnist-eps1-large", True)]
    assert book.paper_settings("DataLens", "mnist-eps1") == [("DataLens", "mnist-eps1", False)]
    assert book.paper_settings("PATE-GAN", "mnist-eps1") == [("PATE-GAN", "mnist-eps1", False)]


@pytest.mark.parametrize("csv_name,label", [("tab_image.csv", "tab:image"),
                                            ("tab_lowdp.csv", "tab:lowdp")])
def test_paper_csv_cells_appear_in_the_paper(csv_name, label):
    if not PAPER_TEX.exists():
        pytest.skip("paper source not available")
    tex = PAPER_TEX.read_text()
    at = tex.index(f"\\label{{{label}}}")
    region = tex[max(0, at - 3500): at + 3500]
    numbers = set(re.findall(r"0\.\d{4}", region))
    rows = paper_values(csv_name)
    assert len(rows) >= 50
    missing = [r for r in rows if f"{r['value']:.4f}" not in numbers]
    assert not missing, missing[:3]


def test_paper_value_lookup():
    assert paper_value("mnist", 1.0) == 0.7123
    assert paper_value("fashion-mnist", 10.0) == 0.7061
    assert paper_value("mnist", 1.0, method="G-PATE") == 0.5810
    assert paper_value("svhn", 1.0) is None


def _fake_run(root: Path, config: str, profile: str, acc: float):
    d = root / "datalens" / config / profile
    d.mkdir(parents=True)
    rec = {"config": {"dataset": "mnist"}, "profile": profile, "target_epsilon": 1.0,
           "steps": 3, "queries": 45, "device": "cpu", "hardware": {},
           "timings": {"train_seconds": 1.0}, "epsilon": {"paper": 0.9, "rdp": 0.8}}
    (d / "run.json").write_text(json.dumps(rec))
    accs = [acc - 0.1] * 29 + [acc, acc - 0.2]
    (d / "eval-31ep.json").write_text(json.dumps(
        {"test_accuracy_per_epoch": accs, "paper": acc, "clean": acc - 0.2, "best_epoch": 30,
         "epochs": 31}))


def test_best_profile_wins_and_comparison(tmp_path):
    _fake_run(tmp_path, "mnist-eps1", "smoke", 0.2)
    _fake_run(tmp_path, "mnist-eps1", "cpu", 0.5)
    (c,) = comparison(tmp_path, PAPER_DIR)  # the larger profile; shown, never compared
    assert (c["method"], c["profile"], c["paper"]) == ("DataLens", "cpu", 0.7123)
    assert c["ours_paper_protocol"] == 0.5 and c["difference"] is None


def test_comparison_covers_every_method_and_compares_the_paper_setting_only(tmp_path):
    """Per method and config: the run compared with the paper wins (paper profile, float32
    moments, 600 epochs); the CPU family and a 30-epoch evaluation are shown, not compared;
    DC-GAN's eps = inf row finds its paper number."""
    def run(method, config, folder, profile, acc, epochs, moments="float32", eps=1.0):
        d = tmp_path / method / config / folder
        d.mkdir(parents=True)
        ds = config.rsplit("-eps", 1)[0]
        (d / "run.json").write_text(json.dumps({
            "config": {"dataset": ds, "moment_dtype": moments}, "profile": profile,
            "target_epsilon": eps, "steps": 5, "epsilon": {"paper": eps} if eps else {}}))
        (d / f"eval-{epochs}ep.json").write_text(json.dumps(
            {"paper": acc, "clean": acc - 0.1, "epochs": epochs}))

    run("datalens", "mnist-eps1", "paper-cpu-fast", "paper", 0.64, 30, "bfloat16")
    run("gpate", "mnist-eps1", "paper", "paper", 0.39, 600)
    run("dcgan", "mnist-epsinf", "cpu", "cpu", 0.72, 30, eps=None)
    rows = {(r["method"], r["config"]): r for r in comparison(tmp_path, PAPER_DIR)}
    dl = rows[("DataLens", "mnist-eps1")]
    assert dl["family"] == "cpu" and dl["difference"] is None and dl["paper"] == 0.7123
    run("datalens", "mnist-eps1", "paper", "paper", 0.68, 600)
    rows = {(r["method"], r["config"]): r for r in comparison(tmp_path, PAPER_DIR)}
    dl = rows[("DataLens", "mnist-eps1")]
    assert dl["folder"] == "paper" and dl["difference"] == pytest.approx(0.68 - 0.7123)
    assert rows[("G-PATE", "mnist-eps1")]["difference"] == pytest.approx(0.39 - 0.5810)
    run("dpgan", "mnist-eps1-large", "paper", "paper", 0.90, 30)  # DPImageBench's setting
    rows = {(r["method"], r["config"]): r for r in comparison(tmp_path, PAPER_DIR)}
    large = rows[("DP-GAN (large batch)", "mnist-eps1-large")]
    assert large["paper"] == 0.4036 and large["difference"] is None
    dc = rows[("DC-GAN", "mnist-epsinf")]
    assert dc["paper"] == 0.9653 and dc["difference"] is None and dc["epsilon_spent"] is None
    # DP-GAN's small-batch cpu profile trains the paper setting (only its evaluation is 30
    # epochs): shown and compared as the paper profile, its recorded profile kept beside
    from datalens_lib.config import load_config

    def dpgan_cpu(acc, **over):  # a record of the small-batch cpu profile's whole config
        run("dpgan", "mnist-eps1", "cpu", "cpu", acc, 30)
        rec = json.loads((tmp_path / "dpgan" / "mnist-eps1" / "cpu" / "run.json").read_text())
        rec["config"] = load_config("mnist-eps1", "cpu", method="dpgan", **over).to_dict()
        (tmp_path / "dpgan" / "mnist-eps1" / "cpu" / "run.json").write_text(json.dumps(rec))

    dpgan_cpu(0.30)
    rows = {(r["method"], r["config"]): r for r in comparison(tmp_path, PAPER_DIR)}
    small = rows[("DP-GAN", "mnist-eps1")]
    assert (small["profile"], small["recorded_profile"]) == ("paper", "cpu")
    assert small["difference"] == pytest.approx(0.30 - 0.4036)
    # a record whose training differs from its profile (another discriminator lr) is not
    # the paper's training: shown at its recorded profile, not compared
    import shutil

    shutil.rmtree(tmp_path / "dpgan" / "mnist-eps1" / "cpu")
    dpgan_cpu(0.31, lr_d=0.1)
    small = {(r["method"], r["config"]): r for r in comparison(tmp_path, PAPER_DIR)}[
        ("DP-GAN", "mnist-eps1")]
    assert small["profile"] == "cpu" and small["difference"] is None
    # a run recorded at the paper profile wins the cell over one shown as paper (whatever
    # the folder order)
    shutil.rmtree(tmp_path / "dpgan" / "mnist-eps1" / "cpu")
    dpgan_cpu(0.30)
    run("dpgan", "mnist-eps1", "paper", "paper", 0.45, 600)
    small = {(r["method"], r["config"]): r for r in comparison(tmp_path, PAPER_DIR)}[
        ("DP-GAN", "mnist-eps1")]
    assert (small["folder"], small["recorded_profile"]) == ("paper", "paper")


@pytest.mark.parametrize("method,config,profile,trains", [
    ("dpgan", "mnist-eps1", "cpu", True),  # a 30-epoch evaluation only
    ("dpgan", "fashion-mnist-eps10", "cpu", True),
    ("dpgan", "mnist-eps1", "smoke", False),
    ("dpgan", "mnist-eps1-large", "cpu", False),  # 15 of 150 epochs
    ("gpate", "mnist-eps1", "cpu", False),  # bfloat16 moments, class-table fakes
    ("dcgan", "mnist-epsinf", "cpu", False),  # 10 of 25 epochs
    ("datalens", "mnist-eps1", "cpu", False),
    ("datalens", "mnist-eps1", "paper", True),
    ("datalens", "no-such-config", "paper", False),
    ("dpgan", "mnist-eps1", "no-such-profile", False)])
def test_trains_paper_setting_only_when_a_profile_changes_just_the_evaluation(
        method, config, profile, trains):
    from datalens_lib.config import trains_paper_setting

    assert trains_paper_setting(config, profile, method) is trains


def test_comparison_reports_the_stopping_ledger(tmp_path):
    """The spent epsilon is the one under the ledger that stopped the run (DP-GAN stops on
    Opacus's RDP; its ``paper`` entry is another, looser conversion)."""
    d = tmp_path / "dpgan" / "mnist-eps1" / "cpu"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({
        "config": {"dataset": "mnist"}, "profile": "cpu", "target_epsilon": 1.0, "steps": 5,
        "conversion": "rdp", "epsilon": {"paper": 1.31, "rdp": 0.99}}))
    (r,) = comparison(tmp_path, PAPER_DIR)
    assert (r["ledger"], r["epsilon_spent"]) == ("rdp", 0.99)


def test_committed_results_are_complete_records():
    """Every committed run of every method spent at most its budget under the ledger that
    stopped it (the record's ``conversion``, which every method writes at the top level; DP-GAN's
    config has no such field because its ledger is fixed), and each evaluation's clean accuracy
    (last epoch) is at most its paper-protocol one (best). G-PATE's official-stop variant is the
    exception: its data-dependent ledger (not a DP guarantee) is charged for the step that
    crosses the budget, as the official loop does, and its sound ledgers exceed the budget,
    which is what the variant shows."""
    from datalens_lib.results import RESULTS_DIR

    runs = sorted(RESULTS_DIR.glob("*/*/*/run.json"))
    assert len(runs) >= 10
    for f in runs:
        rec = json.loads(f.read_text())
        cfg = rec["config"]
        if rec.get("target_epsilon") is not None and cfg.get("stop_on") != "data_dependent":
            assert rec["epsilon"][rec["conversion"]] <= rec["target_epsilon"] + 1e-12, f
        for ev in f.parent.glob("eval-*ep.json"):
            e = json.loads(ev.read_text())
            assert e["clean"] <= e["paper"], ev


def test_cli_results(capsys, tmp_path, monkeypatch):
    assert cli.main(["results"]) == 0
    assert "paper protocol" in capsys.readouterr().out
    from datalens_lib import store

    monkeypatch.setenv("DATALENS_RESULTS_ROOT", str(tmp_path))
    assert cli.main(["results", "--cells"]) == 0
    assert "no paper-scale cell" in capsys.readouterr().out
    assert cli.main(["results", "--missing"]) == 0
    assert "may be empty" in capsys.readouterr().out
    store.save_result("tab:hyperparam", {"n": 1}, [
        {"dataset": "mnist", "parameter": "k=300", "ours": 0.683, "paper": 0.6753,
         "profile": "paper", "family": "cpu", "eval_epochs": 30},
        {"dataset": "mnist", "parameter": "k=200", "ours": 0.68, "paper": 0.7123,
         "profile": "paper", "family": "gpu", "eval_epochs": 600}], profile="paper")
    assert cli.main(["results", "--cells"]) == 0
    out = capsys.readouterr().out
    assert "k=300" in out and "CPU family" in out and "-0.0323" in out
    assert cli.main(["results", "--cells", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["parameter"] for r in rows] == ["k=300", "k=200"]
    assert rows[1]["ours - paper"] == pytest.approx(-0.0323) and rows[0]["ours - paper"] is None
    # --missing: the paper's cells without ours (k=300 at the CPU family covers its cell)
    assert cli.main(["results", "--missing", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    hyper = {(r["dataset"], r["parameter"]): r["why"] for r in rows
             if r["artifact"] == "tab:hyperparam"}
    assert ("mnist", "k=300") not in hyper and ("mnist", "k=200") not in hyper
    assert hyper[("mnist", "k=100")] == "not run at paper scale yet"
    assert hyper[("celeba-gender", "k=700")] == "needs the user's data (celeba-gender)"
    assert cli.main(["results", "--missing"]) == 0
    out = capsys.readouterr().out
    assert "not run at paper scale yet" in out and "of the paper's cells have no cell" in out
    assert "may be empty" not in out
    assert cli.main(["results", "--missing", "--cells"]) == 2


def test_committed_dpgan_cells_stay_within_budget_at_the_realised_rate():
    """Opacus's sampler compares float32 uniforms with q, so the realised rate is
    ceil(q 2^24) / 2^24 (book/privacy.md): every committed DP-GAN cell's stopping ledger,
    recomputed at that rate, is still within the cell's budget."""
    import math

    from datalens_lib.methods.dpgan import LEDGER
    from datalens_lib.privacy.subsampled import dpsgd_epsilon
    from datalens_lib.results import RESULTS_DIR

    runs = sorted(RESULTS_DIR.glob("dpgan/*/*/run.json"))
    assert runs, "no committed DP-GAN cell"
    for path in runs:
        rec = json.loads(path.read_text())
        q = rec["sample_rate"]
        realised = math.ceil(q * 2**24) / 2**24
        assert realised >= q and realised - q <= 2**-24
        eps = dpsgd_epsilon(rec["steps"], realised, rec["noise_multiplier"], rec["delta"],
                            LEDGER)
        assert rec["epsilon"][LEDGER] <= eps <= rec["target_epsilon"], path
