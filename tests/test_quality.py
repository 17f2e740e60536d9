"""IS / FID (datalens_lib.quality) and sample files (datalens_lib.samples)."""

import json
import shutil

import numpy as np
import pytest
import torch
from conftest import real_dataset_dir

from datalens_lib import cli
from datalens_lib.quality import classifier as qc
from datalens_lib.quality import inception
from datalens_lib.quality.scores import frechet_distance, gaussian_stats, inception_score
from datalens_lib.samples import check_images, load_samples, publish_subset, sha256_file


@pytest.fixture
def real_mnist(monkeypatch):
    """Real MNIST (and Fashion-MNIST beside it), or skip."""
    monkeypatch.setenv("DATALENS_DATA_DIR", str(real_dataset_dir("mnist").parent))

# ---------------------------------------------------------------------------- the formulas


def test_frechet_distance_diagonal_closed_form():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.1, 3, 6), rng.uniform(0.1, 3, 6)
    mu1, mu2 = rng.normal(size=6), rng.normal(size=6)
    want = ((mu1 - mu2) ** 2).sum() + ((np.sqrt(a) - np.sqrt(b)) ** 2).sum()
    assert frechet_distance(mu1, np.diag(a), mu2, np.diag(b)) == pytest.approx(want, rel=1e-10)


def test_frechet_distance_matches_the_symmetric_formula_on_full_covariances():
    """tr((S1 S2)^1/2) = tr((S1^1/2 S2 S1^1/2)^1/2), the latter from eigenvalues only."""
    rng = np.random.default_rng(1)
    m1, m2 = rng.normal(size=(8, 8)), rng.normal(size=(8, 8))
    s1, s2 = m1 @ m1.T + 0.1 * np.eye(8), m2 @ m2.T + 0.1 * np.eye(8)
    w, v = np.linalg.eigh(s1)
    r1 = v @ np.diag(np.sqrt(w)) @ v.T
    tr = np.sqrt(np.clip(np.linalg.eigvalsh(r1 @ s2 @ r1), 0, None)).sum()
    mu = rng.normal(size=8)
    want = mu @ mu + np.trace(s1) + np.trace(s2) - 2 * tr
    assert frechet_distance(mu, s1, np.zeros(8), s2) == pytest.approx(want, rel=1e-9)
    assert frechet_distance(mu, s1, mu, s1) == pytest.approx(0.0, abs=1e-8)


def test_frechet_distance_singular_covariances_and_errors():
    f = np.random.default_rng(2).normal(size=(5, 10))  # 5 points in 10-d: rank-4 covariance
    mu, s = gaussian_stats(f)
    assert abs(frechet_distance(mu, s, mu, s)) < 1e-5
    with pytest.raises(ValueError, match="shapes"):
        frechet_distance(mu, s, mu[:3], s[:3, :3])
    with pytest.raises(ValueError, match=r"n >= 2"):
        gaussian_stats(f[:1])


def test_inception_score_extremes_permutation_and_errors():
    onehot = np.eye(10)[np.arange(1000) % 10]
    assert inception_score(onehot, splits=10)[0] == pytest.approx(10.0)
    assert inception_score(np.tile(np.eye(10)[3], (100, 1)))[0] == pytest.approx(1.0)
    p = np.random.default_rng(0).dirichlet(np.full(10, 0.3), size=500)
    perm = np.random.default_rng(1).permutation(10)
    assert inception_score(p[:, perm]) == pytest.approx(inception_score(p))
    assert 1.0 < inception_score(p)[0] < 10.0
    with pytest.raises(ValueError, match="splits"):
        inception_score(p, splits=0)
    with pytest.raises(ValueError, match="probability"):
        inception_score(p * 2)


# ------------------------------------------------------------------------ sample files


def test_check_images_converts_and_rejects():
    x8 = np.full((4, 28, 28), 255, np.uint8)
    x, y = check_images(x8, np.arange(4))
    assert x.shape == (4, 1, 28, 28) and x.dtype == np.float32 and x.max() == 1.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        check_images(x8.astype(np.float32), np.arange(4))
    with pytest.raises(ValueError, match="labels must lie"):
        check_images(x8, np.array([0, 1, 2, 10]), num_classes=10)
    with pytest.raises(ValueError, match="expected"):
        check_images(x8, np.arange(4), shape=(3, 28, 28))
    with pytest.raises(ValueError, match="integers"):
        check_images(x8, np.arange(4.0))
    with pytest.raises(ValueError, match="NaN"):
        check_images(np.full((2, 1, 4, 4), np.nan, np.float32), np.arange(2))


