"""The results database (SQLite): versioned schema, one row per trial, provenance, query, export."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import processes
from testbed.errors import TestbedError, UsageError

SCHEMA_VERSION = 1
DEFAULT_DB = Path("results/testbed.sqlite")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    experiment TEXT NOT NULL,
    profile TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    planned INTEGER NOT NULL DEFAULT 0,
    provenance TEXT NOT NULL,
    spec TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    trial_key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    experiment TEXT NOT NULL,
    profile TEXT NOT NULL,
    measurement TEXT NOT NULL,
    kind TEXT NOT NULL,
    point TEXT NOT NULL,
    group_key TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    started REAL NOT NULL,
    finished REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    error TEXT,
    metrics TEXT NOT NULL,
    result TEXT NOT NULL,
    topology TEXT NOT NULL,
    qdiscs TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trials_group ON trials (experiment, measurement, group_key);
CREATE INDEX IF NOT EXISTS trials_run ON trials (run_id);
"""


def default_db() -> Path:
    """$TESTBED_DB if set, else results/testbed.sqlite."""
    env = os.environ.get("TESTBED_DB")
    return Path(env) if env else DEFAULT_DB


def canonical(obj: Any) -> str:
    """Stable JSON text (sorted keys, no spaces) used for keys and stored documents."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class TrialRow:
    """One stored trial."""

    trial_key: str
    run_id: str
    experiment: str
    profile: str
    measurement: str
    kind: str
    point: dict[str, Any]
    group_key: str
    repetition: int
    started: float
    finished: float
    status: str
    error: str | None
    metrics: dict[str, float]
    result: dict[str, Any]
    topology: Any
    qdiscs: Any

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _set_wal(con: sqlite3.Connection, deadline_s: float = 30.0) -> None:
    """Switch to WAL; the switch ignores SQLite's busy timeout when another process is creating
    the same new database, so it is retried (until the deadline) instead of failing at once."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > end:
                raise
            time.sleep(0.02)


class StoreError(UsageError):
    """The results database cannot be opened or written (path, permissions, not SQLite, full)."""


def store_error(path: Path, exc: BaseException, doing: str, hint: str | None = None) -> StoreError:
    """One clear message for an OS or SQLite error on the results database at `path`."""
    text = str(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)
    if hint is None:
        if isinstance(exc, sqlite3.OperationalError) and "full" in text:
            hint = "free some space (or pass another --db)"
        elif isinstance(exc, sqlite3.DatabaseError) and "not a database" in text:
            hint = "that file is not a testbed results database: pass another --db"
        else:
            hint = "pass --db with a writable file path, e.g. --db results/mine.sqlite"
    return StoreError(f"results database {path}: {doing}: {text}", hint=hint)


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) a results database; refuse one with a newer schema.

    Every OS or SQLite error becomes a StoreError naming the path (exit 2)."""
    try:
        if path.is_dir():
            raise StoreError(
                f"results database {path}: is a directory",
                hint=f"pass a file path, e.g. --db {path / 'testbed.sqlite'}",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(str(path), timeout=30.0)
    except (OSError, sqlite3.Error) as exc:
        raise store_error(path, exc, "cannot open it") from None
    try:
        return _prepare(con, path)
    except BaseException as exc:
        con.close()
        if isinstance(exc, OSError | sqlite3.Error):
            raise store_error(path, exc, "cannot open it") from None
        raise


def _prepare(con: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    con.row_factory = sqlite3.Row
    _set_wal(con)
    con.execute("PRAGMA synchronous=FULL")
    with con:
        con.executescript(_SCHEMA)
        # OR IGNORE: two processes opening a new database at once (a run and a reader) both
        # find no version row; the second insert must not fail.
        con.execute(
            "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
        row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is not None and int(row["value"]) > SCHEMA_VERSION:
        raise UsageError(
            f"{path}: results schema version {row['value']} is newer than this testbed's "
            f"({SCHEMA_VERSION})",
            hint="upgrade testbed, or choose another database with --db",
        )
    return con


def schema_version(con: sqlite3.Connection) -> int:
    row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row["value"])


def _cmd_version(argv: Sequence[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        p = processes.run(argv, check=False, timeout=5)
    except (OSError, TestbedError):
        return None
    out = (p.stdout or p.stderr).strip().splitlines()
    return out[0] if out else None


def _git_revision() -> str | None:
    here = Path(__file__).resolve().parent.parent
    if shutil.which("git") is None:
        return None
    try:
        rev = processes.run(["git", "-C", str(here), "rev-parse", "HEAD"], check=False, timeout=5)
        dirty = processes.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            check=False, timeout=5)
    except (OSError, TestbedError):
        return None
    if rev.returncode != 0:
        return None
    return str(rev.stdout).strip() + ("-dirty" if dirty.stdout.strip() else "")


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return platform.processor() or None


ENV_HOST_TOOLS = "TESTBED_HOST_TOOLS"
"""In the full-kernel tier: a JSON file of `tool_provenance()` as the host computed it before
the boot. The guest runs the host's own files (its root is the host's, shared read-only), so
the programs and the checkout are the same; starting a dozen programs and `git status` over 9p
under emulation takes seconds of every guest's start."""


