"""The user mistakes of issue 16, one by one: exit 2, one message naming file and key, no
traceback; a disk that fills mid-run keeps the committed trials and says how to resume."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from testbed import results, signals
from testbed.errors import SpecError
from testbed.experiment import run_experiment
from testbed.experiment_spec import load_experiment, plan
from tests.reliability.fuzz import ROOT, cli
from tests.unit.test_experiment import FAKE, fake_open, fake_trial, quiet

NODES = '[nodes.h1]\n[nodes.h2]\n'
LINK = NODES + '[[links]]\nendpoints = ["h1", "h2"]\n'


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (NODES + '[[chains]]\nfrom = ["h1"]\nto = "h2"\n', "chains[0].from", "unknown node"),
        (LINK + "rate = inf\n", "links[0].rate", "finite"),
        (LINK + "rate = nan\n", "links[0].rate", "finite"),
        (LINK + "delay = nan\n", "links[0].delay", "finite"),
        (LINK + "jitter = -inf\n", "links[0].jitter", "finite"),
        (LINK + 'rate = "99999999999999gbit"\n', "links[0].rate", "outside"),
        (LINK + 'rate = "0.0000001bit"\n', "links[0].rate", "outside"),
        (LINK + 'delay = "99999s"\n', "links[0].delay", "out of range"),
        (LINK + "mtu = true\n", "links[0].mtu", "MTU"),
        (NODES + '[[routes]]\nnode = ["h1"]\nto = "default"\nvia = "198.18.0.1"\n',
         "routes[0].node", "unknown node"),
        (NODES + '[[chains]]\nfrom = "h1"\nto = "h2"\nprefix = 7\n', "chains[0].prefix", "prefix"),
        (NODES + '[[features]]\nkind = ["6to4"]\n', "features[0].kind", "not a string"),
        (NODES + '[mechanism]\nkind = "6to4"\n', "mechanism", "replaced by [[features]]"),
        (NODES + '[addressing]\nipv4_prefixlen = true\n', "addressing.ipv4_prefixlen", "prefix"),
        ('x = ' + '[' * 600 + ']' * 600 + '\n', "", "nested"),
        ('x = ' + '{a=' * 100 + '1' + '}' * 100 + '\n', "", "nested"),
    ],
)
def test_bad_topology_values_are_refused(tmp_path: Path, text: str, key: str, words: str) -> None:
    from testbed.topology import load_topology

    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_topology(path)
    assert err.value.file == str(path) and err.value.key == key and err.value.exit_code == 2
    assert words in err.value.problem, err.value


def test_non_utf8_and_directory_and_missing_files(tmp_path: Path) -> None:
    from testbed.topology import load_topology

    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'name = "caf\xe9"\n')
    for path, words in ((bad, "not UTF-8"), (tmp_path, "directory"), (tmp_path / "no", "no such")):
        with pytest.raises(SpecError) as err:
            load_topology(path)
        assert words in err.value.problem
        p = cli(["plan", str(path)])
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert p.stderr.startswith(f"testbed: error: {path}: ")


def test_dry_run_refuses_what_the_real_run_refuses(tmp_path: Path) -> None:
    base = 'topology = "chain"\n'
    ping = '[measurements.a]\nkind = "ping"\n'
    cases = {
        'topology = "ghost"\n' + ping: "topology",
        base + "[params]\nrouters = 251\n" + ping: "params.routers",
        base + "[params]\nbogus = 1\n" + ping: "params.bogus",
        base + '[measurements.a]\nkind = "iperf3"\nip_payload = "r1"\n':
            "measurements.a.ip_payload",
        base + '[measurements.a]\nkind = "ping"\nserver = "r9"\n': "measurements.a.server",
        base + '[measurements.a]\nkind = "ping"\ncount = nan\n': "measurements.a.count",
        base + "repetitions = 1000000\n" + ping: "repetitions",
        base + '[sweep]\n"topology.routers" = [1, 300]\n' + ping: "sweep.topology.routers",
    }
    directory = tmp_path / "db-is-a-directory"
    directory.mkdir()
    for i, (text, key) in enumerate(cases.items()):
        path = tmp_path / f"e{i}.toml"
        path.write_text(text)
        dry = cli(["run", str(path), "--dry-run"])
        real = cli(["run", str(path), "--db", str(directory)])
        assert dry.returncode == real.returncode == 2, (text, dry.stderr)
        assert dry.stderr == real.stderr
        assert dry.stderr.startswith(f"testbed: error: {path}: {key}"), (key, dry.stderr)


def test_dry_run_streams_a_large_plan(tmp_path: Path) -> None:
    """The biggest allowed plan prints quickly, never holding more than a line at a time."""
    path = tmp_path / "big.toml"
    path.write_text('topology = "p2p"\nrepetitions = 1000\n[sweep]\nip = [4, 6]\n'
                    '[measurements.a]\nkind = "ping"\ncount = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n')
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(path), "--dry-run"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == "20000 trials"
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("kind", ["text", "directory", "impossible", "parent-is-file"])
def test_bad_database_paths(tmp_path: Path, kind: str) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    db = {
        "text": text,
        "directory": tmp_path,
        "impossible": Path("/proc/self/no/such/place.sqlite"),
        "parent-is-file": text / "x.sqlite",
    }[kind]
    for args in (["run", str(FAKE), "--quick", "--db", str(db)], ["results", "--db", str(db),
                                                                  "list"]):
        p = cli(args)
        assert p.returncode == 2, p.stderr
        assert "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert lines[0].startswith((f"testbed: error: results database {db}",
                                    f"testbed: error: no results database at {db}")), p.stderr
        assert len(lines) == 2 and lines[1].startswith("  hint: ")


def test_bad_export_path(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    run_experiment(load_experiment(FAKE, "quick"), db=db, open_testbed=fake_open([]),
                   progress=quiet(), run_trial=fake_trial)
    for out in (tmp_path / "missing" / "x.csv", tmp_path, Path("/proc/version")):
        p = cli(["results", "--db", str(db), "export", "--csv", "-o", str(out)])
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.startswith(f"testbed: error: cannot write {out}"), p.stderr


def test_disk_full_mid_run_keeps_committed_trials_and_says_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLITE_FULL for real: the database may not grow past its size after a few trials
    (PRAGMA max_page_count, what a full disk looks like to SQLite)."""
    db = tmp_path / "r.sqlite"
    exp = load_experiment(FAKE, "full")
    total = len(plan(exp))
    connect = results.connect
    writes = {"n": 0}

    def small_connect(path: Path) -> sqlite3.Connection:
        con = connect(path)
        con.execute("PRAGMA journal_mode=DELETE")  # WAL would keep growing in the -wal file
        return con

    real_write = results.write_trial

    def write_then_fill(con: sqlite3.Connection, row: Any) -> None:
        writes["n"] += 1
        if writes["n"] == 3:  # the disk "fills" after two stored trials
            pages = con.execute("PRAGMA page_count").fetchone()[0]
            con.execute(f"PRAGMA max_page_count = {pages}")
            row = type(row)(**{**row.__dict__, "result": {"pad": "x" * 200_000}})
        real_write(con, row)

    monkeypatch.setattr(results, "connect", small_connect)
    monkeypatch.setattr(results, "write_trial", write_then_fill)
    with pytest.raises(results.StoreError) as err:
        run_experiment(exp, db=db, open_testbed=fake_open([]), progress=quiet(),
                       run_trial=fake_trial)
    text = str(err.value)
    assert err.value.exit_code == 2
    assert f"results database {db}" in text and "full" in text
    assert "the 2 trials stored before are kept" in text and "--resume" in text
    monkeypatch.setattr(results, "write_trial", real_write)
    with closing(connect(db)) as con:
        assert len(list(results.trials(con))) == 2
    s = run_experiment(exp, db=db, resume=True, open_testbed=fake_open([]), progress=quiet(),
                       run_trial=fake_trial)
    assert s.skipped == 2 and s.ran == total - 2 and s.failed == 0


def test_deferred_signal_is_acted_on_only_at_check() -> None:
    guard = signals.Guard()
    guard.open()
    try:
        with signals.deferred():
            signal.raise_signal(signal.SIGTERM)  # noted, not raised here
            assert signals.pending() == signal.SIGTERM
            with pytest.raises(signals.Interrupted) as err:
                signals.check()
            assert err.value.signum == signal.SIGTERM
            signals.check()  # raised once only
    finally:
        guard.close()
    assert signals.pending() is None
