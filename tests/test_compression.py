"""The compressors of tab:compression (D2P-Fed, FetchSGD) behind the aggregator interface:
their quantisers and sketches, and each stated sensitivity checked against adversarial
single-teacher changes."""

import math

import numpy as np
import pytest
import scipy.linalg
import torch
from conftest import require_datasets

from datalens_lib.aggregation import (
    AGGREGATORS,
    CountSketch,
    D2PFed,
    FetchSGD,
    TopAgg,
    make_aggregator,
)
from datalens_lib.aggregation.base import Aggregator, threshold_votes
from datalens_lib.aggregation.d2pfed import (
    fwht,
    klevel_coded,
    klevel_unbiased,
    padded_dim,
    rotate,
    unrotate,
)
from datalens_lib.config import load_config
from datalens_lib.privacy.gaussian import PLD_MIN_Z, CompressorAccountant, gaussian_epsilon


def gen(seed):
    return torch.Generator().manual_seed(seed)


def l2(x):
    return float(torch.linalg.vector_norm(x.double()))


# ------------------------------------------------------------------------------ D2P-Fed

def test_fwht_is_the_sylvester_hadamard_matrix_and_rotation_is_orthonormal():
    x = torch.randn(3, 16, dtype=torch.float64, generator=gen(0))
    want = x @ torch.from_numpy(scipy.linalg.hadamard(16)).double()  # H symmetric
    assert torch.allclose(fwht(x), want)
    with pytest.raises(ValueError, match="power of two"):
        fwht(torch.zeros(2, 12))
    assert padded_dim(784) == 1024 and padded_dim(1024) == 1024 and padded_dim(1) == 1
    s = torch.randint(0, 2, (1024,), generator=gen(1)).double() * 2 - 1
    g = torch.randn(5, 784, dtype=torch.float64, generator=gen(2))
    y = rotate(g, s)
    assert y.shape == (5, 1024)
    assert torch.allclose(y.norm(dim=1), g.norm(dim=1))
    assert torch.allclose(unrotate(y, s, 784), g, atol=1e-12)


def _official_klevel_loop(grad, b, k, rand):
    """The official piece-by-piece loop, restated independently (later pieces overwrite
    boundary values; values outside [-b, b] fall in the outer pieces)."""
    interval = 2 * b / (k - 1)
    lower, lower_grad = -b, -k / 2
    votes = np.zeros_like(grad)
    for i in range(1, k):
        upper = lower + interval
        if i == 1:
            mask = grad <= upper
        elif i == k - 1:
            mask = grad >= lower
        else:
            mask = (grad <= upper) & (grad >= lower)
        prob = (grad[mask] - lower) / (upper - lower)
        out = np.full_like(prob, lower_grad)
        out[rand[mask] <= prob] = lower_grad + 1
        votes[mask] = out
        lower, lower_grad = upper, lower_grad + 1
    return votes


@pytest.mark.parametrize("k", [2, 4, 5])
def test_klevel_coded_matches_the_official_loop(k):
    c = 1e-5
    g = torch.randn(40, 300, dtype=torch.float64, generator=gen(3)) * 1.5e-5
    got = klevel_coded(g, k, c, gen(4))
    rand = torch.rand(g.shape, generator=gen(4), dtype=torch.float64).numpy()
    want = _official_klevel_loop(g.numpy(), c, k, rand)
    # the loop's boundary overwrites can differ only where g sits exactly on a boundary
    assert (got.numpy() == want).mean() == 1.0
    assert set(np.unique(got.numpy())) <= {-k / 2 + i for i in range(k)}


