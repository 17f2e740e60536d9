"""Dataset registry: where each dataset lives, how it is checked and loaded.

Lookup order for a dataset's folder (first one that holds the dataset's files wins):

1. an explicit ``path`` argument;
2. ``$DATALENS_DATA_DIR/<dir>``;
3. ``data/raw/<dir>`` in the repository;
4. ``/usr/share/datasets/<dir>`` (Debian's dataset packages, e.g. ``dataset-fashion-mnist``).

Loading never downloads: ``fetch_dataset`` (``datalens data fetch NAME``) downloads MNIST,
Fashion-MNIST or CIFAR-10 from the official source and verifies checksums, and
``ensure_dataset`` (``datalens data ensure``, run by ``make book`` and ``make test`` before
anything else) finds a dataset in the lookup order, verifies it, and fetches it only where no
folder holds it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import images
from .idx import DatasetFileError, read_idx

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_DATA_DIR = Path("/usr/share/datasets")
ENV_VAR = "DATALENS_DATA_DIR"


class DatasetNotFoundError(FileNotFoundError):
    """No folder in the lookup order holds the dataset."""


@dataclass(frozen=True)
class ImageDataset:
    """Train and test images (float32 in [0, 1], NCHW, or uint8 when asked) and int64 labels."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    class_names: tuple[str, ...]
    source: Path

    @property
    def shape(self) -> tuple[int, int, int]:
        """(C, H, W)."""
        return tuple(self.x_train.shape[1:])  # type: ignore[return-value]


# SHA-256 of the *uncompressed* IDX files (checksums published with the shared datasets).
MNIST_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
FASHION_SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
CIFAR10_TAR_MD5 = "c58f30108f718f92721af3b95e74349a"  # published on the CIFAR-10 page


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    dirname: str
    shape: tuple[int, int, int]
    num_classes: int
    class_names: tuple[str, ...]
    marker_files: tuple[str, ...]
    """Files (relative to the folder; ``.gz`` variants accepted) whose presence marks the folder."""
    how_to_provide: str
    urls: tuple[str, ...] = ()
    checksums: dict[str, str] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        """Pixels per image, C * H * W: the gradient dimension d of a query."""
        c, h, w = self.shape
        return c * h * w

    def is_present(self, folder: Path) -> bool:
        return folder.is_dir() and all(_find_file(folder, f) is not None
                                       for f in self.marker_files)


def _find_file(folder: Path, name: str) -> Path | None:
    for cand in (folder / name, folder / f"{name}.gz"):
        if cand.exists():
            return cand
    return None


_IDX_FILES = tuple(MNIST_SHA256)
_DIGITS = tuple(str(i) for i in range(10))
_FASHION = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
            "Sneaker", "Bag", "Ankle boot")
_CIFAR = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
          "truck")
_CELEBA_HOWTO = (
    "CelebA cannot be downloaded automatically. Download the *aligned* images "
    "(img_align_celeba.zip), list_attr_celeba.txt and list_eval_partition.txt from the CelebA "
    "site, unzip so that <dir>/img_align_celeba/000001.jpg exists, and put the folder at "
    "data/raw/celeba or $DATALENS_DATA_DIR/celeba."
)

REGISTRY: dict[str, DatasetSpec] = {
    "mnist": DatasetSpec(
        "mnist", "mnist", (1, 28, 28), 10, _DIGITS, _IDX_FILES,
        "Run `datalens data fetch mnist`, or copy the four IDX files (.gz or raw) into "
        "data/raw/mnist or $DATALENS_DATA_DIR/mnist.",
        urls=("https://ossci-datasets.s3.amazonaws.com/mnist/",
              "http://yann.lecun.com/exdb/mnist/"),
        checksums=MNIST_SHA256,
    ),
    "fashion-mnist": DatasetSpec(
        "fashion-mnist", "fashion-mnist", (1, 28, 28), 10, _FASHION, _IDX_FILES,
        "Run `datalens data fetch fashion-mnist`, install Debian's `dataset-fashion-mnist` "
        "package, or copy the four IDX files into data/raw/fashion-mnist.",
        urls=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
        checksums=FASHION_SHA256,
    ),
    "celeba-gender": DatasetSpec(
        "celeba-gender", "celeba", (3, 64, 64), 2, ("female", "male"),
        ("list_attr_celeba.txt", "list_eval_partition.txt", "img_align_celeba"), _CELEBA_HOWTO,
    ),
    "celeba-hair": DatasetSpec(
        "celeba-hair", "celeba", (3, 64, 64), 3, ("black", "blond", "brown"),
        ("list_attr_celeba.txt", "list_eval_partition.txt", "img_align_celeba"), _CELEBA_HOWTO,
    ),
    "places365": DatasetSpec(
        "places365", "places365", (3, 64, 64), 3, (), ("train",),
        "Places365 is user-provided: choose three level-2 scene classes and lay them out as "
        "data/raw/places365/{train,test}/<class>/*.jpg (or $DATALENS_DATA_DIR/places365).",
    ),
    "cifar10": DatasetSpec(
        "cifar10", "cifar10", (3, 32, 32), 10, _CIFAR, (),
        "Run `datalens data fetch cifar10`, or unpack cifar-10-python.tar.gz into "
        "data/raw/cifar10 (so that data/raw/cifar10/cifar-10-batches-py/test_batch exists).",
        urls=("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
    ),
}


def get_spec(name: str) -> DatasetSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(REGISTRY)}") from None


