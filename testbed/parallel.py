"""Parallel runs (`testbed run --workers N`): an experiment's trials split into shares of whole
sweep points, each run by a worker process (`testbed run --share`, on the VM tier in its own
guest) into its own database, streamed into the run's database without loss or duplicates."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from testbed import processes, results, sequential
from testbed.experiment import RunSummary, trial_row
from testbed.experiment_spec import Experiment, for_clock, plan
from testbed.progress import format_duration
from testbed.shares import Share, split
from testbed.tiers import timed_kinds

POLL_S = 0.5
ENV_WORKER = "TESTBED_WORKER"
"""The worker's name, set for the process running a share (recorded in each trial's placement)."""


SHARES_PER_WORKER = 3
"""At most this many shares per worker in a local run; a worker that finishes one takes the
next. The split balances trial counts, not their cost: in quintero-2016's guests a CPU-bound
UDP trial at 100 Mbit/s takes ~30 s and an OWD trial ~3 s, and with one share a worker one guest
sat idle for 35 of 100 minutes (28 Nov)."""

TRIALS_PER_SHARE = 40
"""The fewest trials a share more is worth: each costs a guest's boot (~20 s, some 7 trials'
worth), so a quick profile keeps one share a worker."""


def share_count(trials: int, workers: int) -> int:
    """How many shares `testbed run --workers N` cuts `trials` into."""
    if workers <= 1:
        return 1
    return workers * min(SHARES_PER_WORKER, max(1, trials // (workers * TRIALS_PER_SHARE)))


BARREN_LIMIT = 2
"""Shares in a row whose worker exits with an error before recording a trial, after which
the run's remaining trials of such a share are recorded as failed instead of retried."""


# --- a worker's database, read while it is written ------------------------------------------


def read_rows(db: Path, after: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Trials committed to a worker's database since rowid `after`, and the new high mark."""
    if not db.exists():
        return [], after
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30.0)) as con:
            con.row_factory = sqlite3.Row
            rows = con.execute("SELECT rowid AS rid, * FROM trials WHERE rowid > ? "
                               "ORDER BY rowid", (after,)).fetchall()
    except sqlite3.OperationalError:
        return [], after  # not created yet
    out = [{c: r[c] for c in results.COLUMNS} for r in rows]
    return out, max([after, *(int(r["rid"]) for r in rows)])


JOURNAL = "journal.jsonl"
"""Beside a share file: the trials a worker in a guest has committed, one JSON row a line, so
that they reach the coordinator as they finish (the guest's database is merged out only at
the end)."""


class Journal:
    """While a guest's worker runs: copies each trial committed to `db` to `path` (appended,
    flushed, synced). The worker calls `copy` after each trial it commits (`on_commit` of
    run_experiment), between trials: no thread wakes inside the guest while a trial measures
    (on the virtual clock, a wake-up at a point that depends on host I/O shifts the
    measurement); the last copy is made on exit."""

    def __init__(self, db: Path, path: Path) -> None:
        self.db, self.path = db, path
        self.mark = 0

    def copy(self) -> None:
        with suppress(OSError, sqlite3.Error):
            rows, mark = read_rows(self.db, self.mark)
            if rows:
                with self.path.open("a") as f:
                    f.write("".join(json.dumps(r) + "\n" for r in rows))
                    f.flush()
                    os.fsync(f.fileno())
            self.mark = mark  # only once written: a failed copy is tried again next time

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.copy()


