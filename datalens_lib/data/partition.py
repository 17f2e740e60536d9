"""Disjoint partitions of the private data among the teachers (paper Alg. 1).

The privacy analysis (paper Lemma 1) assumes that one training record influences *one*
teacher's gradient only. The official code wraps around when splitting MNIST and puts about
1,100 images into two teachers; both partitions here are strictly disjoint instead, and drop
the ``n mod N`` left-over records (chosen at random) so that every teacher holds the same
number.

Which neighbouring relation that assumption holds for depends on the partition (``PARTITIONS``,
``NEIGHBOURING``; the config field ``partition``):

- ``class-ordered`` (``partition``; DataLens's default, as the official code splits): records
  are laid out class after class, so the split is a function of the labels. Replacing one
  record's image while keeping its label changes one teacher's data. Changing a record's
  label moves the class boundaries, and the records behind them go to other teachers: one
  replacement can then change every teacher (a test shows it), and Lemma 1's bound does not
  hold. The ledgers of a class-ordered run are DP guarantees for neighbours that share their
  labels (the labels treated as public), not for the standard replace-one relation.
- ``shuffled`` (``shuffled_partition``; G-PATE's split): a seeded permutation of the record
  indices cut into equal parts, independent of the labels and the images. Replacing one record
  (image and label) changes one teacher's data, for every pair of neighbours. Its teachers get
  no class balance and every teacher its own label sequence, so exact per-teacher fakes cost
  one generator pass per teacher (``DataLens._fakes_by_label_sequence``).

Neither is stable under adding or removing a record (the relation the paper states, after
Abadi et al.): the record count sets the part size and the left-over draw, so every part can
change. Both give replacement (bounded) DP only, with the relation stated above for each.
"""

from __future__ import annotations

import numpy as np

from .._validate import nonneg_int, positive_int

PARTITIONS = ("class-ordered", "shuffled")

# the neighbouring relation under which one record changes one teacher's data (module doc);
# run records state it, and the book's privacy chapter quotes it
NEIGHBOURING = {
    "class-ordered": "replace one record's image, its label kept (the class-ordered partition "
                     "is a function of the labels: a changed label moves other records to "
                     "other teachers); then one teacher's votes change",
    "shuffled": "replace one record, image and label (the shuffled partition depends on the "
                "record count and the seed only); then one teacher's votes change",
}


def partition(labels: np.ndarray, n_teachers: int, seed: int) -> np.ndarray:
    """Split record indices into ``n_teachers`` disjoint, equally sized, class-balanced parts.

    Records are shuffled within each class, laid out class after class, and dealt round-robin,
    so each teacher's class counts differ from the data's proportions by at most one record per
    class boundary. Returns an int64 array [n_teachers, floor(n / n_teachers)] of indices into
    ``labels``; no index appears twice.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    n_teachers = positive_int("n_teachers", n_teachers)
    seed = nonneg_int("seed", seed)
    n = len(labels)
    per_teacher = _per_teacher(n, n_teachers)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.permutation(n)[: per_teacher * n_teachers])
    kept_labels = labels[keep]
    order = []
    for cls in np.unique(kept_labels):
        members = keep[kept_labels == cls]
        order.append(rng.permutation(members))
    layout = np.concatenate(order)  # class after class, shuffled within class
    # position p goes to teacher p mod N: consecutive records of a class go to different teachers
    parts = layout.reshape(per_teacher, n_teachers).T
    teacher_order = rng.permutation(n_teachers)
    return np.ascontiguousarray(parts[teacher_order]).astype(np.int64)


def _per_teacher(n: int, n_teachers: int) -> int:
    if n < n_teachers:
        raise ValueError(f"n_teachers must be <= the number of records: cannot give "
                         f"{n_teachers} teachers at least one of {n} records")
    return n // n_teachers


def official_split_overlap(labels: np.ndarray) -> dict[str, int]:
    """What the official code's split does to these ``labels``: it draws ``n / C`` records of each
    of the ``C`` classes present, one class after the other in turn (a record of class 0, one of
    class 1, ...), and cuts that sequence into consecutive equal parts, one per teacher; a class
    with fewer records wraps back to its start (so its first records sit in more than one
    partition) while a class with more keeps the rest unused. Returns ``draws_per_class``, the
    ``smallest`` and ``largest`` class, ``duplicated`` (draws of a record already drawn: such a
    record changes more than one teacher's votes) and the ``unused`` records. Exact when the
    teachers divide ``n`` and the classes divide the draws (MNIST and Fashion-MNIST at the
    paper's teacher counts); otherwise the official code gives the remainder draws to the lowest
    classes. Shown in T1; :func:`partition` here is disjoint instead."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    counts = np.unique(labels, return_counts=True)[1]
    draws = len(labels) // len(counts)
    return {"draws_per_class": int(draws), "smallest": int(counts.min()),
            "largest": int(counts.max()),
            "duplicated": int(np.clip(draws - counts, 0, None).sum()),
            "unused": int(np.clip(counts - draws, 0, None).sum())}


def shuffled_partition(n: int, n_teachers: int, seed: int) -> np.ndarray:
    """G-PATE's split: shuffle the ``n`` record indices, cut them into ``n_teachers``
    contiguous, disjoint, equal parts (the ``n mod N`` left over are dropped). Returns int64
    [n_teachers, floor(n / n_teachers)]."""
    n = nonneg_int("n", n)
    n_teachers = positive_int("n_teachers", n_teachers)
    seed = nonneg_int("seed", seed)
    per_teacher = _per_teacher(n, n_teachers)
    order = np.random.default_rng(seed).permutation(n)[: per_teacher * n_teachers]
    return np.ascontiguousarray(order.reshape(n_teachers, per_teacher)).astype(np.int64)


def teacher_partition(kind: str, labels: np.ndarray, n_teachers: int, seed: int) -> np.ndarray:
    """The partition named ``kind`` (``PARTITIONS``) of the records with these ``labels``."""
    if kind == "class-ordered":
        return partition(labels, n_teachers, seed)
    if kind == "shuffled":
        return shuffled_partition(len(labels), n_teachers, seed)
    raise ValueError(f"kind must be one of {PARTITIONS}: unknown partition {kind!r}")
