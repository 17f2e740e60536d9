import json

import numpy as np
import pytest
import torch
from conftest import real_dataset_dir

from datalens_lib import cli
from datalens_lib.config import TrainConfig, available_configs, load_config
from datalens_lib.datalens import DataLensTrainer, resolve_device
from datalens_lib.evaluate import EvalCNN, train_classifier
from datalens_lib.privacy import topagg_epsilon


@pytest.fixture(scope="module")
def mnist_dir():
    return real_dataset_dir("mnist")


def _trainer(out, mnist_dir, **kw):
    cfg = load_config("mnist-eps1", "smoke", n_samples=100)
    return DataLensTrainer(cfg, out, data_dir=mnist_dir, checkpoint_every=1, progress=False,
                           device="cpu", profile="smoke", **kw)


@pytest.mark.slow
def test_smoke_run_stops_at_budget_and_resumes_identically(tmp_path, mnist_dir):
    full = _trainer(tmp_path / "a", mnist_dir).run()
    assert full["status"] == "complete" and full["steps"] == 3 and full["queries"] == 90
    cfg = load_config("mnist-eps1", "smoke")
    assert full["epsilon"]["paper"] <= cfg.epsilon
    assert topagg_epsilon(full["queries"] + 30, cfg.k, cfg.sigma, cfg.delta) > cfg.epsilon
    assert full["epsilon"]["pld"] < full["epsilon"]["rdp"] < full["epsilon"]["paper"]
    assert full["epsilon"]["data_dependent"] <= full["epsilon"]["paper"] + 1e-12
    assert full["git_sha"] is None or len(full["git_sha"]) >= 40
    assert {"packages", "hardware", "timings", "peak_rss_gib", "seed"} <= set(full)
    assert full["hardware"]["conv_layout"] == "channels_last"  # the CPU default

    interrupted = _trainer(tmp_path / "b", mnist_dir).run(stop_after=1)
    assert interrupted["status"] == "interrupted"
    assert not (tmp_path / "b" / "run.json").exists()
    resumed = _trainer(tmp_path / "b", mnist_dir).run(resume=True)
    assert resumed["resumed"] and resumed["steps"] == 3
    a, b = np.load(tmp_path / "a" / "samples.npz"), np.load(tmp_path / "b" / "samples.npz")
    assert np.array_equal(a["x"], b["x"]) and np.array_equal(a["y"], b["y"])
    assert a["x"].shape == (100, 1, 28, 28) and a["x"].dtype == np.float16
    hist_a = [h["epsilon"] for h in full["history"]]
    assert hist_a == [h["epsilon"] for h in resumed["history"]]
    # float32 CPU kernels are not bitwise reproducible across processes (two uninterrupted
    # runs differ at ~1e-7 too); the released samples above are identical
    assert [h["d_loss"] for h in full["history"]] == pytest.approx(
        [h["d_loss"] for h in resumed["history"]], rel=1e-5)

    with pytest.raises(FileExistsError):
        _trainer(tmp_path / "a", mnist_dir).run()


def test_checkpoint_from_other_config_is_refused(tmp_path, mnist_dir):
    _trainer(tmp_path / "c", mnist_dir).run(stop_after=1)
    cfg = load_config("mnist-eps1", "smoke", n_samples=100, beta=0.2)
    other = DataLensTrainer(cfg, tmp_path / "c", data_dir=mnist_dir, progress=False,
                            device="cpu")
    with pytest.raises(ValueError, match="different config"):
        other.run(resume=True)


def test_class_table_fakes_and_bf16_moments_run(tmp_path, mnist_dir):
    cfg = load_config("mnist-eps1", "smoke", n_samples=30, teacher_fakes="class_table",
                      moment_dtype="bfloat16", max_steps=2)
    rec = DataLensTrainer(cfg, tmp_path / "d", data_dir=mnist_dir, progress=False,
                          device="cpu").run()
    assert rec["steps"] == 2 and "note_moments" in rec


