"""The tier choice reads what the kinds declare: what each measures, and why the host is
faithful for it."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from testbed import tiers
from testbed.experiment_spec import experiment_from_dict, find_experiment, load_experiment
from testbed.measure import kinds
from testbed.measure.kinds import base


def lacks(*features: str):  # type: ignore[no-untyped-def]
    def missing(wanted: Sequence[str]) -> list[str]:
        return [f for f in wanted if f in features]

    return missing


def test_every_kind_declares_what_it_measures() -> None:
    measures = {k.name: k.measures for k in kinds.KINDS.values()}
    assert set(measures.values()) <= set(base.Measures.__args__)  # type: ignore[attr-defined]
    assert {n for n, m in measures.items() if m == "delay"} == {"ping", "pingpong"}
    assert {n for n, m in measures.items() if m == "throughput"} == {"iperf3", "rfc2544"}
    for name in ("iperf3", "rfc2544", "stackcost", "receiver"):
        assert kinds.get(name).host_reason


def test_a_delay_kind_over_shaped_links_needs_netem_and_says_why() -> None:
    exp = load_experiment(find_experiment("gamess-morales"), "quick")
    choices = tiers.choose(exp, lacks("netem"))
    owd = [c for c in choices if c.measurement.startswith("owd")]
    assert owd and all(c.tier == "vm" and c.clock == "virtual" for c in owd)
    assert all(c.reason.startswith(tiers.NETEM_FOR_DELAY) for c in owd)
    thr = [c for c in choices if c.measurement.startswith("throughput")]
    assert thr and all(c.tier == "host" and c.clock == "real" for c in thr)
    assert {c.reason.split(";")[0] for c in thr} == {kinds.get("iperf3").host_reason}


def test_stack_costs_go_to_the_virtual_clock_unless_the_tier_is_forced() -> None:
    exp = load_experiment(find_experiment("zeadally-2004"), "quick")
    stack = [c for c in tiers.choose(exp, lacks()) if c.measurement == "stack"]
    assert [(c.tier, c.clock, c.reason) for c in stack] == [
        ("vm", "virtual", kinds.get("stackcost").virtual_reason)]
    assert "count of instructions" in stack[0].reason
    forced = [c for c in tiers.choose(exp, lacks(), "host") if c.measurement == "stack"]
    assert [(c.tier, c.clock) for c in forced] == [("host", "real")]
    # the other kinds the host runs faithfully stay there
    assert {c.tier for c in tiers.choose(exp, lacks()) if c.measurement.endswith("throughput")} \
        == {"host"}
    assert sorted(k.name for k in kinds.KINDS.values() if k.virtual_reason) == [
        "icmpload", "stackcost"]


def test_the_routers_cpu_per_echo_goes_to_the_virtual_clock_once_per_cell() -> None:
    exp = load_experiment(find_experiment("dobrinov-2016"), "quick")
    icmp = [c for c in tiers.choose(exp, lacks()) if c.measurement == "icmp"]
    assert [(c.tier, c.clock) for c in icmp] == [("vm", "virtual")]
    assert icmp[0].trials == 8  # 2 versions x 2 rates x 2 sizes, once each (3 on the host)
    host = [c for c in tiers.choose(exp, lacks(), "host") if c.measurement == "icmp"]
    assert [(c.tier, c.clock, c.trials) for c in host] == [("host", "real", 24)]


@pytest.mark.parametrize(("names", "timed"), [
    (["iperf3", "rfc2544"], []),
    (["iperf3", "pingpong", "load"], ["load", "pingpong"]),
])
def test_timed_kinds_are_all_but_throughput(names: list[str], timed: list[str]) -> None:
    exp = SimpleNamespace(measurements=[SimpleNamespace(kind=n) for n in names])
    assert tiers.timed_kinds(exp) == timed


def test_a_kind_must_say_what_it_measures() -> None:
    ping = kinds.get("ping")
    with pytest.raises(TypeError, match="measures"):
        base.Kind(ping.name, ping.doc, ping.tool, ping.params, ping.metrics,  # type: ignore[call-arg]
                  ping.runner)


def test_no_list_of_kinds_outside_the_kinds() -> None:
    """The tier choice, parallel runs and the CLI read what the kinds declare: no module of
    theirs spells a kind's name."""
    import ast
    from pathlib import Path

    root = Path(tiers.__file__).parent
    names = set(kinds.KINDS)
    for rel in ("tiers.py", "parallel.py", "commands/report.py", "commands/experiment.py"):
        tree = ast.parse((root / rel).read_text())
        spelled = {n.value for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and isinstance(n.value, str)} & names
        assert not spelled, f"testbed/{rel} names kinds {sorted(spelled)}"


