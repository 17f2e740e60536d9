"""The utility evaluation (paper Sec. 5.1) pinned on hand-made inputs: both protocols on a
non-monotone accuracy curve, test-time behaviour of the classifier, and the optimiser schedule
(learning rate, batch size, number of SGD steps) that the official script uses."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import datalens_lib.evaluate as ev
from datalens_lib.evaluate import (
    EvalCNN,
    _classifier_result,
    accuracy,
    protocol_value,
    schedule_sensitivity,
    train_classifier,
)

CURVE = [0.2, 0.6, 0.4, 0.5]  # best at epoch 2, last epoch lower: the protocols differ


def test_protocols_on_a_hand_made_curve():
    r = _classifier_result(CURVE, 2e-3, 512, 7, 100, 12.5, 1)
    assert r["paper"] == 0.6 and r["clean"] == 0.5 and r["best_epoch"] == 2
    assert r["epochs"] == 4 and r["test_accuracy_per_epoch"] == CURVE
    assert (r["lr"], r["batch_size"], r["seed"], r["n_train"]) == (2e-3, 512, 7, 100)
    assert r["seconds"] == 12.5 and r["continued_from_epoch"] == 1
    assert r["shorter_schedules"] == schedule_sensitivity(CURVE)
    assert protocol_value(r, "paper") == 0.6 and protocol_value(r, "clean") == 0.5
    with pytest.raises(ValueError, match="protocol"):
        protocol_value(r, "best")


def test_shorter_schedules_read_prefixes():
    s = schedule_sensitivity(CURVE, lengths=(1, 2, 3, 4, 5))
    assert s == {"1": {"paper": 0.2, "clean": 0.2}, "2": {"paper": 0.6, "clean": 0.6},
                 "3": {"paper": 0.6, "clean": 0.4}, "4": {"paper": 0.6, "clean": 0.5}}
    long = [0.01 * i for i in range(1, 31)]
    long[9] = 0.9  # epoch 10 is the best of the first 30
    d = schedule_sensitivity(long)
    assert set(d) == {"10", "30"}
    assert d["10"] == {"paper": 0.9, "clean": 0.9}
    assert d["30"] == {"paper": 0.9, "clean": pytest.approx(0.30)}


class _Fixed(nn.Module):
    """Predicts class 1 for images whose mean is > 0.5, else class 0."""

    def forward(self, x):
        m = x.flatten(1).mean(1)
        return torch.stack([0.5 - m, m - 0.5], 1)


def test_accuracy_counts_every_batch_and_sets_eval_mode():
    x = torch.zeros(10, 1, 2, 2)
    x[[1, 4, 8]] = 1.0
    y = torch.zeros(10, dtype=torch.long)
    y[[1, 4, 5]] = 1  # right on 0,1,2,3,4,6,7,9 ; wrong on 5 and 8
    model = _Fixed().train()
    assert accuracy(model, x, y, batch=3) == pytest.approx(0.8)
    assert accuracy(model, x, y, batch=100) == pytest.approx(0.8)
    assert not model.training


def test_dropout_only_in_training_mode():
    torch.manual_seed(0)
    m = EvalCNN((1, 28, 28), 10)
    x = torch.rand(8, 1, 28, 28)
    m.eval()
    torch.testing.assert_close(m(x), m(x))
    m.train()
    assert not torch.equal(m(x), m(x))
    # accuracy() evaluates in eval mode: repeated calls agree, whatever mode the model was in
    y = torch.randint(0, 10, (8,))
    m.train()
    assert accuracy(m, x, y) == accuracy(m.train(), x, y)


def test_eval_cnn_is_the_official_architecture():
    m = EvalCNN((1, 28, 28), 10)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == {"conv1.weight": (32, 1, 3, 3), "conv1.bias": (32,),
                      "conv2.weight": (64, 32, 3, 3), "conv2.bias": (64,),
                      "fc1.weight": (64, 64 * 11 * 11), "fc1.bias": (64,),
                      "fc2.weight": (10, 64), "fc2.bias": (10,)}
    assert all(float(m.state_dict()[k].abs().sum()) == 0 for k in shapes if k.endswith("bias"))
    # Glorot uniform: |w| <= sqrt(6 / (fan_in + fan_out))
    bound = np.sqrt(6 / (32 * 9 + 64 * 9))
    assert m.conv2.weight.abs().max() <= bound and m.conv2.weight.abs().max() > 0.9 * bound
    # dropout rates 0.2 and 0.25 (Keras model); relu after each conv
    x = torch.ones(1, 1, 28, 28)
    m.eval()
    assert m(x).shape == (1, 10)


def _keras_order(m, x):
    """The official layer order (ReLU, then max-pool), written out as a reference."""
    h = F.dropout(F.max_pool2d(F.relu(m.conv1(x)), 2), 0.2, m.training)
    h = F.dropout(F.relu(m.conv2(h)), 0.25, m.training)
    return m.fc2(F.relu(m.fc1(h.flatten(1))))


@pytest.mark.parametrize("training", [False, True])
def test_pool_before_relu_computes_the_official_order(training):
    """EvalCNN pools before its first ReLU (cheaper); outputs, dropout draws and parameter
    gradients equal the official order's."""
    torch.manual_seed(0)
    m = EvalCNN((1, 28, 28), 10).train(training)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    outs, grads = [], []
    for f in (m, lambda x: _keras_order(m, x)):
        torch.manual_seed(1)
        out = f(x)
        outs.append(out)
        grads.append(torch.autograd.grad(F.cross_entropy(out, y), list(m.parameters())))
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_dropout_in_nchw_order_keeps_the_official_masks_on_channels_last_activations():
    """ATen's CPU dropout draws in memory order: on a channels-last tensor F.dropout drops
    other units than on the NCHW one; dropout_nchw_order drops the NCHW ones, with the same
    values and the same generator state after."""
    x = torch.randn(8, 32, 13, 13) + 3.0
    xc = x.contiguous(memory_format=torch.channels_last)
    torch.manual_seed(3)
    ref = F.dropout(x, 0.25, True)
    after_ref = torch.rand(4)
    torch.manual_seed(3)
    got = ev.dropout_nchw_order(xc, 0.25, True)
    after = torch.rand(4)
    torch.testing.assert_close(got, ref, rtol=0, atol=0)
    torch.testing.assert_close(after, after_ref, rtol=0, atol=0)
    torch.manual_seed(3)
    assert not torch.equal(F.dropout(xc, 0.25, True), ref)  # why it exists
    assert ev.dropout_nchw_order(xc, 0.25, False) is xc


