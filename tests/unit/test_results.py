"""The results database: schema version, writes, merge, statistics and export."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from testbed import results
from testbed.errors import UsageError


def row(run: str, key: str, value: float, *, status: str = "ok", rep: int = 0,
        point: dict[str, object] | None = None) -> results.TrialRow:
    pt = point or {"ip": 4}
    return results.TrialRow(
        trial_key=f"{run}/{key}", run_id=run, experiment="exp", profile="full",
        measurement="m", kind="pingpong", point=pt, group_key=results.canonical(pt),
        repetition=rep, started=1.0, finished=2.0, status=status,
        error=None if status == "ok" else "boom", metrics={"owd_median_us": value},
        result={"x": value}, topology={"name": "chain"}, qdiscs=[],
    )


def make_db(path: Path, run: str, values: list[float]) -> None:
    with closing(results.connect(path)) as con:
        con.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                    (run, "exp", "full", 0.0, None, len(values), "{}", "{}"))
        con.commit()
        for i, v in enumerate(values):
            results.write_trial(con, row(run, str(i), v, rep=i))


def test_schema_version_recorded_and_newer_refused(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    with closing(results.connect(db)) as con:
        assert results.schema_version(con) == results.SCHEMA_VERSION
        con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
        con.commit()
    with pytest.raises(UsageError, match="newer"):
        results.connect(db)


def test_default_db_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TESTBED_DB", raising=False)
    assert results.default_db() == Path("results/testbed.sqlite")
    monkeypatch.setenv("TESTBED_DB", str(tmp_path / "vm.sqlite"))
    assert results.default_db() == tmp_path / "vm.sqlite"


def test_write_is_idempotent_and_error_is_replaced(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    make_db(db, "r1", [])
    with closing(results.connect(db)) as con:
        results.write_trial(con, row("r1", "a", 1.0, status="error"))
        results.write_trial(con, row("r1", "a", 2.0))
        results.write_trial(con, row("r1", "a", 3.0))  # already ok: kept as it was
        rows = list(results.trials(con))
        assert len(rows) == 1 and rows[0].status == "ok" and rows[0].metrics["owd_median_us"] == 2
        assert results.done_keys(con, "r1") == {"r1/a"}


def test_one_writer_ok_beats_error_and_a_retry_replaces_an_error(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    make_db(db, "r1", [])
    with closing(results.connect(db)) as con:
        first = results.row_values(row("r1", "a", 1.0, status="error"))
        second = {**first, "error": "again"}
        assert results.put_trial(con, first)
        assert not results.put_trial(con, second)  # a copy (merge, a worker's row): kept
        assert results.put_trial(con, second, retry=True)  # the run's own new attempt
        assert [r.error for r in results.trials(con)] == ["again"]
        ok = results.row_values(row("r1", "a", 2.0))
        assert results.put_trial(con, ok)
        assert not results.put_trial(con, first, retry=True)  # never over a success
        assert [r.status for r in results.trials(con)] == ["ok"]
        assert set(results.row_values(row("r1", "b", 0.0))) == set(results.COLUMNS)


def test_merge_copies_only_missing(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    make_db(a, "r1", [1.0, 2.0, 3.0])
    make_db(b, "r1", [1.0])
    assert results.merge(a, b) == 2
    assert results.merge(a, b) == 0
    with closing(results.connect(b)) as con:
        assert len(list(results.trials(con))) == 3
        assert len(results.runs(con)) == 1
    make_db(a, "r2", [5.0])
    assert results.merge(a, b) == 1
    with pytest.raises(UsageError):
        results.merge(tmp_path / "missing.sqlite", b)


def test_group_stats(tmp_path: Path) -> None:
    rows = [row("r", "a", 10.0, rep=0), row("r", "b", 12.0, rep=1),
            row("r", "c", 99.0, rep=2, status="error"),
            row("r", "d", 5.0, point={"ip": 6})]
    groups = results.group_stats(rows)
    assert len(groups) == 2
    g4 = next(g for g in groups if g["point"] == {"ip": 4})
    s = g4["metrics"]["owd_median_us"]
    assert g4["trials"] == 2 and s["n"] == 2 and s["mean"] == 11.0 and s["min"] == 10.0


def test_export_csv_and_json() -> None:
    rows = [row("r", "a", 10.0), row("r", "b", 12.0, point={"ip": 6, "size": 10})]
    text = results.export_csv(rows)
    recs = list(csv.DictReader(io.StringIO(text)))
    assert len(recs) == 2 and recs[1]["p.size"] == "10" and recs[0]["m.owd_median_us"] == "10.0"
    doc = json.loads(results.export_json(rows))
    assert doc[1]["point"] == {"ip": 6, "size": 10} and doc[0]["result"] == {"x": 10.0}


def test_provenance_fields() -> None:
    p = results.provenance()
    for k in ("kernel", "cpu_model", "testbed_version", "git_revision", "tools"):
        assert k in p
    assert results.canonical({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_trials_are_committed_at_once(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    make_db(db, "r1", [1.0])
    # another connection sees the trial immediately: nothing waits for the end of the run
    other = sqlite3.connect(str(db))
    assert other.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 1
    other.close()


def test_two_processes_create_one_database_at_once(tmp_path: Path) -> None:
    # a run and a reader (or two runs) may open a new database in the same instant
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for attempt in range(10):  # the race failed ~1 in 160 opens before the fix
        db = tmp_path / f"race{attempt}.sqlite"
        barrier = ctx.Barrier(8)
        procs = [ctx.Process(target=_open_after, args=(barrier, db)) for _ in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        assert [p.exitcode for p in procs] == [0] * 8
        with closing(results.connect(db)) as con:
            assert results.schema_version(con) == results.SCHEMA_VERSION


def _open_after(barrier: Any, db: Path) -> None:
    barrier.wait()
    results.connect(db).close()


def test_group_stats_never_mixes_clocks() -> None:
    virtual = {"clock": "virtual", "icount_shift": 0, "label": "virtual(icount shift=0)"}
    rows = []
    for i, (v, clock) in enumerate([(147.6, virtual), (147.62, virtual), (900.0, None),
                                    (1100.0, None)]):
        r = row("r", str(i), v, rep=i)
        if clock is not None:
            r = results.TrialRow(**{**r.to_dict(), "result": {"clock": clock}})
        rows.append(r)
    groups = {g["clock"]: g for g in results.group_stats(rows)}
    assert set(groups) == {"virtual(icount shift=0)", results.UNRECORDED_CLOCK}
    assert groups["virtual(icount shift=0)"]["trials"] == 2
    assert groups["virtual(icount shift=0)"]["metrics"]["owd_median_us"]["max"] == 147.62
    assert groups[results.UNRECORDED_CLOCK]["metrics"]["owd_median_us"]["min"] == 900.0


def test_provenance_and_clock_info_record_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTBED_CLOCK", "virtual")
    monkeypatch.setenv("TESTBED_ICOUNT_SHIFT", "2")
    monkeypatch.delenv("TESTBED_HOST_CLOCK", raising=False)
    info = results.clock_info()
    assert info["clock"] == "virtual" and info["icount_shift"] == 2
    assert info["label"] == "virtual(icount shift=2)"
    assert results.provenance()["clock"]["label"] == "virtual(icount shift=2)"
    monkeypatch.delenv("TESTBED_CLOCK")
    assert results.clock_info()["label"].startswith("real(")


def test_provenance_takes_the_hosts_tool_versions_in_the_vm_tier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "host-tools.json"
    f.write_text(json.dumps({"git_revision": "abc123", "tools": {"iperf3": "iperf 9.9"}}))
    monkeypatch.setenv(results.ENV_HOST_TOOLS, str(f))
    started: list[object] = []
    monkeypatch.setattr("testbed.results.processes.run", lambda *a, **k: started.append(a))
    p = results.provenance()
    assert p["git_revision"] == "abc123" and p["tools"] == {"iperf3": "iperf 9.9"}
    assert started == []  # no program started for it
    f.write_text("not json")  # unreadable: computed here instead
    monkeypatch.setattr("testbed.results.processes.run",
                        lambda argv, **k: subprocess.CompletedProcess(argv, 0, "v1\n", ""))
    assert results.provenance()["tools"]["tc"] == "v1"  # computed here
