"""The Testbed's undo journal: reverse order, nested per-trial scopes, folding into namespace
removal, failures reported after every other undo ran; and the plan's shape and front."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testbed import api, capabilities
from testbed.actions import AddVeth, CreateNamespace, SetQdisc, SetSysctls, WaitInterfaces
from testbed.api import Undo
from testbed.plan import compile_plan, plan_for
from testbed.testbed import TeardownError, Testbed
from testbed.topology import topology_from_dict
from testbed.topology_model import Topology


def chain(rate: str = "unlimited") -> Topology:
    return topology_from_dict(
        {
            "nodes": {"h1": {}, "r1": {"role": "router"}, "h2": {}},
            "links": [
                {"endpoints": ["h1", "r1"], "rate": rate},
                {"endpoints": ["r1", "h2"]},
            ],
        },
        file="chain.toml",
    )


def fresh() -> Testbed:
    return Testbed(chain())


def note(log: list[str], what: str, **kw: Any) -> Undo:
    return Undo(what, lambda: log.append(what), **kw)


def test_teardown_runs_undos_in_reverse() -> None:
    tb, log = fresh(), []
    for w in ("a", "b", "c"):
        tb.defer(note(log, w))
    tb.teardown()
    assert log == ["c", "b", "a"]
    tb.teardown()  # nothing left: nothing runs twice
    assert log == ["c", "b", "a"]


def test_a_scope_undoes_only_what_it_started_at_its_end() -> None:
    tb, log = fresh(), []
    tb.defer(note(log, "build"))
    with tb.scope():
        tb.defer(note(log, "trial-1 server"))
        tb.add_cleanup(lambda: log.append("trial-1 file"), "trial-1 file")
    assert log == ["trial-1 file", "trial-1 server"]
    with tb.scope():
        tb.defer(note(log, "trial-2"))
        with tb.scope():
            tb.defer(note(log, "inner"))
        assert log[-1] == "inner"
    assert log[-1] == "trial-2"
    tb.teardown()
    assert log[-1] == "build" and log.count("build") == 1


def test_a_scope_unwinds_when_its_block_raises() -> None:
    tb, log = fresh(), []
    with pytest.raises(ValueError), tb.scope():
        tb.defer(note(log, "server"))
        raise ValueError("trial failed")
    assert log == ["server"]


def test_teardown_unwinds_open_scopes_innermost_first() -> None:
    tb, log = fresh(), []
    tb.defer(note(log, "outer"))
    scope = tb.scope()
    scope.__enter__()
    tb.defer(note(log, "inner"))
    tb.teardown()
    assert log == ["inner", "outer"]


def test_a_failing_undo_is_reported_after_the_others_ran() -> None:
    tb, log = fresh(), []

    def boom() -> None:
        raise OSError("device busy")

    tb.defer(note(log, "first"))
    tb.defer(Undo("remove thing", boom))
    tb.defer(note(log, "last"))
    with pytest.raises(TeardownError) as err:
        tb.teardown()
    assert log == ["last", "first"]
    assert "remove thing: device busy" in str(err.value)


def test_undos_inside_a_removed_namespace_fold_into_its_removal() -> None:
    tb, log = fresh(), []
    tb.defer(note(log, "remove ns", removes="tb-x-r1"))
    tb.defer(note(log, "del link in r1", within="tb-x-r1"))
    tb.defer(note(log, "del link in h1", within="tb-x-h1"))
    tb.teardown()
    assert log == ["del link in h1", "remove ns"]
    # in a scope that does not remove the namespace, the undo runs
    with tb.scope():
        tb.defer(note(log, "trial rule in r1", within="tb-x-r1"))
    assert log[-1] == "trial rule in r1"


@dataclass(frozen=True)
class Mark:
    """A stand-in action: applying it logs, its undo logs."""

    name: str
    log: list[str]

    def describe(self) -> str:
        return f"mark {self.name}"

    def apply(self, env: api.TestbedLike) -> None:
        self.log.append(f"apply {self.name}")
        env.defer(Undo(f"undo {self.name}", lambda: self.log.append(f"undo {self.name}")))


def test_an_action_applied_in_a_scope_is_undone_at_its_end() -> None:
    tb, log = fresh(), []
    with tb.scope():
        tb.apply(Mark("acl", log))
        tb.apply(Mark("qos", log))
    assert log == ["apply acl", "apply qos", "undo qos", "undo acl"]


def test_the_plan_orders_core_actions_then_waits() -> None:
    plan = compile_plan(chain("10mbit"), "x", netem_available=False)
    kinds = [type(a) for a in plan.actions]
    first_veth = kinds.index(AddVeth)
    assert set(kinds[:first_veth]) == {CreateNamespace, SetSysctls}
    assert kinds.index(SetQdisc) > first_veth
    assert kinds[-1] is WaitInterfaces
    assert plan.describe()[0] == "create namespace tb-x-h1 for h1"
    assert sum(k is SetQdisc for k in kinds) == 2  # both ends of the shaped link


def test_plan_and_up_share_their_front(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def has(feature: str) -> bool:
        calls.append(feature)
        return True

    monkeypatch.setattr(capabilities, "has", has)
    plain = plan_for(chain(), "x")
    assert calls == []  # no shaped link: netem is not probed
    shaped = plan_for(chain("10mbit"), "x")
    assert calls == ["netem"]
    assert shaped.describe() == compile_plan(chain("10mbit"), "x", netem_available=True).describe()
    assert any("netem" in line for line in shaped.describe())
    assert not any("tc " in line for line in plain.describe())


def test_scratch_undo_lives_in_the_build_scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    from testbed import state

    monkeypatch.setattr(state, "scratch_dir", lambda name: tmp_path / name)
    tb = fresh()
    tb.name = "j1"
    with tb.scope():
        d = tb.scratch_dir()
        (d / "f").write_text("x")
    assert d.exists()  # made inside a trial, but the run's: the build scope removes it
    tb.teardown()
    assert not d.exists()


def test_sysctl_restores_in_the_nodes_namespace_and_the_core_action_has_no_undo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from testbed import actions

    state = {"tb-x-h2": {"net.ipv4.ip_default_ttl": "64"}}
    monkeypatch.setattr(actions.netlink, "read_sysctl", lambda ns, k: state[ns][k])
    monkeypatch.setattr(actions.netlink, "set_sysctls", lambda ns, v: state[ns].update(v))
    monkeypatch.setattr(actions.netlink, "netns_exists", lambda ns: ns in state)
    undos: list[Undo] = []
    env: Any = type("E", (), {"netns": lambda self, n: f"tb-x-{n}",
                              "defer": lambda self, u: undos.append(u)})()
    values = (("net.ipv4.ip_default_ttl", "33"),)
    core = SetSysctls("tb-x-h2", values)
    assert core.describe() == "tb-x-h2: sysctl net.ipv4.ip_default_ttl=33"
    core.apply(env)
    assert state["tb-x-h2"]["net.ipv4.ip_default_ttl"] == "33" and undos == []
    state["tb-x-h2"]["net.ipv4.ip_default_ttl"] = "64"
    feature = actions.Sysctl("h2", values)
    assert feature.describe() == "h2: sysctl net.ipv4.ip_default_ttl=33"
    feature.apply(env)
    assert state["tb-x-h2"]["net.ipv4.ip_default_ttl"] == "33"
    [undo] = undos
    assert (undo.what, undo.within) == ("restore net.ipv4.ip_default_ttl on h2", "tb-x-h2")
    undo.run()
    assert state["tb-x-h2"]["net.ipv4.ip_default_ttl"] == "64"
