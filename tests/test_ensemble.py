import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from datalens_lib.ensemble import (
    StackedAdam,
    TeacherEnsemble,
    _BatchedAffine,
    _bn,
    _linear,
    conv_layout,
    conv_memory_format,
    ensemble_logits,
)
from datalens_lib.models import BN_EPS, Discriminator, Generator


def _modules_from(ens, dtype=torch.float64):
    mods = []
    for t in range(ens.n):
        d = Discriminator(ens.y_dim, ens.shape).to(dtype)
        with torch.no_grad():
            for k, v in ens.teacher_state(t).items():
                d.params[k].copy_(v)
        mods.append(d)
    return mods


@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])  # CPU's and CUDA's
@pytest.mark.parametrize("shape,y_dim", [((1, 28, 28), 10), ((3, 32, 32), 3)])
def test_ensemble_equals_loop_of_modules(shape, y_dim, layout, monkeypatch):
    monkeypatch.setenv("DATALENS_CONV_LAYOUT", layout)
    torch.manual_seed(0)
    n, b = 5, 4
    ens = TeacherEnsemble(n, y_dim, shape, chunk=2, dtype=torch.float64,
                          generator=torch.Generator().manual_seed(1))
    mods = _modules_from(ens)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.5, 0.999), eps=1e-8)
            for m in mods]
    x_real = torch.rand(n, b, *shape, dtype=torch.float64)
    x_fake = torch.rand(n, b, *shape, dtype=torch.float64)
    y = torch.randint(0, y_dim, (n, b))
    # query gradients on identical parameters: -d/dx of the batch-mean BCE(D(x), 1)
    xq = torch.rand(b, *shape, dtype=torch.float64)
    yq = torch.randint(0, y_dim, (b,))
    g = torch.cat([ens.query_gradients(sl, xq, yq) for sl in ens.slices()], dim=1)
    assert g.shape == (b, n, xq[0].numel())
    for t, m in enumerate(mods):
        x = xq.clone().requires_grad_()
        F.softplus(-m(x, F.one_hot(yq, y_dim).double())).mean().backward()
        torch.testing.assert_close(g[:, t], -x.grad.flatten(1), rtol=1e-7, atol=1e-13)
    for step in (1, 2, 3):
        for sl in ens.slices():
            ens.train_step(sl, x_real[sl], x_fake[sl], y[sl], step)
        for t, (m, opt) in enumerate(zip(mods, opts, strict=True)):
            oh = F.one_hot(y[t], y_dim).double()
            loss = (F.softplus(-m(x_real[t], oh)).mean() + F.softplus(m(x_fake[t], oh)).mean())
            opt.zero_grad()
            loss.backward()
            opt.step()
    for t, m in enumerate(mods):
        state = ens.teacher_state(t)
        for k, v in m.params.items():
            # Adam divides by |g|: where a gradient is ~eps (or exactly 0 in theory, as for the
            # biases b1, b2 that feed a BatchNorm) float64 rounding shows up at ~1e-11; a real
            # discrepancy would show at the step size, 1e-3
            torch.testing.assert_close(state[k], v.detach(), rtol=1e-7, atol=1e-9)


def test_logits_chunking_invariant():
    ens = TeacherEnsemble(6, 10, (1, 28, 28), chunk=6, generator=torch.Generator().manual_seed(0))
    x = torch.rand(6, 3, 1, 28, 28)
    y = torch.randint(0, 10, (6, 3))
    full = ensemble_logits(ens.chunk_params(slice(0, 6)), x, y, 10)
    part = torch.cat([ensemble_logits(ens.chunk_params(slice(i, i + 2)), x[i:i + 2], y[i:i + 2],
                                      10) for i in (0, 2, 4)])
    torch.testing.assert_close(full, part)


