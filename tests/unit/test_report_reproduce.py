"""`testbed reproduce`: paper names, the per-measurement tier choice, and what --dry-run prints."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from testbed.cli import main
from testbed.commands.report import _parse_only, _subset, resolve_paper
from testbed.errors import UsageError
from testbed.experiment_spec import find_experiment, load_experiment, plan
from testbed.tiers import choose


def lacks(*features: str):  # type: ignore[no-untyped-def]
    def missing(wanted: Sequence[str]) -> list[str]:
        return [f for f in wanted if f in features]

    return missing


def test_paper_names() -> None:
    assert resolve_paper("gamess-morales") == "gamess-morales"
    assert resolve_paper("transition") == "quintero-2016"
    with pytest.raises(UsageError) as exc:
        resolve_paper("nope-1999")
    assert "gometz-2015" in str(exc.value) and "zeadally-2004" in str(exc.value)


def test_unknown_paper_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "nope-1999", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown paper 'nope-1999'" in err and "quintero-2016" in err


def test_gamess_delay_goes_to_the_vm_only_without_netem() -> None:
    exp = load_experiment(find_experiment("gamess-morales"), "quick")
    tiers = {c.measurement: c.tier for c in choose(exp, lacks("netem", "sit", "jool"))}
    assert tiers["throughput_v4"] == tiers["throughput_v6"] == "host"
    assert tiers["owd_v4"] == tiers["owd_v6"] == "vm"
    assert {c.tier for c in choose(exp, lacks())} == {"host"}
    forced = choose(exp, lacks("netem"), forced="host")
    assert {c.tier for c in forced} == {"host"}
    assert "host lacks netem" in next(c.reason for c in forced if c.measurement == "owd_v4")
    virtual = choose(exp, lacks("netem"))
    assert {(c.tier, c.clock) for c in virtual} == {("host", "real"), ("vm", "virtual")}


def test_transition_mechanisms_need_their_modules() -> None:
    exp = load_experiment(find_experiment("transition"), "quick")
    choices = choose(exp, lacks("sit", "jool", "netem"))
    tier = {(c.measurement, t): c.tier for c in choices for t in c.topologies}
    tput = [m.name for m in exp.measurements if m.kind == "iperf3"]
    assert tput
    for m in tput:
        for topo in ("6to4", "isatap", "nat64-jool"):
            if (m, topo) in tier:
                assert tier[(m, topo)] == "vm"
        for topo in ("native4", "native6", "nat64-tayga"):
            if (m, topo) in tier:
                assert tier[(m, topo)] == "host"
    assert any(t == "6to4" for (_m, t) in tier) and any(t == "native6" for (_m, t) in tier)
    assert all("sit" in c.reason for c in choices if "6to4" in c.topologies)
    assert sum(c.trials for c in choices) == len(plan(exp))
    # the subset for one tier plans exactly that tier's trials
    host = [c for c in choices if c.tier == "host"]
    sub = plan(_subset(exp, host))
    assert len(sub) == sum(c.trials for c in host)
    assert {t.topo.topology for t in sub} <= {"native4", "native6", "nat64-tayga"}
    assert {t.group_key for t in sub} <= {t.group_key for t in plan(exp)}
    assert _parse_only(host[0].spec).topologies == host[0].topologies


def test_dry_run_prints_the_choice(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("testbed.capabilities.missing", lacks("netem"))
    assert main(["reproduce", "gamess-morales", "--quick", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "gamess-morales/throughput_v4 on chain: host tier, real clock" in err
    assert "gamess-morales/owd_v4 on chain: vm tier" in err
    assert "needs per-packet serialization" in err
    assert "trials" in err.splitlines()[-1]


def test_guest_workers_auto_is_one_per_core_within_memory_and_a_number_is_taken() -> None:
    from testbed.vm.memory import GUEST_MIB
    from testbed.vm.memory import worker_count as guest_workers

    assert guest_workers("auto", ncpu=2, free_mib=20000) == 2
    assert guest_workers("auto", ncpu=16, free_mib=100000) == 4  # at most 4
    assert guest_workers("auto", ncpu=8, free_mib=2 * GUEST_MIB + 10) == 2  # memory bounds it
    assert guest_workers("auto", ncpu=8, free_mib=100) == 1
    assert guest_workers("3", ncpu=1, free_mib=100) == 3  # an explicit number is obeyed
    for bad in ("0", "two", "-1"):
        with pytest.raises(UsageError, match="--workers"):
            guest_workers(bad)


def test_dry_run_says_how_many_guests_run_side_by_side(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("testbed.capabilities.missing", lacks("netem"))
    assert main(["reproduce", "gamess-morales", "--quick", "--dry-run", "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert "the full-kernel part runs in 2 guest(s) side by side" in err
    assert main(["reproduce", "gamess-morales", "--quick", "--dry-run", "--workers", "1"]) == 0
    assert "runs in 1 guest(s)\n" in capsys.readouterr().err


def test_kinds_that_build_their_own_topology_declare_its_kernel_needs() -> None:
    from testbed.features import kernel_needs_of_file
    from testbed.measure import kinds

    fc = kinds.get("featurecheck").kernel_needs
    rp = kinds.get("routerprofile").kernel_needs
    assert fc is not None and rp is not None
    assert "esp" in fc({"feature": "ipsec"}) and "hfsc" in fc({"feature": "qos-hfsc"})
    assert "esp" not in fc({"feature": "nat"}) and "hfsc" not in fc({"feature": "qos"})
    assert "esp" in rp({"topology": "router-profile", "profile": "vpn"})
    assert "esp" not in rp({"topology": "router-profile", "profile": "plain"})
    assert "esp" not in rp({"topology": "router-profile", "profile": "nat"})
    from testbed.topology import find_topology

    path = find_topology("router-profile")
    assert "esp" in kernel_needs_of_file(path)  # unswitched: every feature table counts
    assert "esp" not in kernel_needs_of_file(path, {"vpn": False})


def test_reproduce_puts_what_needs_esp_or_hfsc_in_the_vm(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = load_experiment(find_experiment("gometz-2015-kernel"), "quick")
    choices = choose(exp, lacks("esp", "hfsc"))
    assert {c.measurement: c.tier for c in choices} == {"features": "vm", "profiles": "vm"}
    assert all("esp" in c.reason for c in choices)
    here = choose(exp, lacks())  # a host with every module: all on the host
    assert {c.tier for c in here} == {"host"}
    gm = load_experiment(find_experiment("gometz-2015"), "quick")
    tiers = {c.measurement: c.tier for c in choose(gm, lacks("esp", "hfsc", "netem"))}
    assert tiers["features"] == tiers["profiles"] == "host"  # nothing there needs esp/hfsc


# --- reproduce --resume: a long run in sittings ---------------------------------------------


def _parts(paper: str) -> tuple[object, object]:
    """gamess-morales quick without netem: its host part and its guests' part."""
    exp = load_experiment(find_experiment(paper), "quick")
    choices = choose(exp, lacks("netem"))
    host = _subset(exp, [c for c in choices if c.tier == "host"])
    vm = _subset(exp, [c for c in choices if c.tier == "vm"])
    return host, vm


