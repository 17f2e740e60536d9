"""Results store: one JSON record per (artifact, parameters), with provenance, written
atomically. Records live in ``data/results/store/<artifact>/<profile>-<hash>.json``.

Every record carries: artifact, params, params_hash, profile, seed, result, duration_s,
created (UTC), git sha, package versions and hardware.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._validate import choice
from .provenance import atomic_write_json, provenance, store_root

PROFILE_RANK = {"paper": 3, "cpu": 2, "smoke": 1}


def params_hash(params: dict[str, Any]) -> str:
    """Stable 12-hex-digit hash of the parameters (canonical JSON)."""
    blob = json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _artifact_dir(artifact: str, root: Path | None) -> Path:
    safe = artifact.replace(":", "_").replace("/", "_")
    return (root or store_root()) / safe


def save_result(artifact: str, params: dict[str, Any], result: Any, *, profile: str,
                seed: int | None = None, duration_s: float | None = None,
                root: Path | None = None) -> Path:
    """Store ``result`` for ``artifact`` under the hash of ``params``; returns the file."""
    choice("profile", profile, tuple(PROFILE_RANK))
    h = params_hash(params)
    record = {"artifact": artifact, "params": params, "params_hash": h, "profile": profile,
              "seed": seed, "result": result, "duration_s": duration_s,
              "created": datetime.now(UTC).isoformat(timespec="seconds"), **provenance()}
    path = _artifact_dir(artifact, root) / f"{profile}-{h}.json"
    atomic_write_json(path, record)
    return path


def load_result(artifact: str, params: dict[str, Any], profile: str,
                root: Path | None = None) -> dict[str, Any] | None:
    path = _artifact_dir(artifact, root) / f"{profile}-{params_hash(params)}.json"
    return json.loads(path.read_text()) if path.exists() else None


def load_results(artifact: str, root: Path | None = None) -> list[dict[str, Any]]:
    folder = _artifact_dir(artifact, root)
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def all_artifacts(root: Path | None = None) -> list[str]:
    base = root or store_root()
    if not base.exists():
        return []
    out = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        recs = sorted(d.glob("*.json"))
        if recs:
            out.append(json.loads(recs[0].read_text())["artifact"])
    return out


def best(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The record of the largest profile (paper > cpu > smoke); newest among equals."""
    if not records:
        return None
    return max(records, key=lambda r: (PROFILE_RANK.get(r["profile"], 0), r["created"]))


class Timer:
    """``with Timer() as t: ...; t.seconds``"""

    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.t0
