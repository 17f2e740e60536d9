"""TopAgg inside DP-SGD: compression, the Opacus optimizer, its accountant, runs and the CLI."""

import json
import math
from pathlib import Path

import dp_accounting
import pandas as pd
import pytest
import torch
from conftest import real_dataset_dir
from dp_accounting import rdp
from opacus import GradSampleModule
from opacus.accountants import RDPAccountant
from opacus.optimizers import DPOptimizer

from datalens_lib import cli
from datalens_lib.dpsgd import TopAggDPOptimizer, dim_topk, norm_topk, sensitivity
from datalens_lib.dpsgd.train import DPSGDConfig, make_config, paper_hyperparameters
from datalens_lib.privacy.subsampled import (
    dpsgd_epsilon,
    dpsgd_event,
    dpsgd_ledgers,
    dpsgd_steps_for_budget,
)

# -------------------------------------------------------------------------- compression


def test_norm_topk_keeps_the_longest_prefix_within_k_of_the_squared_norm():
    g = torch.randn(64, 300, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for k in (0.3, 0.6, 0.8):
        out = norm_topk(g, k)
        kept = out != 0
        total = g.square().sum(1)
        assert (out.square().sum(1) <= k * total + 1e-12).all()
        # maximal: adding the largest dropped coordinate would exceed k ||g||^2
        dropped = torch.where(kept, torch.zeros_like(g), g.square()).max(1).values
        assert (out.square().sum(1) + dropped > k * total).all()
        # the kept coordinates are the largest ones
        assert (torch.where(kept, g.abs(), torch.inf).min(1).values
                >= torch.where(kept, 0, g.abs()).max(1).values).all()
        assert torch.equal(out[kept], g[kept])
    assert norm_topk(g, 1.0) is g and norm_topk(g, 2.0) is g


def test_norm_topk_prefilter_gives_the_full_sort_result():
    gen = torch.Generator().manual_seed(2)
    heavy = torch.randn(32, 20000, generator=gen) ** 3  # heavy tails: selection in the top few
    flat = torch.randn(32, 20000, generator=gen)  # light tails at k = 0.8: needs the fallback
    for g, k in ((heavy, 0.7), (flat, 0.8), (heavy, 0.99)):
        assert torch.equal(norm_topk(g, k), norm_topk(g, k, prefilter=None))
        assert torch.equal(norm_topk(g, k, prefilter=64), norm_topk(g, k, prefilter=None))
    # one batch whose rows close at different widths (64, 256, ..., the full sort), with a
    # zero row: each row must come out as its own full sort
    mixed = torch.cat([heavy[:8], flat[:8], torch.zeros(1, 20000), heavy[8:16]])[
        torch.randperm(25, generator=gen)]
    for k in (0.05, 0.5, 0.8):  # (at small k the smallest values of a wide prefix pass k)
        want = norm_topk(mixed, k, prefilter=None)
        assert torch.equal(norm_topk(mixed, k, prefilter=64), want)
        assert torch.equal(norm_topk(mixed, k), want)
        for row in range(25):  # and as it does alone
            assert torch.equal(norm_topk(mixed[row:row + 1], k, prefilter=64), want[row:row + 1])
    with pytest.raises(ValueError, match="prefilter"):
        norm_topk(mixed, 0.5, prefilter=0)


def test_norm_topk_selection_needs_k_below_one_and_closes_zero_rows_at_once():
    from datalens_lib.dpsgd.compress import PREFILTER, norm_topk_selection

    g = torch.zeros(3, 5000)
    g[0] = torch.randn(5000, generator=torch.Generator().manual_seed(0))
    groups = list(norm_topk_selection(g, 0.5))  # zero rows (limit 0) need no wider pass
    assert len(groups) == 1 and groups[0][1].shape == (3, PREFILTER)
    for k in (1.0, 1.5):
        with pytest.raises(ValueError, match="0 < k < 1"):
            list(norm_topk_selection(g, k))


def test_norm_topk_empty_selection_and_zero_rows():
    g = torch.tensor([[10.0, 0.1, 0.1], [0.0, 0.0, 0.0]])
    assert torch.equal(norm_topk(g, 0.5), torch.zeros_like(g))  # even the top one exceeds k
    # a single coordinate is still a selection (empty here), and the smallest prefilter works
    assert torch.equal(norm_topk(torch.tensor([[3.0]]), 0.5), torch.zeros(1, 1))
    h = torch.randn(6, 40, generator=torch.Generator().manual_seed(8))
    assert torch.equal(norm_topk(h, 0.6, prefilter=1), norm_topk(h, 0.6, prefilter=None))


def test_dim_topk_keeps_ceil_k_d_coordinates_and_its_sensitivity_is_c():
    g = torch.randn(8, 101, generator=torch.Generator().manual_seed(1))
    out = dim_topk(g, 0.3)
    assert ((out != 0).sum(1) == math.ceil(0.3 * 101)).all()
    assert ((dim_topk(g, 0.001) != 0).sum(1) == 1).all()  # at least one, and only one
    assert dim_topk(g, 1.0) is g and dim_topk(g, 1.5) is g  # k >= 1 keeps everything
    assert torch.equal(dim_topk(g, 0.3), g * (dim_topk(g, 0.3) != 0))  # values, not magnitudes
    spike = torch.zeros(1, 50)
    spike[0, 7] = 3.0
    assert dim_topk(spike, 0.2).norm() == pytest.approx(3.0)  # all of C survives
    assert sensitivity("dim", 0.2, 3.0) == 3.0
    assert sensitivity("norm", 0.25, 3.0) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="k must be"):
        norm_topk(g, 0)
    with pytest.raises(ValueError, match="selection"):
        sensitivity("sign", 0.5, 1.0)


# ---------------------------------------------------------------------------- optimizer


def _model(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return GradSampleModule(torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(),
                                                torch.nn.Linear(5, 3)).to(dtype))


def _step(opt_cls, seed=0, dtype=torch.float32, **kw):
    m = _model(seed, dtype)
    opt = opt_cls(torch.optim.SGD(m.parameters(), lr=0.5), expected_batch_size=16,
                  generator=torch.Generator().manual_seed(7), **kw)
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(3)).to(dtype) * 5
    y = torch.arange(16) % 3
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
    return m, opt


def test_k_one_is_opacus_dp_sgd_bit_for_bit():
    a, _ = _step(DPOptimizer, noise_multiplier=1.3, max_grad_norm=0.7)
    b, _ = _step(TopAggDPOptimizer, noise_multiplier=1.3, max_grad_norm=0.7, k=1.0)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_the_compression_path_is_clip_then_normtopk_then_mean_then_sgd():
    """One noiseless step of the general path against a hand computation: Opacus's clip
    factor, NormTopK over the flat concatenation, the sum over examples, the 1/B average."""
    m = _model(0, torch.float64)
    before = torch.cat([p.detach().reshape(-1).clone() for p in m.parameters()])
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.5), noise_multiplier=0.0,
                            max_grad_norm=0.7, expected_batch_size=16, k=0.5)
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(3)).double() * 5
    torch.nn.functional.cross_entropy(m(x), torch.arange(16) % 3).backward()
    flat = torch.cat([g.reshape(16, -1) for g in opt.grad_samples], 1)
    clipped = flat * (0.7 / (flat.norm(dim=1) + 1e-6)).clamp(max=1.0)[:, None]
    want = before - 0.5 * norm_topk(clipped, 0.5).sum(0) / 16
    opt.step()
    after = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    assert torch.allclose(after, want, rtol=0, atol=1e-12)
    assert not torch.allclose(after, before - 0.5 * clipped.sum(0) / 16, atol=1e-6)


@pytest.mark.parametrize("selection,scope", [("norm", "flat"), ("norm", "layer"),
                                             ("dim", "flat")])
def test_no_processed_example_exceeds_the_stated_sensitivity(selection, scope):
    m = _model()
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=2.0, expected_batch_size=16, k=0.36,
                            selection=selection, scope=scope)
    x = torch.randn(16, 6) * 100  # huge gradients: clipping binds for everyone
    torch.nn.functional.cross_entropy(m(x), torch.arange(16) % 3).backward()
    rows = torch.cat(opt.process(opt.grad_samples), dim=1)
    norms = rows.double().norm(dim=1)
    assert (norms <= opt.sensitivity).all()  # strictly, in float64 terms
    want = 0.6 * 2.0 if selection == "norm" else 2.0
    assert opt.sensitivity == pytest.approx(want)
    if selection == "norm":  # compression really happened: rows are sparse
        assert ((rows != 0).float().mean(1) < 1).all()


@pytest.mark.parametrize("selection,scope,k", [("norm", "flat", 0.5), ("norm", "layer", 0.5),
                                               ("dim", "flat", 0.4), ("norm", "flat", 1.0)])
def test_process_clips_with_opacus_factor_then_compresses(selection, scope, k):
    """``process`` against a hand computation on rows far from the sensitivity (so the norm
    guard cannot hide a clipping error): half the rows need clipping, half do not; the clip
    factor is Opacus's C / (||g||_2 + 1e-6) over the whole example, then the compressor runs
    over the flat gradient or per layer."""
    m = _model(0, torch.float64)
    c = 0.7
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=c, expected_batch_size=32, k=k, selection=selection,
                            scope=scope)
    gen = torch.Generator().manual_seed(6)
    grads = [torch.randn(32, *p.shape, generator=gen, dtype=torch.float64)
             for p in m.parameters()]
    for g in grads:
        g[::2] *= 100.0 / 6  # ||g|| ~ 100: clipped to C
        g[1::2] *= 0.01  # ||g|| ~ 0.06: left as it is
    flat = [g.reshape(32, -1) for g in grads]
    norms = torch.cat(flat, 1).norm(dim=1)
    assert (norms[::2] > 10 * c).all() and (norms[1::2] < c / 2).all()
    clipped = [f * (c / (norms + 1e-6)).clamp(max=1.0)[:, None] for f in flat]
    fn = norm_topk if selection == "norm" else dim_topk
    if scope == "flat":
        want = fn(torch.cat(clipped, 1), k)
    else:
        want = torch.cat([fn(f, k) for f in clipped], 1)
    got = torch.cat(opt.process(grads), 1)
    assert torch.allclose(got, want, rtol=0, atol=1e-13)
    if k < 1:  # the guard did not act: every compressed row is clearly inside the sensitivity
        assert (want.norm(dim=1) < opt.sensitivity * (1 - 1e-4)).all()


