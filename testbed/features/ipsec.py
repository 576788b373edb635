"""IPsec feature: an ESP tunnel between two routers, kernel xfrm (`ip xfrm`), static lab keys."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from testbed.actions import Check, Command, Succeeds
from testbed.api import Action, TestbedLike
from testbed.features import _router as r
from testbed.features.base import Feature, Option
from testbed.features.base import Options as FeatureOptions

KIND = "ipsec"
AEAD = "rfc4106(gcm(aes))"  # AES-GCM, 128-bit key + 32-bit salt, 128-bit ICV
CHECK_TABLE = "tb_espcheck"


@dataclass(frozen=True)
class Tunnel:
    """One inner family's tunnel: outer endpoints, the protected subnets, SPIs and keys."""

    inner: int
    outer: int
    a: str  # outer address of `node`
    b: str  # outer address of `peer`
    net_a: str  # the subnet behind `node`
    net_b: str  # the subnet behind `peer`
    spi_ab: int
    spi_ba: int
    key_ab: str
    key_ba: str
    reqid: int


@dataclass(frozen=True)
class Options:
    node: str
    peer: str
    inside: str  # behind `node`
    peer_inside: str  # behind `peer`
    peer_dev: str  # `peer`'s interface where the ESP arrives from `node`
    tunnels: tuple[Tunnel, ...]


def lab_key(*parts: str) -> str:
    """A deterministic 160-bit AEAD key (key + salt) for a lab tunnel: the same plan gives the
    same keys, so `testbed plan` shows what `up` does. Not a secret: never use outside a lab."""
    return "0x" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]


def parse(opts: FeatureOptions) -> Options:
    """Validate: two routers with addresses of the outer family, a subnet behind each."""
    plan, nodes = opts.addresses, opts.topology.node_names
    node = opts.node
    peer = opts.node_name("peer")
    if peer == node:
        raise opts.error("peer", f"{node} cannot tunnel to itself", "the router at the other end")
    link = opts.link(node, "peer", peer)
    back = opts.link(peer, "peer", node)

    def behind(key: str, router: str, other: str) -> str:
        default = next((i.peer_node for i in plan.of(router) if i.peer_node != other), None)
        value = opts.table.get(key, default)
        if not isinstance(value, str) or value not in nodes:
            raise opts.error(key, f"bad node {value!r}",
                             f"a neighbour of {router} other than {other}")
        opts.link(router, key, value)
        return value

    inside = behind("inside", node, peer)
    peer_inside = behind("peer_inside", peer, node)
    outer_opt = opts.table.get("outer", "same")
    if outer_opt not in ("same", 4, 6, "4", "6"):
        raise opts.error(
            "outer", f"bad value {outer_opt!r}", "same (IPv4 in IPv4, IPv6 in IPv6), 4 or 6"
        )
    tunnels = []
    for fam in opts.versions():
        outer = fam if outer_opt == "same" else int(outer_opt)
        a, b = link.address(outer), back.address(outer)
        net_a = r.iface_net(opts.link(node, "inside", inside), fam)
        net_b = r.iface_net(opts.link(peer, "peer_inside", peer_inside), fam)
        if a is None or b is None or net_a is None or net_b is None:
            raise opts.error("ip", f"IPv{fam} in IPv{outer} needs those addresses on both routers",
                          'ip = 4 or outer = "same"')  # fmt: skip
        tunnels.append(
            Tunnel(
                fam, outer, a, b, str(net_a), str(net_b),
                0x1000 + fam * 16 + 1, 0x1000 + fam * 16 + 2,
                lab_key(node, peer, str(fam), "ab"), lab_key(node, peer, str(fam), "ba"),
                fam,
            )
        )  # fmt: skip
    return Options(node, peer, inside, peer_inside, back.name, tuple(tunnels))


def _state(
    src: str, dst: str, spi: int, key: str, reqid: int, mixed: bool = False
) -> tuple[list[str], list[str]]:
    """An SA; `mixed` (inner version != outer) sets `flag af-unspec`, without which the kernel
    matches the SA only to packets of the outer family."""
    add = ["ip", "xfrm", "state", "add", "src", src, "dst", dst, "proto", "esp",
           "spi", hex(spi), "reqid", str(reqid), "mode", "tunnel",
           "aead", AEAD, key, "128"]  # fmt: skip
    if mixed:
        add += ["flag", "af-unspec"]
    delete = [
        "ip",
        "xfrm",
        "state",
        "delete",
        "src",
        src,
        "dst",
        dst,
        "proto",
        "esp",
        "spi",
        hex(spi),
    ]
    return add, delete


def _policy(
    src_net: str, dst_net: str, direction: str, src: str, dst: str, reqid: int
) -> tuple[list[str], list[str]]:
    sel = ["src", src_net, "dst", dst_net, "dir", direction]
    add = ["ip", "xfrm", "policy", "add", *sel, "tmpl", "src", src, "dst", dst,
           "proto", "esp", "reqid", str(reqid), "mode", "tunnel"]  # fmt: skip
    return add, ["ip", "xfrm", "policy", "delete", *sel]


