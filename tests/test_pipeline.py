"""Behaviour of the DataLens trainer (paper Alg. 1) pinned against what the paper says.

The smoke profile hides code paths (one chunk, ``d_step == pretrain_teacher == 1``, one batch
per partition, the data-dependent ledger always on), so these tests use a *pinned* setting
that exercises each of them: 6 teachers in chunks of 4 (two chunks of unequal size), 3
pretraining steps and ``d_step = 2``, partitions of 30 records read in batches of 10 (three
batches, so the batch index must advance and wrap), and the plain data-independent ledger.
Every test measures the pipeline from outside (spies on the functions it calls, the released
tensors) and compares with the paper's definition, not with another run of the same code.
"""

import importlib

import dp_accounting
import numpy as np
import pytest
import torch
from conftest import real_dataset_dir

import datalens_lib.datalens as dl
from datalens_lib.aggregation import noisy_threshold, vote_sum
from datalens_lib.config import load_config
from datalens_lib.datalens import DataLensTrainer, expected_steps, student_loss
from datalens_lib.methods import harness
from datalens_lib.privacy import topagg_epsilon, topagg_max_queries
from datalens_lib.privacy.accountant import noise_multiplier

# the module (the package also exports a function named ``topagg``)
TOPAGG = importlib.import_module("datalens_lib.aggregation.topagg")

PINNED = dict(teachers=6, chunk=4, train_limit=180, batch_cap=10, pretrain_teacher=3, d_step=2,
              data_dependent=False, max_steps=4, n_samples=20)


@pytest.fixture(scope="module")
def mnist_dir():
    return real_dataset_dir("mnist")


def pinned(tmp_path, mnist_dir, **over):
    cfg = load_config("mnist-eps1", "smoke", **(PINNED | over))
    return DataLensTrainer(cfg, tmp_path, data_dir=mnist_dir, checkpoint_every=0,
                           progress=False, device="cpu", profile="smoke")


def test_pinned_setting_exercises_the_hidden_paths(tmp_path, mnist_dir):
    tr = pinned(tmp_path, mnist_dir)
    assert tr.batch == 10 and tr.per_teacher == 30 and tr.batches_per_epoch == 3
    assert [(s.start, s.stop) for s in tr.ens.slices()] == [(0, 4), (4, 6)]


@pytest.mark.parametrize("conversion,data_dependent", [("paper", False), ("rdp", False),
                                                       ("paper", True)])
def test_ledger_holds_B_queries_per_step(tmp_path, mnist_dir, conversion, data_dependent):
    """After n generator steps the ledger holds n * B queries (one per synthetic sample, paper
    Alg. 1) and reports the epsilon the accountant gives for exactly that many."""
    tr = pinned(tmp_path, mnist_dir, conversion=conversion, data_dependent=data_dependent,
                max_steps=3)
    cfg = tr.cfg
    for n in (1, 2, 3):
        rec = tr.step()
        assert rec["step"] == n and rec["queries"] == n * tr.batch == tr.acc.queries
        assert rec["epsilon"] == pytest.approx(
            topagg_epsilon(n * tr.batch, cfg.k, cfg.sigma, cfg.delta, conversion), rel=1e-12)
        assert tr.acc.dependent_queries == (n * tr.batch if data_dependent else 0)
        assert ("epsilon_data_dependent" in rec) == data_dependent
    assert not tr.can_step()  # max_steps = 3


def test_run_stops_at_the_last_step_within_budget(tmp_path, mnist_dir):
    """Training stops before the step whose B queries would exceed epsilon: with a budget of
    25 queries and B = 10, exactly 2 steps (20 queries) run."""
    cfg = load_config("mnist-eps1", "smoke")
    # choose epsilon between eps(25 queries) and eps(26 queries) under the paper conversion
    eps = (topagg_epsilon(25, cfg.k, cfg.sigma, cfg.delta)
           + topagg_epsilon(26, cfg.k, cfg.sigma, cfg.delta)) / 2
    assert topagg_max_queries(eps, cfg.k, cfg.sigma, cfg.delta) == 25
    tr = pinned(tmp_path, mnist_dir, epsilon=eps, max_steps=None)
    assert expected_steps(tr.cfg, tr.batch) == 2
    rec = tr.run()
    assert rec["steps"] == 2 and rec["queries"] == 20
    assert rec["epsilon"]["paper"] == pytest.approx(topagg_epsilon(20, cfg.k, cfg.sigma,
                                                                   cfg.delta), rel=1e-12)
    assert [h["queries"] for h in rec["history"]] == [10, 20]
    assert "data_dependent" not in rec["epsilon"]