def test_bf16_moments_track_fp32():
    torch.manual_seed(0)
    p32 = {"w": torch.zeros(4, 100)}
    p16 = {"w": torch.zeros(4, 100)}
    a32, a16 = StackedAdam(p32), StackedAdam(p16, moment_dtype=torch.bfloat16)
    for step in range(1, 51):
        g = {"w": torch.randn(4, 100) * 1e-3 + 1e-3}
        a32.update(p32, g, slice(0, 4), step)
        a16.update(p16, g, slice(0, 4), step)
    assert a16.m["w"].dtype == torch.bfloat16
    rel = (p16["w"] - p32["w"]).abs().sum() / p32["w"].abs().sum()
    assert rel < 0.01


def test_parameter_count_matches_official_mnist():
    ens = TeacherEnsemble(1, 10, (1, 28, 28))
    assert 550_000 < ens.num_parameters < 560_000


def test_generator_groups_equal_separate_calls():
    g = Generator(50, 10, (1, 28, 28)).double()
    z = torch.rand(6, 50, dtype=torch.float64) * 2 - 1
    y = F.one_hot(torch.randint(0, 10, (6,)), 10).double()
    both = g(z, y, groups=2)
    torch.testing.assert_close(both[:3], g(z[:3], y[:3]))
    torch.testing.assert_close(both[3:], g(z[3:], y[3:]))
    assert both.shape == (6, 1, 28, 28) and 0 <= both.min() and both.max() <= 1


def test_generator_reference_rows_fix_the_batchnorm_statistics_of_later_rows():
    """DP-GAN's private pairs (methods.dpgan): with ``reference`` = R, every row after the
    first R is normalised with the statistics of those R rows, so it is a function of its own
    (z, y) alone, however many rows follow."""
    torch.manual_seed(0)
    g = Generator(50, 10, (1, 28, 28)).double()
    with torch.no_grad():  # non-trivial affine BatchNorm parameters
        for bn in (g.bn0, g.bn1, g.bn2):
            bn["gamma"].uniform_(0.5, 1.5)
            bn["beta"].uniform_(-0.5, 0.5)
    z = torch.rand(9, 50, dtype=torch.float64) * 2 - 1
    y = F.one_hot(torch.randint(0, 10, (9,)), 10).double()
    z[6], y[6] = z[0], y[0]  # a later row equal to a reference row
    out = g(z, y, reference=4)
    torch.testing.assert_close(out[:4], g(z[:4], y[:4]))  # the reference batch itself
    torch.testing.assert_close(out[6], out[0])  # later rows: the reference's statistics
    for keep in (5, 7):  # and nothing of the other later rows
        torch.testing.assert_close(g(z[:keep], y[:keep], reference=4), out[:keep])
    # one batch of the later rows alone is not that, and without a reference batch a row
    # depends on how many rows share its batch
    assert (g(z[4:], y[4:]) - out[4:]).abs().max() > 1e-3
    assert (g(z[:5], y[:5])[4] - g(z, y)[4]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="reference"):
        g(z, y, reference=10)
    with pytest.raises(ValueError, match="one group"):
        g(z[:8], y[:8], groups=2, reference=2)


def test_adam_refuses_half_precision_parameters():
    with pytest.raises(ValueError, match="^parameters must be float32 or float64"):
        StackedAdam({"w": torch.zeros(2, 5, dtype=torch.bfloat16)})


def test_adam_updates_only_its_slice_and_state_roundtrips():
    p = {"w": torch.zeros(4, 3)}
    a = StackedAdam(p, moment_dtype=torch.bfloat16)
    a.update(p, {"w": torch.ones(2, 3)}, slice(1, 3), 1)
    assert p["w"][[0, 3]].abs().sum() == 0 and (p["w"][1:3] < 0).all()
    assert a.m["w"][[0, 3]].abs().sum() == 0 and a.m["w"].dtype == torch.bfloat16
    b = StackedAdam({"w": torch.zeros(4, 3)}, moment_dtype=torch.bfloat16)
    b.load_state_dict({k: {n: t.float() for n, t in v.items()} for k, v in
                       a.state_dict().items()})
    assert b.m["w"].dtype == torch.bfloat16 and b.v["w"].dtype == torch.bfloat16
    assert torch.equal(b.m["w"], a.m["w"]) and torch.equal(b.v["w"], a.v["w"])


