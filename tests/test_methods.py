"""The harness contract, parametrised over the method registry: every method trains its
smoke profile, resumes after an interruption to the same result, writes a complete record
that the evaluation reads, and refuses bad input before allocating."""

import json
import math

import numpy as np
import pytest
import torch
from conftest import real_dataset_dir

from datalens_lib import cli
from datalens_lib.config import available_configs, load_config
from datalens_lib.methods import METHODS, method_class
from datalens_lib.methods.harness import Run, prefix_check, prefix_summary


@pytest.fixture(scope="module")
def mnist_dir():
    return real_dataset_dir("mnist")


SMOKE = {"datalens": "mnist-eps1", "dcgan": "mnist-epsinf", "gpate": "mnist-eps1",
         "dpgan": "mnist-eps1"}
PINNED = {"datalens": {"max_steps": 3, "n_samples": 60}, "dcgan": {"n_samples": 128},
          "gpate": {"n_samples": 60}, "dpgan": {"n_samples": 64}}


def test_every_registered_method_has_a_smoke_config():
    assert set(SMOKE) == set(METHODS)
    for name, config in SMOKE.items():
        assert config in available_configs(name)
        cfg = load_config(config, "smoke", method=name)
        assert isinstance(cfg, method_class(name).config_class)


def _method(name, data_dir, **over):
    cfg = load_config(SMOKE[name], "smoke", method=name, **{**PINNED[name], **over})
    return method_class(name)(cfg, seed=3, device="cpu", data_dir=data_dir, profile="smoke")


@pytest.mark.parametrize("name", sorted(METHODS))
def test_resume_after_an_interruption_gives_the_same_run(name, tmp_path, mnist_dir):
    whole = Run(_method(name, mnist_dir), tmp_path / "a", checkpoint_every=1,
                progress=False).run()
    cut = Run(_method(name, mnist_dir), tmp_path / "b", checkpoint_every=1, progress=False)
    assert cut.run(stop_after=1) == {"status": "interrupted", "step": 1}
    assert not (tmp_path / "b" / "run.json").exists()
    again = Run(_method(name, mnist_dir), tmp_path / "b", checkpoint_every=1, progress=False)
    rec = again.run(resume=True)
    assert rec["resumed"] is True and whole["resumed"] is False
    assert rec["status"] == "complete" and rec["method"] == name
    assert rec["steps"] == whole["steps"] >= 2 and rec["epsilon"] == whole["epsilon"]
    _assert_same_run(whole, rec, tmp_path / "a", tmp_path / "b", name)
    assert rec["privacy"]["dp_guarantee"] and json.loads(
        (tmp_path / "b" / "run.json").read_text())["status"] == "complete"
    # which ε are a DP guarantee, as data: the data-independent ledgers, none for DC-GAN
    # (DataLens and G-PATE also record a data-dependent ε, which is not one)
    expected = {"dcgan": [], "dpgan": ["paper", "rdp", "prv", "pld"]}.get(
        name, ["paper", "rdp", "pld"])
    assert rec["privacy"]["dp_ledgers"] == expected
    assert ("scope" in rec["privacy"]) == bool(expected)  # what a guarantee covers
    if name != "dcgan":  # the private records the guarantee is about (smoke: train_limit)
        cfg = _method(name, mnist_dir).cfg
        assert rec["privacy"]["records"] == cfg.train_limit > 0
        assert "delta_note" not in rec["privacy"]  # 1e-5 < 1/n
    _assert_event_is_the_ledger(name, rec)


def _assert_event_is_the_ledger(name, rec):
    """The record's dp_accounting event, re-accounted by dp_accounting on the orders of the
    record's own ``rdp`` ledger, gives that ledger's epsilon: the event is the mechanism."""
    import dp_accounting
    from dp_accounting import rdp
    from opacus.accountants import RDPAccountant

    from datalens_lib.privacy.accountant import RDP_ORDERS

    event = eval(rec["privacy"]["event"], vars(dp_accounting))  # noqa: S307 -- our own repr
    if name == "dcgan":
        assert isinstance(event, dp_accounting.NonPrivateDpEvent) and rec["epsilon"] == {}
        return
    orders = list(RDPAccountant.DEFAULT_ALPHAS) if name == "dpgan" else list(RDP_ORDERS)
    acc = rdp.RdpAccountant(orders=orders)
    acc.compose(event)
    assert acc.get_epsilon(1e-5) == pytest.approx(rec["epsilon"]["rdp"], rel=1e-6)


def _assert_same_run(whole, rec, dir_a, dir_b, name):
    """Bit for bit: the same samples, labels and per-step losses (resuming restores the
    models, the optimisers, every RNG and the privacy ledger)."""
    a, b = (np.load(d / "samples.npz") for d in (dir_a, dir_b))
    assert a["x"].shape[0] == PINNED[name]["n_samples"] and np.array_equal(a["y"], b["y"])
    assert np.array_equal(a["x"], b["x"])
    for h1, h2 in zip(whole["history"], rec["history"], strict=True):
        assert h1["step"] == h2["step"]
        for k in ("d_loss", "g_loss"):
            if k in h1:
                assert h1[k] == h2[k]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_cli_trains_and_evaluates_every_method(name, tmp_path, mnist_dir, monkeypatch,
                                                capsys):
    monkeypatch.setenv("DATALENS_DATA_DIR", str(mnist_dir.parent))
    sets = [a for k, v in PINNED[name].items() for a in ("--set", f"{k}={v}")]
    out = tmp_path / "run"
    assert cli.main(["train", "--method", name, "--config", SMOKE[name], "--profile", "smoke",
                     "--out", str(out), "--device", "cpu", *sets]) == 0
    assert f"done: {name}" in capsys.readouterr().out
    assert cli.main(["evaluate", str(out), "--epochs", "1", "--device", "cpu"]) == 0
    ev = json.loads((out / "eval-1ep.json").read_text())
    assert 0.0 <= ev["clean"] <= ev["paper"] <= 1.0


def test_bad_input_is_refused_with_the_valid_choices(tmp_path, mnist_dir, capsys):
    with pytest.raises(ValueError, match="unknown method 'nope'; available: datalens, dcgan, "
                                         "gpate, dpgan"):
        method_class("nope")
    with pytest.raises(ValueError, match="unknown config 'mnist-eps1' for method 'dcgan'; "
                                         "available: fashion-mnist-epsinf, mnist-epsinf"):
        load_config("mnist-eps1", "smoke", method="dcgan")
    with pytest.raises(ValueError, match="^profile must be one of"):
        load_config("mnist-epsinf", "tiny", method="dcgan")
    with pytest.raises(ValueError, match="non-private: epsilon must be inf"):
        load_config("mnist-epsinf", "smoke", method="dcgan", epsilon=1.0)
    with pytest.raises(ValueError, match="unknown DC-GAN config keys: \\['k'\\]"):
        load_config("mnist-epsinf", "smoke", method="dcgan", k=3)
    assert cli.main(["train", "--method", "nope", "--config", "mnist-eps1", "--out",
                     str(tmp_path / "x")]) == 2
    assert "available: datalens, dcgan, gpate, dpgan" in capsys.readouterr().err
    with pytest.raises(ValueError, match="below what one generator step costs"):
        _method("datalens", mnist_dir, epsilon=1e-3)
    with pytest.raises(ValueError, match="batch_size 64 exceeds the 10 training images"):
        _method("dcgan", mnist_dir, train_limit=10)