class _Spy:
    """Records the calls of a function and what it returned, then calls it."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kw):
        out = self.fn(*args, **kw)
        self.calls.append((args, kw, out))
        return out


def spy_teacher_steps(tr) -> list[tuple]:
    """Record every teacher Adam step of ``tr``: (generator step, slice, x_real, fakes, y,
    Adam step number, returned losses), tensors cloned."""
    calls, real = [], tr.ens.train_step

    def spy(sl, x_real, fakes, y, step):
        out = real(sl, x_real, fakes, y, step)
        calls.append((tr.state.step, sl, x_real.clone(), fakes.clone(), y.clone(), step, out))
        return out

    tr.ens.train_step = spy
    return calls


def step_and_get_z(tr) -> torch.Tensor:
    """One generator step; returns the step's z, with G restored to its state before the
    step (the teachers' fakes are made before the generator's update)."""
    state = tr.gen_cpu.get_state()
    z = torch.rand(tr.batch, tr.cfg.z_dim, generator=tr.gen_cpu) * 2 - 1
    tr.gen_cpu.set_state(state)
    g0 = {k: v.clone() for k, v in tr.G.state_dict().items()}
    tr.step()
    tr.G.load_state_dict(g0)
    return z


def test_trainer_noise_std_is_sigma_and_threshold_is_beta_N(tmp_path, mnist_dir, monkeypatch):
    """Measured from the trainer's own step: noisy - clean votes has standard deviation sigma,
    the output is sign(noisy) where |noisy| >= beta * N (N = all teachers, not one chunk), the
    clean votes are the sum of every teacher's compressed votes, and the generator's target
    moves by gamma times that output (Alg. 1, Alg. 3)."""
    sigma, beta = 3.0, 0.5  # threshold beta * N = 3: far from both 0 and the vote range
    tr = pinned(tmp_path, mnist_dir, sigma=sigma, beta=beta, epsilon=1e4, gamma=0.25)
    votes_spy, thr_spy = _Spy(vote_sum), _Spy(noisy_threshold)
    loss_spy = _Spy(student_loss)
    monkeypatch.setattr(TOPAGG, "vote_sum", votes_spy)  # what TopAgg.partial calls
    monkeypatch.setattr(TOPAGG, "noisy_threshold", thr_spy)  # what TopAgg.release calls
    monkeypatch.setattr(dl, "student_loss", loss_spy)
    tr.step()
    (args, kw, (out, noisy)), = thr_spy.calls
    clean = args[0]
    assert clean.shape == (tr.batch, tr.d)
    # every teacher's compressed votes, chunk by chunk, are in the clean sum
    assert sum(c[0][0].shape[1] for c in votes_spy.calls) == tr.cfg.teachers
    torch.testing.assert_close(clean, sum(c[2] for c in votes_spy.calls))
    # each teacher votes +-1 on exactly k coordinates
    assert clean.abs().sum(1).le(tr.cfg.teachers * tr.cfg.k).all()
    assert ((clean.sum(1) - tr.cfg.teachers * tr.cfg.k) % 2 == 0).all()
    noise = (noisy - clean.double()).flatten()
    n = noise.numel()
    assert abs(noise.std().item() - sigma) < 5 * sigma / np.sqrt(2 * n)
    assert abs(noise.mean().item()) < 5 * sigma / np.sqrt(n)
    tau = beta * tr.cfg.teachers
    expect = (noisy >= tau).to(out.dtype) - (noisy <= -tau).to(out.dtype)
    assert torch.equal(out, expect)
    assert 0 < (out != 0).float().mean() < 1  # the threshold is active in this setting
    (x_q, g_bar, gamma), _, _ = loss_spy.calls[0]
    assert gamma == 0.25 and torch.equal(g_bar.flatten(1), out.to(g_bar.dtype))


def test_student_loss_gradient_is_minus_2_gamma_g_bar():
    x = torch.rand(3, 1, 4, 4, dtype=torch.float64, requires_grad=True)
    g_bar = torch.randint(-1, 2, (3, 1, 4, 4)).double()
    loss = student_loss(x, g_bar, 0.3)
    (grad,) = torch.autograd.grad(loss, x)
    torch.testing.assert_close(grad, -2 * 0.3 * g_bar)
    assert loss.item() == pytest.approx(0.09 * g_bar.abs().sum().item())


def test_teachers_step_counts_batches_and_adam_counter(tmp_path, mnist_dir):
    """Teachers take ``pretrain_teacher`` Adam steps on the first generator step and ``d_step``
    on each later one, with one Adam step counter running across generator steps; each
    teacher trains on its own partition, batch (s mod 3) at generator step s, and on fakes
    conditioned on its own labels."""
    tr = pinned(tmp_path, mnist_dir)
    calls = spy_teacher_steps(tr)
    for _ in range(4):
        tr.step()
    cfg = tr.cfg
    for sl in tr.ens.slices():
        mine = [c for c in calls if c[1] == sl]
        per_step = [sum(1 for c in mine if c[0] == s) for s in range(4)]
        assert per_step == [cfg.pretrain_teacher] + [cfg.d_step] * 3
        assert [c[5] for c in mine] == list(range(1, cfg.pretrain_teacher + 3 * cfg.d_step + 1))
        for s, _, x_real, fakes, y, _, _ in mine:
            b0 = (s % 3) * tr.batch  # 3 batches per partition: 0, 10, 20, then 0 again
            idx = tr.parts[sl, b0: b0 + tr.batch]
            assert torch.equal(x_real, tr.x[idx]) and torch.equal(y, tr.y[idx])
            assert fakes.shape == x_real.shape
    assert tr.state.teacher_steps == cfg.pretrain_teacher + 3 * cfg.d_step


@pytest.mark.slow
def test_teacher_fakes_are_conditioned_on_the_teachers_labels(tmp_path, mnist_dir):
    """The fakes a teacher trains on are G(z, y_teacher) for the step's z (official code)."""
    tr = pinned(tmp_path, mnist_dir, max_steps=1)
    calls = spy_teacher_steps(tr)
    z = step_and_get_z(tr)
    with torch.no_grad():
        for _, sl, _, fakes, y, _, _ in calls[:: tr.cfg.pretrain_teacher]:
            for i in range(sl.stop - sl.start):
                direct = tr.G(z, tr._onehot(y[i])).view(tr.batch, *tr.shape)
                torch.testing.assert_close(fakes[i], direct, rtol=1e-5, atol=1e-6)