@pytest.mark.parametrize("training", [False, True])
def test_channels_last_classifier_is_the_same_function(training):
    """EvalCNN with channels_last (the CPU default) against the NCHW one with the same
    weights: the same dropout masks (one seed), outputs and gradients up to float rounding,
    and the official NCHW flattening into the dense layer."""
    torch.manual_seed(0)
    ref = EvalCNN((1, 28, 28), 10).train(training)
    fast = EvalCNN((1, 28, 28), 10, channels_last=True)
    fast.load_state_dict(ref.state_dict())
    fast = fast.to(memory_format=torch.channels_last).train(training)
    assert fast.conv2.weight.is_contiguous(memory_format=torch.channels_last)
    x = torch.randn(32, 1, 28, 28)
    y = torch.randint(0, 10, (32,))
    outs, grads = [], []
    for m in (ref, fast):
        torch.manual_seed(1)
        out = m(x)
        outs.append(out)
        grads.append(torch.autograd.grad(F.cross_entropy(out, y), list(m.parameters())))
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_a_seeded_evaluation_is_the_same_in_either_layout(tmp_path, monkeypatch):
    """train_classifier in channels-last (the CPU default) and in NCHW: the same accuracies up
    to float rounding, each record names its layout, and a checkpoint continues in the layout
    it was started in (an NCHW one is neither discarded nor continued channels-last)."""
    x, y = _toy(120, seed=7)
    data = (x[:90], y[:90], x[90:], y[90:], 2)
    res = {}
    for layout in ("contiguous", "channels_last"):
        monkeypatch.setenv("DATALENS_CONV_LAYOUT", layout)
        res[layout] = train_classifier(*data, epochs=4, lr=0.05, batch_size=16, seed=3,
                                       checkpoint=tmp_path / f"{layout}.ckpt", progress=False)
        assert res[layout]["conv_layout"] == layout
        assert res[layout]["continued_from_epoch"] == 0
    np.testing.assert_allclose(res["channels_last"]["test_accuracy_per_epoch"],
                               res["contiguous"]["test_accuracy_per_epoch"], atol=1 / 30 + 1e-9)
    monkeypatch.delenv("DATALENS_CONV_LAYOUT")  # the CPU default: channels-last
    for layout in ("contiguous", "channels_last"):
        more = train_classifier(*data, epochs=6, lr=0.05, batch_size=16, seed=3,
                                checkpoint=tmp_path / f"{layout}.ckpt", progress=False)
        assert more["continued_from_epoch"] == 4 and more["conv_layout"] == layout
        assert more["test_accuracy_per_epoch"][:4] == res[layout]["test_accuracy_per_epoch"]
    monkeypatch.setenv("DATALENS_CONV_LAYOUT", "contiguous")  # as on CUDA: CL still continues
    again = train_classifier(*data, epochs=7, lr=0.05, batch_size=16, seed=3,
                             checkpoint=tmp_path / "channels_last.ckpt", progress=False)
    assert again["continued_from_epoch"] == 6 and again["conv_layout"] == "channels_last"
    monkeypatch.delenv("DATALENS_CONV_LAYOUT")
    assert train_classifier(*data, epochs=1, lr=0.05, batch_size=16, seed=3,
                            progress=False)["conv_layout"] == "channels_last"


