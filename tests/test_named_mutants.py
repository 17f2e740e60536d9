"""scripts/named_mutants.py names realistic one-line bugs as literal (old, new) replacements;
a refactor that moves the code would leave a bug that no longer applies (three had, by
2026-12-01, unnoticed until the script was run). Each ``old`` must still occur exactly once
in its file, differ from ``new``, and the bug must parse."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_named_bug_still_applies_to_the_library():
    spec = importlib.util.spec_from_file_location("named_mutants",
                                                  ROOT / "scripts" / "named_mutants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert len(mod.BUGS) >= 30
    stale = {name: (ROOT / file).read_text().count(old)
             for name, (file, old, new) in mod.BUGS.items()
             if (ROOT / file).read_text().count(old) != 1 or old == new}
    assert not stale, f"named bugs whose code moved (occurrences): {stale}"
    # a bug that does not parse would be "caught" by any test run: no bug at all
    for name, (file, old, new) in mod.BUGS.items():
        compile((ROOT / file).read_text().replace(old, new), f"{file} ({name})", "exec")