def tool_provenance() -> dict[str, Any]:
    """The checkout's git revision and the versions of the programs testbed runs."""
    return {
        "git_revision": _git_revision(),
        "tools": {
            "iperf3": _cmd_version(["iperf3", "--version"]),
            "ping": _cmd_version(["ping", "-V"]),
            "tc": _cmd_version(["tc", "-V"]),
            "ip": _cmd_version(["ip", "-V"]),
            **_feature_versions(),
        },
    }


def _host_tools() -> dict[str, Any]:
    """`tool_provenance()` from the host's file where `testbed vm` left one, else computed."""
    path = os.environ.get(ENV_HOST_TOOLS)
    if path:
        try:
            found = json.loads(Path(path).read_text())
            if isinstance(found, dict) and isinstance(found.get("tools"), dict):
                return {"git_revision": found.get("git_revision"), "tools": found["tools"]}
        except (OSError, ValueError):
            pass
    return tool_provenance()


def provenance() -> dict[str, Any]:
    """Where and with what a run was made: kernel, tools, testbed version and revision, CPU."""
    import sys

    from testbed import __version__

    tools = _host_tools()
    return {
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "ncpu": os.cpu_count(),
        "python": sys.version.split()[0],
        "testbed_version": __version__,
        "git_revision": tools["git_revision"],
        "tools": tools["tools"],
        "recorded_at": wall_time(),
        "clock": clock_info(),
    }


def _feature_versions() -> dict[str, str | None]:
    """The versions of the programs node features run (as they declare), where installed."""
    from testbed import features

    return {
        p.name: _cmd_version(list(p.version_argv)) if shutil.which(p.name) else None
        for p in features.programs()
        if p.version_argv
    }


def wall_time() -> float:
    """The host's wall clock, also in a virtual-clock guest (whose own clock leaps ahead)."""
    from testbed.waiting import host_time

    return host_time()


def clock_info() -> dict[str, Any]:
    """The clock this process measures on (stored with every trial; see testbed.waiting)."""
    from testbed.waiting import clock_info as info

    return info()


UNRECORDED_CLOCK = "real(not recorded)"


def clock_kind(doc: Any) -> str | None:
    """'virtual' or 'real' from a stored clock document (`clock_info()`, in a trial's result or a
    run's provenance), or from a plain string; None when nothing was recorded."""
    if isinstance(doc, Mapping):
        doc = doc.get("clock")
    return str(doc) if isinstance(doc, str) and doc else None


def clock_label(row: TrialRow) -> str:
    """The clock a stored trial was measured on: statistics never mix two of them."""
    clock = row.result.get("clock") if isinstance(row.result, dict) else None
    if isinstance(clock, dict) and clock.get("label"):
        return str(clock["label"])
    return UNRECORDED_CLOCK


def start_run(con: sqlite3.Connection, experiment: str, profile: str, spec: Mapping[str, Any],
              prov: Mapping[str, Any], planned: int, run_id: str | None = None) -> str:
    """Record a new run and return its id (`run_id`: this id, e.g. a parallel run's worker
    recording its share under the run it belongs to; kept if already there)."""
    if run_id is None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(wall_time()))
        run_id = stamp + "-" + uuid.uuid4().hex[:6]
    with con:
        con.execute(
            "INSERT OR IGNORE INTO runs (run_id, experiment, profile, started, planned, "
            "provenance, spec) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run_id, experiment, profile, wall_time(), planned, canonical(prov), canonical(spec)),
        )
    return run_id


def unfinished_run(con: sqlite3.Connection, experiment: str, profile: str) -> str | None:
    """The latest run of this experiment and profile that did not finish, if any."""
    row = con.execute(
        "SELECT run_id FROM runs WHERE experiment=? AND profile=? AND finished IS NULL "
        "ORDER BY started DESC LIMIT 1", (experiment, profile),
    ).fetchone()
    return str(row["run_id"]) if row else None


