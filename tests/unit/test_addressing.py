"""Unit tests: deterministic addresses, explicit addresses, shortest-path routes, plans."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from testbed.addressing import plan_addresses
from testbed.errors import MissingCapability, SpecError
from testbed.plan import (
    NEIGHBOR_REACHABLE_MS,
    AddRoute,
    AddVeth,
    SetQdisc,
    SetSysctls,
    compile_plan,
)
from testbed.shaping import qdisc_for, wire_bytes
from testbed.topology import load_topology, topology_from_dict

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def chain(n: int, **sets: str):  # type: ignore[no-untyped-def]
    return load_topology(TOPOLOGIES / "chain.toml", {"routers": str(n), **sets})


def test_addresses_are_deterministic_and_distinct() -> None:
    a = plan_addresses(chain(5))
    b = plan_addresses(chain(5))
    assert a == b
    addrs = [x for i in a.interfaces for x in i.addresses]
    assert len(addrs) == len(set(addrs)) == 2 * 2 * 6
    assert a.address("h1", 4) == "198.18.0.1"
    assert a.address("h2", 6) == "2001:2:0:5::2"


def test_interfaces_named_in_link_order() -> None:
    plan = plan_addresses(chain(2))
    assert [(i.name, i.peer_node) for i in plan.of("r1")] == [("eth0", "h1"), ("eth1", "r2")]


def _next_hop_path(plan, topo, src: str, dst_addr: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Follow the static routes hop by hop, as the kernel would (longest prefix match)."""
    target = ipaddress.ip_address(dst_addr)
    node, path = src, [src]
    for _ in range(100):
        own = [ipaddress.ip_interface(a) for i in plan.of(node) for a in i.addresses]
        if any(o.ip == target for o in own):
            return path
        connected = [
            i
            for i in plan.of(node)
            for a in i.addresses
            if target in ipaddress.ip_interface(a).network
        ]
        if connected:
            node = connected[0].peer_node
            path.append(node)
            continue
        routes = [
            r
            for r in plan.routes_of(node)
            if ipaddress.ip_address(r.via).version == target.version
            and target in ipaddress.ip_network(r.dst)
        ]
        assert routes, f"{node} has no route to {dst_addr}"
        best = max(routes, key=lambda r: ipaddress.ip_network(r.dst).prefixlen)
        nxt = [i.peer_node for i in plan.of(node) if i.name == best.dev]
        node = nxt[0]
        path.append(node)
    raise AssertionError("routing loop")


@pytest.mark.parametrize("family", [4, 6])
def test_every_node_reaches_every_address_on_the_shortest_path(family: int) -> None:
    # A ring of 5 routers with two hosts: shortest paths are unique and checkable.
    raw = {
        "nodes": {"h1": {}, "h2": {}, **{f"r{i}": {"role": "router"} for i in range(1, 6)}},
        "links": [{"endpoints": ["h1", "r1"]}, {"endpoints": ["h2", "r3"]}]
        + [{"endpoints": [f"r{i}", f"r{i % 5 + 1}"]} for i in range(1, 6)],
    }
    topo = topology_from_dict(raw)
    plan = plan_addresses(topo)
    for src in topo.node_names:
        for iface in plan.interfaces:
            addr = iface.address(family)
            assert addr is not None
            path = _next_hop_path(plan, topo, src, addr)
            assert path[-1] == iface.node
    # h1 -> h2: r1, r2, r3 (3 hops) rather than r1, r5, r4, r3
    assert _next_hop_path(plan, topo, "h1", plan.address("h2", family)) == [
        "h1",
        "r1",
        "r2",
        "r3",
        "h2",
    ]


def test_hosts_get_default_routes_routers_specific() -> None:
    plan = plan_addresses(chain(3))
    assert {r.dst for r in plan.routes_of("h1")} == {"0.0.0.0/0", "::/0"}
    r2 = {r.dst for r in plan.routes_of("r2")}
    assert "0.0.0.0/0" not in r2 and "198.18.0.0/24" in r2 and "2001:2:0:3::/64" in r2


def test_explicit_addresses_and_routes() -> None:
    raw = {
        "nodes": {"a": {}, "b": {"role": "router"}, "c": {}},
        "links": [
            {
                "endpoints": ["a", "b"],
                "addresses": {
                    "a": ["10.9.0.1/30", "fd00::1/64"],
                    "b": ["10.9.0.2/30", "fd00::2/64"],
                },
            },
            {"endpoints": ["b", "c"], "ipv4": "10.8.0.0/29"},
        ],
        "routes": [{"node": "a", "to": "10.8.0.0/29", "via": "10.9.0.2"}],
    }
    topo = topology_from_dict(raw)
    plan = plan_addresses(topo)
    assert plan.address("a", 4) == "10.9.0.1"
    assert plan.address("c", 4) == "10.8.0.2"
    explicit = [r for r in plan.routes_of("a") if r.dst == "10.8.0.0/29"]
    assert explicit and explicit[0].via == "10.9.0.2" and explicit[0].dev == "eth0"


def test_address_errors() -> None:
    raw = {
        "nodes": {"a": {}, "b": {}},
        "links": [
            {"endpoints": ["a", "b"], "addresses": {"a": ["10.0.0.1/24"], "b": ["10.0.1.1/24"]}}
        ],
    }
    with pytest.raises(SpecError, match="not on one subnet"):
        plan_addresses(topology_from_dict(raw))
    raw["links"][0]["addresses"] = {"a": ["10.0.0.1/24"]}  # type: ignore[index]
    with pytest.raises(SpecError, match="only one end"):
        plan_addresses(topology_from_dict(raw))