def test_teacher_states_change_only_through_their_own_steps(tmp_path, mnist_dir):
    """Every teacher is trained (its parameters move) on every generator step; none is
    skipped by the chunking."""
    tr = pinned(tmp_path, mnist_dir, max_steps=2)
    before = tr.ens.params["w3x"].clone()
    tr.step()
    moved = (tr.ens.params["w3x"] - before).flatten(1).abs().amax(1)
    assert (moved > 0).all() and moved.shape == (tr.cfg.teachers,)


def test_crash_while_writing_samples_leaves_no_finished_run(tmp_path, mnist_dir, monkeypatch):
    """A run killed while writing its samples leaves neither a samples file nor a run record
    (``run.json`` marks a finished run); resuming finishes it without training again."""
    tr = pinned(tmp_path, mnist_dir, max_steps=2)
    tr.checkpoint_every = 1

    def half_written(fh, **arrays):
        fh.write(b"PK\x03\x04 truncated")
        raise KeyboardInterrupt

    monkeypatch.setattr(dl.np, "savez_compressed", half_written)
    with pytest.raises(KeyboardInterrupt):
        tr.run()
    monkeypatch.undo()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != harness.LOCK_FILE)
    assert left == ["checkpoint.pt"]
    again = pinned(tmp_path, mnist_dir, max_steps=2)
    again.checkpoint_every = 1
    rec = again.run(resume=True)
    assert rec["status"] == "complete" and rec["resumed"] and rec["steps"] == 2
    assert len(rec["history"]) == 2 and again.state.teacher_steps == 3 + 2
    with np.load(tmp_path / "samples.npz") as f:
        assert f["x"].shape == (20, 1, 28, 28) and f["y"].shape == (20,)
        assert set(np.unique(f["y"])) <= set(range(10))


