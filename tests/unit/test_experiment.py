"""Experiment files: validation, profiles, sweep expansion, the trial loop and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from testbed import results
from testbed.errors import CommandError, SpecError
from testbed.experiment import run_experiment
from testbed.experiment_spec import experiment_from_dict, find_experiment, load_experiment, plan
from testbed.measure.kinds import Measured
from testbed.progress import Progress
from tests.unit.fake_testbed import FakeJournal

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "data" / "experiments" / "fake.toml"


class FakeTopology:
    name = "chain"
    node_names = ("h1", "r1", "h2")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name}


class FakeTestbed(FakeJournal):
    def __init__(self, params: Mapping[str, str]) -> None:
        super().__init__()
        self.params = dict(params)
        self.topology = FakeTopology()

    def qdiscs(self) -> list[dict[str, Any]]:
        return [{"kind": "tbf", "node": "h1", "rate": self.params.get("rate")}]


def fake_open(builds: list[dict[str, str]]):  # type: ignore[no-untyped-def]
    @contextmanager
    def opener(path: Path, params: Mapping[str, str]) -> Iterator[FakeTestbed]:
        assert path.name == "chain.toml"
        builds.append(dict(params))
        yield FakeTestbed(params)

    return opener


def fake_trial(tb: Any, t: Any, ctx: Any) -> Measured:
    return Measured({"value": float(t.repetition) + (t.params.get("size") or 0)},
                    {"rate": tb.params["rate"]})


def quiet() -> Progress:
    import io

    return Progress(0, stream=io.StringIO(), tty=False)


def test_load_full_and_quick_profiles() -> None:
    full = load_experiment(FAKE)
    assert full.repetitions == 2 and full.topo_sweep == {"topology.rate": ["ethernet",
                                                                          "fastethernet"]}
    # 2 rates x (owd: 2 ip x 2 sizes + stack: 2 ip) x 2 repetitions
    assert len(plan(full)) == 2 * (4 + 2) * 2
    quick = load_experiment(FAKE, "quick")
    assert quick.repetitions == 1
    assert len(plan(quick)) == 1 * (2 * 1 + 2) * 1
    owd = next(m for m in quick.measurements if m.name == "owd")
    assert owd.params["count"] == 50 and owd.sweep == {"size": [10]}


def test_plan_groups_by_topology_and_keys_are_unique() -> None:
    trials = plan(load_experiment(FAKE))
    keys = [t.key("r") for t in trials]
    assert len(set(keys)) == len(keys)
    seen: list[Any] = []
    for t in trials:
        if not seen or seen[-1] != t.topo:
            assert t.topo not in seen, "a topology point is built twice"
            seen.append(t.topo)
    t = trials[0]
    assert t.point["topology"] == "chain" and t.point["topology.routers"] == 1
    assert "repetition" not in t.point
    assert t.params["ip"] in (4, 6)


def test_a_measurement_has_its_own_repetitions_in_a_profile() -> None:
    from testbed.experiment_spec import count_trials

    raw = {"topology": "chain", "repetitions": 3, "sweep": {"ip": [4, 6]},
           "measurements": {"a": {"kind": "ping"}, "b": {"kind": "ping", "repetitions": 5}},
           "quick": {"repetitions": 1, "measurements": {"a": {"repetitions": 2}}}}
    for profile, want in (("full", {"a": 6, "b": 10}), ("quick", {"a": 4, "b": 10})):
        exp = experiment_from_dict(raw, file="x.toml", profile=profile)
        got: dict[str, int] = {}
        for t in plan(exp):
            got[t.measurement.name] = got.get(t.measurement.name, 0) + 1
        assert got == want, profile
        assert count_trials(exp) == sum(want.values())


def test_repetitions_run_in_rounds_unless_a_precision_rule_decides_per_cell() -> None:
    """Every cell once, then every cell again, so a host's drift is not read as a difference
    between cells; a measurement that stops a precise cell early repeats it in a row."""
    raw = {"topology": "chain", "repetitions": 3,
           "measurements": {"a": {"kind": "pingpong", "size": [10, 20]},
                            "b": {"kind": "pingpong", "size": [10, 20],
                                  "precision": {"metric": "owd_median_us", "relative": 0.01}}}}
    trials = plan(experiment_from_dict(raw, file="x.toml", profile="full"))
    order = [(t.measurement.name, t.params["size"], t.repetition) for t in trials]
    assert order == [("a", 10, 0), ("a", 20, 0), ("a", 10, 1), ("a", 20, 1), ("a", 10, 2),
                     ("a", 20, 2), ("b", 10, 0), ("b", 10, 1), ("b", 10, 2), ("b", 20, 0),
                     ("b", 20, 1), ("b", 20, 2)]


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"topology": "chain", "measurements": {"a": {"kind": "ping"}}, "bogus": 1}, "bogus"),
        ({"topology": "chain", "measurements": {"a": {"kind": "ping", "colour": 1}}},
         "measurements.a.colour"),
        ({"topology": "chain", "measurements": {"a": {"kind": "teleport"}}},
         "measurements.a.kind"),
        ({"topology": "chain", "measurements": {"a": {"kind": "ping", "ip": 5}}},
         "measurements.a.ip"),
        ({"topology": "chain", "measurements": {"a": {"kind": "ping", "ip": [4, 7]}}},
         "measurements.a.ip[1]"),
        ({"topology": "chain", "measurements": {"a": {"kind": "ping"}}, "sweep": {"zap": [1]}},
         "sweep.zap"),
        ({"topology": "chain", "measurements": {"a": {"kind": "ping"}},
          "quick": {"measurements": {"b": {}}}}, "quick.measurements.b"),
        ({"topology": "chain", "measurements": {"a": {"kind": "ping"}}, "quick": {"x": 1}},
         "quick.x"),
        ({"topology": "chain", "measurements": {}}, "measurements"),
        ({"measurements": {"a": {"kind": "ping"}}}, "topology"),
        ({"topology": "chain", "repetitions": 0, "measurements": {"a": {"kind": "ping"}}},
         "repetitions"),
        ({"topology": "chain", "measurements": {"a": {"kind": "ping", "repetitions": 0}}},
         "measurements.a.repetitions"),
        ({"topology": "chain", "measurements": {"a": {"kind": "rfc2544", "frame_size": 64,
                                                       "ip_payload": 10}}}, "measurements.a"),
    ],
)
def test_validation_names_the_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as err:
        experiment_from_dict(raw, file="x.toml", profile="quick")
    assert err.value.key == key
    assert err.value.file == "x.toml"


def test_shipped_experiments_validate() -> None:
    names = sorted(p.stem for p in (ROOT / "experiments").glob("*.toml"))
    for required in ("smoke", "gamess-morales", "zeadally-2004", "gometz-2015", "dobrinov-2016"):
        assert required in names
    for name in names:
        for profile in ("full", "quick"):
            exp = load_experiment(find_experiment(name), profile)
            assert plan(exp), name
        assert len(plan(load_experiment(find_experiment(name), "quick"))) <= len(
            plan(load_experiment(find_experiment(name))))


def test_run_stores_every_trial_with_provenance(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    builds: list[dict[str, str]] = []
    exp = load_experiment(FAKE, "quick")
    s = run_experiment(exp, db=db, open_testbed=fake_open(builds), progress=quiet(),
                       run_trial=fake_trial)
    assert s.ran == len(plan(exp)) and s.failed == 0
    assert builds == [{"routers": "1", "rate": "ethernet"}]
    with closing(results.connect(db)) as con:
        rows = list(results.trials(con))
        assert len(rows) == s.planned
        assert all(r.qdiscs[0]["rate"] == "ethernet" for r in rows)
        assert rows[0].topology == {"name": "chain"}
        run = results.runs(con)[0]
        assert run["finished"] is not None
        assert run["provenance"]["kernel"] and "iperf3" in run["provenance"]["tools"]
        assert results.schema_version(con) == results.SCHEMA_VERSION


def test_on_commit_runs_after_each_stored_trial_never_during_one(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    exp = load_experiment(FAKE, "quick")
    seen: list[int] = []
    busy = {"in_trial": False}

    def trial(tb: Any, t: Any, ctx: Any) -> Measured:
        busy["in_trial"] = True
        try:
            return fake_trial(tb, t, ctx)
        finally:
            busy["in_trial"] = False

    def committed() -> None:
        assert not busy["in_trial"]
        with closing(results.connect(db)) as con:
            seen.append(len(list(results.trials(con))))

    s = run_experiment(exp, db=db, open_testbed=fake_open([]), progress=quiet(), run_trial=trial,
                       on_commit=committed)
    assert seen == list(range(1, s.planned + 1))  # once per trial, each already stored


def test_failed_trial_is_recorded_and_retried_on_resume(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    exp = load_experiment(FAKE, "quick")
    calls = {"n": 0}

    def flaky(tb: Any, t: Any, ctx: Any) -> Measured:
        calls["n"] += 1
        if calls["n"] == 2:
            raise CommandError(["iperf3"], 1, "boom", "node h1")
        return fake_trial(tb, t, ctx)

    s = run_experiment(exp, db=db, open_testbed=fake_open([]), progress=quiet(), run_trial=flaky)
    assert s.failed == 1
    with closing(results.connect(db)) as con:
        assert results.runs(con)[0]["finished"] is None
    s2 = run_experiment(exp, db=db, resume=True, open_testbed=fake_open([]), progress=quiet(),
                        run_trial=fake_trial)
    assert s2.run_id == s.run_id and s2.ran == 1 and s2.skipped == s.planned - 1
    with closing(results.connect(db)) as con:
        rows = list(results.trials(con))
        assert len(rows) == s.planned and all(r.status == "ok" for r in rows)


def test_a_topology_that_cannot_be_built_records_each_of_its_trials_as_failed(
        tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    exp = load_experiment(FAKE, "quick")

    @contextmanager
    def broken(path: Path, params: Mapping[str, str]) -> Iterator[Any]:
        raise CommandError(["ip", "link", "add"], 2, "RTNETLINK answers: no", "node h1")
        yield  # pragma: no cover

    s = run_experiment(exp, db=db, open_testbed=broken, progress=quiet(), run_trial=fake_trial)
    with closing(results.connect(db)) as con:
        rows = list(results.trials(con))
    assert s.failed == s.planned == len(rows) and s.ran == 0
    assert all(r.status == "error" and (r.error or "").startswith("topology ")
               and "RTNETLINK answers: no" in (r.error or "") for r in rows)
    assert all(r.started == r.finished for r in rows)


def test_interrupt_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    exp = load_experiment(FAKE)
    total = len(plan(exp))
    calls = {"n": 0}

    def interrupted(tb: Any, t: Any, ctx: Any) -> Measured:
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return fake_trial(tb, t, ctx)

    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, db=db, open_testbed=fake_open([]), progress=quiet(),
                       run_trial=interrupted)
    with closing(results.connect(db)) as con:
        assert len(list(results.trials(con))) == 6
    builds: list[dict[str, str]] = []
    s = run_experiment(exp, db=db, resume=True, open_testbed=fake_open(builds),
                       progress=quiet(), run_trial=fake_trial)
    assert s.skipped == 6 and s.ran == total - 6
    with closing(results.connect(db)) as con:
        keys = [r.trial_key for r in results.trials(con)]
        assert len(keys) == total == len(set(keys))
        assert {t.key(s.run_id) for t in plan(exp)} == set(keys)


SCRIPT = """
import sys, time
from contextlib import contextmanager
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_experiment import fake_open, quiet, fake_trial
from testbed.experiment import run_experiment
from testbed.experiment_spec import load_experiment

