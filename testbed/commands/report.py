"""`testbed report` (an HTML page from the results database) and `testbed reproduce PAPER` (run
what a paper needs, each measurement on the tier that measures it faithfully, then report)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from testbed import papers, results
from testbed.errors import UsageError
from testbed.tiers import TIERS, Choice, choose


def register(sub: Any) -> None:
    rep = sub.add_parser(
        "report",
        help="an HTML report (figures, paper-vs-emulator tables, claims ledger) from results",
        description="Write a self-contained HTML page with each paper's figures, the numbers "
        "behind them (n, 95 percent CI), the paper's printed numbers beside ours, the claims "
        "ledger, provenance and failed trials, from the results database alone.",
    )
    rep.add_argument("--db", type=Path, default=None,
                     help=f"results database (default $TESTBED_DB or {results.DEFAULT_DB})")
    rep.add_argument("--run", action="append", default=[], metavar="ID",
                     help="a run id (testbed results list); repeatable")
    rep.add_argument("--experiment", action="append", default=[], metavar="NAME",
                     help="every run of this experiment; repeatable")
    rep.add_argument("--out", type=Path, default=None, metavar="DIR",
                     help="folder for index.html, ledger.json and the figures (PNG, SVG)")
    rep.add_argument("--compare", nargs=2, type=Path, default=None, metavar=("A", "B"),
                     help="list the claims whose verdicts differ between two ledgers (report "
                     "folders or ledger.json files); exit 0 when none differ, 1 when some do")
    rep.set_defaults(func=cmd_report)

    rp = sub.add_parser(
        "reproduce",
        help="run what a paper needs and write its report",
        description="Run the experiments a paper needs, each measurement on the tier that "
        "measures it faithfully (the host kernel for shaped throughput, the full-kernel VM "
        "for per-packet delay, tunnels and Jool), then write the report. Papers: "
        + ", ".join(papers.builtin_ids()) + f", and a user's own (${papers.ENV}, docs/papers.md).",
    )
    rp.add_argument("paper", help="paper id (" + ", ".join(papers.builtin_ids()) + ", ...)")
    rp.add_argument("--quick", action="store_true", help="the quick profiles: fewer points")
    rp.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="report folder (default reports/PAPER[-quick])")
    rp.add_argument("--db", type=Path, default=None,
                    help=f"results database (default $TESTBED_DB or {results.DEFAULT_DB})")
    rp.add_argument("--dry-run", action="store_true",
                    help="print which measurement runs on which tier and why, and the trials")
    rp.add_argument("--tier", choices=TIERS, default="auto",
                    help="auto (default): per measurement; host or vm: everything there")
    rp.add_argument("--workers", default="auto", metavar="N",
                    help="guests side by side for the virtual-clock part (auto, the default: "
                    "one per core, at most 4, as memory allows; 1: one guest). Its numbers do "
                    "not depend on placement (docs/parallel.md)")
    rp.add_argument("--resume", action="store_true",
                    help="continue an interrupted reproduce in --db: parts that finished are "
                    "kept, an unfinished part goes on from its last stored trial, parts not "
                    "begun run; the report covers them all (a long run in sittings)")
    rp.add_argument("--only", action="append", default=[], help=argparse.SUPPRESS)
    rp.add_argument("--no-report", action="store_true", help=argparse.SUPPRESS)
    rp.set_defaults(func=cmd_reproduce)


def _db(args: argparse.Namespace) -> Path:
    return Path(args.db) if args.db is not None else results.default_db()


def _ledger_line(rep: Any) -> str:
    line = "claims ledger: " + ", ".join(f"{k}: {v}" for k, v in rep.counts().items())
    if rep.by_construction():
        line += f" ({rep.by_construction()} of the holds by construction, not confirmation)"
    notes = sorted({s.claims_note for s in rep.sections if s.claims_note and not s.claims})
    return line + "".join(f" ({n})" for n in notes)


def cmd_compare(a: Path, b: Path) -> int:
    """Print the claims whose verdicts differ between two ledgers: 0 if none, 1 if some."""
    from testbed.report import ledger

    diffs = ledger.differences(ledger.read(a), ledger.read(b))
    for cid, va, vb in diffs:
        print(f"{cid}: {va} -> {vb}")
    print(f"{len(diffs)} claim(s) differ between {a} and {b}", file=sys.stderr)
    return 1 if diffs else 0


def cmd_report(args: argparse.Namespace) -> int:
    from testbed.report.render import write_report

    if args.compare is not None:
        return cmd_compare(*args.compare)
    if args.out is None:
        raise UsageError("testbed report needs --out DIR (or --compare A B)")

    rep = write_report(_db(args), args.out, args.run, args.experiment)
    nfig = sum(len(s.figures) for s in rep.sections)
    print(f"report: {rep.html.resolve()} ({len(rep.sections)} section(s), {nfig} figure(s))",
          file=sys.stderr)
    print(_ledger_line(rep), file=sys.stderr)
    return 0


# --- reproduce -----------------------------------------------------------------------------


def resolve_paper(name: str) -> str:
    """A paper id, or the paper an experiment name reproduces; else a usage error."""
    return papers.resolve(name).id


def _subset(exp: Any, choices: Sequence[Choice]) -> Any:
    """The experiment restricted to these (measurement, topologies) choices."""
    keep: dict[str, list[str]] = {}
    for c in choices:
        keep.setdefault(c.measurement, []).extend(c.topologies)
    ms = [dataclasses.replace(m, where={**m.where, "topology": keep[m.name]})
          for m in exp.measurements if m.name in keep]
    topos = [t for t in exp.topology if any(t in v for v in keep.values())]
    return dataclasses.replace(exp, measurements=ms, topology=topos)


def _parse_only(spec: str) -> Choice:
    try:
        head, topos = spec.split("@", 1)
        exp, meas = head.split(":", 1)
    except ValueError:
        raise UsageError(f"--only {spec!r}: expected EXPERIMENT:MEASUREMENT@TOPOLOGY[+...]"
                         ) from None
    return Choice(exp, meas, tuple(topos.split("+")), "here", "real", "--only", 0)


def _run_ids(db: Path) -> set[str]:
    if not db.exists():
        return set()
    with closing(results.connect(db)) as con:
        return {r["run_id"] for r in results.runs(con)}


def _check_reproduce_needs(choices: list[Any], db: Path, args: argparse.Namespace) -> None:
    """Before anything runs or is written: root where measurements run on this host, a
    writable database and report folder."""
    from testbed import preflight

    if any(c.tier == "host" for c in choices):
        preflight.require_root("reproduce", "its host-tier measurements build network "
                               "namespaces (--tier vm runs everything in a guest instead)")
        preflight.require_registry()
    preflight.require_database(db)
    if not args.no_report:
        preflight.require_folder(args.out or Path("reports"), "--out")


def _check_resumable(db: Path, names: list[str], profile: str, args: argparse.Namespace
                     ) -> None:
    """`--resume` needs a run of this paper's experiments and profile in `db`."""
    quick = " --quick" if args.quick else ""
    fresh = f"start without --resume: testbed reproduce {args.paper}{quick} --db {db}"
    stored: list[dict[str, Any]] = []
    if db.exists():
        with closing(results.connect(db)) as con:
            stored = results.runs(con)
    if not any(r["experiment"] in names and r["profile"] == profile for r in stored):
        raise UsageError(f"--resume: {db} holds no {profile} run of {', '.join(names)} to "
                         "continue", hint=fresh)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from testbed.capabilities import missing
    from testbed.experiment_spec import find_experiment, load_experiment
    from testbed.progress import format_duration

    paper = resolve_paper(args.paper)
    profile = "quick" if args.quick else "full"
    db = _db(args)
    exps = [load_experiment(find_experiment(name), profile)
            for name in papers.get(paper).experiments]

    if args.only:  # inside the VM tier: run exactly these measurements here
        wanted = [_parse_only(o) for o in args.only]
        rc = 0
        for exp in exps:
            mine = [c for c in wanted if c.experiment == exp.name]
            if mine:
                rc |= _run_here(_subset(exp, mine), db)
        return rc

    choices = [c for exp in exps for c in choose(exp, missing, args.tier)]
    if not args.dry_run:
        _check_reproduce_needs(choices, db, args)
        if args.resume:
            _check_resumable(db, [e.name for e in exps], profile, args)
    print(f"reproduce {paper} ({profile} profile): where each measurement runs", file=sys.stderr)
    for c in choices:
        print(f"  {c.experiment}/{c.measurement} on {', '.join(c.topologies)}: {c.tier} tier, "
              f"{c.clock} clock, {c.trials} trials - {c.reason}", file=sys.stderr)
    vm_only = [c.spec for c in choices if c.tier == "vm"]
    on_virtual = any(c.clock == "virtual" for c in choices if c.tier == "vm")
    from testbed.vm import memory as vm_memory

    workers = vm_memory.worker_count(args.workers) if on_virtual else 1
    if vm_only:
        print(f"  the full-kernel part runs in {workers} guest(s)"
              + (" side by side, each on its own virtual clock" if workers > 1 else ""),
              file=sys.stderr)
    if args.dry_run:
        early = any(c.at_most for c in choices)
        print(f"{'at most ' if early else ''}{sum(c.trials for c in choices)} trials",
              file=sys.stderr)
        return 0

    t0 = time.monotonic()
    before = _run_ids(db)
    rc, kept = _run_parts(exps, choices, db, workers, args, on_virtual)
    new = sorted((_run_ids(db) - before) | kept)
    if args.no_report:
        return rc
    if not new:
        raise UsageError(f"no runs of {paper} were recorded in {db}",
                         hint="see the messages above")
    from testbed.report.render import write_report

    out = args.out or Path("reports") / (paper + ("-quick" if args.quick else ""))
    rep = write_report(db, out, run_ids=new)
    failed = sum(len(s.failed) for s in rep.sections)
    left_out = sum(len(s.left_out) for s in rep.sections)
    print(f"\nreproduce {paper}: {format_duration(time.monotonic() - t0)}, runs "
          f"{', '.join(new)}, {failed} failed trial(s)"
          + (f", {left_out} left out of the verdicts (the host did not keep up)" if left_out
             else ""), file=sys.stderr)
    print(f"report: {rep.html.resolve()}", file=sys.stderr)
    print(_ledger_line(rep), file=sys.stderr)
    return rc