@pytest.mark.parametrize("selection,k", [("dim", 0.99), ("norm", 0.5)])
def test_the_norm_guard_equals_measuring_every_row_in_float64(selection, k):
    """``process`` measures again in float64 only the rows near the sensitivity; the output
    must equal scaling every row by its float64 guard, and rows at the bound must be scaled."""
    m = _model()
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=2.0, expected_batch_size=32, k=k, selection=selection)
    gen = torch.Generator().manual_seed(4)
    # odd rows: small, far below the bound; even rows: one huge coordinate (clipped to C,
    # kept whole by dim top-k) or four equal ones (NormTopK keeps exactly half of the norm)
    grads = [torch.randn(32, *p.shape, generator=gen) * 0.01 for p in m.parameters()]
    for g in grads:
        g[::2] = 0
    grads[0][::2].view(16, -1)[:, 0] = 1e6 if selection == "dim" else 0
    if selection == "norm":
        grads[0][::2].view(16, -1)[:, :4] = 3e5
    got = torch.cat(opt.process(grads), 1)
    flat = torch.cat([g.reshape(32, -1) for g in grads], 1)
    clipped = flat * (2.0 / (flat.norm(dim=1) + 1e-6)).clamp(max=1.0)[:, None]
    rows = norm_topk(clipped, k) if selection == "norm" else dim_topk(clipped, k)
    guard = (opt.sensitivity * (1 - 1e-6) / rows.double().norm(dim=1)).clamp(max=1.0)
    assert (guard[::2] < 1).all() and (guard[1::2] == 1).all()  # the guard binds somewhere
    assert torch.equal(got, rows * guard.float()[:, None])
    assert (got.double().norm(dim=1) <= opt.sensitivity * (1 - 1e-6) * (1 + 1e-12)).all()


@pytest.mark.parametrize("scale", [1.0, 1e-21])
def test_the_guard_catches_rows_whose_float32_norm_rounds_below_the_bound(scale):
    """Rows whose float64 norms straddle the bound within float32 rounding (d = 26,010, the
    Opacus CNN's size): the guard must give exactly what guarding every row in float64 gives,
    at a usual clipping norm and at one whose squares underflow in float32."""
    m = _model()
    c = 2.0 * scale
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=c, expected_batch_size=256, k=0.5)
    bound = opt.sensitivity * (1 - 1e-6)
    gen = torch.Generator().manual_seed(5)
    g = torch.randn(256, 26010, generator=gen, dtype=torch.float64)
    target = bound * (1 + (torch.rand(256, 1, generator=gen, dtype=torch.float64) - 0.5) * 4e-6)
    rows = (g / g.norm(dim=1, keepdim=True) * target).float()
    n64 = rows.double().norm(dim=1)
    above = n64 > bound
    assert above.any() and (~above).any()
    if scale == 1.0:  # float32 norms put some rows above the bound below it: the slack matters
        assert (above & (rows.norm(dim=1).double() < bound)).any()
    want = rows * (bound / n64).clamp(max=1.0).float()[:, None]
    got = torch.cat(opt._guard(list(torch.split(rows.clone(), [10000, 16010], dim=1))), 1)
    assert torch.equal(got, want)
    assert (got.double().norm(dim=1) <= opt.sensitivity).all()


def _wide(dtype, n=24, seed=8):
    """A model with d = 5,560 > NormTopK's prefilter and per-example gradients whose
    selections end inside the prefilter (heavy-tailed rows) or need the wider passes
    (Gaussian rows at large k), a third of them clipped and one not finite."""
    torch.manual_seed(0)
    m = GradSampleModule(torch.nn.Sequential(torch.nn.Linear(100, 50), torch.nn.ReLU(),
                                             torch.nn.Linear(50, 10)).to(dtype))
    gen = torch.Generator().manual_seed(seed)
    grads = [torch.randn(n, *p.shape, generator=gen, dtype=dtype) * 0.01
             for p in m.parameters()]
    for g in grads:
        g[::2] = g[::2] ** 5 * 1e6
        g[1::2] = g[1::2].sign() * (1 + g[1::2].abs())  # nearly flat: 2048 of 5,560 hold ~37 %
        g[::3] *= 1e3
    grads[0][5].view(-1)[0] = float("nan")
    return m, grads


@pytest.mark.parametrize("dtype,atol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize("k", [0.5, 0.8])
def test_the_sparse_sum_equals_the_sum_of_the_processed_rows(dtype, atol, k, monkeypatch):
    """``summed`` (flat NormTopK: kept coordinates only, ``index_add_``) against ``process``'s
    dense rows summed over examples, with selections that close in each pass."""
    from datalens_lib.dpsgd.compress import PREFILTER, norm_topk_selection

    m, grads = _wide(dtype)
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=2.0, expected_batch_size=24, k=k)
    rows = torch.cat(opt.process(grads), 1)
    want = rows.sum(0)
    assert torch.isfinite(want).all() and rows[5].abs().sum() == 0
    flat = torch.nan_to_num(torch.cat([g.reshape(24, -1) for g in grads], 1), nan=0.0)
    widths = {idx.shape[1] for _, idx, _ in norm_topk_selection(flat, k)}
    assert min(widths) == PREFILTER and max(widths) > PREFILTER  # both kinds of pass ran
    with monkeypatch.context() as mp:  # the sparse path never writes the dense rows
        mp.setattr(TopAggDPOptimizer, "process", lambda *a: pytest.fail("dense path"))
        got = torch.cat(opt.summed(grads))
    assert torch.allclose(got, want, rtol=0, atol=atol)


def test_each_example_adds_at_most_the_sensitivity_to_the_sparse_sum(monkeypatch):
    """One example per batch: its contribution to ``summed`` is within the sensitivity, in
    float64 terms, also for rows whose compressed norm is the sensitivity exactly (four equal
    coordinates at k = 0.5: NormTopK keeps two, norm C / sqrt(2) = sqrt(k) C) and for rows
    with one dominant coordinate (its square alone passes k ||g||^2: the selection is empty)."""
    m, grads = _wide(torch.float32, n=12)
    for g in grads:
        g[6:] = 0
    grads[0][6:9].view(3, -1)[:, :4] = 7e5  # four equal coordinates, clipped to C
    grads[1][9:].view(3, -1)[:, 0] = 1e8  # one dominant coordinate
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=2.0, expected_batch_size=1, k=0.5)
    norms = []
    for i in range(12):
        norms.append(torch.cat(opt.summed([g[i:i + 1] for g in grads])).double().norm())
    norms = torch.stack(norms)
    assert (norms <= opt.sensitivity).all()
    assert (norms[6:9] > opt.sensitivity * (1 - 2e-6)).all()  # the guard bound, not more
    assert (norms[:5] > 0).all() and norms[5] == 0  # example 5 is not finite
    assert (norms[9:] == 0).all()
    import datalens_lib.dpsgd.optimizer as optimizer

    def keep_all(g, k):  # a broken selection: only the float64 guard can bound the row
        yield (torch.arange(len(g)), torch.arange(g.shape[1]).expand(len(g), -1),
               torch.ones_like(g, dtype=torch.bool))

    monkeypatch.setattr(optimizer, "norm_topk_selection", keep_all)
    n = torch.cat(opt.summed([g[:1] for g in grads])).double().norm()
    assert opt.sensitivity * (1 - 2e-6) < n <= opt.sensitivity


def test_the_sparse_sum_of_an_empty_batch_is_zero():
    m, _ = _wide(torch.float32)
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=2.0, expected_batch_size=4, k=0.5)
    got = opt.summed([torch.zeros(0, *p.shape) for p in m.parameters()])
    assert [t.shape for t in got] == [(p.numel(),) for p in m.parameters()]
    assert all((t == 0).all() for t in got)


def test_the_sparse_guard_measures_in_float64(monkeypatch):
    """``summed``'s guard on rows whose float32 norm rounds below the bound while their float64
    norm is above it (d = 26,010), behind a selection that keeps everything: it must equal
    scaling each row by its float64 guard, margin included. (A review found that a
    float32 guard or a guard without the margin survived the other tests.)"""
    import datalens_lib.dpsgd.optimizer as optimizer

    lin = torch.nn.Linear(26010, 1, bias=False)
    opt = TopAggDPOptimizer(torch.optim.SGD(lin.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=2.0, expected_batch_size=1, k=0.5)
    bound = opt.sensitivity * (1 - 1e-6)
    gen = torch.Generator().manual_seed(5)
    g = torch.randn(64, 26010, generator=gen, dtype=torch.float64)
    target = bound * (1 + (torch.rand(64, 1, generator=gen, dtype=torch.float64) - 0.5) * 4e-6)
    rows = (g / g.norm(dim=1, keepdim=True) * target).float()  # < C: the clip does not bind
    n64 = rows.double().norm(dim=1)
    assert (rows.norm(dim=1).double() < bound)[n64 > bound].any()
    monkeypatch.setattr(optimizer, "norm_topk_selection", lambda g, k: iter(
        [(torch.arange(len(g)), torch.arange(g.shape[1]).expand(len(g), -1),
          torch.ones_like(g, dtype=torch.bool))]))
    want = rows * (bound / n64).clamp(max=1.0).float()[:, None]
    got = torch.stack([opt.summed([r.view(1, 1, -1)])[0] for r in rows])
    assert torch.equal(got, want)


@pytest.mark.parametrize("selection,scope", [("dim", "flat"), ("norm", "layer")])
def test_summed_routes_the_other_selections_and_scopes_to_process(selection, scope):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(100, 50), torch.nn.ReLU(), torch.nn.Linear(50, 10))
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=2.0, expected_batch_size=8, k=0.5,
                            selection=selection, scope=scope)
    grads = [torch.randn(8, *p.shape) ** 3 for p in m.parameters()]
    want = [f.sum(0) for f in opt.process(grads)]
    for w, s in zip(want, opt.summed(grads), strict=True):
        assert torch.equal(w, s)


def test_clip_and_accumulate_adds_into_summed_grad_and_marks_processed():
    m = GradSampleModule(torch.nn.Linear(60, 3))
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.5), noise_multiplier=0.0,
                            max_grad_norm=0.7, expected_batch_size=8, k=0.5)
    gen = torch.Generator().manual_seed(3)
    a, b = ([torch.randn(8, *p.shape, generator=gen) for p in m.parameters()] for _ in range(2))
    for p, g in zip(m.parameters(), a, strict=True):
        p.grad_sample = g
    opt.clip_and_accumulate()
    with pytest.raises(ValueError):  # the same per-example gradients are not used twice
        opt.clip_and_accumulate()
    for p, g in zip(m.parameters(), b, strict=True):
        p.grad_sample = g
    opt.clip_and_accumulate()
    want = [x + y for x, y in zip(opt.summed(a), opt.summed(b), strict=True)]
    for p, w in zip(m.parameters(), want, strict=True):
        assert torch.allclose(p.summed_grad.reshape(-1), w, rtol=0, atol=1e-6)


def test_empty_batches_and_non_finite_gradients():
    """An empty Poisson batch is a noise-only step; an example with a NaN gradient contributes
    nothing (instead of making the release NaN)."""
    m = _model()
    opt = TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                            max_grad_norm=1.0, expected_batch_size=4, k=0.5,
                            generator=torch.Generator().manual_seed(0))
    for p in m.parameters():
        p.grad_sample = torch.zeros(0, *p.shape)
    assert opt.pre_step()
    assert all(torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0 for p in m.parameters())
    opt.zero_grad()
    for i, p in enumerate(m.parameters()):
        gs = torch.randn(3, *p.shape)
        if i == 0:
            gs[1].view(-1)[0] = float("nan")
        p.grad_sample = gs
    rows = torch.cat(opt.process(opt.grad_samples), dim=1)
    assert torch.isfinite(rows).all() and rows[1].abs().sum() == 0 and rows[0].abs().sum() > 0


