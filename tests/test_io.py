"""Writes that must never leave a complete-looking partial file, the results store's keys and
ranking, and the notebook runner's up-to-date check."""

import json
import os

import pytest

from datalens_lib import provenance, runner, store
from datalens_lib.provenance import atomic_save, atomic_write_bytes, atomic_write_json


class Crash(Exception):
    pass


def _no_temp_files(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_crash_between_write_and_rename_keeps_the_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "record.json"
    atomic_write_json(target, {"v": 1})

    def crash(src, dst):
        assert json.loads(open(src).read()) == {"v": 2}  # the new content is fully written
        raise Crash

    monkeypatch.setattr(provenance.os, "replace", crash)
    with pytest.raises(Crash):
        atomic_write_json(target, {"v": 2})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"v": 1}
    assert _no_temp_files(tmp_path)
    atomic_write_bytes(target, b"{\"v\": 3}")
    assert json.loads(target.read_text()) == {"v": 3} and _no_temp_files(tmp_path)


def test_crash_while_writing_keeps_the_previous_file(tmp_path):
    target = tmp_path / "samples.npz"
    atomic_save(target, lambda tmp: open(tmp, "wb").write(b"old, complete"))

    def half_write(tmp):
        with open(tmp, "wb") as fh:
            fh.write(b"new, half")
        raise Crash

    with pytest.raises(Crash):
        atomic_save(target, half_write)
    assert target.read_bytes() == b"old, complete" and _no_temp_files(tmp_path)
    # a new file in a folder that does not exist yet
    atomic_save(tmp_path / "a" / "b.bin", lambda tmp: open(tmp, "wb").write(b"x"))
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"x"