PRIVACY_TEXT = {"mechanism": "TopAgg (paper Alg. 3)",
                "sensitivity": "L2 2*sqrt(k) per query (Lemma 1)",
                "accountant": "Gaussian RDP 2*k*lambda/sigma^2 per query, composed over queries "
                              "(Theorem 3)",
                "neighbouring": "replace one record's image, its label kept (the "
                                "class-ordered partition is a function of the labels: a "
                                "changed label moves other records to other teachers); then "
                                "one teacher's votes change",
                "dp_guarantee": "epsilon under paper, rdp and pld (data-independent conversions "
                                "of the same ledger) for that neighbouring relation; "
                                "data_dependent is not a DP release"}


def test_run_record_says_what_ran(tmp_path, mnist_dir, monkeypatch):
    """run.json: the setting, the ledger under each conversion, timings that add up, the
    samples written, and the mechanism's sensitivity and accountant."""
    saves = []
    tr = pinned(tmp_path, mnist_dir, max_steps=3)
    tr.checkpoint_every = 2
    real_save = tr.harness.save_checkpoint
    monkeypatch.setattr(tr.harness, "save_checkpoint", lambda: (saves.append(tr.state.step),
                                                                real_save()))
    rec = tr.run(resume=True)  # nothing to resume: a fresh run
    cfg = tr.cfg
    assert saves == [2, 3]  # every 2 steps, and at the end
    assert rec["status"] == "complete" and rec["resumed"] is False
    assert rec["profile"] == "smoke" and rec["device"] == "cpu" and rec["seed"] == 0
    assert rec["config"] == cfg.to_dict()
    assert (rec["target_epsilon"], rec["delta"], rec["conversion"]) == (cfg.epsilon, cfg.delta,
                                                                       "paper")
    assert (rec["steps"], rec["queries"], rec["batch"], rec["teachers"], rec["per_teacher"]) == (
        3, 30, 10, 6, 30)
    assert rec["teacher_parameters"] == tr.ens.num_parameters == 555655
    assert set(rec["epsilon"]) == {"paper", "rdp", "pld"}
    for c in ("paper", "rdp", "pld"):
        assert rec["epsilon"][c] == pytest.approx(
            topagg_epsilon(30, cfg.k, cfg.sigma, cfg.delta, c), rel=1e-12)
    t = rec["timings"]
    assert t["train_seconds"] == pytest.approx(sum(h["seconds"] for h in rec["history"]))
    assert t["seconds_per_step"] == pytest.approx(t["train_seconds"] / 3)
    assert 0 < t["sample_seconds"] < t["wall_seconds_last_call"]
    assert t["train_seconds"] < t["wall_seconds_last_call"]
    assert rec["samples"] == {"file": "samples.npz", "n": 20, "dtype": "float16"}
    assert {k: v for k, v in rec["privacy"].items()
            if k not in ("scope", "event", "records", "dp_ledgers")} == PRIVACY_TEXT
    assert rec["privacy"]["dp_ledgers"] == ["paper", "rdp", "pld"]  # not data_dependent
    # the private records: what the teachers split, the n mod N left-over included
    assert rec["privacy"]["records"] == 180 == rec["per_teacher"] * rec["teachers"]
    odd = pinned(tmp_path / "odd", mnist_dir, train_limit=185)  # 185 mod 6 = 5 left over
    assert (odd.per_teacher, odd.n_private) == (30, 185)
    # the mechanism as an event: 30 Gaussian queries of noise multiplier sigma / 2 sqrt(k)
    assert rec["privacy"]["event"] == repr(dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(noise_multiplier(cfg.k, cfg.sigma)), 30))
    assert rec["privacy"]["scope"].startswith("the guarantee covers what the mechanism")
    assert "note_moments" not in rec and "cuda_peak_gib" not in rec
    assert rec["peak_rss_gib"] > 0.1 and {"git_sha", "packages", "hardware"} <= set(rec)
    assert [h["step"] for h in rec["history"]] == [1, 2, 3]
    assert all(h["min_log_q"] is None and h["agreed_dims"] >= 0 for h in rec["history"])
    assert all(h["d_loss"] > 0 and h["seconds"] > 0 for h in rec["history"])
    with pytest.raises(FileExistsError, match="already holds a finished run"):
        pinned(tmp_path, mnist_dir, max_steps=3).run()