def test_state_loads_in_place_and_checks_layout(tmp_path):
    """Resuming copies into the existing buffers (a memory-mapped paper-size checkpoint is
    never held twice) and refuses a state of another layout."""
    a = TeacherEnsemble(3, 10, (1, 28, 28), chunk=2, moment_dtype=torch.bfloat16,
                        generator=torch.Generator().manual_seed(0))
    x = torch.rand(3, 2, 1, 28, 28)
    for sl in a.slices():
        a.train_step(sl, x[sl], x[sl].flip(-1), torch.randint(0, 10, (3, 2))[sl], 1)
    torch.save(a.state_dict(), tmp_path / "s.pt")
    b = TeacherEnsemble(3, 10, (1, 28, 28), chunk=2, moment_dtype=torch.bfloat16,
                        generator=torch.Generator().manual_seed(1))
    ptrs = [t.data_ptr() for d in (b.params, b.adam.m, b.adam.v) for t in d.values()]
    b.load_state_dict(torch.load(tmp_path / "s.pt", mmap=True, weights_only=True))
    assert ptrs == [t.data_ptr() for d in (b.params, b.adam.m, b.adam.v) for t in d.values()]
    for k in a.params:
        assert torch.equal(a.params[k], b.params[k]) and torch.equal(a.adam.v[k], b.adam.v[k])
    small = TeacherEnsemble(2, 10, (1, 28, 28), chunk=2)
    with pytest.raises(RuntimeError):  # 3 teachers into 2
        small.load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="shape"):
        small.adam.load_state_dict(a.adam.state_dict())
    bad = {"m": {"w": torch.zeros(1)}, "v": {"w": torch.zeros(1)}}
    with pytest.raises(ValueError, match="^Adam state has tensors"):
        small.adam.load_state_dict(bad)


def test_ensemble_state_roundtrip_and_layout():
    a = TeacherEnsemble(3, 10, (1, 28, 28), chunk=2, generator=torch.Generator().manual_seed(0))
    b = TeacherEnsemble(3, 10, (1, 28, 28), chunk=2, generator=torch.Generator().manual_seed(1))
    x = torch.rand(3, 2, 1, 28, 28)
    y = torch.randint(0, 10, (3, 2))
    for sl in a.slices():
        a.train_step(sl, x[sl], x[sl].flip(-1), y[sl], 1)
    b.load_state_dict(a.state_dict())
    for k in a.params:
        assert torch.equal(a.params[k], b.params[k])
        assert torch.equal(a.adam.m[k], b.adam.m[k]) and torch.equal(a.adam.v[k], b.adam.v[k])
    d = Discriminator(10, (1, 28, 28))
    full = a.teacher_state(1)
    assert {k: tuple(v.shape) for k, v in full.items()} == {
        k: tuple(v.shape) for k, v in d.params.items()}
    # the label part of each weight comes last on the input axis
    assert torch.equal(full["w0"][:, -10:], a.params["w0y"][1])
    assert torch.equal(full["w3"][:, :-10], a.params["w3x"][1])
    assert [(s.start, s.stop) for s in a.slices()] == [(0, 2), (2, 3)]
    p = a.chunk_params(slice(0, 2), requires_grad=True)
    assert all(v.requires_grad and v.shape[0] == 2 for v in p.values())
    assert not any(v.requires_grad for v in a.chunk_params(slice(0, 2)).values())


def test_seeded_initialisation_ignores_the_global_rng_and_logits_are_n_by_B():
    torch.manual_seed(1)
    a = TeacherEnsemble(2, 10, (1, 28, 28), generator=torch.Generator().manual_seed(4))
    torch.manual_seed(2)
    b = TeacherEnsemble(2, 10, (1, 28, 28), generator=torch.Generator().manual_seed(4))
    for k in a.params:
        assert torch.equal(a.params[k], b.params[k]), k
    logits = ensemble_logits(a.chunk_params(slice(0, 2)), torch.rand(2, 3, 1, 28, 28),
                             torch.randint(0, 10, (2, 3)), 10)
    assert logits.shape == (2, 3)


