"""`testbed run` and `testbed results`: run experiment files, read the results database."""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import AbstractContextManager, closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed import results
from testbed.errors import UsageError
from testbed.waiting import CLOCKS

if TYPE_CHECKING:
    from testbed.parallel import Journal


def register(sub: Any) -> None:
    _register_run(sub)
    _register_results(sub)


def _register_run(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run an experiment file, storing every trial",
        description="Run every trial of an experiment (experiments/NAME.toml "
        "or a path), writing each to the results database as it finishes.",
    )
    run.add_argument("experiment", help="experiment name (experiments/NAME.toml) or path")
    run.add_argument(
        "--quick", action="store_true", help="the quick profile: same shape, fewer points"
    )
    run.add_argument(
        "--db",
        type=Path,
        default=None,
        help=f"results database (default $TESTBED_DB or {results.DEFAULT_DB})",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the last unfinished run of this experiment and profile",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="list the trials that would run and exit"
    )
    run.add_argument(
        "--clock",
        choices=CLOCKS,
        default=None,
        help="the clock to measure on (default: the experiment's `clock`, else this one); "
        "virtual boots the full-kernel tier on QEMU's instruction counter by itself",
    )
    run.add_argument(
        "--workers",
        default=None,
        metavar="N",
        help="run independent sweep points in N worker processes (on the virtual clock each in "
        "its own guest), merging their trials into the database as they finish; auto: one per "
        "core, at most 4, as memory allows (docs/parallel.md)",
    )
    run.add_argument(
        "--cluster",
        metavar="ADDRESS",
        default=None,
        help="ship the trials to the workers of a Dask scheduler (tcp://HOST:8786); needs the "
        "cluster extra (docs/parallel.md)",
    )
    run.add_argument("--share", type=Path, default=None, help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)


