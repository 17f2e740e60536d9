import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp
from scipy.stats import norm

from datalens_lib.privacy import (
    PAPER_ORDERS,
    TopAggAccountant,
    data_dependent_rdp,
    noise_multiplier,
    outcome_log_probs,
    rdp_to_epsilon_paper,
    topagg_epsilon,
    topagg_log_q_tilde,
    topagg_max_queries,
    topagg_rdp,
    topagg_sigma_for_queries,
)


@pytest.mark.parametrize("k,sigma", [(200, 5000.0), (350, 900.0), (1, 3.0)])
def test_closed_form_equals_dp_accounting_rdp_curve(k, sigma):
    orders = [1.5, 2.0, 7.0, 32.0, 199.0]
    acc = rdp.RdpAccountant(orders=orders)
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier(k, sigma)), 77)
    # dp-accounting exposes the composed curve only as the private `_rdp`
    np.testing.assert_allclose(acc._rdp, 77 * topagg_rdp(orders, k, sigma), rtol=1e-12)


def test_paper_mnist_eps1_budget_is_1300_queries():
    eps = [topagg_epsilon(t, 200, 5000.0, 1e-5) for t in (1300, 1301)]
    assert eps[0] <= 1.0 < eps[1]
    assert topagg_max_queries(1.0, 200, 5000.0, 1e-5) == 1300
    # the official run stops after 86 generator steps of 15 queries
    assert 86 * 15 <= 1300 < 87 * 15


def test_paper_conversion_by_hand():
    t, k, s, d = 500, 300, 800.0, 1e-5
    by_hand = min(t * 2 * k * lam / s**2 + math.log(1 / d) / (lam - 1) for lam in PAPER_ORDERS)
    assert topagg_epsilon(t, k, s, d) == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("k,sigma,eps", [
    (200, 5000.0, 1.0), pytest.param(300, 800.0, 10.0, marks=pytest.mark.slow),
    (700, 9000.0, 1.0), (200, 5000.0, 0.2)])
def test_conversions_ordered(k, sigma, eps):
    t = {c: topagg_max_queries(eps, k, sigma, 1e-5, c) for c in ("paper", "rdp", "pld")}
    assert t["pld"] > t["rdp"] > t["paper"] > 0
    for c, n in t.items():
        assert topagg_epsilon(n, k, sigma, 1e-5, c) <= eps < topagg_epsilon(n + 1, k, sigma,
                                                                            1e-5, c)


def test_epsilon_monotone_and_zero_queries():
    e = [topagg_epsilon(t, 200, 5000.0, 1e-5) for t in range(0, 2000, 97)]
    assert e[0] == 0.0 and all(a < b for a, b in zip(e, e[1:], strict=False))


@pytest.mark.parametrize("conversion", ["paper", "rdp", "pld"])
def test_sigma_for_queries(conversion):
    s = topagg_sigma_for_queries(1290, 1.0, 200, 1e-5, conversion)
    assert topagg_epsilon(1290, 200, s, 1e-5, conversion) <= 1.0
    assert topagg_epsilon(1290, 200, s * (1 - 1e-4), 1e-5, conversion) > 1.0


@pytest.mark.parametrize("kwargs,match", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"),
    (dict(delta=0.0), "delta"), (dict(delta=1.0), "delta"), (dict(delta=1.5), "delta"),
    (dict(sigma=0.0), "sigma"), (dict(sigma=-3.0), "sigma"), (dict(sigma=math.nan), "sigma"),
    (dict(k=0), "k"), (dict(k=2.5), "k"), (dict(k=True), "k"),
    (dict(conversion="gdp"), "conversion"),
])
def test_bad_inputs(kwargs, match):
    args = dict(epsilon=1.0, k=200, sigma=5000.0, delta=1e-5, conversion="paper") | kwargs
    with pytest.raises(ValueError, match=match):
        topagg_max_queries(**args)
    if "epsilon" not in kwargs:
        with pytest.raises(ValueError, match=match):
            topagg_epsilon(10, args["k"], args["sigma"], args["delta"], args["conversion"])


@pytest.mark.parametrize("t", [-1, 1.5])
def test_bad_query_count(t):
    with pytest.raises(ValueError, match="queries"):
        topagg_epsilon(t, 200, 5000.0, 1e-5)


# ---------------------------------------------------------------- data-dependent


