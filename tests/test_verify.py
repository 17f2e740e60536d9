"""``datalens verify`` (datalens_lib.verify): the real checkout is sound, and each kind of
tampering with a copy of part of it is reported with the file's path."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from datalens_lib.verify import (
    MANIFEST,
    RECORD_SCHEMAS,
    main_verify,
    record_kind,
    results_files,
    schema_errors,
    verify,
    write_manifests,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "data/results"


def test_the_committed_numbers_are_sound():
    """CI's check: both manifests match, every record conforms, every subset is sound."""
    problems = verify(ROOT)
    assert problems == [], "\n".join(map(str, problems))


@dataclass(frozen=True)
class Copy:
    """A copy of data/paper and of a few committed result folders (paths relative to root)."""

    root: Path
    csv: str
    run: str
    eval: str
    npz: str
    seed: str

    def path(self, rel: str) -> Path:
        return self.root / rel


def _pick_run() -> Path:
    """The committed run folder with the smallest published subset and an evaluation."""
    runs = []
    for rec in sorted((ROOT / RESULTS).glob("*/*/*/run.json")):
        pub = json.loads(rec.read_text()).get("published_samples")
        if pub and sorted(rec.parent.glob("eval-*ep.json")):
            runs.append((pub["bytes"], rec.parent))
    assert runs, "no committed run with a published subset and an evaluation"
    return min(runs)[1]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Copy:
    root = tmp_path_factory.mktemp("verify") / "repo"
    shutil.copytree(ROOT / "data/paper", root / "data/paper",
                    ignore=shutil.ignore_patterns(MANIFEST))
    run = _pick_run()
    seed = sorted((ROOT / RESULTS / "dpsgd").glob("*/*/*/summary.json"))[0].parent
    for folder in (run, seed, ROOT / RESULTS / "reference/mnist"):
        shutil.copytree(folder, root / folder.relative_to(ROOT),
                        ignore=shutil.ignore_patterns(".*"))
    # what the walk must leave out: documentation, hidden files, the ignored store
    (root / RESULTS / "README.md").write_text("# results\n")
    (root / RESULTS / ".gitkeep").write_text("")
    (root / RESULTS / "store").mkdir()
    (root / RESULTS / "store/cache.json").write_text("not a record")
    (root / run.relative_to(ROOT) / ".run.json.tmp").write_text("{")
    write_manifests(root)
    rel = lambda p: p.relative_to(ROOT).as_posix()  # noqa: E731
    pub = json.loads((run / "run.json").read_text())["published_samples"]
    return Copy(root, csv="data/paper/tab_image.csv", run=rel(run / "run.json"),
                eval=rel(sorted(run.glob("eval-*ep.json"))[0]), npz=rel(run / pub["file"]),
                seed=rel(seed / "seed0.json"))


@pytest.fixture
def copy(template: Copy, tmp_path: Path) -> Copy:
    root = tmp_path / "repo"
    shutil.copytree(template.root, root)
    return Copy(root, template.csv, template.run, template.eval, template.npz, template.seed)


