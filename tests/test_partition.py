import numpy as np
import pytest

from datalens_lib.data import partition


def test_disjoint_equal_and_balanced():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 10, size=60007)
    parts = partition(labels, 4000, seed=3)
    assert parts.shape == (4000, 15) and parts.dtype == np.int64
    flat = parts.ravel()
    assert len(np.unique(flat)) == flat.size  # disjoint
    assert flat.min() >= 0 and flat.max() < len(labels)
    # class balance: every class of a teacher's 15 records is within +-2 of 15 * share
    share = np.bincount(labels, minlength=10) / len(labels)
    counts = np.stack([np.bincount(labels[p], minlength=10) for p in parts])
    assert np.all(np.abs(counts - 15 * share) <= 2)


def test_round_robin_spreads_classes():
    labels = np.repeat(np.arange(10), 100)
    parts = partition(labels, 100, seed=0)
    counts = np.stack([np.bincount(labels[p], minlength=10) for p in parts])
    assert (counts == 1).all()


def test_seeded():
    labels = np.arange(1000) % 7
    np.testing.assert_array_equal(partition(labels, 30, 5), partition(labels, 30, 5))
    assert not np.array_equal(partition(labels, 30, 5), partition(labels, 30, 6))


@pytest.mark.parametrize("n", [0, -1, 2.5, True])
def test_bad_teacher_count(n):
    with pytest.raises(ValueError, match="n_teachers"):
        partition(np.zeros(10), n, 0)


def test_too_many_teachers():
    with pytest.raises(ValueError, match="cannot give"):
        partition(np.zeros(10), 11, 0)
