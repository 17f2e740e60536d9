"""Integrity of the committed numbers: ``datalens verify [--update] [--json]`` (CI runs it).

What is checked (``verify``), each finding a ``Problem`` naming the file:

1. **The paper's numbers**: every ``data/paper/*.csv`` against ``data/paper/SHA256SUMS``
   (``sha256sum`` format, ``<hex>  <name>``): each CSV listed, no listed file absent, each
   hash equal.
2. **The committed results**: every committed file under ``data/results/`` (``git ls-files``
   where ``root`` is a git checkout and git runs; otherwise the folder is walked, leaving out
   hidden files and the ignored ``store/``) against ``data/results/SHA256SUMS`` (paths
   relative to ``data/results``): no file unlisted, none listed but absent, each hash equal.
   ``README.md``, ``.gitkeep`` and the manifest itself are not listed. Both manifests can
   also be checked by hand: ``cd data/results && sha256sum -c SHA256SUMS``.
3. **The records' schema**: every JSON file under ``data/results`` parses, is an object, and
   matches the rule of its kind in ``RECORD_SCHEMAS`` (the one place the rules live: which
   keys each kind of record always has, their types, allowed values and cross-checks, learnt
   from the committed records). A JSON file no kind matches is a problem too, so a new kind
   of record gets its rule here.
4. **The published sample subsets** (``datalens_lib.samples.publish_subset``): where a record
   has ``published_samples``, the ``.npz`` beside it exists, its size and SHA-256 are the
   record's, it loads with ``numpy.load(allow_pickle=False)`` and its arrays follow the rules
   of ``samples.check_images`` (``sample_file_errors``: uint8, or float in [0, 1]; the
   dataset's image shape; integer labels in ``0 .. num_classes - 1`` of the config's dataset,
   ``DEFAULT_NUM_CLASSES`` when the record names none; ``n`` rows of each, and of ``index``,
   increasing within the source). A committed ``.npz`` no record publishes is a problem too.

``write_manifests`` (``datalens verify --update``) rewrites both manifests from the files as
they are; after committing new records run it and review the diff of ``SHA256SUMS`` (a
changed hash of an existing record is a changed result).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from .data import REGISTRY, get_spec
from .provenance import REPO_ROOT

PAPER_DIR = "data/paper"
RESULTS_DIR = "data/results"
MANIFEST = "SHA256SUMS"
NOT_LISTED = frozenset({"README.md", ".gitkeep"})
"""File names under ``data/results`` that are documentation, not results (never listed)."""
DEFAULT_NUM_CLASSES = 10
"""Label range of a published subset whose record names no known dataset."""
UPDATE_HINT = "run `datalens verify --update` and review the diff of SHA256SUMS"


@dataclass(frozen=True)
class Problem:
    """One finding: ``path`` (relative to the checked root, POSIX), what is wrong, what to do
    about it, and which check found it (``checksum``, ``json``, ``schema`` or ``samples``)."""

    path: str
    what: str
    fix: str
    check: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what} ({self.fix})"


# --- the record schemas ---------------------------------------------------------------------

# Type names of a rule (``"a|b"``: either). JSON's own: string, int (not bool), number (int or
# float, not bool), bool, object, array, null. Stricter ones: ``unit`` (a number in [0, 1]: an
# accuracy or a rate), ``unit[]`` (an array of them), ``dataset`` (a name of
# ``datalens_lib.data.REGISTRY``), ``sha256`` (64 lowercase hex digits).
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_unit(v: Any) -> bool:
    return _is_number(v) and 0.0 <= v <= 1.0


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": _is_number,
    "bool": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
    "unit": _is_unit,
    "unit[]": lambda v: isinstance(v, list) and all(_is_unit(a) for a in v),
    "dataset": lambda v: isinstance(v, str) and v in REGISTRY,
    "sha256": lambda v: isinstance(v, str) and _HEX64.fullmatch(v) is not None,
}


def _eval_consistent(rec: dict[str, Any]) -> Iterator[str]:
    """An evaluation's summary agrees with its curve: one accuracy per epoch, ``paper`` the
    best of them, ``clean`` the last, ``best_epoch`` within the epochs."""
    acc, epochs = rec.get("test_accuracy_per_epoch"), rec.get("epochs")
    if not (isinstance(acc, list) and acc and all(_is_number(a) for a in acc)):
        return
    if isinstance(epochs, int) and len(acc) != epochs:
        yield f"{len(acc)} accuracies in test_accuracy_per_epoch for epochs = {epochs}"
    if _is_number(rec.get("paper")) and not math.isclose(rec["paper"], max(acc), abs_tol=1e-9):
        yield f"paper = {rec['paper']} is not the best epoch's accuracy {max(acc)}"
    if _is_number(rec.get("clean")) and not math.isclose(rec["clean"], acc[-1], abs_tol=1e-9):
        yield f"clean = {rec['clean']} is not the last epoch's accuracy {acc[-1]}"
    best = rec.get("best_epoch")
    if isinstance(best, int) and not 1 <= best <= len(acc):
        yield f"best_epoch = {best} outside 1..{len(acc)}"


def _method_is_folder(rel: str, rec: dict[str, Any]) -> Iterator[str]:
    """``<method>/<config>/<folder>/``: the record's ``method`` (records written before the
    field existed are DataLens runs: ``book.py`` reads a missing one as ``datalens``) is the
    first folder of its path."""
    method = rec.get("method", "datalens")
    folder = PurePosixPath(rel).parts[0]
    if isinstance(method, str) and method != folder:
        yield f"method {method!r} but the record lies under {folder}/"


_PROVENANCE = {"git_sha": "string", "packages": "object", "hardware": "object"}

_RUN = {
    **_PROVENANCE, "config": "object", "config.dataset": "dataset", "status": "string",
    "profile": "string", "device": "string", "seed": "int", "steps": "int", "batch": "int",
    "epsilon": "object", "target_epsilon": "number|null", "delta": "number|null",
    "privacy": "object", "history": "array", "samples": "object", "timings": "object",
    "resumed": "bool", "peak_rss_gib": "number",
}
_RUN_OPTIONAL = {
    "method": "string", "published_samples": "object", "conversion": "string",
    "queries": "int", "teachers": "int", "per_teacher": "int", "teacher_parameters": "int",
    "snapshots": "array", "git_sha_at_end": "string", "noise_multiplier": "number",
    "sample_rate": "number", "train_images": "int", "cuda_peak_gib": "number",
    "stop_on": "string", "schema": "int",  # (datalens_lib.records.RECORD_SCHEMA)
}
_DPSGD_RUN = {
    **_PROVENANCE, "config": "object", "config.dataset": "dataset", "profile": "string",
    "device": "string", "model": "string", "seed": "int", "steps": "int",
    "epsilon": "object|null", "privacy": "object", "sample_rate": "number",
    "best": "unit", "final": "unit", "evaluations": "array", "train_examples": "int",
    "test_examples": "int", "train_seconds": "number", "seconds_per_step": "number",
}
_SPREAD = {f"{m}.{s}": "unit" for m in ("best", "final") for s in ("mean", "min", "max")}


@dataclass(frozen=True)
class RecordKind:
    """The rule for one kind of record. ``pattern`` is searched in the path relative to
    ``data/results`` (the first kind whose pattern matches applies); ``required`` maps each key
    every record of the kind has (dotted for nested keys: ``config.dataset``) to its type
    names; ``optional`` types keys some records have; ``choices`` lists the allowed values of
    a key; ``checks`` are cross-checks yielding what is wrong, given (path, record)."""

    pattern: str
    about: str
    required: Mapping[str, str]
    optional: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    checks: tuple[Callable[[str, dict[str, Any]], Iterator[str]], ...] = ()


RECORD_SCHEMAS: dict[str, RecordKind] = {
    "dpsgd-seed": RecordKind(
        r"^dpsgd/.*/seed\d+\.json$", "one DP-SGD training seed of a cell (`datalens dpsgd`)",
        _DPSGD_RUN, {"derived_from": "object"}),
    "dpsgd-point": RecordKind(
        r"^dpsgd/.*/point\d+\.json$", "one point of a DP-SGD hyper-parameter search",
        {**_DPSGD_RUN, "epsilon": "object", "best_validation": "unit",
         "final_validation": "unit", "validation": "object", "validation_evaluations": "array",
         "validation_examples": "int"},
        {"derived_from": "object"}),
    "dpsgd-search": RecordKind(
        r"^dpsgd/.*/search\.json$", "a DP-SGD search's grid and selection",
        {**_PROVENANCE, "cell": "string", "dataset": "dataset", "method": "string",
         "epsilon": "number", "k": "number", "profile": "string", "seed": "int",
         "grid": "array", "parameters": "array", "overrides": "object", "privacy": "string",
         "selected_test": "object", "selected_validation": "object", "validation": "int"}),
    "dpsgd-summary": RecordKind(
        r"^dpsgd/.*/summary\.json$", "a DP-SGD cell over its seeds",
        {**_PROVENANCE, "cell": "string", "dataset": "dataset", "method": "string",
         "config": "object", "config.dataset": "dataset", "epsilon": "number|null",
         "k": "number", "folder": "string", "profile": "string", "seeds": "array",
         "best": "object", "final": "object", **_SPREAD},
        {"epsilon_spent": "object|null", "steps": "int", "steps_set_by": "string|null"}),
    "run": RecordKind(
        r"(^|/)run\.json$", "a training run (`datalens train`)", _RUN, _RUN_OPTIONAL,
        {"status": ("complete",)}, (_method_is_folder,)),
    "snapshots": RecordKind(
        r"(^|/)snapshots\.json$", "a run trained again up to its last snapshot",
        {**{k: t for k, t in _RUN.items() if k != "samples"}, "method": "string",
         "snapshots": "array", "until_last_snapshot": "bool",
         "prefix_of": "object", "last_snapshot_rows": "int"},
        _RUN_OPTIONAL, {"status": ("snapshots",)}, (_method_is_folder,)),
    "quality": RecordKind(
        r"(^|/)quality\.json$", "IS / FID of a published subset (`datalens quality`)",
        {**_PROVENANCE, "dataset": "dataset", "samples": "string", "samples_sha256": "sha256",
         "n": "int", "limit": "int|null", "splits": "int", "is": "number", "is_std": "number",
         "fid": "number", "label_agreement": "unit", "classifier": "object",
         "scores_version": "int"}),
    "probe": RecordKind(
        r"(^|/)probe-[^/]*\.json$", "a discriminator probe (a diagnosis, not a result)",
        {"what": "string", "method": "string", "config": "string", "profile": "string",
         "seed": "int", "seconds": "number", "threads": "int", "series": "object",
         "provenance": "object"},
        {"classifier_sha256": "sha256", "every": "int", "steps": "int", "epochs": "int",
         "train_limit": "int"},
        checks=(_method_is_folder,)),
    "eval": RecordKind(
        r"(^|/)[^/]*eval-\d+ep[^/]*\.json$", "utility of samples (`datalens evaluate`, "
        "`datalens reference`): accuracies per epoch, paper and clean protocols",
        {**_PROVENANCE, "dataset": "dataset", "paper": "unit", "clean": "unit",
         "test_accuracy_per_epoch": "unit[]", "epochs": "int", "best_epoch": "int",
         "batch_size": "int", "lr": "number", "n_train": "int", "seed": "int",
         "seconds": "number"},
        {"n_test": "int", "continued_from_epoch": "int", "shorter_schedules": "object",
         "diverged_at_epoch": "int|null", "snapshot": "object", "schedule_check": "object",
         "pad_to": "int"},
        checks=(lambda rel, rec: _eval_consistent(rec),)),
}
"""The record kinds under ``data/results`` and their rules, most specific first."""

PUBLISHED_SAMPLES_KEYS: dict[str, str] = {
    "file": "string", "n": "int", "bytes": "int", "sha256": "sha256", "seed": "int",
    "selection": "string", "order": "string", "dtype": "string",
    "source_sha256": "sha256", "source_n": "int",
}
"""``published_samples`` of a record (``samples.publish_subset``): its keys and types."""


def record_kind(rel: str) -> str | None:
    """The ``RECORD_SCHEMAS`` kind of a JSON file (path relative to ``data/results``)."""
    for name, kind in RECORD_SCHEMAS.items():
        if re.search(kind.pattern, rel):
            return name
    return None


def _lookup(rec: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    value: Any = rec
    for part in dotted.split("."):
        if not (isinstance(value, dict) and part in value):
            return False, None
        value = value[part]
    return True, value


def _type_errors(rec: dict[str, Any], rules: Mapping[str, str], *, required: bool
                 ) -> Iterator[str]:
    for key, types in rules.items():
        present, value = _lookup(rec, key)
        if not present:
            parent = key.rpartition(".")[0]
            if required and not (parent in rules and not _lookup(rec, parent)[0]):
                yield f"no {key!r} ({types})"  # (a missing parent is reported once)
            continue
        if not any(_TYPES[t](value) for t in types.split("|")):
            shown = json.dumps(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            yield f"{key!r} should be {types}, got {shown}"


def schema_errors(rel: str, rec: Any) -> list[str]:
    """What is wrong with a parsed record (path relative to ``data/results``) under its
    ``RECORD_SCHEMAS`` rule; empty when it conforms."""
    name = record_kind(rel)
    if name is None:
        return ["no record kind of datalens_lib.verify.RECORD_SCHEMAS matches this file"]
    if not isinstance(rec, dict):
        return [f"the {name} record must be a JSON object, got {type(rec).__name__}"]
    kind = RECORD_SCHEMAS[name]
    out = list(_type_errors(rec, kind.required, required=True))
    out += _type_errors(rec, kind.optional, required=False)
    for key, allowed in kind.choices.items():
        present, value = _lookup(rec, key)
        if present and value not in allowed:
            out.append(f"{key!r} is {value!r}, expected one of {list(allowed)}")
    for check in kind.checks:
        out += check(rel, rec)
    return out


# --- files and manifests --------------------------------------------------------------------

_MANIFEST_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _git_files(root: Path, folder: str) -> list[str] | None:
    """Committed (indexed) files under ``folder``, relative to ``root``; None without git."""
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", folder],
                             capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def results_files(root: Path) -> list[str]:
    """The files the results manifest covers, relative to ``data/results`` (POSIX, sorted):
    committed ones (git), or else every file of the folder but hidden ones and ``store/``."""
    base = root / RESULTS_DIR
    listed = _git_files(root, RESULTS_DIR)
    if listed is not None:
        rels = [PurePosixPath(p).relative_to(RESULTS_DIR).as_posix() for p in listed]
    else:
        rels = []
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and not (here == base and d == "store"))
            rels += [(here / f).relative_to(base).as_posix() for f in filenames
                     if not f.startswith(".")]
    return sorted(r for r in rels
                  if PurePosixPath(r).name not in NOT_LISTED and r != MANIFEST)


def paper_files(root: Path) -> list[str]:
    """The paper's transcribed tables: ``data/paper/*.csv`` (names, sorted)."""
    return sorted(p.name for p in (root / PAPER_DIR).glob("*.csv") if p.is_file())


