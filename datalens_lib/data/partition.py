"""Disjoint, class-balanced partition of the private data among the teachers (paper Alg. 1).

The privacy analysis (paper Lemma 1) assumes that one training record influences *one*
teacher's gradient only. The official code wraps around when splitting MNIST and puts about
1,100 images into two teachers; this partition is strictly disjoint instead, and drops the
``n mod N`` left-over records (chosen at random) so that every teacher holds the same number.
"""

from __future__ import annotations

import numpy as np


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
    if not isinstance(n_teachers, (int, np.integer)) or isinstance(n_teachers, bool):
        raise ValueError(f"n_teachers must be an integer, got {n_teachers!r}")
    if n_teachers < 1:
        raise ValueError(f"n_teachers must be >= 1, got {n_teachers}")
    n = len(labels)
    per_teacher = n // n_teachers
    if per_teacher == 0:
        raise ValueError(f"cannot give {n_teachers} teachers at least one of {n} records")
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


def shuffled_partition(n: int, n_teachers: int, seed: int) -> np.ndarray:
    """G-PATE's split: shuffle the ``n`` record indices, cut them into ``n_teachers``
    contiguous, disjoint, equal parts (the ``n mod N`` left over are dropped). Returns int64
    [n_teachers, floor(n / n_teachers)]."""
    if not isinstance(n_teachers, (int, np.integer)) or isinstance(n_teachers, bool) \
            or n_teachers < 1:
        raise ValueError(f"n_teachers must be an integer >= 1, got {n_teachers!r}")
    per_teacher = n // n_teachers
    if per_teacher == 0:
        raise ValueError(f"cannot give {n_teachers} teachers at least one of {n} records")
    order = np.random.default_rng(seed).permutation(n)[: per_teacher * n_teachers]
    return np.ascontiguousarray(order.reshape(n_teachers, per_teacher)).astype(np.int64)