def test_an_untouched_copy_is_sound(copy: Copy, capsys: pytest.CaptureFixture[str]):
    files = results_files(copy.root)
    assert copy.npz.removeprefix(RESULTS + "/") in files
    assert not [f for f in files if f.startswith("store/") or "README" in f
                or f == MANIFEST or Path(f).name.startswith(".")]
    assert verify(copy.root) == []
    assert main_verify(copy.root) == 0
    assert main_verify(copy.root, as_json=True) == 0
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{"):])
    assert report["ok"] and report["problems"] == []
    assert report["checked"]["published subsets"] == 1


# --- tampering ------------------------------------------------------------------------------


def _edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    rec = json.loads(path.read_text())
    edit(rec)
    path.write_text(json.dumps(rec, indent=1))


def _republish(c: Copy, x: np.ndarray, y: np.ndarray) -> None:
    """Write the subset again with other arrays and update its SHA-256 and size in run.json
    and the manifest, so that only the content check can tell."""
    import hashlib

    npz = c.path(c.npz)
    with open(npz, "wb") as f:
        np.savez_compressed(f, x=x, y=y, index=np.arange(len(x), dtype=np.int64))
    data = npz.read_bytes()

    def update(rec: dict) -> None:
        rec["published_samples"].update(sha256=hashlib.sha256(data).hexdigest(),
                                        bytes=len(data))

    _edit_json(c.path(c.run), update)
    write_manifests(c.root)


def _subset(c: Copy) -> tuple[np.ndarray, np.ndarray]:
    with np.load(c.path(c.npz)) as f:
        return f["x"], f["y"]


def flip_csv_byte(c: Copy) -> set:
    p = c.path(c.csv)
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    return {(c.csv, "checksum")}


def delete_csv(c: Copy) -> set:
    c.path(c.csv).unlink()
    return {(c.csv, "checksum")}


def add_unlisted_csv(c: Copy) -> set:
    shutil.copy(c.path(c.csv), c.path("data/paper/tab_new.csv"))
    return {("data/paper/tab_new.csv", "checksum")}


def flip_record_byte(c: Copy) -> set:
    """One hex digit of the git sha: still valid JSON of the right schema."""
    p = c.path(c.eval)
    text = p.read_text()
    m = re.search(r'"git_sha": "([0-9a-f])', text)
    assert m is not None
    digit = "1" if m[1] != "1" else "2"
    p.write_text(text[:m.start(1)] + digit + text[m.end(1):])
    return {(c.eval, "checksum")}


def delete_record(c: Copy) -> set:
    c.path(c.eval).unlink()
    return {(c.eval, "checksum")}


def add_unlisted_record(c: Copy) -> set:
    extra = c.eval.replace(".json", "-seed7.json")
    shutil.copy(c.path(c.eval), c.path(extra))
    return {(extra, "checksum")}


def unlist_record(c: Copy) -> set:
    manifest = c.path(f"{RESULTS}/{MANIFEST}")
    name = c.seed.removeprefix(RESULTS + "/")
    lines = manifest.read_text().splitlines(keepends=True)
    manifest.write_text("".join(x for x in lines if not x.endswith(f"  {name}\n")))
    return {(c.seed, "checksum")}


def garble_manifest_line(c: Copy) -> set:
    manifest = c.path(f"{RESULTS}/{MANIFEST}")
    manifest.write_text(manifest.read_text() + "not a checksum line\n")
    return {(f"{RESULTS}/{MANIFEST}", "checksum")}


def run_without_config(c: Copy) -> set:
    _edit_json(c.path(c.run), lambda rec: rec.pop("config"))
    write_manifests(c.root)
    return {(c.run, "schema")}


def run_status_running(c: Copy) -> set:
    _edit_json(c.path(c.run), lambda rec: rec.update(status="running"))
    write_manifests(c.root)
    return {(c.run, "schema")}


def run_of_another_method(c: Copy) -> set:
    other = "dcgan" if not c.run.startswith(f"{RESULTS}/dcgan/") else "gpate"
    _edit_json(c.path(c.run), lambda rec: rec.update(method=other))
    write_manifests(c.root)
    return {(c.run, "schema")}


def eval_accuracy_above_one(c: Copy) -> set:
    _edit_json(c.path(c.eval), lambda rec: rec.update(paper=1.5))
    write_manifests(c.root)
    return {(c.eval, "schema")}


def eval_paper_not_its_best_epoch(c: Copy) -> set:
    _edit_json(c.path(c.eval), lambda rec: rec.update(paper=rec["paper"] / 2))
    write_manifests(c.root)
    return {(c.eval, "schema")}


def dpsgd_accuracy_as_string(c: Copy) -> set:
    _edit_json(c.path(c.seed), lambda rec: rec.update(best=str(rec["best"])))
    write_manifests(c.root)
    return {(c.seed, "schema")}


def record_not_json(c: Copy) -> set:
    p = c.path(c.eval)
    p.write_text(p.read_text()[:-10])
    write_manifests(c.root)
    return {(c.eval, "json")}


def record_of_no_known_kind(c: Copy) -> set:
    extra = str(Path(c.eval).with_name("notes.json"))
    c.path(extra).write_text("{}")
    write_manifests(c.root)
    return {(extra, "schema")}


def flip_npz_byte(c: Copy) -> set:
    p = c.path(c.npz)
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    return {(c.npz, "checksum"), (c.npz, "samples")}


def delete_npz(c: Copy) -> set:
    c.path(c.npz).unlink()
    write_manifests(c.root)
    return {(c.npz, "samples")}


def unpublished_npz(c: Copy) -> set:
    extra = str(Path(c.npz).with_name("samples-extra.npz"))
    shutil.copy(c.path(c.npz), c.path(extra))
    write_manifests(c.root)
    return {(extra, "samples")}


def images_outside_unit_interval(c: Copy) -> set:
    x, y = _subset(c)
    _republish(c, x.astype(np.float32) / 255.0 * 2.0, y)
    return {(c.npz, "samples")}


def one_label_fewer(c: Copy) -> set:
    x, y = _subset(c)
    _republish(c, x, y[:-1])
    return {(c.npz, "samples")}


def label_out_of_range(c: Copy) -> set:
    x, y = _subset(c)
    y = y.astype(np.int64)
    y[0] = 10
    _republish(c, x, y)
    return {(c.npz, "samples")}


def images_of_another_shape(c: Copy) -> set:
    x, y = _subset(c)
    _republish(c, x.reshape(len(x), 1, 2, -1), y)
    return {(c.npz, "samples")}


TAMPERS = [flip_csv_byte, delete_csv, add_unlisted_csv, flip_record_byte, delete_record,
           add_unlisted_record, unlist_record, garble_manifest_line, run_without_config,
           run_status_running, run_of_another_method, eval_accuracy_above_one,
           eval_paper_not_its_best_epoch, dpsgd_accuracy_as_string, record_not_json,
           record_of_no_known_kind, flip_npz_byte, delete_npz, unpublished_npz,
           images_outside_unit_interval, one_label_fewer, label_out_of_range,
           images_of_another_shape]


@pytest.mark.parametrize("tamper", TAMPERS, ids=lambda t: t.__name__)
def test_each_tampering_is_reported_with_its_path(copy: Copy, tamper: Callable[[Copy], set],
                                                  capsys: pytest.CaptureFixture[str]):
    expected = tamper(copy)
    problems = verify(copy.root)
    assert {(p.path, p.check) for p in problems} == expected, "\n".join(map(str, problems))
    capsys.readouterr()
    assert main_verify(copy.root) == 1
    lines = capsys.readouterr().out.splitlines()
    for path, _ in expected:
        assert any(line.startswith(f"{path}: ") for line in lines), lines
    assert main_verify(copy.root, as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"]
    assert {(p["path"], p["check"]) for p in report["problems"]} == expected


def test_a_valid_float_subset_passes_the_content_check(copy: Copy):
    """Only what breaks the format is reported: the same subset as float16 in [0, 1]."""
    x, y = _subset(copy)
    _republish(copy, (x / 255.0).astype(np.float16), y.astype(np.int64))
    assert verify(copy.root) == []


def test_update_rewrites_the_manifests(copy: Copy, capsys: pytest.CaptureFixture[str]):
    extra = add_unlisted_record(copy).pop()[0]
    assert main_verify(copy.root, update=True) == 0
    listed = copy.path(f"{RESULTS}/{MANIFEST}").read_text()
    assert f"  {extra.removeprefix(RESULTS + '/')}\n" in listed
    assert f"wrote {RESULTS}/{MANIFEST}" in capsys.readouterr().out
    # a schema problem survives the update: the manifests vouch for bytes, not for content
    run_status_running(copy)
    assert main_verify(copy.root, update=True) == 1


def test_manifests_are_sha256sum_files(copy: Copy):
    paths = write_manifests(copy.root)
    assert [p.relative_to(copy.root).as_posix() for p in paths] == [
        f"data/paper/{MANIFEST}", f"{RESULTS}/{MANIFEST}"]
    lines = paths[0].read_text().splitlines()
    assert lines == sorted(lines, key=lambda x: x.split("  ")[1])
    assert all(re.fullmatch(r"[0-9a-f]{64}  tab_\w+\.csv|[0-9a-f]{64}  artifacts\.csv", x)
               for x in lines)
    assert len(lines) == len(list(copy.path("data/paper").glob("*.csv")))


def test_a_missing_manifest_is_reported(copy: Copy):
    copy.path(f"data/paper/{MANIFEST}").unlink()
    assert [(p.path, p.check) for p in verify(copy.root)] == [
        (f"data/paper/{MANIFEST}", "checksum")]


def test_schema_rules():
    """Each committed kind has a rule; a missing parent key is reported once."""
    assert record_kind("datalens/mnist-eps1/paper/run.json") == "run"
    assert record_kind("datalens/mnist-eps1/paper/snapshot-eps0.2-eval-30ep.json") == "eval"
    assert record_kind("dpsgd/mnist/gmdp-eps1/paper/seed3.json") == "dpsgd-seed"
    assert record_kind("dpsgd/mnist/gmdp-eps1/search/point12.json") == "dpsgd-point"
    assert record_kind("reference/mnist/eval-30ep.json") == "eval"
    assert record_kind("datalens/mnist-eps1/paper/notes.json") is None
    assert set(RECORD_SCHEMAS) >= {"run", "snapshots", "eval", "quality", "dpsgd-seed",
                                   "dpsgd-summary"}
    rec = json.loads((ROOT / RESULTS / "reference/mnist").glob("eval-*.json").__next__()
                     .read_text())
    assert schema_errors("reference/mnist/eval-30ep.json", rec) == []
    assert schema_errors("reference/mnist/eval-30ep.json", [rec]) == [
        "the eval record must be a JSON object, got list"]
    run = json.loads(next(iter(sorted((ROOT / RESULTS / "datalens").glob("*/*/run.json"))))
                     .read_text())
    del run["config"]
    assert schema_errors("datalens/x/y/run.json", run) == ["no 'config' (object)"]
    run["config"] = {"dataset": "svhn"}
    assert schema_errors("datalens/x/y/run.json", run) == [
        "'config.dataset' should be dataset, got \"svhn\""]