@pytest.mark.slow
def test_cli_train_and_evaluate(tmp_path, mnist_dir, monkeypatch, capsys):
    monkeypatch.setenv("DATALENS_DATA_DIR", str(mnist_dir.parent))
    out = tmp_path / "run"
    assert cli.main(["train", "--config", "mnist-eps1", "--profile", "smoke", "--out", str(out),
                     "--device", "cpu", "--set", "n_samples=60"]) == 0
    assert "3 steps" in capsys.readouterr().out
    assert cli.main(["evaluate", str(out), "--epochs", "1", "--device", "cpu"]) == 0
    res = json.loads((out / "eval-1ep.json").read_text())
    assert 0.0 <= res["clean"] <= res["paper"] <= 1.0 and res["n_train"] == 60
    # the smoke profile scores the first 1,000 real test images only (eval_test_limit)
    assert res["test_limit"] == res["n_test"] == 1000
    assert all(round(a * 1000, 6).is_integer() for a in res["test_accuracy_per_epoch"])
    # 1 < the smoke profile's 2 epochs: the record says it was shortened (no full-length
    # smoke-setting run is committed, so nothing was measured)
    assert res["schedule_check"] == {"shortened_from_epochs": 2, "measured_on": []}
    # evaluation variants (issue 12): their own record and checkpoint, the run's eval untouched
    before = (out / "eval-1ep.json").read_bytes()
    assert cli.main(["evaluate", str(out), "--epochs", "1", "--device", "cpu", "--lr", "1e-3",
                     "--limit", "40"]) == 0
    var = json.loads((out / "eval-1ep-lr0.001-first40.json").read_text())
    assert var["lr"] == 1e-3 and var["limit"] == 40 and var["n_train"] == 40
    assert "schedule_check" not in var
    assert (out / "eval-1ep.json").read_bytes() == before
    assert (out / ".eval-lr0.001-first40-test1000-seed0.ckpt").exists()
    # another evaluation seed is another record, never the seed-0 one
    assert cli.main(["evaluate", str(out), "--epochs", "1", "--device", "cpu", "--seed",
                     "1"]) == 0
    assert json.loads((out / "eval-1ep-seed1.json").read_text())["seed"] == 1
    assert (out / "eval-1ep.json").read_bytes() == before
    assert cli.main(["evaluate", str(tmp_path / "nothing")]) == 2


@pytest.mark.slow
def test_classifier_learns_separable_data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    x = rng.random((400, 1, 28, 28)).astype(np.float32) * 0.1
    x[y == 1, :, :14] += 0.8  # class 1: bright top half
    res = train_classifier(x[:300], y[:300], x[300:], y[300:], 2, epochs=15, lr=0.05,
                           batch_size=32, progress=False)
    assert res["paper"] >= res["clean"] and res["paper"] > 0.9
    assert len(res["test_accuracy_per_epoch"]) == 15
    assert EvalCNN((3, 64, 64), 3)(torch.zeros(2, 3, 64, 64)).shape == (2, 3)


def test_configs_valid_and_documented():
    names = available_configs()
    assert {"mnist-eps1", "mnist-eps10", "fashion-mnist-eps1", "fashion-mnist-eps10",
            "celeba-gender-eps1", "celeba-hair-eps1", "celeba-gender-eps10",
            "celeba-hair-eps10"} <= set(names)
    paper = load_config("mnist-eps1", "paper")
    assert (paper.teachers, paper.k, paper.sigma, paper.beta, paper.z_dim, paper.c) == (
        4000, 200, 5000.0, 0.7, 50, 1e-5)
    assert "k=350" in load_config("mnist-eps10").notes
    assert load_config("celeba-gender-eps10").c is None
    assert "cpu:" in load_config("mnist-eps1", "cpu").notes
    with pytest.raises(ValueError, match="unknown config"):
        load_config("svhn-eps1")
    with pytest.raises(ValueError, match="profile"):
        load_config("mnist-eps1", "huge")
    with pytest.raises(ValueError, match="sigma"):
        TrainConfig(dataset="mnist", epsilon=1.0, sigma=-1.0)
    with pytest.raises(ValueError, match="unknown config keys"):
        TrainConfig.from_dict({"dataset": "mnist", "epsilon": 1.0, "sigmaa": 3})


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        assert resolve_device("auto").type == "cpu"
        with pytest.raises(ValueError, match="no GPU"):
            resolve_device("cuda")
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("tpu")