def _write_manifest(path: Path, base: Path, names: list[str]) -> None:
    lines = [f"{_sha256(base / n)}  {n}\n" for n in names if (base / n).is_file()]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, path)


def write_manifests(root: Path | str = REPO_ROOT) -> list[Path]:
    """(Re)write ``data/paper/SHA256SUMS`` and ``data/results/SHA256SUMS`` from the files as
    they are now (``datalens verify --update``); returns the two paths. Commit new records
    first (or ``git add`` them): in a git checkout only indexed files under ``data/results``
    are listed. Review the diff before committing it."""
    root = Path(root)
    out = []
    for folder, names in ((PAPER_DIR, paper_files(root)), (RESULTS_DIR, results_files(root))):
        path = root / folder / MANIFEST
        _write_manifest(path, root / folder, names)
        out.append(path)
    return out


def _read_manifest(root: Path, folder: str) -> tuple[dict[str, str] | None, list[Problem]]:
    rel = f"{folder}/{MANIFEST}"
    path = root / rel
    if not path.is_file():
        return None, [Problem(rel, "no checksum file", UPDATE_HINT, "checksum")]
    entries: dict[str, str] = {}
    problems = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        m = _MANIFEST_LINE.fullmatch(line)
        if m is None:
            problems.append(Problem(rel, f"line {i} is not '<sha256>  <name>'", UPDATE_HINT,
                                    "checksum"))
        elif m[2] in entries:
            problems.append(Problem(rel, f"line {i} lists {m[2]} again", UPDATE_HINT,
                                    "checksum"))
        else:
            entries[m[2]] = m[1]
    return entries, problems


