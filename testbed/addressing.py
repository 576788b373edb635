"""Address plan: interface names, per-link subnets and addresses, shortest-path static routes."""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass

from testbed.errors import SpecError
from testbed.topology_model import Link, Topology

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network
IPIface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


@dataclass(frozen=True)
class Interface:
    """One end of a link inside a node."""

    node: str
    name: str
    link: int
    peer_node: str
    peer_name: str
    addresses: tuple[str, ...]  # with prefix length

    def address(self, family: int) -> str | None:
        for a in self.addresses:
            if ipaddress.ip_interface(a).version == family:
                return a.split("/")[0]
        return None


@dataclass(frozen=True)
class StaticRoute:
    """A route the plan installs: `dst` via `via` on `node`."""

    node: str
    dst: str
    via: str
    dev: str
    family: int


@dataclass(frozen=True)
class AddressPlan:
    """Every interface and route of a topology; deterministic for a given file and parameters."""

    interfaces: tuple[Interface, ...]
    routes: tuple[StaticRoute, ...]

    def of(self, node: str) -> list[Interface]:
        return [i for i in self.interfaces if i.node == node]

    def address(self, node: str, family: int, peer: str | None = None) -> str:
        for iface in self.of(node):
            if peer is not None and iface.peer_node != peer:
                continue
            addr = iface.address(family)
            if addr is not None:
                return addr
        towards = f" towards {peer}" if peer else ""
        raise KeyError(f"{node} has no IPv{family} address{towards}")

    def routes_of(self, node: str) -> list[StaticRoute]:
        return [r for r in self.routes if r.node == node]

    def overlap(self, net: IPNet) -> str | None:
        """The first link subnet that `net` overlaps, in words ("198.18.1.0/24, the subnet of
        r1's eth1"), or None: a feature's own prefix or pool must overlap none."""
        for iface in self.interfaces:
            for cidr in iface.addresses:
                sub = ipaddress.ip_interface(cidr).network
                if sub.version == net.version and sub.overlaps(net):
                    return f"{sub}, the subnet of {iface.node}'s {iface.name}"
        return None


def link_families(topo: Topology, link: Link) -> tuple[int, ...]:
    fa = topo.node(link.a).families
    fb = topo.node(link.b).families
    return tuple(f for f in (4, 6) if f in fa and f in fb)


def plan_addresses(topo: Topology) -> AddressPlan:
    """Assign interface names, subnets and addresses, then compute the static routes."""
    pool4 = ipaddress.IPv4Network(topo.ipv4_pool)
    pool6 = ipaddress.IPv6Network(topo.ipv6_pool)
    n4 = 2 ** (topo.ipv4_prefixlen - pool4.prefixlen)
    n6 = 2 ** (topo.ipv6_prefixlen - pool6.prefixlen)
    counters: dict[str, int] = {}
    interfaces: list[Interface] = []
    subnets: dict[tuple[int, int], IPNet] = {}
    for link in topo.links:
        fams = link_families(topo, link)
        names = {}
        for node in (link.a, link.b):
            k = counters.get(node, 0)
            counters[node] = k + 1
            names[node] = f"eth{k}"
        addrs: dict[str, list[str]] = {link.a: [], link.b: []}
        for fam in fams:
            net, ends = _link_subnet(topo, link, fam, (pool4, pool6), (n4, n6))
            subnets[(link.index, fam)] = net
            addrs[link.a] += ends[0]
            addrs[link.b] += ends[1]
        for node in (link.a, link.b):
            peer = link.other(node)
            interfaces.append(
                Interface(
                    node=node,
                    name=names[node],
                    link=link.index,
                    peer_node=peer,
                    peer_name=names[peer],
                    addresses=tuple(addrs[node]),
                )
            )
    _check_overlaps(topo, subnets)
    routes = _compute_routes(topo, interfaces, subnets)
    return AddressPlan(interfaces=tuple(interfaces), routes=tuple(routes))


def _link_subnet(topo: Topology, link: Link, fam: int, pools: tuple[IPNet, IPNet],
                 room: tuple[int, int]) -> tuple[IPNet, tuple[list[str], list[str]]]:
    """One link's subnet of family `fam` and the addresses of its two ends: the file's explicit
    addresses, else its `ipv4`/`ipv6` subnet, else the link's share of the pool."""
    file = topo.source
    explicit = {
        n: [a for a in link.explicit_addresses(n) if ipaddress.ip_interface(a).version == fam]
        for n in (link.a, link.b)
    }
    if explicit[link.a] or explicit[link.b]:
        if not (explicit[link.a] and explicit[link.b]):
            raise SpecError(
                file,
                f"{link.key}.addresses",
                f"IPv{fam} address given for only one end",
                "addresses for both ends, or for neither",
            )
        ia = ipaddress.ip_interface(explicit[link.a][0])
        ib = ipaddress.ip_interface(explicit[link.b][0])
        if ia.network != ib.network:
            raise SpecError(
                file,
                f"{link.key}.addresses",
                f"{ia} and {ib} are not on one subnet",
                "two addresses of the same subnet",
            )
        if ia.ip == ib.ip:
            raise SpecError(
                file,
                f"{link.key}.addresses",
                f"both ends have the address {ia.ip}",
                "distinct addresses",
            )
        return ia.network, (explicit[link.a], explicit[link.b])
    given = link.subnet4 if fam == 4 else link.subnet6
    if given is not None:
        net: IPNet = ipaddress.ip_network(given)
    else:
        count = room[0] if fam == 4 else room[1]
        if link.index >= count:
            raise SpecError(
                file,
                "addressing",
                f"the IPv{fam} pool has room for only "
                f"{count} links; this topology has {len(topo.links)}",
                "a larger pool or a longer prefix length",
            )
        plen = topo.ipv4_prefixlen if fam == 4 else topo.ipv6_prefixlen
        net = _nth_subnet(pools[0] if fam == 4 else pools[1], plen, link.index)
    if net.num_addresses < 4 and fam == 4 and net.prefixlen != 31:
        raise SpecError(
            file,
            f"{link.key}.ipv4",
            f"{net} is too small for two hosts",
            "a /30 or larger (or a /31)",
        )
    first = net.network_address + (0 if net.prefixlen >= 31 and fam == 4 else 1)
    return net, ([f"{first}/{net.prefixlen}"], [f"{first + 1}/{net.prefixlen}"])


