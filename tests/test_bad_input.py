"""Property-based tests (hypothesis) of bad input over the public API and every CLI command.

The project's rule (``datalens_lib._validate``, ``tests/test_validation.py``): every public
parameter is validated, and a bad one gets a ``ValueError`` whose message starts with the
parameter's name. ``test_validation.py`` pins one hand-picked value per parameter; here
hypothesis generates the values (NaN, +-inf, negative, zero, huge, wrong types, wrong shapes
and dtypes, random bytes) and checks, for each:

* the API refuses it with a ``ValueError`` naming the parameter (never a ``TypeError``, an
  ``OverflowError`` or an error from deep inside torch/numpy, never a silent result);
* the dataset readers raise only ``DatasetFileError`` on any byte string;
* every CLI subcommand exits with a status != 0 and exactly one ``error: ...`` line on stderr
  that names the option, never a traceback, and before any heavy work: tripwires
  (:func:`tripwires`) stop a case that reads a dataset, downloads, executes a notebook or
  submits a job, so no case trains or downloads anything even where the data is present.

Cases whose fix lies in a module this file's author could not change are marked
``xfail(strict=True)`` with the reason; they turn into failures once fixed (then drop the mark).

Every property counts the examples it tried in :data:`TRIED`; ``test_zz_report`` (last in
the file) prints the total. The settings are deterministic (``derandomize=True``, no example
database) and never judge wall-clock time (``deadline=None``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import importlib
import json
import math
import re
import struct
import typing
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from datalens_lib import aggregation as agg
from datalens_lib import privacy
from datalens_lib.aggregation import d2pfed, fetchsgd, gpate
from datalens_lib.config import TrainConfig, load_config
from datalens_lib.data import DatasetFileError, parse_idx, read_idx
from datalens_lib.dpsgd import compress
from datalens_lib.dpsgd.optimizer import TopAggDPOptimizer
from datalens_lib.privacy import gaussian, subsampled

part = importlib.import_module("datalens_lib.data.partition")  # (the package re-exports a
# function of that name)

# one worker runs the whole file under `pytest -n N --dist loadgroup` (the report test
# counts the examples of the others)
pytestmark = pytest.mark.xdist_group("bad-input")

#: examples tried per property (test name -> count); read by test_zz_report
TRIED: Counter[str] = Counter()


def _count(request) -> None:
    TRIED[request.node.originalname] += 1


def fast(n: int = 25):
    """Deterministic settings, no wall-clock verdicts, no example database."""
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink),
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow,
                                           HealthCheck.filter_too_much])


# ------------------------------------------------------------------------------ strategies


class _Opaque:
    """An object of no numeric type (fixed repr, so examples are reproducible)."""

    def __repr__(self) -> str:
        return "<opaque>"


#: values of no numeric type at all
NON_NUMBERS = st.sampled_from(["1.0", "nan", "", "abc", True, False, [1.0], (2,), {"x": 1},
                               b"1", 1j, _Opaque(), np.str_("3")])
HUGE_INTS = st.integers(min_value=10**309, max_value=10**400)  # no float holds them
NAN_INF = st.sampled_from([math.nan, math.inf, -math.inf, np.float64("nan"), np.float32("inf")])


def bad_positive_float(none_ok: bool = False):
    """Anything ``_validate.positive_float`` must refuse (None too unless ``none_ok``)."""
    s = [NAN_INF, st.floats(max_value=0.0, allow_nan=False), st.integers(max_value=0),
         HUGE_INTS, NON_NUMBERS]
    return st.one_of(*s, *([] if none_ok else [st.none()]))


def bad_nonneg_float():
    return st.one_of(NAN_INF, st.floats(max_value=-1e-300, allow_nan=False),
                     st.integers(max_value=-1), HUGE_INTS, NON_NUMBERS, st.none())


def bad_int(minimum: int = 1, none_ok: bool = False):
    """Anything ``_validate.positive_int(minimum=...)`` must refuse."""
    s = [st.integers(max_value=minimum - 1), st.floats(allow_nan=True),
         st.integers(min_value=2**63, max_value=10**400), NON_NUMBERS,
         st.sampled_from([np.float64(3.0), np.float32(2.0)])]
    return st.one_of(*s, *([] if none_ok else [st.none()]))


def bad_open_unit():
    """Outside (0, 1): delta."""
    return st.one_of(st.floats().filter(lambda x: not 0 < x < 1), st.integers().filter(
        lambda x: not 0 < x < 1), HUGE_INTS, NON_NUMBERS, st.none())


def bad_half_open_unit():
    """Outside (0, 1]: a sampling rate q."""
    return st.one_of(st.floats().filter(lambda x: not 0 < x <= 1), st.integers().filter(
        lambda x: not 0 < x <= 1), HUGE_INTS, NON_NUMBERS, st.none())


def bad_orders():
    """RDP orders: <= 1, NaN, inf, empty, not a vector, not numbers."""
    num = st.floats(allow_nan=True, allow_infinity=True)
    return st.one_of(
        st.lists(num, min_size=1, max_size=5).filter(
            lambda v: not all(math.isfinite(x) and x > 1 for x in v)),
        st.just([]), st.just([[2.0, 3.0]]), st.just(2.0), st.just(None),
        st.just(["a", "b"]), st.just([{"x": 1}]), st.just([10**400]))


def bad_float_array(shape=(2, 8)):
    """An array of the right shape holding NaN or +-inf somewhere."""
    @st.composite
    def draw(draw):
        a = np.zeros(shape)
        i = draw(st.integers(0, a.size - 1))
        a.flat[i] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        return a
    return draw()


# ------------------------------------------------------------------- API: scalar parameters

G = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))
G2 = G[:, 0]
V = torch.zeros(2, 8)
COUNTS = torch.zeros(2, 4, 5, dtype=torch.float64)


def _acc():
    return privacy.TopAggAccountant(5, 100.0, 1e-5)


def _model_optimizer():
    model = torch.nn.Linear(3, 2)
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _dp_opt(**kw):
    base = {"noise_multiplier": 1.0, "max_grad_norm": 1.0, "expected_batch_size": 8, "k": 0.5}
    return TopAggDPOptimizer(_model_optimizer(), **{**base, **kw})


#: (function, valid keyword arguments): each parameter named in API_BAD below is replaced by a
#: generated bad value, the others stay valid
API = {
    # aggregation
    "topagg": (lambda **a: agg.topagg(**a), dict(grads=G, k=2, sigma=1.0, beta=0.1, c=None)),
    "TopAgg": (lambda **a: agg.TopAgg(**a), dict(k=2, sigma=1.0, beta=0.1, c=None)),
    "TopAgg.release": (lambda n_teachers: agg.TopAgg(2, 1.0, 0.1).release(V, None, n_teachers),
                       dict(n_teachers=3)),
    "vote_sum": (lambda **a: agg.vote_sum(**a), dict(grads=G, k=2, c=None)),
    "topk_sto_sign": (lambda **a: agg.topk_sto_sign(**a), dict(grads=G2, k=2, c=1.0)),
    "topk_sto_sign_sparse": (lambda **a: agg.topk_sto_sign_sparse(**a),
                             dict(grads=G2, k=2, c=1.0)),
    "noisy_threshold": (lambda **a: agg.noisy_threshold(**a),
                        dict(votes=V, sigma=1.0, beta=0.1, n_teachers=3)),
    "D2PFed": (lambda **a: agg.D2PFed(**a), dict(sigma=1.0, beta=0.1, c=1e-3, levels=4)),
    "D2PFed.sensitivity": (lambda d, n_teachers: agg.D2PFed(1.0, 0.1).sensitivity(d, n_teachers),
                           dict(d=8, n_teachers=3)),
    "D2PFed.release": (lambda n_teachers: agg.D2PFed(1.0, 0.1).release(V, None, n_teachers),
                       dict(n_teachers=3)),
    "klevel_coded": (lambda **a: d2pfed.klevel_coded(**a), dict(grads=G, levels=4, c=1e-3)),
    "padded_dim": (lambda **a: d2pfed.padded_dim(**a), dict(d=8)),
    "FetchSGD": (lambda **a: agg.FetchSGD(**a),
                 dict(k=2, sigma=1.0, beta=0.1, c=1e-3, rows=3, cols=16, seed=1)),
    "FetchSGD.sensitivity": (lambda d, n_teachers: agg.FetchSGD(2, 1.0, 0.1, rows=3, cols=16)
                             .sensitivity(d, n_teachers), dict(d=8, n_teachers=3)),
    "CountSketch": (lambda **a: fetchsgd.CountSketch(**a), dict(d=8, rows=3, cols=16, seed=1)),
    "random_projection": (lambda **a: gpate.random_projection(
        generator=torch.Generator().manual_seed(0), **a), dict(queries=2, d=8, proj_dim=4)),
    "projected_histogram": (lambda **a: gpate.projected_histogram(
        G, torch.ones(2, 8, 4), **a), dict(clip=1.0, bins=5)),
    "confident_gnmax": (lambda **a: gpate.confident_gnmax(COUNTS, **a),
                        dict(n_teachers=3, sigma_thresh=1.0, sigma_vote=1.0, threshold_frac=0.5,
                             clip=1.0)),
    # privacy
    "noise_multiplier": (lambda **a: privacy.noise_multiplier(**a), dict(k=5, sigma=100.0)),
    "topagg_rdp": (lambda **a: privacy.topagg_rdp([2.0, 3.0], **a), dict(k=5, sigma=100.0)),
    "rdp_to_epsilon_paper": (lambda **a: privacy.rdp_to_epsilon_paper([0.1, 0.2], [2.0, 3.0],
                                                                      **a), dict(delta=1e-5)),
    "topagg_epsilon": (lambda **a: privacy.topagg_epsilon(**a),
                       dict(queries=3, k=5, sigma=100.0, delta=1e-5)),
    "topagg_max_queries": (lambda **a: privacy.topagg_max_queries(**a),
                           dict(epsilon=1.0, k=5, sigma=100.0, delta=1e-5)),
    "topagg_sigma_for_queries": (lambda **a: privacy.topagg_sigma_for_queries(**a),
                                 dict(queries=3, epsilon=1.0, k=5, delta=1e-5, rtol=1e-3)),
    "delta_note": (lambda **a: privacy.accountant.delta_note(**a), dict(delta=1e-5, n=100)),
    "outcome_log_probs": (lambda **a: privacy.outcome_log_probs(V.numpy(), **a),
                          dict(sigma=1.0, threshold=0.5)),
    "topagg_log_q_tilde": (lambda **a: privacy.topagg_log_q_tilde(V.numpy(), **a),
                           dict(sigma=1.0, beta=0.1, n_teachers=3)),
    "data_dependent_rdp": (lambda **a: privacy.data_dependent_rdp(orders=[2.0, 3.0], **a),
                           dict(log_q=-5.0, k=5, sigma=100.0)),
    "gaussian_data_dependent_rdp": (
        lambda **a: privacy.data_dependent.gaussian_data_dependent_rdp(orders=[2.0, 3.0], **a),
        dict(log_q=-5.0, var=10.0)),
    "TopAggAccountant": (lambda **a: privacy.TopAggAccountant(**a),
                         dict(k=5, sigma=100.0, delta=1e-5)),
    "TopAggAccountant.add_queries": (lambda n: _acc().add_queries(n), dict(n=3)),
    "TopAggAccountant.epsilon_if": (lambda extra_queries: _acc().epsilon_if(extra_queries),
                                    dict(extra_queries=3)),
    "TopAggAccountant.add_votes": (lambda **a: _acc().add_votes(V.numpy(), **a),
                                   dict(beta=0.1, n_teachers=3)),
    "gpate_noise_multiplier": (lambda **a: gaussian.gpate_noise_multiplier(**a),
                               dict(sigma_thresh=1.0, sigma_vote=1.0, proj_dim=4)),
    "gaussian_epsilon": (lambda **a: gaussian.gaussian_epsilon(**a),
                         dict(queries=3, z=1.0, delta=1e-5)),
    "gaussian_max_queries": (lambda **a: gaussian.gaussian_max_queries(**a),
                             dict(epsilon=1.0, z=1.0, delta=1e-5)),
    "GaussianQueryAccountant": (lambda **a: gaussian.GaussianQueryAccountant(**a),
                                dict(z=1.0, delta=1e-5)),
    "CompressorAccountant": (lambda **a: gaussian.CompressorAccountant(**a),
                             dict(z_charged=1.0, z_sound=1.0, delta=1e-5)),
    "GPATEDataDependentLedger": (lambda **a: gaussian.GPATEDataDependentLedger(**a),
                                 dict(sigma_thresh=1.0, sigma_vote=1.0, threshold=2.0,
                                      delta=1e-5)),
    "dpsgd_epsilon": (lambda **a: subsampled.dpsgd_epsilon(**a),
                      dict(steps=3, q=0.01, sigma=1.0, delta=1e-5)),
    "dpsgd_steps_for_budget": (lambda **a: subsampled.dpsgd_steps_for_budget(**a),
                               dict(epsilon=1.0, q=0.01, sigma=1.0, delta=1e-5,
                                    upper_limit=10**6)),
    # DP-SGD: compression and the optimizer (C = max_grad_norm, sigma = noise_multiplier)
    "norm_topk": (lambda **a: compress.norm_topk(G2, **a), dict(k=0.5, prefilter=4)),
    "norm_topk_selection": (lambda **a: list(compress.norm_topk_selection(G2, **a)),
                            dict(k=0.5, prefilter=4)),
    "dim_topk": (lambda **a: compress.dim_topk(G2, **a), dict(k=0.5)),
    "compress.sensitivity": (lambda **a: compress.sensitivity("norm", **a),
                             dict(k=0.5, max_grad_norm=1.0)),
    "TopAggDPOptimizer": (_dp_opt, dict(noise_multiplier=1.0, max_grad_norm=1.0,
                                        expected_batch_size=8, k=0.5)),
    # datasets: the teachers' partition
    "partition": (lambda **a: part.partition(np.arange(20) % 4, **a), dict(n_teachers=3, seed=0)),
    "shuffled_partition": (lambda **a: part.shuffled_partition(**a),
                           dict(n=20, n_teachers=3, seed=0)),
    "teacher_partition": (lambda **a: part.teacher_partition(
        "shuffled", np.arange(20) % 4, **a), dict(n_teachers=3, seed=0)),
}

#: the generated bad values of each parameter, by the kind of parameter
BAD = {
    "k_topagg": st.one_of(bad_int(), st.integers(min_value=9, max_value=2**62)),  # k <= d = 8
    "k_frac": st.one_of(bad_positive_float(), st.just(math.inf)),  # DP-SGD's top-k fraction
    "pos_int": bad_int(),
    "nonneg_int": bad_int(minimum=0),
    "levels": bad_int(minimum=2),
    "pos_float": bad_positive_float(),
    "pos_float_or_none": bad_positive_float(none_ok=True),
    "nonneg_float": bad_nonneg_float(),
    "delta": bad_open_unit(),
    "q": bad_half_open_unit(),
    "log_q": st.one_of(st.floats(min_value=1e-300), st.sampled_from([math.nan, math.inf,
                                                                     -math.inf]),
                       NON_NUMBERS, st.none()),
    "prefilter": st.one_of(bad_int(none_ok=True)),
    "threshold_frac": st.one_of(st.floats().filter(lambda x: not 0 < x <= 1), NON_NUMBERS,
                                st.none()),
    "seed": bad_int(minimum=0),
}

#: (API key, parameter, kind of bad value)
API_BAD = [
    ("topagg", "grads", None), ("topagg", "k", "k_topagg"), ("topagg", "sigma", "pos_float"),
    ("topagg", "beta", "nonneg_float"), ("topagg", "c", "pos_float_or_none"),
    ("TopAgg", "k", "pos_int"), ("TopAgg", "sigma", "pos_float"),
    ("TopAgg", "beta", "nonneg_float"), ("TopAgg", "c", "pos_float_or_none"),
    ("TopAgg.release", "n_teachers", "pos_int"),
    ("vote_sum", "k", "k_topagg"), ("vote_sum", "c", "pos_float_or_none"),
    ("topk_sto_sign", "k", "k_topagg"), ("topk_sto_sign", "c", "pos_float_or_none"),
    ("topk_sto_sign_sparse", "k", "k_topagg"), ("topk_sto_sign_sparse", "c", "pos_float_or_none"),
    ("noisy_threshold", "sigma", "pos_float"), ("noisy_threshold", "beta", "nonneg_float"),
    ("noisy_threshold", "n_teachers", "pos_int"),
    ("D2PFed", "sigma", "pos_float"), ("D2PFed", "beta", "nonneg_float"),
    ("D2PFed", "c", "pos_float"), ("D2PFed", "levels", "levels"),
    ("D2PFed.sensitivity", "d", "pos_int"), ("D2PFed.release", "n_teachers", "pos_int"),
    ("klevel_coded", "levels", "levels"), ("klevel_coded", "c", "pos_float"),
    ("padded_dim", "d", "pos_int"),
    ("FetchSGD", "k", "pos_int"), ("FetchSGD", "sigma", "pos_float"),
    ("FetchSGD", "beta", "nonneg_float"), ("FetchSGD", "c", "pos_float_or_none"),
    ("FetchSGD", "rows", "pos_int"), ("FetchSGD", "cols", "pos_int"),
    ("FetchSGD", "seed", "seed"),
    ("FetchSGD.sensitivity", "d", "pos_int"), ("FetchSGD.sensitivity", "n_teachers", "pos_int"),
    ("CountSketch", "d", "pos_int"), ("CountSketch", "rows", "pos_int"),
    ("CountSketch", "cols", "pos_int"), ("CountSketch", "seed", "seed"),
    ("random_projection", "queries", "pos_int"), ("random_projection", "d", "pos_int"),
    ("random_projection", "proj_dim", "pos_int"),
    ("projected_histogram", "clip", "pos_float"), ("projected_histogram", "bins", "pos_int"),
    ("confident_gnmax", "n_teachers", "pos_int"),
    ("confident_gnmax", "sigma_thresh", "pos_float"),
    ("confident_gnmax", "sigma_vote", "pos_float"),
    ("confident_gnmax", "threshold_frac", "threshold_frac"),
    ("confident_gnmax", "clip", "pos_float"),
    ("noise_multiplier", "k", "pos_int"), ("noise_multiplier", "sigma", "pos_float"),
    ("topagg_rdp", "k", "pos_int"), ("topagg_rdp", "sigma", "pos_float"),
    ("rdp_to_epsilon_paper", "delta", "delta"),
    ("topagg_epsilon", "queries", "nonneg_int"), ("topagg_epsilon", "k", "pos_int"),
    ("topagg_epsilon", "sigma", "pos_float"), ("topagg_epsilon", "delta", "delta"),
    ("topagg_max_queries", "epsilon", "pos_float"), ("topagg_max_queries", "k", "pos_int"),
    ("topagg_max_queries", "sigma", "pos_float"), ("topagg_max_queries", "delta", "delta"),
    ("topagg_sigma_for_queries", "queries", "pos_int"),
    ("topagg_sigma_for_queries", "epsilon", "pos_float"),
    ("topagg_sigma_for_queries", "k", "pos_int"),
    ("topagg_sigma_for_queries", "delta", "delta"),
    ("topagg_sigma_for_queries", "rtol", "pos_float"),
    ("delta_note", "delta", "pos_float"), ("delta_note", "n", "pos_int"),
    ("outcome_log_probs", "sigma", "pos_float"),
    ("outcome_log_probs", "threshold", "nonneg_float"),
    ("topagg_log_q_tilde", "sigma", "pos_float"), ("topagg_log_q_tilde", "beta", "nonneg_float"),
    ("topagg_log_q_tilde", "n_teachers", "pos_int"),
    ("data_dependent_rdp", "log_q", "log_q"), ("data_dependent_rdp", "k", "pos_int"),
    ("data_dependent_rdp", "sigma", "pos_float"),
    ("gaussian_data_dependent_rdp", "log_q", "log_q"),
    ("gaussian_data_dependent_rdp", "var", "pos_float"),
    ("TopAggAccountant", "k", "pos_int"), ("TopAggAccountant", "sigma", "pos_float"),
    ("TopAggAccountant", "delta", "delta"),
    ("TopAggAccountant.add_queries", "n", "nonneg_int"),
    ("TopAggAccountant.epsilon_if", "extra_queries", "nonneg_int"),
    ("TopAggAccountant.add_votes", "beta", "nonneg_float"),
    ("TopAggAccountant.add_votes", "n_teachers", "pos_int"),
    ("gpate_noise_multiplier", "sigma_thresh", "pos_float"),
    ("gpate_noise_multiplier", "sigma_vote", "pos_float"),
    ("gpate_noise_multiplier", "proj_dim", "pos_int"),
    ("gaussian_epsilon", "queries", "nonneg_int"), ("gaussian_epsilon", "z", "pos_float"),
    ("gaussian_epsilon", "delta", "delta"),
    ("gaussian_max_queries", "epsilon", "pos_float"), ("gaussian_max_queries", "z", "pos_float"),
    ("gaussian_max_queries", "delta", "delta"),
    ("GaussianQueryAccountant", "z", "pos_float"), ("GaussianQueryAccountant", "delta", "delta"),
    ("CompressorAccountant", "z_charged", "pos_float"),
    ("CompressorAccountant", "z_sound", "pos_float"),
    ("CompressorAccountant", "delta", "delta"),
    ("GPATEDataDependentLedger", "sigma_thresh", "pos_float"),
    ("GPATEDataDependentLedger", "sigma_vote", "pos_float"),
    ("GPATEDataDependentLedger", "threshold", "pos_float"),
    ("GPATEDataDependentLedger", "delta", "delta"),
    ("dpsgd_epsilon", "steps", "nonneg_int"), ("dpsgd_epsilon", "q", "q"),
    ("dpsgd_epsilon", "sigma", "pos_float"), ("dpsgd_epsilon", "delta", "delta"),
    ("dpsgd_steps_for_budget", "epsilon", "pos_float"), ("dpsgd_steps_for_budget", "q", "q"),
    ("dpsgd_steps_for_budget", "sigma", "pos_float"),
    ("dpsgd_steps_for_budget", "delta", "delta"),
    ("dpsgd_steps_for_budget", "upper_limit", "pos_int"),
    ("norm_topk", "k", "k_frac"), ("norm_topk", "prefilter", "prefilter"),
    ("norm_topk_selection", "k", "k_frac"), ("norm_topk_selection", "prefilter", "prefilter"),
    ("dim_topk", "k", "k_frac"),
    ("compress.sensitivity", "k", "k_frac"),
    ("compress.sensitivity", "max_grad_norm", "pos_float"),
    ("TopAggDPOptimizer", "noise_multiplier", "nonneg_float"),
    ("TopAggDPOptimizer", "max_grad_norm", "pos_float"),
    ("TopAggDPOptimizer", "expected_batch_size", "pos_int_or_none"),
    ("TopAggDPOptimizer", "k", "k_frac"),
    ("partition", "n_teachers", "pos_int"), ("partition", "seed", "seed"),
    ("shuffled_partition", "n", "nonneg_int"), ("shuffled_partition", "n_teachers", "pos_int"),
    ("shuffled_partition", "seed", "seed"),
    ("teacher_partition", "n_teachers", "pos_int"), ("teacher_partition", "seed", "seed"),
]
API_BAD = [c for c in API_BAD if c[2] is not None]
BAD["pos_int_or_none"] = bad_int(none_ok=True)

#: the name a message starts with where it is not the parameter's own spelling
MESSAGE_NAME = {"q": r"(sample rate )?q", "log_q": r"log q~", "orders": r"(RDP )?orders"}


def _starts_with_name(param: str) -> str:
    return rf"^{MESSAGE_NAME.get(param, re.escape(param))}(?!\w)"


@pytest.mark.parametrize("key,param,kind", API_BAD, ids=[f"{k}-{p}" for k, p, _ in API_BAD])
@fast(25)
@given(data=st.data())
def test_api_refuses_a_bad_scalar_by_name(request, key, param, kind, data):
    """Every validated scalar of the aggregators, accountants, DP-SGD mechanism and partition:
    a bad value gets a ValueError whose message starts with the parameter's name."""
    _count(request)
    fn, kwargs = API[key]
    value = data.draw(BAD[kind], label=param)
    with pytest.raises(ValueError, match=_starts_with_name(param)):
        fn(**{**kwargs, param: value})