def test_load_samples_names_missing_arrays(tmp_path):
    np.savez(tmp_path / "a.npz", images=np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="missing"):
        load_samples(tmp_path / "a.npz")
    with pytest.raises(FileNotFoundError):
        load_samples(tmp_path / "none.npz")


def test_publish_subset_is_reproducible_and_faithful(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (300, 1, 8, 8)).astype(np.float16)
    y = rng.integers(0, 10, 300)
    np.savez(tmp_path / "samples.npz", x=x, y=y)
    rec = publish_subset(tmp_path / "samples.npz", tmp_path / "pub.npz", n=50, seed=3)
    assert rec["sha256"] == sha256_file(tmp_path / "pub.npz") and rec["n"] == 50
    with np.load(tmp_path / "pub.npz") as f:
        xs, ys, idx = f["x"], f["y"], f["index"]
    assert xs.dtype == np.uint8 and len(set(idx)) == 50
    assert np.array_equal(idx, np.sort(np.random.default_rng(3).permutation(300)[:50]))
    assert np.array_equal(ys, y[idx])
    assert np.abs(xs / 255.0 - x[idx].astype(np.float32)).max() <= 0.5 / 255 + 1e-6
    rec2 = publish_subset(tmp_path / "samples.npz", tmp_path / "pub2.npz", n=50, seed=3)
    assert rec2["sha256"] == rec["sha256"]
    with pytest.raises(ValueError, match="fewer"):
        publish_subset(tmp_path / "samples.npz", tmp_path / "p.npz", n=301)


# --------------------------------------------------------------- the domain classifiers


@pytest.mark.parametrize("dataset", ["mnist", "fashion-mnist"])
def test_committed_domain_classifier_matches_its_record(dataset):
    model, rec = qc.load_domain_classifier(dataset)
    assert rec["sha256"] == sha256_file(qc.WEIGHTS_DIR / f"{dataset}.pt")
    assert rec["test_accuracy"] > {"mnist": 0.985, "fashion-mnist": 0.88}[dataset]
    assert (qc.WEIGHTS_DIR / f"{dataset}.pt").stat().st_size < 4e6