def test_store_write_goes_through_a_temp_file(tmp_path, monkeypatch):
    path = store.save_result("tab:x", {"a": 1}, {"v": 1}, profile="cpu", root=tmp_path)
    monkeypatch.setattr(provenance.os, "replace", lambda s, d: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        store.save_result("tab:x", {"a": 1}, {"v": 2}, profile="cpu", root=tmp_path)
    monkeypatch.undo()
    assert json.loads(path.read_text())["result"] == {"v": 1}
    assert _no_temp_files(path.parent)


def test_store_record_fields_and_keys(tmp_path):
    p = store.save_result("fig:a/b", {"x": [1, 2]}, {"acc": 0.5}, profile="paper", seed=4,
                          duration_s=2.5, root=tmp_path)
    rec = json.loads(p.read_text())
    assert p.parent.name == "fig_a_b" and p.name == f"paper-{store.params_hash({'x': [1, 2]})}.json"
    assert rec["artifact"] == "fig:a/b" and rec["params"] == {"x": [1, 2]}
    assert rec["seed"] == 4 and rec["duration_s"] == 2.5 and rec["profile"] == "paper"
    assert rec["params_hash"] == store.params_hash({"x": [1, 2]}) and len(rec["params_hash"]) == 12
    assert rec["created"].endswith("+00:00")
    assert store.load_result("fig:a/b", {"x": [1, 2]}, "smoke", root=tmp_path) is None
    assert store.load_result("fig:a/b", {"x": [1, 3]}, "paper", root=tmp_path) is None
    assert store.load_result("fig:a/b", {"x": [1, 2]}, "paper", root=tmp_path)["result"] == {
        "acc": 0.5}
    assert store.params_hash({"x": {"b": 1, "a": 2}}) == store.params_hash({"x": {"a": 2, "b": 1}})
    assert store.params_hash({"x": [2, 1]}) != store.params_hash({"x": [1, 2]})
    assert store.all_artifacts(tmp_path / "none") == []
    (tmp_path / "empty").mkdir()
    assert store.all_artifacts(tmp_path) == ["fig:a/b"]
    assert [r["artifact"] for r in store.load_results("fig:a/b", root=tmp_path)] == ["fig:a/b"]


def test_best_ranks_profile_before_recency():
    older_paper = {"profile": "paper", "created": "2026-01-01T00:00:00+00:00"}
    newer_smoke = {"profile": "smoke", "created": "2026-06-01T00:00:00+00:00"}
    newer_cpu = {"profile": "cpu", "created": "2026-03-01T00:00:00+00:00"}
    assert store.best([newer_smoke, older_paper, newer_cpu]) is older_paper
    assert store.best([newer_smoke, newer_cpu]) is newer_cpu
    a = {"profile": "cpu", "created": "2026-01-01T00:00:00+00:00"}
    b = {"profile": "cpu", "created": "2026-01-02T00:00:00+00:00"}
    assert store.best([b, a]) is b and store.best([a, b]) is b
    assert store.best([]) is None


def test_timer_measures():
    with store.Timer() as t:
        assert t.seconds == 0.0
        sum(range(10000))
    assert 0 < t.seconds < 5


NB = '''# %% tags=["parameters"]
x = 1
# %%
print("x is", x * 2)
# %% tags=["hide-input"]
print("already hidden")
'''


def test_runner_reruns_when_source_or_parameters_change(tmp_path):
    src = tmp_path / "tiny.py"
    src.write_text(NB)
    out = tmp_path / "out"
    assert runner.run_notebook(src, {"x": 1}, output_dir=out, canonical=True)["status"] == "ok"
    assert runner.run_notebook(src, {"x": 1}, output_dir=out, canonical=True)["status"] == "skipped"
    assert runner.run_notebook(src, {"x": 2}, output_dir=out, canonical=True)["status"] == "ok"
    assert "x is 4" in (out / "tiny.ipynb").read_text()
    src.write_text(NB.replace("x * 2", "x * 3"))
    r = runner.run_notebook(src, {"x": 2}, output_dir=out, canonical=True)
    assert r["status"] == "ok" and r["output"] == str(out / "tiny.ipynb")
    nb = json.loads((out / "tiny.ipynb").read_text())
    assert "x is 6" in json.dumps(nb["cells"])
    assert nb["metadata"]["datalens"]["parameters"] == {"x": 2}
    assert nb["metadata"]["kernelspec"] == {"name": "python3", "display_name": "Python 3",
                                            "language": "python"}
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all("hide-input" in c["metadata"]["tags"] for c in code)
    assert all(c["metadata"]["tags"].count("hide-input") == 1 for c in code)


def test_runner_executed_hash_of_unreadable_notebook(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text("not json")
    assert runner._executed_hash(bad) is None
    plain = tmp_path / "plain.ipynb"
    plain.write_text(json.dumps({"metadata": {"kernelspec": {}}, "cells": []}))
    assert runner._executed_hash(plain) is None
    assert runner._executed_hash(tmp_path / "missing.ipynb") is None
    with pytest.raises(ValueError, match=r"^notebook 'no_such_notebook' not found; known: "
                                         r"t1_main_utility, t2_low_epsilon, "):
        runner.notebook_path("no_such_notebook")
    assert runner.notebook_path("status") == runner.NOTEBOOKS_DIR / "status.ipynb"


def test_run_all_passes_profile_and_seed_to_every_notebook(monkeypatch):
    seen = []
    monkeypatch.setattr(runner, "run_notebook",
                        lambda name, params, force=False, canonical=False:
                        seen.append((name, params, force, canonical))
                        or {"notebook": name, "status": "ok"})
    res = runner.run_all("cpu", seed=3, force=True, names=("a", "b"), progress=False)
    assert seen == [("a", {"profile": "cpu", "seed": 3}, True, True),
                    ("b", {"profile": "cpu", "seed": 3}, True, True)]
    assert [r["notebook"] for r in res] == ["a", "b"]
    seen.clear()
    runner.run_all(progress=False)
    assert [s[0] for s in seen] == list(runner.NOTEBOOKS)
    assert {s[1]["profile"] for s in seen} == {"smoke"} and not any(s[2] for s in seen)
    assert {s[1]["seed"] for s in seen} == {0}


def test_git_sha_prefers_the_env_and_marks_a_dirty_tree(monkeypatch, tmp_path):
    monkeypatch.setenv("DATALENS_GIT_SHA", "feedface")
    assert provenance.git_sha() == "feedface"  # a lent machine's .git can be stale
    monkeypatch.delenv("DATALENS_GIT_SHA")
    sha = provenance.git_sha()
    assert sha is not None and len(sha.split("-")[0]) == 40
    import subprocess
    repo = tmp_path / "r"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("a")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "m"], check=True)
    monkeypatch.setattr(provenance, "REPO_ROOT", repo)
    clean = provenance.git_sha()
    assert clean is not None and len(clean) == 40
    (repo / "f").write_text("b")
    assert provenance.git_sha() == clean + "-dirty"
    monkeypatch.setattr(provenance, "REPO_ROOT", tmp_path / "no-such-dir")
    assert provenance.git_sha() is None


