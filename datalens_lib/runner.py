"""Execute the book's notebooks with papermill: ``run_notebook(path, parameters)`` is the one
primitive; ``run_all`` maps it over the notebooks (the same grid could go to a cluster).

Sources are the notebooks ``notebooks/<name>.ipynb`` (outputs stripped), each paired with a
jupytext percent script ``notebooks/<name>.py`` for review (``make sync-notebooks``; a test
fails when a pair differs). The book's executions (``run_all``) are *canonical*: written to
``book/notebooks/<name>.ipynb``, which the book shows. Any other execution, e.g. one point of
a parameter grid, goes to ``<notebooks root>/<name>-<hash of its parameters>.ipynb``
(:func:`notebooks_root`), so a grid's notebooks never overwrite each other or the book's.
Every executed notebook carries the hash of its parameters and source in its metadata, so an
up-to-date one is skipped unless ``force``. A failed notebook leaves no output that looks complete
(papermill writes to a temporary file that is renamed only on success).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from .provenance import REPO_ROOT, notebooks_root
from .store import params_hash

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
OUTPUT_DIR = REPO_ROOT / "book" / "notebooks"
#: Book order; every notebook takes ``profile`` and ``seed``.
NOTEBOOKS = ("t1_main_utility", "t2_low_epsilon", "f1_dependent_bound", "t3_visual_quality",
             "t4_hyperparameters", "t5_compression", "t6_running_time", "t7_components",
             "t8_dpsgd", "t9_dpsgd_ablation", "t10_dpsgd_control", "t11_dpsgd_search",
             "f3_samples", "privacy_explorer", "status")


def notebook_path(name: str) -> Path:
    """A book notebook's name (``t1_main_utility``) or a path to an ``.ipynb`` or jupytext
    ``.py`` notebook."""
    p = Path(name)
    if p.suffix == "":
        p = NOTEBOOKS_DIR / f"{name}.ipynb"
    if not p.exists():
        raise ValueError(f"notebook {name!r} not found; known: {', '.join(NOTEBOOKS)}")
    return p


def _executed_hash(path: Path) -> str | None:
    try:
        nb = json.loads(path.read_text())
        return nb["metadata"].get("datalens", {}).get("params_hash")
    except (OSError, ValueError, KeyError):
        return None


def output_path(src: Path, parameters: dict[str, Any], *, canonical: bool,
                output_dir: Path | None = None) -> Path:
    """Where an execution of ``src`` with ``parameters`` is written (module docstring)."""
    if canonical:
        return (output_dir or OUTPUT_DIR) / f"{src.stem}.ipynb"
    return (output_dir or notebooks_root()) / f"{src.stem}-{params_hash(parameters)}.ipynb"


def _source_hash(src: Path, parameters: dict[str, Any]) -> str:
    return params_hash({"parameters": parameters, "source": src.read_text()})


def is_up_to_date(path: str | Path, parameters: dict[str, Any], *, canonical: bool = False,
                  output_dir: Path | None = None) -> bool:
    """Whether an execution of this notebook source with these parameters is on disk."""
    src = notebook_path(str(path))
    out = output_path(src, dict(parameters), canonical=canonical, output_dir=output_dir)
    return out.exists() and _executed_hash(out) == _source_hash(src, dict(parameters))


def run_notebook(path: str | Path, parameters: dict[str, Any] | None = None, *,
                 output_dir: Path | None = None, force: bool = False,
                 kernel: str = "python3", progress: bool = False,
                 canonical: bool = False) -> dict[str, Any]:
    """Execute one notebook with ``parameters``; returns status, output path and seconds.

    ``canonical``: the book's execution, ``<output_dir or book/notebooks>/<name>.ipynb``;
    otherwise ``<output_dir or notebooks_root()>/<name>-<params_hash(parameters)>.ipynb``."""
    import jupytext
    import nbformat
    import papermill as pm

    src = notebook_path(str(path))
    parameters = dict(parameters or {})
    out = output_path(src, parameters, canonical=canonical, output_dir=output_dir)
    out_dir = out.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    h = _source_hash(src, parameters)
    if not force and out.exists() and _executed_hash(out) == h:
        return {"notebook": src.stem, "status": "skipped", "output": str(out), "seconds": 0.0}
    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["datalens"] = {"params_hash": h, "parameters": parameters}

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        inp = Path(tmp) / f"{src.stem}.ipynb"
        nbformat.write(nb, inp)
        fd, partial = tempfile.mkstemp(dir=out_dir, prefix=f".{src.stem}.", suffix=".ipynb")
        os.close(fd)
        try:
            pm.execute_notebook(str(inp), partial, parameters=parameters, kernel_name=kernel,
                                cwd=str(REPO_ROOT), progress_bar=progress)
            done = nbformat.read(partial, as_version=4)
            for cell in done.cells:  # the book shows results; code stays one click away
                if cell.cell_type == "code":
                    tags = cell.metadata.setdefault("tags", [])
                    if "hide-input" not in tags:
                        tags.append("hide-input")
            nbformat.write(done, partial)
            os.replace(partial, out)
            status, error = "ok", None
        except Exception as exc:  # papermill raises PapermillExecutionError and others
            status, error = "failed", "".join(traceback.format_exception_only(exc)).strip()
            if os.path.exists(partial):
                os.unlink(partial)
    return {"notebook": src.stem, "status": status, "output": str(out), "error": error,
            "seconds": round(time.perf_counter() - t0, 1)}


def run_all(profile: str = "smoke", *, seed: int = 0, force: bool = False,
            names: tuple[str, ...] | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Run every notebook (or ``names``) at ``profile``; returns one result per notebook."""
    from tqdm import tqdm

    results = []
    todo = names or NOTEBOOKS
    for name in tqdm(todo, desc=f"notebooks ({profile})", disable=not progress):
        results.append(run_notebook(name, {"profile": profile, "seed": seed}, force=force,
                                    canonical=True))
    return results
