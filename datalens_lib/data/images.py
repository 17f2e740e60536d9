"""Loaders for the user-provided image datasets: CelebA, Places365 and CIFAR-10.

These datasets cannot be downloaded on the machines this book is built on, so the loaders are
tested on tiny files the test-suite writes; with the real files they produce the paper's inputs
(64x64x3 for CelebA/Places365, 32x32x3 for CIFAR-10, float32 in [0, 1], NCHW).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .idx import DatasetFileError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")

#: CelebA attributes used for the paper's two label sets (paper Sec. 5.1).
CELEBA_GENDER_ATTR = "Male"
CELEBA_HAIR_ATTRS = ("Black_Hair", "Blond_Hair", "Brown_Hair")


def load_image(path: Path, size: int, crop: int | None = None) -> np.ndarray:
    """Open an image as RGB, centre-crop to ``crop`` (or to a square), resize to ``size``.

    Returns uint8 [3, size, size]. The official DCGAN pre-processing for aligned CelebA crops the
    central 108x108 region before resizing to 64x64.
    """
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            side = min(w, h) if crop is None else min(crop, w, h)
            left, top = (w - side) // 2, (h - side) // 2
            im = im.crop((left, top, left + side, top + side))
            im = im.resize((size, size), Image.Resampling.BILINEAR)
            arr = np.asarray(im, dtype=np.uint8)
    except OSError as exc:
        raise DatasetFileError(f"cannot decode image {path}: {exc}") from exc
    return arr.transpose(2, 0, 1).copy()


def _read_table(path: Path) -> list[list[str]]:
    if not path.is_file():
        raise DatasetFileError(f"dataset file not found: {path}")
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def read_celeba_attributes(path: Path) -> tuple[list[str], dict[str, np.ndarray]]:
    """Parse ``list_attr_celeba.txt``: returns (attribute names, {filename: ±1 int8 vector})."""
    rows = _read_table(path)
    if len(rows) < 2:
        raise DatasetFileError(f"{path}: expected a count line and a header line")
    names = rows[1]
    attrs: dict[str, np.ndarray] = {}
    for row in rows[2:]:
        if len(row) != len(names) + 1:
            raise DatasetFileError(f"{path}: row for {row[0]} has {len(row) - 1} values, "
                                   f"header has {len(names)}")
        attrs[row[0]] = np.array([int(v) for v in row[1:]], dtype=np.int8)
    declared = int(rows[0][0])
    if declared != len(attrs):
        raise DatasetFileError(f"{path}: declares {declared} images but lists {len(attrs)} "
                               "(truncated file?)")
    return names, attrs


def read_celeba_partition(path: Path) -> dict[str, int]:
    """Parse ``list_eval_partition.txt``: {filename: 0 train | 1 valid | 2 test}."""
    out = {}
    for row in _read_table(path):
        if len(row) != 2 or row[1] not in {"0", "1", "2"}:
            raise DatasetFileError(f"{path}: bad line {' '.join(row)!r}")
        out[row[0]] = int(row[1])
    return out


def celeba_labels(names: Sequence[str], vec: np.ndarray, task: str) -> int | None:
    """Label of one image for ``task`` ('gender' or 'hair'); None if the image is not used."""
    if task == "gender":
        return int(vec[names.index(CELEBA_GENDER_ATTR)] == 1)
    if task == "hair":
        hits = [i for i, a in enumerate(CELEBA_HAIR_ATTRS) if vec[names.index(a)] == 1]
        return hits[0] if len(hits) == 1 else None
    raise ValueError(f"unknown CelebA task {task!r}; expected 'gender' or 'hair'")


def load_celeba(root: Path, task: str, size: int = 64, crop: int = 108):
    """Aligned CelebA with the official split (train = partition 0, test = partition 2).

    ``root`` holds ``img_align_celeba/``, ``list_attr_celeba.txt`` and
    ``list_eval_partition.txt``. CelebA-Hair keeps the images with exactly one of the black /
    blond / brown hair attributes. Unlike the official code, the minority gender class is *not*
    upsampled with duplicates (that would put one person in several teachers' partitions).
    Returns uint8 arrays (x_train, y_train, x_test, y_test).
    """
    root = Path(root)
    names, attrs = read_celeba_attributes(root / "list_attr_celeba.txt")
    split = read_celeba_partition(root / "list_eval_partition.txt")
    img_dir = root / "img_align_celeba"
    if not img_dir.is_dir():
        raise DatasetFileError(f"CelebA image folder not found: {img_dir}")
    out: dict[int, tuple[list[np.ndarray], list[int]]] = {0: ([], []), 2: ([], [])}
    for fname in sorted(attrs):
        part = split.get(fname)
        if part not in out:
            continue
        label = celeba_labels(names, attrs[fname], task)
        if label is None:
            continue
        out[part][0].append(load_image(img_dir / fname, size, crop))
        out[part][1].append(label)
    for part, (xs, _) in out.items():
        if not xs:
            raise DatasetFileError(f"CelebA under {root}: no images in partition {part}")
    return (np.stack(out[0][0]), np.array(out[0][1], dtype=np.int64),
            np.stack(out[2][0]), np.array(out[2][1], dtype=np.int64))


def _class_folder(folder: Path, size: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    xs, ys = [], []
    for label, cls in enumerate(classes):
        files = sorted(p for p in (folder / cls).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise DatasetFileError(f"class folder {folder / cls} has no images")
        xs.extend(load_image(f, size) for f in files)
        ys.extend([label] * len(files))
    return classes, np.stack(xs), np.array(ys, dtype=np.int64)


def load_places365(root: Path, num_classes: int = 3, size: int = 64):
    """Places365 subset: ``root/train/<class>/*`` and ``root/test/<class>/*`` (or ``val``).

    The paper selects three level-2 scene classes (about 120,000 images) and resizes to 64x64;
    the choice of classes is the user's. Returns (classes, x_train, y_train, x_test, y_test).
    """
    root = Path(root)
    test_dir = next((root / d for d in ("test", "val") if (root / d).is_dir()), None)
    if not (root / "train").is_dir() or test_dir is None:
        raise DatasetFileError(f"Places365 under {root} needs train/ and test/ (or val/) folders "
                               "with one sub-folder per class")
    classes, x_tr, y_tr = _class_folder(root / "train", size)
    test_classes, x_te, y_te = _class_folder(test_dir, size)
    if classes != test_classes:
        raise DatasetFileError(f"Places365: train classes {classes} differ from test classes "
                               f"{test_classes}")
    if len(classes) != num_classes:
        raise DatasetFileError(f"Places365: expected {num_classes} class folders, found "
                               f"{len(classes)}: {classes}")
    return classes, x_tr, y_tr, x_te, y_te


def _unpickle(path: Path) -> dict:
    if not path.is_file():
        raise DatasetFileError(f"dataset file not found: {path}")
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh, encoding="bytes")
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise DatasetFileError(f"cannot read CIFAR-10 batch {path}: {exc}") from exc


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    d = _unpickle(path)
    try:
        data = np.asarray(d[b"data"], dtype=np.uint8)
        labels = np.asarray(d[b"labels"], dtype=np.int64)
    except KeyError as exc:
        raise DatasetFileError(f"{path}: not a CIFAR-10 python batch (missing {exc})") from exc
    if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
        raise DatasetFileError(f"{path}: unexpected CIFAR-10 batch shape {data.shape}")
    return data.reshape(-1, 3, 32, 32), labels


def cifar10_dir(root: Path) -> Path:
    root = Path(root)
    return root / "cifar-10-batches-py" if (root / "cifar-10-batches-py").is_dir() else root


def load_cifar10(root: Path):
    """CIFAR-10 python pickles (``data_batch_1..5``, ``test_batch``); uint8 NCHW arrays."""
    base = cifar10_dir(root)
    parts = [_cifar_batch(base / f"data_batch_{i}") for i in range(1, 6)]
    x_te, y_te = _cifar_batch(base / "test_batch")
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            x_te, y_te)
