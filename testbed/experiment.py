"""Running an experiment: each topology built once, every trial in its own undo scope, stored.

The experiment files themselves (loading, checking, the trials they expand to) are
`testbed.experiment_spec`; their names are importable from here too.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import fidelity, netlink, results, sequential, waiting
from testbed.api import TestbedLike
from testbed.errors import TestbedError
from testbed.experiment_spec import (
    Experiment,
    TrialPlan,
    check_topologies,
    for_clock,
    param_text,
    plan,
)
from testbed.measure import cpu, kinds
from testbed.progress import Progress
from testbed.topology import find_topology

OpenTestbed = Callable[[Path, Mapping[str, str]], AbstractContextManager[TestbedLike]]
RunTrial = Callable[[TestbedLike, TrialPlan, kinds.Context], kinds.Measured]


@contextmanager
def open_real_testbed(path: Path, params: Mapping[str, str]) -> Iterator[TestbedLike]:
    """Load and build a topology with the real Testbed (root, host kernel)."""
    from testbed.testbed import Testbed
    from testbed.topology import load_topology

    topo = load_topology(path, params)
    with Testbed(topo) as tb:
        yield tb


@dataclass
class RunSummary:
    run_id: str
    planned: int
    skipped: int
    ran: int
    failed: int
    db: Path
    spared: int = 0  # planned repetitions not run: their cell met its precision rule first


def run_experiment(
    exp: Experiment,
    *,
    db: Path,
    resume: bool = False,
    open_testbed: OpenTestbed = open_real_testbed,
    progress: Progress | None = None,
    ctx: kinds.Context | None = None,
    run_trial: RunTrial | None = None,
    share: tuple[str, Collection[str]] | None = None,
    on_commit: Callable[[], None] | None = None,
) -> RunSummary:
    """Run every trial of `exp`, storing each in `db` as it finishes; with `resume`, continue
    the last unfinished run of the same experiment and profile, skipping its finished trials.
    `share` = (run id, trial keys): only those trials of that run (a parallel run's worker,
    testbed.parallel); the run is left unfinished here (the run's own database finishes it).
    `on_commit` is called after each trial is stored, between trials (a guest's journal).

    A database that cannot be written (disk full, removed, locked) stops the run with a
    StoreError; every trial committed before stays, and `--resume` continues from there."""
    check_topologies(exp)
    exp = for_clock(exp, waiting.clock_name())
    trials = plan(exp)
    if share is not None:
        wanted = set(share[1])
        trials = [t for t in trials if t.key(share[0]) in wanted]
    ctx = ctx or kinds.Context()
    base = Path(exp.file).resolve()

    def default_trial(tb: TestbedLike, t: TrialPlan, c: kinds.Context) -> kinds.Measured:
        return kinds.measure(t.measurement.kind, tb, t.params, c)

    do_trial = run_trial or default_trial
    with closing(results.connect(db)) as con, _store_errors(con, db, exp):
        run_id = _run_id(con, exp, len(trials), resume, share)
        done = results.done_keys(con, run_id)
        spared = sequential.unneeded(con, run_id, trials)
        todo = [t for t in trials if t.key(run_id) not in done | spared]
        before = len(trials) - len(todo) - len(spared)
        prog = progress or Progress(len(trials) - len(spared), before)
        if resume:
            prog.note(f"resuming run {run_id}: {before} of {len(trials)} trials already done"
                      + (f", {len(spared)} not needed (their cells are precise)"
                         if spared else ""))
        failed = ran = 0
        reruns = fidelity.Reruns(len(todo))
        for tp, group in itertools.groupby(todo, key=lambda t: t.topo):
            members = list(group)
            path = find_topology(tp.topology, base)
            overrides = {k: param_text(v) for k, v in tp.params.items()}
            prog.note(f"building {tp.label}")
            try:
                with open_testbed(path, overrides) as tb:
                    topo_doc = tb.topology.to_dict()
                    qd = tb.qdiscs()
                    for t in members:
                        if t.key(run_id) in spared:
                            continue
                        bad = _one(con, run_id, exp, t, tb, topo_doc, qd, do_trial, ctx, prog,
                                   reruns)
                        failed, ran = failed + bad, ran + 1 - bad
                        if on_commit is not None:
                            on_commit()
                        spared |= _precise(con, run_id, t, members, spared, prog)
            except TestbedError as exc:
                failed += _topology_failed(con, run_id, exp,
                                           [t for t in members if t.key(run_id) not in spared],
                                           f"topology {tp.label}", exc, prog)
                if on_commit is not None:
                    on_commit()
        prog.close()
        settled = results.done_keys(con, run_id) | spared
        if share is None and all(t.key(run_id) in settled for t in trials):
            results.finish_run(con, run_id)
        return RunSummary(run_id, len(trials), before, ran, failed, db,
                          spared=len(spared & {t.key(run_id) for t in todo}))


def _run_id(con: sqlite3.Connection, exp: Experiment, planned: int, resume: bool,
            share: tuple[str, Collection[str]] | None) -> str:
    """The run the trials go to: a share's own, the unfinished one resumed, or a new one."""
    run_id = results.unfinished_run(con, exp.name, exp.profile) if resume else None
    if share is not None:
        run_id = results.start_run(con, exp.name, exp.profile, exp.to_dict(),
                                   results.provenance(), planned, run_id=share[0])
    if run_id is None:
        run_id = results.start_run(con, exp.name, exp.profile, exp.to_dict(),
                                   results.provenance(), planned)
    return run_id


def _precise(con: sqlite3.Connection, run_id: str, t: TrialPlan, members: Sequence[TrialPlan],
             spared: set[str], prog: Progress) -> set[str]:
    """After trial `t`: the rest of its cell when the cell now meets its measurement's
    precision rule (`testbed.sequential`), which are then not run; else nothing."""
    rule = t.measurement.precision
    if rule is None:
        return set()
    cell = [x for x in members if x.measurement.name == t.measurement.name
            and x.group_key == t.group_key]
    more = sequential.unneeded(con, run_id, cell) - spared
    if more:
        prog.drop(len(more))
        prog.note(f"precise: {t.label.rsplit(' #', 1)[0]} after #{t.repetition} "
                  f"({rule.describe()}): {len(more)} more repetitions not run")
    return more


def trial_row(exp: Experiment, run_id: str, t: TrialPlan, *, started: float, finished: float,
              error: str | None = None, metrics: Mapping[str, float] | None = None,
              result: Mapping[str, Any] | None = None, topology: Any = None,
              qdiscs: Any = None) -> results.TrialRow:
    """The one constructor of a stored trial: trial `t` of run `run_id`, failed when `error`
    says why (also one that failed before it could run), else ok with its `metrics`."""
    return results.TrialRow(
        trial_key=t.key(run_id), run_id=run_id, experiment=exp.name, profile=exp.profile,
        measurement=t.measurement.name, kind=t.measurement.kind, point=t.point,
        group_key=t.group_key, repetition=t.repetition, started=started, finished=finished,
        status="ok" if error is None else "error", error=error, metrics=dict(metrics or {}),
        result=dict(result or {}), topology={} if topology is None else topology,
        qdiscs=[] if qdiscs is None else qdiscs)


def _topology_failed(con: sqlite3.Connection, run_id: str, exp: Experiment,
                     members: Sequence[TrialPlan], what: str, exc: TestbedError,
                     prog: Progress) -> int:
    """The topology could not be built (or torn down): every trial of it left says why."""
    failed = 0
    for t in members:
        if t.key(run_id) in results.done_keys(con, run_id):
            continue
        now = time.time()
        results.write_trial(con, trial_row(exp, run_id, t, started=now, finished=now,
                                           error=f"{what}: {exc}"))
        prog.finish(ok=False)
        failed += 1
    prog.note(f"{what} failed: {exc}")
    return failed


@contextmanager
def _store_errors(con: sqlite3.Connection, db: Path, exp: Experiment) -> Iterator[None]:
    """A SQLite error while running (disk full, file removed) becomes a StoreError that says
    how many trials are kept and how to resume."""
    try:
        yield
    except sqlite3.Error as exc:
        try:
            run_id = results.unfinished_run(con, exp.name, exp.profile)
            kept = f"the {len(results.done_keys(con, run_id))} trials" if run_id else "the trials"
        except sqlite3.Error:
            kept = "the trials"
        quick = " --quick" if exp.profile == "quick" else ""
        raise results.store_error(
            db, exc, "storing a trial failed",
            hint=f"{kept} stored before are kept; fix the cause, then continue with: "
            f"testbed run {exp.file}{quick} --resume --db {db}",
        ) from None


def _clock_doc(guest_started: float) -> dict[str, Any]:
    """The clock a trial ran on, and its start and end on the guest's own clock (which, on a
    virtual clock, leaps ahead of the host's wall clock stored as started/finished)."""
    return {"clock": results.clock_info(),
            "guest_time": {"started": guest_started, "finished": time.time()}}


def trial_netns(tb: TestbedLike) -> frozenset[int]:
    """The inodes of the topology's network namespaces (a trial's daemons run there)."""
    found = (netlink.netns_inode(tb.netns(n)) for n in tb.topology.node_names)
    return frozenset(i for i in found if i is not None)


class HostWatch:
    """The machine over one trial, on the real clock only (its fidelity record): the CPU
    counters before and after, and a thread timing its own wakeups meanwhile."""

    def __init__(self, clock: Mapping[str, Any], netns: frozenset[int] = frozenset()) -> None:
        self.clock = str(clock.get("clock") or "real")
        self.window: dict[str, Any] | None = None
        self.netns = netns  # inodes of the trial's namespaces: what runs there is the trial's
        self._before: cpu.HostSample | None = None
        self._census: dict[int, cpu.ProcEntry] = {}
        self._wake: cpu.WakeProbe | None = None

    def __enter__(self) -> HostWatch:
        if self.clock == "real":
            self._census = cpu.census()
            self._before = cpu.sample_host()
            self._wake = cpu.WakeProbe()
            self._wake.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._before is not None and self._wake is not None:
            wake = self._wake.stop()
            window = cpu.host_window(self._before, cpu.sample_host())
            others = cpu.others_share(self._census, cpu.census(), window["seconds"],
                                      window["ncpu"], os.getpid(), self.netns)
            self.window = {**window, **others, "wake": wake}

    def record(self, result: Mapping[str, Any]) -> dict[str, Any]:
        if self.window is None:
            return fidelity.not_applicable(self.clock)
        return fidelity.record(self.window, result)


def _one(con: sqlite3.Connection, run_id: str, exp: Experiment, t: TrialPlan, tb: TestbedLike,
         topo_doc: Any, qdiscs: Any, do_trial: RunTrial, ctx: kinds.Context,
         prog: Progress, reruns: fidelity.Reruns) -> int:
    prog.start(t.label)
    result = {"params": t.params}
    earlier: list[list[str]] = []  # the reasons of suspect attempts rerun
    for attempt in range(1 + reruns.per_trial):
        started = results.wall_time()
        guest_started = time.time()
        try:
            # what the trial starts (servers, files, rules) ends with it
            with HostWatch(results.clock_info(), trial_netns(tb)) as watch, tb.scope():
                m = do_trial(tb, t, ctx)
            quality = watch.record(m.result)
        except Exception as exc:  # any failure is this trial's, never the run's
            reason = (str(exc) if isinstance(exc, TestbedError)
                      else f"{type(exc).__name__}: {exc}")
            results.write_trial(con, trial_row(
                exp, run_id, t, started=started, finished=results.wall_time(), error=reason,
                result={**result, **_clock_doc(guest_started),
                        "description": t.measurement.description},
                topology=topo_doc, qdiscs=qdiscs))
            prog.finish(ok=False)
            prog.note(f"trial failed: {t.label}: {reason}")
            return 1
        if quality["verdict"] != fidelity.SUSPECT or attempt == reruns.per_trial:
            break
        if not reruns.take():
            if not reruns.spent_once:
                reruns.spent_once = True
                prog.note("no more reruns of suspect trials in this run (the host is busy): "
                          "they are kept, left out of the verdicts")
            break
        earlier.append(list(quality["reasons"]))
        prog.note(f"suspect trial, measured again ({attempt + 1} of {reruns.per_trial}): "
                  f"{t.label}: " + "; ".join(quality["reasons"]))
    if earlier:
        quality = {**quality, "earlier_attempts": earlier}
    results.write_trial(con, trial_row(
        exp, run_id, t, started=started, finished=results.wall_time(), metrics=m.metrics,
        result={**result, **m.result, **_clock_doc(guest_started),
                "units": kinds.units_of(t.measurement.kind, m.metrics),
                "description": t.measurement.description, fidelity.KEY: quality},
        topology=topo_doc, qdiscs=qdiscs))
    prog.finish()
    if quality["verdict"] == fidelity.SUSPECT:
        prog.note(f"suspect trial (kept, left out of verdicts): {t.label}: "
                  + "; ".join(quality["reasons"]))
    return 0