def test_conv_weights_follow_the_official_truncated_normal():
    """w0, w1 ~ N(0, 0.02^2) truncated at two standard deviations (re-drawn, as TF's
    truncated_normal_initializer): the share of weights with 1.5 sd < |w| < 2 sd matches."""
    from scipy.stats import truncnorm

    ens = TeacherEnsemble(6, 10, (1, 28, 28), chunk=6, generator=torch.Generator().manual_seed(3))
    w = torch.cat([ens.params["w0x"].flatten(), ens.params["w0y"].flatten(),
                   ens.params["w1x"].flatten(), ens.params["w1y"].flatten()]).double()
    assert w.abs().max() <= 0.04
    dist = truncnorm(-2, 2, scale=0.02)
    p = 2 * (dist.cdf(0.04) - dist.cdf(0.03))
    share = ((w.abs() > 0.03) & (w.abs() <= 0.04)).double().mean().item()
    assert abs(share - p) < 5 * math.sqrt(p * (1 - p) / w.numel())
    assert abs(w.std().item() - dist.std()) < 0.01 * dist.std()


def test_bf16_compute_tracks_fp32_and_keeps_fp32_master_weights():
    """Opt-in bfloat16 forward/backward: the same function up to bfloat16 rounding (query
    gradients and losses within a few %), parameters and Adam in float32, chunking invariant
    (the reused compute buffers do not leak between chunks)."""
    kw = dict(generator=torch.Generator().manual_seed(2))
    f32 = TeacherEnsemble(5, 10, (1, 28, 28), chunk=2, **kw)
    bf16 = TeacherEnsemble(5, 10, (1, 28, 28), chunk=2, compute_dtype=torch.bfloat16,
                           generator=torch.Generator().manual_seed(2))
    assert all(v.dtype == torch.float32 for v in bf16.params.values())
    torch.manual_seed(0)
    xq, yq = torch.rand(6, 1, 28, 28), torch.randint(0, 10, (6,))
    g32 = torch.cat([f32.query_gradients(sl, xq, yq) for sl in f32.slices()], 1)
    g16 = torch.cat([bf16.query_gradients(sl, xq, yq) for sl in bf16.slices()], 1)
    assert g16.dtype == torch.float32 and g16.shape == g32.shape
    rel = (g16 - g32).norm(dim=-1) / g32.norm(dim=-1)  # per (query, teacher)
    print("relative error median", rel.median().item(), "max", rel.max().item())
    assert rel.median() < 0.08, rel.median()
    assert not torch.equal(g16, g32)  # it did run in bfloat16
    # the top-k coordinates TopAgg would pick largely agree
    top32 = g32.abs().topk(50, dim=-1).indices.sort(-1).values
    top16 = g16.abs().topk(50, dim=-1).indices.sort(-1).values
    overlap = [len(set(a.tolist()) & set(b.tolist())) / 50
               for a, b in zip(top32.flatten(0, 1), top16.flatten(0, 1), strict=True)]
    print("top-50 overlap", sum(overlap) / len(overlap))
    assert sum(overlap) / len(overlap) > 0.8
    xr, xf = torch.rand(5, 4, 1, 28, 28), torch.rand(5, 4, 1, 28, 28)
    y = torch.randint(0, 10, (5, 4))
    for step in (1, 2):
        l32 = torch.cat([f32.train_step(sl, xr[sl], xf[sl], y[sl], step) for sl in f32.slices()])
        l16 = torch.cat([bf16.train_step(sl, xr[sl], xf[sl], y[sl], step)
                         for sl in bf16.slices()])
        torch.testing.assert_close(l16, l32, rtol=0.03, atol=0.01)
    assert all(v.dtype == torch.float32 for v in bf16.params.values())
    for k in f32.params:  # one Adam step moves each weight by ~lr; bf16 grads move it alike
        d32 = f32.params[k] - TeacherEnsemble(5, 10, (1, 28, 28), chunk=2, generator=torch
                                              .Generator().manual_seed(2)).params[k]
        d16 = bf16.params[k] - f32.params[k] + d32
        if k.startswith("w"):
            assert (d16.sign() == d32.sign()).float().mean() > 0.9, k


