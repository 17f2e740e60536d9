import math

import pytest
import torch

from datalens_lib.aggregation import (
    TopAgg,
    noisy_threshold,
    topagg,
    topk_sto_sign,
    topk_sto_sign_sparse,
    vote_sum,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_values_and_exactly_k_per_teacher():
    g = torch.randn(3, 50, 100, generator=gen(1))
    out = topk_sto_sign(g, 7, c=0.5, generator=gen(2))
    assert out.shape == g.shape
    assert set(out.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert (out.ne(0).sum(-1) == 7).all()
    # the kept coordinates are the 7 largest in magnitude
    kept = out.ne(0)
    thresh = g.abs().topk(7, dim=-1).values[..., -1:]
    assert torch.equal(kept, g.abs() >= thresh)


def test_large_coordinates_get_deterministic_sign():
    g = torch.tensor([[[3.0, -2.0, 0.5, 0.0, -4.0]]])
    for norm in ("paper", "official"):
        for seed in range(20):
            out = topk_sto_sign(g, 3, c=1.0, generator=gen(seed), normalize=norm)
            assert out.tolist() == [[[1.0, -1.0, 0.0, 0.0, -1.0]]]


def test_stochastic_sign_is_unbiased():
    # one gradient, replicated over many "teachers": mean sign must equal g_hat
    d, n = 6, 40000
    g = torch.tensor([0.8, -0.3, 0.05, -0.6, 0.0, 1.0], dtype=torch.float64)
    c = 0.9
    g_hat = g.clamp(-c, c) / g.abs().max().clamp(max=c)  # paper Alg. 2 lines 3-4
    out = topk_sto_sign(g.expand(1, n, d).contiguous(), d, c=c, generator=gen(3))
    mean = out[0].mean(0)
    std = torch.sqrt((1 - g_hat**2) / n)
    assert torch.all((mean - g_hat).abs() <= 5 * std + 1e-12), (mean, g_hat)
    assert mean[1].item() < -0.2 and mean[5].item() == 1.0


def test_paper_and_official_normalisations_coincide():
    g = torch.randn(4, 30, 64, generator=gen(5)) * 1e-5
    for c in (1e-5, 3e-6, None):
        a = topk_sto_sign(g, 10, c, gen(9), normalize="paper")
        b = topk_sto_sign(g, 10, c, gen(9), normalize="official")
        assert torch.equal(a, b)


def test_plain_sign_without_stochastic():
    g = torch.randn(2, 5, 20, generator=gen(6))
    out = topk_sto_sign(g, 4, c=1e-3, generator=gen(0), stochastic=False)
    kept = out.ne(0)
    assert torch.equal(out[kept], torch.sign(g)[kept])


def _teacher_votes(grads, k, seed):
    idx, signs = topk_sto_sign_sparse(grads, k, 1e-5, gen(seed))
    return torch.zeros_like(grads).scatter_(-1, idx, signs)


@pytest.mark.parametrize("case", ["random", "ties", "zeros", "flip"])
def test_vote_sum_sensitivity_is_2_sqrt_k(case):
    k, n, d = 5, 8, 40
    torch.manual_seed(0)
    worst = 0.0
    for trial in range(30):
        grads = torch.randn(1, n, d, dtype=torch.float64) * 1e-5
        other = grads.clone()
        i = trial % n
        if case == "random":
            other[0, i] = torch.randn(d, dtype=torch.float64)
        elif case == "ties":
            other[0, i] = 1e-5  # every coordinate tied
        elif case == "zeros":
            other[0, i] = 0.0
        else:
            other[0, i] = -grads[0, i]
        a = _teacher_votes(grads, k, trial)
        b = _teacher_votes(other, k, 1000 + trial)
        assert torch.isfinite(b).all()
        assert (b[0, i].ne(0).sum() <= k)
        # vote sums differ only through teacher i
        diff = a.sum(1) - b.sum(1)
        assert torch.allclose(diff, a[:, i] - b[:, i])
        norm = diff.norm().item()
        assert norm <= 2 * math.sqrt(k) + 1e-12
        worst = max(worst, norm)
    if case == "flip":  # flipping every sign deterministically reaches the bound
        g = torch.zeros(1, 1, d, dtype=torch.float64)
        g[0, 0, :k] = 1.0
        a = topk_sto_sign(g, k, 1.0, gen(0))
        b = topk_sto_sign(-g, k, 1.0, gen(0))
        assert (a - b).norm().item() == pytest.approx(2 * math.sqrt(k))
    assert worst > 0


def test_vote_sum_chunks_add_up():
    g = torch.randn(3, 20, 50, generator=gen(7))
    full = vote_sum(g, 6, None, generator=None, stochastic=False)
    parts = vote_sum(g[:, :8], 6, None, stochastic=False) + vote_sum(g[:, 8:], 6, None,
                                                                      stochastic=False)
    assert torch.equal(full, parts)
    dense = topk_sto_sign(g, 6, None, stochastic=False)
    assert torch.equal(full, dense.sum(1)) and (dense.ne(0).sum(-1) == 6).all()


def test_topagg_output_thresholds_noisy_votes():
    g = torch.randn(5, 200, 30, generator=gen(8))
    r = topagg(g, k=10, sigma=3.0, beta=0.1, c=0.5, generator=gen(1))
    tau = 0.1 * 200
    expect = (r.noisy_votes >= tau).float() - (r.noisy_votes <= -tau).float()
    assert torch.equal(r.output, expect)
    assert r.votes.abs().sum(-1).le(200 * 10).all()
    assert r.output.shape == (5, 30)


def test_noise_has_std_sigma():
    votes = torch.zeros(20, 5000)
    out, noisy = noisy_threshold(votes, 7.0, 0.0, 10, gen(0), threshold=False)
    assert noisy.dtype == torch.float64 and torch.equal(out, noisy)
    assert abs(noisy.std().item() - 7.0) < 0.05 and abs(noisy.mean().item()) < 0.05


def test_same_seed_same_output_and_ablations():
    g = torch.randn(2, 40, 60, generator=gen(9))
    agg = TopAgg(k=8, sigma=2.0, beta=0.2, c=1.0)
    a, b = agg(g, gen(4)), agg(g, gen(4))
    assert torch.equal(a.output, b.output) and torch.equal(a.noisy_votes, b.noisy_votes)
    assert not torch.equal(agg(g, gen(5)).noisy_votes, a.noisy_votes)
    assert agg.l2_sensitivity == pytest.approx(2 * math.sqrt(8))
    assert agg.sensitivity(784, 10) == agg.l2_sensitivity
    no_topk = topagg(g, k=60, sigma=2.0, beta=0.2, c=1.0, generator=gen(0))
    assert topk_sto_sign(g, 60, 1.0, gen(0)).ne(0).all()  # k = d: every coordinate votes
    assert no_topk.output.shape == (2, 60)
    no_thresh = topagg(g, 8, 2.0, 0.2, 1.0, gen(0), threshold=False)
    assert torch.equal(no_thresh.output, no_thresh.noisy_votes)
    plain = topagg(g, 8, 2.0, 0.2, 1.0, gen(0), stochastic=False)
    assert torch.equal(plain.votes, vote_sum(g, 8, 1.0, stochastic=False))


@pytest.mark.parametrize("kwargs,match", [
    (dict(k=0), "k must be"), (dict(k=61), "k must be <="), (dict(sigma=0.0), "sigma"),
    (dict(beta=-0.1), "beta"), (dict(c=0.0), "c must"), (dict(normalize="l2"), "normalize"),
])
def test_bad_parameters(kwargs, match):
    g = torch.randn(2, 4, 60)
    args = dict(k=8, sigma=2.0, beta=0.2, c=1.0) | kwargs
    with pytest.raises(ValueError, match=match):
        topagg(g, **args)


def test_bad_gradients():
    with pytest.raises(ValueError, match=r"\[Q, N, d\]"):
        topagg(torch.randn(4, 60), 2, 1.0, 0.1, None)
    bad = torch.randn(1, 2, 10)
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        topagg(bad, 2, 1.0, 0.1, None)
    with pytest.raises(ValueError, match="floating"):
        topagg(torch.ones(1, 2, 10, dtype=torch.int64), 2, 1.0, 0.1, None)


def test_topagg_class_forwards_every_field_and_defaults():
    """TopAgg(...)(g) equals topagg(g, ...) field for field; each field changes the result (so
    none can be dropped); the function's defaults are stochastic signs, paper normalisation
    and thresholding."""
    g = torch.randn(3, 50, 40, generator=gen(11)) * 1e-3  # |g| ~ c: signs are random
    base = dict(k=6, sigma=2.0, beta=0.1, c=2e-3)
    # (normalize is left out: its two values are equal by construction, tested above)
    variants = [dict(), dict(c=None), dict(stochastic=False), dict(threshold=False)]
    outs = []
    for v in variants:
        p = base | v
        a = TopAgg(**p)(g, gen(2))
        b = topagg(g, generator=gen(2), **p)
        assert torch.equal(a.output, b.output) and torch.equal(a.votes, b.votes)
        outs.append(a)
    for i in range(len(outs)):
        for j in range(i + 1, len(outs)):
            assert not torch.equal(outs[i].votes, outs[j].votes) or not torch.equal(
                outs[i].output, outs[j].output), (variants[i], variants[j])
    d = topagg(g, 6, 2.0, 0.1, None, gen(3))
    explicit = topagg(g, 6, 2.0, 0.1, None, gen(3), normalize="paper", stochastic=True,
                      threshold=True)
    assert torch.equal(d.output, explicit.output) and torch.equal(d.votes, explicit.votes)
    # the generator drives both the signs and the noise: same seed, same release
    again = topagg(g, 6, 2.0, 0.1, None, gen(3))
    assert torch.equal(d.votes, again.votes) and torch.equal(d.noisy_votes, again.noisy_votes)
    assert not torch.equal(topagg(g, 6, 2.0, 0.1, None, gen(4)).votes, d.votes)
    dense = topk_sto_sign(g, 6, None, gen(3))
    assert torch.equal(dense, topk_sto_sign(g, 6, None, gen(3), normalize="paper",
                                            stochastic=True))
    assert torch.equal(vote_sum(g, 6, None, gen(3)), dense.sum(1))


def test_each_teacher_is_normalised_by_its_own_scale():
    """Alg. 2 normalises each teacher's gradient by its own max magnitude: a teacher with tiny
    gradients next to one with huge ones still votes with P[+1] = (1 + g / max|g|) / 2; an
    all-zero gradient votes +-1 with probability 1/2 each."""
    d, n = 4, 20000
    g_small = torch.tensor([1e-3, -5e-4, 2.5e-4, -1e-3], dtype=torch.float64)
    grads = g_small.expand(1, n, d).clone()
    grads[0, 0] = torch.tensor([100.0, -50.0, 3.0, 1.0])  # one teacher on another scale
    grads[0, 1] = 0.0
    out = topk_sto_sign(grads, d, None, gen(7))
    mean = out[0, 2:].mean(0)
    g_hat = g_small / g_small.abs().max()
    std = torch.sqrt((1 - g_hat**2) / (n - 2))
    assert torch.all((mean - g_hat).abs() <= 5 * std + 1e-12), (mean, g_hat)
    zeros = topk_sto_sign(torch.zeros(1, n, d, dtype=torch.float64), d, None, gen(8))
    assert set(zeros.unique().tolist()) == {-1.0, 1.0}
    assert abs(zeros.mean().item()) < 5 / math.sqrt(n * d)