def slow(tb, t, ctx):
    time.sleep(0.05)
    return fake_trial(tb, t, ctx)

run_experiment(load_experiment({fake!r}), db=Path({db!r}), resume=True,
               open_testbed=fake_open([]), progress=quiet(), run_trial=slow)
"""


def test_sigkill_midway_then_resume(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    code = SCRIPT.format(tests=str(ROOT / "tests" / "unit"), fake=str(FAKE), db=str(db))
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        while True:  # wait on state: until some trials are stored
            if db.exists():
                with closing(results.connect(db)) as con:
                    if len(list(results.trials(con))) >= 5:
                        break
            assert proc.poll() is None, "the run finished before it could be killed"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    with closing(results.connect(db)) as con:
        stored = len(list(results.trials(con)))
    total = len(plan(load_experiment(FAKE)))
    assert 5 <= stored < total
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    with closing(results.connect(db)) as con:
        keys = [r.trial_key for r in results.trials(con)]
        assert len(keys) == total == len(set(keys))
        assert len(results.runs(con)) == 1 and results.runs(con)[0]["finished"] is not None


def test_progress_plain_lines() -> None:
    import io

    out = io.StringIO()
    p = Progress(3, stream=out, tty=False)
    p.start("a")
    p.finish()
    p.start("b")
    text = out.getvalue()
    assert "trial 1/3 (3 left): a" in text
    assert "trial 2/3 (2 left, ~" in text and "left): b" in text
    tty = io.StringIO()
    q = Progress(2, stream=tty, tty=True)
    q.start("x")
    q.finish()
    q.close()
    assert "[############------------] 1/2" in tty.getvalue()


def test_on_the_virtual_clock_an_exact_cell_runs_once_and_the_run_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.experiment_spec import for_clock
    from testbed.parallel import RunBook
    from testbed.waiting import ENV_CLOCK

    exp = load_experiment(FAKE, "full")  # 2 repetitions: owd (pingpong) 8 cells, stack 4 cells
    assert len(plan(exp)) == 2 * (8 + 4)
    monkeypatch.setenv(ENV_CLOCK, "virtual")  # as inside a virtual-clock guest
    s = run_experiment(exp, db=tmp_path / "v.sqlite", open_testbed=fake_open([]),
                       progress=quiet(), run_trial=fake_trial)
    assert (s.ran, s.planned) == (8 + 2 * 4, 16)  # the OWD cells once, stack costs twice
    with closing(results.connect(tmp_path / "v.sqlite")) as con:
        rows = list(results.trials(con))
        assert {r.repetition for r in rows if r.kind == "pingpong"} == {0}
        spec = json.loads(con.execute("SELECT spec FROM runs").fetchone()[0])
        stored = {m["name"]: m for m in spec["measurements"]}
        assert stored["owd"]["once"] and "once" not in stored["stack"]
    # a parallel run's coordinator lists the same trials as its virtual-clock workers
    monkeypatch.delenv(ENV_CLOCK)
    book = RunBook(exp, tmp_path / "p.sqlite", False, clock="virtual")
    assert sorted(t.key("x") for t in book.trials) == \
        sorted(t.key("x") for t in plan(for_clock(exp, "virtual")))
    book.con.close()
    # on the real clock nothing changes
    s = run_experiment(exp, db=tmp_path / "r.sqlite", open_testbed=fake_open([]),
                       progress=quiet(), run_trial=fake_trial)
    assert s.ran == 24