def _register_results(sub: Any) -> None:
    res = sub.add_parser(
        "results",
        help="read the results database",
        description="List runs, show per-group statistics, or export trials.",
    )
    res.add_argument(
        "--db",
        type=Path,
        default=None,
        help=f"results database (default $TESTBED_DB or {results.DEFAULT_DB})",
    )
    rsub = res.add_subparsers(dest="action", metavar="ACTION")
    rsub.required = True
    ls = rsub.add_parser("list", help="runs and their trial counts")
    ls.set_defaults(func=cmd_list)
    show = rsub.add_parser("show", help="per-group statistics (experiment, measurement, point)")
    show.add_argument("experiment", nargs="?", help="only this experiment")
    show.add_argument("--run", help="only this run id")
    show.add_argument("--measurement", help="only this measurement")
    show.add_argument("--metric", action="append", help="only these metrics (repeatable)")
    show.add_argument("--json", action="store_true", help="print the statistics as JSON")
    show.set_defaults(func=cmd_show)
    exp = rsub.add_parser("export", help="every trial as CSV or JSON")
    exp.add_argument("experiment", nargs="?", help="only this experiment")
    exp.add_argument("--run", help="only this run id")
    fmt = exp.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", action="store_true", help="one row per trial, metrics as columns")
    fmt.add_argument("--json", action="store_true", help="every trial as one JSON document")
    exp.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    exp.set_defaults(func=cmd_export)
    for p in (ls, show, exp):
        p.add_argument("--db", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _db(args: argparse.Namespace) -> Path:
    return Path(args.db) if args.db is not None else results.default_db()


def cmd_run(args: argparse.Namespace) -> int:
    from testbed.experiment import run_experiment
    from testbed.experiment_spec import (
        check_topologies,
        find_experiment,
        for_clock,
        iter_plan,
        load_experiment,
    )

    path = find_experiment(args.experiment)
    exp = load_experiment(path, "quick" if args.quick else "full")
    check_topologies(exp)  # the file's mistakes first, the same in a dry run and a real one
    if args.dry_run:
        n = 0
        on = for_clock(exp, args.clock or exp.clock)
        for m in on.measurements:
            if m.once:
                print(f"{m.name}: each cell once ({m.once})", file=sys.stderr)
            if m.varies:
                print(f"{m.name}: repeated although its kind is exact on the virtual clock "
                      f"({m.varies})", file=sys.stderr)
            if m.precision is not None:
                print(f"{m.name}: at most {m.reps(on.repetitions)} trials a cell; "
                      f"{m.precision.describe()}", file=sys.stderr)
        for t in iter_plan(on):  # one at a time: never more in memory than is printed
            print(t.label)
            n += 1
        if n == 0:
            raise UsageError(f"{path}: the {exp.profile} profile yields no trials",
                             hint="check its [sweep] and each measurement's `where`")
        early = any(m.precision is not None for m in on.measurements)
        print(f"{'at most ' if early else ''}{n} trials", file=sys.stderr)
        return 0
    db = _db(args)
    wanted = args.clock or exp.clock
    check_run_needs(args, exp, db, wanted)
    if getattr(args, "workers", None) is not None or getattr(args, "cluster", None) is not None:
        summary = run_parallel(exp, path, args, db, wanted)
    elif wanted is not None and wanted != current_clock():
        # the database the VM's trials are merged into must be usable before a minute's boot
        results.connect(db).close()
        return run_on_clock(wanted, path, args, db)
    elif getattr(args, "share", None) is not None:
        from testbed.shares import read_share

        share = read_share(args.share)
        with share_journal(args.share, db) as journal:
            summary = run_experiment(exp, db=db, share=(share.run_id, share.keys),
                                     on_commit=journal.copy if journal is not None else None)
    else:
        summary = run_experiment(exp, db=db, resume=args.resume)
    import os

    from testbed.vm.guest import ENV_IN_VM

    spared = (f", {summary.spared} not needed (their cells were precise)"
              if summary.spared else "")
    if os.environ.get(ENV_IN_VM) == "1":  # the guest's database is merged into the host's
        print(f"run {summary.run_id}: {summary.ran} trials ran, {summary.skipped} already "
              f"done, {summary.failed} failed{spared}", file=sys.stderr)
        return 1 if summary.failed else 0
    print(
        f"run {summary.run_id}: {summary.ran} trials ran, {summary.skipped} already done, "
        f"{summary.failed} failed{spared}; results in {db}",
        file=sys.stderr,
    )
    print(
        f"  see them with: testbed results --db {db} show {exp.name} --run {summary.run_id}",
        file=sys.stderr,
    )
    return 1 if summary.failed else 0


def check_run_needs(args: argparse.Namespace, exp: Any, db: Path, clock: str | None) -> None:
    """Before the database or the registry is touched: root where trials run on this host
    (not for a guest's or a Dask cluster's trials), a writable database, and with --resume a
    run to continue."""
    from testbed import preflight

    cluster = getattr(args, "cluster", None) is not None
    elsewhere = cluster or (clock is not None and clock != current_clock()
                            and getattr(args, "share", None) is None)
    if not elsewhere:
        preflight.require_root("run", "its trials build network namespaces on this host "
                               "(`--clock virtual` runs them in a guest instead)")
        preflight.require_registry()
    preflight.require_database(db)
    if args.resume:
        check_resumable(args, exp, db)


def check_resumable(args: argparse.Namespace, exp: Any, db: Path) -> None:
    """`--resume` needs an unfinished run of this experiment and profile in `db`."""
    quick = " --quick" if exp.profile == "quick" else ""
    fresh = f"start a new run without --resume: testbed run {args.experiment}{quick} --db {db}"
    if not db.exists():
        raise UsageError(f"--resume: no results database at {db}, so no run of {exp.name} to "
                         "continue", hint=fresh)
    with closing(results.connect(db)) as con:
        unfinished = results.unfinished_run(con, exp.name, exp.profile)
    if unfinished is None:
        raise UsageError(f"--resume: {db} holds no unfinished {exp.profile} run of "
                         f"{exp.name}", hint=fresh)


def run_parallel(exp: Any, path: Path, args: argparse.Namespace, db: Path,
                 clock: str | None) -> Any:
    """`--workers N` (processes here) or `--cluster ADDRESS` (Dask workers)."""
    from testbed import parallel

    if args.share is not None:
        raise UsageError("--share is what a worker runs: not with --workers/--cluster")
    if args.workers is not None and args.cluster is not None:
        raise UsageError("--workers and --cluster: choose one",
                         hint="--workers N runs here; --cluster ADDRESS on a Dask scheduler's "
                         "workers")
    if args.cluster is not None:
        from testbed import cluster

        client = cluster.connect(args.cluster)
        try:
            return cluster.run_cluster(exp, path, db=db, client=client, resume=args.resume,
                                       clock=args.clock)
        finally:
            client.close()
    from testbed.vm.memory import worker_count

    workers = worker_count(str(args.workers))
    on_host = (clock or current_clock()) == "real" and current_clock() == "real"
    problem = parallel.host_interference(exp, workers) if on_host else None
    if problem:
        raise UsageError(
            f"{path}: --workers {workers} on the host's real clock: {problem}, and "
            "parallel trials would disturb each other's timing",
            hint="use --clock virtual (each worker in its own guest: numbers independent of "
            "load) or --workers 1; see docs/parallel.md",
        )
    return parallel.run_local(exp, path, db=db, workers=workers, resume=args.resume,
                              clock=args.clock)


def share_journal(share: Path, db: Path) -> AbstractContextManager[Journal | None]:
    """In a guest, a worker's trials also go to a journal beside its share file (on the host):
    the coordinator gets each one as it is committed, not when the guest ends."""
    import os
    from contextlib import nullcontext

    from testbed import parallel
    from testbed.vm.guest import ENV_IN_VM

    if os.environ.get(ENV_IN_VM) != "1":
        return nullcontext(None)
    return parallel.Journal(db, Path(share).parent / parallel.JOURNAL)


def current_clock() -> str:
    """The clock this process measures on: 'virtual' only inside a virtual-clock guest."""
    from testbed.waiting import clock_name

    return clock_name()


def guest_run_argv(path: Path, args: argparse.Namespace, clock: str) -> list[str]:
    """`testbed run` as the guest runs it (its database is the VM tier's, merged back)."""
    argv = ["testbed", "run", str(path.resolve()), "--clock", clock]
    if args.quick:
        argv.append("--quick")
    if getattr(args, "share", None) is not None:
        argv += ["--share", str(Path(args.share).resolve())]  # a parallel run's worker
    return argv


def run_on_clock(clock: str, path: Path, args: argparse.Namespace, db: Path) -> int:
    """Run the experiment on `clock` when this process cannot: boot the virtual-clock tier,
    or say exactly what to run."""
    import os

    from testbed.vm import run as vm_run
    from testbed.vm.guest import ENV_IN_VM

    argv = guest_run_argv(path, args, clock)
    cmd = f"testbed vm --clock {clock} -- {' '.join(argv)}"
    if os.environ.get(ENV_IN_VM) == "1" or clock == "real":
        raise UsageError(
            f"{path}: the experiment asks for the {clock} clock and this process measures on "
            f"the {current_clock()} one",
            hint=f"run it from the host: {cmd}" if clock == "virtual" else
            f"run it on the host (`testbed run {path}`) or in `testbed vm --clock real`",
        )
    if args.resume:
        raise UsageError(
            f"{path}: --resume with the {clock} clock: the VM tier starts from an empty "
            "database and cannot continue a run",
            hint=f"run it again without --resume: {cmd}",
        )
    print(f"testbed run: {path} asks for the {clock} clock; booting it: {cmd}", file=sys.stderr)
    result = vm_run.run_in_vm(argv, clock=clock, db=db)
    if getattr(args, "share", None) is None:  # a parallel run's worker: its coordinator says
        print(f"  see them with: testbed results --db {db} show", file=sys.stderr)
    return result.returncode


def _open(args: argparse.Namespace) -> Any:
    db = _db(args)
    if not db.exists():
        raise UsageError(
            f"no results database at {db}",
            hint="run an experiment first (testbed run smoke --quick), or pass --db",
        )
    return results.connect(db)


def cmd_list(args: argparse.Namespace) -> int:
    with closing(_open(args)) as con:
        rows = results.runs(con)
    if not rows:
        print("no runs")
        return 0
    print(
        f"{'run':<24} {'experiment':<18} {'profile':<7} {'ok':>5} {'err':>4} {'planned':>7}  "
        "started              state"
    )
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["started"]))
        state = "finished" if r["finished"] else "unfinished (testbed run --resume)"
        print(
            f"{r['run_id']:<24} {r['experiment']:<18} {r['profile']:<7} {r['ok']:>5} "
            f"{r['errors']:>4} {r['planned']:>7}  {started}  {state}"
        )
    return 0