def test_klevel_coded_is_biased_and_saturates():
    z = klevel_coded(torch.zeros(200_000), 4, 1.0, gen(5))
    assert abs(z.mean().item() + 0.5) < 0.01  # zero -> -1 or 0: mean -1/2 (biased)
    assert set(z.unique().tolist()) == {-1.0, 0.0}
    assert klevel_coded(torch.full((1000,), -3.0), 4, 1.0, gen(6)).eq(-2).all()
    assert klevel_coded(torch.full((1000,), 3.0), 4, 1.0, gen(6)).eq(1).all()
    with pytest.raises(ValueError, match="levels"):
        klevel_coded(torch.zeros(3), 1, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        klevel_coded(torch.tensor([0.0, float("nan")]), 4, 1.0)


def test_klevel_unbiased_is_unbiased_on_adjacent_levels():
    u = torch.linspace(-1, 1, 41, dtype=torch.float64).repeat(20_000, 1)
    q = klevel_unbiased(u, 4, gen(7))
    levels = torch.tensor([-1.0, -1 / 3, 1 / 3, 1.0], dtype=torch.float64)
    assert torch.isclose(q.unsqueeze(-1), levels).any(-1).all()
    assert (q - u).abs().max() <= 2 / 3 + 1e-12  # always one of the two levels around u
    assert (q.mean(0) - u[0]).abs().max() < 0.01
    assert torch.allclose(klevel_unbiased(levels, 4, gen(8)), levels)  # levels map to themselves


def _d2p_votes(agg, g, ctx, seed):
    return agg.compress(g, ctx, gen(seed))


def test_d2pfed_coded_sensitivity_is_attained_and_charged_conservatively():
    agg = D2PFed(sigma=1.0, beta=0.5, c=1.0, levels=4)
    d = 50
    hi, lo = torch.full((1, d), 5.0), torch.full((1, d), -5.0)
    worst = l2(_d2p_votes(agg, hi, None, 0) - _d2p_votes(agg, lo, None, 0))
    assert worst == pytest.approx(agg.sensitivity(d, 10)) == pytest.approx(3 * math.sqrt(d))
    rng = gen(9)
    for seed in range(200):  # any two gradients, any randomness
        a, b = torch.randn(2, 1, d, generator=rng) * (seed % 5 + 0.1)
        assert l2(_d2p_votes(agg, a, None, seed) - _d2p_votes(agg, b, None, seed + 1)) \
            <= agg.sensitivity(d, 10) + 1e-9
    # the official ledger charges levels^2 d lambda / sigma^2: sensitivity levels sqrt(2d)
    assert agg.charged_sensitivity(d, 10) == pytest.approx(4 * math.sqrt(2 * d))
    assert agg.charged_sensitivity(d, 10) > agg.sensitivity(d, 10)
    assert agg.charge_is_sound(d, 10)  # over-charging is still a guarantee
    assert agg.describe(d, 10)["dp_ledgers"] == ["paper", "rdp", "pld"]


def test_d2pfed_paper_sensitivity_is_attained_by_a_point_mass():
    agg = D2PFed(sigma=1.0, beta=0.5, c=None, levels=4, variant="paper")
    d = 100
    ctx = agg.context(d, gen(10))
    assert ctx.signs.shape == (128,) and ctx.d == d
    e = torch.zeros(1, d)
    e[0, 7] = 1.0
    worst = l2(_d2p_votes(agg, e, ctx, 0) - _d2p_votes(agg, -e, ctx, 0))
    assert worst == pytest.approx(agg.sensitivity(d, 10)) == pytest.approx(2 * math.sqrt(128))
    rng = gen(11)
    for seed in range(200):
        a, b = torch.randn(2, 1, d, generator=rng)
        assert l2(_d2p_votes(agg, a, ctx, seed) - _d2p_votes(agg, b, ctx, seed)) \
            <= agg.sensitivity(d, 10) + 1e-9
    assert agg.charged_sensitivity(d, 10) == agg.sensitivity(d, 10)
    assert agg.charge_is_sound(d, 10)  # equal charges are sound (>=, not >)


def test_d2pfed_paper_release_recovers_a_unanimous_direction():
    """Without noise, N teachers with the same gradient vote it back in the original basis:
    the rotated-back mean quantised vote is the normalised gradient in expectation."""
    agg = D2PFed(sigma=1e-9, beta=0.0, c=None, levels=16, variant="paper")
    d, n = 60, 400
    g = torch.zeros(1, n, d)
    g[..., :5] = torch.tensor([3.0, -2.0, 1.0, -1.0, 0.5])
    out, stat, noisy = Aggregator.__call__(agg, g, gen(12))
    assert stat.shape == (1, 64) and out.shape == (1, d)
    assert torch.equal(out[0, :5], torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0]))
    direction = noisy[0] / noisy[0].norm()
    assert torch.allclose(direction[:5], (g[0, 0, :5] / g[0, 0, :5].norm()).double(),
                          atol=0.05)


# ------------------------------------------------------------------------------ FetchSGD

