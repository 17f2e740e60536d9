"""Every public parameter of the privacy-critical modules is validated, and the error names
the parameter that is wrong (the message starts with its name), so a user who passes sigma in
the place of beta is told which one."""

import math
import re

import numpy as np
import pytest
import torch

from datalens_lib import evaluate, store
from datalens_lib.aggregation import (
    TopAgg,
    noisy_threshold,
    topagg,
    topk_sto_sign,
    topk_sto_sign_sparse,
    vote_sum,
)
from datalens_lib.config import load_config
from datalens_lib.ensemble import StackedAdam, TeacherEnsemble
from datalens_lib.privacy import (
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

G = torch.zeros(2, 3, 8)
V = torch.zeros(2, 8)

CASES = [
    # aggregation
    (lambda: topagg(G, 0, 1.0, 0.1, None), r"^k must be >= 1"),
    (lambda: topagg(G, 9, 1.0, 0.1, None), r"^k must be <= the gradient dimension d = 8, got 9$"),
    (lambda: topagg(G, 2, 0.0, 0.1, None), r"^sigma must be a positive finite number"),
    (lambda: topagg(G, 2, 1.0, -0.1, None), r"^beta must be a non-negative finite number"),
    (lambda: topagg(G, 2, 1.0, 0.1, -1.0), r"^c must be a positive finite number"),
    (lambda: topagg(G, 2, 1.0, 0.1, None, normalize="l2"), r"^normalize must be one of"),
    (lambda: topagg([[[1.0]]], 1, 1.0, 0.1, None), r"^grads must be a torch\.Tensor, got list$"),
    (lambda: topagg(torch.zeros(8), 1, 1.0, 0.1, None),
     r"^grads must have shape \[Q, N, d\] \(queries, teachers, dims\); got \(8,\)$"),
    (lambda: topagg(torch.zeros(1, 1, 8, dtype=torch.int32), 1, 1.0, 0.1, None),
     r"^grads must be a floating-point tensor, got torch\.int32$"),
    (lambda: topk_sto_sign(torch.zeros(1, 8, dtype=torch.int32), 1, None),
     r"^grads must be a floating-point torch\.Tensor$"),
    (lambda: topk_sto_sign([1.0, 2.0], 1, None), r"^grads must be a floating-point torch\.Tensor$"),
    (lambda: topk_sto_sign_sparse(torch.tensor([[math.inf, 0.0]]), 1, None),
     r"^grads contains NaN or infinite values$"),
    (lambda: vote_sum(G, 2, None, normalize="x"), r"^normalize must be one of"),
    (lambda: noisy_threshold(V, -1.0, 0.1, 3), r"^sigma must be"),
    (lambda: noisy_threshold(V, 1.0, -0.1, 3), r"^beta must be"),
    (lambda: noisy_threshold(V, 1.0, 0.1, 0), r"^n_teachers must be"),
    (lambda: TopAgg(k=0, sigma=1.0, beta=0.1), r"^k must be"),
    (lambda: TopAgg(k=1, sigma=0.0, beta=0.1), r"^sigma must be"),
    (lambda: TopAgg(k=1, sigma=1.0, beta=-1.0), r"^beta must be"),
    (lambda: TopAgg(k=1, sigma=1.0, beta=0.1, c=0.0), r"^c must be"),
    (lambda: TopAgg(k=1, sigma=1.0, beta=0.1, normalize="l1"), r"^normalize must be one of"),
    # privacy
    (lambda: noise_multiplier(0, 1.0), r"^k must be"),
    (lambda: noise_multiplier(1, 0.0), r"^sigma must be"),
    (lambda: topagg_rdp([2.0], 0, 1.0), r"^k must be"),
    (lambda: topagg_rdp([2.0], 1, -1.0), r"^sigma must be"),
    (lambda: topagg_rdp([2.0, 1.0], 1, 1.0),
     r"^RDP orders must be finite numbers > 1, got \[1\.\]$"),
    (lambda: topagg_rdp([2.0, math.nan], 1, 1.0), r"^RDP orders must be finite numbers > 1"),
    (lambda: topagg_rdp([2.0, math.inf], 1, 1.0),
     r"^RDP orders must be finite numbers > 1, got \[inf\]$"),
    # an order below 1 used to give a negative epsilon (-22.9 for these values)
    (lambda: rdp_to_epsilon_paper([0.5], [0.1], 1e-5), r"^orders must be finite numbers > 1"),
    (lambda: rdp_to_epsilon_paper([0.5], [1.0], 1e-5), r"^orders must be finite numbers > 1"),
    (lambda: rdp_to_epsilon_paper([math.nan], [2.0], 1e-5), r"^rdp_values must be >= 0"),
    (lambda: rdp_to_epsilon_paper([-0.1], [2.0], 1e-5), r"^rdp_values must be >= 0"),
    (lambda: rdp_to_epsilon_paper([0.1, 0.2], [2.0], 1e-5),
     r"^rdp_values and orders must have one value per order"),
    (lambda: data_dependent_rdp(-1.0, [0.5, 2.0], 1, 1.0),
     r"^orders must be finite numbers > 1"),
    # yes/no switches: a string "False" would be truthy and turn an ablation the other way
    (lambda: topagg(G, 2, 1.0, 0.1, None, stochastic="False"),
     r"^stochastic must be true or false"),
    (lambda: noisy_threshold(V, 1.0, 0.1, 3, threshold=""), r"^threshold must be true or false"),
    (lambda: TopAgg(k=1, sigma=1.0, beta=0.1, stochastic="False"),
     r"^stochastic must be true or false"),
    (lambda: TopAgg(k=1, sigma=1.0, beta=0.1, threshold=0), r"^threshold must be true or false"),
    (lambda: load_config("mnist-eps1", "smoke", stochastic="False"),
     r"^stochastic must be true or false"),
    (lambda: load_config("mnist-eps1", "smoke", threshold=""), r"^threshold must be true or false"),
    (lambda: load_config("mnist-eps1", "smoke", data_dependent="no"),
     r"^data_dependent must be true or false"),
    (lambda: rdp_to_epsilon_paper([1.0], [2.0], 1.0), r"^delta must lie strictly between"),
    (lambda: topagg_epsilon(-1, 1, 1.0, 1e-5), r"^queries must be >= 0"),
    (lambda: topagg_epsilon(1, 0, 1.0, 1e-5), r"^k must be"),
    (lambda: topagg_epsilon(1, 1, 0.0, 1e-5), r"^sigma must be"),
    (lambda: topagg_epsilon(1, 1, 1.0, 0.0), r"^delta must lie"),
    (lambda: topagg_epsilon(1, 1, 1.0, 1e-5, "gdp"), r"^conversion must be one of"),
    (lambda: topagg_max_queries(0.0, 1, 1.0, 1e-5), r"^epsilon must be"),
    (lambda: topagg_max_queries(1e12, 1, 1e9, 1e-5),
     r"^more than 1099511627776 queries fit the budget; check epsilon, sigma and k$"),
    (lambda: topagg_sigma_for_queries(0, 1.0, 1, 1e-5), r"^queries must be >= 1"),
    (lambda: topagg_sigma_for_queries(1, 0.0, 1, 1e-5), r"^epsilon must be"),
    (lambda: topagg_sigma_for_queries(1, 1.0, 1, 1e-5, rtol=0.0), r"^rtol must be"),
    (lambda: topagg_sigma_for_queries(1, 1.0, 0, 1e-5), r"^k must be"),
    (lambda: topagg_sigma_for_queries(1, 1.0, 1, 2.0), r"^delta must lie"),
    (lambda: topagg_sigma_for_queries(1, 1.0, 1, 1e-5, "x"), r"^conversion must be"),
    (lambda: topagg_sigma_for_queries(10, 1e-300, 1, 1e-5),
     r"^no finite sigma reaches that epsilon$"),
    (lambda: outcome_log_probs([0.0], 0.0, 1.0), r"^sigma must be"),
    (lambda: outcome_log_probs([0.0], 1.0, -1.0), r"^threshold must be"),
    (lambda: topagg_log_q_tilde([0.0], 1.0, 0.1, 0), r"^n_teachers must be"),
    (lambda: topagg_log_q_tilde([0.0], 1.0, -0.1, 3), r"^beta must be"),
    (lambda: topagg_log_q_tilde([0.0], 0.0, 0.1, 3), r"^sigma must be"),
    (lambda: data_dependent_rdp(-1.0, [2.0], 0, 1.0), r"^k must be"),
    (lambda: data_dependent_rdp(-1.0, [2.0], 1, 0.0), r"^sigma must be"),
    (lambda: data_dependent_rdp(0.5, [2.0], 1, 1.0), r"^log q~ must be <= 0, got 0\.5$"),
    (lambda: data_dependent_rdp(-math.inf, [2.0], 1, 1.0),
     r"^log q~ = -inf: q~ must be a strictly positive upper bound$"),
    (lambda: TopAggAccountant(0, 1.0, 1e-5), r"^k must be"),
    (lambda: TopAggAccountant(1, 0.0, 1e-5), r"^sigma must be"),
    (lambda: TopAggAccountant(1, 1.0, 0.0), r"^delta must lie"),
    (lambda: TopAggAccountant(1, 1.0, 1e-5).add_queries(-1), r"^n must be >= 0"),
    (lambda: TopAggAccountant(1, 1.0, 1e-5).epsilon_if(-1), r"^extra_queries must be >= 0"),
    (lambda: TopAggAccountant(1, 1.0, 1e-5).epsilon("x"), r"^conversion must be one of"),
    # ensemble, evaluation, store
    (lambda: TeacherEnsemble(0, 10, (1, 28, 28)), r"^n_teachers must be"),
    (lambda: TeacherEnsemble(1, 10, (1, 28, 28), chunk=0), r"^chunk must be"),
    (lambda: TeacherEnsemble(1, 0, (1, 28, 28)), r"^y_dim must be"),
    (lambda: StackedAdam({"w": torch.zeros(1, 2)}, lr=0.0), r"^lr must be"),
    (lambda: StackedAdam({"w": torch.zeros(1, 2)}, eps=-1.0), r"^eps must be"),
    (lambda: evaluate.train_classifier(np.zeros((2, 1, 8, 8)), np.zeros(2), np.zeros((2, 1, 8, 8)),
                                       np.zeros(2), 2, epochs=0), r"^epochs must be"),
    (lambda: evaluate.train_classifier(np.zeros((2, 1, 8, 8)), np.zeros(2), np.zeros((2, 1, 8, 8)),
                                       np.zeros(2), 2, lr=-1.0), r"^lr must be"),
    (lambda: evaluate.train_classifier(np.zeros((2, 1, 8, 8)), np.zeros(2), np.zeros((2, 1, 8, 8)),
                                       np.zeros(2), 2, batch_size=0), r"^batch_size must be"),
    (lambda: evaluate.train_classifier(np.zeros((0, 1, 8, 8)), np.zeros(0), np.zeros((2, 1, 8, 8)),
                                       np.zeros(2), 2),
     r"^x_train and y_train must be non-empty and of equal length$"),
    (lambda: evaluate.protocol_value({"paper": 1.0}, "best"), r"^protocol must be one of"),
    (lambda: store.save_result("a", {}, 1, profile="big"), r"^profile must be one of"),
    (lambda: load_config("mnist-eps1", "smoke", compute_dtype="float16"),
     r"^compute_dtype must be one of"),
    (lambda: load_config("mnist-eps1", "smoke", partition="random"),
     r"^partition must be one of"),
    (lambda: load_config("mnist-eps1", "smoke", eval_test_limit=0), r"^eval_test_limit must be"),
    (lambda: load_config("mnist-epsinf", "smoke", method="dcgan", eval_test_limit=-5),
     r"^eval_test_limit must be"),
    (lambda: load_config("mnist-eps1", "smoke", method="gpate", eval_test_limit=0),
     r"^eval_test_limit must be"),
    (lambda: load_config("mnist-eps1", "smoke", method="dpgan", eval_test_limit=0),
     r"^eval_test_limit must be"),
    (lambda: evaluate.evaluate_samples("none.npz", "mnist", test_limit=0),
     r"^test_limit must be"),
    # the baselines' configs
    (lambda: load_config("mnist-eps1", "smoke", method="gpate", bins=1), r"^bins must be >= 2"),
    (lambda: load_config("mnist-eps1", "smoke", extra={"k": 5}), r"^extra must be empty"),
    (lambda: load_config("mnist-eps1", "smoke", method="dpgan", extra={"lr": 1}),
     r"^extra must be empty"),
    (lambda: load_config("mnist-eps1", "smoke", method="gpate", threshold_frac=True),
     r"^threshold_frac must be a number in \(0, 1\]"),
    (lambda: load_config("mnist-eps1", "smoke", method="gpate", delta="abc"),
     r"^delta must be a number in \(0, 1\)"),
    (lambda: load_config("mnist-eps1", "smoke", method="dpgan", delta="abc"),
     r"^delta must be a number in \(0, 1\)"),
    (lambda: load_config("mnist-eps1", "smoke", method="dpgan", beta1=False),
     r"^beta1 must be a number in \[0, 1\)"),
    (lambda: load_config("mnist-epsinf", "smoke", method="dcgan", beta1=1.0),
     r"^beta1 must be in \[0, 1\), got 1\.0$"),
    (lambda: _calibrate(math.nan), r"^epsilon must be a positive finite number"),
    (lambda: _calibrate(1.0, rtol=0.0), r"^rtol must be a positive finite number"),
    (lambda: _dpsgd_epsilon(True), r"^sample rate q must be a number in \(0, 1\]"),
    (lambda: _dpsgd_epsilon("0.5"), r"^sample rate q must be a number in \(0, 1\]"),
    (lambda: _dpsgd_steps(upper_limit=0), r"^upper_limit must be >= 1"),
    (lambda: _dpsgd_config(k="0.5"), r"^k must be a number in \(0, 1\]"),
    (lambda: _dpsgd_config(delta=True), r"^delta must be a number in \(0, 1\)"),
    (lambda: _dpsgd_config(epsilon=math.nan),
     r"^epsilon \(inf for no privacy\) must be in \(0, inf\]"),
]


def _calibrate(epsilon, rtol=1e-4):
    from datalens_lib.methods.dpgan import calibrate_sigma

    return calibrate_sigma(epsilon, 0.01, 10, 1e-5, rtol)


def _dpsgd_epsilon(q):
    from datalens_lib.privacy.subsampled import dpsgd_epsilon

    return dpsgd_epsilon(10, q, 1.0, 1e-5)


def _dpsgd_steps(upper_limit):
    from datalens_lib.privacy.subsampled import dpsgd_steps_for_budget

    return dpsgd_steps_for_budget(1.0, 0.01, 1.0, 1e-5, upper_limit=upper_limit)


def _dpsgd_config(**kw):
    from datalens_lib.dpsgd.train import DPSGDConfig

    return DPSGDConfig(**{"method": "normtopk", **kw})


def _case_id(i: int, message: str) -> str:
    """A node id without regex characters (mutmut passes node ids on pytest's command line)."""
    return f"{i:02d}-" + re.sub(r"[^A-Za-z0-9]+", "-", message[1:40]).strip("-")


@pytest.mark.parametrize("call,message", CASES,
                         ids=[_case_id(i, c[1]) for i, c in enumerate(CASES)])
def test_error_names_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_datalens_refuses_k_above_d_and_a_bad_seed_before_reading_data(tmp_path):
    """k > d once surfaced only at the first aggregation, after the ensemble was allocated and
    pre-trained; it is refused before the data is read (the data folder here is empty)."""
    from datalens_lib.datalens import DataLens
    from datalens_lib.methods.harness import Run

    cfg = load_config("mnist-eps1", "smoke", k=785)
    with pytest.raises(ValueError, match=r"^k must be <= the gradient dimension d = 784 of mnist"):
        DataLens(cfg, data_dir=tmp_path)
    for seed in (2.7, "3", True, -1):
        with pytest.raises(ValueError, match=r"^seed must be"):
            DataLens(load_config("mnist-eps1", "smoke"), seed=seed, data_dir=tmp_path)
    # D2P-Fed has no k: its configs keep the default k whatever d is
    d2p = load_config("mnist-eps1", "smoke", k=785, aggregator="d2pfed-coded")
    from datalens_lib.data import DatasetNotFoundError

    with pytest.raises(DatasetNotFoundError):  # it got as far as reading the data
        DataLens(d2p, data_dir=tmp_path)
    for every in (2.5, "10", -1):
        with pytest.raises(ValueError, match=r"^checkpoint_every must be"):
            Run(object(), tmp_path / "run", checkpoint_every=every)