# ---------------------------------------------------------------- API: tensors and arrays


@st.composite
def bad_grads(draw):
    """[Q, N, d] gradients that are no such thing: another type, rank, dtype, an empty axis,
    or NaN / +-inf inside."""
    kind = draw(st.sampled_from(["type", "rank", "dtype", "empty", "nonfinite"]))
    if kind == "type":
        return draw(st.sampled_from([None, "grads", 3.0, [[[1.0, 2.0]]], np.zeros((2, 3, 8)),
                                     (1.0,)]))
    if kind == "rank":
        ndim = draw(st.sampled_from([0, 1, 2, 4, 5]))
        return torch.zeros(*([2] * (ndim - 1)), 8) if ndim else torch.tensor(1.0)
    if kind == "dtype":
        dtype = draw(st.sampled_from([torch.int32, torch.int64, torch.uint8, torch.bool,
                                      torch.complex64]))
        return torch.zeros(2, 3, 8, dtype=dtype)
    if kind == "empty":
        shape = [2, 3, 8]
        for i in draw(st.sets(st.integers(0, 2), min_size=1)):
            shape[i] = 0
        return torch.zeros(*shape)
    g = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(draw(st.integers(0, 9))))
    g.view(-1)[draw(st.integers(0, g.numel() - 1))] = draw(st.sampled_from(
        [math.nan, math.inf, -math.inf]))
    return g