def _fmt(v: float) -> str:
    a = abs(v)
    if a != 0 and (a >= 1e6 or a < 1e-3):
        return f"{v:.4g}"
    return f"{v:.4f}".rstrip("0").rstrip(".") if a < 1000 else f"{v:.1f}"


def cmd_show(args: argparse.Namespace) -> int:
    from testbed.measure import kinds

    with closing(_open(args)) as con:
        rows = list(
            results.trials(
                con, experiment=args.experiment, run_id=args.run, measurement=args.measurement
            )
        )
        specs = {rid: results.run_spec(con, rid) for rid in dict.fromkeys(r.run_id for r in rows)}
    groups = results.group_stats(rows)
    errors = [r for r in rows if r.status == "error"]
    for g in groups:
        if args.metric:
            g["metrics"] = {k: v for k, v in g["metrics"].items() if k in args.metric}
        # databases written before units were stored: the kinds' declarations say them
        declared = kinds.units_of(g["kind"], g["metrics"])
        g["units"] = {k: g["units"].get(k) or declared.get(k, "?") for k in g["metrics"]}
    runs = [{"run_id": rid, "experiment": s.get("name"), "paper": s.get("paper") or None,
             "description": s.get("description") or None} for rid, s in specs.items()]
    if args.json:
        json.dump(
            {
                "runs": runs,
                "groups": groups,
                "errors": [{"trial": r.trial_key, "error": r.error} for r in errors],
            },
            sys.stdout,
            indent=1,
        )
        print()
        return 0
    if not rows:
        print("no trials match")
        return 0
    for run in runs:
        extra = "".join(f"  {k}: {run[k]}" for k in ("paper", "description") if run[k])
        print(f"run {run['run_id']}  {run['experiment']}{extra}")
    for g in groups:
        pt = ", ".join(f"{k}={v}" for k, v in g["point"].items())
        print(
            f"{g['experiment']} / {g['measurement']}  [{pt}]  trials={g['trials']}  "
            f"clock={g['clock']}  {fidelity_summary(g)}"
        )
        if g["description"]:
            print(f"    {g['description']}")
        for line in suspect_lines(g):
            print(line)
        print(
            f"    {'metric':<30} {'unit':<6} {'n':>3} {'mean':>12} {'stdev':>10} "
            f"{'95% CI':>25} {'min':>12} {'median':>12} {'max':>12}"
        )
        for name, s in g["metrics"].items():
            ci = f"[{_fmt(s['ci95_low'])}, {_fmt(s['ci95_high'])}]"
            print(
                f"    {name:<30} {g['units'][name]:<6} {s['n']:>3} {_fmt(s['mean']):>12} "
                f"{_fmt(s['stdev']):>10} {ci:>25} {_fmt(s['min']):>12} "
                f"{_fmt(s['median']):>12} {_fmt(s['max']):>12}"
            )
    if errors:
        print(f"\n{len(errors)} trial(s) failed:")
        for r in errors:
            print(f"  {r.measurement} {r.point} #{r.repetition}: {(r.error or '').splitlines()[0]}")
    return 0