def _run_parts(exps: list[Any], choices: list[Choice], db: Path, workers: int,
               args: argparse.Namespace, on_virtual: bool) -> tuple[int, set[str]]:
    """Each experiment's host part, then the guests' parts; with --resume the parts that
    finished in an earlier sitting are kept and an unfinished one goes on. Returns the exit
    status and the earlier sittings' runs the report must include."""
    vm_only = [c.spec for c in choices if c.tier == "vm"]
    kept: set[str] = set()  # with --resume: the parts' runs from the sittings before
    rc = 0
    for exp in exps:
        host = [c for c in choices if c.experiment == exp.name and c.tier == "host"]
        if host:
            names = ", ".join(dict.fromkeys(c.measurement for c in host))
            part = _subset(exp, host)
            state, run_id = _part_state(db, part) if args.resume else ("new", None)
            print(f"== {exp.name}: {names} on the host kernel" + _resume_note(state, run_id),
                  file=sys.stderr)
            kept |= {run_id} if run_id else set()
            if state != "done":
                rc |= _run_here(part, db, resume=state == "resume")
    if vm_only and workers > 1:
        for exp in exps:
            mine = [c for c in choices if c.experiment == exp.name and c.tier == "vm"]
            if mine:
                part = _subset(exp, mine)
                state, run_id = _part_state(db, part) if args.resume else ("new", None)
                kept |= {run_id} if run_id else set()
                if state == "done":
                    print(f"== {exp.name}: its full-kernel part{_resume_note(state, run_id)}",
                          file=sys.stderr)
                else:
                    rc |= _run_vm_parallel(part, workers, db, resume=state == "resume")
    elif vm_only:
        if args.resume:
            print("== the full-kernel part in one guest runs from its start (--resume goes on "
                  "from the last trial with --workers 2 or more)", file=sys.stderr)
        rc |= _run_vm(resolve_paper(args.paper), args.quick, vm_only, db,
                      "virtual" if on_virtual else None)
    return rc, kept


