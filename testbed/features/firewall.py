"""Firewall feature: stateful nftables inet forward policy, default drop, allow-list per version."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.api import TestbedLike
from testbed.features import _router as r
from testbed.features._nft import NftRouterFeature, NftTable
from testbed.features.base import Option
from testbed.features.base import Options as FeatureOptions

KIND = "firewall"
TABLE = "tb_firewall"


@dataclass(frozen=True)
class Allow:
    proto: str
    port: int
    ip: tuple[int, ...]


@dataclass(frozen=True)
class Options:
    node: str
    ip: tuple[int, ...]  # the versions the policy filters (others pass untouched)
    icmp: bool  # echo requests (and the ICMP errors of allowed flows) pass
    allow: tuple[Allow, ...]
    client: str  # the check sends from here ...
    server: str  # ... through the router to here

    def allowed(self, proto: str, port: int, ip: int) -> bool:
        return any(a.proto == proto and a.port == port and ip in a.ip for a in self.allow)


def parse(opts: FeatureOptions) -> Options:
    """Validate: the allow-lists are PROTO/PORT per version; client and server for the check
    default to the router's first two neighbours."""
    plan, nodes = opts.addresses, opts.topology.node_names
    node = opts.node
    ip = opts.versions()
    allow: dict[tuple[str, int], list[int]] = {}
    for fam in (4, 6):
        for i, spec in enumerate(opts.strings(f"allow{fam}")):
            if fam not in ip:
                raise opts.error(f"allow{fam}", f"IPv{fam} is not filtered (ip = {list(ip)})",
                              f"ip = \"both\" or no allow{fam}")  # fmt: skip
            allow.setdefault(opts.proto_port(f"allow{fam}[{i}]", spec), []).append(fam)
    peers = [i.peer_node for i in plan.of(node)]
    client = opts.table.get("client", peers[0] if peers else None)
    server = opts.table.get("server", peers[1] if len(peers) > 1 else None)
    for key, n in (("client", client), ("server", server)):
        if not isinstance(n, str) or n not in nodes or n == node:
            raise opts.error(
                key, f"bad node {n!r} for the check", "a node on either side of the router"
            )
    assert isinstance(client, str) and isinstance(server, str)
    return Options(
        node,
        ip,
        opts.boolean("icmp"),
        tuple(Allow(p, port, tuple(v)) for (p, port), v in allow.items()),
        client,
        server,
    )


def ruleset(o: Options) -> str:
    """Forward chain, policy drop: established/related pass, invalid drop, then the allow-list
    per version, then a counted drop per version (the deny counters the check reads)."""
    rules = [
        'ct state established,related counter accept comment "established"',
        'ct state invalid counter drop comment "invalid"',
    ]
    for fam in (4, 6):
        if fam not in o.ip:
            rules.append(f'meta nfproto ipv{fam} counter accept comment "unfiltered-v{fam}"')
    if o.icmp:
        if 4 in o.ip:
            rules.append('icmp type echo-request counter accept comment "allow-v4-icmp"')
        if 6 in o.ip:
            rules.append('icmpv6 type echo-request counter accept comment "allow-v6-icmp"')
    for a in o.allow:
        for fam in a.ip:
            rules.append(
                f"meta nfproto ipv{fam} {a.proto} dport {a.port} ct state new counter accept "
                f'comment "allow-v{fam}-{a.proto}-{a.port}"'
            )
    for fam in o.ip:
        rules.append(f'meta nfproto ipv{fam} counter drop comment "deny-v{fam}"')
    return r.nft_table_text("inet", TABLE, ("forward", "type filter hook forward priority "
                                            "filter; policy drop;", rules))


def describe(o: Options) -> list[str]:
    allow = ", ".join(f"{a.proto}/{a.port} (IPv{'+'.join(map(str, a.ip))})" for a in o.allow)
    return [
        f"{o.node}: firewall (inet forward, default drop for IPv{'+'.join(map(str, o.ip))}): "
        f"icmp echo {'allowed' if o.icmp else 'denied'}; allowed: {allow or 'nothing'}"
    ]


def check(tb: TestbedLike, o: Options, ip: int) -> r.CheckResult:
    """From `client` through the router to `server`: an allowed TCP port passes (and its allow
    counter moves), a port not on the list is dropped (its connection fails, the deny counter
    moves), echo requests pass or are dropped as configured."""
    if ip not in o.ip:
        return r.not_supported(KIND, ip, f"the policy filters IPv{list(o.ip)} only")
    allowed = [a for a in o.allow if a.proto == "tcp" and ip in a.ip]
    if not allowed:
        return r.CheckResult(KIND, ip, "fails", {}, f"no TCP port is allowed for IPv{ip}")
    port = allowed[0].port
    denied = next(p for p in range(port + 1, port + 100) if not o.allowed("tcp", p, ip))
    client, server = o.client, o.server
    dst = tb.address(server, ip)
    before = r.nft_counters(tb, o.node, TABLE, "inet")
    p = r.ping(tb, client, dst, ip)
    good = r.tcp_connect(tb, server, client, dst, ip, port)
    bad = r.tcp_connect(tb, server, client, dst, ip, denied, timeout_ms=1500)
    after = r.nft_counters(tb, o.node, TABLE, "inet")
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    evidence = {"ping": p, "allowed": good, "denied": bad, "counters_delta": delta}
    failures: list[str] = []
    if o.icmp and p["received"] < p["sent"]:
        failures.append(f"allowed echo: {p['received']}/{p['sent']} replies")
    if not o.icmp and p["received"]:
        failures.append("echo requests passed a policy that denies them")
    if good["received_bytes"] <= 0:
        failures.append(f"allowed tcp/{port}: {good['error'] or 'no data'}")
    if delta.get(f"allow-v{ip}-tcp-{port}", 0) < 1:
        failures.append(f"the allow counter of tcp/{port} did not move")
    if bad["received_bytes"] > 0:
        failures.append(f"denied tcp/{denied} passed ({bad['received_bytes']} bytes)")
    if delta.get(f"deny-v{ip}", 0) < 1:
        failures.append(f"the IPv{ip} deny counter did not move")
    return r.verdict(KIND, ip, evidence, failures)


class Firewall(NftRouterFeature):
    """A stateful default-drop forward policy with an allow-list per IP version."""

    kind = KIND
    check_topology = "router-firewall"
    summary = (
        "stateful nftables inet forward policy on a router: default drop, allow-list per version"
    )
    node_role = "router"
    options = (
        Option("allow4", 'IPv4 services let through, "PROTO/PORT" (e.g. ["tcp/5201"])', []),
        Option("allow6", 'IPv6 services let through, "PROTO/PORT"', []),
        Option("icmp", "echo requests pass (both versions)", True),
        Option("ip", 'versions the policy filters: 4, 6 or "both" (others pass)', "both"),
        Option("client", "the check's sender (default: the router's first neighbour)", None),
        Option("server", "the check's receiver (default: the router's second neighbour)", None),
    )
    guest_modules = ("nf_tables", "nft_ct")
    nft = NftTable(TABLE, ruleset, parse, check)
    o: Options