def read_journal(path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete rows of a journal from byte `offset`, and the offset after them."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    rows = [json.loads(x) for x in chunk[:end].decode().splitlines() if x.strip()]
    return rows, offset + end


def store_row(con: sqlite3.Connection, row: Mapping[str, Any],
              placement: Mapping[str, Any]) -> bool:
    """Store a worker's trial row in the run's database with where it ran (`result.placement`:
    worker, host, kernel, clock), through the one writer `results.put_trial`: a stored success
    is never replaced, an error only by a success. True if stored."""
    result = json.loads(row["result"])
    clock = result.get("clock") if isinstance(result.get("clock"), dict) else {}
    result["placement"] = {**placement, "kernel": clock.get("kernel", placement.get("kernel")),
                           "clock": clock.get("label", results.UNRECORDED_CLOCK)}
    with con:
        return results.put_trial(con, {**row, "result": results.canonical(result)})


def here() -> dict[str, Any]:
    """Where this process runs: host name and kernel release (a trial's placement)."""
    return {"host": platform.node(), "kernel": platform.release()}


# --- running one share ----------------------------------------------------------------------


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """A worker's child dies with it (prctl PR_SET_PDEATHSIG): no orphan keeps measuring."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def _descendant_groups(root: int) -> set[int]:
    """Process groups of `root`'s descendants other than its own (a guest's vng/QEMU runs in
    a session of its own, which PR_SET_PDEATHSIG does not reach)."""
    parent: dict[int, int] = {}
    group: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(d.name)], group[int(d.name)] = int(fields[1]), int(fields[2])
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        for child, pp in parent.items():
            if pp == p:
                todo.append(child)
                out.add(group[child])
    return out - {group.get(root, root)}


def _kill_groups(groups: set[int]) -> None:
    """What a killed worker left running (its guest): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(g, sig)
        if sig == signal.SIGTERM:
            time.sleep(1.0)


def worker_argv(exp_file: str, profile: str, clock: str | None) -> list[str]:
    """`testbed run` as a worker runs its share (`--share FILE --db DB` are appended)."""
    argv = [sys.executable, "-m", "testbed.cli", "run", exp_file]
    if profile == "quick":
        argv.append("--quick")
    if clock:
        argv += ["--clock", clock]
    return argv


@dataclass
class ShareOutcome:
    share: Share
    worker: str
    returncode: int | None  # None: the worker itself was lost (cluster)
    why: str  # how it ended, for the error rows of trials a dead worker left
    rows: list[dict[str, Any]] = field(default_factory=list)
    placement: dict[str, Any] = field(default_factory=dict)
    rerun: bool = False  # a scheduler re-ran a share whose first attempt died: not run again


def execute_share(share: Share, argv_prefix: Sequence[str], workdir: Path, worker: str,
                  on_rows: Callable[[list[dict[str, Any]]], None],
                  files: Mapping[str, str] | None = None, poll_s: float = POLL_S,
                  on_output: Callable[[list[str]], None] | None = None,
                  stop: threading.Event | None = None) -> ShareOutcome:
    """Run one share in a child process (`argv_prefix + --share FILE --db DB`; `{dir}` in it is
    the share's folder, where `files` are written) and hand each trial to `on_rows` as soon as
    the worker commits it (a guest's trials come when it ends), and its output lines (its own
    progress) to `on_output`. The child is killed if this process dies, and stopped (SIGTERM:
    it removes what it built) when `stop` is set."""
    sdir = workdir / f"share-{share.index}-{share.attempt}"
    sdir.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (sdir / name).write_text(text)
    share_file = sdir / "share.json"
    share_file.write_text(json.dumps(share.to_dict()))
    wdb = sdir / "trials.sqlite"
    argv = [a.replace("{dir}", str(sdir)) for a in argv_prefix]
    argv += ["--share", str(share_file), "--db", str(wdb)]
    env = {**os.environ, ENV_WORKER: worker}
    log = sdir / "worker.log"
    rows_all: list[dict[str, Any]] = []
    mark = joff = 0
    seen = 0
    groups: set[int] = set()

    def forward() -> None:
        nonlocal seen
        if on_output is None:
            return
        with log.open("rb") as f:
            f.seek(seen)
            chunk = f.read()
        done = chunk.rfind(b"\n") + 1
        seen += done
        lines = [x for x in chunk[:done].decode(errors="replace").splitlines() if x.strip()]
        if lines:
            on_output(lines)

    with log.open("w") as out:
        proc = processes.spawn(argv, what="starting a worker", stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=os.getcwd(),
                                preexec_fn=_die_with_parent)
        try:
            while True:
                rc = proc.poll()
                rows, mark = read_rows(wdb, mark)
                journaled, joff = read_journal(sdir / JOURNAL, joff)
                rows += journaled
                if rows:
                    rows_all += rows
                    on_rows(rows)
                forward()
                if rc is not None or (stop is not None and stop.is_set()):
                    break
                groups |= _descendant_groups(proc.pid)
                time.sleep(poll_s)
        finally:
            if proc.poll() is None:
                proc.terminate()  # testbed run removes what it built on SIGTERM
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            rc = proc.returncode
            if rc < 0 and groups:
                _kill_groups(groups)  # the worker was killed: so is what it started
    tail = log.read_text(errors="replace").strip().splitlines()[-3:]
    why = (f"exit {rc}" if rc >= 0 else f"killed by signal {-rc}") + (
        f"; last output: {' | '.join(tail)}" if tail else "")
    return ShareOutcome(share, worker, rc, why, rows_all, here())


