"""NAT64 (RFC 6146) on the router with TAYGA or Jool, and optional DNS64 (unbound) there."""

from __future__ import annotations

import functools
import ipaddress
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.addressing import plan_addresses
from testbed.daemons import unbound
from testbed.daemons.base import poll, scratch_dir
from testbed.daemons.jool import Jool, JoolConfig
from testbed.daemons.tayga import Tayga, TaygaConfig, embed, tayga_addresses
from testbed.errors import DaemonError, MissingCapability, SpecError
from testbed.mechanisms import common
from testbed.topology import Topology

if TYPE_CHECKING:
    from testbed.testbed import Testbed

COMMON_KEYS = ("kind", "router", "prefix", "pool4", "dns64", "domain")
KEYS = {"nat64-tayga": (*COMMON_KEYS, "device"), "nat64-jool": (*COMMON_KEYS, "instance")}
RFC6052_LENGTHS = (32, 40, 48, 56, 64, 96)
WELL_KNOWN_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
# The ranges TAYGA 0.9.2 refuses to translate with the well-known prefix (addrmap.c,
# is_private_ip4_addr): private and documentation/benchmarking addresses (RFC 6052, 3.1).
TAYGA_NON_GLOBAL = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
    )
)
NETNS_ETC = Path("/etc/netns")


def non_global(net: ipaddress.IPv4Network) -> ipaddress.IPv4Network | None:
    """The TAYGA non-global range `net` overlaps, if any."""
    for r in TAYGA_NON_GLOBAL:
        if net.overlaps(r):
            return r
    return None