AGGREGATE = {
    "topagg": lambda g: agg.topagg(g, 2, 1.0, 0.1, None),
    "TopAgg": lambda g: agg.TopAgg(2, 1.0, 0.1, c=1e-3)(g),
    "TopAgg-official": lambda g: agg.TopAgg(2, 1.0, 0.1, c=1e-3, normalize="official")(g),
    "vote_sum": lambda g: agg.vote_sum(g, 2, None),
    "d2pfed-coded": lambda g: agg.D2PFed(1.0, 0.1, 1e-3, variant="coded")(g),
    "d2pfed-paper": lambda g: agg.D2PFed(1.0, 0.1, 1e-3, variant="paper")(g),
    "fetchsgd-coded": lambda g: agg.FetchSGD(2, 1.0, 0.1, rows=3, cols=16)(g),
    "fetchsgd-sound": lambda g: agg.FetchSGD(2, 1.0, 0.1, rows=3, cols=16, variant="sound")(g),
    "gpate-histogram": lambda g: gpate.projected_histogram(g, torch.ones(2, 8, 4), 1.0, 5),
}


@pytest.mark.parametrize("name", list(AGGREGATE))
@fast(30)
@given(grads=bad_grads())
def test_aggregators_refuse_bad_gradients(request, name, grads):
    """TopAgg, D2P-Fed, FetchSGD and G-PATE's histogram on a gradient tensor of the wrong
    type, rank, dtype, an empty axis, or with NaN/inf: a ValueError starting with 'grads'."""
    _count(request)
    with pytest.raises(ValueError, match=r"^grads\b"):
        AGGREGATE[name](grads)