# --- the run: shares, retries, progress, merge --------------------------------------------


class RunBook:
    """The run's database seen by the coordinator: stores what workers commit, says what is
    missing, retries a dead worker's share once, then records the rest as failed."""

    def __init__(self, exp: Experiment, db: Path, resume: bool, stream: TextIO | None = None,
                 clock: str | None = None) -> None:
        exp = for_clock(exp, clock or exp.clock)  # the trials its workers list, on their clock
        self.exp = exp
        self.db = db
        self.trials = plan(exp)
        self.con = results.connect(db)
        run_id = results.unfinished_run(self.con, exp.name, exp.profile) if resume else None
        self.resumed = run_id is not None
        self.run_id = run_id or results.start_run(self.con, exp.name, exp.profile,
                                                  exp.to_dict(), results.provenance(),
                                                  len(self.trials))
        self.by_key = {t.key(self.run_id): t for t in self.trials}
        done = results.done_keys(self.con, self.run_id) | self.spared(list(self.by_key))
        self.todo = [t for t in self.trials if t.key(self.run_id) not in done]
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.monotonic()
        self.stored = 0
        self.failed = 0
        self.shares = 0  # share indexes handed out
        self.barren = 0  # shares in a row whose worker exited with an error, recording nothing
        self.gave_up = ""  # why the rest is recorded as failed (BARREN_LIMIT reached)

    def adopt(self, workdir: Path) -> int:
        """On resume: store what workers of an interrupted coordinator committed to their own
        databases (left in `workdir`) before planning what is left; how many trials."""
        adopted = 0
        for wdb in sorted(workdir.glob("share-*/trials.sqlite")):
            rows, _ = read_rows(wdb)
            for r in rows:
                if r["run_id"] == self.run_id and r["trial_key"] in self.by_key:
                    adopted += store_row(self.con, r, {"worker": wdb.parent.name, **here()})
        done = results.done_keys(self.con, self.run_id)
        self.todo = [t for t in self.todo if t.key(self.run_id) not in done]
        shutil.rmtree(workdir, ignore_errors=True)
        return adopted

    def note(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def store(self, rows: Sequence[Mapping[str, Any]], worker: str,
              placement: Mapping[str, Any]) -> None:
        for r in rows:
            if r["run_id"] != self.run_id or r["trial_key"] not in self.by_key:
                continue
            if store_row(self.con, r, {"worker": worker, **placement}):
                self.stored += 1
                done = len(self.trials) - len(self.todo) + self.stored
                spent = time.monotonic() - self.t0
                left = (spent / self.stored) * (len(self.todo) - self.stored)
                t = self.by_key[r["trial_key"]]
                status = "ok" if r["status"] == "ok" else "FAILED"
                self.note(f"[{done}/{len(self.trials)}] {t.label} on {worker}: {status} "
                          f"({format_duration(spent)} elapsed, ~{format_duration(left)} left)")

    def missing(self, share: Share) -> tuple[str, ...]:  # neither recorded nor spared
        have = results.recorded_keys(self.con, self.run_id) | self.spared(share.keys)
        return tuple(k for k in share.keys if k not in have)

    def spared(self, keys: Sequence[str]) -> set[str]:
        """Those of `keys` their cell's precision rule leaves unrun (testbed.sequential)."""
        return sequential.unneeded(self.con, self.run_id, [self.by_key[k] for k in keys])

    def settle(self, out: ShareOutcome) -> list[Share]:
        """After a share ended, what it left unrecorded: a worker runs its share in plan
        order, so the first missing trial is the one it died in; that one is retried once
        alone (a second loss records it as failed, with the reason), the rest, never
        started, go on as a share of their own."""
        self.store(out.rows, out.worker, out.placement)
        left = self.missing(out.share)
        # A worker that exits with an error (not killed) before recording anything failed
        # outside its trials (a trial's own failure is recorded, never fatal): a broken
        # install, a guest that cannot start. Twice in a row, the rest would fail alike.
        barren = (out.returncode is not None and out.returncode > 0
                  and len(left) == len(out.share.keys))
        self.barren = self.barren + 1 if barren else 0
        if not left:
            return []
        if self.barren >= BARREN_LIMIT:
            why = (f"{self.barren} workers in a row ended before their first trial (last: "
                   f"{out.worker}, {out.why})")
            self.gave_up = f"{why}; fix that, then testbed run --resume"
            self.fail_all(left, self.gave_up)
            self.note(f"{why}: {len(left)} trials recorded as failed")
            return []
        if out.share.attempt == 1:
            self.note(f"worker {out.worker} ended ({out.why}) with {len(left)} of "
                      f"{len(out.share.keys)} trials unrecorded: retrying the one it was "
                      "running once, and the rest")
            retry = [Share(self._next(), self.run_id, left[:1], attempt=2)]
            if left[1:]:
                retry.append(Share(self._next(), self.run_id, left[1:]))
            return retry
        key, rest = left[0], left[1:]
        self.fail_all([key], f"lost twice with its worker (last: {out.worker}, {out.why}); "
                      "rerun with testbed run --resume")
        self.note(f"worker {out.worker} ended ({out.why}) again in {self.by_key[key].label}: "
                  "recorded as failed")
        return [Share(self._next(), self.run_id, rest)] if rest else []

    def abandon(self, pending: list[Share]) -> None:
        """Once the run gave up (`gave_up`), the shares not started would fail alike: their
        trials are recorded as failed with the same reason, and `pending` emptied."""
        if self.gave_up:
            for share in pending:
                self.fail_all(self.missing(share), self.gave_up)
            pending.clear()

    def fail_all(self, keys: Sequence[str], error: str) -> None:
        """Record `keys` as failed trials with `error`: a run ends, it never hangs retrying."""
        now = results.wall_time()
        for key in keys:
            t = self.by_key[key]
            results.write_trial(self.con, trial_row(self.exp, self.run_id, t, started=now,
                                                    finished=now, error=error,
                                                    result={"params": t.params}))
        self.failed += len(keys)

    def _next(self) -> int:
        self.shares += 1
        return self.shares - 1

    def finish(self) -> RunSummary:
        keys = [t.key(self.run_id) for t in self.trials]
        spared = self.spared(keys)
        todo = [t.key(self.run_id) for t in self.todo]
        rows = {r.trial_key: r.status for r in results.trials(self.con, run_id=self.run_id)}
        if all(rows.get(k) == "ok" or k in spared for k in keys):
            results.finish_run(self.con, self.run_id)
        ran = sum(1 for k in todo if rows.get(k) == "ok")
        failed = sum(1 for k in todo if rows.get(k) == "error")
        self.con.close()
        return RunSummary(self.run_id, len(keys), len(keys) - len(todo), ran, failed, self.db,
                          spared=sum(1 for k in todo if k in spared))


def run_local(exp: Experiment, exp_file: Path, *, db: Path, workers: int, resume: bool = False,
              clock: str | None = None, argv_prefix: Sequence[str] | None = None,
              stream: TextIO | None = None) -> RunSummary:
    """Run `exp` with `workers` worker processes on this machine (each, on the virtual clock,
    in its own guest), merging every trial into `db` as it is committed."""
    book = RunBook(exp, db, resume, stream, clock)
    prefix = list(argv_prefix or worker_argv(str(exp_file.resolve()), exp.profile, clock))
    workdir = db.resolve().parent / f".parallel-{book.run_id}"
    if book.resumed and workdir.is_dir():
        n = book.adopt(workdir)
        book.note(f"stored {n} trials that workers of the interrupted run had committed")
    shares = split(book.todo, book.run_id, share_count(len(book.todo), workers))
    book.shares = len(shares)
    if book.resumed:
        book.note(f"resuming run {book.run_id}: {len(book.trials) - len(book.todo)} of "
                  f"{len(book.trials)} trials already done")
    book.note(f"run {book.run_id}: {len(book.todo)} trials in {len(shares)} shares on "
              f"{workers} workers (sizes {', '.join(str(len(s.keys)) for s in shares)})")
    inbox: queue.Queue[tuple[list[dict[str, Any]], str]] = queue.Queue()
    lines: queue.Queue[str] = queue.Queue()
    lost = False
    free = [f"local-{i}" for i in range(workers)]
    pending = list(shares)
    stop = threading.Event()

    def interrupted(signum: int, frame: Any) -> None:
        from testbed.testbed import Interrupted

        raise Interrupted(signum)

    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, interrupted) if main else None
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            running: dict[Future[ShareOutcome], str] = {}

            def submit(s: Share) -> None:
                name = free.pop(0)
                running[pool.submit(
                    execute_share, s, prefix, workdir, name,
                    lambda rows: inbox.put((rows, name)),
                    on_output=lambda out: lines.put("\n".join(f"  {name}: {x}" for x in out)),
                    stop=stop)] = name

            try:
                while running or pending:
                    while pending and free:
                        submit(pending.pop(0))
                    time.sleep(POLL_S)
                    while not lines.empty():
                        book.note(lines.get())
                    while not inbox.empty():
                        rows, name = inbox.get()
                        book.store(rows, name, here())
                    for fut in [f for f in running if f.done()]:
                        free.append(running.pop(fut))
                        out = fut.result()
                        while not inbox.empty():
                            rows, name = inbox.get()
                            book.store(rows, name, here())
                        lost = lost or out.returncode not in (0, 1)
                        pending += book.settle(out)
                        book.abandon(pending)
            except BaseException:
                stop.set()  # the workers are stopped (SIGTERM) and what they committed kept
                for fut in running:
                    out = fut.result()
                    book.store(out.rows, out.worker, out.placement)
                book.con.close()
                raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, old)
    summary = book.finish()
    if not lost:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        book.note(f"workers' logs and databases kept in {workdir}")
    return summary


CORES_PER_TRIAL = 2  # a sender and a receiver


def host_interference(exp: Experiment, workers: int, ncpu: int | None = None) -> str | None:
    """Why `workers` parallel trials on the host's real clock would disturb each other's
    numbers, or None when they cannot: only throughput measurements, on shaped links (the
    shaper, not the CPU, sets the rate), with a core for each sender and receiver."""
    if workers <= 1:
        return None
    from testbed.experiment_spec import topology_points

    timed = timed_kinds(exp)
    if timed:
        return (f"its {', '.join(timed)} measurements time delays or CPU costs, which "
                "other trials' load changes")
    unshaped = sorted({tp.label for tp in topology_points(exp)
                       if str(tp.params.get("rate", "unlimited")) == "unlimited"})
    if unshaped:
        return (f"links without a rate ({', '.join(unshaped)}): throughput is then bounded by "
                "the CPU, which the workers share")
    cores = ncpu if ncpu is not None else (os.cpu_count() or 1)
    if workers * CORES_PER_TRIAL > cores:
        return (f"{workers} workers need {workers * CORES_PER_TRIAL} cores (a sender and a "
                f"receiver each) and this machine has {cores}")
    return None