@dataclass(frozen=True)
class Nat64:
    """IPv6-only clients reach IPv4-only servers at PREFIX+IPv4 through the router `router`."""

    kind: str  # "nat64-tayga" or "nat64-jool"
    source: str
    router: str
    prefix: str
    pool4: str
    router_v4: str  # the router's address towards the IPv4 side
    router_v6: str  # the router's address towards the IPv6 side
    servers: tuple[tuple[str, str], ...]  # IPv4-only nodes and their IPv4 address
    clients: tuple[str, ...]  # IPv6-only nodes
    dns64: bool = False
    domain: str = "test"
    device: str = "nat64"
    instance: str = "testbed"

    @property
    def features(self) -> tuple[str, ...]:
        base = ("tun", "tayga") if self.kind == "nat64-tayga" else ("jool", "jool-tools")
        return base + (("unbound",) if self.dns64 else ())

    def synthesized(self, ipv4: str) -> str:
        return embed(self.prefix, ipv4)

    def tayga_config(self) -> TaygaConfig:
        v4, _v6 = tayga_addresses(self.prefix, self.pool4)
        return TaygaConfig(self.device, v4, self.prefix, self.pool4)

    def jool_config(self) -> JoolConfig:
        return JoolConfig(self.instance, self.prefix, self.pool4)

    def tayga_commands(self) -> list[list[str]]:
        """After TAYGA made its tun device: the paper's Fig. 14, lines 02-06."""
        dev = self.device
        return [
            ["ip", "link", "set", dev, "up"],
            ["ip", "addr", "add", f"{self.router_v4}/32", "dev", dev],
            ["ip", "-6", "addr", "add", f"{self.router_v6}/128", "dev", dev],
            ["ip", "route", "add", self.pool4, "dev", dev],
            ["ip", "-6", "route", "add", self.prefix, "dev", dev],
        ]

    def records(self) -> dict[str, str]:
        return {f"{node}.{self.domain}": v4 for node, v4 in self.servers}

    def describe(self) -> list[str]:
        lines = []
        if self.kind == "nat64-tayga":
            c = self.tayga_config()
            lines.append(
                f"{self.router}: tayga -d on tun {self.device} (ipv4-addr {c.ipv4_addr}, "
                f"ipv6 {tayga_addresses(self.prefix, self.pool4)[1]}), routes {self.pool4} and "
                f"{self.prefix} into it"
            )
        else:
            lines.append(
                f"{self.router}: jool instance {self.instance} (netfilter), pool6 "
                f"{self.prefix}, pool4 {self.pool4}"
            )
        for node, v4 in self.servers:
            lines.append(f"{node} ({v4}) is reached from IPv6 at {self.synthesized(v4)}")
        if self.dns64:
            lines.append(
                f"{self.router}: unbound DNS64 on {self.router_v6} for "
                + ", ".join(self.records())
                + "; "
                + ", ".join(self.clients)
                + " resolve through it"
            )
        return lines

    # --- apply ----------------------------------------------------------------------------

    def apply(self, tb: Testbed) -> None:
        if self.kind == "nat64-tayga":
            self._apply_tayga(tb)
        else:
            self._apply_jool(tb)
        for node, v4 in self.servers:
            common.register_address(tb, node, 6, self.synthesized(v4), bind=v4)
        if self.dns64:
            self._apply_dns64(tb)

    def _apply_tayga(self, tb: Testbed) -> None:
        work = scratch_dir(tb, "tayga")
        dev = self.device
        # pushed first, so it runs after TAYGA is stopped (TAYGA removes its device itself)
        tb.add_cleanup(
            lambda: tb.run(self.router, ["ip", "link", "del", dev], check=False),
            f"remove {dev} on {self.router}",
        )
        tayga = Tayga(self.router, work, self.tayga_config())
        tayga.start(tb)
        for argv in self.tayga_commands():
            tb.run(self.router, argv)
        own_v4 = self.tayga_config().ipv4_addr

        def translating() -> str | None:
            if not tayga.alive():
                return "tayga exited"
            r = tb.run(self.router, ["ping", "-c1", "-W1", "-q", own_v4], check=False)
            return None if r.returncode == 0 else f"tayga does not answer ping at {own_v4}"

        reason = poll(
            lambda: common.all_ready(
                common.link_up(tb, self.router, dev),
                common.has_route(tb, self.router, 6, self.prefix, dev),
                common.has_route(tb, self.router, 4, self.pool4, dev),
                translating(),
            ),
            deadline_s=10,
        )
        if reason is not None:
            raise DaemonError("tayga", self.router, f"not translating: {reason}", tayga.output())

    def _apply_jool(self, tb: Testbed) -> None:
        if not Path("/sys/module/jool").exists():
            # the one host-wide change: the module (instances live in the router's namespace)
            from testbed import processes

            r = processes.run(["modprobe", "jool"], check=False)
            if r.returncode != 0:
                raise MissingCapability("jool", f"{self.kind} in {self.source}", None) from None
        Jool(self.router, self.jool_config()).start(tb)

    def _apply_dns64(self, tb: Testbed) -> None:
        work = scratch_dir(tb, "dns64")
        unbound.zone_server(self.router, work, self.records()).start(tb)
        unbound.dns64_resolver(
            self.router,
            work,
            listen=[self.router_v6],
            prefix=self.prefix,
            zones=unbound.zones_of(self.records()),
        ).start(tb)
        for node in self.clients:
            d = NETNS_ETC / tb.netns(node)
            d.mkdir(parents=True, exist_ok=True)
            tb.add_cleanup(functools.partial(shutil.rmtree, d, ignore_errors=True), f"remove {d}")
            (d / "resolv.conf").write_text(
                f"# written by testbed: DNS64 on {self.router}\n"
                f"nameserver {self.router_v6}\nsearch {self.domain}\n"
            )