def _run_here(exp: Any, db: Path, resume: bool = False) -> int:
    from testbed.experiment import run_experiment

    return _said(run_experiment(exp, db=db, resume=resume))


def _part_state(db: Path, part: Any) -> tuple[str, str | None]:
    """With --resume: whether this part of a paper's run (one experiment's measurements on
    one tier, as `_subset` made it) already ran in `db` — ("done", its run), ("resume", its
    unfinished run, the latest of this experiment and profile) — or must start ("new", None).
    A stored run is this part's when it planned the same measurements on the same
    topologies."""
    if not db.exists():
        return "new", None
    want = _signature(part.to_dict())
    with closing(results.connect(db)) as con:
        rows = con.execute("SELECT run_id, finished, spec FROM runs WHERE experiment=? AND "
                           "profile=? ORDER BY started DESC", (part.name, part.profile))
        mine = [r for r in rows if _signature(json.loads(r["spec"])) == want]
        latest = results.unfinished_run(con, part.name, part.profile)
    if any(r["finished"] is not None for r in mine):
        return "done", next(str(r["run_id"]) for r in mine if r["finished"] is not None)
    if mine and str(mine[0]["run_id"]) == latest:
        return "resume", latest
    return "new", None


def _signature(spec: Any) -> frozenset[tuple[str, tuple[str, ...]]]:
    """A stored experiment's measurements and the topologies each runs on."""
    ms = spec.get("measurements", []) if isinstance(spec, dict) else []
    return frozenset((str(m.get("name")), tuple(m.get("where", {}).get("topology", [])))
                     for m in ms if isinstance(m, dict))