def finish_run(con: sqlite3.Connection, run_id: str) -> None:
    with con:
        con.execute("UPDATE runs SET finished=? WHERE run_id=?", (wall_time(), run_id))


def done_keys(con: sqlite3.Connection, run_id: str) -> set[str]:
    """Keys of the trials of a run that finished successfully."""
    rows = con.execute("SELECT trial_key FROM trials WHERE run_id=? AND status='ok'", (run_id,))
    return {str(r["trial_key"]) for r in rows}


def recorded_keys(con: sqlite3.Connection, run_id: str) -> set[str]:
    """Keys of the trials of a run that have a row, ok or error."""
    rows = con.execute("SELECT trial_key FROM trials WHERE run_id=?", (run_id,))
    return {str(r["trial_key"]) for r in rows}


COLUMNS = ("trial_key", "run_id", "experiment", "profile", "measurement", "kind", "point",
           "group_key", "repetition", "started", "finished", "status", "error", "metrics",
           "result", "topology", "qdiscs")
"""The trials table's columns, in order: a stored row as `put_trial` takes it."""
_DOCUMENTS = ("point", "metrics", "result", "topology", "qdiscs")  # stored as canonical JSON


def row_values(row: TrialRow) -> dict[str, Any]:
    """A trial as the trials table stores it: column -> value (documents as canonical JSON)."""
    doc = row.to_dict()
    return {c: canonical(doc[c]) if c in _DOCUMENTS else doc[c] for c in COLUMNS}


def put_trial(con: sqlite3.Connection, values: Mapping[str, Any], *, retry: bool = False
              ) -> bool:
    """The one writer of the trials table (in the caller's transaction): a stored success is
    never replaced, a stored error is replaced by a success — and, with `retry` (a new
    attempt of the trial by the run it belongs to), by a new error too. True if stored."""
    old = con.execute("SELECT status FROM trials WHERE trial_key=?",
                      (values["trial_key"],)).fetchone()
    if old is not None:
        if old[0] == "ok" or (values["status"] != "ok" and not retry):
            return False
        con.execute("DELETE FROM trials WHERE trial_key=?", (values["trial_key"],))
    con.execute(f"INSERT INTO trials ({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
                tuple(values[c] for c in COLUMNS))
    return True


def write_trial(con: sqlite3.Connection, row: TrialRow) -> None:
    """Store one trial of this run at once (committed). A trial key is written once; an error
    row may be replaced by a later attempt of the same trial."""
    with con:
        put_trial(con, row_values(row), retry=True)


def _row(r: sqlite3.Row) -> TrialRow:
    return TrialRow(
        trial_key=r["trial_key"], run_id=r["run_id"], experiment=r["experiment"],
        profile=r["profile"], measurement=r["measurement"], kind=r["kind"],
        point=json.loads(r["point"]), group_key=r["group_key"], repetition=r["repetition"],
        started=r["started"], finished=r["finished"], status=r["status"], error=r["error"],
        metrics=json.loads(r["metrics"]), result=json.loads(r["result"]),
        topology=json.loads(r["topology"]), qdiscs=json.loads(r["qdiscs"]),
    )


def trials(con: sqlite3.Connection, *, experiment: str | None = None, run_id: str | None = None,
           measurement: str | None = None, status: str | None = None,
           group_key: str | None = None) -> Iterator[TrialRow]:
    """Stored trials, filtered, in the order they finished."""
    where, args = [], []
    for col, val in (("experiment", experiment), ("run_id", run_id),
                     ("measurement", measurement), ("status", status),
                     ("group_key", group_key)):
        if val is not None:
            where.append(f"{col}=?")
            args.append(val)
    sql = "SELECT * FROM trials" + (" WHERE " + " AND ".join(where) if where else "")
    for r in con.execute(sql + " ORDER BY finished, trial_key", args):
        yield _row(r)