def _toy(n=70, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.random((n, 1, 12, 12)).astype(np.float32) * 0.2
    x[y == 1, :, :6] += 0.7
    return x, y


def _spy_on_training(monkeypatch):
    """Spies on the classifier's SGD steps and forward passes: (optimisers made, [(training,
    batch size)] per forward)."""
    made, forwards = [], []

    class SpySGD(torch.optim.SGD):
        def __init__(self, params, lr, **kw):
            super().__init__(params, lr=lr, **kw)
            self.n_steps = 0
            made.append(self)

        def step(self, closure=None):
            self.n_steps += 1
            return super().step(closure)

    class SpyCNN(EvalCNN):
        def forward(self, x):
            forwards.append((self.training, x.shape[0]))
            return super().forward(x)

    monkeypatch.setattr(torch.optim, "SGD", SpySGD)
    monkeypatch.setattr(ev, "EvalCNN", SpyCNN)
    return made, forwards


def test_sgd_schedule_learning_rate_and_batches(monkeypatch):
    """Plain SGD at the given learning rate, batches of ``batch_size`` covering every training
    record once per epoch (ceil(n / batch) steps), the test set scored after each epoch."""
    made, forwards = _spy_on_training(monkeypatch)
    x, y = _toy()
    # samples.npz stores float16 images; labels may come as any integer type
    x, y = x.astype(np.float16), y.astype(np.uint8)
    res = train_classifier(x[:50], y[:50], x[50:].astype(np.float64), y[50:].astype(np.int32), 2,
                           epochs=3, lr=0.037, batch_size=16, progress=False)
    (opt,) = made
    assert opt.param_groups[0]["lr"] == 0.037 and opt.param_groups[0]["momentum"] == 0
    assert opt.n_steps == 3 * 4  # 50 records in batches of 16: 16, 16, 16, 2
    train_sizes = [b for t, b in forwards if t]
    assert train_sizes == [16, 16, 16, 2] * 3
    assert [b for t, b in forwards if not t] == [20] * 3  # one test pass per epoch
    assert res["lr"] == 0.037 and res["batch_size"] == 16 and res["n_train"] == 50
    assert len(res["test_accuracy_per_epoch"]) == 3


def test_learning_rate_changes_the_result():
    x, y = _toy(seed=3)
    data = (x[:50], y[:50], x[50:], y[50:], 2)
    a = train_classifier(*data, epochs=2, lr=0.5, batch_size=8, progress=False)
    b = train_classifier(*data, epochs=2, lr=0.5, batch_size=8, progress=False)
    c = train_classifier(*data, epochs=2, lr=1e-6, batch_size=8, progress=False)
    assert a["test_accuracy_per_epoch"] == b["test_accuracy_per_epoch"]  # seeded
    assert a["test_accuracy_per_epoch"] != c["test_accuracy_per_epoch"]


@pytest.mark.parametrize("kwargs,match", [
    (dict(epochs=0), "epochs"), (dict(lr=0.0), "lr"), (dict(batch_size=0), "batch_size"),
])
def test_classifier_rejects_bad_parameters(kwargs, match):
    x, y = _toy(10)
    with pytest.raises(ValueError, match=match):
        train_classifier(x, y, x, y, 2, progress=False, **({"epochs": 1} | kwargs))
    with pytest.raises(ValueError, match="non-empty"):
        train_classifier(x[:0], y[:0], x, y, 2, epochs=1, progress=False)
    with pytest.raises(ValueError, match="equal length"):
        train_classifier(x, y[:5], x, y, 2, epochs=1, progress=False)


def test_evaluate_samples_uses_the_synthetic_set_and_the_real_test_set(tmp_path, monkeypatch):
    """evaluate_samples trains on the (limited) synthetic samples and tests on the dataset's
    real test set, with the schedule it is given."""
    from datalens_lib.data.registry import ImageDataset

    x, y = _toy(40)
    test_x, test_y = _toy(30, seed=9)
    ds = ImageDataset(name="toy", x_train=x, y_train=y, x_test=test_x, y_test=test_y,
                      num_classes=2, class_names=("a", "b"), source=tmp_path)
    monkeypatch.setattr(ev, "load_dataset", lambda name, data_dir=None: ds)
    seen = {}

    def fake_train(xs, ys, xt, yt, c, **kw):
        seen.update(xs=xs, ys=ys, xt=xt, yt=yt, c=c, **kw)
        return {"paper": 1.0}

    monkeypatch.setattr(ev, "train_classifier", fake_train)
    samples = tmp_path / "samples.npz"
    np.savez(samples, x=x[::-1].copy(), y=y[::-1].copy())
    res = ev.evaluate_samples(samples, "toy", epochs=5, lr=0.1, batch_size=8, seed=3, limit=25,
                              progress=False)
    assert res["dataset"] == "toy"
    assert np.array_equal(seen["xs"], x[::-1][:25]) and np.array_equal(seen["ys"], y[::-1][:25])
    assert np.array_equal(seen["xt"], test_x) and np.array_equal(seen["yt"], test_y)
    assert np.shares_memory(seen["xt"], test_x) and seen["c"] == 2
    assert (seen["epochs"], seen["lr"], seen["batch_size"], seen["seed"]) == (5, 0.1, 8, 3)
    # an evaluation variant (lr, first N samples) has its own checkpoint and says so
    assert seen["checkpoint"] == tmp_path / ".eval-lr0.1-first25-seed3.ckpt"
    assert res["limit"] == 25
    ev.evaluate_samples(samples, "toy", seed=3, progress=False)
    assert seen["checkpoint"] == tmp_path / ".eval-seed3.ckpt"  # the run's own evaluation
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((2, 1, 5, 5)), y=np.zeros(2))
    with pytest.raises(ValueError, match=r"images have shape \(1, 5, 5\), expected "
                                         r"\(1, 12, 12\)"):
        ev.evaluate_samples(bad, "toy", progress=False)
    ref = ev.evaluate_real("toy", limit=10, epochs=2)
    assert np.array_equal(seen["xs"], x[:10]) and seen["epochs"] == 2 and ref["dataset"] == "toy"
    json.dumps(res)
    assert "test_limit" not in res and res["n_test"] == 30
    # the smoke profiles' eval_test_limit: the first real test images only, and said so
    res = ev.evaluate_samples(samples, "toy", epochs=5, seed=3, test_limit=12, progress=False)
    assert np.array_equal(seen["xt"], test_x[:12]) and np.array_equal(seen["yt"], test_y[:12])
    assert np.array_equal(seen["xs"], x[::-1]) and res["test_limit"] == res["n_test"] == 12
    assert seen["checkpoint"] == tmp_path / ".eval-test12-seed3.ckpt"