def test_classifier_resumes_from_checkpoint(tmp_path):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 120)
    x = rng.random((120, 1, 28, 28)).astype(np.float32)
    args = dict(epochs=4, lr=0.05, batch_size=32, progress=False)
    full = train_classifier(x[:80], y[:80], x[80:], y[80:], 2, **args)
    ck = tmp_path / "eval.ckpt"

    class Stop(Exception):
        pass

    import datalens_lib.evaluate as ev
    real_accuracy = ev.accuracy
    calls = {"n": 0}

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise Stop
        return real_accuracy(*a, **k)

    ev.accuracy = flaky
    try:
        with pytest.raises(Stop):
            train_classifier(x[:80], y[:80], x[80:], y[80:], 2, checkpoint=ck,
                             checkpoint_every=1, **args)
    finally:
        ev.accuracy = real_accuracy
    assert ck.exists()
    resumed = train_classifier(x[:80], y[:80], x[80:], y[80:], 2, checkpoint=ck,
                               checkpoint_every=1, **args)
    assert resumed["test_accuracy_per_epoch"] == full["test_accuracy_per_epoch"]
    assert resumed["continued_from_epoch"] == 2


def test_classifier_schedule_extends_and_answers_prefixes(tmp_path):
    """Constant-rate SGD: 2 epochs, then extended to 4, equal 4 epochs straight; 3 epochs is
    then answered from the stored accuracies."""
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 120)
    x = rng.random((120, 1, 28, 28)).astype(np.float32)
    data = (x[:80], y[:80], x[80:], y[80:], 2)
    args = dict(lr=0.05, batch_size=32, progress=False)
    full = train_classifier(*data, epochs=4, **args)
    ck = tmp_path / "eval.ckpt"
    short = train_classifier(*data, epochs=2, checkpoint=ck, **args)
    assert short["test_accuracy_per_epoch"] == full["test_accuracy_per_epoch"][:2]
    longer = train_classifier(*data, epochs=4, checkpoint=ck, **args)
    assert longer["continued_from_epoch"] == 2
    assert longer["test_accuracy_per_epoch"] == full["test_accuracy_per_epoch"]
    prefix = train_classifier(*data, epochs=3, checkpoint=ck, **args)
    assert prefix["test_accuracy_per_epoch"] == full["test_accuracy_per_epoch"][:3]
    assert prefix["clean"] == full["test_accuracy_per_epoch"][2]
    other_seed = train_classifier(*data, epochs=1, checkpoint=ck, seed=5, **args)
    assert other_seed["continued_from_epoch"] == 0
    train_classifier(*data, epochs=2, checkpoint=ck, **args)
    other_data = train_classifier(1 - x[:80], y[:80], x[80:], y[80:], 2, epochs=3,
                                  checkpoint=ck, **args)
    assert other_data["continued_from_epoch"] == 0


@pytest.mark.slow
def test_fakes_per_label_sequence_equal_per_teacher_generator(tmp_path, mnist_dir):
    """The deduplicated fakes are exactly the official per-teacher G(z, y_teacher) batches."""
    cfg = load_config("mnist-eps1", "smoke", teachers=40, train_limit=600, chunk=7)
    tr = DataLensTrainer(cfg, tmp_path, data_dir=mnist_dir, progress=False, device="cpu")
    z = torch.rand(tr.batch, cfg.z_dim) * 2 - 1
    uniq, which = tr._fakes_by_label_sequence(z, 0)
    assert uniq.shape[0] < cfg.teachers  # teachers do share label sequences
    with torch.no_grad():
        for t in range(cfg.teachers):
            y_t = tr.y[tr.parts[t, : tr.batch]]
            direct = tr.G(z, tr._onehot(y_t)).view(tr.batch, *tr.shape)
            torch.testing.assert_close(uniq[which[t]], direct, rtol=1e-5, atol=1e-6)


def test_ensemble_memory_check_refuses_before_allocating():
    from datalens_lib.datalens import check_ensemble_memory, ensemble_state_bytes

    paper = load_config("mnist-eps1", "paper")
    # 4000 teachers x 555,655 parameters x (4 + 2 x 4) bytes: the 26.7 GB quoted in the docs
    assert ensemble_state_bytes(paper, (1, 28, 28), 10) == 4000 * 555655 * 12
    bf16 = paper.with_overrides(moment_dtype="bfloat16")
    assert ensemble_state_bytes(bf16, (1, 28, 28), 10) == 4000 * 555655 * 8
    huge = paper.with_overrides(teachers=10**7)
    with pytest.raises(ValueError, match="moment_dtype=bfloat16"):
        check_ensemble_memory(huge, (1, 28, 28), 10, torch.device("cpu"))
    check_ensemble_memory(load_config("mnist-eps1", "smoke"), (1, 28, 28), 10,
                          torch.device("cpu"))