@st.composite
def bad_rows(draw):
    """DP-SGD's per-example rows [B, d] that are no such thing."""
    kind = draw(st.sampled_from(["type", "rank", "dtype", "nonfinite"]))
    if kind == "type":
        return draw(st.sampled_from([None, [[1.0, 2.0]], np.zeros((2, 8)), "g"]))
    if kind == "rank":
        return torch.zeros([3] * draw(st.sampled_from([0, 1, 3])))
    if kind == "dtype":
        return torch.zeros(2, 8, dtype=draw(st.sampled_from([torch.int64, torch.bool])))
    g = torch.randn(2, 8, generator=torch.Generator().manual_seed(draw(st.integers(0, 9))))
    g.view(-1)[draw(st.integers(0, 15))] = draw(st.sampled_from([math.nan, math.inf]))
    return g


COMPRESS = {
    "norm_topk": lambda g: compress.norm_topk(g, 0.5),
    "norm_topk-full-sort": lambda g: compress.norm_topk(g, 0.5, prefilter=None),
    "dim_topk": lambda g: compress.dim_topk(g, 0.5),
}


@pytest.mark.parametrize("name", list(COMPRESS))
@fast(25)
@given(g=bad_rows())
def test_compression_refuses_bad_rows(request, name, g):
    """NormTopK / dimension top-k on rows of the wrong type, rank, dtype, or non-finite."""
    _count(request)
    with pytest.raises(ValueError, match=r"^g\b"):
        COMPRESS[name](g)


ORDERS = {
    "topagg_rdp": lambda o: privacy.topagg_rdp(o, 5, 100.0),
    "rdp_to_epsilon_paper": lambda o: privacy.rdp_to_epsilon_paper(
        np.zeros(np.shape(o)) if np.ndim(o) == 1 and np.size(o) else [0.1], o, 1e-5),
    "data_dependent_rdp": lambda o: privacy.data_dependent_rdp(-5.0, o, 5, 100.0),
}


@pytest.mark.parametrize("name", list(ORDERS))
@fast(30)
@given(orders=bad_orders())
def test_rdp_orders_are_refused_by_name(request, name, orders):
    """RDP orders <= 1, NaN, inf, empty, not a vector, or not numbers."""
    _count(request)
    with pytest.raises(ValueError, match=_starts_with_name("orders")):
        ORDERS[name](orders)


VOTES = {
    "outcome_log_probs": lambda v: privacy.outcome_log_probs(v, 1.0, 0.5),
    "topagg_log_q_tilde": lambda v: privacy.topagg_log_q_tilde(v, 1.0, 0.1, 3),
    "TopAggAccountant.add_votes": lambda v: _acc().add_votes(v, 0.1, 3),
}


@pytest.mark.parametrize("name", list(VOTES))
@fast(25)
@given(votes=st.one_of(bad_float_array(), st.just([["a", "b"]]), st.just(None)))
def test_clean_votes_must_be_finite_numbers(request, name, votes):
    """The data-dependent ledger's clean vote sums: NaN or inf (or no numbers) used to give
    NaN log q~ and a silently data-independent charge; refused by name."""
    _count(request)
    with pytest.raises(ValueError, match=r"^votes\b"):
        VOTES[name](votes)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # dp-accounting: RDP inf
@fast(50)
@given(queries=st.one_of(st.integers(0, 2**40), st.integers(2**40, 2**63 - 1)),
       k=st.one_of(st.integers(1, 10**6), st.integers(1, 2**63 - 1)),
       sigma=st.floats(min_value=5e-324, max_value=1.7e308),
       delta=st.floats(min_value=5e-324, max_value=1 - 2**-53),
       conversion=st.sampled_from(["paper", "rdp"]))
def test_accountant_extremes_give_a_number_or_a_named_error(request, queries, k, sigma, delta,
                                                             conversion):
    """Valid but extreme parameters (huge counts and noise, tiny delta) of the TopAgg and
    Gaussian ledgers (paper and dp-accounting's RDP conversions; PLD would build huge grids
    at tiny noise): a non-negative epsilon (inf allowed), or a ValueError; never an
    OverflowError (sigma = 1e300 once raised one in both) or a NaN."""
    _count(request)
    for ledger in (lambda: privacy.topagg_epsilon(queries, k, sigma, delta, conversion),
                   lambda: gaussian.gaussian_epsilon(queries, sigma, delta, conversion)):
        try:
            eps = ledger()
        except ValueError:
            continue
        assert eps >= 0 and not math.isnan(eps)
    try:
        t = privacy.topagg_max_queries(max(sigma, 1e-300), k, sigma, delta)
    except ValueError as e:
        assert re.match(r"^(more than \d+ queries fit|epsilon|sigma)", str(e)), str(e)
    else:
        assert t >= 0


@fast(25)
@given(steps=st.integers(0, 2**63 - 1), q=st.floats(min_value=5e-324, max_value=1.0),
       sigma=st.floats(min_value=1e-2, max_value=1e6),
       delta=st.floats(min_value=1e-300, max_value=1 - 2**-53))
def test_dpsgd_ledger_extremes_give_a_number_or_a_named_error(request, steps, q, sigma, delta):
    """DP-SGD's ``paper`` ledger at extreme but valid settings: epsilon >= 0 (inf allowed)
    or a ValueError; never a NaN or an error from inside Opacus / numpy."""
    _count(request)
    try:
        eps = subsampled.dpsgd_epsilon(steps, q, sigma, delta)
    except ValueError:
        return
    assert eps >= 0 and not math.isnan(eps)


# --------------------------------------------------------------------------- data: IDX files

_IDX_CODES = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}


@st.composite
def idx_like(draw):
    """Byte strings near the IDX format: good or bad magic, any number of dimensions (up to
    255, often of size 1 so that the payload stays small), huge sizes, and a payload that is
    exact, short, long or cut inside the header."""
    zero = draw(st.sampled_from([0, 0, 0, 1, 0xFFFF]))
    code = draw(st.sampled_from([*_IDX_CODES, 0x00, 0x0A, 0xFF]))
    ndim = draw(st.one_of(st.integers(0, 4), st.integers(5, 255)))
    dim = st.one_of(st.sampled_from([1, 1, 1, 1, 0, 2, 3]), st.integers(0, 2**32 - 1))
    dims = draw(st.lists(dim, min_size=ndim, max_size=ndim))
    head = struct.pack(">HBB", zero, code, ndim) + struct.pack(">" + "I" * ndim, *dims)
    size = math.prod(dims) * _IDX_CODES.get(code, 1)
    how = draw(st.sampled_from(["exact", "exact", "short", "long", "cut"]))
    if how == "cut":
        return head[: draw(st.integers(0, len(head)))]
    n = min(size, 4096)
    if how == "short":
        n = draw(st.integers(0, max(n - 1, 0)))
    elif how == "long":
        n += draw(st.integers(1, 16))
    return head + draw(st.binary(min_size=n, max_size=n))


#: byte strings that once escaped as numpy's ValueError: 65 axes of size 1 (numpy holds at
#: most 64), and axes whose sizes overflow numpy's shape arithmetic although one of them is 0
IDX_REGRESSIONS = [
    struct.pack(">HBB", 0, 0x08, 65) + struct.pack(">" + "I" * 65, *[1] * 65) + b"\x07",
    struct.pack(">HBB", 0, 0x08, 4) + struct.pack(">IIII", 2**32 - 1, 2**32 - 1, 2**32 - 1, 0),
]


@fast(100)
@given(data=st.one_of(st.binary(max_size=64), idx_like()))
@example(data=IDX_REGRESSIONS[0])
@example(data=IDX_REGRESSIONS[1])
def test_parse_idx_raises_only_dataset_file_error(request, data):
    """Any byte string: an array of the size the header says, or DatasetFileError; never
    struct.error, IndexError, OverflowError or a numpy error."""
    _count(request)
    try:
        arr = parse_idx(data)
    except DatasetFileError:
        return
    except Exception as e:  # noqa: BLE001 (the property: nothing else escapes)
        raise AssertionError(f"parse_idx raised {type(e).__name__}: {e}") from e
    assert isinstance(arr, np.ndarray)
    assert arr.ndim == data[3]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """Files the CLI cases point at: a fake run folder with a small sample file, a sample
    file on its own, and an empty folder."""
    root = tmp_path_factory.mktemp("bad-input")
    x = np.random.default_rng(0).random((20, 1, 28, 28)).astype(np.float32)
    y = np.arange(20) % 10
    (root / "run").mkdir()
    np.savez(root / "run" / "samples.npz", x=x, y=y)
    np.savez(root / "samples.npz", x=x, y=y)
    (root / "run" / "run.json").write_text(json.dumps({
        "config": {"dataset": "mnist", "eval_epochs": 2, "eval_lr": 2e-3,
                   "eval_batch_size": 8}, "samples": {"file": "samples.npz"}}))
    (root / "empty").mkdir()
    return root