def test_evaluation_defaults_are_the_official_schedule(tmp_path, monkeypatch):
    """Without arguments: 600 epochs of SGD at lr 2e-3 in batches of 512, seed 0, on CPU."""
    from datalens_lib.data.registry import ImageDataset

    x, y = _toy(12)
    ds = ImageDataset(name="toy", x_train=x, y_train=y, x_test=x, y_test=y, num_classes=2,
                      class_names=("a", "b"), source=tmp_path)
    dirs = []
    monkeypatch.setattr(ev, "load_dataset", lambda name, data_dir=None: dirs.append(data_dir)
                        or ds)
    seen = []
    monkeypatch.setattr(ev, "train_classifier", lambda *a, **kw: seen.append(kw) or {})
    np.savez(tmp_path / "samples.npz", x=x, y=y)
    ev.evaluate_samples(tmp_path / "samples.npz", "toy", data_dir=tmp_path / "d")
    ev.evaluate_real("toy", data_dir=tmp_path / "e")
    assert dirs == [tmp_path / "d", tmp_path / "e"]
    assert {k: seen[0][k] for k in ("epochs", "lr", "batch_size", "seed", "device",
                                    "progress")} == {"epochs": 600, "lr": 2e-3,
                                                     "batch_size": 512, "seed": 0,
                                                     "device": "cpu", "progress": True}
    assert "data_dir" not in seen[1] and "limit" not in seen[1]
    import inspect

    params = inspect.signature(train_classifier).parameters
    assert {k: params[k].default for k in ("epochs", "lr", "batch_size", "seed", "device")} == {
        "epochs": 600, "lr": 2e-3, "batch_size": 512, "seed": 0, "device": "cpu"}