def test_compute_dtype_is_validated():
    with pytest.raises(ValueError, match=r"compute_dtype must be the parameters' dtype "
                                         r"\(torch.float32\) or torch.bfloat16, got torch.float16"):
        TeacherEnsemble(2, 10, (1, 28, 28), compute_dtype=torch.float16)


@pytest.mark.parametrize("compiled", [False, True])
def test_narrow_moment_kernel_is_pytorch_fused_adam(compiled, monkeypatch):
    """With float32 moments the kernel must reproduce torch._fused_adam_ to float rounding
    (b1 = 0.9, so a swapped b1 / 1 - b1 would show), eagerly and compiled."""
    from datalens_lib import ensemble as en

    if not compiled:
        monkeypatch.setenv("DATALENS_COMPILE", "0")
    en._adam_kernel.cache_clear()
    kernel = en._adam_kernel("cpu")
    en._adam_kernel.cache_clear()
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(1000, generator=gen)
    m, v = torch.randn(1000, generator=gen) * 0.1, torch.rand(1000, generator=gen) * 0.01
    ref = [p.clone(), m.clone(), v.clone()]
    for step in (1, 2, 7):
        g = torch.randn(1000, generator=gen)
        kernel(p, g, m, v, en.adam_hyper(1e-3, 0.9, 0.999, 1e-8, step, "cpu"))
        torch._fused_adam_([ref[0]], [g.clone()], [ref[1]], [ref[2]], [],
                           [torch.tensor(float(step))], lr=1e-3, beta1=0.9, beta2=0.999,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    for a, b in zip((p, m, v), ref, strict=True):  # compiled: multiply-adds may contract
        torch.testing.assert_close(a, b, rtol=1e-5 if compiled else 2e-6, atol=1e-9)
    assert not torch.equal(p, torch.randn(1000, generator=torch.Generator().manual_seed(0)))


def test_bf16_compute_is_chunking_invariant():
    """Each teacher's bfloat16 result does not depend on the chunk it shares buffers with."""
    kw = dict(compute_dtype=torch.bfloat16)
    a = TeacherEnsemble(5, 10, (1, 28, 28), chunk=2, generator=torch.Generator().manual_seed(4),
                        **kw)
    b = TeacherEnsemble(5, 10, (1, 28, 28), chunk=5, **kw)
    b.load_state_dict(a.state_dict())  # the same teachers (initial draws follow the chunks)
    torch.manual_seed(1)
    xq, yq = torch.rand(6, 1, 28, 28), torch.randint(0, 10, (6,))
    ga = torch.cat([a.query_gradients(sl, xq, yq) for sl in a.slices()], 1)
    gb = torch.cat([b.query_gradients(sl, xq, yq) for sl in b.slices()], 1)
    rel = (ga - gb).norm(dim=-1) / gb.norm(dim=-1)
    assert rel.max() < 0.02, rel.max()


def test_conv_layout_gives_the_same_numbers_and_is_validated(monkeypatch):
    """The grouped convolutions' memory format (a speed choice) leaves the result unchanged up
    to float rounding; an unknown layout is refused."""
    x = torch.rand(3, 4, 1, 28, 28)
    y = torch.randint(0, 10, (3, 4))
    outs = []
    for layout in ("channels_last", "contiguous"):
        monkeypatch.setenv("DATALENS_CONV_LAYOUT", layout)
        ens = TeacherEnsemble(3, 10, (1, 28, 28), chunk=3,
                              generator=torch.Generator().manual_seed(0))
        loss = ens.train_step(slice(0, 3), x, x.flip(-1), y, 1)
        outs.append((loss, ens.query_gradients(slice(0, 3), x[0], y[0])))
    assert torch.allclose(outs[0][0], outs[1][0], rtol=1e-5)
    assert torch.allclose(outs[0][1], outs[1][1], rtol=1e-4, atol=1e-7)
    assert outs[0][1].abs().max() > 1e-4
    monkeypatch.setenv("DATALENS_CONV_LAYOUT", "nhwc")
    with pytest.raises(ValueError, match="^DATALENS_CONV_LAYOUT must be"):
        TeacherEnsemble(3, 10, (1, 28, 28), chunk=3).train_step(
            slice(0, 3), x, x.flip(-1), y, 1)


def test_conv_layout_default_follows_the_device(monkeypatch):
    """``auto`` (the default) picks channels-last on CPU and NCHW on CUDA, where cuDNN's
    channels-last grouped convolutions are 2.3x slower (benchmarks/README.md); the variable
    overrides it for either device."""
    monkeypatch.delenv("DATALENS_CONV_LAYOUT", raising=False)
    assert conv_layout("cpu") == "channels_last"
    assert conv_layout("cuda") == "contiguous"
    assert conv_memory_format(torch.device("cpu")) == torch.channels_last
    monkeypatch.setenv("DATALENS_CONV_LAYOUT", "contiguous")
    assert conv_layout("cpu") == "contiguous"
    monkeypatch.setenv("DATALENS_CONV_LAYOUT", "channels_last")
    assert conv_layout("cuda") == "channels_last"


def _adam_reference(p, g, m, v, t, lr=1e-3, b1=0.5, b2=0.999, eps=1e-8):
    m.mul_(b1).add_((1 - b1) * g)
    v.mul_(b2).add_((1 - b2) * g * g)
    p.sub_(lr * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + eps))