def _store(db: object, part: object, finished: bool) -> str:
    from contextlib import closing
    from pathlib import Path

    from testbed import results

    assert isinstance(db, Path)
    with closing(results.connect(db)) as con:
        run_id = results.start_run(con, part.name, part.profile,  # type: ignore[attr-defined]
                                   part.to_dict(), {}, 3)  # type: ignore[attr-defined]
        if finished:
            results.finish_run(con, run_id)
    return run_id


def test_a_part_is_done_resumed_or_new_by_what_it_planned(tmp_path: object) -> None:
    from pathlib import Path

    from testbed.commands.report import _part_state

    assert isinstance(tmp_path, Path)
    db = tmp_path / "r.sqlite"
    host, vm = _parts("gamess-morales")
    assert _part_state(db, host) == ("new", None)  # no database yet
    done = _store(db, host, finished=True)
    assert _part_state(db, host) == ("done", done)
    assert _part_state(db, vm) == ("new", None)  # the host's run is not the guests'
    open_ = _store(db, vm, finished=False)
    assert _part_state(db, vm) == ("resume", open_)
    # an unfinished run of another plan started later: resuming would continue that one
    _store(db, _first_only(vm), finished=False)
    assert _part_state(db, vm) == ("new", None)


def _first_only(part: object) -> object:
    import dataclasses

    ms = part.measurements  # type: ignore[attr-defined]
    return dataclasses.replace(part, measurements=ms[:1])  # type: ignore[type-var]


def test_resume_runs_only_what_did_not_finish(tmp_path: object, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    import testbed.commands.report as rep

    assert isinstance(tmp_path, Path)
    db = tmp_path / "r.sqlite"
    monkeypatch.setattr("testbed.capabilities.missing", lacks("netem"))
    monkeypatch.setattr(rep, "_check_reproduce_needs", lambda *a: None)
    calls: list[tuple[str, bool]] = []
    monkeypatch.setattr(rep, "_run_here", lambda exp, db, resume=False:
                        calls.append(("host", resume)) or 0)
    monkeypatch.setattr(rep, "_run_vm_parallel", lambda exp, w, db, resume=False:
                        calls.append(("vm", resume)) or 0)
    argv = ["reproduce", "gamess-morales", "--quick", "--no-report", "--workers", "2",
            "--db", str(db)]
    assert main([*argv, "--resume"]) == 2  # nothing stored to continue
    err = capsys.readouterr().err
    assert "--resume" in err and "holds no quick run of gamess-morales" in err
    assert "start without --resume" in err and calls == []

    host, vm = _parts("gamess-morales")
    done = _store(db, host, finished=True)
    open_ = _store(db, vm, finished=False)
    assert main([*argv, "--resume"]) == 0
    assert calls == [("vm", True)]  # the finished host part kept, the guests' part continued
    assert f"done in run {done} (--resume keeps it)" in capsys.readouterr().err
    calls.clear()
    assert main(argv) == 0  # without --resume everything runs anew
    assert calls == [("host", False), ("vm", False)]
    assert open_