def test_exact_cells_are_measured_once_on_the_virtual_clock_only() -> None:
    from testbed.experiment_spec import count_trials, for_clock

    exp = load_experiment(find_experiment("gamess-morales"), "full")
    assert exp.repetitions == 5
    virtual = for_clock(exp, "virtual")
    owd = [m for m in virtual.measurements if m.kind == "pingpong"]
    assert owd and all(m.reps(virtual.repetitions) == 1 and "0.1 µs" in m.once for m in owd)
    # throughput (rfc2544) is not declared exact: its repetitions stay
    assert all(m.reps(virtual.repetitions) == 5 and not m.once
               for m in virtual.measurements if m.kind == "rfc2544")
    assert for_clock(exp, "real") is exp and for_clock(exp, None) is exp
    assert count_trials(exp) - count_trials(virtual) == 720 - 144
    assert for_clock(virtual, "virtual") == virtual  # once is once
    assert sorted(k.name for k in kinds.KINDS.values() if k.virtual_exact) == [
        "icmpload", "iperf3", "pingpong"]
    # what the run stores says why
    stored = [m for m in virtual.to_dict()["measurements"] if m["kind"] == "pingpong"]
    assert all(m["repetitions"] == 1 and m["once"] for m in stored)
    # the dry run's count per tier follows: the VM tier runs each OWD cell once
    choices = tiers.choose(exp, lacks("netem"))
    assert sum(c.trials for c in choices if c.measurement.startswith("owd")) == 144
    assert all("each cell once" in c.reason for c in choices if c.measurement.startswith("owd"))
    assert sum(c.trials for c in choices if c.measurement.startswith("throughput")) == 300
    # the searches may stop early (a precision rule): the dry run's count is a ceiling there
    assert all(c.at_most == c.measurement.startswith("throughput") for c in choices)
    assert all("at most" in c.reason for c in choices if c.at_most)


