"""Command-line entry point ``datalens``.

Subcommands:
  data list | check [NAME...] | fetch NAME [--dest DIR] | ensure [NAME...] [--no-fetch]
  privacy --k K --sigma S --delta D (--epsilon E | --queries T) [--json]
  privacy --k K --delta D --epsilon E --queries T [--json]   (sigma for a target)
  train [--method datalens|dcgan|gpate|dpgan] --config NAME --profile smoke|cpu|paper --out DIR
        [--resume] [--device auto|cpu|cuda] [--seed S] [--set KEY=VALUE]...
  evaluate RUN_DIR [--protocol paper|clean] [--epochs N] [--device ...]
  evaluate FILE.npz --dataset D [--epochs N]      any images+labels, the same protocol
  quality (RUN_DIR | FILE.npz --dataset D) [--inception-weights PTH]   IS / FID
  publish-samples RUN_DIR --dest DIR [--n 10000]  a uint8 subset beside committed records
  domain-classifier --dataset D                   train the IS/FID network
  dpsgd --dataset mnist --epsilon E --k K --method normtopk|dimtopk|gmdp|sgd --seeds N
        [--profile smoke|cpu|paper] [--control]
        [--search DIR [--validation 10000]]
  dpsgd --epsilon 0.3,0.5,0.7 --search DIR/{cell}/search --out DIR/{cell}/paper ...
        several budgets, each run trained once for every budget it passes through
  verify [--update] [--json]   committed records and paper CSVs against their checksums
  results [--json]        every method's committed runs beside the paper's tab:image numbers
  run NOTEBOOK [-p KEY VALUE]... [--force] [--book]   execute one notebook with papermill
  run-all [--profile smoke|cpu|paper] [--force] [--executor local|slurm ...]
  sweep (--notebook NAME | --method M --config C) --grid KEY=V1,V2 ... [--executor ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

# Transparent huge pages for PyTorch's CPU allocator: measured -27% time per teacher step on
# the 2-core CI machine. Must be set before torch allocates; a user's own setting wins.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from . import data as data_mod
from . import privacy
from .config import PROFILES


def _cmd_data(args: argparse.Namespace) -> int:
    if args.data_cmd == "list":
        for name, spec in data_mod.REGISTRY.items():
            try:
                where = str(data_mod.resolve_dataset_dir(name))
            except data_mod.DatasetNotFoundError:
                where = "not found (see `datalens data check " + name + "`)"
            c, h, w = spec.shape
            print(f"{name:14s} {h}x{w}x{c}  {spec.num_classes:2d} classes  {where}")
        return 0
    if args.data_cmd == "check":
        names = args.names or list(data_mod.REGISTRY)
        unknown = [n for n in names if n not in data_mod.REGISTRY]
        if unknown:
            print(f"error: unknown dataset {unknown[0]!r}; known: "
                  f"{', '.join(data_mod.REGISTRY)}", file=sys.stderr)
            return 2
        failed = 0
        for name in names:
            try:
                ds = data_mod.load_dataset(name)
            except (data_mod.DatasetNotFoundError, data_mod.DatasetFileError, ValueError) as e:
                failed += 1
                print(f"[missing] {name}: {e}", file=sys.stderr)
                continue
            print(f"[ok] {name}: train {ds.x_train.shape}, test {ds.x_test.shape}, "
                  f"from {ds.source}")
        return 1 if failed and args.names else 0
    if args.data_cmd == "fetch":
        try:
            folder = data_mod.fetch_dataset(args.name, args.dest)
        except (data_mod.DatasetNotFoundError, data_mod.DatasetFileError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"{args.name} is in {folder}")
        return 0
    if args.data_cmd == "ensure":
        for name in args.names:
            try:
                folder = data_mod.ensure_dataset(name, fetch=not args.no_fetch)
            except (data_mod.DatasetNotFoundError, data_mod.DatasetFileError, ValueError) as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            print(f"[ok] {name}: {folder} (checksums verified)")
        return 0
    raise AssertionError(args.data_cmd)


def _cmd_verify(args: argparse.Namespace) -> int:
    from .verify import REPO_ROOT, main_verify

    return main_verify(REPO_ROOT, update=args.update, as_json=args.json)


def _cmd_privacy(args: argparse.Namespace) -> int:
    convs = [args.conversion] if args.conversion else list(privacy.CONVERSIONS)
    try:
        if args.sigma is None:
            if args.queries is None or args.epsilon is None:
                raise ValueError("without --sigma, give both --queries and --epsilon "
                                 "to get the sigma they need")
            what = "sigma"
            out = {c: privacy.topagg_sigma_for_queries(args.queries, args.epsilon, args.k,
                                                       args.delta, c) for c in convs}
        elif args.queries is not None:
            if args.epsilon is not None:
                raise ValueError("with --sigma, give --queries (epsilon spent) or --epsilon "
                                 "(max queries), not both")
            what = "epsilon"
            out = {c: privacy.topagg_epsilon(args.queries, args.k, args.sigma, args.delta, c)
                   for c in convs}
        elif args.epsilon is not None:
            what = "max_queries"
            out = {c: privacy.topagg_max_queries(args.epsilon, args.k, args.sigma, args.delta, c)
                   for c in convs}
        else:
            raise ValueError("give --epsilon (max queries) or --queries (epsilon spent)")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
    else:
        print(f"TopAgg, k={args.k}, sigma={args.sigma}, delta={args.delta}: {what} "
              f"(sensitivity 2*sqrt(k), Gaussian RDP)")
        for c, v in out.items():
            print(f"  {c:6s} {v}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from .config import load_config
    from .methods import method_class
    from .methods.harness import SNAPSHOTS_RECORD, Run, check_prefix_reference, prefix_summary

    try:
        overrides = _parse_sets(args.set)
        from ._validate import nonneg_int

        nonneg_int("--seed", args.seed)
        nonneg_int("--checkpoint-every", args.checkpoint_every)
        for b in args.snapshot_budgets or ():
            if not (math.isfinite(b) and b > 0):
                raise ValueError(f"--snapshot-budgets must be positive and finite, got {b}")
        cls = method_class(args.method)
        cfg = load_config(args.config, args.profile, method=args.method, **overrides)
        reference = None
        if args.prefix_of is not None:
            if not args.until_last_snapshot:
                raise ValueError("--prefix-of needs --until-last-snapshot")
            ref = Path(args.prefix_of)
            ref = ref / "run.json" if ref.is_dir() else ref
            reference = json.loads(ref.read_text())
            # before the method allocates anything (a paper-size ensemble: ~18 GB)
            check_prefix_reference(reference, args.method, cfg, args.seed, args.profile)
        if args.until_last_snapshot and not args.snapshot_budgets:
            raise ValueError("--until-last-snapshot needs --snapshot-budgets")
        method = cls(cfg, seed=args.seed, device=args.device, profile=args.profile)
        rec = Run(method, args.out, checkpoint_every=args.checkpoint_every,
                  snapshot_budgets=tuple(args.snapshot_budgets or ()),
                  until_last_snapshot=args.until_last_snapshot,
                  prefix_of=reference,
                  prefix_of_path=None if reference is None else str(ref)).run(
                      resume=args.resume)
    except (ValueError, FileExistsError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if rec["status"] == "snapshots":
        taken = ", ".join(f"eps {s['budget']:g} (step {s['step']})" for s in rec["snapshots"]
                          if "step" in s) or "none"
        check = rec.get("prefix_of")
        same = "" if check is None else (
            f"; the {check['rows_compared']} steps trained again are the reference run's own"
            if check["identical"] else
            f"; WARNING: not shown to be the reference run's steps: {prefix_summary(check)}")
        print(f"done: {rec['method']}, stopped at its last snapshot after {rec['steps']} "
              f"steps; snapshots {taken}{same}; results in {args.out}/{SNAPSHOTS_RECORD}")
        return 0
    eps = ", ".join(f"{k} {v:.4f}" for k, v in rec["epsilon"].items()) or "none (non-private)"
    queries = f", {rec['queries']} queries" if "queries" in rec else ""
    print(f"done: {rec['method']}, {rec['steps']} steps{queries}, epsilon: {eps}; "
          f"{rec['timings']['train_seconds']:.0f} s; results in {args.out}")
    return 0


def _evaluate_file(args: argparse.Namespace) -> int:
    """``datalens evaluate FILE.npz --dataset D``: any user file, the paper protocol."""
    from .datalens import resolve_device
    from .evaluate import evaluate_samples
    from .provenance import atomic_write_json, provenance

    path = Path(args.run)
    if not args.dataset:
        print("error: evaluating a sample file needs --dataset", file=sys.stderr)
        return 2
    epochs = 600 if args.epochs is None else args.epochs
    lr = 2e-3 if args.lr is None else args.lr
    try:
        res = evaluate_samples(path, args.dataset, epochs=epochs, lr=lr,
                               batch_size=args.batch_size, seed=args.seed,
                               device=str(resolve_device(args.device)), limit=args.limit,
                               pad_to=args.pad_to, dropout_rng=args.dropout_rng)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res.update(provenance())
    variant = _eval_variant(lr, 2e-3, args.limit, args.seed, args.pad_to, args.dropout_rng)
    out = path.parent / (args.name or f"{path.stem}-eval-{epochs}ep{variant}.json")
    atomic_write_json(out, res)
    print(f"test accuracy: paper protocol (max over epochs) {res['paper']:.4f}, clean protocol "
          f"(after {epochs} epochs) {res['clean']:.4f}; record {out}")
    return 0


def _eval_variant(lr: float, default_lr: float, limit: int | None, seed: int,
                  pad_to: int | None = None, dropout_rng: str | None = None) -> str:
    """The record-name suffix of an evaluation variant (another lr, a first-N limit, zero-row
    padding, another classifier seed, dropout masks named explicitly): a variant never takes
    the name of the default evaluation's record."""
    return ((f"-lr{lr:g}" if lr != default_lr else "")
            + (f"-first{limit}" if limit is not None else "")
            + (f"-padto{pad_to}" if pad_to is not None else "")
            + (f"-dropout{dropout_rng}" if dropout_rng is not None else "")
            + (f"-seed{seed}" if seed != 0 else ""))