def test_checkpoint_key_fingerprints_labels_and_every_97th_image():
    """The evaluation checkpoint is keyed by sha256(labels, every 97th image)[:16]; committed
    checkpoints stay valid only while this stays the same, and other labels on the same
    images must not continue a checkpoint."""
    import hashlib

    x, y = _toy(300)
    h = hashlib.sha256(np.ascontiguousarray(y).tobytes())
    h.update(np.ascontiguousarray(x[::97]).tobytes())
    assert ev._fingerprint(x, y) == h.hexdigest()[:16]
    assert ev._fingerprint(x, 1 - y) != ev._fingerprint(x, y)


def test_default_schedule_runs_600_epochs_at_lr_2e3_in_batches_of_512(monkeypatch):
    made = []

    class SpySGD(torch.optim.SGD):
        def __init__(self, params, lr, **kw):
            super().__init__(params, lr=lr, **kw)
            made.append(lr)

    monkeypatch.setattr(torch.optim, "SGD", SpySGD)
    x, y = _toy(6)
    res = train_classifier(x[:, :, :8, :8], y, x[:, :, :8, :8], y, 2, progress=False)
    assert made == [2e-3] and res["epochs"] == 600 and res["batch_size"] == 512
    assert res["seed"] == 0 and len(res["test_accuracy_per_epoch"]) == 600


def _kill_in_epoch(monkeypatch, epoch: int) -> None:
    """Make train_classifier stop (KeyboardInterrupt) in ``epoch``'s test pass, as a kill."""
    calls = {"n": 0}
    real = ev.accuracy

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == epoch:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(ev, "accuracy", flaky)


def test_checkpoint_every_10_epochs_and_keyed_by_labels(tmp_path, monkeypatch):
    """A run killed in epoch 12 resumes from the epoch-10 checkpoint; the same images with
    other labels start afresh."""
    x, y = _toy(40, seed=4)
    data = (x[:30], y[:30], x[30:], y[30:], 2)
    ck = tmp_path / "c.ckpt"
    _kill_in_epoch(monkeypatch, 12)
    with pytest.raises(KeyboardInterrupt):
        train_classifier(*data, epochs=14, lr=0.05, batch_size=16, checkpoint=ck, progress=False)
    monkeypatch.undo()
    resumed = train_classifier(*data, epochs=14, lr=0.05, batch_size=16, checkpoint=ck,
                               progress=False)
    assert resumed["continued_from_epoch"] == 10 and resumed["epochs"] == 14
    other = train_classifier(x[:30], 1 - y[:30], x[30:], y[30:], 2, epochs=1, lr=0.05,
                             batch_size=16, checkpoint=ck, progress=False)
    assert other["continued_from_epoch"] == 0


def test_a_shorter_schedule_is_answered_from_the_checkpoint(tmp_path):
    x, y = _toy(40, seed=5)
    data = (x[:30], y[:30], x[30:], y[30:], 2)
    ck = tmp_path / "c.ckpt"
    full = train_classifier(*data, epochs=4, lr=0.05, batch_size=16, seed=2, checkpoint=ck,
                            progress=False)
    short = train_classifier(*data, epochs=3, lr=0.05, batch_size=16, seed=2, checkpoint=ck,
                             progress=False)
    assert short["test_accuracy_per_epoch"] == full["test_accuracy_per_epoch"][:3]
    assert (short["lr"], short["batch_size"], short["seed"], short["n_train"]) == (
        0.05, 16, 2, 30)
    assert short["epochs"] == 3 and short["continued_from_epoch"] == 4
    assert 0 < short["seconds"] < full["seconds"]
    same = train_classifier(*data, epochs=4, lr=0.05, batch_size=16, seed=2, checkpoint=ck,
                            progress=False)
    assert same["test_accuracy_per_epoch"] == full["test_accuracy_per_epoch"]
    assert same["seconds"] == full["seconds"] and same["continued_from_epoch"] == 4