def test_runner_executes_into_a_hidden_partial_file_in_the_output_folder(tmp_path,
                                                                         monkeypatch):
    """papermill writes to a hidden temporary notebook beside the output (so the final rename
    is atomic), in the repository root, with the kernel asked for; the result says which
    notebook ran and how long it took."""
    import papermill

    calls = []
    real = papermill.execute_notebook

    def spy(inp, out, **kw):
        calls.append((inp, out, kw))
        return real(inp, out, **kw)

    monkeypatch.setattr(papermill, "execute_notebook", spy)
    src = tmp_path / "tiny.py"
    src.write_text(NB)
    out = tmp_path / "deep" / "out"
    import time

    t0 = time.perf_counter()
    r = runner.run_notebook(src, {"x": 5}, output_dir=out, canonical=True)
    wall = time.perf_counter() - t0
    (inp, partial, kw), = calls
    assert os.path.dirname(partial) == str(out)
    assert os.path.basename(partial).startswith(".tiny.") and partial.endswith(".ipynb")
    assert kw["kernel_name"] == "python3" and kw["cwd"] == str(runner.REPO_ROOT)
    assert kw["parameters"] == {"x": 5} and kw["progress_bar"] is False
    assert r["notebook"] == "tiny" and r["status"] == "ok" and r["error"] is None
    # the execution's own time (rounded to 0.1 s): some time, never more than the whole call
    # (bounds that hold whatever the machine's speed or load)
    assert isinstance(r["seconds"], float) and 0.0 < r["seconds"] <= wall + 0.05
    skipped = runner.run_notebook(src, {"x": 5}, output_dir=out, canonical=True)
    assert skipped == {"notebook": "tiny", "status": "skipped", "output": str(out / "tiny.ipynb"),
                       "seconds": 0.0}
    src.write_text(NB + 'raise ValueError("broken on purpose")\n')
    bad = runner.run_notebook(src, {"x": 5}, output_dir=out, canonical=True)
    assert bad["status"] == "failed" and bad["notebook"] == "tiny"
    assert "ValueError" in bad["error"] and "broken on purpose" in bad["error"]
    assert bad["output"] == str(out / "tiny.ipynb") and bad["error"] == bad["error"].strip()
    assert _no_temp_files(out)


def test_params_hash_is_sha256_of_compact_sorted_json(tmp_path):
    import hashlib

    blob = '{"a":1,"b":[1,"x"],"c":"' + str(tmp_path) + '"}'
    expect = hashlib.sha256(blob.encode()).hexdigest()[:12]
    assert store.params_hash({"c": tmp_path, "b": [1, "x"], "a": 1}) == expect  # Path -> str


def test_best_ranks_unknown_profiles_last():
    custom = {"profile": "custom", "created": "2026-09-01T00:00:00+00:00"}
    smoke = {"profile": "smoke", "created": "2026-01-01T00:00:00+00:00"}
    assert store.best([custom, smoke]) is smoke


def test_cuda_precision_is_full_float32_unless_opted_in(monkeypatch):
    import torch

    from datalens_lib.datalens import set_cuda_precision
    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    try:
        monkeypatch.delenv("DATALENS_TF32", raising=False)
        torch.backends.cudnn.allow_tf32 = True
        assert set_cuda_precision() is False
        assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        monkeypatch.setenv("DATALENS_TF32", "1")
        assert set_cuda_precision() is True and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before
