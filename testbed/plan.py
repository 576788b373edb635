"""Compile a topology, its address plan and its features into one ordered, printable list
of typed actions (testbed.actions): everything `testbed up` does, and nothing else."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed import features as features_mod
from testbed.actions import (
    AddAddress,
    AddRoute,
    AddVeth,
    CreateNamespace,
    LinkUp,
    OffloadOff,
    SetQdisc,
    SetSysctls,
    WaitInterfaces,
    WaitUntil,
)
from testbed.addressing import AddressPlan, plan_addresses
from testbed.api import Action
from testbed.features import Feature, NodeAddress
from testbed.shaping import qdisc_for
from testbed.topology_model import NODE_NAME, Topology

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
class Plan:
    """Everything to create, in order; undoing runs in reverse."""

    run: str
    topology: Topology
    addresses: AddressPlan
    namespaces: dict[str, str]  # node -> namespace
    actions: tuple[Action, ...] = field(default_factory=tuple)
    features: tuple[Feature, ...] = ()
    extra_addresses: tuple[NodeAddress, ...] = ()  # what the features give nodes

    def describe(self) -> list[str]:
        return [a.describe() for a in self.actions]

    def needs(self) -> list[str]:
        """Capability names the features need (testbed.capabilities), without repeats."""
        out: list[str] = []
        for f in self.features:
            out += [n for n in f.needs() if n not in out]
        return out

    def extra_address(self, node: str, family: int) -> NodeAddress | None:
        for a in self.extra_addresses:
            if a.node == node and a.family == family:
                return a
        return None

    def cpu_processes(self) -> list[str]:
        """Processes of the features worth measuring CPU time of (e.g. tayga)."""
        out: list[str] = []
        for f in self.features:
            out += [p for p in f.cpu_processes if p not in out]
        return out


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


NEIGHBOR_REACHABLE_MS = 86_400_000
"""How long a resolved neighbor (ARP/ND) entry stays reachable on the topology's interfaces: a
day, not the kernel's 15-45 s. Forwarded and UDP traffic never confirms a neighbor, so by
default every entry goes stale, is re-probed (5 s later, a unicast ARP/NS) and comes back,
over and over; a packet sent through a stale entry takes the kernel's slow output path. On the
virtual clock that made a trial's every packet cost a few hundred instructions more or less
per hop depending on how much guest time earlier trials took (0.1-0.4 µs of OWD, the same
cell differing between trials of one boot); on any clock it put ARP/ND probes mid-trial.
An entry learned stale (from the peer's own ARP request or neighbor solicitation) is confirmed
at its first use, not 5 s later (`delay_first_probe_time` 0): within a probe's warm-up."""


def neighbor_sysctls(topo: Topology, node: str, ifnames: Sequence[str]
                     ) -> tuple[tuple[str, str], ...]:
    """Per interface of `node`: resolved neighbors stay reachable (`NEIGHBOR_REACHABLE_MS`)."""
    families = topo.node(node).families
    return tuple(item for name in ifnames for v in (4, 6) if v in families for item in (
        (f"net.ipv{v}.neigh.{name}.base_reachable_time_ms", str(NEIGHBOR_REACHABLE_MS)),
        (f"net.ipv{v}.neigh.{name}.delay_first_probe_time", "0")))


def needs_netem_probe(topo: Topology) -> bool:
    """Whether the plan depends on netem being here (some link is shaped)."""
    return any(not lk.shape.is_plain for lk in topo.links)


def plan_for(topo: Topology, run: str) -> Plan:
    """The front of `testbed up` and `testbed plan`: probe netem only when a link is shaped,
    then compile (so both print and build the very same actions)."""
    netem = False
    if needs_netem_probe(topo):
        from testbed import capabilities

        netem = capabilities.has("netem")
    return compile_plan(topo, run, netem_available=netem)


def compile_plan(topo: Topology, run: str, *, netem_available: bool) -> Plan:
    """The whole build as actions. Pure: raises SpecError/MissingCapability, creates nothing."""
    addrs = plan_addresses(topo)
    feats = features_mod.configure(topo, addrs)
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
        neigh = neighbor_sysctls(topo, n.name, [i.name for i in addrs.of(n.name)])
        if neigh:
            actions.append(SetSysctls(namespaces[n.name], neigh))
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
    v6 = {n.name: 6 in n.families for n in topo.nodes}
    actions.append(
        WaitInterfaces(
            tuple(
                (namespaces[n.name], v6[n.name], tuple(i.name for i in addrs.of(n.name)))
                for n in topo.nodes
            )
        )
    )
    for f in feats:
        actions += f.actions()
        checks = f.ready()
        if checks:
            actions.append(WaitUntil(f"{f.label} (features[{f.index}])", tuple(checks)))
    return Plan(
        run=run,
        topology=topo,
        addresses=addrs,
        namespaces=namespaces,
        actions=tuple(actions),
        features=tuple(feats),
        extra_addresses=tuple(a for f in feats for a in f.addresses()),
    )