def test_count_sketch_is_linear_and_exact_without_collisions():
    cs = CountSketch(40, rows=5, cols=100_000, seed=1)
    assert (cs.loads == 1).all()  # 40 coordinates in 100k buckets: no collision here
    v = torch.randn(3, 40, dtype=torch.float64, generator=gen(13))
    w = torch.randn(3, 40, dtype=torch.float64, generator=gen(14))
    assert torch.allclose(cs.sketch(v + w), cs.sketch(v) + cs.sketch(w))
    assert torch.allclose(cs.estimate(cs.sketch(v)), v)
    kept = cs.top_k(v, 4)
    assert (kept != 0).sum(1).eq(4).all()
    assert torch.equal(kept.abs().amax(1), v.abs().amax(1))
    with pytest.raises(ValueError, match="last axis"):
        cs.sketch(torch.zeros(3, 41))
    with pytest.raises(ValueError, match="k must be"):
        cs.top_k(v, 41)


def test_count_sketch_median_and_collisions():
    cs = CountSketch(300, rows=4, cols=50, seed=2)
    v = torch.zeros(1, 300, dtype=torch.float64)
    v[0, 0] = 10.0
    est = cs.estimate(cs.sketch(v))[0]
    assert est[0] == 10.0  # a lone heavy hitter is recovered exactly by the median
    rows = (cs.signs * cs.sketch(v)[0].gather(1, cs.buckets)).numpy()
    np.testing.assert_array_equal(est.numpy(), np.sort(rows, axis=0)[1])  # lower middle


def _sketch_matrix(cs):
    """S as a sparse (rows * cols) x d matrix."""
    from scipy.sparse import coo_matrix

    j = np.repeat(np.arange(cs.rows), cs.d)
    rows = j * cs.cols + cs.buckets.numpy().ravel()
    cols = np.tile(np.arange(cs.d), cs.rows)
    return coo_matrix((cs.signs.numpy().ravel(), (rows, cols)),
                      shape=(cs.rows * cs.cols, cs.d)).tocsr()


def _dense_gram(cs):
    S = _sketch_matrix(cs)
    return (S.T @ S).toarray()


@pytest.mark.parametrize("d,rows,cols", [(30, 4, 8), (200, 6, 60), (784, 20, 10_000)])
def test_gram_norm_is_the_largest_eigenvalue(d, rows, cols):
    cs = CountSketch(d, rows, cols, seed=3)
    lam = float(np.linalg.eigvalsh(_dense_gram(cs))[-1])
    g = cs.gram_norm()
    assert lam <= g  # always an upper bound
    assert g <= lam * (1 + 1e-8)  # exact on these (blocks <= 4096, below the load cap)
    assert rows <= g <= cs.loads.sum()


def test_gram_norm_fallback_on_a_crowded_sketch_is_an_upper_bound():
    """d = 6000 in 3 x 1500 buckets: one block > 4096 coordinates -> Gershgorin (or the load
    cap), checked against Lanczos."""
    from scipy.sparse.linalg import eigsh

    cs = CountSketch(6000, 3, 1500, seed=4)
    S = _sketch_matrix(cs)
    lam = float(eigsh((S.T @ S).astype(np.float64), k=1, which="LA",
                      return_eigenvectors=False)[0])
    g = cs.gram_norm()
    assert g >= lam * (1 - 1e-9)
    assert g <= cs.loads.sum()