def _cifar_present(folder: Path) -> bool:
    return (images.cifar10_dir(folder) / "test_batch").is_file()


def candidate_dirs(name: str, path: str | os.PathLike | None = None) -> list[Path]:
    """The folders searched for ``name``, in lookup order."""
    spec = get_spec(name)
    if path is not None:
        return [Path(path)]
    out = []
    if os.environ.get(ENV_VAR):
        out.append(Path(os.environ[ENV_VAR]) / spec.dirname)
    out.append(REPO_ROOT / "data" / "raw" / spec.dirname)
    out.append(SYSTEM_DATA_DIR / spec.dirname)
    return out


def resolve_dataset_dir(name: str, path: str | os.PathLike | None = None) -> Path:
    """First folder in the lookup order that holds ``name``'s files, else a clear error."""
    spec = get_spec(name)
    cands = candidate_dirs(name, path)
    for folder in cands:
        present = _cifar_present(folder) if name == "cifar10" else spec.is_present(folder)
        if present:
            return folder
    tried = "\n  ".join(str(c) for c in cands)
    raise DatasetNotFoundError(
        f"dataset {name!r} not found. Looked in:\n  {tried}\n{spec.how_to_provide}"
    )


def _load_idx_dataset(spec: DatasetSpec, folder: Path, verify: bool):
    arrays = {}
    for fname in _IDX_FILES:
        f = _find_file(folder, fname)
        if f is None:
            raise DatasetFileError(f"{spec.name}: missing {folder / fname}(.gz). "
                                   f"{spec.how_to_provide}")
        arrays[fname] = read_idx(f, spec.checksums[fname] if verify else None)
    x_tr, y_tr = arrays["train-images-idx3-ubyte"], arrays["train-labels-idx1-ubyte"]
    x_te, y_te = arrays["t10k-images-idx3-ubyte"], arrays["t10k-labels-idx1-ubyte"]
    for x, y, part in ((x_tr, y_tr, "train"), (x_te, y_te, "test")):
        if len(x) != len(y):
            raise DatasetFileError(f"{spec.name} {part}: {len(x)} images but {len(y)} labels")
    c, h, w = spec.shape
    return (x_tr.reshape(-1, c, h, w), y_tr.astype(np.int64),
            x_te.reshape(-1, c, h, w), y_te.astype(np.int64))


_LOADERS: dict[str, Callable] = {
    "celeba-gender": lambda folder: images.load_celeba(folder, "gender"),
    "celeba-hair": lambda folder: images.load_celeba(folder, "hair"),
    "cifar10": images.load_cifar10,
}


def load_dataset(name: str, path: str | os.PathLike | None = None, *, verify: bool = True,
                 as_uint8: bool = False) -> ImageDataset:
    """Load a registered dataset.

    Images are float32 in [0, 1] with shape (N, C, H, W) (uint8 when ``as_uint8``; CelebA in
    float32 takes ~8 GB), labels int64. MNIST/Fashion-MNIST files are checked against their
    SHA-256 unless ``verify=False``.
    """
    spec = get_spec(name)
    folder = resolve_dataset_dir(name, path)
    class_names = spec.class_names
    if name in ("mnist", "fashion-mnist"):
        x_tr, y_tr, x_te, y_te = _load_idx_dataset(spec, folder, verify)
    elif name == "places365":
        classes, x_tr, y_tr, x_te, y_te = images.load_places365(folder, spec.num_classes)
        class_names = tuple(classes)
    else:
        x_tr, y_tr, x_te, y_te = _LOADERS[name](folder)
    for y, part in ((y_tr, "train"), (y_te, "test")):
        if len(y) and (y.min() < 0 or y.max() >= spec.num_classes):
            raise DatasetFileError(f"{name} {part}: labels outside 0..{spec.num_classes - 1}")
    if not as_uint8:
        x_tr = x_tr.astype(np.float32) / np.float32(255.0)
        x_te = x_te.astype(np.float32) / np.float32(255.0)
    return ImageDataset(name, x_tr, y_tr, x_te, y_te, spec.num_classes, class_names, folder)


