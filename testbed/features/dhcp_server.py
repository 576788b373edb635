"""DHCP server feature: dnsmasq serving DHCPv4, stateful DHCPv6 and/or SLAAC router adverts."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed.actions import Check, Daemon, Succeeds, scratch
from testbed.api import Action, TestbedLike
from testbed.features import _router as r
from testbed.features.base import Feature, Option, Program
from testbed.features.base import Options as FeatureOptions

KIND = "dhcp-server"
CLIENT_KIND = "dhcp-client"  # testbed.features.dhcp_client's, whose check is this server's
RA_MODES = ("none", "stateful", "slaac")


@dataclass(frozen=True)
class Pool:
    """An address range on one link, and the router the clients use there."""

    family: int
    start: str
    end: str
    prefixlen: int
    router: str  # the link's router address (option 3 for DHCPv4)


@dataclass(frozen=True)
class Options:
    node: str
    link: tuple[str, str]  # (router, host): the served link
    relayed: bool  # the server is not on the link: a dhcp-relay on `link[0]` forwards to it
    dev: str | None  # the server's interface on the link (None when relayed)
    pools: tuple[Pool, ...]
    ra: str
    lease_time: int

    def pool(self, family: int) -> Pool | None:
        return next((p for p in self.pools if p.family == family), None)


def leases_name(node: str) -> str:
    return f"dnsmasq-{node}.leases"


def leases_path(folder: Path, node: str) -> Path:
    return folder / leases_name(node)


def _pool(opts: FeatureOptions, key: str, net: r.IPNet, router: str, host: str) -> Pool:
    """A pool [start, end] inside the link subnet, holding neither the router's nor the host's
    planned address (default: .100-.199 of an IPv4 /24-, ::100-::1ff of an IPv6 subnet)."""
    raw = opts.table.get(key)
    if raw is None:
        first = (
            int(net.network_address) + 0x100 if net.version == 6 else int(net.network_address) + 100
        )
        last = first + (0xFF if net.version == 6 else 99)
        if last >= int(net.broadcast_address):
            raise opts.error(key, f"the link subnet {net} is too small for the default pool",
                          f'{key} = ["FIRST", "LAST"] inside {net}')  # fmt: skip
        start, end = ipaddress.ip_address(first), ipaddress.ip_address(last)
    else:
        if not isinstance(raw, list) or len(raw) != 2:
            raise opts.error(
                key, f"not a [first, last] pair: {raw!r}", f'["FIRST", "LAST"] inside {net}'
            )
        try:
            start, end = (ipaddress.ip_address(str(a)) for a in raw)
        except ValueError as exc:
            raise opts.error(key, f"bad address: {exc}", f"addresses inside {net}") from None
    for a in (start, end):
        if (
            a.version != net.version
            or a not in net
            or a in (net.network_address, net.broadcast_address)
        ):
            raise opts.error(
                key,
                f"{a} is outside the link {net} (the pool must lie on the served link)",
                f"a range of host addresses inside {net}",
            )
    if int(end) < int(start):
        raise opts.error(key, f"the pool ends ({end}) before it starts ({start})", "[first, last]")
    for name, addr in (("the router", router), (host, None)):
        if addr is not None and int(start) <= int(ipaddress.ip_address(addr)) <= int(end):
            raise opts.error(key, f"the pool holds {name}'s address {addr}", "a range without it")
    return Pool(net.version, str(start), str(end), net.prefixlen, router)


def parse(opts: FeatureOptions) -> Options:
    """Validate: the link exists, the pools lie on it, RA only when the server is on the link."""
    nodes = opts.topology.node_names
    node = opts.node
    link = opts.table.get("link")
    if not isinstance(link, list) or len(link) != 2 or not all(isinstance(n, str) for n in link):
        raise opts.error("link", f"not a [router, host] pair: {link!r}", '["r1", "h1"]')
    gw, host = link
    for n in link:
        if n not in nodes:
            raise opts.error("link", f"unknown node {n!r}", ", ".join(nodes))
    gw_iface = opts.link(gw, "link", host)
    relayed = node != gw
    ip = opts.versions()
    ra = opts.text("ra") if "ra" in opts.table else ("stateful" if 6 in ip else "none")
    if ra not in RA_MODES:
        raise opts.error("ra", f"unknown mode {ra!r}", ", ".join(RA_MODES))
    pools = []
    for fam in ip:
        if fam == 6 and ra == "slaac":
            continue  # addresses from router advertisements, no DHCPv6 pool
        net = r.iface_net(gw_iface, fam)
        router = r.iface_addr(gw_iface, fam)
        if net is None or router is None:
            raise opts.error("ip", f"the link {gw}-{host} has no IPv{fam} subnet",
                             "ip = [4] or [6]")
        pools.append(_pool(opts, f"pool{fam}", net, router, host))
    if ra != "none" and relayed:
        raise opts.error("ra", f"{node} is not on the link {gw}-{host}: it cannot advertise there",
                      'ra = "none" (a relay forwards DHCPv6 without RAs)')  # fmt: skip
    return Options(
        node=node,
        link=(gw, host),
        relayed=relayed,
        dev=None if relayed else gw_iface.name,
        pools=tuple(pools),
        ra=ra,
        lease_time=opts.integer("lease_time", 120, 86400),
    )


def argv(o: Options, leases: Path | str) -> list[str]:
    """dnsmasq in the foreground, DHCP only (no DNS: port 0), reading no config file, leases
    in the run's scratch folder, logging to stderr."""
    a = [
        "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
        "--user=root", "--pid-file", f"--dhcp-leasefile={leases}",
        "--log-facility=-", "--log-dhcp", "--dhcp-authoritative", "--no-ping",
    ]  # fmt: skip
    if o.dev is not None:
        a += [f"--interface={o.dev}", "--bind-interfaces"]
    for p in o.pools:
        tag = f"set:v{p.family}"
        if p.family == 4:
            mask = str(ipaddress.ip_network(f"0.0.0.0/{p.prefixlen}").netmask)
            a.append(f"--dhcp-range={tag},{p.start},{p.end},{mask},{o.lease_time}")
            a.append(f"--dhcp-option=tag:v4,option:router,{p.router}")
        else:  # dnsmasq picks the interface (or the relay's link-address) holding the prefix
            a.append(f"--dhcp-range={tag},{p.start},{p.end},{p.prefixlen},{o.lease_time}")
    if o.ra != "none" and o.dev is not None:
        a.append("--enable-ra")
        if o.ra == "slaac":
            a.append(f"--dhcp-range=::,constructor:{o.dev},ra-only,{o.lease_time}")
    return a