@pytest.mark.parametrize("data_dependent,threshold", [(True, False), (False, True),
                                                      (True, True)])
def test_data_dependent_ledger_only_with_thresholding(tmp_path, mnist_dir, data_dependent,
                                                      threshold):
    """The data-dependent bound (Thms. 4-5) needs the thresholded release; it is reported only
    when asked for and thresholding is on."""
    tr = pinned(tmp_path, mnist_dir, data_dependent=data_dependent, threshold=threshold,
                max_steps=1, n_samples=10)
    rec = tr.run()
    both = data_dependent and threshold
    assert ("data_dependent" in rec["epsilon"]) == both
    assert ("epsilon_data_dependent" in rec["history"][0]) == both
    assert (rec["history"][0]["min_log_q"] is not None) == both
    assert (rec["history"][0]["agreed_dims"] is None) == (not threshold)
    assert tr.acc.dependent_queries == (10 if both else 0) and tr.acc.queries == 10
    if both:
        assert rec["epsilon"]["data_dependent"] == pytest.approx(
            tr.acc.data_dependent_epsilon(), rel=1e-12)


@pytest.mark.slow
def test_step_record_matches_the_release(tmp_path, mnist_dir, monkeypatch):
    """agreed_dims is the mean number of non-zero output coordinates per query, min_log_q the
    smallest log q~ of the step's clean votes, d_loss the teachers' mean loss."""
    from datalens_lib.privacy import topagg_log_q_tilde

    tr = pinned(tmp_path, mnist_dir, sigma=3.0, beta=0.5, epsilon=1e4, data_dependent=True)
    thr_spy = _Spy(noisy_threshold)
    monkeypatch.setattr(TOPAGG, "noisy_threshold", thr_spy)
    calls = spy_teacher_steps(tr)
    rec = tr.step()
    losses = [c[-1] for c in calls]
    (args, _, (out, _)), = thr_spy.calls
    assert rec["agreed_dims"] == pytest.approx(float((out != 0).float().sum(1).mean()))
    lq = topagg_log_q_tilde(args[0].double().numpy(), 3.0, 0.5, 6)
    assert rec["min_log_q"] == pytest.approx(float(lq.min()), rel=1e-9)
    last = [losses[2], losses[5]]  # the last of the 3 pretraining steps of each chunk
    assert rec["d_loss"] == pytest.approx(float(torch.cat(last).mean()), rel=1e-6)


def test_without_threshold_the_generator_follows_the_mean_noisy_vote(tmp_path, mnist_dir,
                                                                      monkeypatch):
    tr = pinned(tmp_path, mnist_dir, threshold=False)
    thr_spy, loss_spy = _Spy(noisy_threshold), _Spy(student_loss)
    monkeypatch.setattr(TOPAGG, "noisy_threshold", thr_spy)
    monkeypatch.setattr(dl, "student_loss", loss_spy)
    tr.step()
    (_, _, (_, noisy)), = thr_spy.calls
    (_, g_bar, gamma), _, _ = loss_spy.calls[0]
    torch.testing.assert_close(g_bar.flatten(1), (noisy / 6).float())
    assert gamma == tr.cfg.gamma


def test_interrupted_run_returns_its_step_and_resumes_there(tmp_path, mnist_dir):
    tr = pinned(tmp_path, mnist_dir, max_steps=3)
    assert tr.run(stop_after=2) == {"status": "interrupted", "step": 2}
    assert not (tmp_path / "run.json").exists()
    again = pinned(tmp_path, mnist_dir, max_steps=3)
    assert again.load_checkpoint() and again.state.step == 2
    assert again.state.teacher_steps == 3 + 2 and again.acc.queries == 20
    assert len(again.history) == 2