def test_outcome_probabilities_exact():
    f = np.array([-700.0, 0.0, 300.0, 2900.0])
    lp = np.exp(outcome_log_probs(f, 500.0, 400.0))
    np.testing.assert_allclose(lp.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(lp[:, 0], norm.sf(400.0, loc=f, scale=500.0), rtol=1e-12)
    np.testing.assert_allclose(lp[:, 1], norm.cdf(-400.0, loc=f, scale=500.0), rtol=1e-12)


def test_q_tilde_matches_monte_carlo():
    rng = np.random.default_rng(0)
    f = np.array([0.0, 50.0, 120.0, -90.0, 10.0])
    sigma, beta, n = 30.0, 0.2, 400  # threshold 80
    noisy = f + sigma * rng.standard_normal((200_000, f.size))
    out = (noisy >= 80).astype(int) - (noisy <= -80).astype(int)
    mode = np.array([0, 0, 1, -1, 0])
    q_mc = np.mean(np.any(out != mode, axis=1))
    q = math.exp(float(topagg_log_q_tilde(f, sigma, beta, n)))
    assert abs(q - q_mc) < 5 * math.sqrt(q_mc * (1 - q_mc) / 200_000)


def test_q_tilde_is_one_for_paper_mnist_setting():
    rng = np.random.default_rng(0)
    votes = rng.integers(-300, 300, size=(15, 784))
    lq = topagg_log_q_tilde(votes, 5000.0, 0.7, 4000)
    assert lq.shape == (15,) and np.all(np.isfinite(lq)) and np.all(lq > -1e-6)
    dd = data_dependent_rdp(float(lq[0]), PAPER_ORDERS, 200, 5000.0)
    np.testing.assert_array_equal(dd, topagg_rdp(PAPER_ORDERS, 200, 5000.0))


def test_q_tilde_high_dimension_no_underflow():
    votes = np.full((2, 12288), 3000.0)
    votes[1] = 0.0
    lq = topagg_log_q_tilde(votes, 300.0, 0.5, 4000)  # threshold 2000
    assert np.all(np.isfinite(lq))
    # zero votes: a coordinate leaves 0 only if noise crosses +-2000 (6.7 sigma): q~ is tiny
    assert lq[1] == pytest.approx(math.log(12288 * 2 * norm.cdf(-2000 / 300)), rel=1e-4)
    # votes 3000: each coordinate misses +1 with probability Phi(-3.33): q~ is close to 1
    log_keep = 12288 * math.log1p(-norm.cdf(-1000 / 300))
    assert lq[0] == pytest.approx(math.log(-math.expm1(log_keep)), rel=1e-6)


def _theorem6_direct(q, lam, mu1, mu2, e1, e2):
    a = (1 - q) / (1 - (q * math.exp(e2)) ** ((mu2 - 1) / mu2))
    b = math.exp(e1) / q ** (1 / (mu1 - 1))
    return math.log((1 - q) * a ** (lam - 1) + q * b ** (lam - 1)) / (lam - 1)


def test_data_dependent_bound_matches_theorem_and_never_looser():
    k, sigma = 1, 3.0
    var = sigma**2 / (2 * k)
    orders = np.array([2.0, 3.0, 5.0])
    independent = topagg_rdp(orders, k, sigma)
    for log_q in (-0.01, -1.0, -5.0, -20.0, -60.0):
        dd = data_dependent_rdp(log_q, orders, k, sigma)
        assert np.all(dd <= independent)
        mu2 = math.sqrt(var * -log_q)
        mu1 = mu2 + 1
        if mu2 > 1 and -log_q > mu2 / var:
            direct = [min(_theorem6_direct(math.exp(log_q), lam, mu1, mu2, mu1 / var,
                                           mu2 / var), lam / var) if lam <= mu1
                      else lam / var for lam in orders]
            np.testing.assert_allclose(dd, direct, rtol=1e-6, atol=1e-12)
    assert np.all(data_dependent_rdp(-60.0, orders, k, sigma) < independent)


def test_data_dependent_rejects_positive_log_q():
    with pytest.raises(ValueError, match="log q"):
        data_dependent_rdp(0.1, PAPER_ORDERS, 200, 5000.0)


# ---------------------------------------------------------------- running accountant


def test_accountant_tracks_queries_and_roundtrips():
    acc = TopAggAccountant(200, 5000.0, 1e-5)
    acc.add_queries(1000)
    rng = np.random.default_rng(0)
    acc.add_votes(rng.integers(-300, 300, size=(15, 784)), beta=0.7, n_teachers=4000)
    assert acc.queries == 1015
    assert acc.epsilon() == pytest.approx(topagg_epsilon(1015, 200, 5000.0, 1e-5))
    assert acc.data_dependent_epsilon() == pytest.approx(acc.epsilon(), rel=1e-9)
    assert acc.epsilon_if(285) <= 1.0 < acc.epsilon_if(286)
    clone = TopAggAccountant.from_state_dict(acc.state_dict())
    assert clone.epsilon("rdp") == acc.epsilon("rdp")


def test_accountant_data_dependent_tighter_with_consensus():
    acc = TopAggAccountant(1, 3.0, 1e-5)
    votes = np.zeros((5, 4))
    votes[:, 0] = 100.0  # all 100 teachers agree on coordinate 0, far above the threshold
    acc.add_votes(votes, beta=0.5, n_teachers=100)
    assert acc.data_dependent_epsilon() < acc.epsilon()


def test_paper_conversion_helper_validates_delta():
    with pytest.raises(ValueError, match="delta"):
        rdp_to_epsilon_paper(np.ones(3), [2, 3, 4], 0.0)


# ---------------------------------------------------------------- pinned edge cases


def test_max_queries_is_zero_when_not_one_query_fits():
    one = topagg_epsilon(1, 200, 5000.0, 1e-5)
    assert topagg_max_queries(one * 0.99, 200, 5000.0, 1e-5) == 0
    assert topagg_max_queries(one, 200, 5000.0, 1e-5) == 1
    for conversion in ("rdp", "pld"):
        e1 = topagg_epsilon(1, 200, 5000.0, 1e-5, conversion)
        assert topagg_max_queries(e1 * 0.99, 200, 5000.0, 1e-5, conversion) == 0


@pytest.mark.parametrize("t", [2, 3, 5, 64, 1000])
def test_max_queries_is_exact_at_every_size(t):
    """eps(T) <= target < eps(T + 1) for a target set between eps(t) and eps(t + 1)."""
    target = (topagg_epsilon(t, 50, 400.0, 1e-5) + topagg_epsilon(t + 1, 50, 400.0, 1e-5)) / 2
    assert topagg_max_queries(target, 50, 400.0, 1e-5) == t


def test_max_queries_refuses_an_absurd_budget():
    with pytest.raises(ValueError, match="queries fit the budget"):
        topagg_max_queries(1e9, 1, 1e12, 1e-5)


def test_epsilon_of_one_query_by_hand_for_each_conversion():
    k, s, d = 200, 5000.0, 1e-5
    mult = s / (2 * math.sqrt(k))
    assert noise_multiplier(k, s) == pytest.approx(mult, rel=1e-15)
    orders = [1.0 + x / 20.0 for x in range(1, 100)] + list(range(6, 200))
    acc = rdp.RdpAccountant(orders=orders)
    acc.compose(dp_accounting.GaussianDpEvent(mult), 7)
    assert topagg_epsilon(7, k, s, d, "rdp") <= acc.get_epsilon(d) + 1e-12
    pld_acc = dp_accounting.pld.PLDAccountant()
    pld_acc.compose(dp_accounting.GaussianDpEvent(mult), 7)
    assert topagg_epsilon(7, k, s, d, "pld") == pytest.approx(pld_acc.get_epsilon(d), rel=1e-9)
    # the paper conversion picks the best order of the official grid
    eps, order = rdp_to_epsilon_paper(7 * topagg_rdp(PAPER_ORDERS, k, s), PAPER_ORDERS, d)
    assert order in PAPER_ORDERS and eps == topagg_epsilon(7, k, s, d)
    assert topagg_rdp([2.0], k, s)[0] == pytest.approx(2 * k * 2 / s**2, rel=1e-15)
    with pytest.raises(ValueError, match="> 1"):
        topagg_rdp([1.0], k, s)


def test_sigma_for_queries_bad_inputs_and_tolerance():
    s = topagg_sigma_for_queries(100, 1.0, 50, 1e-5, "paper", rtol=1e-3)
    assert topagg_epsilon(100, 50, s, 1e-5) <= 1.0
    assert topagg_epsilon(100, 50, s * (1 - 2e-3), 1e-5) > 1.0
    for kwargs, match in ((dict(queries=0), "queries"), (dict(epsilon=0.0), "epsilon"),
                          (dict(rtol=0.0), "rtol"), (dict(k=0), "k"),
                          (dict(delta=1.0), "delta"), (dict(conversion="x"), "conversion")):
        args = dict(queries=100, epsilon=1.0, k=50, delta=1e-5) | kwargs
        with pytest.raises(ValueError, match=match):
            topagg_sigma_for_queries(**args)


def test_ledger_mixes_plain_and_vote_queries():
    """Queries recorded without votes are charged the data-independent RDP in the
    data-dependent total; with none recorded at all, both ledgers are zero."""
    acc = TopAggAccountant(1, 3.0, 1e-5)
    assert acc.epsilon() == 0.0 and acc.data_dependent_epsilon() == 0.0
    acc.add_queries(4)
    assert acc.queries == 4 and acc.dependent_queries == 0
    # no votes recorded: the data-dependent total is the data-independent one
    assert acc.data_dependent_epsilon() == pytest.approx(acc.epsilon(), rel=1e-12)
    votes = np.zeros((3, 4))
    votes[:, 0] = 100.0
    log_q = acc.add_votes(votes, beta=0.5, n_teachers=100)
    assert log_q.shape == (3,) and acc.queries == 7 and acc.dependent_queries == 3
    by_hand = sum(data_dependent_rdp(float(lq), PAPER_ORDERS, 1, 3.0) for lq in log_q)
    by_hand = by_hand + 4 * topagg_rdp(PAPER_ORDERS, 1, 3.0)
    assert acc.data_dependent_epsilon() == pytest.approx(
        rdp_to_epsilon_paper(by_hand, PAPER_ORDERS, 1e-5)[0], rel=1e-12)
    assert acc.epsilon() == pytest.approx(topagg_epsilon(7, 1, 3.0, 1e-5), rel=1e-12)
    assert acc.epsilon_if(2, "rdp") == pytest.approx(topagg_epsilon(9, 1, 3.0, 1e-5, "rdp"))
    clone = TopAggAccountant.from_state_dict(acc.state_dict())
    assert (clone.queries, clone.dependent_queries, clone.k, clone.sigma, clone.delta) == (
        7, 3, 1, 3.0, 1e-5)
    np.testing.assert_array_equal(clone.dependent_rdp, acc.dependent_rdp)
    assert clone.data_dependent_epsilon() == acc.data_dependent_epsilon()
    with pytest.raises(ValueError, match="conversion"):
        acc.epsilon("gdp")
    with pytest.raises(ValueError, match="extra_queries"):
        acc.epsilon_if(-1)
    with pytest.raises(ValueError):
        acc.add_queries(-1)


def test_log_space_helpers_are_accurate_in_both_tails():
    """log(1 - e^x) near x = 0 and far from it, and log(Phi(b) - Phi(a)) deep in the upper
    tail (where Phi(a) and Phi(b) both round to 1)."""
    from datalens_lib.privacy.data_dependent import _log1mexp, _log_ndtr_diff

    x = np.array([-1e-20, -1e-8, -0.5, -math.log(2.0), -5.0, -50.0])
    expect = [math.log(1e-20), math.log(-math.expm1(-1e-8)), math.log(-math.expm1(-0.5)),
              math.log(0.5), math.log1p(-math.exp(-5.0)), math.log1p(-math.exp(-50.0))]
    np.testing.assert_allclose(_log1mexp(x), expect, rtol=1e-12)
    assert _log1mexp(np.array([0.0]))[0] == -np.inf
    a, b = np.array([40.0, -41.0, 0.3]), np.array([41.0, -40.0, 0.9])
    expect = [norm.logsf(40.0) + math.log1p(-math.exp(norm.logsf(41.0) - norm.logsf(40.0))),
              norm.logcdf(-40.0) + math.log1p(-math.exp(norm.logcdf(-41.0)
                                                        - norm.logcdf(-40.0))),
              math.log(norm.cdf(0.9) - norm.cdf(0.3))]
    np.testing.assert_allclose(_log_ndtr_diff(a, b), expect, rtol=1e-10)


def test_largest_within_allows_exactly_the_upper_limit():
    from datalens_lib.privacy.accountant import _largest_within

    assert _largest_within(lambda t: float(t), 2**39 + 5, upper_limit=2**40) == 2**39 + 5
    assert _largest_within(lambda t: float(t), 0.5, upper_limit=2**40) == 0
    with pytest.raises(ValueError, match="more than 1024 queries"):
        _largest_within(lambda t: float(t), 2000.0, upper_limit=2**10)


def test_delta_note_only_when_delta_is_not_below_one_over_n():
    from datalens_lib.privacy.accountant import delta_note

    assert delta_note(1e-5, 60_000) is None and delta_note(1e-5, 99_999) is None
    note = delta_note(1e-5, 162_770)  # CelebA's training set at the paper's delta
    assert note.startswith("delta = 1e-05 is not below 1/n = 6.14e-06 for these 162770")
    assert "about 1.6 records in all" in note
    assert delta_note(1e-5, 100_000) is not None  # delta = 1/n exactly: not below
    with pytest.raises(ValueError, match="n must be"):
        delta_note(1e-5, 0)


def test_data_independent_ledgers_drop_only_the_data_dependent_one():
    """The candidates for privacy.dp_ledgers keep the record's order and every key except the
    data-dependent ledger (a function of the clean votes)."""
    from datalens_lib.privacy import DATA_DEPENDENT, data_independent_ledgers

    eps = {"paper": 1.0, DATA_DEPENDENT: 0.3, "rdp": 0.9, "coupled_rdp": 5.0}
    assert data_independent_ledgers(eps) == ["paper", "rdp", "coupled_rdp"]
    assert data_independent_ledgers({DATA_DEPENDENT: 0.1}) == []
    assert DATA_DEPENDENT == "data_dependent"  # the key run.json records and notebooks read