def describe(o: Options) -> list[str]:
    pools = ", ".join(f"IPv{p.family} {p.start}-{p.end}" for p in o.pools)
    how = f"relayed by {o.link[0]}" if o.relayed else f"on {o.dev}"
    ra = f"; router advertisements ({o.ra})" if o.ra != "none" else ""
    return [f"{o.node}: dnsmasq DHCP for the link {o.link[0]}-{o.link[1]} ({how}): {pools}{ra}"]


def leases(text: str) -> list[dict[str, str]]:
    """dnsmasq's lease file: `EXPIRY MAC IP NAME CLIENTID` (IPv4), and after a `duid` line
    `EXPIRY IAID IP NAME DUID` (IPv6)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[0] == "duid":
            continue
        try:
            ipaddress.ip_address(parts[2])
        except ValueError:
            continue
        out.append({"expiry": parts[0], "id": parts[1], "address": parts[2]})
    return out


DNSMASQ = Program("dnsmasq", "dnsmasq-base", ("dnsmasq", "--version"))


def listening_67(node: str) -> Check:
    return Succeeds(node, ("ss", "-H", "-l", "-u", "-n", "sport", "=", ":67"), contains=":67")


class DhcpServer(r.RouterFeature):
    """dnsmasq serving one link's DHCPv4/DHCPv6/RAs, on it or behind a relay."""

    kind = KIND
    check_topology = "router-dhcp"
    summary = "dnsmasq DHCP server: DHCPv4, stateful DHCPv6, RA/SLAAC; direct or behind a relay"
    options = (
        Option("link", 'the served link as ["ROUTER", "HOST"] (the server may sit elsewhere)'),
        Option("ip", 'IP versions served: 4, 6 or "both"', "both"),
        Option("pool4", '["FIRST", "LAST"] on the link (default .100-.199)', None),
        Option("pool6", '["FIRST", "LAST"] on the link (default ::100-::1ff)', None),
        Option("ra", "router advertisements: none, stateful (M flag), slaac", None),
        Option("lease_time", "lease seconds (120-86400)", 3600),
    )
    programs = (DNSMASQ,)
    cpu_processes = ("dnsmasq",)

    def configure(self, opts: FeatureOptions) -> None:
        self.o = parse(opts)

    def actions(self) -> list[Action]:
        ready = (listening_67(self.node),) if 4 in (p.family for p in self.o.pools) else ()
        return [
            Daemon(
                self.node,
                tuple(argv(self.o, scratch(leases_name(self.node)))),
                "dnsmasq",
                ready=ready,
            )
        ]

    def check(self, tb: TestbedLike, ip: int, others: Sequence[Feature]) -> r.CheckResult:
        """The server's check is its clients' (dhcp-client features on its link: found by kind,
        so that this module does not import the client's, which imports this one)."""
        for f in others:
            if (isinstance(f, r.RouterFeature) and f.kind == CLIENT_KIND
                    and (f.o.peer, f.o.node) == self.o.link):
                res = f.check(tb, ip, others)
                if res.feature != "slaac":  # SLAAC is the server's router advertisements
                    res.feature = KIND
                res.evidence["client"] = f.node
                return res
        return r.not_supported(KIND, ip, f"no dhcp-client feature on the link {self.o.link}")