@pytest.mark.parametrize("moments", [None, torch.bfloat16])
def test_shared_adam_slots_follow_the_official_sequence(moments):
    """adam_slots = S (issue 12): teachers s, s + S, ... share one Adam state, updated in
    teacher order with the slot's own step count (as the official per-slot optimiser)."""
    n, S, chunk = 6, 3, 3
    dtype = torch.float64 if moments is None else torch.float32
    params = {"w": torch.zeros(n, 5, dtype=dtype)}
    adam = StackedAdam(params, moment_dtype=moments, slots=S)
    assert adam.m["w"].shape == (S, 5)
    ref_p = torch.zeros(n, 5, dtype=torch.float64)
    ref_m, ref_v, ref_t = torch.zeros(S, 5, dtype=torch.float64), torch.zeros(
        S, 5, dtype=torch.float64), [0] * S
    gen = torch.Generator().manual_seed(0)
    for rnd in range(3):  # three generator steps, each: chunk 0..2 then 3..5
        for c0 in range(0, n, chunk):
            g = torch.randn(chunk, 5, generator=gen, dtype=torch.float64) * 1e-3
            adam.update(params, {"w": g.to(dtype)}, slice(c0, c0 + chunk), step=rnd + 1)
            for i in range(chunk):
                s = (c0 + i) % S
                ref_t[s] += 1
                _adam_reference(ref_p[c0 + i], g[i], ref_m[s], ref_v[s], ref_t[s])
    assert adam.slot_steps == [6, 6, 6]
    tol = dict(rtol=1e-6, atol=1e-9) if moments is None else dict(rtol=0.02, atol=1e-5)
    torch.testing.assert_close(params["w"].double(), ref_p, **tol)
    st = adam.state_dict()
    again = StackedAdam({"w": torch.zeros(n, 5, dtype=dtype)}, moment_dtype=moments, slots=S)
    again.load_state_dict(st)
    assert again.slot_steps == [6, 6, 6]
    with pytest.raises(ValueError, match="adam_slots"):
        StackedAdam({"w": torch.zeros(n, 5)}).load_state_dict(st)
    with pytest.raises(ValueError, match="wrap around"):
        adam.update(params, {"w": torch.zeros(2, 5, dtype=dtype)}, slice(2, 4), 1)


