"""DHCP client feature: a host drops its planned address and gets one from DHCP/DHCPv6/SLAAC."""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import waiting
from testbed.actions import Command, Daemon, Sysctl, WriteFile, scratch
from testbed.api import Action, TestbedLike
from testbed.features import _router as r
from testbed.features import dhcp_server
from testbed.features.base import Feature, Option, Program
from testbed.features.base import Options as FeatureOptions

KIND = "dhcp-client"


@dataclass(frozen=True)
class Options:
    node: str
    peer: str
    dev: str
    ip: tuple[int, ...]  # versions asked from DHCP (4: DHCPv4, 6: stateful DHCPv6)
    slaac: bool  # IPv6 from router advertisements instead of DHCPv6
    planned: tuple[str, ...]  # the planned addresses (with length) it drops
    target: str | None  # the check pings it from the new address (default: the DHCP server)
    static: tuple[str, ...] = ()  # every planned address of the interface (kept or dropped)

    def versions(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.ip) | ({6} if self.slaac else set())))


def parse(opts: FeatureOptions) -> Options:
    nodes = opts.topology.node_names
    node = opts.node
    peer = opts.node_name("link")
    iface = opts.link(node, "link", peer)
    slaac = opts.boolean("slaac")
    if opts.table.get("ip") == "none":
        if not slaac:
            raise opts.error("ip", "no DHCP and no SLAAC: the client would do nothing",
                             "slaac = true")
        ip: tuple[int, ...] = ()
    else:
        ip = opts.versions(default=(4,) if slaac else (4, 6))
    if slaac and 6 in ip:
        raise opts.error("ip", "IPv6 comes from SLAAC (slaac = true), not DHCPv6",
                         'ip = 4 or "none"')
    # the planned addresses DHCP replaces are dropped; a SLAAC address comes beside the
    # planned IPv6 one (as on a host with a static address on a link with RAs)
    planned = tuple(a for a in iface.addresses if ipaddress.ip_interface(a).version in ip)
    target = opts.table.get("target")
    if target is not None and target not in nodes:
        raise opts.error("target", f"unknown node {target!r}", ", ".join(nodes))
    return Options(node, peer, iface.name, ip, slaac, planned, target, tuple(iface.addresses))


HOOK = """#!/bin/sh
# dhclient hook written by testbed: set the leased address (and default route) on the
# interface; nothing else (the host's /etc/resolv.conf is shared with the namespaces).
case "$reason" in
BOUND|RENEW|REBIND|REBOOT)
    ip -4 addr replace "$new_ip_address/$new_subnet_mask" dev "$interface"
    for r in $new_routers; do ip -4 route replace default via "$r" dev "$interface"; break; done
    ;;
BOUND6|RENEW6|REBIND6)
    ip -6 addr replace "$new_ip6_address/$new_ip6_prefixlen" dev "$interface" nodad
    ;;
EXPIRE|FAIL|RELEASE|STOP)
    [ -n "$old_ip_address" ] && ip -4 addr del "$old_ip_address/$old_subnet_mask" dev "$interface"
    ;;
esac
exit 0
"""


def hook_script() -> str:
    return HOOK


def client_argv(o: Options, family: int, folder: Path | str, hook: Path | str) -> list[str]:
    """dhclient in the foreground with its own hook, lease and pid files (never the system's)."""
    tag = f"{o.node}-v{family}"
    return [
        "dhclient", f"-{family}", "-d", "-sf", str(hook),
        "-lf", f"{folder}/dhclient-{tag}.leases", "-pf", f"{folder}/dhclient-{tag}.pid",
        "-cf", "/dev/null", o.dev,
    ]  # fmt: skip


def drop_argvs(o: Options) -> list[tuple[list[str], list[str]]]:
    """(drop, restore) argv per planned address the client replaces."""
    return [
        (["ip", "addr", "del", a, "dev", o.dev], ["ip", "addr", "replace", a, "dev", o.dev])
        for a in o.planned
    ]


def slaac_sysctls(o: Options) -> dict[str, str]:
    return {f"net.ipv6.conf.{o.dev}.accept_ra": "2", f"net.ipv6.conf.{o.dev}.autoconf": "1"}


def dynamic_addresses(tb: TestbedLike, o: Options, family: int) -> list[dict[str, Any]]:
    """The interface's global addresses of `family` that are not the planned ones."""
    out = tb.run(o.node, ["ip", "-j", f"-{family}", "addr", "show", "dev", o.dev], check=False)
    planned = {a.split("/")[0] for a in o.static}
    found = []
    for link in json.loads(out.stdout or "[]"):
        for a in link.get("addr_info", []):
            if a.get("scope") != "global" or a.get("local") in planned:
                continue
            found.append(
                {k: a.get(k) for k in ("local", "prefixlen", "dynamic", "valid_life_time")}
            )
    return found