def commands(o: Options) -> list[tuple[str, list[str], list[str]]]:
    """(node, argv, undo argv): on both routers both SAs, and out/in/fwd policies for the
    traffic between the subnets behind them."""
    out = []
    for t in o.tunnels:
        for node, (here, there), (mine, theirs) in (
            (o.node, (t.a, t.b), (t.net_a, t.net_b)),
            (o.peer, (t.b, t.a), (t.net_b, t.net_a)),
        ):
            for src, dst, spi, key in (
                (t.a, t.b, t.spi_ab, t.key_ab),
                (t.b, t.a, t.spi_ba, t.key_ba),
            ):
                out.append((node, *_state(src, dst, spi, key, t.reqid, t.inner != t.outer)))
            out.append((node, *_policy(mine, theirs, "out", here, there, t.reqid)))
            out.append((node, *_policy(theirs, mine, "in", there, here, t.reqid)))
            out.append((node, *_policy(theirs, mine, "fwd", there, here, t.reqid)))
    return out


def describe(o: Options) -> list[str]:
    return [
        f"{o.node} <-> {o.peer}: ESP tunnel (xfrm, {AEAD}) IPv{t.inner} {t.net_a} <-> {t.net_b} "
        f"in IPv{t.outer} {t.a} <-> {t.b}"
        for t in o.tunnels
    ]


def counting_ruleset(o: Options, t: Tunnel, inside_addr: str) -> str:
    """At `peer`'s interface from `node` (netdev ingress: packets as they come off the wire):
    ESP packets, and clear-text packets from the host behind `node` that carry no IPsec
    state (a decrypted packet passes again, with it)."""
    key = "ip" if t.inner == 4 else "ip6"
    return r.nft_table_text("netdev", CHECK_TABLE, (
        "ingress", f"type filter hook ingress device {r.nft_quote(o.peer_dev)} priority 0;",
        ['meta l4proto esp counter comment "esp"',
         f'meta ipsec missing {key} saddr {inside_addr} counter comment "clear"']))


def xfrm_counts(tb: TestbedLike, node: str) -> list[str]:
    """`ip -s xfrm state` (no JSON output exists for xfrm) as evidence."""
    out = tb.run(node, ["ip", "-s", "xfrm", "state"], check=False)
    keep = ("src ", "proto esp", "lifetime current", "bytes")
    return [x.strip() for x in out.stdout.splitlines() if x.strip().startswith(keep)][:16]


def check(tb: TestbedLike, o: Options, ip: int) -> r.CheckResult:
    """The host behind `node` pings the host behind `peer`: the replies arrive, ESP packets
    cross the wire (counted at `peer`'s ingress) and no clear-text packet from the host does."""
    t = next((x for x in o.tunnels if x.inner == ip), None)
    if t is None:
        return r.not_supported(KIND, ip, f"no IPv{ip} tunnel configured")
    src = tb.address(o.inside, ip)
    with r.nft_table(tb, o.peer, counting_ruleset(o, t, src), "netdev", CHECK_TABLE):
        p = r.ping(tb, o.inside, tb.address(o.peer_inside, ip), ip, count=5)
        seen = r.nft_counters(tb, o.peer, CHECK_TABLE, "netdev")
    evidence = {
        "ping": p,
        "on_the_wire": {"esp": seen.get("esp", 0), "clear": seen.get("clear", 0)},
        "outer": f"IPv{t.outer} {t.a} -> {t.b}",
        "xfrm_state": xfrm_counts(tb, o.peer),
    }
    esp, clear, sent = seen.get("esp", 0), seen.get("clear", 0), p["sent"]
    failures = [why for failed, why in (
        (p["received"] < sent, f"{p['received']}/{sent} ping replies through the tunnel"),
        (esp < sent, f"{o.peer} saw {esp} ESP packets for {sent} pings"),
        (clear > 0, f"{clear} clear-text packets from {src} on the wire"),
    ) if failed]
    return r.verdict(KIND, ip, evidence, failures)


class Ipsec(r.RouterFeature):
    """An ESP tunnel between two routers for the subnets behind them."""

    kind = KIND
    check_topology = "router-ipsec"
    summary = "ESP tunnel (kernel xfrm, static AES-GCM keys) between two routers' subnets"
    node_role = "router"
    options = (
        Option("peer", "the router at the other end"),
        Option("ip", 'inner versions: 4, 6 or "both"', "both"),
        Option("outer", "outer version: same (4-in-4, 6-in-6), 4 or 6", "same"),
        Option(
            "inside", "the neighbour of node whose subnet is protected (default: the other)", None
        ),
        Option("peer_inside", "the neighbour of peer whose subnet is protected", None),
    )
    kernel = ("esp",)
    guest_modules = ("esp4", "esp6", "xfrm_user")

    def configure(self, opts: FeatureOptions) -> None:
        self.o = parse(opts)

    def actions(self) -> list[Action]:
        return [Command(node, tuple(a), tuple(u)) for node, a, u in commands(self.o)]

    def ready(self) -> list[Check]:
        return [
            Succeeds(n, ("ip", "xfrm", "policy", "list", "dir", "fwd"), contains="proto esp")
            for n in (self.o.node, self.o.peer)
        ]

    def check(self, tb: TestbedLike, ip: int, others: Sequence[Feature]) -> r.CheckResult:
        return check(tb, self.o, ip)
