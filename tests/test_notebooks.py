"""The notebooks as a user meets them: real ``.ipynb`` files paired with their jupytext
scripts, opened by a JupyterLab server, executed by plain ``papermill`` from any directory,
and a parameter grid's executions kept apart from each other and from the book's."""

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import jupytext
import pytest
from conftest import NOTEBOOK_GROUP, require_datasets

from datalens_lib import runner
from datalens_lib.provenance import REPO_ROOT

NB_DIR = REPO_ROOT / "notebooks"
BIN = Path(sys.executable).parent


def _cells(nb) -> list[tuple[str, str, list]]:
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", [])))
            for c in nb.cells]


def test_every_notebook_is_an_ipynb_paired_with_its_script_and_in_sync():
    """Fails when one side of a pair was edited without ``make sync-notebooks``."""
    ipynbs = {p.stem for p in NB_DIR.glob("*.ipynb")}
    scripts = {p.stem for p in NB_DIR.glob("*.py")}
    assert ipynbs == scripts == set(runner.NOTEBOOKS)
    for name in sorted(ipynbs):
        raw = json.loads((NB_DIR / f"{name}.ipynb").read_text())
        assert raw["metadata"]["jupytext"]["formats"] == "ipynb,py:percent", name
        assert raw["metadata"]["kernelspec"]["name"] == "python3", name
        for cell in raw["cells"]:  # committed stripped: no outputs, no execution counts
            assert cell.get("outputs", []) == [] and cell.get("execution_count") is None, name
        nb, py = jupytext.read(NB_DIR / f"{name}.ipynb"), jupytext.read(NB_DIR / f"{name}.py")
        assert _cells(nb) == _cells(py), f"{name}: out of sync, run `make sync-notebooks`"
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1 and 'profile = "smoke"' in params[0].source, name


def test_sync_check_catches_an_edited_script(tmp_path):
    """The check above can fail: an edit to one side shows up as a difference."""
    shutil.copy(NB_DIR / "status.ipynb", tmp_path / "status.ipynb")
    text = (NB_DIR / "status.py").read_text().replace("seed = 0", "seed = 1")
    (tmp_path / "status.py").write_text(text)
    assert _cells(jupytext.read(tmp_path / "status.ipynb")) != \
        _cells(jupytext.read(tmp_path / "status.py"))


def test_the_pinned_stack_is_the_same_in_pyproject_and_environment_yml():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = list(pyproject["dependencies"])
    for extra in ("book", "dev", "mutation"):
        pins += [p for p in pyproject["optional-dependencies"][extra] if "==" in p]
    env = (REPO_ROOT / "environment.yml").read_text()
    env_pins = set(re.findall(r"^\s+- ([A-Za-z0-9_.\-]+==[^\s#]+)", env, re.M))
    want = {p.split(";")[0].strip() for p in pins}
    assert want == env_pins, (want ^ env_pins)
    assert "jupyterlab==" in env and "submitit==" in env


def test_grid_executions_never_overwrite_each_other_or_the_book(tmp_path, monkeypatch):
    monkeypatch.setenv("DATALENS_RESULTS_ROOT", str(tmp_path / "root"))
    src = tmp_path / "tiny.py"
    src.write_text('# %% tags=["parameters"]\nx = 1\n# %%\nprint("x is", x)\n')
    a = runner.run_notebook(src, {"x": 1})
    b = runner.run_notebook(src, {"x": 2})
    assert a["status"] == b["status"] == "ok" and a["output"] != b["output"]
    for r, x in ((a, 1), (b, 2)):
        p = Path(r["output"])
        assert p.parent == tmp_path / "root" / "notebooks" and p.name.startswith("tiny-")
        assert f"x is {x}" in p.read_text()
    assert runner.run_notebook(src, {"x": 1})["status"] == "skipped"
    assert runner.is_up_to_date(src, {"x": 2}) and not runner.is_up_to_date(src, {"x": 3})
    assert not runner.is_up_to_date(src, {"x": 1}, canonical=True)  # the book's is separate
    book = runner.run_notebook(src, {"x": 3}, canonical=True, output_dir=tmp_path / "book")
    assert book["output"] == str(tmp_path / "book" / "tiny.ipynb")


#: what the papermill and JupyterLab tests execute: the cheapest notebook that trains (9 s at
#: smoke); every notebook's own content is checked by test_run_all (test_scaleout.py)
CHEAP_NOTEBOOK = "f1_dependent_bound"


