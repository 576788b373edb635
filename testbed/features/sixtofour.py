"""6to4 (RFC 3056) on one node: a sit device with `remote any`, 2002:V4::1, route 2002::/16."""

from __future__ import annotations

import ipaddress

from testbed.actions import Check, Command, HasAddress, HasRoute, LinkIsUp
from testbed.api import Action
from testbed.features.base import Feature, NodeAddress, Option, Options

PREFIX_6TO4 = ipaddress.IPv6Network("2002::/16")


def address_6to4(ipv4: str, host: int = 1) -> str:
    """The 6to4 address of a host: 2002:<IPv4 in hex>::<host> (its site is 2002:V4::/48)."""
    v4 = int(ipaddress.IPv4Address(ipv4))
    return str(ipaddress.IPv6Address((0x2002 << 112) | (v4 << 80) | host))


def site_6to4(ipv4: str) -> str:
    return str(ipaddress.IPv6Network((int(ipaddress.IPv6Address(address_6to4(ipv4, 0))), 48)))


class SixToFour(Feature):
    """A 6to4 host/router: IPv6 to any 6to4 site travels inside IPv4 (protocol 41)."""

    kind = "6to4"
    summary = "6to4 host/router: sit device (remote any), 2002:V4::1/16, route 2002::/16"
    options = (
        Option("device", "the sit device's name", "tun6to4"),
        Option("ttl", "the TTL of the outer IPv4 header (1-255)", 64),
    )
    kernel = ("sit",)
    guest_modules = ("sit",)

    def configure(self, opts: Options) -> None:
        opts.need_stack(self.node, (4, 6), "a 6to4 host needs IPv4 (its tunnel end) and IPv6")
        self.v4 = opts.address_of(self.node, 4)
        self.device = opts.name("device")
        self.ttl = opts.integer("ttl", 1, 255)
        self.address = address_6to4(self.v4)

    def actions(self) -> list[Action]:
        dev = self.device
        return [
            Command(self.node, ("ip", "link", "add", dev, "type", "sit", "remote", "any", "local",
                                self.v4, "ttl", str(self.ttl)),
                    undo_argv=("ip", "link", "del", dev)),
            Command(self.node, ("ip", "link", "set", dev, "up")),
            Command(self.node, ("ip", "-6", "addr", "add", f"{self.address}/16", "dev", dev)),
        ]

    def addresses(self) -> list[NodeAddress]:
        return [NodeAddress(self.node, 6, self.address)]

    def ready(self) -> list[Check]:
        return [
            LinkIsUp(self.node, self.device),
            HasAddress(self.node, self.device, self.address),
            HasRoute(self.node, 6, str(PREFIX_6TO4), self.device),
        ]
