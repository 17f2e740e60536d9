import dataclasses
import functools
import gzip
import hashlib
import http.server
import os
import pickle
import threading
import urllib.error

import numpy as np
import pytest
from conftest import real_dataset_dir, write_idx
from PIL import Image

from datalens_lib.data import (
    DatasetFileError,
    DatasetNotFoundError,
    candidate_dirs,
    ensure_dataset,
    fetch_dataset,
    load_dataset,
    official_split_overlap,
    parse_idx,
    read_idx,
    registry,
    resolve_dataset_dir,
)

# ---------------------------------------------------------------- IDX


def test_idx_roundtrip_gz_and_raw(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = write_idx(tmp_path / "a.gz", arr)
    write_idx(tmp_path / "a", arr, compress=False)
    np.testing.assert_array_equal(read_idx(tmp_path / "a.gz"), arr)
    np.testing.assert_array_equal(read_idx(tmp_path / "a"), arr)
    sha = hashlib.sha256(raw).hexdigest()
    np.testing.assert_array_equal(read_idx(tmp_path / "a.gz", sha256=sha), arr)


def test_idx_checksum_mismatch_names_file(tmp_path):
    write_idx(tmp_path / "x.gz", np.zeros((2, 2), np.uint8))
    with pytest.raises(DatasetFileError, match=r"checksum mismatch for .*x\.gz"):
        read_idx(tmp_path / "x.gz", sha256="0" * 64)


def test_idx_truncated_and_bad_magic(tmp_path):
    raw = write_idx(tmp_path / "t", np.ones((4, 5), np.uint8), compress=False)
    (tmp_path / "t").write_bytes(raw[:-3])
    with pytest.raises(DatasetFileError, match="truncated"):
        read_idx(tmp_path / "t")
    with pytest.raises(DatasetFileError, match="magic"):
        parse_idx(b"\x01\x02\x03\x04rest")
    # a truncated gzip stream
    gz = gzip.compress(raw)
    (tmp_path / "t.gz").write_bytes(gz[: len(gz) // 2])
    with pytest.raises(DatasetFileError, match="truncated or corrupt"):
        read_idx(tmp_path / "t.gz")


def test_idx_missing_file(tmp_path):
    with pytest.raises(DatasetFileError, match="not found"):
        read_idx(tmp_path / "nope.gz")


# ---------------------------------------------------------------- lookup order


def _fake_mnist(folder, n=6, value=0):
    folder.mkdir(parents=True, exist_ok=True)
    shas = {}
    for name, shape in (("train-images-idx3-ubyte", (n, 28, 28)),
                        ("train-labels-idx1-ubyte", (n,)),
                        ("t10k-images-idx3-ubyte", (n // 2, 28, 28)),
                        ("t10k-labels-idx1-ubyte", (n // 2,))):
        arr = np.full(shape, value, np.uint8)
        if "labels" in name:
            arr = np.arange(shape[0], dtype=np.uint8) % 10
        shas[name] = hashlib.sha256(write_idx(folder / f"{name}.gz", arr)).hexdigest()
    return shas


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.setattr(registry, "SYSTEM_DATA_DIR", tmp_path / "system")
    monkeypatch.delenv("DATALENS_DATA_DIR", raising=False)
    with pytest.raises(DatasetNotFoundError, match="datalens data fetch mnist"):
        resolve_dataset_dir("mnist")
    _fake_mnist(tmp_path / "system" / "mnist")
    assert resolve_dataset_dir("mnist") == tmp_path / "system" / "mnist"
    _fake_mnist(tmp_path / "repo" / "data" / "raw" / "mnist")
    assert resolve_dataset_dir("mnist") == tmp_path / "repo" / "data" / "raw" / "mnist"
    _fake_mnist(tmp_path / "env" / "mnist")
    monkeypatch.setenv("DATALENS_DATA_DIR", str(tmp_path / "env"))
    assert resolve_dataset_dir("mnist") == tmp_path / "env" / "mnist"
    _fake_mnist(tmp_path / "explicit")
    assert resolve_dataset_dir("mnist", tmp_path / "explicit") == tmp_path / "explicit"
    assert candidate_dirs("mnist")[0] == tmp_path / "env" / "mnist"


def test_fake_mnist_fails_checksum_but_loads_unverified(tmp_path):
    _fake_mnist(tmp_path / "m", value=255)
    with pytest.raises(DatasetFileError, match="checksum mismatch"):
        load_dataset("mnist", tmp_path / "m")
    ds = load_dataset("mnist", tmp_path / "m", verify=False)
    assert ds.x_train.dtype == np.float32 and ds.x_train.shape == (6, 1, 28, 28)
    assert ds.x_train.max() == 1.0 and ds.y_train.dtype == np.int64


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown dataset 'svhn'"):
        load_dataset("svhn")


# ---------------------------------------------------------------- real data


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_real_idx_datasets(name):
    ds = load_dataset(name, real_dataset_dir(name))
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() == 1.0
    counts = np.bincount(ds.y_train, minlength=10).tolist()
    overlap = official_split_overlap(ds.y_train)
    if name == "mnist":
        assert counts == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
        # the official split: 6,000 draws per class; the shortfalls below 6,000 are read twice
        assert overlap == {"draws_per_class": 6000, "smallest": 5421, "largest": 6742,
                           "duplicated": 1138, "unused": 1138}
    else:
        assert counts == [6000] * 10
        assert overlap["duplicated"] == overlap["unused"] == 0


def test_official_split_overlap_counts_each_class():
    labels = np.array([0] * 5 + [1] * 2 + [2] * 2)  # 3 draws per class
    assert official_split_overlap(labels) == {"draws_per_class": 3, "smallest": 2, "largest": 5,
                                              "duplicated": 2, "unused": 2}
    with pytest.raises(ValueError, match="non-empty 1-D"):
        official_split_overlap(np.zeros((2, 2)))


# ---------------------------------------------------------------- CelebA / Places / CIFAR


def _jpg(path, color, size=(40, 50)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)


def _celeba(root, rows):
    names = ["Black_Hair", "Blond_Hair", "Brown_Hair", "Male", "Smiling"]
    lines = [str(len(rows)), " ".join(names)]
    part = []
    for i, (vec, split) in enumerate(rows):
        fname = f"{i + 1:06d}.jpg"
        _jpg(root / "img_align_celeba" / fname, (10 * i, 0, 0))
        lines.append(fname + " " + " ".join(str(v) for v in vec))
        part.append(f"{fname} {split}")
    (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    (root / "list_eval_partition.txt").write_text("\n".join(part) + "\n")


CELEBA_ROWS = [
    ([1, -1, -1, 1, 1], 0),    # black, male, train
    ([-1, 1, -1, -1, 1], 0),   # blond, female, train
    ([-1, -1, 1, 1, -1], 0),   # brown, male, train
    ([1, 1, -1, -1, -1], 0),   # two hair colours: not in hair set
    ([-1, -1, -1, -1, 1], 1),  # validation: unused
    ([-1, -1, 1, -1, 1], 2),   # brown, female, test
    ([1, -1, -1, 1, -1], 2),   # black, male, test
]


def test_celeba_gender_and_hair(tmp_path):
    _celeba(tmp_path / "celeba", CELEBA_ROWS)
    g = load_dataset("celeba-gender", tmp_path / "celeba")
    assert g.x_train.shape == (4, 3, 64, 64) and g.x_test.shape == (2, 3, 64, 64)
    assert g.y_train.tolist() == [1, 0, 1, 0] and g.y_test.tolist() == [0, 1]
    h = load_dataset("celeba-hair", tmp_path / "celeba")
    assert h.y_train.tolist() == [0, 1, 2] and h.y_test.tolist() == [2, 0]
    assert h.x_train.dtype == np.float32 and h.num_classes == 3
    u8 = load_dataset("celeba-hair", tmp_path / "celeba", as_uint8=True)
    assert u8.x_train.dtype == np.uint8 and u8.x_train[1, 0].max() == 10  # red channel of #2


def test_celeba_truncated_attributes(tmp_path):
    _celeba(tmp_path / "c", CELEBA_ROWS)
    attr = tmp_path / "c" / "list_attr_celeba.txt"
    attr.write_text("\n".join(attr.read_text().splitlines()[:-2]) + "\n")
    with pytest.raises(DatasetFileError, match="truncated"):
        load_dataset("celeba-gender", tmp_path / "c")


def test_celeba_missing_is_clear(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(registry, "SYSTEM_DATA_DIR", tmp_path / "sys")
    monkeypatch.delenv("DATALENS_DATA_DIR", raising=False)
    with pytest.raises(DatasetNotFoundError, match="img_align_celeba"):
        load_dataset("celeba-gender")
    with pytest.raises(DatasetNotFoundError, match="cannot be downloaded"):
        fetch_dataset("celeba-hair", tmp_path / "x")


def test_places365(tmp_path):
    for split, n in (("train", 3), ("test", 1)):
        for ci, cls in enumerate(("beach", "forest", "street")):
            for j in range(n):
                _jpg(tmp_path / "p" / split / cls / f"{j}.jpg", (0, 80 * ci, 0), (80, 60))
    ds = load_dataset("places365", tmp_path / "p")
    assert ds.class_names == ("beach", "forest", "street")
    assert ds.x_train.shape == (9, 3, 64, 64) and ds.y_test.tolist() == [0, 1, 2]
    assert abs(float(ds.x_train[8, 1].mean()) - 160 / 255) < 0.01
    import shutil
    shutil.rmtree(tmp_path / "p" / "train" / "street")
    with pytest.raises(DatasetFileError, match="differ"):
        load_dataset("places365", tmp_path / "p")


def _cifar(root, n=4):
    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = np.full((n, 3072), 7, np.uint8)
        data[:, :1024] = 200  # red plane
        with open(base / name, "wb") as fh:
            pickle.dump({b"data": data, b"labels": list(range(n))}, fh)


def test_cifar10(tmp_path):
    _cifar(tmp_path / "c")
    ds = load_dataset("cifar10", tmp_path / "c")
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    assert np.allclose(ds.x_train[:, 0], 200 / 255) and np.allclose(ds.x_train[:, 2], 7 / 255)
    (tmp_path / "c" / "cifar-10-batches-py" / "test_batch").write_bytes(b"garbage")
    with pytest.raises(DatasetFileError, match="test_batch"):
        load_dataset("cifar10", tmp_path / "c")


# ---------------------------------------------------------------- fetch


def test_fetch_offline_message(tmp_path, monkeypatch):
    def refuse(*a, **k):
        raise urllib.error.URLError("network unreachable")
    monkeypatch.setattr(registry.urllib.request, "urlopen", refuse)
    with pytest.raises(DatasetNotFoundError, match="offline"):
        fetch_dataset("mnist", tmp_path / "m")
    assert not list((tmp_path / "m").glob("*.gz"))  # nothing half-written


def test_fetch_from_mirror_verifies_checksums(tmp_path, monkeypatch):
    shas = _fake_mnist(tmp_path / "mirror")
    spec = dataclasses.replace(registry.REGISTRY["mnist"],
                               urls=((tmp_path / "mirror").as_uri() + "/",), checksums=shas)
    monkeypatch.setitem(registry.REGISTRY, "mnist", spec)
    folder = fetch_dataset("mnist", tmp_path / "dest")
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.gz" for n in shas)
    bad = dict(shas, **{"t10k-labels-idx1-ubyte": "f" * 64})
    monkeypatch.setitem(registry.REGISTRY, "mnist", dataclasses.replace(spec, checksums=bad))
    with pytest.raises(DatasetFileError, match="wrong SHA-256"):
        fetch_dataset("mnist", tmp_path / "dest2")


# ---------------------------------------------------------------- ensure (make data)


@pytest.fixture()
def http_mirror(tmp_path):
    """A local HTTP server over ``tmp_path/mirror`` holding a small fake MNIST (IDX, gzip):
    yields (base URL, checksums, list of the paths it was asked for)."""
    mirror = tmp_path / "mirror"
    shas = _fake_mnist(mirror)
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep the test output clean
            pass

        def do_GET(self):
            asked.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(mirror)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", shas, asked
    finally:
        server.shutdown()
        server.server_close()


def _isolated_lookup(tmp_path, monkeypatch, urls, shas):
    monkeypatch.setattr(registry, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.setattr(registry, "SYSTEM_DATA_DIR", tmp_path / "system")
    monkeypatch.setenv("DATALENS_DATA_DIR", str(tmp_path / "env"))
    spec = dataclasses.replace(registry.REGISTRY["mnist"], urls=urls, checksums=shas)
    monkeypatch.setitem(registry.REGISTRY, "mnist", spec)


def test_ensure_fetches_over_http_into_the_first_folder_then_only_verifies(
        tmp_path, monkeypatch, http_mirror):
    base, shas, asked = http_mirror
    _isolated_lookup(tmp_path, monkeypatch, (base,), shas)
    folder = ensure_dataset("mnist")
    assert folder == tmp_path / "env" / "mnist"  # $DATALENS_DATA_DIR first
    assert sorted(asked) == sorted(f"/{n}.gz" for n in shas)
    assert load_dataset("mnist").x_train.shape == (6, 1, 28, 28)
    asked.clear()
    assert ensure_dataset("mnist") == folder and asked == []  # found: nothing fetched


def test_ensure_without_env_fetches_into_data_raw(tmp_path, monkeypatch, http_mirror):
    base, shas, _ = http_mirror
    _isolated_lookup(tmp_path, monkeypatch, (base,), shas)
    monkeypatch.delenv("DATALENS_DATA_DIR")
    assert ensure_dataset("mnist") == tmp_path / "repo" / "data" / "raw" / "mnist"


def test_ensure_verifies_a_found_copy_and_never_replaces_it(tmp_path, monkeypatch, http_mirror):
    base, shas, asked = http_mirror
    _isolated_lookup(tmp_path, monkeypatch, (base,), shas)
    _fake_mnist(tmp_path / "system" / "mnist", value=7)  # found, but not the published files
    before = (tmp_path / "system" / "mnist" / "train-images-idx3-ubyte.gz").read_bytes()
    with pytest.raises(DatasetFileError, match="checksum mismatch for .*train-images"):
        ensure_dataset("mnist")
    assert asked == []
    assert (tmp_path / "system" / "mnist" / "train-images-idx3-ubyte.gz").read_bytes() == before


def test_ensure_offline_says_what_to_copy_where(tmp_path, monkeypatch, capsys):
    _isolated_lookup(tmp_path, monkeypatch, ("http://127.0.0.1:9/",), {"x": "0" * 64})
    with pytest.raises(DatasetNotFoundError, match="copy the files into .*env/mnist"):
        ensure_dataset("mnist", timeout=5)
    with pytest.raises(DatasetNotFoundError, match="not found"):
        ensure_dataset("mnist", fetch=False)
    from datalens_lib import cli

    assert cli.main(["data", "ensure", "mnist", "--no-fetch"]) == 2
    assert "datalens data fetch mnist" in capsys.readouterr().err
    assert cli.main(["data", "ensure", "no-such-set"]) == 2
    assert "unknown dataset 'no-such-set'" in capsys.readouterr().err


def test_ensure_refuses_to_fetch_what_the_user_must_provide(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.setattr(registry, "SYSTEM_DATA_DIR", tmp_path / "system")
    monkeypatch.delenv("DATALENS_DATA_DIR", raising=False)
    with pytest.raises(DatasetNotFoundError, match="CelebA cannot be downloaded"):
        ensure_dataset("celeba-gender")


@pytest.mark.parametrize("require", [False, True])
def test_the_suite_counts_skips_for_missing_data_and_ci_fails_on_them(tmp_path, require):
    """``make test`` says how many tests a missing dataset skipped; with
    ``$DATALENS_REQUIRE_DATA`` (``.ci/run``) such a skip fails the run, another skip not."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_x.py").write_text(
        "import pytest\nfrom conftest import MISSING_DATA\n\n"
        "def test_a():\n    pytest.skip(MISSING_DATA + ' real mnist')\n\n"
        "def test_b():\n    pytest.skip('another reason')\n\n"
        "def test_c():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "DATALENS_REQUIRE_DATA"}
    if require:
        env["DATALENS_REQUIRE_DATA"] = "1"
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "1 test(s) skipped for missing data" in res.stdout, res.stdout
    assert res.returncode == (1 if require else 0), res.stdout