def test_samples_are_generated_in_batches_of_B(tmp_path, mnist_dir):
    """sample(n) draws uniform labels, then G in training-mode BatchNorm over groups of exactly
    B samples (as during training); n need not be a multiple of B."""
    tr = pinned(tmp_path, mnist_dir)
    x, y = tr.sample(2 * tr.batch, torch.Generator().manual_seed(5))
    assert x.shape == (20, 1, 28, 28) and x.dtype == np.float16 and y.dtype == np.int64
    assert x.min() >= 0 and x.max() <= 1
    g = torch.Generator().manual_seed(5)
    labels = torch.randint(0, 10, (20,), generator=g)
    z = torch.rand(20, tr.cfg.z_dim, generator=g) * 2 - 1
    assert np.array_equal(y, labels.numpy())
    with torch.no_grad():
        for s in (0, 10):
            direct = tr.G(z[s: s + 10], tr._onehot(labels[s: s + 10]))
            np.testing.assert_allclose(x[s: s + 10], direct.numpy().astype(np.float16),
                                       atol=2e-3)
    odd, odd_y = tr.sample(13, torch.Generator().manual_seed(5))
    assert odd.shape == (13, 1, 28, 28) and np.array_equal(odd_y, labels[:13].numpy())
    # the last 3 come from a full batch of B = 10 (7 extra images drawn and dropped), never
    # from BatchNorm statistics over 3 images
    g = torch.Generator().manual_seed(5)
    labels20 = torch.randint(0, 10, (20,), generator=g)
    z20 = torch.rand(20, tr.cfg.z_dim, generator=g) * 2 - 1
    with torch.no_grad():
        full = tr.G(z20[10:], tr._onehot(labels20[10:]))
        alone = tr.G(z20[10:13], tr._onehot(labels20[10:13]))
    np.testing.assert_allclose(odd[10:], full[:3].numpy().astype(np.float16), atol=2e-3)
    assert not np.allclose(odd[10:], alone.numpy().astype(np.float16), atol=2e-3)
    many, labels_many = tr.sample(10 * 64 + 10, torch.Generator().manual_seed(6))
    assert many.shape[0] == 650 and set(np.unique(labels_many)) == set(range(10))


def test_expected_steps_is_the_budget_capped_by_max_steps():
    cfg = load_config("mnist-eps1", "smoke")
    per_budget = topagg_max_queries(cfg.epsilon, cfg.k, cfg.sigma, cfg.delta) // 10
    assert expected_steps(cfg.with_overrides(max_steps=None), 10) == per_budget
    assert expected_steps(cfg.with_overrides(max_steps=2), 10) == 2
    assert expected_steps(cfg.with_overrides(max_steps=10**6), 10) == per_budget
    rdp = cfg.with_overrides(conversion="rdp", max_steps=None)
    assert expected_steps(rdp, 10) == topagg_max_queries(cfg.epsilon, cfg.k, cfg.sigma,
                                                         cfg.delta, "rdp") // 10


def test_each_random_stream_has_its_own_documented_seed(tmp_path, mnist_dir, monkeypatch):
    """seed: query labels and z; seed+1: TopAgg's signs and noise; seed+2: the generator's
    initial weights; seed+3: the teachers' initial weights; seed+4: the released samples."""
    from datalens_lib.ensemble import TeacherEnsemble
    from datalens_lib.models import Generator

    seen_dirs = []
    real_load = dl.load_dataset
    monkeypatch.setattr(dl, "load_dataset", lambda name, data_dir: (seen_dirs.append(data_dir),
                                                                    real_load(name, data_dir))[1])
    tr = pinned(tmp_path, mnist_dir, lr_generator=0.0125)
    assert seen_dirs == [mnist_dir]
    assert tr.g_opt.param_groups[0]["lr"] == 0.0125
    assert tr.g_opt.param_groups[0]["betas"] == (0.5, 0.999)
    tr_seed = DataLensTrainer(tr.cfg, tmp_path / "s7", data_dir=mnist_dir, seed=7,
                              progress=False, device="cpu")
    for t, s in ((tr, 0), (tr_seed, 7)):
        assert t.gen_cpu.initial_seed() == s and t.gen_dev.initial_seed() == s + 1
        torch.manual_seed(s + 2)
        g = Generator(t.cfg.z_dim, 10, (1, 28, 28))
        for k, v in g.state_dict().items():
            assert torch.equal(v, t.G.state_dict()[k]), k
        ens = TeacherEnsemble(6, 10, (1, 28, 28), chunk=4,
                              generator=torch.Generator().manual_seed(s + 3))
        for k, v in ens.params.items():
            assert torch.equal(v, t.ens.params[k]), k
    assert not torch.equal(tr.ens.params["w0x"], tr_seed.ens.params["w0x"])
    assert not np.array_equal(tr.parts.numpy(), tr_seed.parts.numpy())  # partition by seed
    rec = tr.run()
    with np.load(tmp_path / "samples.npz") as f:
        x = f["x"]
    direct, _ = tr.sample(rec["samples"]["n"], torch.Generator().manual_seed(0 + 4))
    assert np.array_equal(x, direct)


