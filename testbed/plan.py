"""Compile a topology and its address plan into an ordered, printable list of actions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from testbed.addressing import AddressPlan, plan_addresses
from testbed.shaping import Qdisc, qdisc_for
from testbed.topology import NODE_NAME, Topology

NS_PREFIX = "tb-"
IFINDEX_BASE = 100
MAX_HOPS = 255  # TTL and hop limit of packets the nodes send (the most IPv4/IPv6 allow)


def netns_name(run: str, node: str) -> str:
    return f"{NS_PREFIX}{run}-{node}"


def run_namespaces(run: str, names: Iterable[str]) -> list[str]:
    """Those of `names` that are run `run`'s by name: tb-RUN-NODE with a valid node name
    (run names have no '-', so tb-a-h1 is never run `a-b`'s; tb-probe-PID has digits)."""
    prefix = f"{NS_PREFIX}{run}-"
    return [n for n in names if n.startswith(prefix) and NODE_NAME.fullmatch(n[len(prefix) :])]


@dataclass(frozen=True)
class CreateNamespace:
    node: str
    ns: str

    def describe(self) -> str:
        return f"create namespace {self.ns} for {self.node}"


@dataclass(frozen=True)
class SetSysctls:
    ns: str
    values: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        return f"{self.ns}: sysctl " + " ".join(f"{k}={v}" for k, v in self.values)


@dataclass(frozen=True)
class AddVeth:
    ns_a: str
    if_a: str
    ns_b: str
    if_b: str
    mtu: int
    index_a: int = 0
    index_b: int = 0

    def describe(self) -> str:
        return (
            f"veth {self.ns_a}/{self.if_a} (ifindex {self.index_a}) <-> "
            f"{self.ns_b}/{self.if_b} (ifindex {self.index_b}) mtu {self.mtu}"
        )


@dataclass(frozen=True)
class AddAddress:
    ns: str
    ifname: str
    cidr: str

    def describe(self) -> str:
        return f"{self.ns}: address {self.cidr} on {self.ifname}"


@dataclass(frozen=True)
class LinkUp:
    ns: str
    ifname: str

    def describe(self) -> str:
        return f"{self.ns}: {self.ifname} up"


@dataclass(frozen=True)
class AddRoute:
    ns: str
    dst: str
    via: str
    dev: str

    def describe(self) -> str:
        return f"{self.ns}: route {self.dst} via {self.via} dev {self.dev}"


@dataclass(frozen=True)
class SetQdisc:
    ns: str
    ifname: str
    qdisc: Qdisc

    def describe(self) -> str:
        return f"{self.ns}: tc {' '.join(self.qdisc.argv(self.ifname))}"


@dataclass(frozen=True)
class OffloadOff:
    ns: str
    ifname: str

    def describe(self) -> str:
        return f"{self.ns}: segmentation offloads off on {self.ifname} (netem counts per packet)"


Action = (
    CreateNamespace | SetSysctls | AddVeth | AddAddress | LinkUp | AddRoute | SetQdisc | OffloadOff
)


@dataclass(frozen=True)
class Plan:
    """Everything to create, in order; undoing runs in reverse."""

    run: str
    topology: Topology
    addresses: AddressPlan
    namespaces: dict[str, str]  # node -> namespace
    actions: tuple[Action, ...] = field(default_factory=tuple)

    def describe(self) -> list[str]:
        return [a.describe() for a in self.actions]


def node_sysctls(topo: Topology, node: str) -> tuple[tuple[str, str], ...]:
    n = topo.node(node)
    values: list[tuple[str, str]] = []
    if 6 in n.families:
        # No duplicate address detection: addresses are usable at once (a fresh veth pair
        # never duplicates an address).
        values += [
            ("net.ipv6.conf.all.accept_dad", "0"),
            ("net.ipv6.conf.default.accept_dad", "0"),
            ("net.ipv6.conf.default.dad_transmits", "0"),
            ("net.ipv6.icmp.ratelimit", "0"),
            # hop limit 255 (kernel default 64): a chain of up to 250 routers is crossable;
            # `default` is read when the node's veths are created, after these sysctls
            ("net.ipv6.conf.all.hop_limit", str(MAX_HOPS)),
            ("net.ipv6.conf.default.hop_limit", str(MAX_HOPS)),
        ]
    else:
        values += [
            ("net.ipv6.conf.all.disable_ipv6", "1"),
            ("net.ipv6.conf.default.disable_ipv6", "1"),
        ]
    if 4 in n.families:
        values += [("net.ipv4.icmp_ratelimit", "0"), ("net.ipv4.ip_default_ttl", str(MAX_HOPS))]
    if n.role == "router":
        if 4 in n.families:
            values.append(("net.ipv4.ip_forward", "1"))
        if 6 in n.families:
            values.append(("net.ipv6.conf.all.forwarding", "1"))
    return tuple(values)


def compile_plan(topo: Topology, run: str, *, netem_available: bool) -> Plan:
    """The whole build as actions. Pure: raises SpecError/MissingCapability, creates nothing."""
    addrs = plan_addresses(topo)
    namespaces = {n.name: netns_name(run, n.name) for n in topo.nodes}
    actions: list[Action] = []
    for n in topo.nodes:
        actions.append(CreateNamespace(n.name, namespaces[n.name]))
        actions.append(SetSysctls(namespaces[n.name], node_sysctls(topo, n.name)))
    by_link: dict[int, list[Any]] = {}
    for iface in addrs.interfaces:
        by_link.setdefault(iface.link, []).append(iface)
    qdiscs = {lk.index: qdisc_for(lk, netem_available) for lk in topo.links}
    for link in topo.links:
        ia, ib = sorted(by_link[link.index], key=lambda i: 0 if i.node == link.a else 1)
        # Unique ifindexes per run (see netlink.Netns.add_veth for why they must differ).
        actions.append(
            AddVeth(
                namespaces[ia.node],
                ia.name,
                namespaces[ib.node],
                ib.name,
                link.mtu,
                IFINDEX_BASE + 2 * link.index,
                IFINDEX_BASE + 2 * link.index + 1,
            )
        )
    for n in topo.nodes:
        ns = namespaces[n.name]
        actions.append(LinkUp(ns, "lo"))
        for iface in addrs.of(n.name):
            for cidr in iface.addresses:
                actions.append(AddAddress(ns, iface.name, cidr))
            actions.append(LinkUp(ns, iface.name))
    for n in topo.nodes:
        ns = namespaces[n.name]
        for r in addrs.routes_of(n.name):
            actions.append(AddRoute(ns, r.dst, r.via, r.dev))
        for iface in addrs.of(n.name):
            q = qdiscs[iface.link]
            if q is None:
                continue
            if q.needs_offload_off:
                actions.append(OffloadOff(ns, iface.name))
            actions.append(SetQdisc(ns, iface.name, q))
    return Plan(
        run=run, topology=topo, addresses=addrs, namespaces=namespaces, actions=tuple(actions)
    )
