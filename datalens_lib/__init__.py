"""DataLens reproduction library: datasets, TopAgg, privacy accounting (and, later, training,
evaluation and the results store behind the book)."""

__version__ = "0.1.0"
