"""Mutation-testing report from mutmut's results (issue 15): score per module, every surviving
mutant with its one-line diff, and the mutants excluded as equivalent with the reason.

Run after ``mutmut run`` (see ``tests/README.md``)::

    python scripts/mutation_report.py [--out tests/mutation-report.md] [--json FILE]

Reads ``mutants/**/*.meta`` (mutmut 3's per-file results: exit code per mutant) and the
mutated sources next to them (functions ``x_<name>__mutmut_<n>`` beside ``..._orig``), and
``tests/mutation-equivalent.txt`` (``<mutant name>  # reason``, one per line). Hand-written
because mutmut prints counts for the whole run only, not per module, and has no notion of an
equivalent mutant.

Score = killed / (mutants - equivalent - not checked), where timeouts count as killed (the test
run does not finish, so CI would fail) and mutants no test reaches count as survivors. With
``--sample FILE`` (mutant names, one per line, as given to ``mutmut run``) the report keeps
only those mutants of the modules the file samples, and gives a Wilson 95 % interval for each
sampled module: a uniform random sample of a module's mutants estimates its score.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = ROOT / "tests" / "mutation-equivalent.txt"

# mutmut 3.8's exit-code meanings (mutmut.stats.status_by_exit_code)
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
          36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
          -11: "segfault", -9: "segfault", None: "not checked", 2: "interrupted",
          34: "skipped", 37: "type check"}
KILLED = {"killed", "timeout", "segfault"}


def load_equivalent(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition("#")
                out[name.strip()] = reason.strip()
    return out


def _functions(source: str) -> dict[str, str]:
    """Every function defined at module level or in a class body (mutmut puts a method's
    mutants in its class), by name."""
    lines = source.splitlines()  # (ast.get_source_segment re-splits the file on every call)
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.setdefault(node.name, "\n".join(lines[node.lineno - 1: node.end_lineno]))
    return out


def mutant_diff(funcs: dict[str, str], key: str) -> str:
    """The changed lines of mutant ``key`` against its original, '-old' / '+new'."""
    fname = key.rsplit(".", 1)[1]
    orig = fname.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
    a, b = funcs.get(orig, ""), funcs.get(fname, "").replace(fname, orig, 1)
    a_lines, b_lines = a.splitlines(), b.splitlines()
    diff = [d for d in difflib.unified_diff(a_lines, b_lines, lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    return " | ".join(d[0] + d[1:].strip() for d in diff)


def collect(mutants_dir: Path) -> list[dict]:
    rows = []
    for meta in sorted(mutants_dir.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        if not codes:
            continue
        src = meta.with_suffix("")
        funcs = _functions(src.read_text())
        module = str(src.relative_to(mutants_dir))
        for key, code in codes.items():
            rows.append({"module": module, "mutant": key, "status": STATUS.get(code, "suspicious"),
                         "diff": mutant_diff(funcs, key)})
    return rows


def apply_sample(rows: list[dict], sample: set[str]) -> tuple[list[dict], set[str]]:
    """Keep, in every module with a name in ``sample``, only the sampled mutants."""
    sampled = {r["module"] for r in rows if r["mutant"] in sample}
    kept = [r for r in rows if r["module"] not in sampled or r["mutant"] in sample]
    # a module every one of whose mutants is in the sample is complete, not sampled
    total = Counter(r["module"] for r in rows)
    return kept, {m for m in sampled if sum(r["module"] == m for r in kept) < total[m]}


def summarise(rows: list[dict], equivalent: dict[str, str],
              sampled: set[str] = frozenset()) -> tuple[list[dict], dict]:
    per: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        if r["mutant"] in equivalent:
            r["status"] = "equivalent"
        per[r["module"]][r["status"]] += 1
    table = []
    total = Counter()
    for module, c in sorted(per.items()):
        total.update(c)
        table.append(_score_row(module, c, module in sampled))
    # the total mixes complete and sampled modules: a plain sum, without an interval
    return table, _score_row("all", total)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k / n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def _score_row(name: str, c: Counter, sampled: bool = False) -> dict:
    n = sum(c.values())
    killed = sum(c[s] for s in KILLED)
    eq = c["equivalent"]
    not_checked = c["not checked"]
    denom = n - eq - not_checked
    return {"module": name, "mutants": n, "killed": killed, "survived": c["survived"],
            "no_tests": c["no tests"], "equivalent": eq, "not_checked": not_checked,
            "score": killed / denom if denom else None,
            "ci95": wilson(killed, denom) if sampled and denom else None}


def render(table: list[dict], total: dict, rows: list[dict], equivalent: dict[str, str],
           title: str) -> str:
    lines = [f"# {title}", "",
             "Score = killed (timeouts included) / (mutants - equivalent - not checked).", "",
             "| module | mutants | killed | survived | no test reaches it | equivalent | "
             "not checked | score |", "|---|---|---|---|---|---|---|---|"]
    for r in [*table, total]:
        score = "-" if r["score"] is None else f"{100 * r['score']:.1f} %"
        if r["ci95"] is not None:
            score += f" (sample; 95 % CI {100 * r['ci95'][0]:.1f}-{100 * r['ci95'][1]:.1f})"
        lines.append(f"| {r['module']} | {r['mutants']} | {r['killed']} | {r['survived']} | "
                     f"{r['no_tests']} | {r['equivalent']} | {r['not_checked']} | {score} |")
    surv = [r for r in rows if r["status"] in ("survived", "no tests", "suspicious")]
    lines += ["", f"## Surviving mutants ({len(surv)})", ""]
    for r in surv:
        lines.append(f"- `{r['mutant']}` ({r['status']}): `{r['diff']}`")
    eq = [r for r in rows if r["status"] == "equivalent"]
    lines += ["", f"## Excluded as equivalent ({len(eq)})", ""]
    for r in eq:
        lines.append(f"- `{r['mutant']}`: `{r['diff']}` -- {equivalent[r['mutant']]}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=Path, default=ROOT / "mutants")
    ap.add_argument("--out", type=Path, default=None, help="markdown report to write")
    ap.add_argument("--json", type=Path, default=None, help="per-mutant statuses as JSON")
    ap.add_argument("--title", default="Mutation-testing report")
    ap.add_argument("--equivalent", type=Path, default=EQUIVALENT_FILE,
                    help="equivalent mutants with reasons (default: %(default)s)")
    ap.add_argument("--sample", type=Path, default=None,
                    help="mutant names (one per line): report only these in the modules they "
                         "sample")
    ap.add_argument("--preamble", type=Path, default=None,
                    help="markdown inserted after the title (how the run was made)")
    args = ap.parse_args(argv)
    if not args.mutants.is_dir():
        print(f"no {args.mutants}: run `mutmut run` first", file=sys.stderr)
        return 2
    equivalent = load_equivalent(args.equivalent)
    rows = collect(args.mutants)
    sampled: set[str] = set()
    if args.sample:
        rows, sampled = apply_sample(rows, set(args.sample.read_text().split()))
    table, total = summarise(rows, equivalent, sampled)
    text = render(table, total, rows, equivalent, args.title)
    if args.preamble:
        head, _, rest = text.partition("\n\n")
        text = f"{head}\n\n{args.preamble.read_text().strip()}\n\n{rest}"
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"modules": table, "total": total, "mutants": rows},
                                        indent=1))
    for r in [*table, total]:
        score = "-" if r["score"] is None else f"{100 * r['score']:.1f}%"
        print(f"{r['module']:45s} {r['mutants']:5d} killed {r['killed']:5d} "
              f"survived {r['survived']:4d} no-test {r['no_tests']:4d} eq {r['equivalent']:3d} "
              f"unchecked {r['not_checked']:4d}  {score}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