def test_fetchsgd_sound_sensitivity_holds_against_adversarial_teachers():
    k, d, rows, cols = 6, 120, 5, 40  # a crowded sketch: many collisions
    agg = FetchSGD(k=k, sigma=1.0, beta=0.1, c=None, rows=rows, cols=cols, variant="sound")
    cs = agg.sketcher(d)
    bound = agg.sensitivity(d, 10)
    assert bound == pytest.approx(2 * math.sqrt(k * cs.gram_norm()))
    gram = _dense_gram(cs)
    _, vecs = np.linalg.eigh(gram)
    top = vecs[:, -1]
    seen = []
    # adversary 1: flip k signs aligned with the top eigenvector of S^T S
    idx = np.argsort(-np.abs(top))[:k]
    v = np.zeros(d)
    v[idx] = np.sign(top[idx])
    seen.append(l2(cs.sketch(torch.from_numpy(2 * v))))
    # adversary 2: greedy -- k coordinates crowded into the most loaded buckets, aligned signs
    for j in range(rows):
        b = np.bincount(cs.buckets[j].numpy(), minlength=cols).argmax()
        members = np.flatnonzero(cs.buckets[j].numpy() == b)[:k]
        v = np.zeros(d)
        v[members] = cs.signs[j].numpy()[members]
        seen.append(l2(cs.sketch(torch.from_numpy(2 * v))))
    # random teachers: two independent top-k sign vectors
    g = gen(15)
    for _ in range(300):
        a, b2 = torch.zeros(2, d, dtype=torch.float64)
        for v in (a, b2):
            v[torch.randperm(d, generator=g)[:k]] = (
                torch.randint(0, 2, (k,), generator=g).double() * 2 - 1)
        seen.append(l2(cs.sketch(a - b2)))
    assert max(seen) <= bound + 1e-9
    assert max(seen) >= 2 * math.sqrt(k * rows)  # a flip costs at least the r copies
    # through the aggregator itself: one teacher's gradient replaced, everyone's randomness
    # fixed -> the sketch of the statistic moves by at most the bound
    grads = torch.randn(1, 8, d, dtype=torch.float64, generator=gen(20))
    other = grads.clone()
    other[0, 3] = torch.randn(d, dtype=torch.float64, generator=gen(21)) * 5
    for seed in range(50):
        a = agg.partial(grads, None, gen(seed))
        b = agg.partial(other, None, gen(seed))
        assert l2(cs.sketch(a) - cs.sketch(b)) <= bound + 1e-9


def test_fetchsgd_coded_charge_is_not_a_valid_bound():
    """As coded, the top-k is chosen on the clean sketch: one teacher can swap which k
    coordinates are released, moving the pre-noise output far beyond the charged 2 sqrt(k)."""
    k, d, n = 4, 30, 101
    agg = FetchSGD(k=k, sigma=1.0, beta=0.1, c=None, rows=3, cols=100_000, variant="coded")
    cs = agg.sketcher(d)
    assert (cs.loads == 1).all()
    # vote sums (dense +-1 votes of n teachers): coordinates 0..3 at 51, 4..7 at 49
    s = torch.full((1, d), 1.0, dtype=torch.float64)
    s[0, :4], s[0, 4:8] = 51.0, 49.0
    s2 = s.clone()  # one teacher flips its votes on coordinates 0..7: -2 and +2
    s2[0, :4] -= 2.0
    s2[0, 4:8] += 2.0
    f = cs.top_k(cs.estimate(cs.sketch(s)), k)
    f2 = cs.top_k(cs.estimate(cs.sketch(s2)), k)
    change = l2(f - f2)
    assert change > 10 * agg.charged_sensitivity(d, n)  # ~ sqrt(2k) * 50 vs 2 sqrt(k) = 4
    assert change <= agg.sensitivity(d, n)  # the bound that does hold: 2 sqrt(k) N L
    acc = CompressorAccountant(agg.noise_multiplier(d, n, charged=True),
                               agg.noise_multiplier(d, n), 1e-5)
    assert not acc.sound_charge and not agg.charge_is_sound(d, n)
    assert "NOT a DP guarantee" in agg.describe(d, n)["dp_guarantee"]
    assert agg.describe(d, n)["dp_ledgers"] == ["rdp", "pld"]  # paper left out
    assert agg.describe(d, n, ("paper", "rdp"))["dp_ledgers"] == ["rdp"]
    # it names only the sound ledgers the record holds (pld is skipped at a small z)
    assert agg.describe(d, n, ("paper", "rdp"))["dp_guarantee"].startswith(
        "epsilon under rdp only: the paper ledger")
    assert agg.describe(d, n)["dp_guarantee"].startswith("epsilon under rdp, pld only")