def _papermill(cwd: Path, out: Path, env: dict) -> subprocess.CompletedProcess:
    nb = os.path.relpath(NB_DIR / f"{CHEAP_NOTEBOOK}.ipynb", cwd)
    return subprocess.run([str(BIN / "papermill"), nb, str(out), "-p", "profile", "smoke"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
@pytest.mark.xdist_group(NOTEBOOK_GROUP)
def test_plain_papermill_runs_a_notebook_from_the_root_and_from_elsewhere(tmp_path):
    """`papermill notebooks/<name>.ipynb out.ipynb -p profile smoke` as the README says
    (there with T1), from the repository root and from an unrelated directory (where the
    relative path to the notebook differs). The run cache is the checkout's, so `make book`
    reuses it."""
    require_datasets("mnist", "fashion-mnist")  # T1 trains on both
    env = {**os.environ, "PYTHONPATH": ""}
    for cwd in (REPO_ROOT, tmp_path):
        out = tmp_path / f"out-{cwd == REPO_ROOT}.ipynb"
        done = _papermill(cwd, out, env)
        assert done.returncode == 0, done.stderr[-3000:]
        nb = json.loads(out.read_text())
        assert nb["metadata"]["papermill"]["parameters"] == {"profile": "smoke"}
        text = json.dumps(nb["cells"])
        assert "mnist-eps1" in text and "Traceback" not in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str, method: str = "GET", body: dict | None = None):
    req = urllib.request.Request(url, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"token {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, (json.loads(r.read() or b"null"))


@pytest.mark.slow
@pytest.mark.xdist_group(NOTEBOOK_GROUP)
def test_jupyterlab_serves_opens_and_runs_the_notebooks(tmp_path):
    """`jupyter lab notebooks/` from the README: the server starts on loopback, lists the
    notebooks, opens an ``.ipynb`` and (through jupytext's contents manager) a paired script
    as a notebook, starts the default kernel; a notebook then executes headlessly in that
    same kernel spec."""
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"), "JUPYTERLAB_SETTINGS_DIR":
           str(tmp_path / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws")}
    server = subprocess.Popen(
        [str(BIN / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO_ROOT}",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        # until the server answers, however long a loaded machine takes to start it; it
        # failing to start ends the wait (the cap of 30 min only prevents a hang)
        for _ in range(3600):
            try:
                if _get(f"{base}/api/status", token)[0] == 200:
                    break
            except OSError:
                if server.poll() is not None:
                    pytest.fail(f"jupyter lab exited ({server.returncode}): "
                                f"{server.stderr.read()[-2000:]}")
                time.sleep(0.5)
        else:
            pytest.fail("jupyter lab did not answer")
        status, lab = urllib.request.urlopen(f"{base}/lab?token={token}", timeout=30).status, 1
        assert status == 200 and lab
        _, listing = _get(f"{base}/api/contents/notebooks", token)
        names = {c["name"] for c in listing["content"]}
        assert {f"{n}.ipynb" for n in runner.NOTEBOOKS} <= names
        _, nb = _get(f"{base}/api/contents/notebooks/t1_main_utility.ipynb?content=1", token)
        assert nb["type"] == "notebook" and nb["content"]["cells"]
        _, paired = _get(f"{base}/api/contents/notebooks/t1_main_utility.py?content=1", token)
        assert paired["type"] == "notebook"  # jupytext's contents manager is active
        _, specs = _get(f"{base}/api/kernelspecs", token)
        default = specs["default"]
        assert default in specs["kernelspecs"]
        _, kernel = _get(f"{base}/api/kernels", token, "POST", {"name": default})
        assert kernel["name"] == default
        _get(f"{base}/api/kernels/{kernel['id']}", token, "DELETE")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    assert server.returncode is not None
    # headless, in the kernel spec the server offered (its smoke runs read MNIST)
    require_datasets("mnist")
    r = runner.run_notebook(CHEAP_NOTEBOOK, {"profile": "smoke"}, kernel=default,
                            output_dir=tmp_path / "exec")
    assert r["status"] == "ok", r.get("error")
    done = json.loads(Path(r["output"]).read_text())
    assert done["metadata"]["kernelspec"]["name"] == default


def test_the_book_build_skips_a_killed_executions_partial_notebook():
    """``runner.run_notebook`` writes an execution to a hidden ``.<name>.*.ipynb`` beside its
    output and renames it when done; a kill in between leaves that partial file in
    book/notebooks, where the book's strict build (``-W``) would read it as a page outside the
    table of contents and fail. The config's exclude patterns must skip hidden files at every
    depth (Sphinx's own matcher decides), and never the book's pages."""
    import yaml
    from sphinx.util.matching import Matcher

    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text())
    excluded = Matcher(config["exclude_patterns"])
    assert excluded("book/notebooks/.t4_hyperparameters.02etvgk8.ipynb")
    assert excluded(".t1_main_utility.x1.ipynb")
    assert not excluded("book/notebooks/t4_hyperparameters.ipynb")
    assert not excluded("book/intro.md")