def test_noise_std_is_sigma_times_the_sensitivity():
    m = torch.nn.Linear(200, 100)
    gs = GradSampleModule(m)
    opt = TopAggDPOptimizer(torch.optim.SGD(gs.parameters(), lr=1.0), noise_multiplier=2.0,
                            max_grad_norm=3.0, expected_batch_size=10, k=0.49,
                            generator=torch.Generator().manual_seed(0))
    for p in gs.parameters():
        p.grad_sample = torch.zeros(10, *p.shape)
    opt.pre_step()
    noise = torch.cat([p.grad.reshape(-1) for p in gs.parameters()]) * 10  # undo the mean
    assert noise.std().item() == pytest.approx(2.0 * 0.7 * 3.0, rel=0.02)
    assert abs(noise.mean().item()) < 4 * 4.2 / math.sqrt(noise.numel())  # 4 standard errors


def test_optimizer_validates_its_parameters():
    m = _model()
    with pytest.raises(ValueError, match="scope"):
        TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                          max_grad_norm=1.0, expected_batch_size=4, scope="row")
    for bad in (0.0, math.inf):
        with pytest.raises(ValueError, match="max_grad_norm"):
            TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=1.0,
                              max_grad_norm=bad, expected_batch_size=4)
    with pytest.raises(ValueError, match="noise_multiplier"):
        TopAggDPOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), noise_multiplier=math.inf,
                          max_grad_norm=1.0, expected_batch_size=4)


# ---------------------------------------------------------------------------- accountant


def test_rdp_ledger_equals_dp_accountings_for_the_same_orders():
    q, sigma, steps, delta = 256 / 60000, 1.1, 3000, 1e-5
    acc = rdp.RdpAccountant(orders=list(RDPAccountant.DEFAULT_ALPHAS))
    acc.compose(dpsgd_event(q, sigma, steps))
    assert dpsgd_epsilon(steps, q, sigma, delta, "rdp") == pytest.approx(
        acc.get_epsilon(delta), rel=1e-6)
    led = dpsgd_ledgers(steps, q, sigma, delta)
    assert led["prv"] < led["rdp"] < led["paper"] and led["pld"] < led["rdp"]
    assert dpsgd_epsilon(0, q, sigma, delta) == 0.0
    with pytest.raises(ValueError, match="sample rate"):
        dpsgd_epsilon(10, 1.5, sigma, delta)


def test_opacus_epsilon_silences_only_the_largest_alpha_warning():
    import warnings

    from datalens_lib.privacy.subsampled import opacus_epsilon

    class Acc:
        def __init__(self, other):
            self.other = other

        def get_epsilon(self, delta):
            warnings.warn("Optimal order is the largest alpha. Please consider expanding the "
                          "range of alphas to get a tighter privacy bound.", stacklevel=1)
            if self.other:
                warnings.warn("something else", stacklevel=1)
            return 2.5

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert opacus_epsilon(Acc(False), 1e-5) == 2.5
        assert got == []
        assert opacus_epsilon(Acc(True), 1e-5) == 2.5
    assert [str(w.message) for w in got] == ["something else"]
    # a small budget on Opacus's default orders does warn, and the ledger stays quiet
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        dpsgd_epsilon(50, 128 / 60000, 8.2, 1e-5, "rdp")
        dpsgd_epsilon(50, 128 / 60000, 8.2, 1e-5, "prv")
    assert not [w for w in got if "largest alpha" in str(w.message)]


def test_paper_ledger_is_the_simple_conversion_of_dp_accountings_rdp():
    """The ledger that sets T: dp_accounting's RDP of the Poisson-subsampled Gaussian on the
    same dense orders (up to 1024), then eps = min over orders of R(a) + log(1/delta)/(a - 1)
    (Mironov 2017, Prop. 3), computed here independently of our conversion."""
    from datalens_lib.privacy.subsampled import DPSGD_PAPER_ORDERS

    orders = [a for a in DPSGD_PAPER_ORDERS if a > 1]
    assert max(orders) == 1024 and len(orders) > 100
    for q, sigma, steps, delta in ((128 / 60000, 5.8, 756, 1e-5), (512 / 60000, 1.6, 1063, 1e-5)):
        acc = rdp.RdpAccountant(orders=orders)
        acc.compose(dpsgd_event(q, sigma, steps))
        simple = min(r + math.log(1 / delta) / (a - 1)
                     for a, r in zip(orders, acc._rdp, strict=True))
        assert dpsgd_epsilon(steps, q, sigma, delta, "paper") == pytest.approx(simple, rel=1e-9)


def test_steps_for_budget_reproduce_an_independent_readers_numbers():
    """dpsgd.md: with orders up to 1024 and the simple conversion, MNIST eps = 1 (B = 512,
    sigma 1.6) allows 1063 steps and eps = 0.05 (B = 128, sigma 5.8) 756."""
    assert dpsgd_steps_for_budget(1.0, 512 / 60000, 1.6, 1e-5) == 1063
    assert dpsgd_steps_for_budget(0.05, 128 / 60000, 5.8, 1e-5) == 756
    t = dpsgd_steps_for_budget(0.2, 512 / 60000, 3.6, 1e-5)
    assert dpsgd_epsilon(t, 512 / 60000, 3.6, 1e-5) <= 0.2 < dpsgd_epsilon(
        t + 1, 512 / 60000, 3.6, 1e-5)


# ------------------------------------------------------------------------ configs, runs


def test_paper_hyperparameters_and_config_validation():
    hp = paper_hyperparameters("mnist", 0.05, "normtopk", 0.6)
    assert (hp["max_grad_norm"], hp["sigma"], hp["batch_size"], hp["lr"]) == (10.0, 5.8, 128,
                                                                               0.01)
    gm = paper_hyperparameters("mnist", 0.1, "gmdp", 1.0)  # nearest searched budget: 0.05
    assert gm["sigma"] == 8.2 and "nearest" in gm["hyperparameter_source"]
    assert paper_hyperparameters("mnist", 0.7, "gmdp", 1.0)["sigma"] == 1.8
    with pytest.raises(ValueError, match="k = 1"):
        DPSGDConfig(method="gmdp", k=0.7)
    with pytest.raises(ValueError, match="k < 1"):
        DPSGDConfig(method="normtopk", k=1.0)
    with pytest.raises(ValueError, match="inf"):
        DPSGDConfig(method="sgd", k=1.0)
    with pytest.raises(ValueError, match="unknown"):
        make_config("mnist", 1.0, "normtopk", 0.7, "paper", lr_decay=0.1)
    with pytest.raises(ValueError, match="delta"):
        DPSGDConfig(delta=1.5)


@pytest.mark.usefixtures("real_mnist")
def test_a_fixed_number_of_steps_must_fit_the_budget():
    from datalens_lib.dpsgd.train import train_dpsgd

    cfg = make_config("mnist", 0.05, "gmdp", 1.0, "smoke", steps=10_000, sigma=1.0)
    with pytest.raises(ValueError, match="spend epsilon"):
        train_dpsgd(cfg, progress=False)


@pytest.fixture
def real_mnist(monkeypatch):
    monkeypatch.setenv("DATALENS_DATA_DIR", str(real_dataset_dir("mnist").parent))


@pytest.mark.usefixtures("real_mnist")
def test_cli_dpsgd_smoke_records_resume_and_ledgers(tmp_path, capsys):
    out = tmp_path / "cell"
    args = ["dpsgd", "--epsilon", "1.0", "--k", "0.7", "--profile", "smoke", "--seeds", "2",
            "--out", str(out), "--quiet"]
    assert cli.main(args) == 0
    recs = [json.loads((out / f"seed{s}.json").read_text()) for s in (0, 1)]
    for r in recs:
        assert r["steps"] == 3 and r["git_sha"] and r["profile"] == "smoke"
        assert r["sample_rate"] == 64 / 2048  # Poisson at exactly the accounted rate
        assert r["epsilon"]["opacus_hook_rdp"] == pytest.approx(r["epsilon"]["rdp"], rel=1e-6)
        assert sorted(r["privacy"]["dp_ledgers"]) == [  # all data-independent
            "opacus_hook_rdp", "paper", "pld", "prv", "rdp"]
        assert r["privacy"]["sensitivity"] == pytest.approx(math.sqrt(0.7) * r["config"][
            "max_grad_norm"])
        # the record's event is the mechanism: Opacus's orders give its rdp ledger again
        acc = rdp.RdpAccountant(orders=list(RDPAccountant.DEFAULT_ALPHAS))
        acc.compose(eval(r["privacy"]["event"], vars(dp_accounting)))  # noqa: S307
        assert acc.get_epsilon(1e-5) == pytest.approx(r["epsilon"]["rdp"], rel=1e-6)
    assert recs[0]["evaluations"] != recs[1]["evaluations"]  # seeds differ
    summ0 = json.loads((out / "summary.json").read_text())  # T and every ledger's ε
    assert (summ0["steps"], summ0["epsilon_spent"]) == (3, recs[0]["epsilon"])
    assert {r["device"] for r in recs} == {"cpu"}
    if not torch.cuda.is_available():  # a CUDA run is asked for on a machine without a GPU
        assert cli.main(args[:-3] + ["--out", str(tmp_path / "gpu"), "--device", "cuda"]) == 2
        assert "no GPU" in capsys.readouterr().err
    summ = json.loads((out / "summary.json").read_text())
    assert summ["seeds"] == [0, 1] and summ["final"]["std"] is not None
    before = (out / "seed0.json").stat().st_mtime_ns
    assert cli.main(args) == 0  # finished seeds are skipped
    assert (out / "seed0.json").stat().st_mtime_ns == before
    assert cli.main(args + ["--set", "lr=0.5"]) == 2
    assert "another config" in capsys.readouterr().err
    assert cli.main(["dpsgd", "--method", "gmdp", "--epsilon", "0.5", "--profile", "smoke",
                     "--seeds", "1", "--out", str(tmp_path / "gm"), "--quiet"]) == 0
    gm = json.loads((tmp_path / "gm" / "seed0.json").read_text())
    assert gm["config"]["k"] == 1.0 and gm["privacy"]["sensitivity"] == gm["config"][
        "max_grad_norm"]
    assert cli.main(["dpsgd", "--method", "gmdp", "--epsilon", "0", "--profile", "smoke",
                     "--out", str(tmp_path / "x")]) == 2
    assert cli.main(["dpsgd", "--control", "--epsilon", "1.0", "--k", "0.8", "--profile",
                     "smoke", "--seeds", "1", "--out", str(tmp_path / "ctl"), "--quiet"]) == 0
    ctl = {p.parent.name: json.loads(p.read_text())
           for p in (tmp_path / "ctl").glob("*/seed0.json")}
    assert len(ctl) == 5
    assert ctl["control-k0.8-eps1-topk-sgd"]["epsilon"] is None
    assert ctl["control-k0.8-eps1-topk-sgd"]["privacy"]["dp_ledgers"] == []  # no noise
    assert ctl["control-k0.8-eps1-topagg"]["privacy"]["noise_std"] == pytest.approx(
        ctl["control-k0.8-eps1-gm-dp"]["privacy"]["noise_std"] * math.sqrt(0.8))