def test_resume_refuses_another_seed(tmp_path, mnist_dir):
    pinned(tmp_path, mnist_dir).run(stop_after=1)
    other = DataLensTrainer(load_config("mnist-eps1", "smoke", **PINNED), tmp_path, seed=1,
                            data_dir=mnist_dir, progress=False, device="cpu")
    with pytest.raises(ValueError, match="was written by a different config or seed"):
        other.run(resume=True)


def test_class_table_fakes_are_G_of_z_and_the_teachers_label(tmp_path, mnist_dir):
    """teacher_fakes='class_table': G(z_j, c) for every class c in one batch per step, looked
    up by each teacher's label at position j."""
    tr = pinned(tmp_path, mnist_dir, teacher_fakes="class_table", max_steps=1)
    calls = spy_teacher_steps(tr)
    z = step_and_get_z(tr)
    with torch.no_grad():
        labels = torch.arange(10).repeat_interleave(tr.batch)
        table = tr.G(z.repeat(10, 1), tr._onehot(labels)).view(10, tr.batch, 1, 28, 28)
    for _, _, _, fakes, y, _, _ in calls:
        for i in range(y.shape[0]):
            for j in range(tr.batch):
                torch.testing.assert_close(fakes[i, j], table[y[i, j], j], rtol=1e-5,
                                           atol=1e-6)