@fast(50)
@given(content=st.one_of(st.binary(max_size=64), idx_like()),
       how=st.sampled_from(["raw", "gzip", "gzip-cut", "gzip-garbled", "fake-gz"]),
       sha=st.one_of(st.none(), st.text("0123456789abcdef", min_size=64, max_size=64)))
def test_read_idx_raises_only_dataset_file_error(request, workdir, content, how, sha):
    """Files with random content, raw or gzip (whole, cut short, with garbled deflate data,
    or not gzip at all behind a .gz name), with or without a checksum to verify."""
    _count(request)
    path = workdir / ("f.idx" if how == "raw" else "f.idx.gz")
    if how == "raw" or how == "fake-gz":
        blob = content
    else:
        blob = gzip.compress(content, mtime=0)
        if how == "gzip-cut":
            blob = blob[: max(len(blob) // 2, 1)]
        elif how == "gzip-garbled":
            blob = blob[:10] + bytes(b ^ 0x5A for b in blob[10:])
    path.write_bytes(blob)
    try:
        read_idx(path, sha)
    except DatasetFileError:
        return
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"read_idx raised {type(e).__name__}: {e}") from e


@fast(25)
@given(path=st.sampled_from(["missing.idx", "missing.idx.gz", "empty", ".", "a\0b"]))
def test_read_idx_on_no_file_raises_dataset_file_error(request, workdir, path):
    _count(request)
    with pytest.raises(DatasetFileError):
        read_idx(workdir / path)


@fast(30)
@given(labels=st.one_of(
    st.just(np.zeros((4, 5))), st.just(np.zeros(())), st.just(None),
    st.integers(0, 2).map(lambda n: np.arange(n))))
def test_partition_refuses_bad_labels(request, labels):
    """Labels that are not a 1-D array with at least one record per teacher."""
    _count(request)
    with pytest.raises(ValueError, match=r"^(labels|n_teachers)\b"):
        part.partition(labels, 3, 0)
    with pytest.raises(ValueError, match=r"^(labels|n_teachers)\b"):
        part.teacher_partition("class-ordered", labels, 3, 0)


@fast(25)
@given(kind=st.one_of(st.text(max_size=12).filter(lambda s: s not in part.PARTITIONS),
                      st.none(), st.integers()))
def test_teacher_partition_refuses_an_unknown_kind(request, kind):
    _count(request)
    with pytest.raises(ValueError, match=r"^kind\b"):
        part.teacher_partition(kind, np.arange(20) % 4, 3, 0)


# -------------------------------------------------------------------------------- configs


def _config_class(method: str):
    if method == "datalens":
        return TrainConfig
    from datalens_lib.methods import method_class

    return method_class(method).config_class


CONFIG_NAME = {"datalens": "mnist-eps1", "dcgan": "mnist-epsinf", "gpate": "mnist-eps1",
               "dpgan": "mnist-eps1"}


def _field_kinds(method: str) -> list[tuple[str, str, bool]]:
    """(field, kind, optional) of a method's config class, kind from the annotation."""
    cls = _config_class(method)
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        h = hints[f.name]
        if typing.get_origin(h) is dict:
            out.append((f.name, "dict", False))
            continue
        args = typing.get_args(h)  # X | None
        optional = type(None) in args
        base = next(a for a in args if a is not type(None)) if args else h
        out.append((f.name, {float: "float", int: "int", str: "str", bool: "bool"}[base],
                    optional))
    return out


#: values no field of the kind may take (None added where the field is not optional)
UNIVERSALLY_BAD = {
    "float": st.one_of(st.sampled_from([math.nan, -math.inf, np.float64("nan")]),
                       st.floats(max_value=-1e-300, allow_nan=False), HUGE_INTS.map(lambda x: -x),
                       st.sampled_from(["1.0", "abc", True, False, [1.0], {"x": 1}])),
    "int": st.one_of(st.integers(max_value=-1), st.floats(allow_nan=True).filter(
        lambda x: not (math.isfinite(x) and x.is_integer() and x >= 0)),
        st.sampled_from(["3", "abc", True, False, [1], {"x": 1}, 2.5])),
    "str": st.sampled_from([0, 1.5, True, ["paper"], {"x": 1}]),
    "bool": st.sampled_from(["true", "False", "", 0, 1, 1.0, [True]]),
    "dict": st.sampled_from([{"k": 5}, [1], "x", 0, 1.0, True]),
}
#: string fields with a fixed set of values (any other text is bad), and the valid values
CHOICE_FIELDS = {"dataset", "normalize", "conversion", "teacher_fakes", "moment_dtype",
                 "compute_dtype", "aggregator", "partition", "stop_on", "loss"}
VALID_CHOICES = {"mnist", "fashion-mnist", "celeba-gender", "celeba-hair", "places365",
                 "cifar10", "paper", "official", "rdp", "pld", "per_teacher", "class_table",
                 "float32", "bfloat16", "topagg", "d2pfed-coded", "d2pfed-paper",
                 "fetchsgd-coded", "fetchsgd-sound", "class-ordered", "shuffled", "sound",
                 "data_dependent", "bce", "hinge"}
#: the None that is valid although the field is not annotated Optional
NONE_OK = {("dcgan", "epsilon")}  # DC-GAN's JSON writes epsilon = inf as null
#: the float fields where +inf is valid (no privacy)
INF_OK = {("dcgan", "epsilon")}

#: (method, field) whose bad values are accepted or refused without the field's name, in
#: modules this file's author could not change (datalens_lib/methods/*)
CONFIG_FINDINGS: dict[tuple[str, str], str] = {
    ("dcgan", "epsilon"): "methods/dcgan.py: DCGANConfig refuses a bad epsilon as 'DC-GAN is "
                          "non-private: epsilon must be inf, got nan' (not starting with "
                          "the field's name)",
}


def _config_cases():
    cases = []
    for method in CONFIG_NAME:
        for name, kind, optional in _field_kinds(method):
            reason = CONFIG_FINDINGS.get((method, name))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(method, name, kind, optional, marks=marks,
                                      id=f"{method}-{name}"))
    return cases


@pytest.mark.parametrize("method,name,kind,optional", _config_cases())
@fast(20)
@given(data=st.data())
def test_config_refuses_a_bad_value_by_name(request, method, name, kind, optional, data):
    """Every field of every method's config through ``load_config`` (what ``--set`` reaches):
    NaN, -inf, negative numbers, numbers of the wrong kind, other types, None where the
    field is not optional, text outside a fixed set of choices: refused by the field's name."""
    _count(request)
    s = UNIVERSALLY_BAD[kind]
    if not optional and (method, name) not in NONE_OK:
        s = st.one_of(s, st.none())
    if kind == "float" and (method, name) not in INF_OK:
        s = st.one_of(s, st.sampled_from([math.inf, 1e999, 10**400]))
    if name in CHOICE_FIELDS:
        s = st.one_of(s, st.text(min_size=1, max_size=10).filter(
            lambda t: t not in VALID_CHOICES))
    value = data.draw(s, label=name)
    with pytest.raises(ValueError, match=rf"^{re.escape(name)}\b"):
        load_config(CONFIG_NAME[method], "smoke", method=method, **{name: value})


IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,14}", fullmatch=True)


@pytest.mark.parametrize("method", list(CONFIG_NAME))
@fast(25)
@given(key=IDENT, value=st.one_of(st.integers(), st.floats(), st.text(max_size=5), st.none()))
def test_config_refuses_unknown_keys_by_name(request, method, key, value):
    """An override that is no field of the method's config names itself in the error."""
    _count(request)
    if key in {f.name for f in dataclasses.fields(_config_class(method))}:
        return
    with pytest.raises(ValueError, match=rf"^unknown (\S+ )?config keys: \['{key}'\]$"):
        load_config(CONFIG_NAME[method], "smoke", method=method, **{key: value})


# ------------------------------------------------------------------------------------- CLI


class HeavyWork(BaseException):  # noqa: N818 (not an error of the code under test)
    """Raised by a tripwire: a CLI case reached work that bad input must never start (a
    BaseException, so that no ``except Exception`` on the way swallows it)."""


class _NoSubmitit:
    """submitit stand-in: submitting a job is heavy work."""

    class AutoExecutor:
        def __init__(self, *a, **kw):
            raise HeavyWork("submitting a job (submitit executor)")