def test_expected_steps_matches_the_budget_stop():
    from datalens_lib.datalens import expected_steps

    # the official MNIST eps=1 run stops after 86 steps of 15 queries (paper conversion)
    assert expected_steps(load_config("mnist-eps1", "paper"), 15) == 86
    assert expected_steps(load_config("mnist-eps1", "smoke"), 30) == 3
    assert expected_steps(load_config("mnist-eps1", "cpu"), 15) == 3


@pytest.mark.slow
def test_official_teacher_slots_run_and_say_what_they_cost(tmp_path, mnist_dir):
    """init_slots / adam_slots (issue 12, opt-in): the run records that shared Adam state
    couples teachers, and gives the ledger at the coupled sensitivity."""
    cfg = load_config("mnist-eps1", "smoke", n_samples=60, chunk=5, init_slots=5,
                      adam_slots=5, max_steps=1)
    rec = DataLensTrainer(cfg, tmp_path / "slots", data_dir=mnist_dir, progress=False,
                          device="cpu", profile="smoke").run()
    assert rec["steps"] == 1
    assert "NOT the ledgers above" in rec["privacy"]["dp_guarantee"]
    assert rec["privacy"]["dp_ledgers"] == ["coupled_rdp"]
    coupled = topagg_epsilon(rec["queries"], cfg.k * 4, cfg.sigma, cfg.delta, "rdp")
    assert rec["epsilon"]["coupled_rdp"] == pytest.approx(coupled)  # 2 teachers per slot
    assert rec["epsilon"]["coupled_rdp"] > rec["epsilon"]["rdp"]
    assert "init" in rec["note_init"]
    with pytest.raises(ValueError, match="adam_slots"):
        load_config("mnist-eps1", "smoke", adam_slots=3)  # 3 does not divide 10 teachers


def test_query_batch_is_each_teachers_batch_over_the_records_trained_on():
    """B = min(batch_cap, floor(n / teachers)) with ``train_limit`` applied as training applies
    it (x[:train_limit]): a limit above n changes nothing (a ledger that read the limit as n
    would count 30 queries per step instead of 15 here)."""
    from datalens_lib.config import load_config
    from datalens_lib.datalens import query_batch

    cfg = load_config("mnist-eps1", "paper")
    assert (cfg.teachers, cfg.batch_cap) == (4000, 30)
    assert query_batch(cfg, 60_000) == 15
    assert query_batch(cfg.with_overrides(train_limit=10**6), 60_000) == 15
    assert query_batch(cfg.with_overrides(train_limit=40_000), 60_000) == 10
    assert query_batch(cfg.with_overrides(teachers=1000), 60_000) == 30


def test_sampling_calls_hold_at_most_sample_rows_and_whole_batches():
    """``sample_generator`` groups batches into one generator call up to ``SAMPLE_ROWS`` rows
    (DP-GAN's large batch of 4096 would otherwise put ~40 GB of activations in one call), never
    splitting a batch: 64 batches of 15 per call, one batch per call above the cap."""
    from datalens_lib.datalens import SAMPLE_ROWS, sample_generator

    class Stub:
        z_dim, y_dim = 4, 10

        def __init__(self):
            self.calls = []

        def __call__(self, z, y, groups=1):
            self.calls.append((len(z), groups))
            return torch.zeros(len(z), 1, 28, 28)

    g = Stub()
    x, y = sample_generator(g, 2000, 15, torch.Generator().manual_seed(0))
    assert g.calls[0] == (960, 64) and len(x) == len(y) == 2000
    big = SAMPLE_ROWS // 2 + 1  # two such batches exceed the cap
    g = Stub()
    sample_generator(g, 3 * big, big, torch.Generator().manual_seed(0))
    assert g.calls == [(big, 1)] * 3
