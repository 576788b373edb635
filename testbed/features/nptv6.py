"""NPTv6 feature: IPv6 prefix translation (RFC 6296 style, host part kept) with nftables."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from testbed.actions import Check, Command, HasRoute
from testbed.api import Action, TestbedLike
from testbed.features import _router as r
from testbed.features._nft import NftRouterFeature, NftTable
from testbed.features.base import Option
from testbed.features.base import Options as FeatureOptions

KIND = "nptv6"
TABLE = "tb_nptv6"


@dataclass(frozen=True)
class Options:
    node: str
    inside: str  # the neighbour on the inside link
    outside: str  # the neighbour on the outside link
    inside_prefix: ipaddress.IPv6Network  # the inside link's subnet
    prefix: ipaddress.IPv6Network  # what it is translated to
    out_if: str
    in_if: str
    gateway: str  # the router's address on the outside link (the outside's route to `prefix`)
    outside_dev: str  # the outside neighbour's interface on that link


def parse(opts: FeatureOptions) -> Options:
    """Validate: the prefix is IPv6, as long as the inside link's, and no link uses it."""
    node = opts.node
    inside = opts.node_name("inside")
    outside = opts.node_name("outside")
    in_iface = opts.link(node, "inside", inside)
    out_iface = opts.link(node, "outside", outside)
    inside_net = r.iface_net(in_iface, 6)
    gateway = r.iface_addr(out_iface, 6)
    if inside_net is None or gateway is None:
        raise opts.error(
            "node", f"{node}'s links to {inside} and {outside} need IPv6", "stack = 'dual'"
        )
    prefix = opts.network("prefix", 6, example="2001:db8:5::/64")
    if prefix.prefixlen != inside_net.prefixlen:
        raise opts.error(
            "prefix",
            f"{prefix} is a /{prefix.prefixlen}, the inside prefix {inside_net} a "
            f"/{inside_net.prefixlen}: NPTv6 maps prefixes of equal length",
            f"an IPv6 /{inside_net.prefixlen} that no link uses",
        )
    opts.no_overlap("prefix", prefix)
    assert isinstance(inside_net, ipaddress.IPv6Network) and isinstance(
        prefix, ipaddress.IPv6Network
    )
    return Options(
        node,
        inside,
        outside,
        inside_net,
        prefix,
        out_iface.name,
        in_iface.name,
        gateway,
        out_iface.peer_name,
    )


def ruleset(o: Options) -> str:
    """Outbound: source prefix inside -> prefix; inbound: destination prefix -> inside."""
    oif = r.nft_quote(o.out_if)
    out = (f"oifname {oif} ip6 saddr {o.inside_prefix} counter snat ip6 prefix to {o.prefix} "
           'comment "outbound"')
    back = (f"iifname {oif} ip6 daddr {o.prefix} counter dnat ip6 prefix to {o.inside_prefix} "
            'comment "inbound"')
    return r.nft_table_text(
        "ip6", TABLE,
        ("postrouting", "type nat hook postrouting priority srcnat; policy accept;", [out]),
        ("prerouting", "type nat hook prerouting priority dstnat; policy accept;", [back]),
    )


def route_argv(o: Options) -> tuple[list[str], list[str]]:
    """The outside neighbour's route to the translated prefix (as an upstream would have it):
    (add, delete) argv, run on `outside`."""
    add = ["ip", "-6", "route", "add", str(o.prefix), "via", o.gateway]
    return add, ["ip", "-6", "route", "del", str(o.prefix), "via", o.gateway]


def describe(o: Options) -> list[str]:
    return [
        f"{o.node}: NPTv6 {o.inside_prefix} <-> {o.prefix} on {o.out_if} (towards {o.outside})",
        f"{o.outside}: route {o.prefix} via {o.gateway}",
    ]


def check(tb: TestbedLike, o: Options, ip: int) -> r.CheckResult:
    """`inside` pings `outside`: the far side sees the translated source (prefix + host part
    kept) and never the inside address, replies come back; then `outside` pings the inside
    host at its translated address (inbound translation)."""
    if ip != 6:
        return r.not_supported(KIND, ip, "NPTv6 translates IPv6 prefixes only (IPv4 uses NAT)")
    original = tb.address(o.inside, 6)
    translated = r.translate_prefix(original, o.inside_prefix, o.prefix)
    far = tb.address(o.outside, 6)
    counting = r.count_sources_ruleset(
        "tb_check", 6, {"translated": translated, "untranslated": original}
    )
    failures: list[str] = []
    with r.nft_table(tb, o.outside, counting, "inet", "tb_check"):
        out = r.ping(tb, o.inside, far, 6)
        seen = r.nft_counters(tb, o.outside, "tb_check", "inet")
    back = r.ping(tb, o.outside, translated, 6)
    evidence = {
        "outbound_ping": out,
        "arrived_from": {
            translated: seen.get("translated", 0),
            original: seen.get("untranslated", 0),
        },
        "inbound_ping": back,
        "router_counters": r.nft_counters(tb, o.node, TABLE, "ip6"),
    }
    if out["received"] < out["sent"]:
        failures.append(f"{out['received']}/{out['sent']} replies came back to {o.inside}")
    if seen.get("translated", 0) < out["sent"]:
        failures.append(f"{o.outside} saw {seen.get('translated', 0)} packets from {translated}")
    if seen.get("untranslated", 0):
        failures.append(f"{o.outside} saw the untranslated source {original}")
    if back["received"] < back["sent"]:
        failures.append(f"{o.outside} -> {translated}: {back['received']}/{back['sent']} replies")
    return r.verdict(KIND, ip, evidence, failures)


class Nptv6(NftRouterFeature):
    """IPv6 prefix translation on a router, and the outside's route to the prefix."""

    kind = KIND
    check_topology = "router-nptv6"
    summary = "IPv6 network prefix translation (inside prefix <-> prefix, host part kept), nftables"
    node_role = "router"
    options = (
        Option("inside", "the neighbour on the inside link (its subnet is translated)"),
        Option("outside", "the neighbour on the outside link (it routes `prefix` back)"),
        Option("prefix", "the outside prefix, as long as the inside link's (e.g. 2001:db8:5::/64)"),
    )
    guest_modules = ("nf_tables", "nft_nat", "nft_chain_nat")
    nft = NftTable(TABLE, ruleset, parse, check, family="ip6")
    o: Options

    def actions(self) -> list[Action]:
        """The table, then the outside neighbour's route to the translated prefix."""
        add, undo = route_argv(self.o)
        return [*super().actions(), Command(self.o.outside, tuple(add), tuple(undo))]

    def ready(self) -> list[Check]:
        return [
            *super().ready(),
            HasRoute(self.o.outside, 6, str(self.o.prefix), self.o.outside_dev),
        ]