# --- the checks -----------------------------------------------------------------------------


class _Verifier:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[Problem] = []
        self.checked: Counter[str] = Counter()
        self._digests: dict[str, str] = {}
        self._content: list[tuple[str, str, dict[str, Any]]] = []

    def problem(self, path: str, what: str, fix: str, check: str) -> None:
        self.problems.append(Problem(path, what, fix, check))

    def digest(self, rel: str, data: bytes | None = None) -> str:
        if rel not in self._digests:
            self._digests[rel] = (hashlib.sha256(data).hexdigest() if data is not None
                                  else _sha256(self.root / rel))
        return self._digests[rel]

    def manifest(self, folder: str, files: list[str], what: str) -> None:
        """Files (relative to ``folder``) against ``folder/SHA256SUMS``."""
        listed, problems = _read_manifest(self.root, folder)
        self.problems += problems
        if listed is None:
            return
        present = set(files)
        for name in sorted(present | set(listed)):
            rel, path = f"{folder}/{name}", self.root / folder / name
            if name in present and not path.is_file():
                self.problem(rel, f"{what} missing from the working tree",
                             f"restore it (git checkout -- {rel})", "checksum")
            elif name not in listed:
                self.problem(rel, f"{what} not listed in {folder}/{MANIFEST}", UPDATE_HINT,
                             "checksum")
            elif name not in present:
                self.problem(rel, f"listed in {folder}/{MANIFEST} but "
                             + ("not committed" if path.is_file() else "absent"),
                             f"restore it (git checkout -- {rel}), or if it was removed on "
                             f"purpose {UPDATE_HINT}", "checksum")
            else:
                self.checked[f"{folder} hashed"] += 1
                if self.digest(rel) != listed[name]:
                    self.problem(rel, f"SHA-256 differs from {folder}/{MANIFEST}",
                                 f"restore it (git checkout -- {rel}), or if the change is "
                                 f"intended {UPDATE_HINT}", "checksum")

    def records(self, files: list[str]) -> None:
        """Schema of every JSON record, then the sample subsets the records publish."""
        published: set[str] = set()
        for name in files:
            rel, path = f"{RESULTS_DIR}/{name}", self.root / RESULTS_DIR / name
            if not name.endswith(".json") or not path.is_file():
                continue
            data = path.read_bytes()
            self.digest(rel, data)
            self.checked["records"] += 1
            try:
                rec = json.loads(data)
            except (ValueError, UnicodeDecodeError) as e:
                self.problem(rel, f"not valid JSON ({e})",
                             f"restore it (git checkout -- {rel}) or rewrite the record",
                             "json")
                continue
            for what in schema_errors(name, rec):
                self.problem(rel, what, "fix the record, or its rule in "
                             "datalens_lib.verify.RECORD_SCHEMAS if the format changed on "
                             "purpose", "schema")
            if isinstance(rec, dict) and isinstance(rec.get("published_samples"), dict):
                npz = self.published(rel, rec)
                if npz is not None:
                    published.add(npz)
        for name in files:
            rel = f"{RESULTS_DIR}/{name}"
            if name.endswith(".npz") and rel not in published:
                self.problem(rel, "a sample file that no record publishes "
                             "(published_samples.file of the run.json beside it)",
                             "publish it with `datalens publish-samples` or remove it",
                             "samples")

    def published(self, rec_rel: str, rec: dict[str, Any]) -> str | None:
        """Check ``rec``'s published subset; returns its path (relative to root) if named."""
        pub = rec["published_samples"]
        fix_rec = "fix published_samples of the record (datalens publish-samples)"
        for what in _type_errors(pub, PUBLISHED_SAMPLES_KEYS, required=True):
            self.problem(rec_rel, f"published_samples: {what}", fix_rec, "samples")
        name = pub.get("file")
        if not isinstance(name, str) or not name or PurePosixPath(name).name != name:
            return None
        rel = (PurePosixPath(rec_rel).parent / name).as_posix()
        path = self.root / rel
        self.checked["published subsets"] += 1
        fix = f"restore it (git checkout -- {rel}) or publish the subset again"
        if not path.is_file():
            self.problem(rel, f"published in {rec_rel} but absent", fix, "samples")
            return rel
        size = path.stat().st_size
        if isinstance(pub.get("bytes"), int) and pub["bytes"] != size:
            self.problem(rel, f"{size} bytes, {rec_rel} says {pub['bytes']}", fix, "samples")
        if isinstance(pub.get("sha256"), str) and self.digest(rel) != pub["sha256"]:
            self.problem(rel, f"SHA-256 differs from published_samples.sha256 in {rec_rel}",
                         fix, "samples")
        config = rec.get("config")
        dataset = config.get("dataset") if isinstance(config, dict) else None
        spec = get_spec(dataset) if isinstance(dataset, str) and dataset in REGISTRY else None
        self._content.append((rel, fix, dict(
            path=path, n=pub.get("n") if isinstance(pub.get("n"), int) else None,
            shape=None if spec is None else spec.shape,
            num_classes=DEFAULT_NUM_CLASSES if spec is None else spec.num_classes,
            source_n=pub.get("source_n") if isinstance(pub.get("source_n"), int) else None)))
        return rel

    def sample_contents(self) -> None:
        """Load and check the published subsets queued by ``published``, a few at a time
        (decompressing them is most of ``verify``'s time; zlib releases the GIL)."""
        workers = max(1, min(4, os.cpu_count() or 1, len(self._content)))
        with ThreadPoolExecutor(workers) as pool:
            found = pool.map(lambda task: sample_file_errors(**task[2]), self._content)
            for (rel, fix, _), whats in zip(self._content, found, strict=True):
                for what in whats:
                    self.problem(rel, what, fix, "samples")