def test_exact_once_can_be_turned_off_and_never_applies_to_a_budgeted_router(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from testbed.experiment_spec import EXACT_ONCE_ENV, for_clock

    exp = load_experiment(find_experiment("gamess-morales"), "full")
    monkeypatch.setenv(EXACT_ONCE_ENV, "0")
    assert for_clock(exp, "virtual") == exp
    monkeypatch.delenv(EXACT_ONCE_ENV)
    assert replace(exp, measurements=[]) == replace(for_clock(exp, "virtual"), measurements=[])
    for budget, once in (("0.1", False), ("none", True), ("1", True)):
        raw = {"topology": "one-router-budget", "repetitions": 5,
               "params": {"budget": budget, "rate": "fastethernet"},
               "measurements": {"owd": {"kind": "pingpong", "size": [10, 100]}}}
        on = for_clock(experiment_from_dict(raw, file=str(find_experiment("gamess-morales")),
                                            profile="full"), "virtual")
        (m,) = on.measurements
        assert bool(m.once) is once, budget
        assert (f"a CPU budget of {budget}" in m.varies) is not once, budget


def test_a_feature_that_moves_on_the_virtual_clock_keeps_its_measurements_repeated() -> None:
    """Jool's OWD moves between trials on the virtual clock (docs/vm.md): a measurement that
    reaches nat64-jool keeps its repetitions and says why; the same kind elsewhere is once."""
    from testbed.experiment_spec import for_clock
    from testbed.features import registry

    assert registry()["nat64-jool"].virtual_varies
    assert not registry()["nat64-tayga"].virtual_varies
    exp = load_experiment(find_experiment("transition"), "full")
    virtual = {m.name: m for m in for_clock(exp, "virtual").measurements}
    jool = virtual["owd_v6_jool"]
    assert not jool.once and jool.reps(exp.repetitions) == 10
    assert jool.varies.startswith("nat64-jool[") and "Jool" in jool.varies
    assert jool.precision is not None and jool.precision.metric == "owd_median_us"
    assert virtual["owd_v6"].once and not virtual["owd_v6"].varies
    stored = {m["name"]: m for m in for_clock(exp, "virtual").to_dict()["measurements"]}
    assert "varies" in stored["owd_tcp_v6_jool"] and "varies" not in stored["owd_tcp_v6"]
    # the same measurement, nat64-jool among its topologies: all of it is repeated
    from dataclasses import replace
    merged = [replace(m, where={**m.where, "topology": [*m.where["topology"], "nat64-jool"]})
              if m.name == "owd_v6" else m for m in exp.measurements]
    again = {m.name: m for m in for_clock(replace(exp, measurements=merged),
                                          "virtual").measurements}
    assert not again["owd_v6"].once and again["owd_v6"].varies
    choices = [c for c in tiers.choose(exp, lacks("netem", "sit", "jool"))
               if c.measurement == "owd_v6_jool"]
    assert choices and all("repeated on the virtual clock: nat64-jool" in c.reason
                           for c in choices)


def test_iperf3_is_exact_on_the_virtual_clock_only_for_one_udp_stream() -> None:
    """iperf3's evidence (docs/vm.md) covers one forward UDP stream: TCP, a protocol sweep that
    reaches TCP, parallel streams or mixed flows keep their repetitions."""
    from testbed.experiment_spec import for_clock

    iperf3 = kinds.get("iperf3")
    udp = {"protocol": "udp", "streams": 1, "ratio": None, "direction": "forward"}
    assert iperf3.exact_on_virtual(udp, {"length": [50, 10000]}) == iperf3.virtual_exact
    assert iperf3.exact_on_virtual({**udp, "protocol": "tcp"}, {}) == ""
    assert iperf3.exact_on_virtual(udp, {"protocol": ["udp", "tcp"]}) == ""
    assert iperf3.exact_on_virtual({**udp, "streams": 4}, {}) == ""
    assert iperf3.exact_on_virtual({**udp, "ratio": "90/10"}, {}) == ""
    assert iperf3.exact_on_virtual({**udp, "rate": 100e6}, {}) == ""
    assert iperf3.exact_on_virtual(udp, {"direction": ["forward", "reverse"]}) == ""
    assert kinds.get("rfc2544").exact_on_virtual(udp, {}) == ""  # says nothing: never exact
    exp = load_experiment(find_experiment("transition"), "full")
    virtual = {m.name: m for m in for_clock(exp, "virtual").measurements}
    assert virtual["udp_v6"].once and virtual["udp_v6"].reps(exp.repetitions) == 1
    assert virtual["udp_v6"].precision is None
    jool = virtual["udp_v6_jool"]  # Jool moves on the virtual clock: repeated, with its rule
    assert not jool.once and jool.varies and jool.precision is not None
    ze = for_clock(load_experiment(find_experiment("zeadally-2004"), "full"), "virtual")
    assert [m.name for m in ze.measurements if m.kind == "iperf3" and not m.once] == [
        "tcp_throughput", "udp_throughput"]  # TCP; UDP paced at 100 Mbit/s
