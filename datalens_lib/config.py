"""Run configurations: one JSON file per paper setting in ``datalens_lib/configs/``, each with
``paper``, ``cpu`` and ``smoke`` profiles that override its ``base`` settings."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import resources
from typing import Any

from ._validate import (
    boolean,
    choice,
    nonneg_float,
    positive_float,
    positive_int,
    probability_open,
)

PROFILES = ("smoke", "cpu", "paper")


def _check_dataset(dataset: Any) -> str:
    from .data.registry import REGISTRY

    return choice("dataset", dataset, tuple(REGISTRY))


def _check_notes(notes: Any) -> str:
    if not isinstance(notes, str):
        raise ValueError(f"notes must be text, got {notes!r}")
    return notes


def config_from_dict(cls: Any, d: dict[str, Any], what: str = "") -> Any:
    """``cls(**d)`` for a config dataclass, refusing unknown keys by name (missing keys take
    their defaults). ``what`` names the method in the message (e.g. ``"DC-GAN "``)."""
    known = {f.name for f in fields(cls)}
    unknown = set(d) - known
    if unknown:
        raise ValueError(f"unknown {what}config keys: {sorted(unknown)}")
    # every method's config: the two fields whose type no method's own checks cover
    if "dataset" in known and "dataset" in d:
        _check_dataset(d["dataset"])
    if "notes" in known and "notes" in d:
        _check_notes(d["notes"])
    # kept (an empty dict) so that records that hold it load; no method reads it
    extra = d.get("extra", {})
    if not isinstance(extra, dict) or extra:
        raise ValueError(f"extra must be empty: no method reads it, got {extra!r}; "
                         "set the config's own keys")
    return cls(**d)


@dataclass(frozen=True)
class TrainConfig:
    """Everything a DataLens run (paper Alg. 1) depends on."""

    dataset: str
    epsilon: float
    delta: float = 1e-5
    teachers: int = 4000
    k: int = 200
    sigma: float = 5000.0
    beta: float = 0.7
    c: float | None = 1e-5
    z_dim: int = 50
    batch_cap: int = 30  # batch = min(batch_cap, partition size)
    d_step: int = 2
    pretrain_teacher: int = 10
    lr_teacher: float = 1e-3
    lr_generator: float = 1e-3
    gamma: float = 1e-3  # x_hat = G(z) + gamma * g_bar
    normalize: str = "paper"
    stochastic: bool = True
    threshold: bool = True
    conversion: str = "paper"
    max_steps: int | None = None  # cap on generator steps (None: until the budget is spent)
    train_limit: int | None = None  # use only the first records of the training set
    n_samples: int = 100_000
    chunk: int = 32
    # how the fakes each teacher trains on are made: "per_teacher" = G(z, y_teacher) with the
    # teacher's own BatchNorm statistics (official); "class_table" = G(z_j, c) for every class
    # c once per step, BatchNorm over that table, looked up by label (cheaper approximation)
    teacher_fakes: str = "per_teacher"
    moment_dtype: str = "float32"
    # dtype of the teachers' forward/backward passes; "bfloat16" is an opt-in speed-up (float32
    # master weights and Adam; see ensemble.TeacherEnsemble), its effect measured in T6
    compute_dtype: str = "float32"
    data_dependent: bool = True  # also track the data-dependent bound (not a DP release)
    # the private aggregator (tab:compression; aggregation.base.AGGREGATORS): TopAgg, or
    # D2P-Fed / FetchSGD as the official code runs them ("-coded") or made faithful / sound
    aggregator: str = "topagg"
    levels: int = 4  # D2P-Fed's quantisation levels (official --klevel)
    sketch_rows: int = 20  # FetchSGD's Count-Sketch (official: csvec r = 20, c = 10,000,
    sketch_cols: int = 10_000  # hash seed 42)
    sketch_seed: int = 42
    # the official code's teacher batches (README 80 x 50; issue 12, opt-in, off by default):
    # init_slots = S: teacher t starts from teacher t mod S's initial weights; adam_slots = S:
    # teachers t = s mod S share one Adam state (moments and step count). Shared Adam state
    # couples teachers trained on different partitions (see datalens.DataLens.record)
    init_slots: int | None = None
    adam_slots: int | None = None
    # the teacher split (data.partition.PARTITIONS): "class-ordered" as the official code
    # (its ledgers hold for neighbours that keep their labels) or "shuffled" (label-free:
    # standard replace-one); the neighbouring relation each gives is in data.partition
    partition: str = "class-ordered"
    eval_epochs: int = 600
    eval_lr: float = 2e-3
    eval_batch_size: int = 512
    # smoke profiles only: accuracy on the first N real test images (a pipeline check needs
    # no 10,000-image test pass per epoch); None: the whole test set, as the paper
    eval_test_limit: int | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_dataset(self.dataset)
        _check_notes(self.notes)
        positive_float("epsilon", self.epsilon)
        probability_open("delta", self.delta)
        positive_int("teachers", self.teachers)
        positive_int("k", self.k)
        positive_float("sigma", self.sigma)
        # no upper limit: the paper advises beta between sigma / (2N) and sigma / N (above 1 for
        # sigma > N), and the noisy vote sum can exceed N
        nonneg_float("beta", self.beta)
        for name in ("stochastic", "threshold", "data_dependent"):
            boolean(name, getattr(self, name))
        if self.c is not None:
            positive_float("c", self.c)
        for name in ("z_dim", "batch_cap", "d_step", "n_samples", "chunk", "eval_epochs",
                     "eval_batch_size"):
            positive_int(name, getattr(self, name))
        positive_int("pretrain_teacher", self.pretrain_teacher, minimum=0)
        for name in ("lr_teacher", "lr_generator", "gamma", "eval_lr"):
            positive_float(name, getattr(self, name))
        if self.eval_test_limit is not None:
            positive_int("eval_test_limit", self.eval_test_limit)
        choice("normalize", self.normalize, ("paper", "official"))
        choice("conversion", self.conversion, ("paper", "rdp", "pld"))
        choice("moment_dtype", self.moment_dtype, ("float32", "bfloat16"))
        choice("compute_dtype", self.compute_dtype, ("float32", "bfloat16"))
        choice("teacher_fakes", self.teacher_fakes, ("per_teacher", "class_table"))
        from .data.partition import PARTITIONS

        choice("partition", self.partition, PARTITIONS)
        from .aggregation.base import AGGREGATORS

        choice("aggregator", self.aggregator, AGGREGATORS)
        positive_int("levels", self.levels, minimum=2)
        positive_int("sketch_rows", self.sketch_rows)
        positive_int("sketch_cols", self.sketch_cols)
        positive_int("sketch_seed", self.sketch_seed, minimum=0)
        for name in ("init_slots", "adam_slots"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))
        if self.adam_slots is not None and self.aggregator != "topagg":
            raise ValueError("adam_slots (the official teacher batches) is an A/B switch for "
                             "TopAgg's runs; it is not defined with other aggregators")
        if self.adam_slots is not None and self.teachers % self.adam_slots:
            raise ValueError(f"adam_slots ({self.adam_slots}) must divide teachers "
                             f"({self.teachers})")
        if self.aggregator != "topagg" and not (self.stochastic and self.threshold):
            raise ValueError("the stochastic=False and threshold=False ablations are TopAgg's "
                             f"(tab:components); aggregator {self.aggregator!r} has neither")
        if self.max_steps is not None:
            positive_int("max_steps", self.max_steps)
        if self.train_limit is not None:
            positive_int("train_limit", self.train_limit)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """From a dict; keys added to the config after a record was written take their
        defaults, so old records and checkpoints still load and compare."""
        return config_from_dict(cls, d)

    def with_overrides(self, **kw: Any) -> TrainConfig:
        return replace(self, **kw)


def _config_dir(method: str):
    """``configs/`` holds DataLens's settings, ``configs/<method>/`` every other method's."""
    from .methods import method_class

    method_class(method)  # an unknown method: a clear error naming the valid ones
    return _config_root(method)


def _config_root(method: str):
    """:func:`_config_dir` without checking the method (no method import)."""
    root = resources.files("datalens_lib") / "configs"
    return root if method == "datalens" else root / method


def _merged(raw: dict[str, Any], profile: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """A config file's ``base`` with ``profile``'s changes and ``overrides`` on top; ``notes``
    joins the file's notes and the profile's ``changes`` text."""
    prof = dict(raw["profiles"][profile])
    notes = [raw.get("notes", ""), prof.pop("changes", "")]
    merged = {**raw["base"], **prof, "notes": " ".join(n for n in notes if n)}
    merged.update(overrides)
    return merged


#: config keys that change how a run is computed or described, not what it trains
NON_TRAINING_KEYS = frozenset({"chunk", "notes"})


def trains_paper_setting(name: str, profile: str, method: str = "datalens", *,
                         recorded: dict[str, Any] | None = None,
                         overrides: dict[str, Any] | None = None) -> bool:
    """Whether a run of config ``name`` at ``profile`` trains exactly the paper profile's
    setting (with ``overrides``, e.g. another budget): the profile differs from the paper
    profile at most in the evaluation's length (``eval_epochs``, which the comparison rules
    judge on their own) and in :data:`NON_TRAINING_KEYS` -- any other evaluation key (its
    learning rate, batch, test subset) is another protocol, not the paper's. DP-GAN's
    small-batch ``cpu`` profile is one (the paper's training, a 30-epoch evaluation): its runs
    are paper scale and are shown as such. ``recorded``: the run's recorded config, which
    must then equal that setting in every key the config file names (a run trained with other
    ``--set`` values of those keys, or under an older version of the file, is not the paper
    setting; a key the record lacks counts as a difference). Keys the file leaves to the
    config class's defaults are not checked here (``book.run_matches`` compares whole configs;
    the results reader keeps to its main folders). False for an unknown config or profile.
    Reads the JSON alone (no method import), so that the results reader stays light."""
    path = _config_root(method) / f"{name}.json"
    if not path.is_file():
        return False
    raw = json.loads(path.read_text())
    if profile not in raw["profiles"] or "paper" not in raw["profiles"]:
        return False

    def training(k: str) -> bool:
        return k != "eval_epochs" and k not in NON_TRAINING_KEYS

    want, mine = _merged(raw, "paper", overrides or {}), _merged(raw, profile, overrides or {})
    if any(want.get(k) != mine.get(k) for k in set(want) | set(mine) if training(k)):
        return False
    missing = object()
    return recorded is None or all(recorded.get(k, missing) == v for k, v in want.items()
                                   if training(k))


def available_configs(method: str = "datalens") -> list[str]:
    folder = _config_dir(method)
    if not folder.is_dir():
        return []
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def load_config(name: str, profile: str = "paper", method: str = "datalens",
                **overrides: Any) -> Any:
    """Config ``name`` (e.g. ``mnist-eps1``) of ``method`` at ``profile`` with optional
    overrides, as the method's config class (``TrainConfig`` for DataLens)."""
    choice("profile", profile, PROFILES)
    if name not in available_configs(method):
        raise ValueError(f"unknown config {name!r} for method {method!r}; available: "
                         f"{', '.join(available_configs(method)) or 'none'}")
    raw = json.loads((_config_dir(method) / f"{name}.json").read_text())
    if profile not in raw["profiles"]:
        raise ValueError(f"config {name!r} of method {method!r} has no profile {profile!r}; "
                         f"it has: {', '.join(raw['profiles'])}")
    merged = _merged(raw, profile, overrides)
    if method == "datalens":
        return TrainConfig.from_dict(merged)
    from .methods import method_class

    return method_class(method).config_class.from_dict(merged)