def test_domain_classifier_checksum_and_missing(tmp_path):
    for f in ("mnist.pt", "mnist.json"):
        shutil.copy(qc.WEIGHTS_DIR / f, tmp_path / f)
    with open(tmp_path / "mnist.pt", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(ValueError, match="SHA-256"):
        qc.load_domain_classifier("mnist", tmp_path)
    with pytest.raises(FileNotFoundError, match="domain-classifier"):
        qc.load_domain_classifier("cifar10", tmp_path)


def test_saved_weights_have_a_reproducible_sha256(tmp_path):
    model, rec = qc.load_domain_classifier("mnist")
    a = qc.save_domain_classifier(model, dict(rec), tmp_path / "a")
    b = qc.save_domain_classifier(model, dict(rec), tmp_path / "b")
    assert sha256_file(a) == sha256_file(b)
    assert json.loads((tmp_path / "a" / "mnist.json").read_text())["sha256"] == sha256_file(a)


@pytest.mark.usefixtures("real_mnist")
def test_domain_classifier_training_is_deterministic():
    a, ra = qc.train_domain_classifier("mnist", epochs=1, limit=256, progress=False)
    b, rb = qc.train_domain_classifier("mnist", epochs=1, limit=256, progress=False)
    c, _ = qc.train_domain_classifier("mnist", epochs=1, limit=256, seed=1, progress=False)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    assert not torch.equal(a.fc2.weight, c.fc2.weight)
    assert ra["test_accuracy"] == rb["test_accuracy"]


@pytest.mark.usefixtures("real_mnist")
def test_real_data_scores_near_real_noise_scores_near_one():
    from datalens_lib.data import load_dataset

    ds = load_dataset("mnist")
    real = qc.score_images(ds.x_test, ds.y_test, "mnist")
    assert real["is"] > 9.0 and real["label_agreement"] > 0.985
    noise = np.random.default_rng(0).uniform(0, 1, (2000, 1, 28, 28)).astype(np.float32)
    fake = qc.score_images(noise, None, "mnist")
    assert fake["is"] < 2.0 and "label_agreement" not in fake
    assert fake["fid"] > 100 * real["fid"] > 0  # features are not normalised: a ratio


def test_reference_stats_are_computed_once_per_data_folder_and_classifier(tmp_path,
                                                                         monkeypatch):
    """The 60k-image FID reference is the costliest part of a score: one computation per
    process for each (data folder, classifier weights), and another folder or other weights
    is another computation, never the cached one."""
    real = real_dataset_dir("mnist")
    calls, predict = [], qc.predict

    def counting(model, x, batch_size=2000):
        calls.append(len(x))
        return predict(model, x[:64])  # the real network on a few rows: fast

    monkeypatch.setattr(qc, "predict", counting)
    qc._reference_stats.cache_clear()
    try:
        a = qc.reference_stats("mnist", str(real))
        assert qc.reference_stats("mnist", str(real)) is a and calls == [60_000]
        (tmp_path / "mnist").symlink_to(real, target_is_directory=True)
        qc.reference_stats("mnist", str(tmp_path / "mnist"))
        assert len(calls) == 2
        model, rec = qc.load_domain_classifier("mnist")
        monkeypatch.setattr(qc, "load_domain_classifier",
                            lambda d: (model, {**rec, "sha256": "0" * 64}))
        qc.reference_stats("mnist", str(real))
        assert len(calls) == 3
    finally:  # never leave the few-row statistics to other tests of this process
        qc._reference_stats.cache_clear()


@pytest.mark.usefixtures("real_mnist")
def test_is_is_unchanged_by_permuting_the_classifier_outputs(monkeypatch):
    from datalens_lib.data import load_dataset

    x = load_dataset("mnist").x_test[:1000]
    model, rec = qc.load_domain_classifier("mnist")
    base = qc.score_images(x, None, "mnist")
    perm = torch.tensor([3, 7, 0, 9, 1, 5, 2, 8, 6, 4])
    permuted = qc.DomainClassifier(1, 10)
    permuted.load_state_dict(model.state_dict())
    with torch.no_grad():
        permuted.fc2.weight.copy_(model.fc2.weight[perm])
        permuted.fc2.bias.copy_(model.fc2.bias[perm])
    monkeypatch.setattr(qc, "load_domain_classifier", lambda d: (permuted, rec))
    out = qc.score_images(x, None, "mnist")
    assert out["is"] == pytest.approx(base["is"], rel=1e-9)
    assert out["fid"] == pytest.approx(base["fid"], rel=1e-9)  # features are before fc2


# ------------------------------------------------------------------ Inception loading path


def test_inception_weights_errors_name_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("DATALENS_INCEPTION_WEIGHTS", raising=False)
    with pytest.raises(FileNotFoundError, match=inception.WEIGHTS_NAME):
        inception.resolve_weights(None)
    with pytest.raises(FileNotFoundError, match=inception.WEIGHTS_NAME):
        inception.resolve_weights(tmp_path / "missing.pth")
    fake = tmp_path / inception.WEIGHTS_NAME
    fake.write_bytes(b"not the weights")
    with pytest.raises(ValueError, match="SHA-256 starts with"):
        inception.resolve_weights(fake)
    monkeypatch.setenv("DATALENS_INCEPTION_WEIGHTS", str(fake))
    monkeypatch.setattr(inception, "SHA256_PREFIX", sha256_file(fake)[:8])
    assert inception.resolve_weights(None) == (fake, sha256_file(fake))


# ------------------------------------------------------------------------------ the CLI


@pytest.mark.usefixtures("real_mnist")
def test_cli_quality_and_evaluate_accept_a_user_npz(tmp_path, capsys):
    from datalens_lib.data import load_dataset

    ds = load_dataset("mnist")
    f = tmp_path / "mine.npz"
    np.savez(f, x=(ds.x_test[:600, 0] * 255).astype(np.uint8), y=ds.y_test[:600])
    assert cli.main(["quality", str(f), "--dataset", "mnist"]) == 0
    rec = json.loads((tmp_path / "mine-quality.json").read_text())
    assert rec["is"] > 5 and rec["n"] == 600 and rec["git_sha"]
    assert cli.main(["evaluate", str(f), "--dataset", "mnist", "--epochs", "1"]) == 0
    ev = json.loads((tmp_path / "mine-eval-1ep.json").read_text())
    assert ev["n_train"] == 600 and 0 <= ev["paper"] <= 1
    # another seed or a shorter training set is another record, never the first one
    assert cli.main(["evaluate", str(f), "--dataset", "mnist", "--epochs", "1", "--seed", "1",
                     "--limit", "300"]) == 0
    assert json.loads((tmp_path / "mine-eval-1ep-first300-seed1.json").read_text())[
        "n_train"] == 300
    assert json.loads((tmp_path / "mine-eval-1ep.json").read_text()) == ev
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.full((3, 28, 28), 2.0, np.float32), y=np.arange(3))
    assert cli.main(["quality", str(bad), "--dataset", "mnist"]) == 2
    assert "[0, 1]" in capsys.readouterr().err
    assert cli.main(["quality", str(f)]) == 2
    # several targets in one call, each its own record; the first failure stops the call
    g = tmp_path / "other.npz"
    np.savez(g, x=(ds.x_test[600:900, 0] * 255).astype(np.uint8), y=ds.y_test[600:900])
    (tmp_path / "mine-quality.json").unlink()
    assert cli.main(["quality", str(f), str(g), "--dataset", "mnist"]) == 0
    assert json.loads((tmp_path / "mine-quality.json").read_text())["is"] == rec["is"]
    assert json.loads((tmp_path / "other-quality.json").read_text())["n"] == 300
    (tmp_path / "other-quality.json").unlink()
    assert cli.main(["quality", str(bad), str(g), "--dataset", "mnist"]) == 2
    assert not (tmp_path / "other-quality.json").exists()


