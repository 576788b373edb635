"""NAT64 with TAYGA, the userspace stateless translator on a tun device, on a router."""

from __future__ import annotations

import ipaddress

from testbed.actions import (
    Check,
    Command,
    Daemon,
    HasRoute,
    LinkExists,
    LinkIsUp,
    Succeeds,
    WriteFile,
    scratch,
)
from testbed.api import Action
from testbed.daemons.tayga import TaygaConfig, tayga_addresses
from testbed.features._nat64 import NAT64_OPTIONS, WELL_KNOWN_PREFIX, Nat64
from testbed.features.base import Option, Options, Program

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


def non_global(net: ipaddress.IPv4Network) -> ipaddress.IPv4Network | None:
    """The TAYGA non-global range `net` overlaps, if any."""
    for r in TAYGA_NON_GLOBAL:
        if net.overlaps(r):
            return r
    return None


class Nat64Tayga(Nat64):
    """`tayga -d` on tun `device`; routes the pool and the prefix into it (Fig. 14)."""

    kind = "nat64-tayga"
    summary = "NAT64 with TAYGA (userspace, tun device) on a router"
    options = (*NAT64_OPTIONS, Option("device", "TAYGA's tun device", "nat64"))
    kernel = ("tun",)
    programs = (Program("tayga", "tayga", ("tayga", "--version")),)
    guest_modules = ("tun",)
    cpu_processes = ("tayga",)
    pool4_lengths = tuple(range(8, 32))

    def configure(self, opts: Options) -> None:
        super().configure(opts)
        self.device = opts.name("device")
        self._check_well_known(opts)
        v4, _v6 = tayga_addresses(self.prefix, self.pool4)
        self.config = TaygaConfig(self.device, v4, self.prefix, self.pool4)

    def _check_well_known(self, opts: Options) -> None:
        if ipaddress.IPv6Network(self.prefix) != WELL_KNOWN_PREFIX:
            return
        allowed = (
            "a network-specific prefix such as 2001:db8:ffff::/96 (the paper's), kind = "
            "'nat64-jool' (Jool accepts it), or global IPv4 addresses for pool4 and the servers"
        )
        bad = non_global(ipaddress.IPv4Network(self.pool4))
        if bad is not None:
            raise opts.error(
                "pool4",
                f"TAYGA refuses the well-known prefix {WELL_KNOWN_PREFIX} with non-global IPv4 "
                f"addresses (RFC 6052), and pool4 {self.pool4} is inside {bad}: its packets "
                "would be dropped with 'no route'",
                allowed,
            )
        for node, v4 in self.servers:
            bad = non_global(ipaddress.IPv4Network(v4))
            if bad is not None:
                raise opts.error(
                    "prefix",
                    f"TAYGA refuses the well-known prefix {WELL_KNOWN_PREFIX} with non-global "
                    f"IPv4 addresses (RFC 6052), and {node}'s address {v4} is inside {bad}: "
                    "IPv6 clients could not reach it",
                    allowed,
                )

    def actions(self) -> list[Action]:
        r, dev = self.node, self.device
        conf = f"tayga-{r}/tayga.conf"
        return [
            WriteFile(conf, self.config.text()),
            # -d: debug messages, stays in the foreground (the paper starts it the same way);
            # it creates its tun device and removes it when it exits
            Daemon(
                r,
                ("tayga", "-d", "--config", scratch(conf)),
                "tayga",
                ready=(LinkExists(r, dev),),
                after_stop=("ip", "link", "del", dev),
            ),
            # the paper's Fig. 14, lines 02-06
            Command(r, ("ip", "link", "set", dev, "up")),
            Command(r, ("ip", "addr", "add", f"{self.router_v4}/32", "dev", dev)),
            Command(r, ("ip", "-6", "addr", "add", f"{self.router_v6}/128", "dev", dev)),
            Command(r, ("ip", "route", "add", self.pool4, "dev", dev)),
            Command(r, ("ip", "-6", "route", "add", self.prefix, "dev", dev)),
        ]

    def ready(self) -> list[Check]:
        r, dev = self.node, self.device
        return [
            LinkIsUp(r, dev),
            HasRoute(r, 6, self.prefix, dev),
            HasRoute(r, 4, self.pool4, dev),
            # TAYGA answers ping at its own IPv4 address once it translates
            Succeeds(r, ("ping", "-c1", "-W1", "-q", self.config.ipv4_addr)),
        ]
