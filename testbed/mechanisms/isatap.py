"""ISATAP (RFC 5214): isatapd on the host, a kernel ISATAP interface and radvd on the router."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testbed.addressing import plan_addresses
from testbed.daemons.base import poll, scratch_dir
from testbed.daemons.isatapd import Isatapd
from testbed.daemons.radvd import Radvd
from testbed.errors import KernelError, SpecError
from testbed.mechanisms import common
from testbed.topology import Topology

if TYPE_CHECKING:
    from testbed.testbed import Testbed

KEYS = ("kind", "host", "router", "prefix", "device")

# IPv4 ranges for which the kernel writes the ISATAP interface id with the u/l bit clear
# (0000:5efe:V4), as net/ipv6/addrconf.c __ipv6_isatap_ifid does; other addresses get 0200:5efe.
_LOCAL_RANGES = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "255.255.255.255/32",
    )
)


def isatap_interface_id(ipv4: str) -> int:
    """The 64-bit ISATAP interface id of an IPv4 address (modified EUI-64, RFC 5214)."""
    v4 = ipaddress.IPv4Address(ipv4)
    ul = 0x00 if any(v4 in n for n in _LOCAL_RANGES) else 0x02
    return (ul << 56) | (0x5EFE << 32) | int(v4)


def isatap_address(prefix: str, ipv4: str) -> str:
    net = ipaddress.IPv6Network(prefix)
    return str(ipaddress.IPv6Address(int(net.network_address) | isatap_interface_id(ipv4)))


@dataclass(frozen=True)
class Isatap:
    """h1 an ISATAP host, r1 the ISATAP router advertising `prefix` on its ISATAP interface."""

    source: str
    host: str
    router: str
    host_v4: str
    router_v4: str
    prefix: str
    host_is_ipv4_only: bool
    device: str = "is0"
    kind: str = "isatap"

    @property
    def features(self) -> tuple[str, ...]:
        return ("sit", "isatapd", "radvd")

    @property
    def host_address(self) -> str:
        return isatap_address(self.prefix, self.host_v4)

    @property
    def router_address(self) -> str:
        return isatap_address(self.prefix, self.router_v4)

    def router_commands(self) -> list[list[str]]:
        """The ISATAP router's interface (the paper's Fig. 7, lines 01-03, plus an address)."""
        dev = self.device
        return [
            [
                "ip",
                "link",
                "add",
                dev,
                "type",
                "sit",
                "local",
                self.router_v4,
                "ttl",
                "64",
                "isatap",
            ],
            ["ip", "link", "set", dev, "up"],
            ["ip", "-6", "addr", "add", f"{self.router_address}/64", "dev", dev],
        ]

    def host_sysctls(self) -> list[list[str]]:
        """IPv6 on for lo and new devices of an IPv4-only host (its link stays IPv4-only)."""
        if not self.host_is_ipv4_only:
            return []
        return [
            ["sysctl", "-q", "-w", f"net.ipv6.conf.{k}={v}"]
            for k, v in (
                ("default.disable_ipv6", "0"),
                ("lo.disable_ipv6", "0"),
                ("default.accept_dad", "0"),
                ("default.accept_ra", "1"),
            )
        ]

    def describe(self) -> list[str]:
        return [
            f"{self.router}: ISATAP interface {self.device} (sit isatap, local "
            f"{self.router_v4}), address {self.router_address}/64, radvd advertising "
            f"{self.prefix} (unicast only)",
            f"{self.host}: isatapd --router {self.router_v4}; autoconfigures "
            f"{self.host_address} and a default route via {self.device}",
        ]

    def apply(self, tb: Testbed) -> None:
        work = scratch_dir(tb, "isatap")
        first, *rest = self.router_commands()
        tb.run(self.router, first)
        tb.add_cleanup(
            lambda: tb.run(self.router, ["ip", "link", "del", self.device], check=False),
            f"remove {self.device} on {self.router}",
        )
        for argv in rest:
            tb.run(self.router, argv)
        reason = poll(
            lambda: common.all_ready(
                common.link_up(tb, self.router, self.device),
                common.has_address(tb, self.router, self.device, self.router_address),
            ),
            deadline_s=10,
        )
        if reason is not None:
            raise KernelError("set up the ISATAP router interface", self.router, 0, reason)
        Radvd(self.router, work, self.device, self.prefix, unicast_only=True).start(tb)
        for argv in self.host_sysctls():
            tb.run(self.host, argv)
        if tb.run(self.host, ["ip", "link", "show", "dev", "sit0"], check=False).returncode:
            # isatapd creates its tunnel with the SIOCADDTUNNEL ioctl on "sit0", the fallback
            # device, which new namespaces lack when net.core.fb_tunnels_only_for_init_net is
            # set: give h1 a plain sit0 (down; removed with the namespace or on teardown)
            tb.run(self.host, ["ip", "link", "add", "sit0", "type", "sit"])
            tb.add_cleanup(
                lambda: tb.run(self.host, ["ip", "link", "del", "sit0"], check=False),
                f"remove sit0 on {self.host}",
            )
        tb.add_cleanup(
            lambda: tb.run(self.host, ["ip", "link", "del", self.device], check=False),
            f"remove {self.device} on {self.host}",
        )
        Isatapd(
            self.host,
            work,
            router=self.router_v4,
            device=self.device,
            expect_address=self.host_address,
        ).start(tb)
        common.register_address(tb, self.host, 6, self.host_address)


def parse(topo: Topology, table: Mapping[str, Any]) -> Isatap:
    common.check_keys(topo, table, KEYS)
    plan = plan_addresses(topo)
    host = common.node_key(topo, table, "host", role="host")
    router = common.node_key(topo, table, "router", role="router")
    common.need_stack(topo, router, (4, 6), "the ISATAP router needs IPv4 and IPv6")
    host_v4 = common.plan_address(topo, plan, host, 4, router, f"{common.SECTION}.host")
    router_v4 = common.plan_address(topo, plan, router, 4, host, f"{common.SECTION}.router")
    try:
        native = plan.address(host, 6, router)
    except KeyError:
        native = None
    if native is not None:
        raise SpecError(
            topo.source,
            f"nodes.{host}.stack",
            f"the {host} -- {router} link carries IPv6 ({native}): ISATAP would not be used",
            f"stack = 'ipv4' for {host} (the mechanism turns IPv6 on for its tunnel)",
        )
    prefix = common.network_key(topo, table, "prefix", 6, lengths=(64,))
    common.check_no_overlap(topo, plan, "prefix", prefix)
    device = common.name_key(topo, table, "device", "is0")
    return Isatap(
        source=topo.source,
        host=host,
        router=router,
        host_v4=host_v4,
        router_v4=router_v4,
        prefix=str(prefix),
        host_is_ipv4_only=topo.node(host).stack == "ipv4",
        device=device,
    )