def test_a_record_must_say_which_ledgers_are_a_guarantee():
    """harness.check_dp_ledgers: a private record without ``dp_ledgers``, or naming a ledger
    its ``epsilon`` lacks or the data-dependent one, is refused (the harness gives the
    guarantee's scope from it)."""
    from datalens_lib.methods.harness import check_dp_ledgers

    eps = {"paper": 1.0, "rdp": 1.1, "data_dependent": 0.3}
    assert check_dp_ledgers({"dp_ledgers": ["rdp"]}, eps, "m") == ["rdp"]
    assert check_dp_ledgers({"dp_ledgers": []}, {}, "m") == []
    assert check_dp_ledgers(None, None, "m") == []
    with pytest.raises(ValueError, match="must state privacy\\['dp_ledgers'\\]"):
        check_dp_ledgers({"dp_guarantee": "epsilon under rdp"}, eps, "m")
    with pytest.raises(ValueError, match="names \\['pld'\\]"):
        check_dp_ledgers({"dp_ledgers": ["rdp", "pld"]}, eps, "m")
    with pytest.raises(ValueError, match="data_dependent"):
        check_dp_ledgers({"dp_ledgers": ["rdp", "data_dependent"]}, eps, "m")


def test_dcgan_is_recorded_as_non_private(tmp_path, mnist_dir):
    rec = Run(_method("dcgan", mnist_dir, epochs=1), tmp_path, checkpoint_every=0,
              progress=False).run()
    assert rec["target_epsilon"] is None and rec["epsilon"] == {}
    assert rec["config"]["epsilon"] is None and rec["privacy"]["dp_guarantee"] == "none"
    assert rec["history"][0]["batches"] == 320 // 64
    assert torch.isfinite(torch.tensor(rec["history"][0]["d_loss"]))


def test_dcgan_has_carpedm20s_discriminator_and_old_records_read_as_datalenss(mnist_dir):
    """carpedm20's DCGAN class defaults (the paper's DC-GAN): df_dim 64, dfc_dim 1024; a
    config written before the widths were settings ran DataLens's discriminator (32, 256)."""
    from datalens_lib.methods.dcgan import DCGANConfig
    from datalens_lib.models import DF_DIM, DFC_DIM

    m = _method("dcgan", mnist_dir)
    assert (m.cfg.df_dim, m.cfg.dfc_dim) == (64, 1024)
    p = dict(m.D.params)
    assert p["w1"].shape[0] == 64 + 10 and p["w2"].shape[0] == 1024
    assert p["w3"].shape == (1, 1024 + 10)
    for profile in ("cpu", "paper"):
        cfg = load_config("fashion-mnist-epsinf", profile, method="dcgan")
        assert (cfg.df_dim, cfg.dfc_dim) == (64, 1024)
    old = {k: v for k, v in m.cfg.to_dict().items() if k not in ("df_dim", "dfc_dim")}
    assert (DCGANConfig.from_dict(old).df_dim, DCGANConfig.from_dict(old).dfc_dim) == (
        DF_DIM, DFC_DIM) == (32, 256)
    assert DCGANConfig.from_dict(m.cfg.to_dict()) == m.cfg
    with pytest.raises(ValueError, match="df_dim"):
        DCGANConfig(dataset="mnist", df_dim=0)


def test_dcgan_joint_d_batch_is_one_forward_pass_and_validated(mnist_dir):
    """``joint_d_batch``: D's step sees real and fake in one batch (BatchNorm statistics over
    both), so its trajectory differs from carpedm20's separate batches; a non-bool is refused."""
    from datalens_lib.methods.dcgan import DCGANConfig

    sep, joint = _method("dcgan", mnist_dir), _method("dcgan", mnist_dir, joint_d_batch=True)
    calls = []
    hook = joint.D.register_forward_hook(lambda mod, inp, out: calls.append(len(inp[0])))
    a, b = sep.step(), joint.step()
    hook.remove()
    assert a["d_loss"] != b["d_loss"]
    # per batch: one D pass over 2B images, then each of the g_steps generator steps also
    # sees real and fake in one batch (2B)
    bsz = joint.cfg.batch_size
    assert joint.cfg.g_steps == 2 and calls[:3] == [2 * bsz] * 3
    assert not torch.equal(next(sep.D.parameters()), next(joint.D.parameters()))
    with pytest.raises(ValueError, match="joint_d_batch"):
        DCGANConfig(dataset="mnist", joint_d_batch="yes")


