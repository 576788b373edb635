"""Parallel and distributed runs: shares, streaming into the run's database, a worker killed
(SIGKILL) mid-run, retries at most once, resume, placement, and the host-tier refusal."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from testbed import cli, results
from testbed.experiment_spec import experiment_from_dict, load_experiment, plan
from testbed.parallel import host_interference, run_local
from testbed.shares import split

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "data" / "experiments" / "fake.toml"
WORKER = ROOT / "tests" / "data" / "parallel_worker.py"
PREFIX = [sys.executable, str(WORKER), str(FAKE)]


def rows_of(db: Path) -> list[results.TrialRow]:
    with closing(results.connect(db)) as con:
        return list(results.trials(con))


def medians(db: Path) -> dict[str, float]:
    return {g["measurement"] + g["group_key"]: g["metrics"]["value"]["median"]
            for g in results.group_stats(rows_of(db))}


def executions(log: Path) -> Counter[str]:
    return Counter(log.read_text().split()) if log.exists() else Counter()


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TB_FAKE_LOG", str(tmp_path / "executions.log"))
    monkeypatch.setenv("TB_FAKE_DIE_DIR", str(tmp_path / "deaths"))
    monkeypatch.setenv("TB_FAKE_DELAY", "0.05")
    return tmp_path


def test_split_covers_every_trial_once_and_keeps_topology_points_whole() -> None:
    trials = plan(load_experiment(FAKE))  # 2 topology points x 12 trials
    for n in (1, 2, 3, 5, 100):
        shares = split(trials, "R", n)
        keys = [k for s in shares for k in s.keys]
        assert sorted(keys) == sorted(t.key("R") for t in trials)  # each exactly once
        assert len(shares) <= n
    two = split(trials, "R", 2)
    assert [len(s.keys) for s in two] == [12, 12]
    assert all(len({k.split("/")[2].split('"topology.rate":')[1][:8] for k in s.keys}) == 1
               for s in two)  # one rate (topology point) per share
    four = split(trials, "R", 4)  # fewer points than workers: cut between sweep cells
    assert len(four) == 4 and sorted(len(s.keys) for s in four) == [6, 6, 6, 6]
    cells = Counter(k.rsplit("/", 1)[0] for s in four for k in s.keys)
    for s in four:  # a cell's repetitions stay together
        assert all(cells[k.rsplit("/", 1)[0]] == sum(1 for kk in s.keys if kk.rsplit(
            "/", 1)[0] == k.rsplit("/", 1)[0]) for k in s.keys)


def test_split_cuts_a_point_when_points_do_not_divide_evenly(tmp_path: Path) -> None:
    exp = tmp_path / "three.toml"  # 3 topology points x 4 trials (2 measurements x 2 sizes)
    exp.write_text(FAKE.read_text().replace('"topology.rate" = ["ethernet", "fastethernet"]\n'
                                            'ip = [4, 6]',
                                            '"topology.routers" = [0, 1, 2]')
                   .replace("repetitions = 2", "repetitions = 1"))
    trials = plan(load_experiment(exp))
    assert len(trials) == 3 * (2 + 1)
    whole = {t.topo.label for t in trials}
    assert len(whole) == 3
    two = split(trials, "R", 2)  # whole points would give 6 + 3: one point is cut instead
    assert sorted(len(s.keys) for s in two) == [4, 5]
    keys = [k for s in two for k in s.keys]
    assert sorted(keys) == sorted(t.key("R") for t in trials)
    three = split(trials, "R", 3)  # divides evenly: no point is cut
    assert sorted(len(s.keys) for s in three) == [3, 3, 3]


def test_two_workers_match_serial_medians_and_record_placement(fake_env: Path) -> None:
    exp = load_experiment(FAKE)
    one = run_local(exp, FAKE, db=fake_env / "one.sqlite", workers=1, argv_prefix=PREFIX,
                    stream=io.StringIO())
    out = io.StringIO()
    two = run_local(exp, FAKE, db=fake_env / "two.sqlite", workers=2, argv_prefix=PREFIX,
                    stream=out)
    assert one.ran == two.ran == 24 and one.failed == two.failed == 0
    assert medians(fake_env / "one.sqlite") == medians(fake_env / "two.sqlite")
    rows = rows_of(fake_env / "two.sqlite")
    assert len({r.trial_key for r in rows}) == len(rows) == 24
    assert {r.result["placement"]["worker"] for r in rows} == {"local-0", "local-1"}
    assert all(r.result["placement"]["clock"].startswith("real(") for r in rows)
    assert "[24/24]" in out.getvalue()
    with closing(results.connect(fake_env / "two.sqlite")) as con:
        assert results.runs(con)[0]["finished"] is not None
    assert not list(fake_env.glob(".parallel-*"))  # worker folders removed after the merge


def test_worker_killed_once_loses_nothing_and_reruns_only_what_was_lost(
        fake_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TB_FAKE_DIE_ON", "owd/")
    monkeypatch.setenv("TB_FAKE_DIE_TIMES", "1")
    exp = load_experiment(FAKE)
    out = io.StringIO()
    s = run_local(exp, FAKE, db=fake_env / "r.sqlite", workers=2, argv_prefix=PREFIX,
                  stream=out)
    rows = rows_of(fake_env / "r.sqlite")
    assert s.ran == 24 and s.failed == 0
    assert len(rows) == len({r.trial_key for r in rows}) == 24
    assert all(r.status == "ok" for r in rows)
    text = out.getvalue()
    assert "killed by signal 9" in text and "retrying the one it was running once" in text
    assert re.search(r"local-0: trial 1/\d+ ", text)  # the workers' own progress, named
    assert "24 trials in 2 shares on 2 workers" in text  # too few for more (share_count)
    runs = executions(fake_env / "executions.log")
    assert set(runs) == {r.trial_key.split("/", 1)[1] for r in rows}
    assert max(runs.values()) == 2 and sum(runs.values()) == 25  # only the killed trial twice


def test_what_a_killed_worker_started_in_its_own_session_is_killed_too(
        fake_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TB_FAKE_DIE_ON", 'owd/{"ip":4')
    monkeypatch.setenv("TB_FAKE_DIE_TIMES", "1")
    monkeypatch.setenv("TB_FAKE_GUEST", str(fake_env / "guest.pid"))
    s = run_local(load_experiment(FAKE, "quick"), FAKE, db=fake_env / "g.sqlite", workers=1,
                  argv_prefix=[*PREFIX, "--quick"], stream=io.StringIO())
    assert s.ran == 4 and s.failed == 0
    guest = int((fake_env / "guest.pid").read_text())
    assert not Path(f"/proc/{guest}").exists() or "Z" in Path(
        f"/proc/{guest}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_worker_killed_twice_records_failure_then_resume_completes(
        fake_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TB_FAKE_DIE_ON", 'owd/{"ip":4')
    monkeypatch.setenv("TB_FAKE_DIE_TIMES", "2")
    exp = load_experiment(FAKE, "quick")  # 4 trials, one topology point
    db = fake_env / "r.sqlite"
    s = run_local(exp, FAKE, db=db, workers=2, argv_prefix=[*PREFIX, "--quick"],
                  stream=io.StringIO())
    rows = rows_of(db)
    bad = [r for r in rows if r.status == "error"]
    assert len(rows) == len({r.trial_key for r in rows}) == 4
    assert len(bad) == 1 and s.failed == 1 and "lost twice with its worker" in (bad[0].error or "")
    assert "killed by signal 9" in (bad[0].error or "")
    runs = executions(fake_env / "executions.log")
    assert max(runs.values()) == 2 and sum(runs.values()) == 5  # retried once, no more
    with closing(results.connect(db)) as con:
        assert results.runs(con)[0]["finished"] is None
    # --resume: the failed trial again, nothing duplicated, the run finishes
    monkeypatch.setenv("TB_FAKE_DIE_TIMES", "0")
    r = run_local(exp, FAKE, db=db, workers=2, argv_prefix=[*PREFIX, "--quick"], resume=True,
                  stream=io.StringIO())
    rows = rows_of(db)
    assert r.run_id == s.run_id and r.skipped == 3 and r.ran == 1
    assert len(rows) == 4 and all(x.status == "ok" for x in rows)
    with closing(results.connect(db)) as con:
        assert results.runs(con)[0]["finished"] is not None


def test_workers_that_cannot_start_end_the_run_instead_of_retrying_every_trial(
        fake_env: Path) -> None:
    """A worker that exits with an error before its first trial (a broken install, a guest
    that does not boot): after two such in a row the rest is recorded as failed, with why."""
    exp = load_experiment(FAKE, "quick")  # 4 trials
    db = fake_env / "r.sqlite"
    launches = fake_env / "launches"
    broken = ["sh", "-c", f'echo x >> {launches}; echo "ImportError: broken" >&2; exit 1', "w"]
    out = io.StringIO()
    s = run_local(exp, FAKE, db=db, workers=2, argv_prefix=broken, stream=out)
    rows = rows_of(db)
    assert len(rows) == 4 and s.failed == 4 and all(r.status == "error" for r in rows)
    assert any("workers in a row ended before their first trial" in (r.error or "")
               for r in rows)
    assert "exit 1" in (rows[0].error or "") + (rows[-1].error or "")
    assert len(launches.read_text().split()) <= 4  # not twice per trial
    assert "trials recorded as failed" in out.getvalue()


def _term_after_first_row(db: Path, done: threading.Event, limit_s: float = 120.0) -> None:
    """SIGTERM this process as soon as `db` holds a committed trial (or after `limit_s`)."""
    import time

    end = time.monotonic() + limit_s
    while not done.wait(0.05) and time.monotonic() < end:
        try:
            with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
                if con.execute("SELECT COUNT(*) FROM trials").fetchone()[0] > 0:
                    break
        except sqlite3.Error:
            continue
    if not done.is_set():
        os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_stops_the_workers_and_keeps_what_they_committed(
        fake_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TB_FAKE_DELAY", "0.5")
    db = fake_env / "t.sqlite"
    done = threading.Event()
    # SIGTERM once a first trial is committed (a fixed 4 s found none on a loaded machine)
    timer = threading.Thread(target=_term_after_first_row, args=(db, done), daemon=True)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run_local(load_experiment(FAKE), FAKE, db=db, workers=2, argv_prefix=PREFIX,
                  stream=io.StringIO())
    done.set()
    timer.join()
    rows = rows_of(db)
    ran = executions(fake_env / "executions.log")
    assert 0 < len(rows) < 24 and len({r.trial_key for r in rows}) == len(rows)
    assert len(ran) - len(rows) <= 2  # at most the trial each worker was in when stopped
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True,
                        check=True).stdout
    assert str(db.parent) not in ps  # no worker left running
    # --resume completes it without duplicates
    monkeypatch.setenv("TB_FAKE_DELAY", "0.01")
    s = run_local(load_experiment(FAKE), FAKE, db=db, workers=2, argv_prefix=PREFIX,
                  resume=True, stream=io.StringIO())
    assert s.skipped == len([r for r in rows if r.status == "ok"])
    assert len(rows_of(db)) == 24 and all(r.status == "ok" for r in rows_of(db))


@pytest.fixture
def local_cluster(fake_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("TB_FAKE_DIE_ON", "owd/")
    monkeypatch.setenv("TB_FAKE_DIE_PARENT", "1")
    monkeypatch.setenv("TB_FAKE_DIE_TIMES", "1")
    monkeypatch.setenv("TB_FAKE_DELAY", "0.2")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=50) as lc, \
            distributed.Client(lc) as client:
        yield client


def test_local_cluster_worker_sigkilled_mid_run_loses_nothing(
        fake_env: Path, local_cluster: Any) -> None:
    from testbed.cluster import run_cluster

    exp = load_experiment(FAKE)
    out = io.StringIO()
    s = run_cluster(exp, FAKE, db=fake_env / "c.sqlite", client=local_cluster,
                    argv_prefix=[sys.executable, str(WORKER), "{dir}/fake.toml"], stream=out)
    rows = rows_of(fake_env / "c.sqlite")
    assert (fake_env / "deaths").exists()  # a Dask worker really was SIGKILLed
    assert s.ran == 24 and s.failed == 0, out.getvalue()
    assert len(rows) == len({r.trial_key for r in rows}) == 24
    assert all(r.status == "ok" for r in rows)
    assert all(r.result["placement"]["worker"].startswith("tcp://") for r in rows)
    assert all(r.result["placement"]["kernel"] for r in rows)
    assert ": trial 1/12" in out.getvalue()  # the workers' own progress, named
    runs = executions(fake_env / "executions.log")
    assert max(runs.values()) <= 2
    # placement does not change the numbers: the same medians as one worker here
    run_local(exp, FAKE, db=fake_env / "one.sqlite", workers=1,
              argv_prefix=PREFIX, stream=io.StringIO())
    assert medians(fake_env / "c.sqlite") == medians(fake_env / "one.sqlite")


def test_host_tier_refuses_parallel_timing(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    timed = load_experiment(FAKE)
    assert "pingpong" in (host_interference(timed, 2) or "")
    assert host_interference(timed, 1) is None
    raw: dict[str, Any] = {
        "name": "tput", "topology": "p2p", "params": {"rate": "fastethernet"},
        "measurements": {"t": {"kind": "iperf3", "protocol": "udp"}}}
    tput = experiment_from_dict(raw, file="tput.toml")
    assert host_interference(tput, 2, ncpu=4) is None
    assert "need 4 cores" in (host_interference(tput, 2, ncpu=2) or "")
    raw["params"] = {"rate": "unlimited"}
    assert "without a rate" in (host_interference(
        experiment_from_dict(raw, file="tput.toml"), 2, ncpu=8) or "")
    rc = cli.main(["run", str(FAKE), "--workers", "2", "--clock", "real",
                   "--db", str(tmp_path / "x.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and "disturb each other's timing" in err and "--clock virtual" in err
    assert not (tmp_path / "x.sqlite").exists()


def test_share_file_errors_name_the_file(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "share.json"
    bad.write_text(json.dumps({"keys": []}))
    rc = cli.main(["run", str(FAKE), "--share", str(bad), "--clock", "real",
                   "--db", str(tmp_path / "x.sqlite")])
    assert rc == 2 and str(bad) in capsys.readouterr().err


def test_store_keeps_success_over_error(tmp_path: Path) -> None:
    from testbed.parallel import store_row
    from testbed.results import COLUMNS

    db = tmp_path / "d.sqlite"
    with closing(results.connect(db)) as con:
        results.start_run(con, "e", "full", {}, {}, 1, run_id="R")
        base = {c: "{}" for c in COLUMNS} | {
            "trial_key": "R/m/g/0", "run_id": "R", "experiment": "e", "profile": "full",
            "measurement": "m", "kind": "k", "group_key": "g", "repetition": 0, "started": 1.0,
            "finished": 2.0, "error": None}
        assert store_row(con, base | {"status": "error", "error": "x"}, {"worker": "w"})
        assert store_row(con, base | {"status": "ok"}, {"worker": "w"})
        assert not store_row(con, base | {"status": "error", "error": "y"}, {"worker": "w"})
        assert not store_row(con, base | {"status": "ok"}, {"worker": "w2"})
        row = con.execute("SELECT status, result FROM trials").fetchall()
    assert len(row) == 1 and row[0][0] == "ok"
    assert json.loads(row[0][1])["placement"]["worker"] == "w"
    assert sqlite3.sqlite_version


def test_virtual_clock_worker_runs_its_share_in_a_guest(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`testbed run --share` on the host for a virtual-clock experiment boots a guest that
    runs the same share, its trials merged into the worker's own database."""
    from testbed.commands import experiment as cmd
    from testbed.vm import run as vm_run
    from testbed.vm.guest import ENV_IN_VM

    calls: list[dict[str, Any]] = []

    def fake_run_in_vm(argv: list[str], **kw: Any) -> Any:
        calls.append({"argv": argv, **kw})
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(vm_run, "run_in_vm", fake_run_in_vm)
    monkeypatch.setattr(cmd, "current_clock", lambda: "real")
    monkeypatch.delenv(ENV_IN_VM, raising=False)
    share = tmp_path / "share.json"
    share.write_text(json.dumps({"index": 0, "run_id": "R", "keys": ["R/owd/x/0"]}))
    rc = cli.main(["run", str(FAKE), "--quick", "--clock", "virtual", "--share", str(share),
                   "--db", str(tmp_path / "w.sqlite")])
    assert rc == 0 and len(calls) == 1
    argv = calls[0]["argv"]
    assert argv[argv.index("--share") + 1] == str(share.resolve())
    assert "--quick" in argv and calls[0]["clock"] == "virtual"
    assert calls[0]["db"] == tmp_path / "w.sqlite"