def _nth_subnet(pool: IPNet, prefixlen: int, n: int) -> IPNet:
    size = 2 ** (pool.max_prefixlen - prefixlen)
    base = int(pool.network_address) + n * size
    return ipaddress.ip_network((base, prefixlen))


def _check_overlaps(topo: Topology, subnets: dict[tuple[int, int], IPNet]) -> None:
    items = sorted(subnets.items())
    for i, ((li, fi), a) in enumerate(items):
        for (lj, fj), b in items[i + 1 :]:
            if fi == fj and a.overlaps(b):  # type: ignore[arg-type,unused-ignore]
                raise SpecError(
                    topo.source,
                    topo.links[lj].key,
                    f"subnet {b} overlaps {a} of {topo.links[li].key}",
                    "distinct subnets per link",
                )


def _compute_routes(
    topo: Topology, interfaces: list[Interface], subnets: dict[tuple[int, int], IPNet]
) -> list[StaticRoute]:
    """Shortest-path (hop count) routes from every node to every link subnet, per family."""
    by_node: dict[str, list[Interface]] = {}
    for iface in interfaces:
        by_node.setdefault(iface.node, []).append(iface)
    explicit = {(r.node, r.to) for r in topo.routes}
    routes: list[StaticRoute] = []
    for fam in (4, 6):
        adj: dict[str, list[Interface]] = {}
        for iface in interfaces:
            if (iface.link, fam) in subnets:
                adj.setdefault(iface.node, []).append(iface)
        for node in topo.nodes:
            if fam not in node.families or node.name not in adj:
                continue
            own = adj[node.name]
            first_hop = _first_hops(node.name, adj)
            default_ok = node.role == "host" and len(own) == 1
            if default_ok:
                iface = own[0]
                via = _peer_address(iface, interfaces, fam)
                dst = "0.0.0.0/0" if fam == 4 else "::/0"
                if via and (node.name, dst) not in explicit:
                    routes.append(StaticRoute(node.name, dst, via, iface.name, fam))
                continue
            attached = {i.link for i in own}
            by_hop: dict[tuple[str, str], list[IPNet]] = {}
            for (link_idx, f), net in sorted(subnets.items()):
                if f != fam or link_idx in attached:
                    continue
                link = topo.links[link_idx]
                best: tuple[int, Interface] | None = None
                for end in (link.a, link.b):
                    hop = first_hop.get(end)
                    if hop is not None and (best is None or hop[0] < best[0]):
                        best = hop
                if best is None:
                    continue
                via = _peer_address(best[1], interfaces, fam)
                if via:
                    by_hop.setdefault((via, best[1].name), []).append(net)
            # Subnets reached through the same neighbour collapse into the fewest exact CIDR
            # blocks (never covering an address outside them): 50 routers need ~12 routes
            # each instead of ~100.
            for (via, hop_dev), nets in sorted(by_hop.items()):
                for block in ipaddress.collapse_addresses(nets):  # type: ignore[type-var]
                    if (node.name, str(block)) not in explicit:
                        routes.append(StaticRoute(node.name, str(block), via, hop_dev, fam))
    for r in topo.routes:
        fam = ipaddress.ip_network(r.to).version
        dev = _dev_for_gateway(r.node, r.via, by_node.get(r.node, []))
        if dev is None:
            raise SpecError(
                topo.source,
                "routes",
                f"gateway {r.via} of a route on {r.node} is on none of its links",
                "a neighbour's address",
            )
        routes.append(StaticRoute(r.node, r.to, r.via, dev, fam))
    return routes


def _first_hops(src: str, adj: dict[str, list[Interface]]) -> dict[str, tuple[int, Interface]]:
    """BFS: for each reachable node, (distance, the interface of src that starts the path)."""
    result: dict[str, tuple[int, Interface]] = {}
    queue: deque[tuple[str, int, Interface | None]] = deque([(src, 0, None)])
    seen = {src}
    while queue:
        node, dist, first = queue.popleft()
        if first is not None:
            result[node] = (dist, first)
        for iface in adj.get(node, []):
            if iface.peer_node in seen:
                continue
            seen.add(iface.peer_node)
            queue.append((iface.peer_node, dist + 1, first if first is not None else iface))
    return result


def _peer_address(iface: Interface, interfaces: list[Interface], fam: int) -> str | None:
    for other in interfaces:
        if other.link == iface.link and other.node == iface.peer_node:
            return other.address(fam)
    return None


def _dev_for_gateway(node: str, via: str, own: list[Interface]) -> str | None:
    gw = ipaddress.ip_address(via)
    for iface in own:
        for a in iface.addresses:
            if gw in ipaddress.ip_interface(a).network:
                return iface.name
    return None