def fidelity_summary(group: dict[str, Any]) -> str:
    """`suspect=N` of a group's trials (testbed.fidelity), or why there is no verdict."""
    from testbed import fidelity

    verdicts = [f["verdict"] for f in group.get("fidelity", [])]
    judged = [v for v in verdicts if v in (fidelity.OK, fidelity.SUSPECT)]
    if judged:
        return f"suspect={verdicts.count(fidelity.SUSPECT)}/{len(judged)}"
    if verdicts and all(v == fidelity.NOT_APPLICABLE for v in verdicts):
        return "fidelity: not applicable (virtual clock)"
    return "fidelity: not recorded"


def suspect_lines(group: dict[str, Any]) -> list[str]:
    """One line per suspect trial of a group: its repetition and why (kept, out of verdicts)."""
    from testbed import fidelity

    return [f"    suspect #{f['repetition']}: " + "; ".join(fidelity.suspect_reasons(
        {fidelity.KEY: f["record"]})) for f in group.get("fidelity", [])
            if f["verdict"] == fidelity.SUSPECT]


def cmd_export(args: argparse.Namespace) -> int:
    with closing(_open(args)) as con:
        rows = list(results.trials(con, experiment=args.experiment, run_id=args.run))
    text = results.export_csv(rows) if args.csv else results.export_json(rows)
    if args.output:
        try:
            args.output.write_text(text)
        except OSError as exc:
            raise UsageError(
                f"cannot write {args.output}: {exc.strerror or exc}",
                hint="pass -o with a file path in a writable folder that exists",
            ) from None
        print(f"{len(rows)} trials written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