def test_a_diverging_classifier_is_flagged_and_a_stable_one_is_not(tmp_path):
    """SGD with a huge step drives the weights to inf/NaN; the record says from which epoch
    (the clean protocol then reads one class's share), also when answered from a checkpoint;
    a prefix that ends before the divergence is not flagged."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 96)
    x = rng.random((96, 1, 28, 28)).astype(np.float32)
    data = (x[:64], y[:64], x[64:], y[64:], 2)
    ok = train_classifier(*data, epochs=2, lr=0.05, batch_size=32, progress=False)
    assert ok["diverged_at_epoch"] is None
    ck = tmp_path / "eval.ckpt"
    bad = train_classifier(*data, epochs=3, lr=1e12, batch_size=32, progress=False,
                           checkpoint=ck, checkpoint_every=1)
    assert bad["diverged_at_epoch"] in (1, 2, 3)
    again = train_classifier(*data, epochs=3, lr=1e12, batch_size=32, progress=False,
                             checkpoint=ck)
    assert again["continued_from_epoch"] == 3
    assert again["diverged_at_epoch"] == bad["diverged_at_epoch"]
    r = _classifier_result(CURVE, 2e-3, 512, 0, 100, 1.0, 0, nonfinite_from=3)
    assert r["diverged_at_epoch"] == 3
    last = _classifier_result(CURVE, 2e-3, 512, 0, 100, 1.0, 0, nonfinite_from=len(CURVE))
    assert last["diverged_at_epoch"] == len(CURVE)  # diverged in the schedule's last epoch
    assert _classifier_result(CURVE[:2], 2e-3, 512, 0, 100, 1.0, 0,
                              nonfinite_from=3)["diverged_at_epoch"] is None


def test_zero_row_padding_is_the_official_fashion_scripts_batches(monkeypatch):
    """pad_to: the epoch shuffles pad_to row indices; each batch trains on its real rows,
    their summed loss over the batch's size (zero rows with zero targets: no loss, no
    gradient, counted in the mean), and a batch of zero rows only is no step."""
    made, forwards = _spy_on_training(monkeypatch)
    x, y = _toy()
    res = train_classifier(x[:10], y[:10], x[50:], y[50:], 2, epochs=2, lr=0.1, batch_size=16,
                           progress=False, pad_to=160)
    (opt,) = made
    train_sizes = [b for t, b in forwards if t]
    assert sum(train_sizes) == 2 * 10 and all(0 < b <= 10 for b in train_sizes)
    assert opt.n_steps == len(train_sizes) <= 2 * 10  # batches without real rows: no step
    assert res["pad_to"] == 160 and res["n_train"] == 10
    with pytest.raises(ValueError, match="pad_to"):
        train_classifier(x[:10], y[:10], x[50:], y[50:], 2, epochs=1, pad_to=5, progress=False)


def test_zero_row_padding_gradient_equals_explicit_zero_rows():
    """The real rows' summed loss over the batch size has the gradient of Keras's categorical
    cross-entropy mean over a batch that holds the zero rows (zero targets) too."""
    torch.manual_seed(0)
    model = EvalCNN((1, 28, 28), 10).eval()  # no dropout: the two passes are comparable
    x = torch.rand(5, 1, 28, 28)
    y = torch.randint(0, 10, (5,))
    xb = torch.cat([x, torch.zeros(11, 1, 28, 28)])
    target = torch.cat([F.one_hot(y, 10).float(), torch.zeros(11, 10)])
    keras = -(target * F.log_softmax(model(xb), 1)).sum(1).mean()
    g1 = torch.autograd.grad(keras, list(model.parameters()))
    ours = F.cross_entropy(model(x), y, reduction="sum") / 16
    g2 = torch.autograd.grad(ours, list(model.parameters()))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_dropout_streams_keep_units_with_the_keras_rule_in_nchw_order():
    """DropoutStreams: a unit is kept iff its float32 uniform is >= p, kept units scaled by
    1 / (1 - p); the uniforms are share i of the flat NCHW tensor from generator i, seeded from
    SeedSequence((seed, 0xD0)); the same units in either memory layout."""
    seed, shape = 5, (64, 32, 13, 13)
    n = int(np.prod(shape))
    seeds = np.random.SeedSequence((seed, 0xD0)).generate_state(2, dtype=np.uint32)
    u = torch.cat([torch.rand(n // 2, generator=torch.Generator().manual_seed(int(s)))
                   for s in seeds]).view(shape)
    for p in (0.2, 0.25):
        x = torch.randn(shape) + 4.0  # (no zero inputs: a zero output means dropped)
        expect = torch.where(u >= p, x / (1 - p), 0.0)
        for fmt in (torch.contiguous_format, torch.channels_last):
            got = ev.DropoutStreams(seed)(x.contiguous(memory_format=fmt), p, True)
            torch.testing.assert_close(got, expect, rtol=1e-6, atol=0)
            assert got.is_contiguous(memory_format=fmt)
        dropped = float((expect == 0).float().mean())
        assert abs(dropped - p) < 5 * (p * (1 - p) / n) ** 0.5
    s = ev.DropoutStreams(seed)
    assert s(x, 0.25, False) is x and s(x, 0.0, True) is x
    assert not torch.equal(ev.DropoutStreams(seed + 1).uniform(shape), u)


def test_dropout_streams_replay_from_their_state_whatever_the_thread_count():
    """One torch thread draws the shares one after another, more draw them in parallel
    threads: the same masks, replayed from a saved state."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        s = ev.DropoutStreams(3)
        s.uniform((7, 9))
        state = [t.clone() for t in s.state()]
        a = s.uniform((40, 1000))
        assert s._pool is None  # (serial)
        torch.set_num_threads(2)
        s.set_state(state)
        b = s.uniform((40, 1000))
        assert s._pool is not None  # (threads)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(a, b)
    assert torch.equal(ev.DropoutStreams(-1).uniform((9,)),
                       ev.DropoutStreams(2 ** 64 - 1).uniform((9,)))
    one = ev.DropoutStreams(3, streams=1)
    assert not torch.equal(one.uniform((40, 1000)), ev.DropoutStreams(3).uniform((40, 1000)))
    with pytest.raises(ValueError, match="streams"):
        ev.DropoutStreams(3, streams=0)
    with pytest.raises(ValueError, match="2 streams"):
        s.set_state(state[:1])