def _same_state(a, b) -> bool:
    """Two state dicts (nested dicts, lists, tensors, numbers) are equal, tensors bit for bit."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("joint", [False, True])
def test_dcgan_discriminator_probe_measures_without_touching_the_run(mnist_dir, joint,
                                                                     capsys):
    """methods.dcgan.discriminator_probe: a row before the first epoch and after each; the
    probed run's trajectory is the unprobed run's, bit for bit; the within-class distances
    are those of the probe's own images; D trained alone reports its loss."""
    from datalens_lib.methods.dcgan import discriminator_probe

    probed = _method("dcgan", mnist_dir, joint_d_batch=joint)
    plain = _method("dcgan", mnist_dir, joint_d_batch=joint)
    seen = []

    def score(fake: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
        seen.append((fake.clone(), labels.clone()))
        return {"mean_pixel": float(fake.mean())}

    rng = torch.get_rng_state()
    out = discriminator_probe(probed, epochs=2, n=40, alone_batches=20, score=score,
                              progress=True)
    err = capsys.readouterr().err  # its progress bars
    assert "probe dcgan" in err and "probe dcgan, D alone" in err
    assert torch.equal(torch.get_rng_state(), rng)  # the probe's randomness is its own
    rows = out["rows"]
    for _ in range(2):
        plain.step()
    # everything the run carries (BatchNorm buffers, optimizer moments) is the plain run's
    for a, b in ((probed.G, plain.G), (probed.D, plain.D), (probed.g_opt, plain.g_opt),
                 (probed.d_opt, plain.d_opt)):
        assert _same_state(a.state_dict(), b.state_dict())
    assert [r["epoch"] for r in rows] == [0, 1, 2] and "d_loss" in rows[1]
    assert [r["d_loss"] for r in rows[1:]] == [h["d_loss"] for h in plain.history]
    for a, b in zip(probed.G.parameters(), plain.G.parameters(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(probed.D.parameters(), plain.D.parameters(), strict=True):
        assert torch.equal(a, b)
    assert len(seen) == 3 and [r["mean_pixel"] for r in rows] == [float(f.mean())
                                                                  for f, _ in seen]
    # the within-class distance is the mean pairwise L2 distance within each label
    fake, labels = seen[-1]
    want = []
    for c in range(10):
        xc = fake[labels == c].flatten(1).double()
        if len(xc) > 1:
            want.append(float(torch.pdist(xc).mean()))
    assert rows[-1]["within_class_fake"] == pytest.approx(sum(want) / len(want))
    assert rows[0]["within_class_real"] == rows[-1]["within_class_real"] > 0
    assert rows[-1]["logit_real_sd"] > 0 and rows[-1]["logit_fake_sd"] > 0
    for d in ("final_d", "fresh_d"):  # two distinct windows of D's loss while it trains
        w = out["alone"][d]
        assert math.isfinite(w["first10"]) and w["first10"] != w["last10"]
    assert out["alone"]["final_d"] != out["alone"]["fresh_d"] and out["alone"]["batches"] == 20
    with pytest.raises(ValueError, match="epochs"):
        discriminator_probe(plain, epochs=0)
    with pytest.raises(ValueError, match="alone_batches"):
        discriminator_probe(plain, epochs=1, alone_batches=10)


def test_gpate_paper_settings_give_the_official_query_budgets():
    """The data-independent ledger allows 1971 queries (131 steps of 15) at MNIST eps = 1 and
    1519 (50 steps of 30) at eps = 10 under the official conversion (shared notes)."""
    from datalens_lib.privacy.gaussian import gaussian_max_queries, gpate_noise_multiplier

    for config, queries, batch in (("mnist-eps1", 1971, 15), ("mnist-eps10", 1519, 30)):
        cfg = load_config(config, "paper", method="gpate")
        z = gpate_noise_multiplier(cfg.sigma_thresh, cfg.sigma_vote, cfg.proj_dim)
        assert gaussian_max_queries(cfg.epsilon, z, cfg.delta, "paper") == queries
        assert 60000 // cfg.teachers == batch


def test_gpate_run_spends_its_ledger_and_answers(tmp_path, mnist_dir):
    m = _method("gpate", mnist_dir)
    rec = Run(m, tmp_path, checkpoint_every=0, progress=False).run()
    assert rec["steps"] == 3 and rec["queries"] == 90
    assert rec["epsilon"]["paper"] == pytest.approx(m.acc.epsilon("paper"))
    assert rec["epsilon"]["pld"] < rec["epsilon"]["paper"] <= m.cfg.epsilon
    assert all(0 <= h["answered_dims"] <= m.cfg.proj_dim for h in rec["history"])
    assert "data-independent" in rec["privacy"]["dp_guarantee"]
    # G-PATE's teachers hold shuffled contiguous parts, not DataLens's class-balanced ones
    assert m.parts.shape == (10, 30) and len(set(m.parts.flatten().tolist())) == 300


def test_dpgan_noise_is_calibrated_and_its_ledger_agrees_with_opacus(tmp_path, mnist_dir):
    """sigma is the smallest that fits the planned steps in the budget (the values the shared
    notes computed for the published batch sizes), and the record's RDP epsilon equals
    Opacus's own accountant."""
    from opacus.accountants import RDPAccountant

    from datalens_lib.methods.dpgan import calibrate_sigma
    from datalens_lib.privacy.subsampled import dpsgd_epsilon, dpsgd_ledgers

    for b, epochs, eps, sigma in ((64, 20, 1.0, 0.97), (64, 20, 10.0, 0.47),
                                  (4096, 150, 1.0, 13.0)):
        steps = round(epochs * 60000 / b)
        got = calibrate_sigma(eps, b / 60000, steps, 1e-5)
        assert got == pytest.approx(sigma, abs=0.01)
        assert dpsgd_epsilon(steps, b / 60000, got, 1e-5, "rdp") <= eps
        assert dpsgd_epsilon(steps, b / 60000, got * 0.99, 1e-5, "rdp") > eps
    m = _method("dpgan", mnist_dir)
    rec = Run(m, tmp_path, checkpoint_every=0, progress=False).run()
    assert rec["steps"] == 10 and rec["sample_rate"] == pytest.approx(32 / 320)
    acc = RDPAccountant()  # Opacus's own accountant of the steps taken
    acc.history = [(rec["noise_multiplier"], 32 / 320, 10)]
    assert rec["epsilon"]["rdp"] <= 1.0 and rec["epsilon"]["rdp"] == pytest.approx(
        acc.get_epsilon(1e-5), rel=1e-9)
    assert rec["epsilon"] == dpsgd_ledgers(10, 32 / 320, rec["noise_multiplier"], 1e-5)
    assert rec["epsilon"]["pld"] < rec["epsilon"]["rdp"]
    assert rec["privacy"]["neighbouring"] == "add or remove one record"
    with pytest.raises(ValueError, match="below what one discriminator step costs"):
        _method("dpgan", mnist_dir, noise_multiplier=0.3, epsilon=0.01)


def test_budget_snapshots_are_the_runs_with_those_budgets(tmp_path, mnist_dir, capsys,
                                                         monkeypatch):
    """A DataLens run with snapshot budgets keeps, for each budget b, the generator after the
    last step within b, and samples it: the same generator and samples as a run trained with
    epsilon = b (same settings, RNG streams and stopping rule). The evaluation CLI reads a
    snapshot's samples."""
    over = {"max_steps": None, "n_samples": 60}
    full = _method("datalens", mnist_dir, **over)
    eps1 = full.acc.epsilon_if(full.batch)  # after one step
    eps2 = full.acc.epsilon_if(2 * full.batch)
    budget = (eps1 + eps2) / 2  # allows exactly one step
    rec = Run(full, tmp_path / "a", checkpoint_every=0, progress=False,
              snapshot_budgets=(budget,)).run()
    snap = rec["snapshots"][0]
    assert snap["step"] == 1 and snap["exact"] and rec["steps"] == 3
    assert snap["epsilon"]["paper"] == pytest.approx(eps1)
    short = _method("datalens", mnist_dir, epsilon=budget, **over)
    rec_b = Run(short, tmp_path / "b", checkpoint_every=0, progress=False).run()
    assert rec_b["steps"] == 1
    a = np.load(tmp_path / "a" / snap["samples"])
    b = np.load(tmp_path / "b" / "samples.npz")
    assert np.array_equal(a["y"], b["y"])
    np.testing.assert_allclose(a["x"].astype(np.float32), b["x"].astype(np.float32), atol=2e-3)
    # the final generator was restored after sampling the snapshot
    final = np.load(tmp_path / "a" / "samples.npz")
    assert not np.allclose(final["x"].astype(np.float32), a["x"].astype(np.float32), atol=1e-2)
    monkeypatch.setenv("DATALENS_DATA_DIR", str(mnist_dir.parent))
    assert cli.main(["evaluate", str(tmp_path / "a"), "--epochs", "1", "--device", "cpu",
                     "--snapshot", str(budget)]) == 0
    ev = json.loads((tmp_path / "a" / f"snapshot-eps{budget:g}-eval-1ep.json").read_text())
    assert ev["snapshot"]["step"] == 1
    assert cli.main(["evaluate", str(tmp_path / "a"), "--snapshot", "0.5"]) == 2
    assert "no snapshot at budget 0.5" in capsys.readouterr().err
    # asked for only when resuming a run already past the budget: recorded as missing
    late = Run(_method("datalens", mnist_dir, **over), tmp_path / "e", checkpoint_every=1,
               progress=False)
    late.run(stop_after=2)
    rec_e = Run(_method("datalens", mnist_dir, **over), tmp_path / "e", checkpoint_every=1,
                progress=False, snapshot_budgets=(budget,)).run(resume=True)
    assert "missing" in rec_e["snapshots"][0] and "samples" not in rec_e["snapshots"][0]
    with pytest.raises(ValueError, match="snapshot budgets must lie in"):
        Run(_method("datalens", mnist_dir), tmp_path / "c", snapshot_budgets=(2.0,))
    with pytest.raises(ValueError, match="cannot snapshot"):
        Run(_method("dcgan", mnist_dir), tmp_path / "d", snapshot_budgets=(0.5,))


def test_a_run_stopped_at_its_last_snapshot_recovers_a_finished_runs_snapshots(
        tmp_path, mnist_dir, capsys, monkeypatch):
    """The snapshots of a finished run whose folder was lost, trained again only as far as
    they need (until_last_snapshot): the same snapshot step and samples, snapshots.json
    instead of run.json, and a prefix check against the finished run's record that passes for
    the same run and names the first difference for another; the evaluation CLI reads the
    snapshot from snapshots.json and records where it came from."""
    over = {"max_steps": None, "n_samples": 60}
    m = _method("datalens", mnist_dir, **over)
    budget = (m.acc.epsilon_if(m.batch) + m.acc.epsilon_if(2 * m.batch)) / 2  # one step
    full = Run(m, tmp_path / "full", checkpoint_every=0, progress=False,
               snapshot_budgets=(budget,)).run()
    assert full["steps"] == 3
    again = Run(_method("datalens", mnist_dir, **over), tmp_path / "again",
                checkpoint_every=0, progress=False, snapshot_budgets=(budget,),
                until_last_snapshot=True, prefix_of=full).run()
    assert again["status"] == "snapshots" and again["steps"] == 1
    assert not (tmp_path / "again" / "run.json").exists()
    assert not (tmp_path / "again" / "samples.npz").exists()
    on_disk = json.loads((tmp_path / "again" / "snapshots.json").read_text())
    assert on_disk["snapshots"][0]["step"] == full["snapshots"][0]["step"] == 1
    check = on_disk["prefix_of"]
    assert check["identical"] and check["rows_compared"] == 1, check
    a = np.load(tmp_path / "full" / full["snapshots"][0]["samples"])
    b = np.load(tmp_path / "again" / on_disk["snapshots"][0]["samples"])
    assert np.array_equal(a["x"], b["x"]) and np.array_equal(a["y"], b["y"])
    # another run's history: the first difference is named, not "identical"
    other = json.loads(json.dumps(full))
    other["history"][0]["d_loss"] += 1e-9
    bad = prefix_check(again["history"], other)
    assert not bad["identical"] and bad["first_difference"]["field"] == "d_loss"
    assert bad["max_abs_difference"]["d_loss"] == pytest.approx(1e-9, rel=1e-3)
    assert on_disk["snapshots"][0]["history_rows"] == 1 and on_disk["last_snapshot_rows"] == 1
    assert check["reference"] is None and check["snapshot_differences"] == []
    # fewer rows trained than the last snapshot's row count: not a whole check, and said so
    short = prefix_check(again["history"], full, rows=2)
    assert not short["identical"] and prefix_summary(short) == "only 1 of 2 steps compared"
    assert not prefix_check([], full)["identical"]  # nothing compared is no evidence
    # a snapshot taken at another step than the reference's: not identical either
    moved = json.loads(json.dumps(full))
    moved["snapshots"][0]["step"] = 2
    diff = prefix_check(again["history"], moved, snapshots=again["snapshots"])
    assert not diff["identical"] and not diff["snapshots_same_privacy"]
    assert prefix_summary(diff) == f"snapshot at eps {budget:g}: step differ"
    # only the data-dependent ledger differs (it follows the votes): the same privacy side
    dd = json.loads(json.dumps(full))
    dd["snapshots"][0]["epsilon"]["data_dependent"] = 0.5
    diff = prefix_check(again["history"], dd, snapshots=again["snapshots"])
    assert diff["snapshot_differences"][0]["fields"] == ["epsilon.data_dependent"]
    assert not diff["identical"] and diff["snapshots_same_privacy"]
    dd["snapshots"][0]["epsilon"]["pld"] *= 1 + 1e-15  # PLD's last bits: the same
    assert prefix_check(again["history"], dd,
                        snapshots=again["snapshots"])["snapshots_same_privacy"]
    dd["snapshots"][0]["epsilon"]["rdp"] *= 1 + 1e-6
    assert not prefix_check(again["history"], dd,
                            snapshots=again["snapshots"])["snapshots_same_privacy"]
    assert prefix_check(again["history"], full, snapshots=again["snapshots"])["identical"]
    # values as JSON stores them: equal infinities are equal, an in-memory NaN is null
    inf_rows = [{**again["history"][0], "extra": float("inf"), "nan": float("nan")}]
    ref_inf = {**full, "history": [{**full["history"][0], "extra": float("inf"), "nan": None}]}
    assert prefix_check(inf_rows, ref_inf)["identical"]
    assert not prefix_check(inf_rows, {**ref_inf, "history": [
        {**ref_inf["history"][0], "extra": 1.0}]})["identical"]
    # a reference of another seed or config, or without until_last_snapshot: refused
    for key, value, word in (("seed", 4, "seed"), ("config", {**full["config"], "k": 7},
                                                   "config differs in")):
        with pytest.raises(ValueError, match=word):
            Run(_method("datalens", mnist_dir, **over), tmp_path / "x", progress=False,
                snapshot_budgets=(budget,), until_last_snapshot=True,
                prefix_of={**full, key: value})
    with pytest.raises(ValueError, match="pass until_last_snapshot"):
        Run(_method("datalens", mnist_dir, **over), tmp_path / "x", progress=False,
            snapshot_budgets=(budget,), prefix_of=full)
    with pytest.raises(ValueError, match="needs snapshot budgets"):
        Run(_method("datalens", mnist_dir, **over), tmp_path / "x", progress=False,
            until_last_snapshot=True)
    with pytest.raises(FileExistsError, match="snapshots.json"):
        Run(_method("datalens", mnist_dir, **over), tmp_path / "again", progress=False,
            snapshot_budgets=(budget,), until_last_snapshot=True).run()
    # resumed from a checkpoint already past a budget whose snapshot is not on disk: refused,
    # no snapshots.json that the queue would take as done
    late = Run(_method("datalens", mnist_dir, **over), tmp_path / "late", checkpoint_every=1,
               progress=False)
    late.run(stop_after=2)
    with pytest.raises(ValueError, match="past the budgets"):
        Run(_method("datalens", mnist_dir, **over), tmp_path / "late", checkpoint_every=1,
            progress=False, snapshot_budgets=(budget,), until_last_snapshot=True,
            prefix_of=full).run(resume=True)
    assert not (tmp_path / "late" / "snapshots.json").exists()
    monkeypatch.setenv("DATALENS_DATA_DIR", str(mnist_dir.parent))
    assert cli.main(["evaluate", str(tmp_path / "again"), "--epochs", "1"]) == 2
    assert "pass --snapshot" in capsys.readouterr().err
    assert cli.main(["evaluate", str(tmp_path / "again"), "--epochs", "1", "--device", "cpu",
                     "--snapshot", str(budget)]) == 0
    ev = json.loads((tmp_path / "again" / f"snapshot-eps{budget:g}-eval-1ep.json").read_text())
    assert ev["snapshot"]["record"] == "snapshots.json"
    assert ev["snapshot"]["prefix_of"]["identical"] and ev["snapshot"]["step"] == 1
    # the CLI refuses --prefix-of alone before building anything
    assert cli.main(["train", "--config", "mnist-eps1", "--profile", "smoke", "--out",
                     str(tmp_path / "y"), "--prefix-of", str(tmp_path / "full")]) == 2
    assert "--prefix-of needs --until-last-snapshot" in capsys.readouterr().err


def test_gpate_step_wires_its_settings_into_the_aggregator_and_ledgers(mnist_dir, monkeypatch):
    """With distinct sigma_thresh and sigma_vote and the teachers in several chunks (a review
    found that swapping the two sigmas in the aggregator call, the accountant or the
    data-dependent ledger, a histogram that kept only the last chunk, or the per-teacher batch
    as N all passed with the smoke profile's equal sigmas and single chunk): every step hands
    confident_gnmax the counts of all teachers and the config's settings, the accountant
    composes z = (p / s1^2 + 2p / s2^2)^-1/2 per query, and the data-dependent ledger is the
    official one fed those counts and answers."""
    import datalens_lib.methods.gpate as gp
    from datalens_lib.privacy.gaussian import GPATEDataDependentLedger, gaussian_epsilon

    calls = []
    real = gp.confident_gnmax

    def spy(counts, *args, **kw):
        out = real(counts, *args, **kw)
        calls.append((counts.clone(), args, out[1].clone()))
        return out

    monkeypatch.setattr(gp, "confident_gnmax", spy)
    m = _method("gpate", mnist_dir, sigma_thresh=300.0, sigma_vote=200.0, chunk=3)
    c = m.cfg
    assert c.teachers == 10 and len(list(m.ens.slices())) == 4 and m.per_teacher != c.teachers
    for _ in range(2):
        m.step()
    assert len(calls) == 2
    for counts, args, _ in calls:
        assert args[:5] == (c.teachers, 300.0, 200.0, c.threshold_frac, c.clip)
        assert counts.shape == (m.batch, c.proj_dim, c.bins)
        assert torch.all(counts.sum(-1) == c.teachers)
    z = 1 / math.sqrt(c.proj_dim / 300.0 ** 2 + 2 * c.proj_dim / 200.0 ** 2)
    assert m.acc.z == pytest.approx(z, rel=1e-12) and m.acc.queries == 2 * m.batch
    spent = m.epsilon_spent()
    for conv in ("paper", "rdp", "pld"):
        assert spent[conv] == pytest.approx(
            gaussian_epsilon(2 * m.batch, z, c.delta, conv), rel=1e-9)
    assert (m.dd.s1, m.dd.s2, m.dd.t) == (300.0, 200.0, c.threshold_frac * c.teachers)
    dd = GPATEDataDependentLedger(300.0, 200.0, c.threshold_frac * c.teachers, c.delta)
    for counts, _, answered in calls:
        dd.add(counts.numpy(), answered.numpy())
    assert spent["data_dependent"] == pytest.approx(dd.epsilon(), rel=1e-12)


def test_gpate_sound_stop_spends_the_budget_not_the_step_cap(tmp_path, mnist_dir):
    """Without a step cap the sound ledger stops the run at the last step within the budget
    (the smoke tests above all stop at max_steps, so a stop that ignored epsilon passed)."""
    probe = _method("gpate", mnist_dir, max_steps=None)
    b, conv = probe.batch, probe.cfg.conversion
    e2, e3 = probe.acc.epsilon_if(2 * b, conv), probe.acc.epsilon_if(3 * b, conv)
    budget = (e2 + e3) / 2
    m = _method("gpate", mnist_dir, max_steps=10, epsilon=budget)  # a cap past the budget's
    assert m.total_steps() == 2
    rec = Run(m, tmp_path, checkpoint_every=0, progress=False).run()
    assert rec["steps"] == 2 and rec["epsilon"][conv] == pytest.approx(e2)
    assert rec["epsilon"][conv] <= budget < e3


def test_gpate_keeps_the_official_ledger_and_can_stop_on_it(tmp_path, mnist_dir):
    """Both ledgers in the record; stop_on='data_dependent' (opt-in) stops when that ledger
    passes the budget, checked after each step as the official loop does."""
    rec = Run(_method("gpate", mnist_dir), tmp_path / "a", checkpoint_every=0,
              progress=False).run()
    assert set(rec["epsilon"]) == {"paper", "rdp", "pld", "data_dependent"}
    assert all("epsilon_data_dependent" in h for h in rec["history"])
    m = _method("gpate", mnist_dir, stop_on="data_dependent", max_steps=20, epsilon=0.6)
    assert not m.exact_snapshots and m.total_steps() == 20
    rec = Run(m, tmp_path / "b", checkpoint_every=0, progress=False).run()
    dd = [h["epsilon_data_dependent"] for h in rec["history"]]
    assert dd[-1] > 0.6 >= dd[-2]  # the step that crossed the budget ran, none after
    assert rec["history"][-1]["generator_updated"] is False  # ... without its G update
    assert all("generator_updated" not in h for h in rec["history"][:-1])
    assert rec["stop_on"] == "data_dependent"
    # its steps are a function of the clean votes: no DP guarantee; the record names what
    # always running the cap (20 steps, a data-independent stop) would cost
    from datalens_lib.methods.gpate import epsilon_at_cap

    cap = epsilon_at_cap(m.cfg, rec["batch"])
    assert cap["pld"] >= rec["epsilon"]["pld"]
    g = rec["privacy"]["dp_guarantee"]
    assert g.startswith("no DP guarantee") and "cap of 20 steps would be DP" in g
    assert "scope" not in rec["privacy"]  # no guarantee, so nothing it would cover
    assert rec["privacy"]["dp_ledgers"] == [] and rec["privacy"]["records"] == m.cfg.train_limit
    assert f"pld {cap['pld']:.4g}" in g and "not a guarantee" in g
    sound_privacy = Run(_method("gpate", mnist_dir), tmp_path / "c", checkpoint_every=0,
                        progress=False).run()["privacy"]
    sound = sound_privacy["dp_guarantee"]
    assert sound.startswith("epsilon under paper, rdp and pld") and "cap" not in sound
    assert "scope" in sound_privacy
    with pytest.raises(ValueError, match="stop_on must be one of"):
        load_config("mnist-eps1", "smoke", method="gpate", stop_on="never")


def test_dpgan_clips_each_real_example_and_adds_noise(mnist_dir, monkeypatch):
    """After a step's pre_step the discriminator's gradient is the noisy clipped mean: with
    almost no noise its norm is at most C * |batch| / B however large the raw per-example
    gradients. The second half checks the noise alone (a plain backward, then pre_step): it
    differs between noise seeds and has std sigma C / B."""
    m = _method("dpgan", mnist_dir)
    m.d_opt.noise_multiplier = 1e-9  # (the ledger is not used here) almost no noise
    m.x.mul_(1e4)  # huge inputs: raw per-example gradients far above C
    norms, sizes = [], []
    real_pre = m.d_opt.pre_step

    def spy():
        ok = real_pre()
        norms.append(torch.sqrt(sum((p.grad**2).sum() for p in m.D.parameters())).item())
        return ok

    monkeypatch.setattr(m.d_opt, "pre_step", spy)
    for _ in range(3):
        sizes.append(m.step()["real_batch"])
    c, b = m.cfg.max_grad_norm, m.cfg.batch_size
    assert all(0 < n <= c * k / b * 1.001 for n, k in zip(norms, sizes, strict=True))
    noisy = _method("dpgan", mnist_dir)
    noisy.d_opt.noise_multiplier = 5.0
    grads = []
    for seed in (0, 1):
        noisy.noise_gen.manual_seed(seed)
        noisy.gen.manual_seed(0)
        noisy.d_opt.zero_grad(set_to_none=True)
        idx = torch.arange(8)
        noisy.D(noisy.x[idx], noisy._onehot(noisy.y[idx])).mean().backward()
        noisy.d_opt.pre_step()
        grads.append(next(noisy.D.parameters()).grad.clone())
    assert not torch.equal(grads[0], grads[1])
    assert grads[0].std() > 0.5 * 5.0 * c / 32  # noise of std sigma C / B per coordinate


def test_snapshot_below_one_step_is_missing_not_the_untrained_generator(tmp_path, mnist_dir):
    m = _method("datalens", mnist_dir, max_steps=None, n_samples=60)
    tiny = m.acc.epsilon_if(m.batch) / 2
    rec = Run(m, tmp_path, checkpoint_every=0, progress=False,
              snapshot_budgets=(tiny,)).run()
    assert "missing" in rec["snapshots"][0]


def test_snapshots_survive_a_config_field_added_later_but_not_another_setting(tmp_path,
                                                                              mnist_dir):
    """A run resumed under code that added a config field (its default unchanged) keeps its
    snapshots; a snapshot of another setting is refused."""
    over = {"max_steps": None, "n_samples": 20}
    m = _method("datalens", mnist_dir, **over)
    budget = (m.acc.epsilon_if(m.batch) + m.acc.epsilon_if(2 * m.batch)) / 2
    run = Run(m, tmp_path, checkpoint_every=1, progress=False, snapshot_budgets=(budget,))
    run.run(stop_after=2)
    path = run._snapshot_path(budget)
    st = torch.load(path, weights_only=True)
    del st["config"]["partition"]  # as written before the field existed
    torch.save(st, path)
    rec = Run(_method("datalens", mnist_dir, **over), tmp_path, checkpoint_every=1,
              progress=False, snapshot_budgets=(budget,)).run(resume=True)
    assert rec["snapshots"][0]["step"] == 1
    st["config"]["k"] += 1
    torch.save(st, path)
    (tmp_path / f"samples-eps{budget:g}.npz").unlink()
    (tmp_path / "run.json").unlink()
    with pytest.raises(ValueError, match="belongs to another config"):
        Run(_method("datalens", mnist_dir, **over), tmp_path, checkpoint_every=1,
            progress=False, snapshot_budgets=(budget,)).run(resume=True)


# ------------------------------------------- DP-GAN's privacy wiring, against a hand replay
# (an independent review found that noise 0, a skipped pre_step, a wrong sample rate, a step
# over the budget and a zero empty-batch release all passed the tests above)


def _dpgan(data_dir, config="mnist-eps1", **over):
    cfg = load_config(config, "smoke", method="dpgan", **{"n_samples": 64, **over})
    return method_class("dpgan")(cfg, seed=3, device="cpu", data_dir=data_dir, profile="smoke")


def _dpgan_replay(m, clip_binds=True):
    """The gradient the next step must hand Adam, computed example by example from copies of
    the method's state: (sum of per-example gradients clipped to C + N(0, sigma^2 C^2)) / B
    over a Poisson(q) batch; then, with ``clip_fake`` off, plus the fake half's exact gradient
    (B fakes), and with it on, each real example's gradient summed with one fake's before the
    clip (as many fakes as real examples, each normalised with the BatchNorm statistics of a
    reference batch of B fakes drawn first). Returns (gradient, private part, batch size).
    ``clip_binds``: check the premise that the clip binds for some example (a wrong
    per-example norm then changes the step); off, that nothing is clipped."""
    import copy

    import torch.nn.functional as F

    from datalens_lib.methods.dpgan import DPDiscriminator

    cfg, b = m.cfg, m.cfg.batch_size
    g = torch.Generator()
    g.set_state(m.gen.get_state())
    ng = torch.Generator()
    ng.set_state(m.noise_gen.get_state())
    D = DPDiscriminator(m.y_dim, m.shape, cfg.groups)
    D.load_state_dict(m.D._module.state_dict())
    G = copy.deepcopy(m.G)
    params = list(D.parameters())
    idx = (torch.rand(m.n, generator=g) < m.q).nonzero().squeeze(1)

    def fakes(k, ref=0):
        y = torch.randint(0, m.y_dim, (ref + k,), generator=g)
        z = torch.rand(ref + k, cfg.z_dim, generator=g) * 2 - 1
        yo = F.one_hot(y, m.y_dim).float()
        return G(z, yo, reference=ref)[ref:].detach(), yo[ref:]

    pair = fakes(len(idx), ref=b) if cfg.clip_fake and len(idx) else None
    summed = [torch.zeros_like(p) for p in params]
    factors, norms = [], []
    for j, i in enumerate(idx.tolist()):
        loss = m._d_loss(D(m.x[i:i + 1], F.one_hot(m.y[i:i + 1], m.y_dim).float()), True)
        if pair is not None:
            loss = loss + m._d_loss(D(pair[0][j:j + 1], pair[1][j:j + 1]), False)
        gs = torch.autograd.grad(loss.sum(), params)
        norm = float(torch.sqrt(sum((t ** 2).sum() for t in gs)))
        f = min(1.0, cfg.max_grad_norm / (norm + 1e-6))
        factors.append(f)
        norms.append(norm)
        for s, t in zip(summed, gs, strict=True):
            s += f * t
    # the premise of the replay: the clip binds (a wrong per-example norm changes the step),
    # or, asked for, binds nowhere (a wrong scale of the per-example gradients then shows)
    assert not factors or (min(factors) < 0.5 if clip_binds else min(factors) == 1.0)
    priv = [(s + torch.normal(0.0, m.sigma * cfg.max_grad_norm, p.shape, generator=ng)) / b
            for s, p in zip(summed, params, strict=True)]
    m.replayed_norms = torch.tensor(norms)  # each example's exact gradient norm
    if cfg.clip_fake:
        return priv, priv, len(idx)
    fake, yo = fakes(b)
    fg = torch.autograd.grad(m._d_loss(D(fake, yo), False).mean(), params)
    return [p + f for p, f in zip(priv, fg, strict=True)], priv, len(idx)


def _adam_grads(m):
    got = []
    orig = m.d_opt.original_optimizer.step

    def step(*a, **k):
        got.append([p.grad.detach().clone() for p in m.D.parameters()])
        return orig(*a, **k)

    m.d_opt.original_optimizer.step = step
    return got


@pytest.mark.parametrize("config,physical,c", [
    ("mnist-eps1", None, None), ("mnist-eps1-large", None, None), ("mnist-eps1-large", 5, None),
    ("mnist-eps1-large", 7, None), ("mnist-eps1", None, 0.05), ("mnist-eps1-large", None, 1e3)])
def test_dpgan_step_is_exactly_one_dp_sgd_step_and_the_fake_half(mnist_dir, config, physical,
                                                                 c):
    """Also with the pairs in physical batches (``physical_batch``): the same step; 7 divides
    the first step's Poisson batch (77), 5 neither. And at other clip norms C (``c``; the
    configs have C = 1 without clip_fake and 1e-3 with it, Opacus's default is 1, and a review
    found that a clip left at that default, or per-example gradients summed where they should
    be averaged, passed): 0.05 on the ghost path, 1e3 with clip_fake, where nothing is
    clipped."""
    over = {} if c is None else {"max_grad_norm": c}
    m = _dpgan(mnist_dir, config, physical_batch=physical, **over)
    assert m.cfg.clip_fake is config.endswith("-large")
    assert (m.d_opt.noise_multiplier, m.d_opt.max_grad_norm, m.d_opt.expected_batch_size,
            m.d_opt.loss_reduction) == (m.sigma, m.cfg.max_grad_norm, m.cfg.batch_size, "mean")
    got = _adam_grads(m)
    seen = []
    if m.ghost:  # the per-example norms ghost clipping computed, step by step
        orig = m.D.get_clipping_coef

        def coef():
            c = orig()
            seen.append(m.D.per_sample_gradient_norms.detach().clone())
            return c

        m.D.get_clipping_coef = coef
    assert m.ghost is not m.cfg.clip_fake
    for step in range(2):
        want, _, k = _dpgan_replay(m, clip_binds=c is None or c < 1)
        m.step()
        assert k > 0 and m.history[-1]["real_batch"] == k
        assert physical is None or k > 2 * physical  # (the premise: several physical batches)
        # tight: a layer's norm left out of the clip (even a GroupNorm's) moves the step by
        # more than 4e-6 here; the ghost path agrees with the replay to ~1e-7, the
        # per-example one (clip_fake) to ~1e-10 (up to 3e-8 in one of 22,050 coordinates at
        # C = 1e3 on an AMD EPYC host, 2026-12-02: float32 summation order), where fakes
        # normalised with their own batch's statistics instead of the reference batch's move
        # it by ~8e-7
        tol = dict(atol=1e-7, rtol=1e-6) if m.cfg.clip_fake else dict(atol=1e-6, rtol=1e-5)
        for a, e in zip(got[-1], want, strict=True):
            torch.testing.assert_close(a, e, **tol)
        if m.ghost:
            torch.testing.assert_close(seen[step], m.replayed_norms, atol=0, rtol=1e-5)
        assert all(getattr(p, "grad_sample", None) is None for p in m.D.parameters())
        assert all(getattr(p, "summed_grad", None) is None for p in m.D.parameters())
        assert not m.d_opt._step_skip_queue and not m.d_opt._is_last_step_skipped


@pytest.mark.parametrize("where", ["forward", "clip"])
def test_dpgan_a_step_that_raised_half_way_leaves_nothing_to_the_next(mnist_dir, monkeypatch,
                                                                      where):
    """A physical batch that raises after a virtual step (e.g. out of memory) leaves a clipped
    sum behind (``forward``: in the third batch's forward), or a skip signal not yet consumed
    (``clip``: inside the second virtual step's clipping); the next step must still be exactly
    one DP-SGD step (the replay)."""
    m = _dpgan(mnist_dir, "mnist-eps1-large", physical_batch=5)
    got = _adam_grads(m)
    obj, name = (m.D, "forward") if where == "forward" else (m.d_opt, "clip_and_accumulate")
    real, calls = getattr(obj, name), []

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == (5 if where == "forward" else 2):
            raise MemoryError("simulated")
        return real(*a, **k)

    monkeypatch.setattr(obj, name, failing)
    with pytest.raises(MemoryError):
        m.step()
    assert any(getattr(p, "summed_grad", None) is not None for p in m.D.parameters())
    assert (where == "clip") == bool(m.d_opt._step_skip_queue)
    monkeypatch.setattr(obj, name, real)
    want, _, _ = _dpgan_replay(m)
    m.step()
    for a, e in zip(got[-1], want, strict=True):
        torch.testing.assert_close(a, e, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("config", ["mnist-eps1", "mnist-eps1-large"])
def test_dpgan_empty_poisson_batch_still_releases_the_noise(mnist_dir, config):
    m = _dpgan(mnist_dir, config)
    m.q = 1e-12  # (the ledger is not used) every Poisson batch is empty
    got = _adam_grads(m)
    want, priv, k = _dpgan_replay(m)
    m.step()
    assert k == 0 and m.history[-1]["real_batch"] == 0
    for a, e in zip(got[-1], want, strict=True):
        torch.testing.assert_close(a, e, atol=1e-6, rtol=1e-5)
    flat = torch.cat([p.flatten() for p in priv])
    sd = m.sigma * m.cfg.max_grad_norm / m.cfg.batch_size
    assert 0.95 * sd < float(flat.std()) < 1.05 * sd


def test_dpgan_given_sigma_stops_at_the_last_step_within_budget(mnist_dir):
    m = _dpgan(mnist_dir, noise_multiplier=1.7)  # q = 0.1: 4 steps fit eps = 1, not 10
    t = m.total_steps()
    assert t < round(m.cfg.epochs * m.n / m.cfg.batch_size)
    assert m.epsilon(steps=t) <= m.cfg.epsilon < m.epsilon(steps=t + 1)
    # what the harness's budget snapshots read: the ledger one step ahead
    from datalens_lib.privacy.subsampled import dpsgd_epsilon

    m.step()
    assert m.epsilon_after_next_step() == pytest.approx(
        dpsgd_epsilon(2, m.q, m.sigma, m.cfg.delta, "rdp"), rel=1e-12)


def test_dpgan_poisson_batches_have_rate_q(mnist_dir):
    m = _dpgan(mnist_dir)
    sizes = [m.step()["real_batch"] for _ in range(m.total_steps())]
    mean, sd = m.n * m.q, np.sqrt(m.n * m.q * (1 - m.q) / len(sizes))
    assert abs(np.mean(sizes) - mean) < 4 * sd and len(set(sizes)) > 1


def test_dpgan_resume_refuses_a_checkpoint_taken_with_other_noise(mnist_dir):
    m = _dpgan(mnist_dir)
    m.step()
    st = m.state_dict()
    other = _dpgan(mnist_dir)
    other.load_state_dict(st)  # the same mechanism: fine
    assert other.steps_done == 1
    other.sigma *= 1.01  # e.g. another calibration after an accountant update
    with pytest.raises(ValueError, match="mechanism"):
        other.load_state_dict(st)
    with pytest.raises(ValueError, match="clip_fake"):
        load_config("mnist-eps1", "smoke", method="dpgan", clip_fake="yes")
    with pytest.raises(ValueError, match="clip_fake only"):  # ghost clipping has no batches
        load_config("mnist-eps1", "smoke", method="dpgan", physical_batch=16)
    with pytest.raises(ValueError, match="physical_batch"):
        load_config("mnist-eps1-large", "smoke", method="dpgan", physical_batch=0)
    with pytest.raises(ValueError, match="not below 1/n"):
        _dpgan(mnist_dir, delta=1e-2)  # 320 smoke images


def test_only_the_smoke_profiles_score_on_part_of_the_test_set():
    """eval_test_limit is a pipeline check's shortcut: every cpu and paper profile of every
    method's configs evaluates on the whole real test set, as the paper."""
    for method in METHODS:
        for config in available_configs(method):
            for profile in ("smoke", "cpu", "paper"):
                try:
                    cfg = load_config(config, profile, method=method)
                except ValueError as e:  # a profile this config does not define
                    assert "has no profile" in str(e), (method, config, profile)
                    continue
                want = 1000 if profile == "smoke" else None
                assert cfg.eval_test_limit == want, (method, config, profile)


@pytest.mark.parametrize("clip_fake", [False, True])
def test_dpgan_discriminator_probe_measures_without_touching_the_run(mnist_dir, clip_fake,
                                                                     capsys):
    """methods.dpgan.discriminator_probe: a row before the first step and after every
    ``every``-th; the clipped real pull never exceeds C; the probed run's trajectory is the
    unprobed run's, bit for bit (the probe's gradients and randomness stay its own)."""
    from datalens_lib.methods.dpgan import discriminator_probe

    probed, plain = _dpgan(mnist_dir, clip_fake=clip_fake), _dpgan(mnist_dir, clip_fake=clip_fake)
    seen = []

    def score(fake: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
        seen.append((fake.clone(), labels.clone()))
        return {"mean_pixel": float(fake.mean())}

    rows = discriminator_probe(probed, steps=4, every=2, n=8, score=score, progress=True)
    assert "probe dpgan" in capsys.readouterr().err  # its progress bar
    for _ in range(4):
        plain.step()
    assert [r["step"] for r in rows] == [0, 2, 4] and "d_loss" in rows[1]
    # score sees the probe's fakes (n images in [0, 1], integer labels) at every row
    assert len(seen) == 3 and [r["mean_pixel"] for r in rows] == [
        float(f.mean()) for f, _ in seen]
    for f, y in seen:
        assert f.shape[0] == 8 and 0 <= f.min() and f.max() <= 1 and not f.requires_grad
        assert y.dtype == torch.int64 and y.shape == (8,) and torch.equal(y, seen[0][1])
    for r in rows:
        assert 0 < r["real_pull_clipped"] <= probed.cfg.max_grad_norm * (1 + 1e-6)
        assert r["fake_pull"] > 0 and r["real_grad_median"] > 0
        assert r["noise_per_coordinate"] == pytest.approx(
            probed.sigma * probed.cfg.max_grad_norm / probed.cfg.batch_size)
    for a, b in zip(probed.D.parameters(), plain.D.parameters(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(probed.G.parameters(), plain.G.parameters(), strict=True):
        assert torch.equal(a, b)
    # the logits are D's on the probe set as it trains: they move
    assert rows[-1]["logit_real"] != rows[0]["logit_real"]
    with pytest.raises(ValueError, match="every"):
        discriminator_probe(plain, steps=2, every=0)