def test_resume_adopts_what_workers_of_a_dead_coordinator_committed(fake_env: Path) -> None:
    exp = load_experiment(FAKE)
    db = fake_env / "a.sqlite"
    with closing(results.connect(db)) as con:
        run_id = results.start_run(con, exp.name, exp.profile, exp.to_dict(), {}, 24)
    keys = [t.key(run_id) for t in plan(exp)][:5]
    sdir = fake_env / f".parallel-{run_id}" / "share-0-1"
    sdir.mkdir(parents=True)
    (sdir / "share.json").write_text(json.dumps({"index": 0, "run_id": run_id, "keys": keys}))
    # a worker whose coordinator died: its trials are only in its own database
    subprocess.run([*PREFIX, "--share", str(sdir / "share.json"), "--db",
                    str(sdir / "trials.sqlite")], check=True, capture_output=True)
    assert rows_of(db) == []
    out = io.StringIO()
    s = run_local(exp, FAKE, db=db, workers=2, argv_prefix=PREFIX, resume=True, stream=out)
    assert "stored 5 trials that workers of the interrupted run had committed" in out.getvalue()
    assert s.run_id == run_id and s.skipped == 5 and s.ran == 19
    rows = rows_of(db)
    assert len(rows) == len({r.trial_key for r in rows}) == 24
    assert max(executions(fake_env / "executions.log").values()) == 1  # none ran twice


