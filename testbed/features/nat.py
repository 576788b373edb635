"""NAT feature: source NAT (masquerade) and destination NAT (port forwards), nftables, IPv4+IPv6."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testbed.api import TestbedLike
from testbed.features import _router as r
from testbed.features._nft import NftRouterFeature, NftTable
from testbed.features.base import Option
from testbed.features.base import Options as FeatureOptions

KIND = "nat"
TABLE = "tb_nat"


@dataclass(frozen=True)
class Forward:
    """One destination NAT rule: `proto` `port` on the outside goes to `to`:`to_port`."""

    proto: str
    port: int
    to: str
    to_port: int
    addresses: tuple[tuple[int, str], ...]  # (family, the target's address)


@dataclass(frozen=True)
class Options:
    node: str
    outside: str  # the neighbour on the outside link
    out_if: str
    out_addresses: tuple[tuple[int, str], ...]  # the router's outside addresses by family
    masquerade: bool
    inside: str  # the node whose traffic the check sends out
    ip: tuple[int, ...]
    forwards: tuple[Forward, ...]

    def out_address(self, family: int) -> str:
        return dict(self.out_addresses)[family]


def parse(opts: FeatureOptions) -> Options:
    """Validate the options against the address plan (pure: creates nothing)."""
    plan, nodes = opts.addresses, opts.topology.node_names
    node = opts.node
    outside = opts.node_name("outside")
    iface = opts.link(node, "outside", outside)
    ip = opts.versions()
    outs = []
    for fam in ip:
        a = r.iface_addr(iface, fam)
        if a is None:
            raise opts.error("ip", f"{node}'s link to {outside} has no IPv{fam} address",
                             "ip = [4]")
        outs.append((fam, a))
    forwards = []
    for i, spec in enumerate(opts.strings("forwards")):
        key = f"forwards[{i}]"
        fix = '"PROTO/PORT=NODE[:PORT]", e.g. "tcp/8080=h1:80"'
        if spec.count("=") != 1:
            raise opts.error(key, f"not PROTO/PORT=NODE[:PORT]: {spec!r}", fix)
        outer, target = spec.split("=")
        proto, port = opts.proto_port(key, outer)
        to, _, to_port_text = target.partition(":")
        if to not in nodes:
            raise opts.error(key, f"unknown node {to!r} in {spec!r}", ", ".join(nodes))
        to_port = port
        if to_port_text:
            if not to_port_text.isdigit() or not 1 <= int(to_port_text) <= 65535:
                raise opts.error(key, f"bad port {to_port_text!r} in {spec!r}", "a port 1-65535")
            to_port = int(to_port_text)
        addrs = []
        for fam in ip:
            try:
                addrs.append((fam, plan.address(to, fam)))
            except KeyError:
                raise opts.error(key, f"{to} has no IPv{fam} address", "a node with one") from None
        forwards.append(Forward(proto, port, to, to_port, tuple(addrs)))
    inside = opts.table.get("inside")
    if inside is None:
        inside = next((i.peer_node for i in plan.of(node) if i.peer_node != outside), None)
    if inside is None or inside not in nodes or inside == outside:
        raise opts.error("inside", f"bad inside node {inside!r}", "a neighbour of the router")
    return Options(
        node=node,
        outside=outside,
        out_if=iface.name,
        out_addresses=tuple(outs),
        masquerade=opts.boolean("masquerade"),
        inside=inside,
        ip=ip,
        forwards=tuple(forwards),
    )


def ruleset(o: Options) -> str:
    """The nftables table: prerouting DNAT per forward and version, postrouting masquerade."""
    oif = r.nft_quote(o.out_if)
    pre: list[str] = []
    for i, f in enumerate(o.forwards):
        for fam, addr in f.addresses:
            key = "ip" if fam == 4 else "ip6"
            target = f"{addr}:{f.to_port}" if fam == 4 else f"[{addr}]:{f.to_port}"
            pre.append(
                f"meta nfproto ipv{fam} iifname {oif} {f.proto} dport {f.port} counter "
                f"dnat {key} to {target} comment {r.nft_quote(f'forward{i}-v{fam}')}"
            )
    post = [
        f"meta nfproto ipv{fam} oifname {oif} counter masquerade "
        f"comment {r.nft_quote(f'masquerade-v{fam}')}"
        for fam in o.ip
        if o.masquerade
    ]
    return r.nft_table_text(
        "inet", TABLE,
        ("prerouting", "type nat hook prerouting priority dstnat; policy accept;", pre),
        ("postrouting", "type nat hook postrouting priority srcnat; policy accept;", post),
    )


def describe(o: Options) -> list[str]:
    lines = []
    if o.masquerade:
        v = "+".join(f"IPv{f}" for f in o.ip)
        lines.append(f"{o.node}: masquerade ({v}) out of {o.out_if} towards {o.outside}")
    for f in o.forwards:
        lines.append(f"{o.node}: forward {f.proto} {f.port} on {o.out_if} to {f.to}:{f.to_port}")
    return lines


def check(tb: TestbedLike, o: Options, ip: int) -> r.CheckResult:
    """Traffic through the router, seen on the far side.

    Source NAT: `inside` pings `outside`; a counter table on `outside` counts arrivals by source:
    all must come from the router's outside address (none from `inside`'s own), and the replies
    must arrive (return path). Destination NAT: `outside` connects to the router's outside
    address at each forwarded port and data reaches the server on the forward's target.
    """
    if ip not in o.ip:
        return r.not_supported(KIND, ip, f"the feature is configured for IPv{o.ip} only")
    failures: list[str] = []
    evidence: dict[str, Any] = {}
    translated = o.out_address(ip)
    inside = o.inside
    original = tb.address(inside, ip)
    far = tb.address(o.outside, ip)
    if o.masquerade:
        counting = r.count_sources_ruleset(
            "tb_check", ip, {"translated": translated, "untranslated": original}
        )
        with r.nft_table(tb, o.outside, counting, "inet", "tb_check"):
            p = r.ping(tb, inside, far, ip, count=3)
            seen = r.nft_counters(tb, o.outside, "tb_check", "inet")
        evidence["snat"] = {
            "ping": p,
            "arrived_from": {
                translated: seen.get("translated", 0),
                original: seen.get("untranslated", 0),
            },
        }
        if p["received"] < p["sent"]:
            failures.append(f"{p['received']}/{p['sent']} ping replies came back to {inside}")
        if seen.get("translated", 0) < p["sent"]:
            failures.append(
                f"{o.outside} saw {seen.get('translated', 0)} packets from {translated}"
            )
        if seen.get("untranslated", 0):
            failures.append(f"{o.outside} saw {inside}'s own address {original}")
    for i, f in enumerate(o.forwards):
        if f.proto != "tcp":
            continue  # the check connects with TCP; UDP forwards are only configured
        res = r.tcp_connect(tb, f.to, o.outside, translated, ip, f.to_port, f.port)
        evidence[f"dnat{i}"] = res
        if res["received_bytes"] <= 0:
            failures.append(f"forward {f.port} -> {f.to}:{f.to_port}: {res['error'] or 'no data'}")
    counters = r.nft_counters(tb, o.node, TABLE, "inet")
    evidence["router_counters"] = counters
    return r.verdict(KIND, ip, evidence, failures)


class Nat(NftRouterFeature):
    """Source NAT (masquerade) and port forwards on a router, both IP versions."""

    kind = KIND
    check_topology = "router-nat"
    summary = "source NAT (masquerade) and port forwards on a router, nftables inet, IPv4+IPv6"
    node_role = "router"
    options = (
        Option("outside", "the neighbour on the outside: what leaves towards it is masqueraded"),
        Option(
            "inside", "the neighbour whose traffic the check sends (default: the other one)", None
        ),
        Option("masquerade", "source NAT to the router's outside address", True),
        Option("ip", 'IP versions: 4, 6 or "both"', "both"),
        Option("forwards", 'port forwards "PROTO/PORT=NODE[:PORT]" (e.g. "tcp/8080=h1:5201")', []),
    )
    guest_modules = ("nf_tables", "nft_nat", "nft_chain_nat", "nft_masq")
    nft = NftTable(TABLE, ruleset, parse, check)
    o: Options