def test_control_scenarios_share_everything_but_compression_and_noise():
    from datalens_lib.dpsgd.train import control_configs

    cfgs = control_configs("mnist", 1.0, 0.8, "paper")
    assert list(cfgs) == ["TopAgg", "TopK-GM-DP", "TopK-SGD", "GM-DP", "clipped SGD"]
    top = cfgs["TopAgg"]
    for c in cfgs.values():
        assert (c.steps, c.max_grad_norm, c.batch_size, c.lr) == (
            top.steps, top.max_grad_norm, top.batch_size, top.lr)
    std = {n: c.sigma * sensitivity("norm", c.k, c.max_grad_norm) for n, c in cfgs.items()
           if math.isfinite(c.epsilon)}
    C, s = top.max_grad_norm, top.sigma
    assert std["TopAgg"] == pytest.approx(math.sqrt(0.8) * s * C)
    assert std["TopK-GM-DP"] == pytest.approx(s * C) and std["GM-DP"] == pytest.approx(s * C)
    assert top.epsilon <= 1.0 and cfgs["GM-DP"].epsilon == pytest.approx(top.epsilon)
    assert cfgs["TopK-GM-DP"].epsilon < top.epsilon
    assert math.isinf(cfgs["TopK-SGD"].epsilon) and cfgs["TopK-SGD"].k == 0.8
    assert math.isinf(cfgs["clipped SGD"].epsilon) and cfgs["clipped SGD"].method == "sgd"


# ------------------------------------------------------- CIFAR-10: frozen ResNet-18 features


def test_resnet18_has_torchvisions_parameter_names_and_size():
    from datalens_lib.dpsgd.features import ResNet18

    sd = ResNet18().state_dict()
    for key in ("conv1.weight", "bn1.running_mean", "layer1.0.conv2.weight",
                "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_var",
                "layer4.1.bn2.num_batches_tracked", "fc.weight", "fc.bias"):
        assert key in sd, key
    assert "layer1.0.downsample.0.weight" not in sd
    assert sum(p.numel() for p in ResNet18().parameters()) == 11_689_512  # torchvision's
    assert sd["layer4.1.conv2.weight"].shape == (512, 512, 3, 3)


def _fake_cifar(monkeypatch, tmp_path, n_train=96, n_test=32):
    import numpy as np

    from datalens_lib import data as data_mod
    from datalens_lib.data.registry import ImageDataset
    from datalens_lib.dpsgd import features
    from datalens_lib.dpsgd.features import ResNet18

    rng = np.random.default_rng(0)
    ds = ImageDataset(name="cifar10", x_train=rng.random((n_train, 3, 32, 32), np.float32),
                      y_train=rng.integers(0, 10, n_train), x_test=rng.random(
                          (n_test, 3, 32, 32), np.float32), y_test=rng.integers(0, 10, n_test),
                      num_classes=10, class_names=tuple("abcdefghij"), source=tmp_path)
    monkeypatch.setattr(data_mod, "load_dataset", lambda name, data_dir=None: ds)
    torch.manual_seed(0)
    w = tmp_path / features.WEIGHTS_NAME
    torch.save(ResNet18(width=4).state_dict(), w)  # a tiny stand-in for the real weights
    monkeypatch.setenv("DATALENS_RESNET18_WEIGHTS", str(w))
    monkeypatch.setenv("DATALENS_RESULTS_ROOT", str(tmp_path / "results"))
    return w


def test_resnet18_weights_are_checked_before_use(tmp_path, monkeypatch):
    from datalens_lib.dpsgd import features

    monkeypatch.delenv("DATALENS_RESNET18_WEIGHTS", raising=False)
    with pytest.raises(FileNotFoundError, match=features.WEIGHTS_NAME):
        features.resolve_weights()
    w = _fake_cifar(monkeypatch, tmp_path)
    with pytest.raises(ValueError, match="SHA-256 starts with"):
        features.resolve_weights()
    monkeypatch.setattr(features, "SHA256_PREFIX", sha256_of(w)[:8])
    model, sha = features.load_resnet18()
    assert sha == sha256_of(w) and not any(p.requires_grad for p in model.parameters())


def sha256_of(path):
    from datalens_lib.samples import sha256_file

    return sha256_file(path)


def test_cifar10_dpsgd_path_on_fake_data_and_fake_weights(tmp_path, monkeypatch):
    from datalens_lib.dpsgd import features
    from datalens_lib.dpsgd.train import train_dpsgd

    w = _fake_cifar(monkeypatch, tmp_path)
    monkeypatch.setattr(features, "SHA256_PREFIX", sha256_of(w)[:8])
    cfg = make_config("cifar10", 0.4, "normtopk", 0.7, "smoke", batch_size=16, train_limit=96)
    # the searched sigma (2.5), raised by the smoke profile until 3 steps fit the budget
    assert "cifar10 eps=0.4" in cfg.hyperparameter_source and cfg.sigma >= 2.5
    rec = train_dpsgd(cfg, seed=0, progress=False)
    assert rec["features"]["dim"] == 32 and rec["features"]["weights_sha256"] == sha256_of(w)
    assert rec["train_examples"] == 96 and rec["steps"] == 3 and 0 <= rec["final"] <= 1
    caches = list((tmp_path / "results" / "runs" / "features").glob("cifar10-resnet18-*.npz"))
    assert len(caches) == 1
    again = train_dpsgd(cfg, seed=0, progress=False)  # from the cache: the same run
    assert again["evaluations"] == rec["evaluations"]


# ---------------------------------------------------------------- the validation-split search


def test_validation_split_is_a_fixed_disjoint_holdout():
    from datalens_lib.dpsgd.train import validation_split

    train, val = validation_split(1000, 100)
    assert len(train) == 900 and len(val) == 100
    assert set(train.tolist()).isdisjoint(val.tolist())
    assert sorted(train.tolist() + val.tolist()) == list(range(1000))
    again = validation_split(1000, 100)
    assert torch.equal(train, again[0]) and torch.equal(val, again[1])
    assert val.tolist() != list(range(100))  # a permutation, not the first records
    with pytest.raises(ValueError, match="size"):
        validation_split(100, 100)
    with pytest.raises(ValueError, match="validation"):
        DPSGDConfig(validation=60_000)


def test_search_grid_spans_the_paper_choices_at_the_neighbouring_budgets():
    from datalens_lib.dpsgd.train import SEARCH_PARAMETERS, search_grid

    # a searched budget: the paper's row alone
    row = paper_hyperparameters("mnist", 0.2, "normtopk", 0.7)
    assert search_grid("mnist", 0.2, "normtopk", 0.7) == [
        {p: row[p] for p in SEARCH_PARAMETERS}]
    # eps = 0.5 lies between 0.2 (sigma 3.6, C 10) and 1.0 (sigma 1.6, C 12), B 512, lr 0.1
    grid = search_grid("mnist", 0.5, "normtopk", 0.7)
    assert {(g["sigma"], g["max_grad_norm"]) for g in grid} == {
        (1.6, 10.0), (1.6, 12.0), (3.6, 10.0), (3.6, 12.0)}
    assert {(g["batch_size"], g["lr"]) for g in grid} == {(512, 0.1)}
    assert len(search_grid("mnist", 0.1, "gmdp", 1.0)) == 16  # every column differs
    assert len(search_grid("mnist", 2.0, "gmdp", 1.0)) == 1  # above the range: eps 1's row
    with pytest.raises(ValueError, match="nothing to search"):
        search_grid("mnist", math.inf, "gmdp", 1.0)


def test_search_selects_on_validation_and_reports_the_test_choice(tmp_path, monkeypatch):
    """The clean choice reads validation accuracy only; the test-selected point (the paper's
    way) is reported beside it; finished points are not trained again."""
    from datalens_lib.dpsgd import train as tr

    calls = []
    # sigma 1.6 (eps 1's choice) fits no step at eps 0.5 with B = 512: only sigma 3.6 runs;
    # validation prefers C = 12, the test set C = 10
    val = {(3.6, 10.0): 0.70, (3.6, 12.0): 0.85}
    test = {(3.6, 10.0): 0.95, (3.6, 12.0): 0.80}

    def fake_train(cfg, seed=0, progress=False, device="cpu"):
        key = (cfg.sigma, cfg.max_grad_norm)
        calls.append(key)
        assert cfg.validation == 10_000 and cfg.train_examples == 50_000
        return {"config": cfg.to_dict(), "seed": seed, "steps": 7,
                "final_validation": val[key],
                "final": test[key] - 0.01, "best": test[key]}

    monkeypatch.setattr(tr, "train_dpsgd", fake_train)
    found = tr.run_search("mnist", 0.5, "normtopk", 0.7, "paper", out=tmp_path)
    sel_v, sel_t = found["selected_validation"], found["selected_test"]
    assert (sel_v["sigma"], sel_v["max_grad_norm"]) == (3.6, 12.0)
    assert (sel_t["sigma"], sel_t["max_grad_norm"]) == (3.6, 10.0)
    assert len(calls) == 2 and "no ledger" in found["privacy"]
    assert [r["status"] for r in found["grid"]].count("trained") == 2
    assert json.loads((tmp_path / "search.json").read_text())["selected_validation"] == sel_v
    tr.run_search("mnist", 0.5, "normtopk", 0.7, "paper", out=tmp_path)
    assert len(calls) == 2  # resumed from the point records
    over = tr.searched_hyperparameters(found)
    cfg = make_config("mnist", 0.5, "normtopk", 0.7, "paper", **over)
    assert (cfg.sigma, cfg.max_grad_norm, cfg.validation) == (3.6, 12.0, 0)
    assert cfg.hyperparameter_source.startswith("validation grid search: point")


@pytest.mark.usefixtures("real_mnist")
def test_cli_dpsgd_search_smoke_trains_on_the_rest_and_scores_the_holdout(tmp_path, capsys):
    args = ["dpsgd", "--epsilon", "0.5", "--k", "0.7", "--profile", "smoke", "--seeds", "1",
            "--out", str(tmp_path / "cell"), "--search", str(tmp_path / "search"), "--quiet"]
    assert cli.main(args) == 0
    assert "validation picks point" in capsys.readouterr().out
    pt = json.loads((tmp_path / "search" / "point0.json").read_text())
    assert pt["train_examples"] == 2048 - 512 and pt["validation_examples"] == 512
    assert pt["sample_rate"] == 64 / (2048 - 512)
    assert 0 <= pt["final_validation"] <= 1 and len(pt["validation_evaluations"]) == 3
    seed0 = json.loads((tmp_path / "cell" / "seed0.json").read_text())
    assert seed0["train_examples"] == 2048 and "validation_examples" not in seed0
    assert seed0["config"]["hyperparameter_source"].startswith("validation grid search")