def test_memory_check_message_and_gpu_branch(monkeypatch):
    from datalens_lib.datalens import check_ensemble_memory

    paper = load_config("mnist-eps1", "paper")
    huge = paper.with_overrides(teachers=10**7)
    with pytest.raises(ValueError, match=r"^10000000 teachers need 62099\.3 GiB for parameters "
                                         r"and Adam moments \(float32\), but only \d+\.\d GiB is "
                                         r"free on cpu\. Set moment_dtype=bfloat16 \(CLI: --set "
                                         r"moment_dtype=bfloat16\) to halve the Adam state, or "
                                         r"use fewer teachers\.$"):
        check_ensemble_memory(huge, (1, 28, 28), 10, torch.device("cpu"))
    bf16 = huge.with_overrides(moment_dtype="bfloat16")
    with pytest.raises(ValueError, match=r"\(bfloat16\), but only \d+\.\d GiB is free on cpu\.$"):
        check_ensemble_memory(bf16, (1, 28, 28), 10, torch.device("cpu"))
    # on a GPU the free device memory is what counts (no GPU needed to test the branch)
    need = 4000 * 555655 * 8
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (need - 1, 80 * 2**30))
    paper_bf16 = paper.with_overrides(moment_dtype="bfloat16")
    with pytest.raises(ValueError, match=r"free on cuda:0\.$"):
        check_ensemble_memory(paper_bf16, (1, 28, 28), 10, torch.device("cuda:0"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (need, 80 * 2**30))
    check_ensemble_memory(paper_bf16, (1, 28, 28), 10, torch.device("cuda:0"))


def test_bf16_moments_are_noted_in_the_record(tmp_path, mnist_dir):
    assert pinned(tmp_path / "f", mnist_dir).ens.adam.m["w0x"].dtype == torch.float32
    tr = pinned(tmp_path, mnist_dir, moment_dtype="bfloat16", max_steps=1, n_samples=10)
    assert tr.ens.adam.m["w0x"].dtype == torch.bfloat16
    rec = tr.run()
    assert rec["note_moments"] == ("teacher Adam moments stored in bfloat16 (parameters "
                                   "float32) to fit 24 GiB; see datalens_lib.ensemble")


def test_bf16_compute_is_opt_in_noted_and_resumes_old_checkpoints(tmp_path, mnist_dir):
    """compute_dtype=bfloat16 reaches the ensemble and the record; the default stays float32
    and a checkpoint written before the key existed (no compute_dtype) still resumes."""
    plain = pinned(tmp_path / "f", mnist_dir, max_steps=2)
    assert plain.ens.compute_dtype == torch.float32
    plain.run(stop_after=1)
    ck = torch.load(plain.checkpoint_path, weights_only=True)
    del ck["config"]["compute_dtype"]  # as written by the code before the option
    torch.save(ck, plain.checkpoint_path)
    again = pinned(tmp_path / "f", mnist_dir, max_steps=2)
    assert again.load_checkpoint() and again.state.step == 1
    tr = pinned(tmp_path / "b", mnist_dir, compute_dtype="bfloat16", max_steps=1, n_samples=10)
    assert tr.ens.compute_dtype == torch.bfloat16
    rec = tr.run()
    assert rec["config"]["compute_dtype"] == "bfloat16" and "note_compute" in rec
    assert "note_compute" not in plain.harness.record(0.5, False, 2.0)
    assert all(v.dtype == torch.float32 for v in tr.ens.params.values())
    other = pinned(tmp_path / "f", mnist_dir, max_steps=2, compute_dtype="bfloat16")
    with pytest.raises(ValueError, match="different config or seed"):
        other.load_checkpoint()


def test_gpu_runs_record_their_peak_device_memory(tmp_path, mnist_dir, monkeypatch):
    tr = pinned(tmp_path, mnist_dir, max_steps=1)
    tr.step()
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: int(2.5 * 2**30) + 2**18)
    monkeypatch.setattr(harness, "provenance", lambda: {})
    tr.device = torch.device("cuda")
    rec = tr.harness.record(0.5, False, 2.0)
    assert rec["cuda_peak_gib"] == 2.5 and rec["device"] == "cuda"  # GiB to 3 decimals


def test_record_names_the_code_the_run_started_with(tmp_path, mnist_dir, monkeypatch):
    """Provenance: HEAD may move while a long run trains; the record keeps the commit the
    process started from and names the later one separately."""
    monkeypatch.setattr(harness, "git_sha", lambda: "a" * 40)
    tr = pinned(tmp_path, mnist_dir, max_steps=1)
    monkeypatch.setattr(harness, "provenance", lambda: {"git_sha": "b" * 40, "packages": {}})
    rec = tr.harness.record(0.5, False, 2.0)
    assert rec["git_sha"] == "a" * 40 and rec["git_sha_at_end"] == "b" * 40
    monkeypatch.setattr(harness, "provenance", lambda: {"git_sha": "a" * 40, "packages": {}})
    assert "git_sha_at_end" not in tr.harness.record(0.5, False, 2.0)


def test_the_partition_setting_reaches_the_split_and_the_record(tmp_path, mnist_dir):
    """partition="shuffled" trains on G-PATE's label-free split and its record states the
    standard replace-one relation (``data.partition``); the default keeps the official one."""
    from datalens_lib.data.partition import NEIGHBOURING, partition, shuffled_partition

    tr = pinned(tmp_path / "s", mnist_dir, max_steps=1, partition="shuffled")
    np.testing.assert_array_equal(tr.parts.numpy(), shuffled_partition(180, 6, tr.seed))
    rec = tr.run()
    assert rec["privacy"]["neighbouring"] == NEIGHBOURING["shuffled"]
    assert rec["config"]["partition"] == "shuffled"
    default = pinned(tmp_path / "c", mnist_dir, max_steps=1)
    y = default.y.numpy()
    np.testing.assert_array_equal(default.parts.numpy(), partition(y, 6, default.seed))