def sample_file_errors(path: Path, *, n: int | None = None,
                       shape: tuple[int, int, int] | None = None,
                       num_classes: int = DEFAULT_NUM_CLASSES,
                       source_n: int | None = None) -> list[str]:
    """What is wrong with a sample file (``datalens_lib.samples``: ``x`` images, ``y``
    labels, optional ``index`` into the source) under the rules of ``samples.check_images``:
    it loads with ``numpy.load(allow_pickle=False)``; ``x`` is (n, c, h, w) or (n, h, w) of
    ``shape`` (C, H, W) where given, uint8 or finite floats in [0, 1]; ``y`` holds as many
    integer labels in ``0 .. num_classes - 1``; both have ``n`` rows where given; ``index``
    has one increasing integer per row within ``0 .. source_n - 1``. Empty when sound."""
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = {"x", "y"} - set(f.files)
            if missing:
                return [f"no array {sorted(missing)} in the .npz (it has {f.files})"]
            x, y = f["x"], f["y"]
            index = f["index"] if "index" in f.files else None
    except Exception as e:  # a corrupt file can fail in zipfile, zlib or numpy
        return [f"does not load with numpy.load(allow_pickle=False): {type(e).__name__}: {e}"]
    out = []
    image = (1, *x.shape[1:]) if x.ndim == 3 else tuple(x.shape[1:])
    if x.ndim not in (3, 4):
        out.append(f"images must have shape (n, c, h, w) or (n, h, w), got {x.shape}")
    elif shape is not None and image != tuple(shape):
        out.append(f"images have shape {image}, expected {tuple(shape)} (channels first)")
    if x.dtype != np.uint8:
        if not np.issubdtype(x.dtype, np.floating):
            out.append(f"images must be uint8 or floating point, got {x.dtype}")
        elif x.size and not (np.isfinite(x).all() and x.min() >= 0 and x.max() <= 1):
            out.append(f"float images must be finite and lie in [0, 1], got "
                       f"[{float(np.nanmin(x)):.3g}, {float(np.nanmax(x)):.3g}]")
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        out.append(f"labels must be a vector of integers, got {y.dtype} {y.shape}")
    elif y.size and (y.min() < 0 or y.max() >= num_classes):
        out.append(f"labels must lie in 0..{num_classes - 1}, got {y.min()}..{y.max()}")
    rows = {"images": len(x) if x.ndim else 0, "labels": len(y) if y.ndim else 0}
    if index is not None:
        rows["index"] = len(index) if index.ndim else 0
        if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
            out.append(f"index must be a vector of integers, got {index.dtype} {index.shape}")
        elif index.size and (index.min() < 0 or np.any(np.diff(index) <= 0)
                             or (source_n is not None and index.max() >= source_n)):
            out.append(f"index must be increasing within 0..{source_n}")
    expected = n if n is not None else rows["images"]
    if any(r != expected for r in rows.values()) or not expected:
        counts = ", ".join(f"{r} {k}" for k, r in rows.items())
        out.append(f"{counts}; published_samples.n = {n}" if n is not None
                   else f"{counts}: not one row each")
    return out