def check(
    tb: TestbedLike,
    o: Options,
    ip: int,
    server: dhcp_server.Options | None,
    target: str | None = None,
    wait_s: float = 30.0,
) -> r.CheckResult:
    """The host has an address of `ip` it did not have from the plan (from DHCP, DHCPv6 or
    SLAAC), the server's lease file holds it (DHCP), and a ping from it to `target` comes back."""
    feature = "slaac" if ip == 6 and o.slaac else KIND
    if ip not in o.versions():
        return r.not_supported(feature, ip, f"{o.node} asks no IPv{ip} address")
    found: list[dict[str, Any]] = []

    def got() -> bool:
        found[:] = dynamic_addresses(tb, o, ip)
        return bool(found)

    start = time.monotonic()
    waiting.wait_for(got, wait_s)
    evidence: dict[str, Any] = {
        "addresses": list(found),
        "waited_s": round(time.monotonic() - start, 2),
    }
    if not found:
        return r.CheckResult(feature, ip, "fails", evidence, f"{o.node} got no IPv{ip} address")
    addr = str(found[0]["local"])
    failures = []
    if not (ip == 6 and o.slaac) and server is not None:
        lease_file = dhcp_server.leases_path(tb.scratch_dir(), server.node)
        text = lease_file.read_text() if lease_file.exists() else ""
        held = [x for x in dhcp_server.leases(text) if x["address"] == addr]
        evidence["lease"] = held[0] if held else None
        if not held:
            failures.append(f"{server.node}'s lease file has no lease for {addr}")
        pool = server.pool(ip)
        if pool is not None and not (
            int(ipaddress.ip_address(pool.start))
            <= int(ipaddress.ip_address(addr))
            <= int(ipaddress.ip_address(pool.end))
        ):
            failures.append(f"{addr} is outside the pool {pool.start}-{pool.end}")
    if target is None:
        target = o.target or (server.node if server is not None else o.peer)
    dst = tb.address(target, ip)

    def routed() -> bool:  # the hook adds the default route just after the address
        argv = ["ip", f"-{ip}", "route", "get", dst, "from", addr]
        return tb.run(o.node, argv, check=False).returncode == 0

    waiting.wait_for(routed, 10.0)
    p = r.ping(tb, o.node, dst, ip, source=addr)
    evidence["ping"] = p
    if p["received"] < p["sent"]:
        failures.append(f"from {addr} to {target}: {p['received']}/{p['sent']} replies")
    return r.verdict(feature, ip, evidence, failures)


DHCLIENT = Program("dhclient", "isc-dhcp-client", ("dhclient", "--version"))


class DhcpClient(r.RouterFeature):
    """A host that takes its addresses from DHCP, DHCPv6 or SLAAC."""

    kind = KIND
    summary = "a host gets its addresses from DHCPv4/DHCPv6 (dhclient) or SLAAC instead of the plan"
    node_role = "host"
    options = (
        Option("link", "the neighbour on the link it asks on (the router)"),
        Option(
            "ip",
            'versions asked from DHCP: 4, 6, "both" or "none" (default: both; 4 with slaac)',
            None,
        ),
        Option("slaac", "IPv6 from router advertisements (SLAAC) instead of DHCPv6", False),
        Option("target", "the check pings this node from the new address", None),
    )
    programs = (DHCLIENT,)

    def configure(self, opts: FeatureOptions) -> None:
        self.o = parse(opts)

    def actions(self) -> list[Action]:
        hook = f"dhclient-hook-{self.node}"
        out: list[Action] = [WriteFile(hook, hook_script(), 0o755)]
        out += [Command(self.node, tuple(a), tuple(b)) for a, b in drop_argvs(self.o)]
        if self.o.slaac:
            out.append(Sysctl(self.node, tuple(slaac_sysctls(self.o).items())))
        for fam in self.o.ip:
            argv = client_argv(self.o, fam, "{scratch}", scratch(hook))
            out.append(Daemon(self.node, tuple(argv), f"dhclient{fam}"))
        return out

    def check(self, tb: TestbedLike, ip: int, others: Sequence[Feature]) -> r.CheckResult:
        server = None
        for f in others:
            if isinstance(f, dhcp_server.DhcpServer) and f.o.link == (self.o.peer, self.node):
                server = f.o
        return check(tb, self.o, ip, server)