def _resume_note(state: str, run_id: str | None) -> str:
    return {"done": f": done in run {run_id} (--resume keeps it)",
            "resume": f": resuming run {run_id}", "new": ""}[state]


def _said(summary: Any) -> int:
    """Print a run's summary line; its exit status (1 when a trial failed)."""
    spared = (f", {summary.spared} not needed (their cells were precise)"
              if summary.spared else "")
    print(f"run {summary.run_id}: {summary.ran} trials ran, {summary.failed} failed{spared}",
          file=sys.stderr)
    return 1 if summary.failed else 0


def _run_vm_parallel(exp: Any, workers: int, db: Path, resume: bool = False) -> int:
    """The VM part of one experiment in `workers` virtual-clock guests side by side
    (testbed run --workers: shares of whole sweep points, merged into `db`)."""
    from testbed import parallel
    from testbed.experiment_spec import find_experiment

    print(f"== full-kernel tier, virtual clock, {workers} guests side by side: {exp.name}: "
          f"{', '.join(m.name for m in exp.measurements)}", file=sys.stderr)
    return _said(parallel.run_local(exp, find_experiment(exp.name), db=db, workers=workers,
                                    clock="virtual", resume=resume))


def _run_vm(paper: str, quick: bool, only: list[str], db: Path, clock: str | None) -> int:
    from testbed.vm import run as vm_run

    argv = ["testbed", "reproduce", paper, "--no-report", *(["--quick"] if quick else [])]
    for o in only:
        argv += ["--only", o]
    print(f"== full-kernel tier: {' '.join(argv)}", file=sys.stderr)
    kw: dict[str, Any] = {"clock": clock} if clock else {}
    res = vm_run.run_in_vm(argv, db=db, **kw)
    if res.returncode != 0:
        print(f"the full-kernel tier exited with {res.returncode}", file=sys.stderr)
    return 1 if res.returncode else 0
