import numpy as np
import pytest

from datalens_lib.data import NEIGHBOURING, PARTITIONS, partition, teacher_partition


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


def _teachers_changed(a: np.ndarray, b: np.ndarray) -> int:
    """How many teachers hold a different set of record indices in partitions a and b."""
    return sum(set(ra) != set(rb) for ra, rb in zip(a.tolist(), b.tolist(), strict=True))


def _label_changed(labels: np.ndarray, i: int) -> np.ndarray:
    out = labels.copy()
    out[i] = (out[i] + 1) % 10
    return out


def test_class_ordered_split_moves_records_when_one_label_changes():
    """Why ``NEIGHBOURING['class-ordered']`` keeps the label: changing one record's label moves
    the class boundaries and other records to other teachers, so one replacement changes far
    more than one teacher's data (the official split has the same property)."""
    labels = np.random.default_rng(2).integers(0, 10, size=3000)
    a = teacher_partition("class-ordered", labels, 200, seed=4)
    b = teacher_partition("class-ordered", _label_changed(labels, 17), 200, seed=4)
    assert _teachers_changed(a, b) > 100


def test_shuffled_split_ignores_labels():
    """The label-free split: any replaced record (image and label) changes one teacher."""
    labels = np.random.default_rng(2).integers(0, 10, size=3000)
    a = teacher_partition("shuffled", labels, 200, seed=4)
    for i in (0, 17, 2999):
        assert _teachers_changed(a, teacher_partition("shuffled", _label_changed(labels, i),
                                                      200, seed=4)) == 0
    other = teacher_partition("shuffled", np.zeros_like(labels), 200, seed=4)
    np.testing.assert_array_equal(a, other)


def test_every_partition_states_its_neighbours():
    assert set(NEIGHBOURING) == set(PARTITIONS)
    assert "label kept" in NEIGHBOURING["class-ordered"]
    assert "image and label" in NEIGHBOURING["shuffled"]
    with pytest.raises(ValueError, match="unknown partition"):
        teacher_partition("sorted", np.zeros(10), 2, 0)


@pytest.mark.parametrize("kind", PARTITIONS)
def test_both_splits_validate_and_keep_their_edges(kind):
    """Mutation check: edge counts (one teacher; one record per teacher) work, bad counts fail
    with a message naming the parameter, and indices stay int64."""
    labels = np.arange(12) % 3
    one = teacher_partition(kind, labels, 1, seed=0)
    assert one.shape == (1, 12) and sorted(one[0].tolist()) == list(range(12))
    each = teacher_partition(kind, labels, 12, seed=0)
    assert each.shape == (12, 1) and sorted(each[:, 0].tolist()) == list(range(12))
    assert one.dtype == each.dtype == np.int64
    for bad in (0, -2, True, 1.0):
        with pytest.raises(ValueError, match="n_teachers"):
            teacher_partition(kind, labels, bad, seed=0)
    with pytest.raises(ValueError, match="cannot give 13 teachers"):
        teacher_partition(kind, labels, 13, seed=0)


def test_teacher_partition_passes_the_seed():
    labels = np.random.default_rng(1).integers(0, 10, size=500)
    for kind in PARTITIONS:
        a = teacher_partition(kind, labels, 20, seed=3)
        np.testing.assert_array_equal(a, teacher_partition(kind, labels, 20, seed=3))
        assert not np.array_equal(a, teacher_partition(kind, labels, 20, seed=4))
    np.testing.assert_array_equal(teacher_partition("class-ordered", labels, 20, seed=3),
                                  partition(labels, 20, 3))
    with pytest.raises(ValueError, match="labels must be 1-D"):
        partition(np.zeros((4, 2)), 2, 0)