def _check_eval_args(args: argparse.Namespace) -> None:
    """``datalens evaluate``'s numbers, each named in its error (None: the config's)."""
    from ._validate import nonneg_int, positive_float, positive_int

    for name, check in (("epochs", positive_int), ("lr", positive_float),
                        ("limit", positive_int), ("seed", nonneg_int), ("pad_to", positive_int),
                        ("batch_size", positive_int)):
        value = getattr(args, name, None)
        if value is not None:
            check(f"--{name.replace('_', '-')}", value)
    from .datalens import resolve_device

    resolve_device(args.device)  # (an unknown device: its error, before any data is read)
    if args.run.endswith(".npz") and not Path(args.run).is_file():
        raise ValueError(f"no sample file at {args.run}")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluate import evaluate_samples
    from .provenance import atomic_write_json, provenance

    try:
        _check_eval_args(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.run.endswith(".npz"):
        return _evaluate_file(args)
    from .methods.harness import SNAPSHOTS_RECORD

    run_dir = Path(args.run)
    # a run stopped at its last snapshot (train --until-last-snapshot) has only its snapshots
    record = "run.json"
    if not (run_dir / record).exists() and (run_dir / SNAPSHOTS_RECORD).exists():
        record = SNAPSHOTS_RECORD
        if args.snapshot is None:
            print(f"error: {run_dir} holds only the snapshots of a run stopped at its last "
                  f"snapshot ({SNAPSHOTS_RECORD}): pass --snapshot EPS", file=sys.stderr)
            return 2
    from .records import RecordError, read_record

    try:
        rec = read_record(run_dir / record, need_config=(
            "dataset", "eval_epochs", "eval_lr", "eval_batch_size"))
    except FileNotFoundError:
        print(f"error: {run_dir}/run.json not found: is the training run complete?",
              file=sys.stderr)
        return 2
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cfg = rec["config"]
    epochs = cfg["eval_epochs"] if args.epochs is None else args.epochs
    if args.snapshot is not None:
        snaps = {s["budget"]: s for s in rec.get("snapshots", []) if "samples" in s}
        if args.snapshot not in snaps:
            print(f"error: no snapshot at budget {args.snapshot} in {run_dir}/{record}; it has "
                  f"{sorted(snaps) or 'none'}", file=sys.stderr)
            return 2
        samples, prefix = snaps[args.snapshot]["samples"], f"snapshot-eps{args.snapshot:g}-"
    else:
        try:
            _, path = _run_samples(run_dir)
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        # a published subset gets its own record name: never overwrite the full run's
        # evaluation
        samples = path.name
        prefix = "" if samples == rec["samples"]["file"] else f"{path.stem}-"
    from .datalens import resolve_device

    device = str(resolve_device(args.device))
    lr = cfg["eval_lr"] if args.lr is None else args.lr
    try:
        res = evaluate_samples(run_dir / samples, cfg["dataset"], epochs=epochs,
                               lr=lr, batch_size=cfg["eval_batch_size"], seed=args.seed,
                               device=device, limit=args.limit, pad_to=args.pad_to,
                               dropout_rng=args.dropout_rng,
                               test_limit=cfg.get("eval_test_limit"))
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res.update(provenance())
    if (epochs < cfg["eval_epochs"] and lr == cfg["eval_lr"] and args.limit is None
            and args.pad_to is None):
        # say, from committed full-length runs, what the shorter schedule costs
        from .book import schedule_check

        res["schedule_check"] = schedule_check(cfg, epochs, cfg["eval_epochs"])
    if args.snapshot is not None:
        # where the snapshot was taken: a run stopped at its last snapshot records whether its
        # steps are a finished run's own (prefix_of)
        res["snapshot"] = {**snaps[args.snapshot], "record": record}
        if "prefix_of" in rec:
            res["snapshot"]["prefix_of"] = rec["prefix_of"]
    variant = _eval_variant(lr, cfg["eval_lr"], args.limit, args.seed, args.pad_to,
                            args.dropout_rng)
    name = args.name or f"{prefix}eval-{epochs}ep{variant}.json"
    atomic_write_json(run_dir / name, res)
    print(f"test accuracy: paper protocol (max over epochs) {res['paper']:.4f}, "
          f"clean protocol (after {epochs} epochs) {res['clean']:.4f}"
          + ("" if args.protocol is None else f"; {args.protocol}: {res[args.protocol]:.4f}"))
    return 0


def _run_samples(run_dir: Path) -> tuple[dict, Path]:
    """A run's record and its sample file: the full ``samples.npz`` when present, else the
    published subset named in the record."""
    from .records import read_record

    rec = read_record(run_dir / "run.json")
    full = run_dir / rec.get("samples", {}).get("file", "samples.npz")
    if full.exists():
        return rec, full
    pub = rec.get("published_samples")
    if pub and (run_dir / pub["file"]).exists():
        return rec, run_dir / pub["file"]
    raise FileNotFoundError(f"{run_dir} has neither {full.name} nor a published subset")


def _cmd_quality(args: argparse.Namespace) -> int:
    """Each target in turn (one process: the FID reference is computed once per dataset);
    stops at the first that fails."""
    from ._validate import positive_int

    if args.limit is not None:
        try:
            positive_int("--limit", args.limit)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    for target in args.target:
        rc = _quality_one(Path(target), args)
        if rc:
            return rc
    return 0


def _quality_one(target: Path, args: argparse.Namespace) -> int:
    from .provenance import atomic_write_json, provenance
    from .quality import score_images
    from .quality.classifier import SCORES_VERSION
    from .samples import load_samples, sha256_file

    try:
        if target.is_dir():
            rec, path = _run_samples(target)
            dataset = args.dataset or rec["config"]["dataset"]
        else:
            path, dataset = target, args.dataset
            if not dataset:
                print("error: scoring a sample file needs --dataset", file=sys.stderr)
                return 2
        x, y = load_samples(path)
        x, y = x[: args.limit], y[: args.limit]
        res = {"samples": path.name, "samples_sha256": sha256_file(path), "limit": args.limit,
               "scores_version": SCORES_VERSION, "dataset": dataset,
               **score_images(x, y, dataset)}
        if args.inception_weights:
            from .data import load_dataset
            from .quality.inception import inception_scores

            res["inception"] = inception_scores(x, load_dataset(dataset).x_train,
                                                weights=args.inception_weights)
    except (ValueError, FileNotFoundError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res.update(provenance())
    print(f"{path}: IS (domain classifier) {res['is']:.3f} ± {res['is_std']:.3f}, "
          f"FID (domain features) {res['fid']:.3f}, n = {res['n']}")
    if not args.no_write:
        out = (target / "quality.json") if target.is_dir() else \
            path.with_name(f"{path.stem}-quality.json")
        atomic_write_json(out, res)
    return 0


def _cmd_publish_samples(args: argparse.Namespace) -> int:
    from ._validate import nonneg_int
    from .provenance import atomic_write_json
    from .samples import publish_subset

    run_dir, dest = Path(args.run), Path(args.dest)
    try:
        nonneg_int("--seed", args.seed)
        rec, src = _run_samples(run_dir)
        name = f"samples-{args.n // 1000}k.npz" if args.n % 1000 == 0 else \
            f"samples-{args.n}.npz"
        pub = publish_subset(src, dest / name, n=args.n, seed=args.seed)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for rj in {dest / "run.json", run_dir / "run.json"}:
        if rj.exists():
            r = json.loads(rj.read_text())
            r["published_samples"] = pub
            atomic_write_json(rj, r)
    print(f"{dest / name}: {pub['n']} images, {pub['bytes'] / 1e6:.2f} MB, sha256 "
          f"{pub['sha256'][:16]}…")
    return 0


def _cmd_domain_classifier(args: argparse.Namespace) -> int:
    import torch

    from ._validate import nonneg_int, positive_int
    from .quality.classifier import WEIGHTS_DIR, save_domain_classifier, train_domain_classifier

    try:
        data_mod.get_spec(args.dataset)
        positive_int("--epochs", args.epochs)
        positive_int("--threads", args.threads)
        nonneg_int("--seed", args.seed)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    model, rec = train_domain_classifier(args.dataset, seed=args.seed, epochs=args.epochs)
    rec["command"] = " ".join(["datalens", *sys.argv[1:]])
    pt = save_domain_classifier(model, rec, args.out or WEIGHTS_DIR)
    print(f"{pt}: test accuracy {rec['test_accuracy']:.4f}")
    return 0


def _cmd_dpsgd(args: argparse.Namespace) -> int:
    """``datalens dpsgd``: the seeds of one DP-SGD cell, one record per seed (resumable at
    seed granularity: finished seeds are skipped), then their summary."""
    from .dpsgd.train import run_cell

    try:
        over = _parse_sets(args.set)
        from ._validate import nonneg_int, positive_int

        seeds = list(range(nonneg_int("--first-seed", args.first_seed),
                           args.first_seed + positive_int("--seeds", args.seeds)))
        if "," in args.epsilon:
            return _dpsgd_family(args, over, seeds)
        if args.validation is not None and not args.search:
            raise ValueError("--validation sets the held-out split of --search; give --search")
        if args.search:  # issue 13: the clean-protocol search, then the seeds with its choice
            from .dpsgd.train import run_search, searched_budgets, searched_hyperparameters

            # tab:control runs every scenario with TopAgg's setting: the search is TopAgg's
            method = "normtopk" if args.control else args.method
            if float(args.epsilon) in searched_budgets(args.dataset):
                print(f"tab:dpsgd-search gives eps = {args.epsilon}'s hyper-parameters: its "
                      f"row is used, nothing is searched"
                      + ("" if args.validation is None else
                         f" (--validation {args.validation} is not used)"))
            else:
                found = run_search(args.dataset, float(args.epsilon), method, args.k,
                                   args.profile, out=Path(args.search),
                                   validation=args.validation or 10_000,
                                   progress=not args.quiet, device=args.device, **over)
                v, t = found["selected_validation"], found["selected_test"]
                print(f"search ({len(found['grid'])} points, {found['validation']} held out): "
                      f"validation picks point {v['point']}, test would pick point "
                      f"{t['point']}")
                over = {**searched_hyperparameters(found), **over}
        if args.control:
            from .dpsgd.train import run_control

            res = run_control(args.dataset, float(args.epsilon), args.k, args.profile,
                              seeds=seeds, out=args.out, progress=not args.quiet,
                              device=args.device, **over)
            for name, summ in res.items():
                print(f"{name:12s} final {summ['final']['mean']:.4f} ± "
                      f"{summ['final']['std'] or 0:.4f} ({summ['folder']})")
            return 0
        summ = run_cell(args.dataset, float(args.epsilon), args.method, args.k, args.profile,
                        seeds=seeds, out=args.out, progress=not args.quiet,
                        device=args.device, **over)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    f, b = summ["final"], summ["best"]
    print(f"{summ['cell']} ({len(seeds)} seeds): final {f['mean']:.4f} ± {f['std'] or 0:.4f}, "
          f"best {b['mean']:.4f} ± {b['std'] or 0:.4f}; records in {summ['folder']}")
    return 0


def _dpsgd_family(args: argparse.Namespace, over: dict[str, Any], seeds: list[int]) -> int:
    """``datalens dpsgd --epsilon 0.3,0.5,0.7 --search DIR/{cell}/search --out
    DIR/{cell}/paper``: several budgets, each searched and trained as ``--search`` does for
    one, sharing the runs where one is a prefix of another (``train.run_search_family``)."""
    from .dpsgd.train import cell_name, make_config, run_search_family

    budgets = []
    for e in args.epsilon.split(","):
        try:
            budgets.append(float(e))
        except ValueError:
            raise ValueError(f"--epsilon: {e!r} is not a number") from None
    if args.control:
        raise ValueError("--control takes one budget")
    for name in ("search", "out"):
        if "{cell}" not in (getattr(args, name) or ""):
            raise ValueError(f"several budgets need --{name} with {{cell}} in it (each "
                             "budget's cell folder), e.g. runs/dpsgd/mnist/{cell}/" +
                             ("search" if name == "search" else args.profile))
    scope = over.get("scope", "flat")
    k = 1.0 if args.method in ("gmdp", "sgd") else args.k
    make_config(args.dataset, max(budgets), args.method, k, args.profile, **over)  # checks

    def folder(template: str):
        return lambda e: Path(template.replace("{cell}", cell_name(args.method, k, e, scope)))

    res = run_search_family(args.dataset, budgets, args.method, k, args.profile, seeds=seeds,
                            search_dir=folder(args.search), out_dir=folder(args.out),
                            validation=args.validation or 10_000, progress=not args.quiet,
                            device=args.device, **over)
    for e in sorted(res):
        f = res[e]["final"]
        print(f"{res[e]['cell']} ({len(seeds)} seeds): final {f['mean']:.4f} ± "
              f"{f['std'] or 0:.4f}; records in {res[e]['folder']}")
    return 0


def _cmd_reference(args: argparse.Namespace) -> int:
    from .datalens import resolve_device
    from .evaluate import evaluate_real
    from .provenance import REPO_ROOT, atomic_write_json, provenance

    out = Path(args.out or REPO_ROOT / "data" / "results" / "reference" / args.dataset)
    out.mkdir(parents=True, exist_ok=True)
    try:
        res = evaluate_real(args.dataset, epochs=args.epochs, lr=args.lr,
                            batch_size=args.batch_size, seed=args.seed,
                            device=str(resolve_device(args.device)), limit=args.limit,
                            checkpoint=out / f".eval-seed{args.seed}.ckpt")
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res.update({"what": "non-private reference: the evaluation classifier trained on the real "
                        "training set (not the paper's DC-GAN column, which trains it on "
                        "non-private DC-GAN samples)", **provenance()})
    atomic_write_json(out / f"eval-{args.epochs}ep.json", res)
    print(f"real-data test accuracy: max over epochs {res['paper']:.4f}, after {args.epochs} "
          f"epochs {res['clean']:.4f}; written to {out}")
    return 0


def _print_cells(as_json: bool) -> int:
    """``datalens results --cells``: :func:`status.cell_table` from the results store (what
    the notebooks stored when the book was last built)."""
    from .provenance import store_root
    from .results import MIN_COMPARED_EVAL_EPOCHS
    from .status import cell_table

    cells = cell_table()
    if as_json:
        print(cells.to_json(orient="records", indent=2))
        return 0
    if cells.empty:
        print(f"no paper-scale cell in the results store ({store_root()}): build the book "
              "first (make book), or run the notebooks")
        return 0
    shown = cells.drop(columns=["page"])
    for col in ("paper", "ours", "ours - paper"):
        shown[col] = [f"{v:.4g}" if v == v else "-" for v in shown[col]]
    print(shown.to_string(index=False))
    print("ours - paper only where the status page compares the cell (paper profile, float32 "
          f"Adam moments, an evaluation of at least {MIN_COMPARED_EVAL_EPOCHS} epochs, the "
          "paper's own setting and scale); the last column says why not otherwise")
    return 0


def _print_missing(as_json: bool) -> int:
    """``datalens results --missing``: :func:`status.missing_cells`, the paper's numbered cells
    without a paper-scale cell of ours in the results store, and why each is missing."""
    from .provenance import store_root
    from .status import missing_cells, missing_counts, status_table

    missing = missing_cells()
    if as_json:
        print(missing.to_json(orient="records", indent=2))
        return 0
    if missing.empty:
        print("every numbered cell of the paper has a cell of ours at paper scale")
        return 0
    shown = missing.drop(columns=["page", "note"])  # the notes are long: --json has them
    shown["paper"] = [f"{v:.4g}" if v == v else "-" for v in shown["paper"]]
    print(shown.to_string(index=False))
    print(f"{len(missing)} of the paper's cells have no cell of ours at paper scale in the "
          f"results store ({missing_counts(missing)})")
    if int(status_table()["paper cells covered"].sum()) == 0:
        print(f"no paper cell is covered: the results store ({store_root()}) may be empty; "
              "build the book first (make book), or run the notebooks")
    return 0


def _cmd_results(args: argparse.Namespace) -> int:
    from .results import MIN_COMPARED_EVAL_EPOCHS, comparison

    if args.cells and args.missing:
        print("error: --cells and --missing: give one, not both", file=sys.stderr)
        return 2
    if args.cells:
        return _print_cells(args.json)
    if args.missing:
        return _print_missing(args.json)
    rows = comparison()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    def fmt(v):
        return "   -  " if v is None else f"{v:.4f}"

    print("tab:image: test accuracy of a classifier trained on each method's synthetic data "
          "(committed main runs)")
    print(f"{'method':9s} {'dataset':14s} {'eps':>4s} {'profile':7s} {'family':6s} "
          f"{'paper':>7s} {'ours*':>7s} {'diff':>7s} {'clean':>7s}  steps  eps spent (ledger)")
    for r in rows:
        spent = ("-" if r["epsilon_spent"] is None
                 else f"{r['epsilon_spent']:.4f} ({r['ledger']})")
        print(f"{r['method']:9s} {r['dataset']:14s} {r['epsilon']:4g} {r['profile']:7s} "
              f"{r['family']:6s} {fmt(r['paper']):>7s} {fmt(r['ours_paper_protocol']):>7s} "
              f"{fmt(r['difference']):>7s} {fmt(r['ours_clean_protocol']):>7s}  "
              f"{r['steps']:5d}  {spent}")
    print("* paper protocol: max test accuracy over epochs (selects on test data); clean: "
          "after the fixed schedule. A difference only for the paper's setting (paper profile, "
          f"float32 Adam moments, an evaluation of at least {MIN_COMPARED_EVAL_EPOCHS} epochs; "
          "a profile that changes only the evaluation, such as DP-GAN's small-batch cpu, "
          "trains the paper setting and is shown as paper); cpu-family and smaller-profile "
          "runs are shown, not compared. eps spent: under the ledger that stopped the run.")
    return 0


def _parse_value(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items: VALUE as JSON (``true``, ``0.5``, ``"x"``), else the plain
    string, which the config then checks (a switch takes only ``true`` or ``false``)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"--set takes KEY=VALUE (VALUE as JSON: true, 0.5, \"x\"), "
                             f"got {item!r}")
        out[key] = _parse_value(value)
    return out


def _report(results: list[dict]) -> int:
    failed = [r for r in results if r["status"] == "failed"]
    for r in results:
        print(f"  {r['status']:7s} {r['notebook']:22s} {r['seconds']:7.1f} s  {r['output']}")
        if r.get("error"):
            print(f"          {r['error'][:2000]}")
    print(f"{len(results) - len(failed)} notebooks ok or up to date, {len(failed)} failed")
    return 1 if failed else 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .runner import run_notebook

    params = {k: _parse_value(v) for k, v in (args.p or [])}
    try:
        res = run_notebook(args.notebook, params, force=args.force, progress=True,
                           canonical=args.book)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return _report([res])


def _executor_kw(args: argparse.Namespace) -> dict:
    return {"partition": args.partition, "gpus_per_job": args.gpus_per_job,
            "cpus_per_job": args.cpus_per_job, "timeout_min": args.timeout_min,
            "mem_gb": args.mem_gb, "max_parallel": args.max_parallel}


def _cmd_run_all(args: argparse.Namespace) -> int:
    from ._validate import nonneg_int
    from .runner import NOTEBOOKS, run_all, run_notebook

    try:
        nonneg_int("--seed", args.seed)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.executor is None:
        return _report(run_all(args.profile, seed=args.seed, force=args.force))
    from . import scaleout

    params = {"profile": args.profile, "seed": args.seed}
    # every notebook as its own job; the status page summarises the others, so it runs last
    body = [n for n in NOTEBOOKS if n != "status"]
    jobs = scaleout.notebook_jobs(body, [params], canonical=True)
    try:
        res = scaleout.run_jobs(jobs, args.executor, **_executor_kw(args))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    status = run_notebook("status", params, force=True, canonical=True)
    res.append({"job": "status", "status": status["status"], "error": status.get("error"),
                "seconds": status["seconds"], "log": None})
    print(scaleout.summarise(res))
    return 1 if any(r["status"] == "failed" for r in res) else 0


def _parse_grid(items: list[str]) -> dict[str, list]:
    grid: dict[str, list] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ValueError(f"--grid takes KEY=V1,V2,..., got {item!r}")
        grid[key] = [_parse_value(v) for v in values.split(",")]
    return grid


def _cmd_sweep(args: argparse.Namespace) -> int:
    from . import scaleout

    try:
        if (args.notebook is None) == (args.config is None):
            raise ValueError("give either --notebook NAME or --config NAME (with --method)")
        fixed = {k: _parse_value(v) for k, v in (args.p or [])}
        points = [{**fixed, **pt} for pt in scaleout.expand_grid(_parse_grid(args.grid))]
        if args.notebook is not None:
            jobs = scaleout.notebook_jobs([args.notebook], points)
        else:
            jobs = scaleout.train_jobs(args.method, args.config, args.profile, points,
                                       eval_epochs=args.evaluate)
        res = scaleout.run_jobs(jobs, args.executor, **_executor_kw(args))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(scaleout.summarise(res))
    return 1 if any(r["status"] == "failed" for r in res) else 0


def _add_executor_args(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("--executor", choices=("local", "slurm"), default=default,
                   help="submitit executor: local (subprocesses here) or slurm"
                   + ("" if default else " (default: run one after another in this process)"))
    p.add_argument("--partition", default=None, help="Slurm partition")
    p.add_argument("--gpus-per-job", type=int, default=0)
    p.add_argument("--cpus-per-job", type=int, default=2)
    p.add_argument("--mem-gb", type=float, default=None, help="memory per job (Slurm)")
    p.add_argument("--timeout-min", type=int, default=24 * 60, help="time limit per job")
    p.add_argument("--max-parallel", type=int, default=0,
                   help="at most this many jobs submitted at once (0: all)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="datalens", description="DataLens reproduction tools")
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("data", help="list, check and fetch datasets")
    dsub = d.add_subparsers(dest="data_cmd", required=True)
    dsub.add_parser("list", help="registered datasets and where they were found")
    chk = dsub.add_parser("check", help="load and verify datasets (checksums)")
    chk.add_argument("names", nargs="*", metavar="NAME", help="default: all registered")
    f = dsub.add_parser("fetch", help="download MNIST, Fashion-MNIST or CIFAR-10")
    f.add_argument("name", choices=list(data_mod.REGISTRY))
    f.add_argument("--dest", default=None, help="target folder (default data/raw/<name>)")
    en = dsub.add_parser("ensure", help="find and verify datasets, fetching those not found "
                         "(run by `make book` and `make test` first)")
    en.add_argument("names", nargs="*", metavar="NAME", default=["mnist", "fashion-mnist"],
                    help="default: mnist fashion-mnist")
    en.add_argument("--no-fetch", action="store_true", help="only look up and verify")

    pr = sub.add_parser("privacy", help="TopAgg privacy accounting (paper Theorem 3)")
    pr.add_argument("--k", type=int, required=True, help="top-k")
    pr.add_argument("--sigma", type=float, default=None, help="noise standard deviation")
    pr.add_argument("--delta", type=float, default=1e-5)
    pr.add_argument("--epsilon", type=float, default=None, help="target epsilon")
    pr.add_argument("--queries", type=int, default=None, help="number of TopAgg queries")
    pr.add_argument("--conversion", choices=privacy.CONVERSIONS, default=None,
                    help="only this RDP-to-DP conversion (default: all)")
    pr.add_argument("--json", action="store_true", help="print JSON")

    tr = sub.add_parser("train", help="train DataLens (paper Alg. 1) or a baseline "
                        "(DC-GAN, G-PATE, DP-GAN) through the same harness")
    tr.add_argument("--method", default="datalens", help="datalens | dcgan | gpate | dpgan "
                    "(datalens_lib.methods.METHODS)")
    tr.add_argument("--config", required=True, help="e.g. mnist-eps1 (DC-GAN: mnist-epsinf)")
    tr.add_argument("--profile", default="paper", choices=PROFILES)
    tr.add_argument("--out", required=True, help="run folder")
    tr.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    tr.add_argument("--device", default="auto", help="auto | cpu | cuda")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--snapshot-budgets", type=float, nargs="+", metavar="EPS",
                    help="also keep the generator (and its samples) at these smaller budgets")
    tr.add_argument("--until-last-snapshot", action="store_true",
                    help="stop once every snapshot is taken and write snapshots.json instead "
                    "of run.json (the snapshots of a finished run whose folder was lost)")
    tr.add_argument("--prefix-of", default=None, metavar="RUN",
                    help="with --until-last-snapshot: a finished run's run.json (or folder) "
                    "with the same config and seed; snapshots.json says whether the steps "
                    "trained again are that run's own")
    tr.add_argument("--checkpoint-every", type=int, default=10, help="steps (0: never)")
    tr.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a config value (JSON literal), e.g. --set max_steps=5")

    ve = sub.add_parser("verify", help="check every committed record and published sample "
                        "subset against data/results/SHA256SUMS and the record schemas, and "
                        "data/paper/*.csv against data/paper/SHA256SUMS (CI runs it)")
    ve.add_argument("--update", action="store_true", help="rewrite the two SHA256SUMS files "
                    "first (after committing new records; review their diff)")
    ve.add_argument("--json", action="store_true", help="one JSON object")

    ev = sub.add_parser("evaluate", help="utility of a run's synthetic data")
    ev.add_argument("run", help="run folder with run.json and samples.npz")
    ev.add_argument("--protocol", choices=("paper", "clean"), default=None,
                    help="print only this protocol's figure in addition")
    ev.add_argument("--epochs", type=int, default=None, help="default: the config's")
    ev.add_argument("--device", default="auto")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--snapshot", type=float, default=None, metavar="EPS",
                    help="evaluate the samples of the generator snapshot at this budget")
    ev.add_argument("--limit", type=int, default=None, help="use only the first N samples")
    ev.add_argument("--pad-to", type=int, default=None, metavar="N",
                    help="pad the training set to N rows of zero images with zero targets, as "
                    "the official Fashion-MNIST evaluation script does (an opt-in variant)")
    ev.add_argument("--dropout-rng", choices=("streams", "torch"), default=None,
                    help="the classifier's dropout masks: parallel seeded streams (the CPU "
                    "default) or ATen's dropout on the global generator (the CUDA default, and "
                    "every evaluation before 2026-11-28); naming it makes a variant")
    ev.add_argument("--name", default=None, help="output file name in the run folder")
    ev.add_argument("--dataset", default=None,
                    help="for a sample file (.npz): the dataset whose test set scores it")
    ev.add_argument("--lr", type=float, default=None,
                    help="classifier learning rate (default: a run's config eval_lr; 2e-3 for "
                         "a sample file); e.g. 1e-3, G-PATE's MNIST evaluation (issue 12)")
    ev.add_argument("--batch-size", type=int, default=512,
                    help="for a sample file (default 512)")

    dp = sub.add_parser("dpsgd", help="DP-SGD with TopAgg (NormTopK), dimension top-k or "
                        "GM-DP (the paper's appendix); one record per seed")
    dp.add_argument("--dataset", default="mnist")
    dp.add_argument("--epsilon", default="1.0",
                    help="a number or inf; several, comma-separated (with --search and --out "
                    "holding {cell}): each budget's cell, the runs shared where one is the "
                    "first steps of another (train.run_search_family)")
    dp.add_argument("--k", type=float, default=0.7, help="top-k fraction (normtopk, dimtopk)")
    dp.add_argument("--method", choices=("normtopk", "dimtopk", "gmdp", "sgd"),
                    default="normtopk")
    dp.add_argument("--seeds", type=int, default=5)
    dp.add_argument("--first-seed", type=int, default=0)
    dp.add_argument("--profile", choices=PROFILES, default="paper")
    dp.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a setting (JSON literal), e.g. --set lr=0.05")
    dp.add_argument("--out", default=None, help="default: runs/dpsgd/<dataset>/<cell>/<profile>")
    dp.add_argument("--quiet", action="store_true")
    dp.add_argument("--device", default="cpu", help="cpu (default), cuda or auto; a CUDA "
                    "run draws other noise than a CPU run of the same seed")
    dp.add_argument("--search", default=None, metavar="DIR",
                    help="first search the grid spanned by tab:dpsgd-search's neighbouring "
                    "budgets on a held-out validation split (records in DIR, resumable), then "
                    "train the seeds with the validation choice (with --control: TopAgg's "
                    "cell is searched and all five scenarios use its choice; a budget "
                    "tab:dpsgd-search gives is not searched)")
    dp.add_argument("--validation", type=int, default=None,
                    help="records held out for --search (default 10000)")
    dp.add_argument("--control", action="store_true",
                    help="tab:control: TopAgg, TopK-GM-DP, TopK-SGD, GM-DP and clipped SGD "
                    "with TopAgg's C, sigma and steps (ignores --method)")

    qu = sub.add_parser("quality", help="IS (domain classifier) and FID (domain features) of "
                        "a run's samples or of any .npz of images and labels")
    qu.add_argument("target", nargs="+",
                    help="run folder(s) (run.json + samples) or .npz file(s)")
    qu.add_argument("--dataset", default=None, help="needed for an .npz file")
    qu.add_argument("--limit", type=int, default=None, help="score only the first N images")
    qu.add_argument("--inception-weights", default=None, metavar="PTH",
                    help="also Inception IS/FID with this weights file (torch-fidelity)")
    qu.add_argument("--no-write", action="store_true", help="print only")

    ps = sub.add_parser("publish-samples", help="write a uint8 subset of a run's samples "
                        "beside its committed records (and record it in their run.json)")
    ps.add_argument("run", help="run folder with run.json and its samples")
    ps.add_argument("--dest", required=True, help="folder of the committed records")
    ps.add_argument("--n", type=int, default=10_000)
    ps.add_argument("--seed", type=int, default=0)

    dc = sub.add_parser("domain-classifier", help="train and save the domain classifier "
                        "behind IS/FID (datalens_lib/quality/weights)")
    dc.add_argument("--dataset", required=True)
    dc.add_argument("--epochs", type=int, default=5)
    dc.add_argument("--seed", type=int, default=0)
    dc.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 gives the committed weights bit for bit)")
    dc.add_argument("--out", default=None, help="folder (default: the package's weights)")

    rf = sub.add_parser("reference", help="non-private reference: the evaluation classifier "
                        "on the real training data")
    rf.add_argument("--dataset", required=True, help="mnist | fashion-mnist | ...")
    rf.add_argument("--epochs", type=int, default=600)
    rf.add_argument("--lr", type=float, default=2e-3)
    rf.add_argument("--batch-size", type=int, default=512)
    rf.add_argument("--device", default="auto")
    rf.add_argument("--seed", type=int, default=0)
    rf.add_argument("--limit", type=int, default=None, help="use only the first N records")
    rf.add_argument("--out", default=None, help="default data/results/reference/<dataset>")

    rs = sub.add_parser("results", help="every method's committed runs beside the paper's "
                        "tab:image numbers")
    rs.add_argument("--json", action="store_true")
    rs.add_argument("--cells", action="store_true",
                    help="instead: every paper-scale cell of every artifact beside the paper's "
                    "number, as the last book build stored them (status.cell_table)")
    rs.add_argument("--missing", action="store_true",
                    help="instead: the paper's numbered cells with no paper-scale cell of "
                    "ours in the last book build's store, and why (status.missing_cells)")

    rn = sub.add_parser("run", help="execute one notebook with papermill")
    rn.add_argument("notebook", help="name (e.g. t1_main_utility) or path")
    rn.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"),
                    help="parameter (VALUE parsed as JSON when possible)")
    rn.add_argument("--force", action="store_true", help="rerun even if up to date")
    rn.add_argument("--book", action="store_true", help="write the book's canonical copy "
                    "(book/notebooks/NAME.ipynb); default: a copy named by the parameters' hash "
                    "under the results root")

    ra = sub.add_parser("run-all", help="execute every notebook of the book")
    ra.add_argument("--profile", default="smoke", choices=PROFILES)
    ra.add_argument("--seed", type=int, default=0)
    ra.add_argument("--force", action="store_true")
    _add_executor_args(ra, None)

    sw = sub.add_parser("sweep", help="a grid of notebook executions or training runs, as "
                        "jobs of a submitit executor (finished jobs are skipped)")
    sw.add_argument("--notebook", default=None, help="a notebook's grid (e.g. t4_hyperparameters)")
    sw.add_argument("--method", default="datalens", help="training grid: the method")
    sw.add_argument("--config", default=None, help="training grid: the config, e.g. mnist-eps1")
    sw.add_argument("--profile", default="smoke", choices=PROFILES,
                    help="training grid: the profile")
    sw.add_argument("--evaluate", type=int, default=None, metavar="EPOCHS",
                    help="training grid: also evaluate each run for EPOCHS epochs")
    sw.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                    help="one axis of the grid (repeatable); training: seed or a config key")
    sw.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"),
                    help="a fixed parameter of every point (notebook grid)")
    _add_executor_args(sw, "local")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"data": _cmd_data, "privacy": _cmd_privacy, "train": _cmd_train,
                "evaluate": _cmd_evaluate, "results": _cmd_results,
                "reference": _cmd_reference, "run": _cmd_run, "run-all": _cmd_run_all,
                "sweep": _cmd_sweep, "quality": _cmd_quality,
                "publish-samples": _cmd_publish_samples,
                "domain-classifier": _cmd_domain_classifier, "dpsgd": _cmd_dpsgd,
                "verify": _cmd_verify}
    from .provenance import ResultsWriteError
    from .records import CheckpointError, RecordError

    try:
        return commands[args.cmd](args)
    except (ResultsWriteError, CheckpointError, RecordError) as e:
        # a full or read-only disk, or a run folder's state that cannot be used: the message
        # names the file and what to do; nothing was overwritten
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