def _check_tayga_prefix(
    topo: Topology,
    prefix: ipaddress.IPv6Network,
    pool4: ipaddress.IPv4Network,
    servers: list[tuple[str, str]],
) -> None:
    if prefix != WELL_KNOWN_PREFIX:
        return
    allowed = (
        "a network-specific prefix such as 2001:db8:ffff::/96 (the paper's), kind = "
        "'nat64-jool' (Jool accepts it), or global IPv4 addresses for pool4 and the servers"
    )
    bad = non_global(pool4)
    if bad is not None:
        raise SpecError(
            topo.source,
            f"{common.SECTION}.pool4",
            f"TAYGA refuses the well-known prefix {WELL_KNOWN_PREFIX} with non-global IPv4 "
            f"addresses (RFC 6052), and pool4 {pool4} is inside {bad}: its packets would be "
            "dropped with 'no route'",
            allowed,
        )
    for node, v4 in servers:
        bad = non_global(ipaddress.IPv4Network(v4))
        if bad is not None:
            raise SpecError(
                topo.source,
                f"{common.SECTION}.prefix",
                f"TAYGA refuses the well-known prefix {WELL_KNOWN_PREFIX} with non-global "
                f"IPv4 addresses (RFC 6052), and {node}'s address {v4} is inside {bad}: "
                "IPv6 clients could not reach it",
                allowed,
            )


def parse(topo: Topology, table: Mapping[str, Any]) -> Nat64:
    kind = str(table["kind"])
    common.check_keys(topo, table, KEYS[kind])
    plan = plan_addresses(topo)
    router = common.node_key(topo, table, "router", role="router")
    common.need_stack(topo, router, (4, 6), "the NAT64 translator needs IPv4 and IPv6")
    prefix = common.network_key(
        topo, table, "prefix", 6, default="2001:db8:ffff::/96", lengths=RFC6052_LENGTHS
    )
    assert isinstance(prefix, ipaddress.IPv6Network)
    if prefix.prefixlen < 96 and prefix.network_address.packed[8] != 0:
        raise SpecError(
            topo.source,
            f"{common.SECTION}.prefix",
            "bits 64-71 of the prefix must be zero",
            "RFC 6052, section 2.2",
        )
    pool_lengths = tuple(range(8, 32)) if kind == "nat64-tayga" else tuple(range(8, 33))
    pool4 = common.network_key(
        topo, table, "pool4", 4, default="192.168.255.0/24", lengths=pool_lengths
    )
    assert isinstance(pool4, ipaddress.IPv4Network)
    common.check_no_overlap(topo, plan, "prefix", prefix)
    common.check_no_overlap(topo, plan, "pool4", pool4)
    servers: list[tuple[str, str]] = []
    clients: list[str] = []
    for n in topo.nodes:
        if n.name == router:
            continue
        if n.stack == "ipv4":
            for iface in plan.of(n.name):
                v4 = iface.address(4)
                if v4 is not None:
                    servers.append((n.name, v4))
                    break
        elif n.stack == "ipv6":
            clients.append(n.name)
    if not servers or not clients:
        raise SpecError(
            topo.source,
            "nodes",
            "NAT64 joins IPv6-only clients to IPv4-only servers; this topology has "
            f"{len(clients)} IPv6-only and {len(servers)} IPv4-only nodes",
            "at least one node with stack = 'ipv6' and one with stack = 'ipv4'",
        )
    if kind == "nat64-tayga":
        _check_tayga_prefix(topo, prefix, pool4, servers)
    router_v4 = common.plan_address(topo, plan, router, 4, servers[0][0], f"nodes.{router}")
    router_v6 = common.plan_address(topo, plan, router, 6, clients[0], f"nodes.{router}")
    dns64 = common.bool_key(topo, table, "dns64", False)
    domain = table.get("domain", "test")
    if (
        not isinstance(domain, str)
        or not domain
        or not all(part.isalnum() for part in domain.split("."))
    ):
        raise SpecError(
            topo.source, f"{common.SECTION}.domain", f"bad domain {domain!r}", "e.g. test"
        )
    return Nat64(
        kind=kind,
        source=topo.source,
        router=router,
        prefix=str(prefix),
        pool4=str(pool4),
        router_v4=router_v4,
        router_v6=router_v6,
        servers=tuple(servers),
        clients=tuple(clients),
        dns64=dns64,
        domain=domain,
        device=common.name_key(topo, table, "device", "nat64"),
        instance=common.name_key(topo, table, "instance", "testbed"),
    )