def test_single_stack_nodes() -> None:
    raw = {
        "nodes": {"a": {"stack": "ipv6"}, "b": {"stack": "dual"}},
        "links": [{"endpoints": ["a", "b"]}],
    }
    plan = plan_addresses(topology_from_dict(raw))
    assert all(":" in a for i in plan.interfaces for a in i.addresses)


def test_plan_shapes_both_directions_with_ethernet_framing() -> None:
    plan = compile_plan(chain(1, rate="ethernet"), "x", netem_available=False)
    qd = [a for a in plan.actions if isinstance(a, SetQdisc)]
    assert len(qd) == 4  # two links, both ends
    args = qd[0].qdisc.args
    assert qd[0].qdisc.kind == "tbf"
    assert args[args.index("overhead") + 1] == "24" and args[args.index("mpu") + 1] == "84"
    assert args[args.index("rate") + 1] == "10000000bit"


def test_plan_orders_and_names() -> None:
    plan = compile_plan(chain(2), "abc", netem_available=False)
    assert plan.namespaces["r1"] == "tb-abc-r1"
    kinds = [type(a).__name__ for a in plan.actions]
    assert kinds.index("AddVeth") > kinds.index("SetSysctls")
    assert kinds.index("AddRoute") > max(i for i, k in enumerate(kinds) if k == "AddAddress")
    veths = [a for a in plan.actions if isinstance(a, AddVeth)]
    assert all(v.index_a != v.index_b for v in veths)
    assert all(isinstance(a.dst, str) for a in plan.actions if isinstance(a, AddRoute))


def test_every_interface_keeps_its_neighbors_reachable_after_its_veth_exists() -> None:
    raw = {
        "nodes": {"a": {"stack": "ipv4"}, "b": {"stack": "dual"}, "c": {"stack": "ipv6"}},
        "links": [{"endpoints": ["a", "b"]}, {"endpoints": ["b", "c"]}],
    }
    plan = compile_plan(topology_from_dict(raw), "n", netem_available=False)
    last_veth = max(i for i, a in enumerate(plan.actions) if isinstance(a, AddVeth))
    keys = {(a.ns, k): v for i, a in enumerate(plan.actions) if isinstance(a, SetSysctls)
            and i > last_veth for k, v in a.values}
    for iface in plan.addresses.interfaces:
        ns = plan.namespaces[iface.node]
        for v in plan.topology.node(iface.node).families:
            assert keys[(ns, f"net.ipv{v}.neigh.{iface.name}.base_reachable_time_ms")] == str(
                NEIGHBOR_REACHABLE_MS)
            assert keys[(ns, f"net.ipv{v}.neigh.{iface.name}.delay_first_probe_time")] == "0"
    # a family a node does not run has no neighbor table to set
    assert not any(k.startswith("net.ipv6.") for (ns, k) in keys if ns == plan.namespaces["a"])
    assert not any(k.startswith("net.ipv4.") for (ns, k) in keys if ns == plan.namespaces["c"])


def test_delay_without_netem_names_feature_and_vm_tier() -> None:
    topo = load_topology(TOPOLOGIES / "p2p.toml", {"delay": "5ms"})
    with pytest.raises(MissingCapability) as err:
        compile_plan(topo, "x", netem_available=False)
    assert "sch_netem" in str(err.value) and "testbed vm" in str(err.value)
    assert "links[0]" in str(err.value)


def test_netem_when_available_models_serialization() -> None:
    topo = load_topology(TOPOLOGIES / "p2p.toml", {"delay": "5ms", "rate": "ethernet"})
    q = qdisc_for(topo.links[0], netem_available=True)
    assert q is not None and q.kind == "netem"
    assert q.args[q.args.index("rate") + 1 : q.args.index("rate") + 3] == ("10000000bit", "limit")
    assert q.args[q.args.index("delay") + 1] == "5000.0us"
    # Ethernet framing from a size table: overhead 24, minimum frame 84, one cell per byte
    argv = q.argv("eth0")
    stab = argv[argv.index("stab") : argv.index("netem")]
    assert argv.index("root") < argv.index("stab") < argv.index("netem")
    opts = dict(zip(stab[1::2], stab[2::2], strict=True))
    assert opts == {"overhead": "24", "mpu": "84", "mtu": "2047", "tsize": "2048"}


def test_size_table_covers_jumbo_frames() -> None:
    topo = load_topology(TOPOLOGIES / "p2p.toml", {"mtu": 9000, "rate": "ethernet"})
    q = qdisc_for(topo.links[0], netem_available=True)
    assert q is not None
    opts = dict(zip(q.stab[1::2], q.stab[2::2], strict=True))
    assert int(opts["tsize"]) >= 9000 + 14 + 24 and int(opts["mtu"]) == int(opts["tsize"]) - 1


def test_wire_bytes() -> None:
    assert wire_bytes(14 + 20 + 8 + 18) == 84  # 18-byte UDP payload: the minimum frame
    assert wire_bytes(14 + 20 + 8 + 1) == 84
    assert wire_bytes(1514) == 1538