# ----------------------------------------------------------------------------- download


def _download(url: str, dest: Path, timeout: float) -> None:
    tmp = dest.with_name(dest.name + ".part")
    with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as fh:
        shutil.copyfileobj(resp, fh)
    tmp.replace(dest)


def fetch_dataset(name: str, dest: str | os.PathLike | None = None, *,
                  timeout: float = 30.0) -> Path:
    """Download ``name`` from its official source into ``dest`` and verify its checksums.

    Only MNIST, Fashion-MNIST and CIFAR-10 can be fetched; CelebA and Places365 must be
    provided by the user. Files are written to a temporary name and renamed once verified.
    """
    spec = get_spec(name)
    if not spec.urls:
        raise DatasetNotFoundError(f"{name} cannot be downloaded automatically. "
                                   f"{spec.how_to_provide}")
    folder = Path(dest) if dest is not None else REPO_ROOT / "data" / "raw" / spec.dirname
    folder.mkdir(parents=True, exist_ok=True)
    errors = []
    try:
        if name == "cifar10":
            _fetch_cifar(spec.urls[0], folder, timeout)
        else:
            for fname, sha in spec.checksums.items():
                target = folder / f"{fname}.gz"
                if target.exists() and _gz_sha(target) == sha:
                    continue
                for base in spec.urls:
                    try:
                        _download(f"{base}{fname}.gz", target, timeout)
                        break
                    except (urllib.error.URLError, OSError, TimeoutError) as exc:
                        errors.append(f"{base}{fname}.gz: {exc}")
                else:
                    raise OSError("; ".join(errors))
                if _gz_sha(target) != sha:
                    target.unlink()
                    raise DatasetFileError(f"downloaded {fname} has the wrong SHA-256")
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise DatasetNotFoundError(
            f"could not download {name} ({exc}). This machine may be offline: copy the files "
            f"into {folder} by hand, or set ${ENV_VAR}. {spec.how_to_provide}"
        ) from exc
    return folder


def ensure_dataset(name: str, *, fetch: bool = True, timeout: float = 30.0) -> Path:
    """The folder of ``name``, checksum-verified: found in the lookup order, else downloaded.

    A folder found in the lookup order is verified file by file against the published
    SHA-256 (a corrupt or foreign copy is an error naming the file, never silently replaced:
    it may be the user's). Where no folder holds the dataset and ``fetch`` is true, it is
    downloaded into the first folder of the lookup order (``$DATALENS_DATA_DIR/<dir>`` when
    set, else ``data/raw/<dir>``) by ``fetch_dataset``; where that fails, the error says what
    to copy where. Datasets the user must provide (CelebA, Places365) are only looked up.
    """
    spec = get_spec(name)
    try:
        folder = resolve_dataset_dir(name)
    except DatasetNotFoundError:
        if not fetch or not spec.urls:
            raise
        folder = fetch_dataset(name, candidate_dirs(name)[0], timeout=timeout)
    for fname, sha in spec.checksums.items():
        f = _find_file(folder, fname)
        if f is None:  # (a folder is found by these very files: only a race removes one)
            raise DatasetFileError(f"{name}: missing {folder / fname}(.gz). "
                                   f"{spec.how_to_provide}")
        read_idx(f, sha)
    return folder


def _gz_sha(path: Path) -> str:
    try:
        with gzip.open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except (OSError, EOFError):
        return ""


def _fetch_cifar(url: str, folder: Path, timeout: float) -> None:
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        tar_path = Path(tmp) / "cifar-10-python.tar.gz"
        _download(url, tar_path, timeout)
        md5 = hashlib.md5(tar_path.read_bytes()).hexdigest()
        if md5 != CIFAR10_TAR_MD5:
            raise DatasetFileError(f"downloaded CIFAR-10 archive has MD5 {md5}, "
                                   f"expected {CIFAR10_TAR_MD5}")
        with tarfile.open(tar_path) as tf:
            tf.extractall(tmp, filter="data")
        target = folder / "cifar-10-batches-py"
        if target.exists():
            shutil.rmtree(target)
        (Path(tmp) / "cifar-10-batches-py").replace(target)