@pytest.mark.usefixtures("real_mnist")
def test_cli_publish_samples_records_the_subset_and_evaluate_uses_it(tmp_path, capsys,
                                                                    monkeypatch):
    import pandas as pd

    from datalens_lib.data import load_dataset
    from datalens_lib.quality import report
    from datalens_lib.results import PAPER_DIR

    ds = load_dataset("mnist")
    run, dest = tmp_path / "run", tmp_path / "datalens" / "mnist-eps1" / "committed"
    run.mkdir()
    dest.mkdir(parents=True)
    np.savez(run / "samples.npz", x=ds.x_test[:500].astype(np.float16), y=ds.y_test[:500])
    rec = {"config": {"dataset": "mnist", "eval_lr": 2e-3, "eval_batch_size": 512,
                      "eval_epochs": 600}, "samples": {"file": "samples.npz"},
           "profile": "paper", "target_epsilon": 1.0}
    for d in (run, dest):
        (d / "run.json").write_text(json.dumps(rec))
    assert cli.main(["publish-samples", str(run), "--dest", str(dest), "--n", "200"]) == 0
    pub = json.loads((dest / "run.json").read_text())["published_samples"]
    assert pub["file"] == "samples-200.npz" and pub["n"] == 200 and pub["seed"] == 0
    assert pub["sha256"] == sha256_file(dest / "samples-200.npz")
    # the committed folder has no samples.npz: evaluate and quality use the subset, and the
    # record gets the subset's name (the full run's eval record is never overwritten)
    assert cli.main(["evaluate", str(dest), "--epochs", "1"]) == 0
    assert (dest / "samples-200-eval-1ep.json").exists()
    assert not (dest / "eval-1ep.json").exists()
    [entry] = report.published_runs(tmp_path)
    assert report.stale_quality_records(tmp_path) == [dest]
    assert cli.main(["quality", str(dest)]) == 0
    q = json.loads((dest / "quality.json").read_text())
    assert q["samples"] == "samples-200.npz" and q["samples_sha256"] == pub["sha256"]
    # T3 reads the committed score instead of scoring the subset again ...
    assert report.stored_score(entry) == q and report.stale_quality_records(tmp_path) == []

    def scored_again(*a, **k):
        raise AssertionError("a committed score was computed again")

    monkeypatch.setattr(report, "score_images", scored_again)
    paper = pd.read_csv(PAPER_DIR / "tab_full_image.csv", dtype={"epsilon": str})
    rows = report.score_rows([entry], paper)
    assert {r["metric"]: r["ours"] for r in rows} == {"inception_score": q["is"],
                                                      "fid": q["fid"]}
    assert rows[0]["scored"] == q["git_sha"]
    # ... only when it scored these very samples, all of them, with the committed weights
    for change in ({"limit": 100}, {"samples_sha256": "0" * 64}, {"dataset": "fashion-mnist"},
                   {"scores_version": 0},
                   {"classifier": {**q["classifier"], "sha256": "0" * 64}}):
        (dest / "quality.json").write_text(json.dumps({**q, **change}))
        assert report.stored_score(entry) is None, change
    (dest / "quality.json").write_text(json.dumps(q))
    assert report.stored_score(entry) == q
    np.savez(dest / "samples-200.npz", x=ds.x_test[200:400, 0], y=ds.y_test[200:400])
    assert report.stored_score(entry) is None  # the same name, other samples


