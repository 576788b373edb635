"""6to4 (RFC 3056): a sit device with `remote any` on each 6to4 host, 2002:V4::/48 addresses."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testbed.addressing import plan_addresses
from testbed.daemons.base import poll
from testbed.errors import KernelError, SpecError
from testbed.mechanisms import common
from testbed.topology import Topology

if TYPE_CHECKING:
    from testbed.testbed import Testbed

KEYS = ("kind", "hosts", "device", "ttl")
PREFIX_6TO4 = ipaddress.IPv6Network("2002::/16")


def address_6to4(ipv4: str, host: int = 1) -> str:
    """The 6to4 address of a host: 2002:<IPv4 in hex>::<host> (its site is 2002:V4::/48)."""
    v4 = int(ipaddress.IPv4Address(ipv4))
    return str(ipaddress.IPv6Address((0x2002 << 112) | (v4 << 80) | host))


def site_6to4(ipv4: str) -> str:
    return str(ipaddress.IPv6Network((int(ipaddress.IPv6Address(address_6to4(ipv4, 0))), 48)))


@dataclass(frozen=True)
class SixToFour:
    """6to4 hosts/routers: each node has a sit device and a 2002:V4::1 address; the route
    2002::/16 into the device sends IPv6 to any 6to4 site inside IPv4 (protocol 41)."""

    source: str
    hosts: tuple[tuple[str, str], ...]  # (node, its IPv4 address)
    device: str = "tun6to4"
    ttl: int = 64
    kind: str = "6to4"

    @property
    def features(self) -> tuple[str, ...]:
        return ("sit",)

    def addresses(self) -> dict[str, str]:
        return {node: address_6to4(v4) for node, v4 in self.hosts}

    def commands(self) -> dict[str, list[list[str]]]:
        """The argv, per node, that set 6to4 up (what the paper's Fig. 11 does by hand)."""
        out: dict[str, list[list[str]]] = {}
        for node, v4 in self.hosts:
            dev = self.device
            out[node] = [
                [
                    "ip",
                    "link",
                    "add",
                    dev,
                    "type",
                    "sit",
                    "remote",
                    "any",
                    "local",
                    v4,
                    "ttl",
                    str(self.ttl),
                ],
                ["ip", "link", "set", dev, "up"],
                ["ip", "-6", "addr", "add", f"{address_6to4(v4)}/16", "dev", dev],
            ]
        return out

    def describe(self) -> list[str]:
        lines = []
        for node, v4 in self.hosts:
            lines.append(
                f"{node}: 6to4 device {self.device} (sit, local {v4}, remote any), "
                f"address {address_6to4(v4)}, site {site_6to4(v4)}, route {PREFIX_6TO4}"
            )
        return lines

    def ready(self, tb: Testbed, node: str, v4: str) -> str | None:
        return common.all_ready(
            common.link_up(tb, node, self.device),
            common.has_address(tb, node, self.device, address_6to4(v4)),
            common.has_route(tb, node, 6, str(PREFIX_6TO4), self.device),
        )

    def apply(self, tb: Testbed) -> None:
        cmds = self.commands()
        for node, _v4 in self.hosts:
            first, *rest = cmds[node]
            tb.run(node, first)
            tb.add_cleanup(
                functools.partial(tb.run, node, ["ip", "link", "del", self.device], check=False),
                f"remove {self.device} on {node}",
            )
            for argv in rest:
                tb.run(node, argv)
        for node, v4 in self.hosts:
            reason = poll(functools.partial(self.ready, tb, node, v4), deadline_s=10)
            if reason is not None:
                raise KernelError("set up 6to4 on", f"{node}/{self.device}", 0, reason)
            common.register_address(tb, node, 6, address_6to4(v4))


def parse(topo: Topology, table: Mapping[str, Any]) -> SixToFour:
    common.check_keys(topo, table, KEYS)
    plan = plan_addresses(topo)
    default = [n.name for n in topo.nodes if n.role == "host" and n.stack == "dual"]
    hosts = table.get("hosts", default)
    if isinstance(hosts, str):
        hosts = [hosts]
    key = f"{common.SECTION}.hosts"
    if not isinstance(hosts, list) or len(hosts) < 2 or len(set(hosts)) != len(hosts):
        raise SpecError(
            topo.source,
            key,
            f"need at least two distinct 6to4 nodes, got {hosts!r}",
            'a list of node names, e.g. ["h1", "h2"]',
        )
    pairs: list[tuple[str, str]] = []
    for i, name in enumerate(hosts):
        common.node_key(topo, {"hosts": name}, "hosts")
        common.need_stack(topo, name, (4, 6), "a 6to4 host needs IPv4 (its tunnel end) and IPv6")
        v4 = common.plan_address(topo, plan, name, 4, None, f"{key}[{i}]")
        for other, other_v4 in pairs:
            if other_v4 == v4:
                raise SpecError(topo.source, key, f"{name} and {other} share {v4}", "distinct")
        pairs.append((name, v4))
    device = common.name_key(topo, table, "device", "tun6to4")
    ttl = common.int_key(topo, table, "ttl", 64, 1, 255)
    return SixToFour(source=topo.source, hosts=tuple(pairs), device=device, ttl=ttl)