#: the modules that bind the dataset readers under their own names
TRIPWIRED_MODULES = ("datalens_lib.evaluate", "datalens_lib.datalens", "datalens_lib.dpsgd.train",
                     "datalens_lib.quality.classifier", "datalens_lib.quality.report",
                     "datalens_lib.methods.dcgan", "datalens_lib.methods.dpgan",
                     "datalens_lib.methods.gpate", "datalens_lib.data")


@contextlib.contextmanager
def tripwires(root: Path):
    """Stop a CLI case at the first heavy step: reading a dataset (training or evaluation
    comes next), downloading, executing a notebook, submitting a job. Runs and results go
    under ``root``."""
    import sys

    from datalens_lib import runner, scaleout
    from datalens_lib.data import registry

    for name in TRIPWIRED_MODULES:  # imported now, so that their own bindings are patched
        importlib.import_module(name)

    def trip(what):
        def f(*a, **kw):
            raise HeavyWork(what)
        return f

    def read_dataset(name, *a, **kw):
        registry.get_spec(name)  # an unknown name is refused before any reading, as there
        raise HeavyWork(f"reading dataset {name!r}")

    def run_notebook(path, *a, **kw):
        runner.notebook_path(str(path))  # the notebook's name is checked before the work
        raise HeavyWork(f"executing notebook {path}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DATALENS_RESULTS_ROOT", str(root / "results"))
        readers = {id(registry.resolve_dataset_dir), id(registry.load_dataset)}
        for mod in [m for n, m in sys.modules.items() if n.startswith("datalens_lib")]:
            for attr in ("resolve_dataset_dir", "load_dataset"):  # `from .data import ...`
                if id(getattr(mod, attr, None)) in readers:
                    mp.setattr(mod, attr, read_dataset)
        mp.setattr(registry, "_download", trip("downloading a dataset"))
        mp.setattr(runner, "run_notebook", run_notebook)
        mp.setattr(scaleout, "_import_submitit", lambda: _NoSubmitit)
        yield


def check_cli(argv: list[str], capsys, root: Path, name: str) -> str:
    """Run ``datalens argv``; assert exit status != 0, no traceback, no heavy work, and one
    ``error:`` line, the last on stderr, that matches ``name``. Returns that line."""
    from datalens_lib.cli import main

    capsys.readouterr()
    threads = torch.get_num_threads()
    rc, heavy = None, None
    try:
        with tripwires(root):
            rc = main(argv)
    except SystemExit as e:  # argparse
        rc = e.code
    except HeavyWork as e:
        heavy = str(e)
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    shown = f"datalens {' '.join(argv)}"
    assert heavy is None, f"{shown}: started {heavy} before refusing the bad input"
    assert "Traceback" not in out + err, f"{shown}: traceback\n{err}"
    assert rc not in (0, None), f"{shown}: exit status {rc!r}, stderr {err!r}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    assert len(errors) == 1 and errors[0] == lines[-1], \
        f"{shown}: expected one 'error: ...' line at the end of stderr, got {err!r}"
    message = errors[0].split("error:", 1)[1].strip()
    assert re.search(name, message), f"{shown}: {message!r} does not name {name!r}"
    return errors[0]


def num(*extra: str, text: bool = True):
    """Option values as text: the fixed ones, float reprs and (optionally) random text."""
    s = [st.sampled_from(list(extra))]
    if text:
        s.append(st.text(alphabet="0123456789.-+eEinfaNx ", min_size=1, max_size=6))
    return st.one_of(*s)


BAD_POS_FLOAT_TXT = num("nan", "NaN", "inf", "-inf", "-1", "0", "-0", "-1e-300", "1e999",
                        "-1e999", "1e-400", "x", "")
BAD_POS_INT_TXT = num("0", "-1", "-7", "1.5", "nan", "inf", "1e3", "x", "", "-0")
BAD_NONNEG_INT_TXT = num("-1", "-7", "1.5", "nan", "inf", "x", "")
BAD_PROB_TXT = num("0", "1", "-1", "nan", "inf", "2", "1e-400", "-0", "x")


def _keep_bad(check):
    """Keep only the texts that really are bad for this option (random text can spell a good
    number: '1', '2.5')."""
    def bad(t: str) -> bool:
        try:
            return not check(t)
        except ValueError:
            return True
    return bad


def _pos_float_ok(t):
    v = float(t)
    return math.isfinite(v) and v > 0


def _pos_int_ok(t):
    return int(t) >= 1


def _nonneg_int_ok(t):
    return int(t) >= 0


def _prob_ok(t):
    return 0 < float(t) < 1


BAD_TXT = {
    "pos_float": BAD_POS_FLOAT_TXT.filter(_keep_bad(_pos_float_ok)),
    "pos_int": BAD_POS_INT_TXT.filter(_keep_bad(_pos_int_ok)),
    "nonneg_int": BAD_NONNEG_INT_TXT.filter(_keep_bad(_nonneg_int_ok)),
    "prob": BAD_PROB_TXT.filter(_keep_bad(_prob_ok)),
    "nan_neg_zero": st.sampled_from(["nan", "-1", "0", "-inf", "-1e-300"]),
}

#: JSON values of ``--set KEY=VALUE`` that are bad for a positive number
BAD_JSON_POS = st.sampled_from(["NaN", "Infinity", "-Infinity", "-1", "0", "1e999", '"x"',
                                "null", "true", "[]", "{}", "abc", "1,5"])
BAD_JSON_INT = st.sampled_from(["NaN", "Infinity", "-1", "0", "1.5", '"3"', "null", "true",
                                "[1]", "abc", "1e999"])


DATASETS = {"mnist", "fashion-mnist", "celeba-gender", "celeba-hair", "places365", "cifar10"}
CONFIGS = {"mnist-eps1", "mnist-eps10", "fashion-mnist-eps1", "fashion-mnist-eps10",
           "celeba-gender-eps1", "celeba-gender-eps10", "celeba-hair-eps1", "celeba-hair-eps10"}


def _not_a_notebook(name: str) -> bool:
    from datalens_lib.runner import NOTEBOOKS

    return name not in NOTEBOOKS


NOT_A_NOTEBOOK = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(_not_a_notebook)