def test_init_slots_and_adam_slots_in_the_ensemble():
    ens = TeacherEnsemble(6, 10, (1, 28, 28), chunk=2, init_slots=2, adam_slots=2,
                          generator=torch.Generator().manual_seed(0))
    for k, v in ens.params.items():
        assert torch.equal(v[0], v[2]) and torch.equal(v[1], v[5]), k
    w = next(k for k, v in ens.params.items() if v[0].numel() > 100)  # a weight tensor
    assert not torch.equal(ens.params[w][0], ens.params[w][1])
    plain = TeacherEnsemble(6, 10, (1, 28, 28), chunk=2,
                            generator=torch.Generator().manual_seed(0))
    assert not torch.equal(plain.params[w][0], plain.params[w][2])
    x = torch.rand(2, 3, 1, 28, 28)
    y = torch.randint(0, 10, (2, 3))
    for sl in ens.slices():
        ens.train_step(sl, x, x, y, 1)
    assert ens.adam.slot_steps == [3, 3]
    with pytest.raises(ValueError, match="multiple of the chunk"):
        TeacherEnsemble(6, 10, (1, 28, 28), chunk=4, adam_slots=2)
    with pytest.raises(ValueError, match="divide the number of teachers"):
        TeacherEnsemble(6, 10, (1, 28, 28), chunk=2, adam_slots=4)


def test_batched_affine_and_batchnorm_are_the_textbook_functions():
    """The fast fully connected layer (custom backward) and the two-pass BatchNorm are the same
    functions as baddbmm under autograd and ``var(unbiased=False)``, gradients included, and
    the affine layer skips the gradients nobody asked for."""
    g = torch.Generator().manual_seed(0)
    h, w, b = (torch.randn(s, generator=g, dtype=torch.float64) for s in ((3, 5, 7), (3, 4, 7),
                                                                           (3, 4)))
    assert torch.autograd.gradcheck(_linear, (h.requires_grad_(), w.requires_grad_(),
                                              b.requires_grad_()))
    # the weight gradient comes out contiguous in w's layout (what the Adam kernel reads), and
    # only the gradients asked for are computed
    go = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    for need in ((True, False, False), (False, True, True), (True, True, True)):
        ctx = SimpleNamespace(saved_tensors=(h.detach(), w.detach()), needs_input_grad=need)
        out = _BatchedAffine.backward(ctx, go)
        assert [o is not None for o in out] == list(need)
        if need[1]:
            assert out[1].is_contiguous() and out[1].shape == w.shape
    ref = torch.baddbmm(b[:, None, :], h, w.transpose(1, 2))
    torch.testing.assert_close(_linear(h, w, b), ref)
    (gh,) = torch.autograd.grad(_linear(h, w.detach(), b.detach()).square().sum(), h)
    (gh_ref,) = torch.autograd.grad(ref.square().sum(), h)
    torch.testing.assert_close(gh, gh_ref)

    for shape, dims, gshape in (((2, 6, 3, 4, 5, 5), (1, 4, 5), (1, 1, 3, 4, 1, 1)),
                                ((3, 2, 6, 8), (2,), (3, 1, 1, 8))):
        x = torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True)
        gamma = torch.randn(gshape, generator=g, dtype=torch.float64, requires_grad=True)
        beta = torch.randn(gshape, generator=g, dtype=torch.float64, requires_grad=True)
        mean = x.mean(dim=dims, keepdim=True)
        ref = ((x - mean) * torch.rsqrt(x.var(dim=dims, unbiased=False, keepdim=True) + BN_EPS)
               * gamma + beta)
        out = _bn(x, gamma, beta, dims)
        torch.testing.assert_close(out, ref)
        go = torch.randn(shape, generator=g, dtype=torch.float64)
        for a, r in zip(torch.autograd.grad(out, (x, gamma, beta), go),
                        torch.autograd.grad(ref, (x, gamma, beta), go), strict=True):
            torch.testing.assert_close(a, r)
    # the generator's grouped BatchNorm: each slice of the batch with its own statistics
    from datalens_lib.models import batch_norm

    for shape in ((6, 4, 5, 5), (6, 7)):
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        gamma, beta = torch.randn(2, shape[1], generator=g, dtype=torch.float64)
        ref = torch.cat([F.batch_norm(half, None, None, gamma, beta, training=True, eps=BN_EPS)
                         for half in x.chunk(2)])
        torch.testing.assert_close(batch_norm(x, gamma, beta, groups=2), ref)