@pytest.mark.parametrize(("flags", "message"), [
    (["--workers", "2", "--cluster", "tcp://127.0.0.1:1"], "choose one"),
    (["--workers", "0"], "expected auto or a number of workers >= 1"),
    (["--workers", "many"], "expected auto or a number of workers >= 1"),
])
def test_parallel_flag_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              flags: list[str], message: str) -> None:
    rc = cli.main(["run", str(FAKE), "--clock", "real", "--db", str(tmp_path / "x.sqlite"),
                   *flags])
    assert rc == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x.sqlite").exists()


def test_journal_streams_a_guests_trials_as_they_are_committed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import nullcontext

    from testbed.commands.experiment import share_journal
    from testbed.parallel import Journal, read_journal

    db, journal = tmp_path / "w.sqlite", tmp_path / "journal.jsonl"

    def row(i: int) -> results.TrialRow:
        return results.TrialRow(f"R/m/g/{i}", "R", "e", "full", "m", "k", {}, "g", i, 1.0, 2.0,
                                "ok", None, {"v": float(i)}, {}, {}, [])

    with closing(results.connect(db)) as con:
        results.start_run(con, "e", "full", {}, {}, 3, run_id="R")
        with Journal(db, journal) as j:
            results.write_trial(con, row(0))
            assert read_journal(journal) == ([], 0)  # no thread: copied when told, between trials
            j.copy()
            first, offset = read_journal(journal)
            assert [r["trial_key"] for r in first] == ["R/m/g/0"]  # before the worker ended
            j.copy()
            assert read_journal(journal, offset) == ([], offset)  # nothing copied twice
            results.write_trial(con, row(1))
        more, offset = read_journal(journal, offset)
        assert [r["trial_key"] for r in more] == ["R/m/g/1"]  # the last copy, on exit
    with journal.open("a") as f:
        f.write('{"trial_key": "half a li')  # a line being written is not read yet
    assert read_journal(journal, offset) == ([], offset)
    monkeypatch.delenv("TESTBED_IN_VM", raising=False)
    assert isinstance(share_journal(tmp_path / "share.json", db), nullcontext)
    monkeypatch.setenv("TESTBED_IN_VM", "1")
    assert isinstance(share_journal(tmp_path / "share.json", db), Journal)


