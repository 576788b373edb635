"""The virtual-clock tier on the host side: experiment `clock`, `testbed run` booting it, and
what every trial records about its clock (no VM is booted: run_in_vm is replaced)."""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from testbed import results, waiting
from testbed.commands import experiment as cmd
from testbed.errors import SpecError, UsageError
from testbed.experiment import run_experiment
from testbed.experiment_spec import experiment_from_dict, load_experiment
from testbed.vm import run as vm_run
from testbed.vm.boot import VmResult
from tests.unit.test_experiment import FAKE, fake_open, fake_trial, quiet

RAW = {"topology": "chain", "measurements": {"a": {"kind": "ping"}}}


def test_experiment_clock_key() -> None:
    assert experiment_from_dict(RAW, file="x.toml").clock is None
    exp = experiment_from_dict({**RAW, "clock": "virtual"}, file="x.toml")
    assert exp.clock == "virtual" and exp.to_dict()["clock"] == "virtual"
    with pytest.raises(SpecError) as info:
        experiment_from_dict({**RAW, "clock": "wall"}, file="x.toml")
    assert info.value.key == "clock" and "virtual" in str(info.value)


def test_shipped_delay_experiments_ask_for_the_virtual_clock() -> None:
    root = Path(__file__).resolve().parents[2] / "experiments"
    assert load_experiment(root / "transition.toml").clock == "virtual"
    # gamess-morales mixes host-faithful throughput with delays: no file-wide clock; reproduce
    # puts its delay measurements on the virtual clock (test_report_reproduce)
    assert load_experiment(root / "gamess-morales.toml").clock is None


def args(**kw: Any) -> argparse.Namespace:
    base = {"experiment": str(FAKE), "quick": True, "db": None, "resume": False,
            "dry_run": False, "clock": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_run_boots_the_virtual_clock_tier(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def fake_run_in_vm(argv: list[str], **kw: Any) -> VmResult:
        calls.append({"argv": argv, **kw})
        return VmResult(0, True)

    monkeypatch.delenv("TESTBED_IN_VM", raising=False)
    monkeypatch.delenv("TESTBED_CLOCK", raising=False)
    monkeypatch.setattr(vm_run, "run_in_vm", fake_run_in_vm)
    db = tmp_path / "r.sqlite"
    assert cmd.cmd_run(args(clock="virtual", db=db)) == 0
    (call,) = calls
    assert call["clock"] == "virtual" and call["db"] == db
    assert call["argv"] == ["testbed", "run", str(FAKE.resolve()), "--clock", "virtual",
                            "--quick"]
    with pytest.raises(UsageError, match="--resume"):
        cmd.cmd_run(args(clock="virtual", db=db, resume=True))


def test_only_the_run_that_owns_the_database_names_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """A parallel run's worker stores into a temporary share database its coordinator merges
    and removes: the worker does not point the user at it, the coordinator names the run's."""
    monkeypatch.delenv("TESTBED_IN_VM", raising=False)
    monkeypatch.delenv("TESTBED_CLOCK", raising=False)
    monkeypatch.setattr(vm_run, "run_in_vm", lambda argv, **kw: VmResult(0, True))
    db = tmp_path / "r.sqlite"
    assert cmd.run_on_clock("virtual", FAKE, args(share=None), db) == 0
    assert f"see them with: testbed results --db {db} show" in capsys.readouterr().err
    share = tmp_path / ".parallel-x" / "share-0-1" / "share.json"
    assert cmd.run_on_clock("virtual", FAKE, args(share=share), db) == 0
    assert "see them with" not in capsys.readouterr().err


def test_run_in_a_real_clock_guest_says_what_to_run(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("TESTBED_IN_VM", "1")
    monkeypatch.setenv("TESTBED_CLOCK", "real")
    with pytest.raises(UsageError) as info:
        cmd.cmd_run(args(clock="virtual", db=tmp_path / "r.sqlite"))
    assert "testbed vm --clock virtual -- testbed run" in str(info.value)
    monkeypatch.setenv("TESTBED_CLOCK", "virtual")
    with pytest.raises(UsageError, match="real clock"):
        cmd.cmd_run(args(clock="real", db=tmp_path / "r.sqlite"))


def test_trials_record_their_clock_and_the_hosts_wall_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """In a virtual-clock guest started/finished are the host's wall clock, the guest's own
    (leaping) times are kept apart, and the clock label says virtual with its shift."""
    monkeypatch.setenv("TESTBED_CLOCK", "virtual")
    monkeypatch.setenv("TESTBED_ICOUNT_SHIFT", "0")
    stamps = iter(float(1000 + i) for i in range(10_000))
    monkeypatch.setattr(waiting, "host_time", lambda env=None: next(stamps))
    db = tmp_path / "r.sqlite"
    exp = load_experiment(FAKE, "quick")
    s = run_experiment(exp, db=db, open_testbed=fake_open([]), progress=quiet(),
                       run_trial=fake_trial)
    assert s.failed == 0
    with closing(results.connect(db)) as con:
        rows = list(results.trials(con))
        run = results.runs(con)[0]
    assert 1000 <= run["started"] < 1100 and run["provenance"]["clock"]["clock"] == "virtual"
    for r in rows:
        assert 1000 <= r.started < r.finished < 1100  # host stamps, not the guest's clock
        assert r.result["clock"]["label"] == "virtual(icount shift=0)"
        assert r.result["guest_time"]["started"] > 1e9  # the guest's own time.time()
    assert {g["clock"] for g in results.group_stats(rows)} == {"virtual(icount shift=0)"}
