"""Datasets: IDX reader, registry with checksummed loaders, and the teacher partition."""

from .idx import DatasetFileError, parse_idx, read_idx
from .partition import (
    NEIGHBOURING,
    PARTITIONS,
    official_split_overlap,
    partition,
    teacher_partition,
)
from .registry import (
    ENV_VAR,
    REGISTRY,
    DatasetNotFoundError,
    DatasetSpec,
    ImageDataset,
    candidate_dirs,
    ensure_dataset,
    fetch_dataset,
    get_spec,
    load_dataset,
    resolve_dataset_dir,
)

__all__ = [
    "ENV_VAR",
    "NEIGHBOURING",
    "PARTITIONS",
    "REGISTRY",
    "DatasetFileError",
    "DatasetNotFoundError",
    "DatasetSpec",
    "ImageDataset",
    "candidate_dirs",
    "ensure_dataset",
    "fetch_dataset",
    "get_spec",
    "load_dataset",
    "official_split_overlap",
    "parse_idx",
    "partition",
    "read_idx",
    "resolve_dataset_dir",
    "teacher_partition",
]
