"""ISATAP (RFC 5214): a kernel ISATAP interface and radvd on the router, isatapd on a host."""

from __future__ import annotations

import ipaddress

from testbed.actions import (
    Check,
    Command,
    Daemon,
    FileExists,
    HasAddress,
    HasRoute,
    LinkExists,
    LinkIsUp,
    Succeeds,
    Sysctl,
    WaitUntil,
    WriteFile,
    scratch,
)
from testbed.api import Action
from testbed.daemons.radvd import radvd_argv, radvd_config
from testbed.errors import SpecError
from testbed.features.base import Feature, NodeAddress, Option, Options, Program

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


class Isatap(Feature):
    """`node` is the ISATAP router advertising `prefix` on its ISATAP interface; `host`
    (on an IPv4-only link to it) runs isatapd and autoconfigures PREFIX::5efe:V4."""

    kind = "isatap"
    summary = "ISATAP router (sit isatap + radvd) on node, isatapd on host"
    node_role = "router"
    options = (
        Option("host", "the ISATAP host (a node with role = 'host')"),
        Option("prefix", "the /64 the router advertises, e.g. 2001:db8:fea::/64"),
        Option("device", "the ISATAP interface's name (on router and host)", "is0"),
    )
    kernel = ("sit",)
    programs = (Program("isatapd", "isatapd"), Program("radvd", "radvd", ("radvd", "--version")))
    guest_modules = ("sit",)
    cpu_processes = ("isatapd", "radvd")

    def configure(self, opts: Options) -> None:
        router = self.node
        self.host = host = opts.node_name("host", role="host")
        opts.need_stack(router, (4, 6), "the ISATAP router needs IPv4 and IPv6")
        self.host_v4 = opts.address_of(host, 4, router)
        self.router_v4 = opts.address_of(router, 4, host)
        try:
            native = opts.addresses.address(host, 6, router)
        except KeyError:
            native = None
        if native is not None:
            raise SpecError(
                opts.file,
                f"nodes.{host}.stack",
                f"the {host} -- {router} link carries IPv6 ({native}): ISATAP would not be used",
                f"stack = 'ipv4' for {host} (the feature turns IPv6 on for its tunnel)",
            )
        prefix = opts.network("prefix", 6, lengths=(64,))
        opts.no_overlap("prefix", prefix)
        self.prefix = str(prefix)
        self.device = opts.name("device")
        self.host_is_ipv4_only = opts.topology.node(host).stack == "ipv4"
        self.host_address = isatap_address(self.prefix, self.host_v4)
        self.router_address = isatap_address(self.prefix, self.router_v4)

    def actions(self) -> list[Action]:
        r, h, dev = self.node, self.host, self.device
        work = f"isatap-{r}"
        out: list[Action] = [
            # the router's interface: the paper's Fig. 7, lines 01-03, plus an address
            Command(r, ("ip", "link", "add", dev, "type", "sit", "local", self.router_v4, "ttl",
                        "64", "isatap"), undo_argv=("ip", "link", "del", dev)),
            Command(r, ("ip", "link", "set", dev, "up")),
            Command(r, ("ip", "-6", "addr", "add", f"{self.router_address}/64", "dev", dev)),
            WaitUntil(
                f"the ISATAP interface of {r}",
                (LinkIsUp(r, dev), HasAddress(r, dev, self.router_address)),
            ),
            WriteFile(f"{work}/radvd.conf", radvd_config(dev, self.prefix, unicast_only=True)),
            Daemon(
                r,
                tuple(radvd_argv(scratch(f"{work}/radvd.conf"), scratch(f"{work}/radvd.pid"))),
                "radvd",
                ready=(
                    # radvd writes its pid file once it read its config and opened its socket
                    FileExists(scratch(f"{work}/radvd.pid")),
                    Succeeds(r, ("ss", "-H", "-w", "-a", "-n", "-p"), contains="radvd"),
                ),
            ),
        ]
        if self.host_is_ipv4_only:
            # IPv6 on for lo and new devices of an IPv4-only host (its link stays IPv4-only)
            out.append(
                Sysctl(
                    h,
                    (
                        ("net.ipv6.conf.default.disable_ipv6", "0"),
                        ("net.ipv6.conf.lo.disable_ipv6", "0"),
                        ("net.ipv6.conf.default.accept_dad", "0"),
                        ("net.ipv6.conf.default.accept_ra", "1"),
                    ),
                )
            )
        out += [
            # isatapd creates its tunnel with the SIOCADDTUNNEL ioctl on "sit0", the fallback
            # device, which new namespaces lack when net.core.fb_tunnels_only_for_init_net is
            # set: give the host a plain sit0 (down) where it has none
            Command(
                h,
                ("ip", "link", "add", "sit0", "type", "sit"),
                undo_argv=("ip", "link", "del", "sit0"),
                unless=(LinkExists(h, "sit0"),),
            ),
            Daemon(
                h,
                (
                    "isatapd",
                    "--name",
                    dev,
                    "--router",
                    self.router_v4,
                    "--check-dns",
                    "0",
                    "--user",
                    "root",
                    "--verbose",
                    "--pid",
                    scratch(f"{work}/isatapd.pid"),
                ),
                "isatapd",
                # it solicits at start: the router's advert brings the address and route
                ready=(
                    LinkExists(h, dev),
                    HasAddress(h, dev, self.host_address),
                    HasRoute(h, 6, "default", dev),
                ),
                deadline_s=20.0,
                after_stop=("ip", "link", "del", dev),  # isatapd leaves its interface behind
            ),
        ]
        return out

    def addresses(self) -> list[NodeAddress]:
        return [NodeAddress(self.host, 6, self.host_address)]

    def ready(self) -> list[Check]:
        return []  # each daemon waits for its own readiness