@pytest.mark.usefixtures("real_mnist")
def test_a_committed_quality_record_is_what_the_code_computes_now():
    """T3 reads committed scores (``make quality-records``): one of them scored again with
    today's code gives the same numbers, so a change to the scores cannot hide behind them."""
    from datalens_lib.quality import report

    stored = [(p, q) for p in report.published_runs() if p["dataset"] == "mnist"
              for q in [report.stored_score(p)] if q is not None]
    assert stored, "no committed quality record of an MNIST run (make quality-records)"
    entry, q = stored[0]
    x, y = load_samples(entry["path"])
    s = qc.score_images(x, y, "mnist")
    assert s["n"] == q["n"] and s["label_agreement"] == q["label_agreement"]
    assert s["is"] == pytest.approx(q["is"], rel=1e-4)
    assert s["fid"] == pytest.approx(q["fid"], rel=1e-4)


def test_subset_reevaluations_compare_at_the_same_number_of_sgd_steps(tmp_path):
    from datalens_lib.quality.report import subset_reevaluations

    def run(name, full, seed1, subset):
        d = tmp_path / "datalens" / "mnist-eps1" / name
        d.mkdir(parents=True)
        (d / "samples-10k.npz").write_bytes(b"")
        (d / "run.json").write_text(json.dumps({
            "config": {"dataset": "mnist", "eval_epochs": 600}, "target_epsilon": 1.0,
            "profile": "paper", "published_samples": {"file": "samples-10k.npz",
                                                      "n": 10000}}))
        for f, acc, n in (("eval-30ep.json", full, 100000), ("eval-2ep.json", 0.1, 100000),
                          ("eval-30ep-seed1.json", seed1, 100000),
                          ("samples-10k-eval-300ep.json", subset, 10000)):
            if acc is not None:
                (d / f).write_text(json.dumps({"paper": acc, "n_train": n}))

    run("a", 0.64, 0.66, 0.625)  # 1.5 points off, seeds 2 points apart
    run("b", 0.64, 0.645, 0.60)  # 4 points off, seeds 0.5 apart
    run("c", 0.64, None, 0.63)  # one evaluation seed
    run("d", 0.64, 0.66, 0.63)  # its eval-30ep.json is not seed 0: not a base to compare with
    d = tmp_path / "datalens" / "mnist-eps1" / "d" / "eval-30ep.json"
    d.write_text(json.dumps({"paper": 0.64, "n_train": 100000, "seed": 1}))
    df = subset_reevaluations(tmp_path).set_index("run")
    assert "mnist-eps1/d" not in df.index
    assert list(df.full_epochs) == [30, 30, 30]  # the longest evaluation is the run's own
    assert list(df.subset_same_steps_epochs) == [300, 300, 300]
    assert list(df.sgd_steps_full) == [30 * 196] * 3 and list(df.sgd_steps_subset) == [6000] * 3
    assert df.loc["mnist-eps1/a", "difference"] == pytest.approx(-0.015)
    assert df.loc["mnist-eps1/a", "spread"] == pytest.approx(0.02)
    assert df.loc["mnist-eps1/a", "verdict"] == "within the evaluation-seed spread"
    assert df.loc["mnist-eps1/b", "verdict"] == "outside the evaluation-seed spread"
    assert df.loc["mnist-eps1/c", "verdict"] == "one evaluation seed: spread unknown"
    assert df.loc["mnist-eps1/c", "subset_30ep"] is None