def test_split_weighs_a_cell_by_the_trials_it_is_expected_to_run(tmp_path: Path) -> None:
    """A cell that `precision` may stop after 3 of its 10 repetitions weighs 3, not 10."""
    exp = tmp_path / "weights.toml"
    exp.write_text("""name = "weights"
topology = "chain"
repetitions = 10
[params]
routers = 1
[sweep]
"topology.rate" = ["ethernet", "fastethernet", "gigabit"]
[measurements.tput]
kind = "pingpong"
size = [10, 100]
precision = { metric = "owd_mean_us", relative = 0.01 }
where = { "topology.rate" = ["ethernet", "fastethernet"] }
[measurements.owd]
kind = "pingpong"
size = 10
repetitions = 12
where = { "topology.rate" = ["gigabit"] }
""")
    trials = plan(load_experiment(exp))
    assert len(trials) == 2 * 2 * 10 + 12  # planned: 20 + 20 + 12
    two = split(trials, "R", 2)
    rates = [{k.split('"topology.rate":"')[1].split('"')[0] for k in s.keys} for s in two]
    # expected to run: 6 + 6 + 12 — the gigabit cell (12 trials that all run) alone, the two
    # precise points (20 planned each, about 6 run) together; by planned counts the gigabit
    # cell went beside one of them (12 + 20 against 20: 18 against 6 that run)
    assert sorted(map(sorted, rates)) == [["ethernet", "fastethernet"], ["gigabit"]]
    assert sorted(k for s in two for k in s.keys) == sorted(t.key("R") for t in trials)


def test_long_runs_are_cut_into_more_shares_than_workers() -> None:
    """A share more is worth a guest's boot only in a long run: quintero's guests (~835 trials)
    get three a worker, taken in turn; a quick profile keeps one a worker."""
    from testbed.parallel import SHARES_PER_WORKER, TRIALS_PER_SHARE, share_count

    assert share_count(835, 2) == 2 * SHARES_PER_WORKER
    assert share_count(60, 2) == 2 and share_count(24, 2) == 2
    assert share_count(4 * TRIALS_PER_SHARE, 2) == 4
    assert share_count(5000, 1) == 1 and share_count(0, 3) == 3
