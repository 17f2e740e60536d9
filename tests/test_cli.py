import json
import subprocess
import sys

import pytest

from datalens_lib import cli
from datalens_lib.data import registry


def test_privacy_json_max_queries(capsys):
    assert cli.main(["privacy", "--k", "200", "--sigma", "5000", "--delta", "1e-5",
                     "--epsilon", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["paper"] == 1300 and out["rdp"] > 1300 and out["pld"] > out["rdp"]


def test_privacy_epsilon_for_queries(capsys):
    assert cli.main(["privacy", "--k", "200", "--sigma", "5000", "--queries", "1290",
                     "--json", "--conversion", "paper"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["paper"] and 0.99 < out["paper"] <= 1.0


def test_privacy_sigma_for_target(capsys):
    assert cli.main(["privacy", "--k", "200", "--queries", "1300", "--epsilon", "1",
                     "--conversion", "paper", "--json"]) == 0
    assert 4990 < json.loads(capsys.readouterr().out)["paper"] <= 5000


def test_privacy_bad_input_exit_code(capsys):
    assert cli.main(["privacy", "--k", "200", "--sigma", "-1", "--epsilon", "1"]) == 2
    assert "sigma must be" in capsys.readouterr().err


def test_data_check_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(registry, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(registry, "SYSTEM_DATA_DIR", tmp_path / "none")
    monkeypatch.setenv("DATALENS_DATA_DIR", str(tmp_path))
    assert cli.main(["data", "check", "cifar10"]) == 1
    assert "cifar10" in capsys.readouterr().err
    assert cli.main(["data", "list"]) == 0
    assert "not found" in capsys.readouterr().out


@pytest.mark.slow
def test_console_script_installed():
    r = subprocess.run([sys.executable, "-m", "datalens_lib.cli", "privacy", "--k", "200",
                        "--sigma", "5000", "--epsilon", "1", "--json"],
                       capture_output=True, text=True, check=True)
    assert json.loads(r.stdout)["paper"] == 1300


def test_train_set_parses_json_and_plain_strings(monkeypatch):
    seen = {}

    def fake_load(name, profile, method, **over):
        seen.update(over, method=method)
        raise ValueError("stop here")

    monkeypatch.setattr("datalens_lib.config.load_config", fake_load)
    rc = cli.main(["train", "--config", "mnist-eps1", "--profile", "smoke", "--out", "/tmp/x",
                   "--set", "moment_dtype=float32", "--set", "max_steps=5",
                   "--set", "stochastic=false", "--set", "c=null"])
    assert rc == 2
    assert seen == {"moment_dtype": "float32", "max_steps": 5, "stochastic": False, "c": None,
                    "method": "datalens"}


@pytest.mark.slow
def test_reference_writes_record_and_extends(tmp_path, capsys, monkeypatch):
    from conftest import real_dataset_dir

    monkeypatch.setenv("DATALENS_DATA_DIR", str(real_dataset_dir("mnist").parent))
    argv = ["reference", "--dataset", "mnist", "--limit", "300", "--device", "cpu",
            "--out", str(tmp_path)]
    assert cli.main(argv + ["--epochs", "1"]) == 0
    assert cli.main(argv + ["--epochs", "2"]) == 0
    one = json.loads((tmp_path / "eval-1ep.json").read_text())
    two = json.loads((tmp_path / "eval-2ep.json").read_text())
    assert two["continued_from_epoch"] == 1 and two["n_train"] == 300
    assert two["test_accuracy_per_epoch"][0] == one["test_accuracy_per_epoch"][0]
    assert "real training set" in two["what"] and "git_sha" in two
    assert "real-data test accuracy" in capsys.readouterr().out


@pytest.mark.parametrize("args, name", [(["--epochs", "0"], "--epochs"), (["--lr", "0"], "--lr"),
                                        (["--lr", "-1"], "--lr"), (["--limit", "0"], "--limit"),
                                        (["--seed", "-2"], "--seed")])
def test_evaluate_refuses_bad_numbers_by_name(args, name, capsys):
    """0 is not "the default" (it was read as one); each bad number is named, exit code 2."""
    assert cli.main(["evaluate", "no-such-run", *args]) == 2
    assert f"error: {name} must be" in capsys.readouterr().err


def test_train_refuses_a_negative_seed_by_name(tmp_path, capsys):
    assert cli.main(["train", "--config", "mnist-eps1", "--profile", "smoke", "--out",
                     str(tmp_path / "run"), "--seed", "-1"]) == 2
    assert "error: --seed must be >= 0" in capsys.readouterr().err


@pytest.mark.parametrize("item", ["stochastic", "stochastic=", "=true"])
def test_train_and_dpsgd_refuse_a_set_without_key_and_value(item, tmp_path, capsys):
    """``--set stochastic`` once became the empty string, which a config read as false: the
    ablation ran silently. Both commands that take --set refuse it by name."""
    assert cli.main(["train", "--config", "mnist-eps1", "--profile", "smoke", "--out",
                     str(tmp_path / "run"), "--set", item]) == 2
    assert "--set takes KEY=VALUE" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    assert cli.main(["dpsgd", "--epsilon", "1", "--k", "0.7", "--method", "normtopk",
                     "--out", str(tmp_path / "d"), "--set", item]) == 2
    assert "--set takes KEY=VALUE" in capsys.readouterr().err


def test_train_refuses_a_python_spelled_switch(tmp_path, capsys):
    assert cli.main(["train", "--config", "mnist-eps1", "--profile", "smoke", "--out",
                     str(tmp_path / "run"), "--set", "stochastic=False"]) == 2
    assert "stochastic must be true or false, got 'False'" in capsys.readouterr().err


@pytest.mark.parametrize("args,message", [
    (["--seeds", "0"], "--seeds must be >= 1"),
    (["--first-seed", "-1"], "--first-seed must be >= 0"),
])
def test_dpsgd_refuses_bad_seed_ranges(args, message, tmp_path, capsys):
    assert cli.main(["dpsgd", "--epsilon", "1", "--k", "0.7", "--method", "normtopk",
                     "--out", str(tmp_path / "d"), *args]) == 2
    assert message in capsys.readouterr().err


def test_privacy_refuses_queries_and_epsilon_together(capsys):
    assert cli.main(["privacy", "--k", "200", "--sigma", "5000", "--queries", "10",
                     "--epsilon", "1"]) == 2
    assert "not both" in capsys.readouterr().err