def test_search_table_reads_committed_searches(tmp_path):
    from datalens_lib.dpsgd.report import search_points, search_table, search_verdict

    d = tmp_path / "dpsgd" / "mnist" / "gmdp-eps0.5" / "search"
    d.mkdir(parents=True)
    pts = [{"point": i, "sigma": s, "max_grad_norm": 10.0, "batch_size": 512, "lr": 0.1,
            "steps": 9, "final_validation": fv, "final": f, "best": b}
           for i, (s, fv, f, b) in enumerate([(1.8, 0.9, 0.8, 0.85), (3.4, 0.8, 0.9, 0.95)])]
    (d / "search.json").write_text(json.dumps({
        "epsilon": 0.5, "validation": 10_000, "profile": "paper", "grid": pts,
        "selected_validation": {"point": 0}, "selected_test": {"point": 1}}))
    t = search_table("mnist", root=tmp_path)
    assert len(t) == 1
    r = t.iloc[0]
    assert r.cell == "gmdp-eps0.5" and not r.same_choice and r.points == 2
    assert r.clean_choice.startswith("sigma=1.8") and r.test_choice.startswith("sigma=3.4")
    assert r.clean_test_final == pytest.approx(80.0) and r.test_choice_best == pytest.approx(95.0)
    assert r.clean_cell_final is None  # no committed cell
    pts = search_points("mnist", "gmdp-eps0.5", root=tmp_path)
    assert pts.clean_choice.tolist() == [True, False] and pts.test_choice.tolist() == [False, True]
    assert pts.validation.tolist() == pytest.approx([90.0, 80.0])
    assert pts.test_best.tolist() == pytest.approx([85.0, 95.0])
    with pytest.raises(ValueError, match="committed: gmdp-eps0.5"):
        search_points("mnist", "gmdp-eps0.3", root=tmp_path)
    assert search_table("fashion-mnist", root=tmp_path).empty
    # the cell trained with the clean choice, then one trained with other settings
    cell = d.parent / "paper"
    cell.mkdir()
    summ = {"epsilon": 0.5, "seeds": [0, 1], "steps": 9, "final": {"mean": 0.83, "std": 0.02},
            "config": {"sigma": 1.8, "max_grad_norm": 10.0, "batch_size": 512, "lr": 0.1}}
    (cell / "summary.json").write_text(json.dumps(summ))
    r = search_table("mnist", root=tmp_path).iloc[0]
    assert r.clean_cell_final == pytest.approx(83.0) and r.clean_cell_std == pytest.approx(2.0)
    verdict = " ".join(search_verdict(search_table("mnist", root=tmp_path)))
    assert "of the 1 in which at least two points could train" in verdict
    assert "choose the same point in 0" in verdict and "Per-layer" not in verdict
    assert "+15.00 points on average" in verdict  # 95 (test choice, best) - 80 (clean final)
    assert "+12.00 points higher" in verdict  # 95 - the clean cell's 83
    # a one-seed cell has no standard deviation (not 0), and NaN is never written as bare JSON
    (cell / "summary.json").write_text(json.dumps({**summ, "seeds": [0],
                                                   "final": {"mean": 0.83, "std": None}}))
    one = search_table("mnist", root=tmp_path)
    assert one.iloc[0].clean_cell_std is None
    from datalens_lib.provenance import atomic_write_json
    atomic_write_json(tmp_path / "t.json", {"rows": one.assign(x=float("nan"))
                                            .to_dict("records"), "inf": float("inf")})
    text = (tmp_path / "t.json").read_text()
    assert "NaN" not in text and '"x": null' in text and "Infinity" in text
    (cell / "summary.json").write_text(json.dumps(summ))
    # a per-layer search with one trainable point, and a smoke search (another profile)
    for name, scope, profile in (("normtopk-layer-k0.8-eps0.5", "layer", "paper"),
                                 ("normtopk-k0.8-eps0.5", "flat", "smoke")):
        e = tmp_path / "dpsgd" / "mnist" / name / "search"
        e.mkdir(parents=True)
        grid = [{"point": i, "sigma": sg, "max_grad_norm": 10.0, "batch_size": 512, "lr": 0.1,
                 "steps": st, "final_validation": 0.9, "final": 0.8, "best": 0.85, "status": stt}
                for i, (sg, st, stt) in enumerate([(1.8, 0, "infeasible: no step"),
                                                    (3.4, 9, "trained")])]
        (e / "search.json").write_text(json.dumps({
            "epsilon": 0.5, "validation": 10_000, "profile": profile, "grid": grid,
            "overrides": {"scope": scope}, "selected_validation": {"point": 1},
            "selected_test": {"point": 1}}))
    t = search_table("mnist", root=tmp_path)
    assert sorted(t.cell) == ["gmdp-eps0.5", "normtopk-layer-k0.8-eps0.5"]
    assert t.set_index("cell").trained_points.to_dict() == {"gmdp-eps0.5": 2,
                                                            "normtopk-layer-k0.8-eps0.5": 1}
    verdict = " ".join(search_verdict(t))
    # the per-layer search (its own gap 85 - 80) stays out of the flat gap and cell figures
    assert "+15.00 points on average" in verdict and "+12.00 points higher" in verdict
    assert "1 committed flat-selection search (" in verdict
    assert "Per-layer selection (1 search, counted apart;" in verdict
    assert "in none could more than one point train" in verdict.split("Per-layer")[1]
    assert "only one point fits the budget" in verdict.split("Per-layer")[1]
    assert search_table("mnist", root=tmp_path, profile="smoke").cell.tolist() == [
        "normtopk-k0.8-eps0.5"]
    # a smoke search is compared with the smoke cell, never with the paper-scale one
    smoke_cell = tmp_path / "dpsgd" / "mnist" / "normtopk-k0.8-eps0.5" / "smoke"
    smoke_cell.mkdir()
    (smoke_cell / "summary.json").write_text(json.dumps({
        **summ, "config": {"sigma": 3.4, "max_grad_norm": 10.0, "batch_size": 512, "lr": 0.1},
        "final": {"mean": 0.5, "std": 0.01}}))
    assert search_table("mnist", root=tmp_path, profile="smoke").iloc[0].clean_cell_final == \
        pytest.approx(50.0)
    flat_forced = search_verdict(search_table("mnist", root=tmp_path, profile="smoke"))[0]
    assert "in none could more than one point train" in flat_forced
    assert "only one point fits the budget" in flat_forced
    summ["config"]["lr"] = 0.2
    (cell / "summary.json").write_text(json.dumps(summ))
    assert search_table("mnist", root=tmp_path).iloc[0].clean_cell_final is None
    assert "committed cells" not in " ".join(search_verdict(search_table("mnist",
                                                                        root=tmp_path)))
    assert search_verdict(search_table("fashion-mnist", root=tmp_path)) == [
        "No validation-split search is committed: nothing to measure."]


def test_settings_table_says_where_each_cells_settings_came_from(tmp_path):
    """tab:dpsgd-search as we ran it: the paper's row, the nearest row, or our search, and for
    a search which bracketing budget's row each chosen value is."""
    from datalens_lib.dpsgd.report import settings_table
    from datalens_lib.dpsgd.train import paper_hyperparameters, searched_hyperparameters

    def commit(cell, method, k, eps, **cfg):
        d = tmp_path / "dpsgd" / "mnist" / cell / "paper"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps({
            "epsilon": eps, "method": method, "k": k, "seeds": [0], "steps": 9,
            "final": {"mean": 0.9, "std": None}, "config": {"scope": "flat", **cfg}}))

    commit("gmdp-eps1", "gmdp", 1.0, 1.0, **paper_hyperparameters("mnist", 1.0, "gmdp", 1.0))
    commit("normtopk-k0.7-eps0.3", "normtopk", 0.7, 0.3,
           **paper_hyperparameters("mnist", 0.3, "normtopk", 0.7))  # nearest: eps 0.2's row
    lo = paper_hyperparameters("mnist", 0.2, "gmdp", 1.0)
    hi = paper_hyperparameters("mnist", 1.0, "gmdp", 1.0)
    chosen = {"sigma": lo["sigma"], "max_grad_norm": hi["max_grad_norm"],
              "batch_size": lo["batch_size"], "lr": 0.5}  # lr from neither row
    commit("gmdp-eps0.5", "gmdp", 1.0, 0.5, **searched_hyperparameters(
        {"selected_validation": {"point": 3, **chosen}, "grid": [{}] * 8, "validation": 10,
         "seed": 0}))
    commit("control-k0.8-eps1-gm-dp", "gmdp", 1.0, 1.0, **hi)  # left out: control
    commit("normtopk-layer-k0.8-eps1", "normtopk", 0.8, 1.0,
           **{**paper_hyperparameters("mnist", 1.0, "normtopk", 0.8), "scope": "layer"})
    commit("gmdp-epsinf", "gmdp", 1.0, None, **hi)  # left out: no noise, no budget
    t = settings_table("mnist", root=tmp_path).set_index("cell")
    assert list(t.index) == ["normtopk-k0.7-eps0.3", "gmdp-eps0.5", "gmdp-eps1"]
    assert t.loc["gmdp-eps1", "source"] == "paper row"
    assert t.loc["normtopk-k0.7-eps0.3", "source"] == "nearest paper row"
    assert t.loc["normtopk-k0.7-eps0.3", "parameter"] == "k=0.7"
    r = t.loc["gmdp-eps0.5"]
    assert r.source == "validation search" and r.lr == 0.5 and r.method == "GM-DP"
    both = "ε=0.2 and ε=1" if lo["batch_size"] == hi["batch_size"] else "ε=0.2"
    assert r.taken_from == (f"sigma: ε=0.2; max_grad_norm: ε=1; batch_size: {both}; "
                            "lr: neither")


def test_cell_table_shows_every_committed_budget(monkeypatch):
    """A paper-scale cell committed at a budget the notebook did not ask for still shows."""
    from datalens_lib.dpsgd import report

    def summ(cell, eps, prof):
        return {"cell": cell, "epsilon": eps, "profile": prof, "seeds": [0, 1],
                "final": {"mean": 0.9, "std": 0.01}, "best": {"mean": 0.91},
                "config": {"steps": 5, "hyperparameter_source": "x"}}

    monkeypatch.setattr(report, "committed_summaries", lambda d, p: {
        "gmdp-eps0.5": summ("gmdp-eps0.5", 0.5, "paper"),
        "dimtopk-k0.2-eps0.3": summ("dimtopk-k0.2-eps0.3", 0.3, "paper")})
    ran = []
    monkeypatch.setattr(report, "run_cell", lambda d, e, m, k, p, seeds, device: (
        ran.append((m, e, device)), summ(report.cell_name(m, k, e), e, p))[1])
    cells = [("TopAgg", "k=0.7", "normtopk", 0.7), ("GM-DP", "", "gmdp", 1.0)]
    t = report.cell_table("mnist", cells, [1.0], report.paper_rows(
        "tab_dpsgd.csv", "tab:dpsgd-mnist"), profile="smoke", seeds=[0], device="cuda")
    assert sorted(set(t.epsilon)) == [0.5, 1.0]  # not 0.3: no column of this table
    assert ("gmdp", 0.5, "cuda") not in ran and ("normtopk", 0.5, "cuda") in ran
    assert {dev for *_, dev in ran} == {"cuda"}  # the notebook's device reaches training
    row = t[(t.epsilon == 0.5) & (t.method == "GM-DP")].iloc[0]
    assert row.profile == "paper" and row.difference is not None


