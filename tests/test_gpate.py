"""G-PATE's aggregator and ledger: histogram additivity, the sensitivities the ledger
assumes (checked against adversarial single-teacher changes), Confident-GNMax's answers, and
the Gaussian composition the ledger relies on."""

import math

import numpy as np
import pytest
import torch

from datalens_lib.aggregation.gpate import (
    back_project,
    confident_gnmax,
    projected_histogram,
    random_projection,
)
from datalens_lib.data.partition import shuffled_partition
from datalens_lib.privacy import topagg_epsilon
from datalens_lib.privacy.gaussian import (
    GaussianQueryAccountant,
    gaussian_epsilon,
    gpate_noise_multiplier,
)

S = 1e-4


def _setup(q=3, n=20, d=50, p=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    grads = torch.randn(q, n, d, generator=g) * 1e-3
    proj = random_projection(q, d, p, g)
    return grads, proj


def test_projection_entries_have_variance_one_over_p():
    proj = random_projection(4, 500, 10, torch.Generator().manual_seed(1))
    assert proj.shape == (4, 500, 10)
    assert proj.var().item() == pytest.approx(0.1, rel=0.05)
    # a fresh projection per query (module doc: P_j), not one shared by all
    assert not torch.allclose(proj[0], proj[1])


def test_histogram_counts_every_teacher_once_and_adds_over_chunks():
    grads, proj = _setup()
    full = projected_histogram(grads, proj, S, 10)
    assert full.shape == (3, 4, 10) and torch.all(full.sum(-1) == 20)
    parts = projected_histogram(grads[:, :7], proj, S, 10) + projected_histogram(
        grads[:, 7:], proj, S, 10)
    assert torch.equal(full, parts)
    # bins: clipped values land in the edge bins, +s in the last one
    edge = torch.zeros(1, 3, 2)
    pr = torch.eye(2).unsqueeze(0)
    edge[0, 0] = torch.tensor([-1.0, 1.0])  # far outside: clipped
    edge[0, 1] = torch.tensor([S, -S])
    edge[0, 2] = torch.tensor([0.0, 0.5 * S])
    h = projected_histogram(edge, pr, S, 10)
    assert h[0, 0, 0] == 1 and h[0, 0, 9] == 1 and h[0, 0, 5] == 1  # dim 0: -s, +s, 0
    assert h[0, 1, 9] == 1 and h[0, 1, 0] == 1 and h[0, 1, 7] == 1  # dim 1: +s, -s, s/2


@pytest.mark.parametrize("seed", range(5))
def test_one_teacher_changes_max_count_by_one_and_histogram_by_sqrt2(seed):
    """The sensitivities the ledger charges, against adversarial replacements of one
    teacher's gradient (clipped to either edge, zero, or another teacher's)."""
    grads, proj = _setup(seed=seed)
    base = projected_histogram(grads, proj, S, 10)
    for t in (0, 7, 19):
        for new in (torch.full_like(grads[:, t], 1.0), torch.full_like(grads[:, t], -1.0),
                    torch.zeros_like(grads[:, t]), grads[:, (t + 1) % 20], -grads[:, t]):
            other = grads.clone()
            other[:, t] = new
            h = projected_histogram(other, proj, S, 10)
            assert (h.max(-1).values - base.max(-1).values).abs().max() <= 1
            assert (h - base).pow(2).sum(-1).sqrt().max() <= math.sqrt(2) + 1e-12


def test_confident_gnmax_answers_the_winning_bin_centre_only_when_confident():
    counts = torch.zeros(1, 3, 10, dtype=torch.float64)
    counts[0, 0, 2] = 8  # 8 of 10 teachers agree: answered, centre of bin 2
    counts[0, 0, 7] = 2
    counts[0, 1, 4] = 4  # 4 of 10 below 0.5 N: not answered
    counts[0, 1, 5] = 3
    counts[0, 1, 6] = 3
    counts[0, 2, 9] = 6  # answered, last bin
    counts[0, 2, 0] = 4
    g = torch.Generator().manual_seed(0)
    ans, ok = confident_gnmax(counts, 10, 1e-9, 1e-9, 0.5, S, g)
    assert ok.tolist() == [[True, False, True]]
    assert ans[0, 0].item() == pytest.approx(-S + 2.5 * S / 5)
    assert ans[0, 1].item() == 0.0
    assert ans[0, 2].item() == pytest.approx(0.9 * S)
    with pytest.raises(ValueError, match="threshold_frac"):
        confident_gnmax(counts, 10, 1.0, 1.0, 0.0, S, g)


def test_confident_gnmax_threshold_noise_is_sigma_thresh_and_vote_noise_sigma_vote():
    """The two noises at their own, distinct scales (a review found that dropping either, or
    swapping sigma_1 and sigma_2, passed the test above, whose sigmas are equal and ~0).
    Threshold: a largest count of 0.5 N - s1 is answered iff N(0, 1) >= 1, probability
    Phi(-1) = 0.159 (0.253 with s2 = 1.5 s1 in its place, 0 without noise). Vote: counts a and
    a - sqrt2 s2 pick the smaller bin iff (N1 - N0) / sqrt2 >= 1, again Phi(-1) (0.067 with s1
    in its place, 0 without noise). 20,000 rows: standard error 0.0026."""
    rows, n, s1, s2 = 20_000, 100, 2.0, 3.0
    counts = torch.zeros(rows, 2, 2, dtype=torch.float64)
    counts[:, 0, 0] = 0.5 * n - s1  # dim 0: the threshold check
    counts[:, 1, 0] = 60.0  # dim 1: always answered (60 + 2 N(0, 1) >= 50 but for 5 sd)
    counts[:, 1, 1] = 60.0 - math.sqrt(2) * s2
    ans, ok = confident_gnmax(counts, n, s1, s2, 0.5, S, torch.Generator().manual_seed(0))
    phi = 0.15865525393145707  # Phi(-1)
    assert float(ok[:, 0].double().mean()) == pytest.approx(phi, abs=0.012)
    assert bool(ok[:, 1].all())
    # the answers are the two bins' centres on [-S, S]: -S/2 (bin 0) or S/2 (bin 1)
    assert torch.allclose(ans[:, 1].abs(), torch.full((rows,), 0.5 * S, dtype=torch.float64))
    assert float((ans[:, 1] > 0).double().mean()) == pytest.approx(phi, abs=0.012)


def test_back_projection_is_r_times_p_transposed():
    _, proj = _setup()
    r = torch.randn(3, 4)
    out = back_project(r, proj)
    assert torch.allclose(out[1], proj[1] @ r[1])


def test_ledger_composes_gaussians_and_matches_topagg_for_the_same_multiplier():
    z = gpate_noise_multiplier(3000, 1000, 10)
    assert z == pytest.approx(1 / math.sqrt(10 / 3000**2 + 20 / 1000**2))
    # the same multiplier as TopAgg's sigma / (2 sqrt k): the same epsilon, every conversion
    k, sigma = 200, 5000.0
    for conv in ("paper", "rdp", "pld"):
        assert gaussian_epsilon(1290, sigma / (2 * math.sqrt(k)), 1e-5, conv) == pytest.approx(
            topagg_epsilon(1290, k, sigma, 1e-5, conv), rel=1e-9)
    acc = GaussianQueryAccountant(z, 1e-5)
    acc.add_queries(30)
    assert acc.epsilon_if(15) == gaussian_epsilon(45, z, 1e-5)
    again = GaussianQueryAccountant.from_state_dict(acc.state_dict())
    assert again.epsilon("pld") == acc.epsilon("pld") and again.queries == 30
    assert acc.event().count == 30
    with pytest.raises(ValueError, match="proj_dim"):
        gpate_noise_multiplier(1.0, 1.0, 0)


def test_shuffled_partition_is_disjoint_contiguous_and_seeded():
    a = shuffled_partition(103, 10, 307)
    assert a.shape == (10, 10) and len(np.unique(a)) == 100
    assert np.array_equal(a, shuffled_partition(103, 10, 307))
    assert not np.array_equal(a, shuffled_partition(103, 10, 1))
    with pytest.raises(ValueError, match="cannot give"):
        shuffled_partition(5, 10, 0)


def test_official_data_dependent_ledger_bounds_and_charges():
    """The official ledger: never above the data-independent RDP per check and vote; GNMax
    charged only when answered; clear consensus costs far less than the sound ledger."""
    from datalens_lib.privacy.accountant import PAPER_ORDERS
    from datalens_lib.privacy.gaussian import GPATEDataDependentLedger

    s1, s2, n = 3000.0, 1000.0, 4000
    indep = PAPER_ORDERS / (2 * s1**2) + PAPER_ORDERS / s2**2
    rng = np.random.default_rng(0)
    for _ in range(20):
        counts = rng.multinomial(n, rng.dirichlet(np.ones(10) * 0.3))[None, :]
        led = GPATEDataDependentLedger(s1, s2, 0.5 * n, 1e-5)
        led.add(counts, np.array([True]))
        assert np.all(led.rdp <= indep + 1e-15) and np.all(led.rdp >= 0)
    split = np.array([[400] * 10])  # no consensus: the check fails, GNMax is not charged
    a, b = (GPATEDataDependentLedger(s1, s2, 0.5 * n, 1e-5) for _ in range(2))
    a.add(split, np.array([False]))
    b.add(split, np.array([True]))
    assert np.all(a.rdp < b.rdp)
    # at G-PATE's noise levels Theorem 6 gains little on answered dimensions: the official
    # ledger is smaller mainly because unanswered dimensions skip GNMax's charge
    z = gpate_noise_multiplier(s1, s2, 1)
    clear = np.array([[n - 50] + [50 // 9] * 9])
    led = GPATEDataDependentLedger(s1, s2, 0.5 * n, 1e-5)
    for _ in range(200):
        led.add(clear, np.array([True]))
    assert led.epsilon() <= gaussian_epsilon(200, z, 1e-5) + 1e-12
    led = GPATEDataDependentLedger(s1, s2, 0.5 * n, 1e-5)
    for _ in range(200):
        led.add(split, np.array([False]))
    assert np.all(led.rdp <= 200 * PAPER_ORDERS / (2 * s1**2) + 1e-15)  # checks only
    assert np.all(led.rdp < 0.1 * 200 * indep)
    assert led.epsilon() < gaussian_epsilon(200, z, 1e-5)
    again = GPATEDataDependentLedger.from_state_dict(led.state_dict())
    assert again.epsilon() == led.epsilon()