def test_noise_goes_where_each_variant_says():
    """fetchsgd-sound noises every sketch cell before un-sketching; fetchsgd-coded un-sketches
    the clean sketch and noises d coordinates; d2pfed-paper noises D rotated coordinates."""
    stat = torch.randn(2, 50, dtype=torch.float64, generator=gen(30)) * 10
    sound = FetchSGD(k=5, sigma=3.0, beta=0.1, rows=4, cols=64, variant="sound")
    cs = sound.sketcher(50)
    out, noisy = sound.release(stat, None, 7, gen(31))
    table = cs.sketch(stat)
    noise = torch.randn(table.shape, generator=gen(31), dtype=torch.float64)
    want = cs.top_k(cs.estimate(table + 3.0 * noise), 5)
    assert torch.equal(noisy, want)
    assert torch.equal(out, threshold_votes(want, 0.1, 7).float())
    coded = FetchSGD(k=5, sigma=3.0, beta=0.1, rows=4, cols=64, variant="coded")
    _, noisy_c = coded.release(stat, None, 7, gen(31))
    noise_d = torch.randn(stat.shape, generator=gen(31), dtype=torch.float64)
    assert torch.equal(noisy_c, cs.top_k(cs.estimate(table), 5) + 3.0 * noise_d)
    # the sound variant's estimate noise is a median of r cell noises: far below sigma
    zero = torch.zeros(200, 50, dtype=torch.float64)
    big = FetchSGD(k=50, sigma=1.0, beta=0.1, rows=9, cols=64, variant="sound")
    est = big.release(zero, None, 7, gen(32))[1]
    assert 0.3 < est.std().item() < 0.6  # sd of a median of 9 N(0, 1): about 0.41
    d2p = D2PFed(sigma=2.0, beta=0.1, c=None, variant="paper")
    ctx = d2p.context(50, gen(33))
    stat_r = torch.randn(2, 64, dtype=torch.float64, generator=gen(34))
    _, noisy_r = d2p.release(stat_r, ctx, 7, gen(35))
    noise_r = torch.randn(2, 64, generator=gen(35), dtype=torch.float64)
    assert torch.allclose(noisy_r, unrotate(stat_r + 2.0 * noise_r, ctx.signs, 50))


def test_official_charges_equal_the_official_rdp_line():
    """The paper ledger's per-query RDP is the data-independent line of the official
    rdp_gaussian(logq, sigma_eff, orders) = orders / sigma_eff^2, with sigma_eff =
    sigma / sqrt(levels^2 d) (--klevelsgd) and sigma / sqrt(2k) (--sketchsgd)."""
    from datalens_lib.privacy.accountant import PAPER_ORDERS

    d, n, sigma, k = 784, 4000, 5000.0, 200
    for agg, sigma_eff in ((D2PFed(sigma=sigma, beta=0.7), sigma / math.sqrt(16 * d)),
                           (FetchSGD(k=k, sigma=sigma, beta=0.7), sigma / math.sqrt(2 * k))):
        z = agg.noise_multiplier(d, n, charged=True)
        ours = PAPER_ORDERS / (2 * z**2)  # Gaussian RDP lambda / (2 z^2)
        np.testing.assert_allclose(ours, PAPER_ORDERS / sigma_eff**2, rtol=1e-12)


def test_stopping_uses_the_sound_multiplier_under_rdp(tmp_path):
    from datalens_lib.datalens import DataLens, expected_steps

    cfg = load_config("mnist-eps1", "paper", aggregator="fetchsgd-coded")
    assert expected_steps(cfg, 15, 784) == 86
    assert expected_steps(cfg.with_overrides(conversion="rdp"), 15, 784) == 0
    from conftest import real_dataset_dir

    smoke = load_config("mnist-eps1", "smoke", aggregator="fetchsgd-coded", conversion="rdp")
    with pytest.raises(ValueError, match="below what one generator step costs"):
        DataLens(smoke, data_dir=real_dataset_dir("mnist"), device="cpu")
    with pytest.warns(UserWarning, match="no meaningful DP guarantee"):
        with pytest.raises(ValueError):  # the warning comes first, then the budget check
            DataLens(smoke.with_overrides(conversion="paper", sigma=1.0),
                     data_dir=real_dataset_dir("mnist"), device="cpu")


def test_fetchsgd_votes_dense_as_coded_and_topk_when_sound():
    g = torch.randn(2, 7, 50, generator=gen(16))
    coded = FetchSGD(k=5, sigma=1.0, beta=0.1, variant="coded").partial(g, None, gen(0))
    sound = FetchSGD(k=5, sigma=1.0, beta=0.1, variant="sound").partial(g, None, gen(0))
    assert coded.abs().remainder(2).eq(1).all()  # 7 teachers vote +-1 on every coordinate
    assert sound.abs().sum(1).le(7 * 5).all()  # k votes per teacher
    assert sound.abs().remainder(2).eq(0).any()  # coordinates with an even number of votes
    out, noisy = FetchSGD(k=5, sigma=1e-9, beta=0.1, variant="sound").release(
        sound, None, 7, gen(1))
    assert ((out != 0).sum(1) <= 5).all() and out.shape == (2, 50)