def test_published_runs_are_labelled_as_the_utility_tables_label_them(tmp_path, monkeypatch):
    """DP-GAN's small-batch cpu run trains the paper setting (only its evaluation is shorter):
    its IS / FID are the paper setting's, at the paper profile; the large-batch run is a
    variant with its own method name, beside the paper's DP-GAN number but never taken for
    the paper's method (not its row in T3, not in the rankings); a run whose recorded config
    differs from the paper setting keeps its own profile."""
    import pandas as pd

    from datalens_lib.quality import report
    from datalens_lib.results import PAPER_DIR, RESULTS_DIR

    for config in ("mnist-eps1", "mnist-eps1-large"):
        src, dest = RESULTS_DIR / "dpgan" / config / "cpu", tmp_path / "dpgan" / config / "cpu"
        dest.mkdir(parents=True)
        shutil.copy(src / "run.json", dest / "run.json")
        pub = json.loads((src / "run.json").read_text())["published_samples"]
        (dest / pub["file"]).write_bytes(b"")  # present on disk (not read here)
    changed = tmp_path / "dpgan" / "mnist-eps10" / "cpu"
    changed.mkdir(parents=True)
    rec = json.loads((RESULTS_DIR / "dpgan/mnist-eps1/cpu/run.json").read_text())
    rec["config"] = {**rec["config"], "batch_size": rec["config"]["batch_size"] * 2}
    (changed / "run.json").write_text(json.dumps(rec))
    (changed / rec["published_samples"]["file"]).write_bytes(b"")
    runs = {p["config"]: p for p in report.published_runs(tmp_path)}
    small, large, other = runs["mnist-eps1"], runs["mnist-eps1-large"], runs["mnist-eps10"]
    assert (small["method"], small["profile"], small["recorded_profile"], small["variant"]) \
        == ("DP-GAN", "paper", "cpu", False)
    assert (large["method"], large["paper_method"], large["profile"], large["variant"]) \
        == ("DP-GAN (large batch)", "DP-GAN", "cpu", True)
    assert other["profile"] == "cpu"  # another batch: not the paper setting
    paper = pd.read_csv(PAPER_DIR / "tab_full_image.csv", dtype={"epsilon": str})
    monkeypatch.setattr(report, "stored_score", lambda e: {
        "is": 2.0, "fid": 300.0, "n": 10, "classifier": {"sha256": "0" * 64}})
    rows = report.score_rows([small, large], paper)
    fid = {r["method"]: r for r in rows if r["metric"] == "fid"}
    assert fid["DP-GAN"]["paper"] == fid["DP-GAN (large batch)"]["paper"] == 470.2
    assert fid["DP-GAN"]["profile"] == "paper" and not fid["DP-GAN"]["variant"]
    assert fid["DP-GAN (large batch)"]["variant"] is True
    assert fid["DP-GAN (large batch)"]["paper_method"] == "DP-GAN"
    # a paper-profile large-batch run's rows, stored alone as T3 stores them, make the
    # paper's DP-GAN cell "only a variant ran" on the status page (its paper_method)
    from datalens_lib import status, store

    big = report.score_rows([{**large, "profile": "paper"}], paper)
    store.save_result("tab:full_image", {"p": 1}, [r for r in big if r["metric"] == "fid"],
                      profile="paper", root=tmp_path / "store")
    m = status.missing_cells(root=tmp_path / "store")
    m = m[(m.artifact == "tab:full_image") & (m.dataset == "mnist") & (m.method == "DP-GAN")
          & (m.epsilon.astype(str) == "1")]
    assert list(m.why) == ["only a variant of the paper's setting ran at paper scale"]
    shown = report.choose_per_cell(rows)  # two cells: the variant never stands for DP-GAN
    assert sorted(r["method"] for r in shown if r["metric"] == "fid") == [
        "DP-GAN", "DP-GAN (large batch)"]
    table = pd.DataFrame([
        {"dataset": "mnist", "epsilon": "1", "metric": "fid", "method": m, "ours": o,
         "paper": pp, "variant": v}
        for m, o, pp, v in (("DataLens", 100.0, 120.0, False), ("G-PATE", 200.0, 150.0, False),
                            ("DP-GAN (large batch)", 50.0, 470.2, True))])
    rk = report.rankings(table)
    assert rk.methods.tolist() == [2]  # the variant is not a third method