# Each CLI case: id, argv builder (value, workdir) -> argv, kind of bad value (a key of
# BAD_TXT, a strategy, or None for a fixed argv), the regex the error line must match, and,
# for a finding in a module this file's author could not change, the xfail reason.
def _cli_cases():
    W = "{w}"  # replaced by the workdir
    train = ["train", "--config", "mnist-eps1", "--profile", "smoke", "--out", f"{W}/run-new"]
    dps = ["dpsgd", "--profile", "smoke", "--seeds", "1", "--out", f"{W}/dpsgd", "--quiet"]
    ev_run, ev_npz = ["evaluate", f"{W}/run"], ["evaluate", f"{W}/samples.npz", "--dataset",
                                                "mnist"]
    sweep = ["sweep", "--config", "mnist-eps1", "--grid", "sigma=1000", "--executor", "local"]
    C = []

    def case(id_, argv, kind, name, xfail=None):
        C.append((id_, argv, kind, name, xfail))

    # data (fetch and ensure never download here: the names are refused first)
    case("data-fetch-unknown", ["data", "fetch", "{v}"],
         st.text(min_size=1, max_size=8).filter(
             lambda t: not t.startswith("-") and t not in DATASETS), r"name")
    case("data-ensure-unknown", ["data", "ensure", "--no-fetch", "{v}"],
         st.from_regex(r"[a-z]{1,8}", fullmatch=True).filter(lambda t: t not in DATASETS),
         r"unknown dataset")
    case("data-ensure-fetching-unknown", ["data", "ensure", "{v}"],
         st.sampled_from(["svhn", "nosuch", "MNIST"]), r"unknown dataset")
    case("data-check-unknown", ["data", "check", "{v}"],
         st.sampled_from(["svhn", "nosuch", "MNIST"]), r"unknown dataset")
    # privacy
    for opt, kind in (("k", "pos_int"), ("sigma", "pos_float"), ("delta", "prob"),
                      ("epsilon", "pos_float")):
        base = {"k": "5", "sigma": "100", "delta": "1e-5", "epsilon": "1"}
        base.pop(opt)
        if opt == "epsilon":
            base.pop("sigma")
            base["queries"] = "10"
        elif opt != "sigma":
            base.pop("epsilon")
            base["queries"] = "10"
        argv = ["privacy", *[a for k, v in base.items() for a in (f"--{k}", v)], f"--{opt}={{v}}"]
        case(f"privacy-{opt}", argv, kind, rf"^(argument )?(--)?{opt}\b")
    case("privacy-queries", ["privacy", "--k", "5", "--sigma", "100", "--queries={v}"],
         "nonneg_int", r"^(argument )?(--)?queries\b")
    case("privacy-queries-for-sigma", ["privacy", "--k", "5", "--epsilon", "1", "--queries={v}"],
         "pos_int", r"^(argument )?(--)?queries\b")
    case("privacy-huge", ["privacy", "--k", "5", "--sigma", "{v}", "--epsilon", "{v}"],
         st.sampled_from(["1e308", "1.7e308", "1e200"]), r"^more than \d+ queries fit")
    # train: --set with a bad value, an unknown key, no '='
    case("train-set-float", [*train, "--set", "{v}"],
         st.tuples(st.sampled_from(["sigma", "epsilon", "lr_teacher", "gamma", "eval_lr"]),
                   BAD_JSON_POS).map("=".join), r"^(sigma|epsilon|lr_teacher|gamma|eval_lr)\b")
    case("train-set-beta", [*train, "--set", "beta={v}"],
         st.sampled_from(["NaN", "Infinity", "-1", '"x"', "null", "true"]), r"^beta\b")
    case("train-set-delta", [*train, "--set", "delta={v}"],
         st.sampled_from(["NaN", "0", "1", "-1", "2", '"x"', "null"]), r"^delta\b")
    case("train-set-int", [*train, "--set", "{v}"],
         st.tuples(st.sampled_from(["k", "teachers", "z_dim", "batch_cap", "chunk"]),
                   BAD_JSON_INT).map("=".join), r"^(k|teachers|z_dim|batch_cap|chunk)\b")
    case("train-set-dataset", [*train, "--set", "dataset={v}"],
         st.sampled_from(["5", '"svhn"', "null", '"MNIST"']), r"^dataset\b")
    case("train-set-unknown", [*train, "--set", "{v}=1"],
         IDENT.filter(lambda k: k not in {f.name for f in dataclasses.fields(TrainConfig)}),
         r"^unknown config keys: \['")
    case("train-set-malformed", [*train, "--set={v}"],
         st.one_of(st.text(max_size=8).filter(lambda t: "=" not in t),
                   st.sampled_from(["=1", "k=", "="])), r"^--set takes KEY=VALUE")
    for method, key in (("dcgan", "lr"), ("gpate", "sigma_thresh"), ("dpgan", "lr_d")):
        case(f"train-{method}-set", ["train", "--method", method, "--config",
                                     CONFIG_NAME[method], "--profile", "smoke", "--out",
                                     f"{W}/run-new", "--set", f"{key}={{v}}"],
             st.sampled_from(["NaN", "-Infinity", "-1", "0", '"x"', "null"]), rf"^{key}\b")
    case("train-seed", [*train, "--seed={v}"], "nonneg_int", r"^(argument )?--seed\b")
    case("train-unknown-config", ["train", "--config", "{v}", "--out", f"{W}/run-new"],
         st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True).filter(
             lambda t: not t.startswith("-") and t not in CONFIGS), r"^unknown config '")
    case("train-unknown-method", ["train", "--method", "{v}", "--config", "mnist-eps1",
                                  "--out", f"{W}/run-new"],
         st.from_regex(r"[a-z]{1,8}", fullmatch=True).filter(
             lambda t: t not in ("datalens", "dcgan", "gpate", "dpgan")), r"^unknown method '")
    case("train-profile", [*train[:-2], "--out", f"{W}/run-new", "--profile={v}"],
         st.text(max_size=6).filter(lambda t: t not in ("smoke", "cpu", "paper")),
         r"argument --profile")
    case("train-prefix-of-missing", [*train, "--until-last-snapshot", "--snapshot-budgets",
                                     "0.5", "--prefix-of", f"{W}/{{v}}"],
         st.sampled_from(["missing", "missing/run.json", "empty/run.json"]),
         r"No such file|not found|prefix")
    case("train-checkpoint-every", [*train, "--checkpoint-every={v}"], "nonneg_int",
         r"(--)?checkpoint[-_]every\b")
    case("train-snapshot-budgets", [*train, "--snapshot-budgets={v}"],
         "nan_neg_zero", r"snapshot")
    # evaluate
    for opt, kind in (("epochs", "pos_int"), ("lr", "pos_float"), ("limit", "pos_int"),
                      ("seed", "nonneg_int"), ("pad-to", "pos_int")):
        case(f"evaluate-run-{opt}", [*ev_run, f"--{opt}={{v}}"], kind,
             rf"^(argument )?--{opt}\b")
        case(f"evaluate-file-{opt}", [*ev_npz, f"--{opt}={{v}}"], kind,
             rf"^(argument )?--{opt}\b")
    case("evaluate-missing-run", ["evaluate", f"{W}/{{v}}"],
         st.sampled_from(["missing", "empty"]), r"run\.json not found")
    case("evaluate-file-batch-size", [*ev_npz, "--batch-size={v}"], "pos_int",
         r"^(argument )?(--)?batch[-_]size\b")
    case("evaluate-missing-file", ["evaluate", f"{W}/{{v}}", "--dataset", "mnist"],
         st.sampled_from(["missing.npz", "empty/x.npz"]), r"sample file|No such file")
    case("evaluate-device", [*ev_run, "--epochs", "1", "--device={v}"],
         st.sampled_from(["gpu", "nosuch", "cuda:x", ""]), r"^device\b")
    # quality
    case("quality-missing", ["quality", f"{W}/{{v}}", "--dataset", "mnist", "--no-write"],
         st.sampled_from(["missing.npz", "empty/x.npz"]), r"no sample file")
    case("quality-no-dataset", ["quality", f"{W}/samples.npz", "--no-write"], st.just(""),
         r"needs --dataset")
    case("quality-limit", ["quality", f"{W}/samples.npz", "--dataset", "mnist", "--no-write",
                           "--limit={v}"], "pos_int", r"^(argument )?--limit\b")
    # publish-samples
    case("publish-n", ["publish-samples", f"{W}/run", "--dest", f"{W}/pub", "--n={v}"],
         "pos_int", r"^(argument )?(--)?n\b")
    case("publish-missing-run", ["publish-samples", f"{W}/{{v}}", "--dest", f"{W}/pub"],
         st.sampled_from(["missing", "empty"]), r"No such file|run\.json")
    case("publish-seed", ["publish-samples", f"{W}/run", "--dest", f"{W}/pub", "--n", "5",
                          "--seed={v}"], "nonneg_int", r"^(argument )?(--)?seed\b")
    # dpsgd
    case("dpsgd-epsilon-nan", [*dps, "--epsilon={v}"], st.sampled_from(["nan", "NaN"]),
         r"^epsilon\b")
    case("dpsgd-epsilon", [*dps, "--epsilon={v}"],
         st.sampled_from(["-1", "0", "-inf", "abc", "", "-0.5"]), r"^(--)?epsilon\b",
         "dpsgd/train.py + cli.py: dpsgd --epsilon 0 or -1 fails inside paper_hyperparameters "
         "as 'error: math domain error'; --epsilon abc as 'could not convert string to float'")
    case("dpsgd-k", [*dps, "--epsilon", "1", "--k={v}"],
         num("nan", "-1", "0", "inf", "1.5", "-inf", "x", text=False), r"^(argument )?(--)?k\b")
    case("dpsgd-seeds", [*dps[:3], "--out", f"{W}/dpsgd", "--epsilon", "1", "--seeds={v}"],
         "pos_int", r"^(argument )?--seeds\b")
    case("dpsgd-first-seed", [*dps, "--epsilon", "1", "--first-seed={v}"], "nonneg_int",
         r"^(argument )?--first-seed\b")
    case("dpsgd-set", [*dps, "--epsilon", "1", "--set", "{v}"],
         st.tuples(st.sampled_from(["sigma", "max_grad_norm", "lr", "delta"]),
                   st.sampled_from(["NaN", "Infinity", "-1", "0", '"x"', "null"])).map(
             "=".join), r"^(sigma|max_grad_norm|lr|delta)\b")
    case("dpsgd-set-unknown", [*dps, "--epsilon", "1", "--set", "{v}=1"],
         IDENT.filter(lambda k: k not in {"dataset", "method", "k", "epsilon", "delta", "sigma",
                                          "max_grad_norm", "batch_size", "lr", "steps", "scope",
                                          "eval_every", "train_limit", "test_limit",
                                          "validation", "hyperparameter_source"}),
         r"^unknown DP-SGD setting\(s\) \['")
    case("dpsgd-set-malformed", [*dps, "--epsilon", "1", "--set={v}"],
         st.sampled_from(["lr", "=1", "lr=", "="]), r"^--set takes KEY=VALUE")
    case("dpsgd-set-batch-size", [*dps, "--epsilon", "1", "--set", "batch_size={v}"],
         st.sampled_from(["0", "-1", "1.5", "NaN", '"x"']), r"^batch_size\b",
         "dpsgd/train.py: make_config (smoke profile) computes the sample rate B / n and calls "
         "the accountant before DPSGDConfig checks batch_size: 'sample rate q must be in "
         "(0, 1], got 0.0' (or a TypeError for a string)")
    case("dpsgd-epsilons", ["dpsgd", "--profile", "smoke", "--seeds", "1", "--quiet",
                            "--search", f"{W}/{{cell}}/s", "--out", f"{W}/{{cell}}/o",
                            "--epsilon", "0.3,{v}"],
         st.sampled_from(["nan", "-1", "0", "x", "inf"]), r"^(--)?epsilons?\b")
    case("dpsgd-dataset", [*dps, "--epsilon", "1", "--dataset={v}"],
         st.sampled_from(["svhn", "nosuch", "MNIST"]), r"^(--)?dataset\b",
         "dpsgd/train.py: an unknown --dataset is refused as 'tab:dpsgd-search has no X rows'")
    case("dpsgd-validation", [*dps, "--epsilon", "1", "--search", f"{W}/search",
                              "--validation={v}"], "pos_int", r"^(argument )?--validation\b",
         "cli.py/dpsgd.train.run_search: --validation is not checked before the search reads "
         "the dataset")
    # reference
    case("reference-dataset", ["reference", "--out", f"{W}/ref", "--dataset={v}"],
         st.sampled_from(["svhn", "nosuch", "MNIST"]), r"unknown dataset")
    for opt, kind in (("epochs", "pos_int"), ("lr", "pos_float"), ("batch-size", "pos_int"),
                      ("limit", "pos_int"), ("seed", "nonneg_int")):
        case(f"reference-{opt}", ["reference", "--dataset", "mnist", "--out", f"{W}/ref",
                                  f"--{opt}={{v}}"], kind,
             rf"^(argument )?(--)?{opt.replace('-', '[-_]')}\b",
             "cli.py/evaluate.evaluate_real: reference reads the whole dataset before "
             f"train_classifier checks {opt} (--limit and --seed are never checked)")
    # results, verify (their own work reads only committed files: argparse's cases)
    case("results-cells-and-missing", ["results", "--cells", "--missing"], None,
         r"--cells.*--missing")
    case("results-bad-flag", ["results", "{v}"],
         st.sampled_from(["--json=1", "--cells=x", "--nosuch", "extra"]),
         r"argument --|unrecognized arguments")
    case("verify-bad-flag", ["verify", "{v}"],
         st.sampled_from(["--update=1", "--json=x", "--nosuch", "extra"]),
         r"argument --|unrecognized arguments")
    # run, run-all (notebooks never execute here: the tripwire stops them)
    case("run-unknown-notebook", ["run", "{v}"], NOT_A_NOTEBOOK, r"notebook '")
    case("run-malformed-p", ["run", "t1_main_utility", "-p", "{v}"],
         st.sampled_from(["profile", "seed"]), r"argument -p")
    case("run-all-profile", ["run-all", "--profile={v}"],
         st.text(max_size=6).filter(lambda t: t not in ("smoke", "cpu", "paper")),
         r"argument --profile")
    case("run-all-seed-type", ["run-all", "--seed={v}"],
         st.sampled_from(["x", "1.5", "nan", ""]), r"argument --seed")
    case("run-all-seed", ["run-all", "--seed={v}"], st.sampled_from(["-1", "-5"]),
         r"^(argument )?(--)?seed\b")
    case("run-all-executor", ["run-all", "--executor={v}"],
         st.sampled_from(["nosuch", "", "SLURM"]), r"argument --executor")
    case("run-all-max-parallel", ["run-all", "--executor", "local", "--max-parallel={v}"],
         st.sampled_from(["-1", "-5"]), r"^max[-_]parallel\b")
    # sweep
    case("sweep-neither", ["sweep", "--grid", "{v}"], st.sampled_from(["seed=1", "sigma=1"]),
         r"--notebook.*--config")
    case("sweep-unknown-key", ["sweep", "--config", "mnist-eps1", "--executor", "local",
                               "--grid", "{v}=1,2"],
         IDENT.filter(lambda k: k not in {f.name for f in dataclasses.fields(TrainConfig)}
                      | {"seed"}), r"^unknown config keys: \['")
    case("sweep-bad-value", ["sweep", "--config", "mnist-eps1", "--executor", "local",
                             "--grid", "sigma={v}"], st.sampled_from(["NaN", "-1", "0", '"x"']),
         r"^sigma\b")
    case("sweep-seed", ["sweep", "--config", "mnist-eps1", "--executor", "local",
                        "--grid", "seed={v}"], st.sampled_from(["-1", "1.5", '"3"', "null"]),
         r"^seed\b")
    case("sweep-malformed-grid", ["sweep", "--config", "mnist-eps1", "--executor", "local",
                                  "--grid={v}"], st.sampled_from(["sigma", "=1", "sigma=", "="]),
         r"^--grid takes")
    case("sweep-unknown-notebook", ["sweep", "--notebook", "{v}", "--grid", "a=1"],
         NOT_A_NOTEBOOK, r"notebook '")
    case("sweep-max-parallel", [*sweep, "--max-parallel={v}"], st.sampled_from(["-1", "-3"]),
         r"^max[-_]parallel\b")
    case("sweep-gpus-per-job", [*sweep, "--gpus-per-job={v}"], st.sampled_from(["-1", "-2"]),
         r"^gpus[-_]per[-_]job\b")
    case("sweep-evaluate", [*sweep, "--evaluate={v}"], st.sampled_from(["0", "-1"]),
         r"^(--)?evaluate\b",
         "cli.py/scaleout.train_jobs: sweep --evaluate 0 is refused as 'eval_epochs must be "
         ">= 1', not by the option's name")
    for opt in ("cpus-per-job", "timeout-min"):
        case(f"sweep-{opt}", [*sweep, f"--{opt}={{v}}"], st.sampled_from(["0", "-1"]),
             rf"^{opt.replace('-', '[-_]')}\b",
             f"scaleout.make_executor: a bad --{opt} is refused as 'gpus_per_job must be >= 0, "
             "cpus_per_job and timeout_min >= 1' (starts with another option's name)")
    case("sweep-mem-gb", [*sweep, "--mem-gb={v}"],
         st.sampled_from(["nan", "-1", "0", "inf"]), r"^mem[-_]gb\b",
         "cli.py/scaleout.make_executor: --mem-gb is never checked: NaN or -1 GB goes to the "
         "executor and the jobs are submitted")
    # domain-classifier
    case("domain-classifier-dataset", ["domain-classifier", "--out", f"{W}/dc", "--dataset={v}"],
         st.sampled_from(["svhn", "nosuch"]), r"unknown dataset")
    case("domain-classifier-epochs", ["domain-classifier", "--dataset", "mnist", "--out",
                                      f"{W}/dc", "--epochs={v}"], st.sampled_from(["0", "-1"]),
         r"^(--)?epochs\b")
    case("domain-classifier-threads", ["domain-classifier", "--dataset", "mnist", "--out",
                                       f"{W}/dc", "--threads={v}"], st.sampled_from(["0", "-1"]),
         r"^(--)?threads\b")
    return C