def test_search_skips_points_that_fit_no_step_at_the_real_step_counts(tmp_path, monkeypatch):
    """At eps = 0.3 the GM-DP grid spans eps 0.2's and eps 1's choices; sigma 1.8 with B 512
    does not fit one step (paper ledger, n = 50k): such points are recorded as infeasible,
    never trained and never selected."""
    from datalens_lib.dpsgd import train as tr

    trained = []

    def fake_train(cfg, seed=0, progress=False, device="cpu"):
        steps = tr.dpsgd_steps_for_budget(0.3, cfg.batch_size / cfg.train_examples,
                                          cfg.sigma, cfg.delta, "paper")
        assert steps > 0  # only feasible points reach training
        trained.append(cfg.sigma)
        return {"config": cfg.to_dict(), "seed": seed, "steps": steps,
                "final_validation": 0.5 + cfg.lr, "final": 0.5, "best": 0.6}

    monkeypatch.setattr(tr, "train_dpsgd", fake_train)
    found = tr.run_search("mnist", 0.3, "gmdp", 1.0, "paper", out=tmp_path)
    bad = [r for r in found["grid"] if r["status"].startswith("infeasible")]
    assert bad and all(r["sigma"] == 1.8 and r["steps"] == 0 for r in bad)
    assert len(trained) == len(found["grid"]) - len(bad) > 0
    assert found["selected_validation"]["sigma"] != 1.8
    with pytest.raises(ValueError, match="sets"):
        tr.run_search("mnist", 0.3, "gmdp", 1.0, "paper", out=tmp_path, lr=0.3)


def test_cell_name_names_the_per_layer_scope_and_rejects_others():
    from datalens_lib.dpsgd.train import cell_name

    assert cell_name("normtopk", 0.6, 1.0) == "normtopk-k0.6-eps1"
    assert cell_name("normtopk", 0.6, 1.0, "layer") == "normtopk-layer-k0.6-eps1"
    assert cell_name("dimtopk", 0.2, 0.05, "layer") == "dimtopk-layer-k0.2-eps0.05"
    assert cell_name("gmdp", 1.0, 1.0, "layer") == "gmdp-eps1"  # nothing to select
    with pytest.raises(ValueError, match="scope must be one of"):
        cell_name("normtopk", 0.6, 1.0, "row")


def test_run_cell_with_the_layer_scope_gets_its_own_cell(tmp_path, monkeypatch):
    """A per-layer run never lands in (or resumes from) the flat cell's folder or name."""
    from datalens_lib.dpsgd import train as tr

    seen = []

    def fake_train(cfg, *, seed, progress, device):
        seen.append(cfg.scope)
        return {"seed": seed, "final": 0.5, "best": 0.6, "config": cfg.to_dict()}

    monkeypatch.setattr(tr, "train_dpsgd", fake_train)
    summ = tr.run_cell("mnist", 1.0, "normtopk", 0.6, "smoke", seeds=[0],
                       out=tmp_path / "a", scope="layer")
    assert summ["cell"] == "normtopk-layer-k0.6-eps1" and seen == ["layer"]
    assert summ["config"]["scope"] == "layer"
    flat = tr.run_cell("mnist", 1.0, "normtopk", 0.6, "smoke", seeds=[0], out=tmp_path / "b")
    assert flat["cell"] == "normtopk-k0.6-eps1" and seen == ["layer", "flat"]


def test_control_per_layer_runs_the_compressing_scenarios_as_cells_of_their_own(
        tmp_path, monkeypatch):
    import datalens_lib.dpsgd.train as tr
    from datalens_lib.dpsgd.report import control_table, paper_rows, scope_table

    def fake_train(cfg, *, seed, progress, device):
        return {"seed": seed, "final": 0.9 if cfg.scope == "layer" else 0.8, "best": 0.95,
                "config": cfg.to_dict()}

    monkeypatch.setattr(tr, "train_dpsgd", fake_train)
    runs = tmp_path / "dpsgd" / "mnist"
    flat = tr.run_control("mnist", 1.0, 0.8, "smoke", seeds=[0, 1], out=runs)
    layer = tr.run_control("mnist", 1.0, 0.8, "smoke", seeds=[0, 1], out=runs, scope="layer")
    assert list(layer) == ["TopAgg", "TopK-GM-DP", "TopK-SGD"] and len(flat) == 5
    for name, summ in layer.items():
        assert summ["cell"].startswith("control-layer-k0.8-eps1-")
        assert summ["config"]["scope"] == "layer" and summ["config"]["k"] == 0.8
        assert summ["config"]["sigma"] == flat[name]["config"]["sigma"]
    with pytest.raises(ValueError, match="scope"):
        tr.run_control("mnist", 1.0, 0.8, "smoke", seeds=[0], out=runs, scope="row")
    tr.run_control("mnist", 1.0, 0.6, "smoke", seeds=[0, 1], out=runs)  # a k nobody asks for
    for d in runs.iterdir():  # commit them as paper-scale records
        summ = json.loads((d / "summary.json").read_text())
        (d / "paper").mkdir()
        (d / "paper" / "summary.json").write_text(json.dumps({**summ, "profile": "paper"}))
    paper = paper_rows("tab_control.csv", "tab:control")
    t = control_table("mnist", [1.0], [0.8], paper, profile="smoke", seeds=[0], root=tmp_path)
    # every committed (ε, k) is shown, asked or not: k = 0.6's five, then k = 0.8's eight
    assert list(t.scope) == ["flat"] * 10 + ["layer"] * 3
    assert list(t.parameter) == ["k=0.6"] * 5 + ["k=0.8"] * 8
    lay = t[t.scope == "layer"].set_index("method")
    assert lay.ours.tolist() == pytest.approx([90.0] * 3)
    assert lay.loc["TopK-SGD", "paper"] == pytest.approx(98.03)  # the paper's value beside it
    assert t[t.scope == "flat"].ours.tolist() == pytest.approx([80.0] * 10)
    assert len(scope_table("mnist", root=tmp_path)) == 0  # control cells are not scope rows
    import datalens_lib.dpsgd.report as rep
    asked = []  # a budget not committed is trained on the notebook's device
    monkeypatch.setattr(rep, "run_control", lambda d, e, k, p, seeds, device: (
        asked.append((e, k, p, device)), flat)[1])
    control_table("mnist", [0.5], [0.8], paper, profile="smoke", seeds=[0], root=tmp_path,
                  device="cuda")
    assert asked == [(0.5, 0.8, "smoke", "cuda")]


def test_scope_table_puts_committed_per_layer_cells_beside_flat_and_gmdp(tmp_path):
    from datalens_lib.dpsgd.report import SCOPE_COLUMNS, scope_table

    def commit(cell, method, k, eps, scope, means):
        d = tmp_path / "dpsgd" / "mnist" / cell / "paper"
        d.mkdir(parents=True)
        m = sum(means) / len(means)
        sd = (sum((x - m) ** 2 for x in means) / (len(means) - 1)) ** 0.5
        (d / "summary.json").write_text(json.dumps({
            "cell": cell, "method": method, "k": k, "epsilon": eps, "profile": "paper",
            "seeds": list(range(len(means))), "config": {"scope": scope},
            "final": {"mean": m, "std": sd}, "best": {"mean": m}}))

    assert list(scope_table("mnist", root=tmp_path).columns) == SCOPE_COLUMNS
    commit("normtopk-k0.6-eps1", "normtopk", 0.6, 1.0, "flat", [0.88, 0.90])
    commit("gmdp-eps1", "gmdp", 1.0, 1.0, "flat", [0.95, 0.96])
    commit("normtopk-layer-k0.6-eps1", "normtopk", 0.6, 1.0, "layer", [0.93, 0.95])
    commit("normtopk-layer-k0.8-eps0.2", "normtopk", 0.8, 0.2, "layer", [0.90, 0.90])
    t = scope_table("mnist", root=tmp_path)
    assert len(t) == 2  # the flat and GM-DP cells are not rows of their own
    r = t[t.k == 0.6].iloc[0]
    assert r.epsilon == 1.0 and r.seeds == 2
    assert r.per_layer == pytest.approx(94.0) and r.flat == pytest.approx(89.0)
    assert r.gmdp == pytest.approx(95.5) and r.per_layer_minus_flat == pytest.approx(5.0)
    assert r.per_layer_std == pytest.approx(100 * 0.02 / 2 ** 0.5)
    lone = t[t.k == 0.8].iloc[0]  # no flat or GM-DP cell at that budget: shown as missing
    assert lone.flat is None or math.isnan(lone.flat)
    assert lone.per_layer_minus_flat is None or math.isnan(lone.per_layer_minus_flat)


@pytest.mark.usefixtures("real_mnist")
def test_cli_control_takes_topaggs_searched_setting_at_an_unsearched_budget(tmp_path, capsys):
    """``dpsgd --control --search DIR`` at a budget tab:dpsgd-search lacks searches TopAgg's
    cell (normtopk, k) and runs every scenario with its validation choice; at a budget the
    paper searched it takes the paper's row and searches nothing."""
    # (--method is ignored by --control: the search must still be TopAgg's)
    args = ["dpsgd", "--control", "--method", "gmdp", "--k", "0.8", "--profile", "smoke",
            "--seeds", "1", "--quiet"]
    assert cli.main([*args, "--epsilon", "0.5", "--out", str(tmp_path / "ctl"),
                     "--search", str(tmp_path / "search")]) == 0
    assert "validation picks point" in capsys.readouterr().out
    search = json.loads((tmp_path / "search" / "search.json").read_text())
    assert (search["method"], search["k"]) == ("normtopk", 0.8)
    sel = search["selected_validation"]
    recs = {p.parent.name: json.loads(p.read_text())
            for p in (tmp_path / "ctl").glob("*/seed0.json")}
    assert len(recs) == 5
    for name, rec in recs.items():
        src = rec["config"]["hyperparameter_source"]
        assert src.startswith("validation grid search: point") and "; control:" in src, name
        assert rec["config"]["max_grad_norm"] == sel["max_grad_norm"]
        assert rec["config"]["lr"] == sel["lr"]
    assert cli.main([*args, "--epsilon", "1.0", "--out", str(tmp_path / "ctl1"),
                     "--search", str(tmp_path / "search1"), "--validation", "500"]) == 0
    out = capsys.readouterr().out  # a searched budget: the row, and --validation is unused
    assert "nothing is searched" in out and "--validation 500 is not used" in out
    assert not (tmp_path / "search1").exists()
    rec = json.loads(next((tmp_path / "ctl1").glob("*topagg/seed0.json")).read_text())
    assert rec["config"]["hyperparameter_source"].startswith("tab:dpsgd-search mnist eps=1")


@pytest.mark.parametrize("artifact,ks,dim_ks", [
    ("tab:dpsgd-mnist", [0.6, 0.7, 0.8], None), ("tab:dpsgd-cifar", [0.6, 0.7, 0.8], None),
    ("tab:dpsgd-ablation", [0.6, 0.7, 0.8], [0.2, 0.4, 0.6])])