def test_an_evaluation_resumed_from_its_checkpoint_replays_the_dropout_streams(tmp_path,
                                                                                monkeypatch):
    """Killed after the epoch-2 checkpoint and resumed, a streams evaluation ends with the
    weights of an uninterrupted one (the checkpoint holds the streams' states)."""
    x, y = _toy(60, seed=6)
    data = (x[:40], y[:40], x[40:], y[40:], 2)
    kw = dict(epochs=4, lr=0.05, batch_size=16, seed=1, progress=False, checkpoint_every=2)
    whole = train_classifier(*data, checkpoint=tmp_path / "a.ckpt", **kw)
    assert whole["dropout_rng"] == "streams"
    _kill_in_epoch(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train_classifier(*data, checkpoint=tmp_path / "b.ckpt", **kw)
    monkeypatch.undo()
    resumed = train_classifier(*data, checkpoint=tmp_path / "b.ckpt", **kw)
    assert resumed["continued_from_epoch"] == 2
    a, b = (torch.load(tmp_path / f, weights_only=True)["model"] for f in ("a.ckpt", "b.ckpt"))
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_an_older_checkpoint_continues_with_atens_dropout(tmp_path):
    """A checkpoint started with ATen's dropout (every evaluation before DropoutStreams) is
    continued with it by default; asking for the streams starts afresh."""
    x, y = _toy(60, seed=8)
    data = (x[:40], y[:40], x[40:], y[40:], 2)
    kw = dict(lr=0.05, batch_size=16, seed=1, progress=False, checkpoint=tmp_path / "c.ckpt")
    old = train_classifier(*data, epochs=2, dropout_rng="torch", **kw)
    assert old["dropout_rng"] == "torch"
    more = train_classifier(*data, epochs=3, **kw)
    assert more["continued_from_epoch"] == 2 and more["dropout_rng"] == "torch"
    fresh = train_classifier(*data, epochs=3, dropout_rng="streams", **kw)
    assert fresh["continued_from_epoch"] == 0 and fresh["dropout_rng"] == "streams"
    with pytest.raises(ValueError, match="dropout_rng"):
        train_classifier(*data, epochs=1, dropout_rng="numpy", progress=False)
    assert ev._eval_checkpoint(tmp_path / "samples.npz", 0, dropout_rng="torch").name == \
        ".eval-dropouttorch-seed0.ckpt"


def test_the_first_convolution_reads_and_writes_channels_last():
    """A one-channel batch gets channels-last strides as a view of its memory (contiguous()
    would leave it NCHW-strided and oneDNN would write the first layer's output in NCHW);
    the channels-last classifier's first convolution then writes channels-last."""
    x = torch.rand(4, 1, 28, 28)
    xc = ev.channels_last_strides(x)
    assert torch.equal(xc, x) and xc.data_ptr() == x.data_ptr()
    assert xc.stride() == (784, 1, 28, 1)
    x3 = torch.rand(4, 3, 12, 12)
    assert torch.equal(ev.channels_last_strides(x3), x3)
    assert ev.channels_last_strides(x3).stride() == (432, 1, 36, 3)
    seen = {}
    m = EvalCNN((1, 28, 28), 10, channels_last=True).to(memory_format=torch.channels_last)
    m.conv1.register_forward_hook(lambda mod, i, o: seen.update(stride=o.stride()))
    m(x)
    assert seen["stride"] == (26 * 26 * 32, 1, 26 * 32, 32)


def test_explicit_dropout_masks_get_their_own_checkpoint_and_record_name(tmp_path, monkeypatch):
    """evaluate_samples with dropout_rng named explicitly resumes from a checkpoint of its own
    (never the default evaluation's), and the CLI names its record as a variant."""
    from datalens_lib import cli

    seen = []
    monkeypatch.setattr(ev, "load_dataset", lambda name, data_dir=None: type(
        "DS", (), {"shape": (1, 12, 12), "num_classes": 2, "x_test": _toy(10, 1)[0],
                   "y_test": _toy(10, 1)[1]})())
    monkeypatch.setattr(ev, "load_samples", lambda *a, **k: _toy(20, 2))
    monkeypatch.setattr(ev, "train_classifier",
                        lambda *a, checkpoint=None, **k: seen.append(checkpoint.name) or {})
    for rng in (None, "torch", "streams"):
        ev.evaluate_samples(tmp_path / "samples.npz", "mnist", epochs=1, dropout_rng=rng)
    assert seen == [".eval-seed0.ckpt", ".eval-dropouttorch-seed0.ckpt",
                    ".eval-dropoutstreams-seed0.ckpt"]
    assert cli._eval_variant(2e-3, 2e-3, None, 0, None, "torch") == "-dropouttorch"
    assert cli._eval_variant(2e-3, 2e-3, None, 0) == ""


@pytest.mark.parametrize("cl", [False, True])
def test_the_first_max_pool_is_atens_and_reuses_its_gradient_buffer(cl):
    """``_MaxPool2x2``: the output and the gradient of its input equal ``F.max_pool2d``'s bit
    for bit, on inputs full of ties (constant windows pick the same index); its backward writes
    into one buffer per shape, layout and device, reused by the next backward of that shape."""
    torch.manual_seed(0)
    fmt = torch.channels_last if cl else torch.contiguous_format
    buffers: dict = {}
    ptrs = []
    for n in (6, 6, 3):
        h = torch.randn(n, 4, 8, 8)
        h[:, :, :4] = 0.5  # whole windows of equal values
        h[:, :2, 4:, :2] = -1.0
        h = h.contiguous(memory_format=fmt).requires_grad_()
        g = torch.randn(n, 4, 4, 4)
        out = ev._MaxPool2x2.apply(h, buffers)
        ref_h = h.detach().clone().requires_grad_()
        ref = F.max_pool2d(ref_h, 2)
        assert torch.equal(out, ref)
        (grad,) = torch.autograd.grad(out, h, g)
        (ref_grad,) = torch.autograd.grad(ref, ref_h, g)
        assert torch.equal(grad, ref_grad) and grad.is_contiguous(memory_format=fmt)
        ptrs.append(grad.data_ptr())
    # (the second backward wrote into the first one's buffer and still equals ATen's
    # gradient: the buffer is overwritten, never accumulated into)
    assert ptrs[0] == ptrs[1] != ptrs[2] and len(buffers) == 2


def test_the_classifier_pools_through_the_reused_buffer():
    m = EvalCNN((1, 28, 28), 10, channels_last=True).to(memory_format=torch.channels_last)
    for _ in range(2):
        F.cross_entropy(m(torch.rand(8, 1, 28, 28)), torch.arange(8)).backward()
    (buf,) = m._pool_grads.values()
    assert buf.shape == (8, 32, 26, 26) and buf.is_contiguous(memory_format=torch.channels_last)