def runs(con: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every run with its trial counts."""
    out = []
    for r in con.execute(
        "SELECT r.*, (SELECT COUNT(*) FROM trials t WHERE t.run_id=r.run_id AND t.status='ok') "
        "AS ok, (SELECT COUNT(*) FROM trials t WHERE t.run_id=r.run_id AND t.status='error') "
        "AS errors FROM runs r ORDER BY started"
    ):
        spec = json.loads(r["spec"])
        out.append({
            "paper": (spec.get("paper") or None) if isinstance(spec, dict) else None,
            "run_id": r["run_id"], "experiment": r["experiment"], "profile": r["profile"],
            "started": r["started"], "finished": r["finished"], "planned": r["planned"],
            "ok": r["ok"], "errors": r["errors"], "provenance": json.loads(r["provenance"]),
        })
    return out


def merge(src: Path, dst: Path) -> int:
    """Copy the runs and trials of `src` that `dst` lacks into `dst`; return how many trials."""
    if not src.exists():
        raise UsageError(f"no results database at {src}")
    with closing(connect(src)) as s, closing(connect(dst)) as d:
        copied = 0
        with d:
            for r in s.execute("SELECT * FROM runs"):
                d.execute("INSERT OR IGNORE INTO runs VALUES (?,?,?,?,?,?,?,?)", tuple(r))
                if r["finished"] is not None:
                    d.execute("UPDATE runs SET finished=? WHERE run_id=? AND finished IS NULL",
                              (r["finished"], r["run_id"]))
            for r in s.execute("SELECT * FROM trials"):
                copied += put_trial(d, dict(r))
    return copied


# --- reading for reports -------------------------------------------------------------------


def stored_units(row: TrialRow) -> dict[str, str]:
    """metric -> unit as stored with a trial (empty for trials stored before units were)."""
    units = row.result.get("units") if isinstance(row.result, dict) else None
    return {str(k): str(v) for k, v in units.items()} if isinstance(units, dict) else {}


def run_spec(con: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The experiment as resolved for a run (`Experiment.to_dict()`: paper, descriptions...)."""
    row = con.execute("SELECT spec FROM runs WHERE run_id=?", (run_id,)).fetchone()
    spec = json.loads(row["spec"]) if row is not None else {}
    return spec if isinstance(spec, dict) else {}


def group_stats(rows: Sequence[TrialRow]) -> list[dict[str, Any]]:
    """Per group (experiment, measurement, sweep point without repetition, clock): statistics
    of every metric over the repetitions that succeeded. Trials measured on different clocks
    (`clock_label`: virtual with its icount shift, real with its kernel) are never pooled.
    `suspect` counts the trials whose host did not keep up (testbed.fidelity; they stay in
    these statistics, the report leaves them out), `fidelity` holds each trial's record."""
    from testbed import fidelity
    from testbed.stats import describe

    groups: dict[tuple[str, str, str, str], list[TrialRow]] = {}
    for r in rows:
        if r.status == "ok":
            key = (r.experiment, r.measurement, r.group_key, clock_label(r))
            groups.setdefault(key, []).append(r)
    out = []
    for (exp, meas, gkey, clock), members in groups.items():
        metrics: dict[str, list[float]] = {}
        units: dict[str, str] = {}
        for m in members:
            for k, v in m.metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    metrics.setdefault(k, []).append(float(v))
            units.update(stored_units(m))
        first = members[0]
        out.append({
            "experiment": exp, "measurement": meas, "kind": first.kind, "point": first.point,
            "group_key": gkey, "clock": clock, "trials": len(members),
            "description": first.result.get("description", "")
            if isinstance(first.result, dict) else "",
            "metrics": {k: describe(v).to_dict() for k, v in sorted(metrics.items())},
            "units": {k: units[k] for k in sorted(metrics) if k in units},
            "suspect": sum(fidelity.is_suspect(m.result) for m in members),
            "fidelity": [{"trial": m.trial_key, "repetition": m.repetition,
                          "verdict": fidelity.verdict(m.result),
                          "record": m.result.get(fidelity.KEY)} for m in members],
        })
    return out


def export_json(rows: Sequence[TrialRow]) -> str:
    return json.dumps([r.to_dict() for r in rows], indent=1, sort_keys=True, default=str)


def export_csv(rows: Sequence[TrialRow]) -> str:
    """One line per trial: identity, sweep point (`p.` columns) and metrics (`m.` columns)."""
    pkeys = sorted({k for r in rows for k in r.point})
    mkeys = sorted({k for r in rows for k in r.metrics})
    buf = io.StringIO()
    w = csv.writer(buf)
    head = ["run_id", "experiment", "profile", "measurement", "kind", "repetition", "status",
            "started", "finished", "error"]
    w.writerow(head + [f"p.{k}" for k in pkeys] + [f"m.{k}" for k in mkeys])
    for r in rows:
        w.writerow(
            [r.run_id, r.experiment, r.profile, r.measurement, r.kind, r.repetition, r.status,
             f"{r.started:.3f}", f"{r.finished:.3f}", r.error or ""]
            + [r.point.get(k, "") for k in pkeys]
            + [r.metrics.get(k, "") for k in mkeys]
        )
    return buf.getvalue()