def test_every_table_column_finds_the_papers_number_at_every_budget(artifact, ks, dim_ks):
    """The columns the DP-SGD notebooks build (``report.table_cells``) use the paper CSV's own
    labels: each finds a paper mean and spread at every budget the artifact has (a label the
    CSV does not use would leave the paper column empty and no difference taken)."""
    from datalens_lib.dpsgd import report

    paper = report.paper_rows("tab_dpsgd.csv", artifact)
    cells = report.table_cells(artifact, ks, dim_ks)
    assert len(cells) == len(ks) + len(dim_ks or []) + 1
    for eps in sorted(set(pd.to_numeric(paper.epsilon))):
        for label, parameter, method, _k in cells:
            for metric in ("test_accuracy_percent", "std_percent"):
                v = report.paper_value(paper, label, parameter, eps, metric)
                assert v is not None, (artifact, label, parameter, eps, metric)
            assert report.PAPER_METHODS[label] == method
    # every paper column of the artifact is one of ours
    assert {(m, p) for m, p in zip(paper.method, paper.parameter, strict=True)} == {
        (label, parameter) for label, parameter, _, _ in cells}
    with pytest.raises(ValueError, match="no dimension-based"):
        report.table_cells("tab:dpsgd-mnist", ks, [0.2])
    with pytest.raises(ValueError, match="artifact must be one of"):
        report.table_cells("tab:dpsgd", ks)


def test_cpu_profile_is_the_paper_setting_cut_to_its_first_steps():
    from datalens_lib.dpsgd.train import CPU_STEPS, make_config

    paper = make_config("mnist", 1.0, "normtopk", 0.7, "paper")
    cpu = make_config("mnist", 1.0, "normtopk", 0.7, "cpu")
    assert paper.steps is None and cpu.steps == CPU_STEPS  # the budget allows 1063 here
    assert (cpu.sigma, cpu.max_grad_norm, cpu.batch_size, cpu.lr) == (
        paper.sigma, paper.max_grad_norm, paper.batch_size, paper.lr)
    assert make_config("mnist", math.inf, "gmdp", 1.0, "cpu").steps == CPU_STEPS
    # fewer when the budget allows fewer (eps = 0.5 with the eps = 1 row fits 2 steps), and
    # none at all leaves T to train_dpsgd, which refuses it
    assert make_config("mnist", 0.5, "normtopk", 0.7, "cpu").steps == 2
    assert make_config("mnist", 0.5, "normtopk", 0.7, "cpu", sigma=0.5).steps is None
    assert make_config("mnist", 1.0, "gmdp", 1.0, "cpu", steps=7).steps == 7


def test_summaries_carry_the_steps_and_every_ledgers_epsilon(tmp_path):
    from datalens_lib.dpsgd.report import _row
    from datalens_lib.dpsgd.train import committed_summaries, privacy_summary, summarise

    eps = {"paper": 0.05, "rdp": 0.106, "opacus_hook_rdp": 0.106, "prv": 0.038, "pld": 0.029}
    recs = [{"seed": s, "final": 0.7 + s / 100, "best": 0.8, "steps": 756, "epsilon": eps,
             "privacy": {"steps_set_by": "paper ledger"}} for s in range(2)]
    summ = summarise(recs)
    assert (summ["steps"], summ["steps_set_by"], summ["epsilon_spent"]) == (
        756, "paper ledger", eps)
    with pytest.raises(ValueError, match="disagree"):
        privacy_summary([recs[0], {**recs[1], "steps": 755}])
    with pytest.raises(ValueError, match="disagree"):
        privacy_summary([recs[0], {**recs[1], "epsilon": {**eps, "prv": 0.05}}])
    # float noise between machines is one ledger
    assert privacy_summary([recs[0], {**recs[1], "epsilon": {
        **eps, "prv": eps["prv"] * (1 + 1e-12)}}])["epsilon_spent"] == eps
    # a committed summary written before summaries held them: read from its seed records
    d = tmp_path / "dpsgd" / "mnist" / "gmdp-eps0.05" / "paper"
    d.mkdir(parents=True)
    old = {"cell": "gmdp-eps0.05", "method": "gmdp", "k": 1.0, "epsilon": 0.05,
           "profile": "paper", "config": {"steps": None}, "seeds": [0, 1],
           "final": summ["final"], "best": summ["best"]}
    (d / "summary.json").write_text(json.dumps(old))
    for r in recs:
        (d / f"seed{r['seed']}.json").write_text(json.dumps(r))
    got = committed_summaries("mnist", root=tmp_path)["gmdp-eps0.05"]
    row = _row(got, pd.DataFrame(columns=["method", "parameter", "metric", "epsilon", "value"]),
               "GM-DP", "", 0.05, "mnist")
    assert (row["steps"], row["steps_set_by"]) == (756, "paper ledger")
    assert (row["eps_paper"], row["eps_opacus_rdp"], row["eps_prv"]) == (0.05, 0.106, 0.038)


def test_similar_or_better_leaves_out_eps_inf_and_can_fix_k():
    from datalens_lib.dpsgd.report import similar_or_better

    rows = [(e, m, p, o, sd) for e in (0.05, 1.0, math.inf) for m, p, o, sd in (
        ("GM-DP", "", 80.0, 1.0), ("TopAgg", "k=0.6", 70.0, 1.0), ("TopAgg", "k=0.8", 79.5, 1.0))]
    t = pd.DataFrame(rows, columns=["epsilon", "method", "parameter", "ours", "ours_std"])
    t["profile"] = "paper"
    t.loc[(t.epsilon == 1.0) & (t.parameter == "k=0.8"), "profile"] = "smoke"  # not compared
    best = similar_or_better(t)
    assert [(e, p) for e, _, _, p in best] == [(0.05, "k=0.8"), (1.0, "k=0.6")]
    assert best[0][1] == pytest.approx(-0.5) and best[0][2] == pytest.approx(2 ** 0.5)
    fixed = similar_or_better(t, parameter="k=0.6")
    assert [d for _, d, _, _ in fixed] == pytest.approx([-10.0, -10.0])


def test_cpu_profile_search_caps_each_point_by_its_own_budget(tmp_path, monkeypatch):
    """At the cpu profile every grid point runs min(100, the steps its own σ and B allow)
    (the base config's cap would overspend or underuse another point's budget), and a point
    that fits no step is infeasible."""
    import datalens_lib.dpsgd.train as tr

    points = [{"sigma": s, "max_grad_norm": 12.0, "batch_size": 512, "lr": 0.1}
              for s in (1.7, 3.4, 0.5)]  # at eps = 0.5: 54 steps, many, none
    q = 512 / (60_000 - 10_000)
    fits = [dpsgd_steps_for_budget(0.5, q, p["sigma"], 1e-5) for p in points]
    assert 0 < fits[0] < tr.CPU_STEPS < fits[1] and fits[2] == 0
    seen = []

    def fake_train(cfg, *, seed, progress, device):
        seen.append((cfg.sigma, cfg.steps))
        return {"seed": seed, "steps": cfg.steps, "final": 0.5, "best": 0.6,
                "final_validation": 0.5, "config": cfg.to_dict()}

    monkeypatch.setattr(tr, "train_dpsgd", fake_train)
    monkeypatch.setattr(tr, "search_grid", lambda *a: points)
    found = tr.run_search("mnist", 0.5, "gmdp", 1.0, "cpu", out=tmp_path / "s")
    assert seen == [(1.7, fits[0]), (3.4, tr.CPU_STEPS)]
    assert [r["status"] for r in found["grid"]] == ["trained", "trained",
                                                    "infeasible: not one step fits the budget"]


# ------------------------------------------- budgets read off a run to a larger budget


def _small(epsilon, **kw):
    # n = 1536 - 512 = 1024 (16 batches an epoch), q = 1/16, sigma 2: eps 1.0 -> 21 steps,
    # 1.2 -> 34, 1.3 -> 42
    return DPSGDConfig(**{"method": "normtopk", "k": 0.7, "epsilon": epsilon, "sigma": 2.0,
                          "max_grad_norm": 1.0, "batch_size": 64, "lr": 0.5, "eval_every": 5,
                          "train_limit": 1536, "test_limit": 300, "validation": 512, **kw})


@pytest.mark.usefixtures("real_mnist")
def test_a_lower_budgets_record_read_off_a_longer_run_is_that_budgets_own_run():
    """The prefix records of a run to eps = 1.3 (42 steps, three epochs of Poisson batches)
    are, bit for bit, the runs at eps = 1.0 and 1.2 trained alone (ends off the evaluation
    schedule and in the second and third epochs: steps 21 and 34), and the long run's own
    record is the one it has without prefixes (the extra evaluations stay out of it)."""
    from datalens_lib.dpsgd.train import train_dpsgd, train_dpsgd_with_prefixes

    long, short = _small(1.3), [_small(1.0), _small(1.2)]
    rec, derived = train_dpsgd_with_prefixes(long, short, seed=3, progress=False)
    assert [d["steps"] for d in derived] == [21, 34] and rec["steps"] == 42
    timing = ("train_seconds", "seconds_per_step", "derived_from")
    for cfg, d in zip(short, derived, strict=True):
        alone = train_dpsgd(cfg, seed=3, progress=False)
        assert d["derived_from"] == {**d["derived_from"], "epsilon": 1.3, "steps": 42}
        assert {k: v for k, v in d.items() if k not in timing} == {
            k: v for k, v in alone.items() if k not in timing}
    assert [s for s, _ in derived[1]["evaluations"]] == [5, 10, 15, 20, 25, 30, 34]
    plain = train_dpsgd(long, seed=3, progress=False)
    assert {k: v for k, v in rec.items() if k not in timing} == {
        k: v for k, v in plain.items() if k not in timing}
    assert [s for s, _ in rec["evaluations"]] == [5, 10, 15, 20, 25, 30, 35, 40, 42]


def test_is_prefix_allows_only_the_budget_and_steps_to_differ():
    from datalens_lib.dpsgd.train import is_prefix, train_dpsgd_with_prefixes

    assert is_prefix(_small(1.2), _small(1.3))
    assert not is_prefix(_small(1.3), _small(1.2))  # longer than the run
    assert not is_prefix(_small(0.3), _small(1.3))  # not one step fits eps = 0.3
    assert not is_prefix(_small(1.2, lr=0.4), _small(1.3))
    assert not is_prefix(_small(1.2, hyperparameter_source="x"), _small(1.3))
    assert not is_prefix(_small(1.2, sigma=1.5), _small(1.3))
    assert not is_prefix(_small(math.inf, steps=4), _small(1.3))
    assert is_prefix(_small(1.3, steps=3), _small(1.3, steps=15))
    with pytest.raises(ValueError, match="not a prefix"):
        train_dpsgd_with_prefixes(_small(1.2), [_small(1.3)], progress=False)