def _verify(root: Path) -> tuple[list[Problem], Counter[str]]:
    v = _Verifier(root)
    v.manifest(PAPER_DIR, paper_files(root), "a table of the paper's numbers")
    files = results_files(root)
    v.manifest(RESULTS_DIR, files, "a committed result")
    v.records(files)
    v.sample_contents()
    return sorted(v.problems, key=lambda p: p.path), v.checked


def verify(root: Path | str = REPO_ROOT) -> list[Problem]:
    """Every problem of the committed numbers under ``root`` (module doc: the paper's tables
    and the results against their manifests, the records' schema, the published sample
    subsets), sorted by path; an empty list: everything is sound."""
    return _verify(Path(root))[0]


def main_verify(root: Path | str = REPO_ROOT, update: bool = False, as_json: bool = False
                ) -> int:
    """``datalens verify [--update] [--json]``: with ``update``, rewrite the manifests first
    (``write_manifests``); then verify and print one line per problem (``path: what (what to
    do)``), or with ``as_json`` one JSON object (``ok``, ``problems``, ``checked``,
    ``updated``). Returns the exit status: 0 sound, 1 any problem."""
    root = Path(root)
    updated = [p.relative_to(root).as_posix() for p in write_manifests(root)] if update else []
    problems, checked = _verify(root)
    if as_json:
        json.dump({"ok": not problems, "problems": [asdict(p) for p in problems],
                   "checked": dict(checked), "updated": updated}, sys.stdout, indent=1)
        print()
    else:
        for path in updated:
            print(f"wrote {path}; review its diff (git diff -- {path})")
        for p in problems:
            print(p)
        counts = ", ".join(f"{n} {what}" for what, n in checked.items())
        print(f"verify: {len(problems)} problem(s) ({counts})" if problems
              else f"verify: sound ({counts})")
    return 1 if problems else 0