# ------------------------------------------------------------------------ the interface

def test_threshold_and_every_aggregator_through_one_interface():
    assert torch.equal(threshold_votes(torch.tensor([-3.0, -2.0, 0.0, 2.0, 3.0]), 0.5, 4),
                       torch.tensor([-1, -1, 0, 1, 1], dtype=torch.int8))
    grads = torch.randn(3, 9, 64, generator=gen(17)) * 1e-5
    cfg = load_config("mnist-eps1", "smoke")
    for name in AGGREGATORS:
        agg = make_aggregator(cfg.with_overrides(aggregator=name))
        assert agg.name == name
        ctx = agg.context(64, gen(0))
        whole = agg.partial(grads, ctx, gen(1))
        assert whole.shape[0] == 3
        out, noisy = agg.release(whole, ctx, 9, gen(2))
        assert out.shape == (3, 64) and set(out.unique().tolist()) <= {-1.0, 0.0, 1.0}
        assert agg.sensitivity(64, 9) > 0 and agg.noise_multiplier(64, 9) > 0
    assert isinstance(make_aggregator(cfg), TopAgg)
    with pytest.raises(ValueError, match="aggregator"):
        cfg.with_overrides(aggregator="qsgd")
    with pytest.raises(ValueError, match="ablations are TopAgg's"):
        cfg.with_overrides(aggregator="fetchsgd-sound", threshold=False)
    with pytest.raises(ValueError, match="levels"):
        cfg.with_overrides(aggregator="d2pfed-coded", levels=1)
    with pytest.raises(ValueError, match="A/B switch for TopAgg"):
        cfg.with_overrides(aggregator="d2pfed-coded", adam_slots=5)
    with pytest.raises(ValueError, match="clipping constant"):
        D2PFed(sigma=1.0, beta=0.1, c=None, variant="coded")


def test_each_aggregators_dp_event_is_its_sound_ledger():
    """Aggregator.dp_event (the interface's dp_accounting event, for reuse outside DataLens)
    composes to the same ε as the sound ledger training records (CompressorAccountant's rdp),
    and is built on the sound sensitivity, not the official charge."""
    from dp_accounting import rdp

    from datalens_lib.datalens import compressor_accountant
    from datalens_lib.privacy.gaussian import RDP_ORDERS

    cfg = load_config("mnist-eps1", "paper")
    d, n, q = 784, cfg.teachers, 300
    for name in AGGREGATORS:
        agg = make_aggregator(cfg.with_overrides(aggregator=name))
        acc = rdp.RdpAccountant(orders=list(RDP_ORDERS))
        acc.compose(agg.dp_event(d, n, q))
        eps = acc.get_epsilon(cfg.delta)
        assert eps == pytest.approx(gaussian_epsilon(q, agg.noise_multiplier(d, n), cfg.delta,
                                                     "rdp"), rel=1e-9), name
        if name == "topagg":
            ledger = CompressorAccountant(agg.noise_multiplier(d, n, charged=True),
                                          agg.noise_multiplier(d, n), cfg.delta)
        else:  # the ledger training keeps for this aggregator
            ledger = compressor_accountant(cfg.with_overrides(aggregator=name), d)
        ledger.add_queries(q)
        assert eps == pytest.approx(ledger.epsilon("rdp"), rel=1e-9), name
        if name == "fetchsgd-coded":  # its charge is not a bound: the event must not use it
            charged = gaussian_epsilon(q, agg.noise_multiplier(d, n, charged=True), cfg.delta,
                                       "rdp")
            assert eps > 100 * charged