CLI_CASES = _cli_cases()


def _cli_params():
    out = []
    for id_, argv, kind, name, xfail in CLI_CASES:
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        out.append(pytest.param(argv, kind, name, marks=marks, id=id_))
    return out


@pytest.mark.parametrize("argv,kind,name", _cli_params())
@fast(15)
@given(data=st.data())
def test_cli_refuses_bad_input_with_one_error_line(request, capsys, workdir, argv, kind, name,
                                                   data):
    """Every subcommand on bad numbers (NaN, inf, -1, 0, text), unknown and malformed
    ``--set``, missing files: exit status != 0, one 'error:' line naming the option, no
    traceback, nothing trained, downloaded, executed or submitted."""
    _count(request)
    if kind is None:
        value = ""
    else:
        value = data.draw(BAD_TXT[kind] if isinstance(kind, str) else kind, label="value")
    full = [a.replace("{w}", str(workdir)).replace("{v}", value) for a in argv]
    check_cli(full, capsys, workdir, name)


# --------------------------------------------------------------------------------- report


#: the fewest generated examples the properties above must have tried together
MIN_TRIED = 5000


def _property_cases() -> int:
    """How many test cases the properties of this file make (their parametrizations)."""
    n = 0
    for fn in list(globals().values()):
        if getattr(fn, "is_hypothesis_test", False):
            n += math.prod(len(m.args[1]) for m in getattr(fn, "pytestmark", [])
                           if m.name == "parametrize")
    return n


def test_zz_report_examples_tried(request, capsys):
    """Last in the file: the number of generated examples tried (printed on the terminal),
    which must reach MIN_TRIED when every property case of the file ran in this process
    (a run of some of them, with -k or node ids, only prints its count)."""
    props = [i for i in request.session.items
             if i.path == request.node.path and i.originalname != request.node.originalname]
    total = sum(TRIED.values())
    lines = [f"test_bad_input: {total} generated examples tried by {len(TRIED)} properties "
             f"({len(props)} test cases)"] + [f"  {k}: {n}" for k, n in sorted(TRIED.items())]
    with capsys.disabled():  # on the terminal without -s too (pytest -n 0)
        print("\n" + "\n".join(lines))
    if len(props) != _property_cases() or not all(i.originalname in TRIED for i in props):
        pytest.skip("not every property case of the file ran in this process")
    assert total >= MIN_TRIED