@pytest.mark.parametrize("scale", [1, 1000])
def test_search_family_reads_lower_budgets_off_the_largest_and_matches_separate_runs(
        tmp_path, monkeypatch, scale):
    """eps 0.3, 0.5 and 0.7 share one grid: each point is trained once (to 0.7) and each seed
    once per clean choice, and every budget's records equal those of its own search and cell
    run apart. scale 1: every budget chooses the same point (sigma 3.6, C 10); scale 1000:
    0.7 chooses sigma 1.6 (infeasible below it), so 0.5's seeds are trained apart and 0.3's
    read off them."""
    from datalens_lib.dpsgd import train as tr

    calls = []

    def result(cfg, seed):
        t = tr.prefix_steps(cfg)
        rec = {"config": cfg.to_dict(), "seed": seed, "steps": t, "final": 0.5 + t * 1e-5,
               "best": 0.6, "epsilon": {"paper": cfg.epsilon}}
        if cfg.validation:  # C = 12 at sigma 1.6 (feasible at 0.7 only), else C = 10
            rec["final_validation"] = (scale * cfg.max_grad_norm
                                       * (1 if cfg.sigma < 2 else -1) + t)
        return rec

    def fake_prefixes(cfg, prefixes=(), *, seed=0, progress=False, device="cpu"):
        calls.append((cfg.epsilon, cfg.validation > 0, seed))
        assert all(tr.is_prefix(p, cfg) for p in prefixes)
        return result(cfg, seed), [{**result(p, seed), "derived_from": {"epsilon": cfg.epsilon}}
                                   for p in prefixes]

    monkeypatch.setattr(tr, "train_dpsgd_with_prefixes", fake_prefixes)
    monkeypatch.setattr(tr, "train_dpsgd", lambda cfg, **kw: fake_prefixes(cfg, (), **kw)[0])
    budgets = (0.3, 0.5, 0.7)
    fam = tr.run_search_family("mnist", budgets, "normtopk", 0.7, "paper", seeds=[0, 1],
                               search_dir=lambda e: tmp_path / "f" / f"s{e}",
                               out_dir=lambda e: tmp_path / "f" / f"c{e}")
    grid = tr.search_grid("mnist", 0.7, "normtopk", 0.7)
    searched = [c for c in calls if c[1]]
    assert len(searched) == len(grid) and {c[0] for c in searched} == {0.7}
    n_family = len(calls)
    calls.clear()
    for e in budgets:  # the same budgets run apart, as `datalens dpsgd --search` runs each
        found = tr.run_search("mnist", e, "normtopk", 0.7, "paper", out=tmp_path / f"s{e}")
        apart = tr.run_cell("mnist", e, "normtopk", 0.7, "paper", seeds=[0, 1],
                            out=tmp_path / f"c{e}", **tr.searched_hyperparameters(found))
        for pt in (tmp_path / "f" / f"s{e}").glob("point*.json"):  # read off 0.7's points
            assert ("derived_from" in json.loads(pt.read_text())) == (e != 0.7)
        mine = json.loads((tmp_path / "f" / f"s{e}" / "search.json").read_text())
        assert mine["selected_validation"] == found["selected_validation"]
        assert fam[e]["config"] == apart["config"] and fam[e]["final"] == apart["final"]
        for s in (0, 1):
            a = json.loads((tmp_path / f"c{e}" / f"seed{s}.json").read_text())
            f = json.loads((tmp_path / "f" / f"c{e}" / f"seed{s}.json").read_text())
            top = 0.7 if scale == 1 else max(0.5, e)  # the budget its seeds trained at
            assert f.get("derived_from") == (None if e == top else {"epsilon": top})
            assert {k: v for k, v in f.items() if k != "derived_from"} == a
    # apart, every budget trains its own points and seeds
    assert n_family == len(grid) + (2 if scale == 1 else 4) < len(calls)
    assert (fam[0.7]["config"]["sigma"] == 1.6) == (scale == 1000)


def test_search_family_refuses_to_overwrite_another_configs_seed(tmp_path, monkeypatch):
    from datalens_lib.dpsgd import train as tr

    def fake(cfg, prefixes=(), *, seed=0, progress=False, device="cpu"):
        rec = {"config": cfg.to_dict(), "seed": seed, "steps": tr.prefix_steps(cfg),
               "final": 0.5, "best": 0.6, "final_validation": -cfg.max_grad_norm}
        return rec, [{**rec, "config": p.to_dict()} for p in prefixes]

    monkeypatch.setattr(tr, "train_dpsgd_with_prefixes", fake)
    monkeypatch.setattr(tr, "train_dpsgd", lambda cfg, **kw: fake(cfg, **kw)[0])
    other = tmp_path / "c0.3" / "seed0.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"config": DPSGDConfig(lr=0.999).to_dict(), "seed": 0}))
    with pytest.raises(ValueError, match="another config"):
        tr.run_search_family("mnist", (0.3, 0.5), "normtopk", 0.8, "paper", seeds=[0],
                             search_dir=lambda e: tmp_path / f"s{e}",
                             out_dir=lambda e: tmp_path / f"c{e}")
    assert json.loads(other.read_text())["config"]["lr"] == 0.999


def test_search_family_refuses_bad_budgets(tmp_path):
    from datalens_lib.dpsgd import train as tr

    for bad in ((), (0.3, math.inf), (0.0,)):
        with pytest.raises(ValueError, match="finite budgets"):
            tr.run_search_family("mnist", bad, "gmdp", 1.0, "paper", seeds=[0],
                                 search_dir=lambda e: tmp_path, out_dir=lambda e: tmp_path)
    with pytest.raises(ValueError, match="not the grid"):
        tr.run_search("mnist", 0.5, "gmdp", 1.0, "paper", out=tmp_path / "a",
                      prefixes={0.1: tmp_path / "b"})
    with pytest.raises(ValueError, match="not below"):
        tr.run_search("mnist", 0.5, "gmdp", 1.0, "paper", out=tmp_path / "a",
                      prefixes={0.7: tmp_path / "b"})


@pytest.mark.usefixtures("real_mnist")
def test_cli_dpsgd_several_budgets_fill_each_cells_folders(tmp_path, capsys):
    base = ["dpsgd", "--k", "0.8", "--profile", "smoke", "--seeds", "1", "--quiet"]
    assert cli.main([*base, "--epsilon", "0.5,0.7", "--search", str(tmp_path / "{cell}/s"),
                     "--out", str(tmp_path / "{cell}/c")]) == 0
    out = capsys.readouterr().out
    for e in ("0.5", "0.7"):
        assert f"normtopk-k0.8-eps{e} (1 seeds)" in out
        assert (tmp_path / f"normtopk-k0.8-eps{e}" / "s" / "search.json").exists()
        seed = json.loads((tmp_path / f"normtopk-k0.8-eps{e}" / "c" / "seed0.json").read_text())
        assert seed["config"]["epsilon"] == float(e)
    for bad, msg in ((["--epsilon", "0.5,x"], "not a number"),
                     (["--epsilon", "0.5,0.7", "--search", "s", "--out", "o/{cell}"],
                      "--search with {cell}"),
                     (["--epsilon", "0.5,0.7", "--control"], "one budget")):
        assert cli.main([*base, *bad]) == 2
        assert msg in capsys.readouterr().err


def test_control_observations_hold_on_the_papers_table_and_fail_when_compression_costs_more():
    from datalens_lib.dpsgd.report import control_observations, paper_rows, paper_value

    paper = paper_rows("tab_control.csv", "tab:control")
    names = ("TopAgg", "TopK-GM-DP", "TopK-SGD", "GM-DP", "clipped SGD")
    for eps in (0.1, 1.0):
        acc = {n: paper_value(paper, n, "k=0.8", eps, "test_accuracy_percent") for n in names}
        sd = {n: paper_value(paper, n, "k=0.8", eps, "std_percent") for n in names}
        obs = control_observations(acc, sd)
        assert obs["noise_larger"] and obs["similar_or_better"], (eps, obs)
    o = control_observations(acc, sd)  # eps = 1: 98.94 - 98.03 and 98.94 - 95.56
    assert o["compression"]["without noise"] == pytest.approx(0.91)
    assert o["noise"]["without compression"] == pytest.approx(3.38)
    assert o["topagg_vs_gmdp"] == pytest.approx(-0.14)
    worse = {**acc, "TopK-SGD": 64.30, "clipped SGD": 92.29, "GM-DP": 81.07,
             "TopK-GM-DP": 70.27, "TopAgg": 71.31}  # a compression that costs 28 points
    o = control_observations(worse, {n: 1.0 for n in names})
    assert not o["noise_larger"] and not o["similar_or_better"]
    assert control_observations({**worse, "TopAgg": 80.5}, {n: 1.0 for n in names})[
        "similar_or_better"]
    with pytest.raises(ValueError, match="missing"):
        control_observations({"TopAgg": 1.0})


def test_budget_curves_plot_each_column_up_to_the_asked_budget():
    """fig:dpsgd's panels: one line per method and k over the finite budgets (up to
    max_epsilon: panel b), filled markers at paper scale, hollow for pipeline checks, the
    paper's points as crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from datalens_lib.dpsgd.report import plot_budget_curves

    rows = []
    for method, par in (("TopAgg", "k=0.7"), ("GM-DP", "")):
        for eps, prof in ((0.05, "paper"), (0.1, "smoke"), (1.0, "paper"), (math.inf, "paper")):
            rows.append({"method": method, "parameter": par, "epsilon": eps, "profile": prof,
                         "ours": 90.0 + eps if eps < math.inf else 99.0, "ours_std": 1.0,
                         "paper": None if eps == 0.1 else 91.0})
    table = pd.DataFrame(rows)
    ax = plot_budget_curves(table, "cifar10")
    lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert [ln.get_label() for ln in lines] == ["ours: TopAgg k=0.7", "ours: GM-DP"]
    # the curve joins paper-scale cells only; ε = ∞ is left to the table
    assert list(lines[0].get_xdata()) == [0.05, 1.0]
    hollow = [ln for ln in ax.get_lines() if ln.get_marker() == "o"
              and ln.get_markerfacecolor() == "none"]
    assert [list(ln.get_xdata()) for ln in hollow] == [[0.1], [0.1]]
    assert "off the log axis" in " ".join(t.get_text() for t in ax.texts)
    _, ax_b = plt.subplots()
    plot_budget_curves(table, "cifar10, small", ax=ax_b, max_epsilon=0.1)
    assert max(max(ln.get_xdata()) for ln in ax_b.get_lines()) == 0.1
    _, ax_s = plt.subplots()  # no paper-scale cell: a dotted line through the checks
    plot_budget_curves(table.assign(profile="smoke"), "smoke", ax=ax_s)
    dotted = [ln for ln in ax_s.get_lines() if ln.get_linestyle() == ":"]
    assert len(dotted) == 2 and list(dotted[0].get_xdata()) == [0.05, 0.1, 1.0]
    plt.close("all")


def test_kept_coordinates_counts_from_the_benchmark_record(tmp_path):
    """T8's count of the coordinates flat NormTopK keeps: read from the committed
    bench_dpsgd record, against d counted from the model (26,010 for Opacus's MNIST CNN)."""
    from datalens_lib.dpsgd import report

    kept = report.kept_coordinates()
    rec = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "results"
                      / "dpsgd-cpu-2core.json").read_text())
    mine = kept[kept.record == "dpsgd-cpu-2core.json"]
    assert list(mine.k) == [r["k"] for r in rec["rows"]]
    assert list(mine.kept_median) == [int(r["kept_median"]) for r in rec["rows"]]
    assert set(kept.d) == {26_010}
    (tmp_path / "dpsgd-x.json").write_text(json.dumps({"rows": [{"k": 0.5}]}))
    assert report.kept_coordinates(tmp_path).empty  # a record without counts gives no row