def test_compressor_accountant_ledgers():
    z_charged, z_sound = 5000 / (4 * math.sqrt(2 * 784)), 5000 / (3 * 28)
    acc = CompressorAccountant(z_charged, z_sound, 1e-5)
    # the official D2P-Fed charge at sigma 5000, d 784, 4 levels: 41 queries fit eps = 1
    assert acc.max_queries(1.0) == 41
    assert acc.sound_charge and acc.max_queries(1.0, "rdp") > 41
    acc.add_queries(41)
    assert acc.epsilon("paper") == pytest.approx(gaussian_epsilon(41, z_charged, 1e-5))
    assert acc.epsilon("rdp") == pytest.approx(gaussian_epsilon(41, z_sound, 1e-5, "rdp"))
    assert acc.epsilon_if(1) > 1.0 >= acc.epsilon()
    assert set(acc.ledgers()) == {"paper", "rdp", "pld"}
    back = CompressorAccountant.from_state_dict(acc.state_dict())
    assert back.queries == 41 and back.epsilon() == acc.epsilon()
    tiny = CompressorAccountant(1.0, PLD_MIN_Z / 2, 1e-5)
    tiny.add_queries(3)
    assert set(tiny.ledgers()) == {"paper", "rdp"}  # PLD skipped at a tiny multiplier
    assert tiny.event().to_named_tuple() is not None


@pytest.mark.slow
def test_datalens_trains_with_every_compressor(tmp_path):
    """One generator step per compressor through the whole harness: ledgers, record, samples."""
    from conftest import real_dataset_dir

    from datalens_lib.datalens import DataLensTrainer

    mnist = real_dataset_dir("mnist")
    for name in AGGREGATORS[1:]:
        cfg = load_config("mnist-eps1", "smoke", n_samples=60, aggregator=name, epsilon=1e4,
                          max_steps=1, sketch_cols=2000)
        rec = DataLensTrainer(cfg, tmp_path / name, data_dir=mnist, progress=False,
                              device="cpu", profile="smoke").run()
        assert rec["status"] == "complete" and rec["steps"] == 1 and rec["queries"] == 30
        priv = rec["privacy"]
        assert priv["mechanism"] == name and priv["z_sound"] > 0
        assert "data_dependent" not in rec["epsilon"]
        assert rec["epsilon"]["paper"] > 0 and rec["epsilon"]["rdp"] > 0
        # the paper ledger is a guarantee only where its charge is at least the sound one
        assert priv["dp_ledgers"] == (["rdp", "pld"] if name == "fetchsgd-coded" else
                                      ["paper", "rdp", "pld"])
        if name == "fetchsgd-coded":
            assert "NOT a DP guarantee" in priv["dp_guarantee"]
            assert rec["epsilon"]["rdp"] > 10 * rec["epsilon"]["paper"]  # (10 teachers)
        if name == "d2pfed-coded":  # the official charge over-charges: paper > rdp
            assert rec["epsilon"]["paper"] > rec["epsilon"]["rdp"]
        x = np.load(tmp_path / name / "samples.npz")["x"]
        assert x.shape[0] == 60 and np.isfinite(x).all()


def test_book_ledgers_reproduce_the_official_step_counts():
    from datalens_lib import book

    require_datasets("mnist")  # the query batch is a share of the training set

    t = book.compression_ledgers("mnist-eps1").set_index("aggregator")
    assert list(t.index) == list(AGGREGATORS)
    assert t.loc["topagg", "steps"] == 86  # the committed paper-setting runs' 86 steps
    assert t.loc["d2pfed-coded", "steps"] == 2  # 41 queries (notes: "~2 generator steps")
    assert t.loc["fetchsgd-coded", "steps"] == 86  # charged as TopAgg
    assert not t.loc["fetchsgd-coded", "paper_ledger_is_dp"]
    assert t.loc["fetchsgd-coded", "epsilon_sound_rdp"] > 1e5
    assert t[t.index != "fetchsgd-coded"]["paper_ledger_is_dp"].all()
    assert (t["epsilon_paper_ledger"] <= 1.0).all()
    assert t.loc["d2pfed-paper", "sensitivity"] == 64.0  # 2 sqrt(1024)


def test_smoke_sigma_gives_every_aggregator_three_steps():
    from datalens_lib import book
    from datalens_lib.datalens import expected_steps

    for name in AGGREGATORS:
        cfg = load_config("mnist-eps1", "smoke", **book.smoke_aggregator_overrides(
            "mnist-eps1", name))
        assert cfg.aggregator == name
        assert expected_steps(cfg, 30, 784) == 3, name
