"""DHCP client feature: a host drops its planned address and gets one from DHCP/DHCPv6/SLAAC."""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import waiting
from testbed.addressing import AddressPlan
from testbed.features import _router as r
from testbed.features import dhcp_server

KIND = "dhcp-client"
OPTIONS = ("kind", "node", "link", "ip", "slaac")


@dataclass(frozen=True)
class Options:
    node: str
    peer: str
    dev: str
    ip: tuple[int, ...]  # versions asked from DHCP (4: DHCPv4, 6: stateful DHCPv6)
    slaac: bool  # IPv6 from router advertisements instead of DHCPv6
    planned: tuple[str, ...]  # the planned addresses (with length) it drops

    def versions(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.ip) | ({6} if self.slaac else set())))


def parse(w: r.Where, table: Mapping[str, Any], plan: AddressPlan, nodes: Sequence[str]) -> Options:
    r.check_keys(w, table, OPTIONS)
    node = r.node_opt(w, table, "node", nodes)
    peer = r.node_opt(w, table, "link", nodes)
    iface = r.link_iface(w, plan, node, "link", peer)
    slaac = r.bool_opt(w, table, "slaac", False)
    ip = r.versions_opt(w, table, default=(4,) if slaac else (4, 6))
    if slaac and 6 in ip:
        raise w.error("ip", "IPv6 comes from SLAAC (slaac = true), not DHCPv6", "ip = [4]")
    planned = tuple(
        a
        for a in iface.addresses
        if ipaddress.ip_interface(a).version in (*ip, *((6,) if slaac else ()))
    )
    return Options(node, peer, iface.name, ip, slaac, planned)


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


def client_argv(o: Options, family: int, scratch: Path, hook: Path) -> list[str]:
    """dhclient in the foreground with its own hook, lease and pid files (never the system's)."""
    tag = f"{o.node}-v{family}"
    return [
        "dhclient", f"-{family}", "-d", "-sf", str(hook),
        "-lf", str(scratch / f"dhclient-{tag}.leases"), "-pf", str(scratch / f"dhclient-{tag}.pid"),
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


def dynamic_addresses(tb: r.RouterTestbed, o: Options, family: int) -> list[dict[str, Any]]:
    """The interface's global addresses of `family` that are not the planned ones."""
    out = tb.run(o.node, ["ip", "-j", f"-{family}", "addr", "show", "dev", o.dev], check=False)
    planned = {a.split("/")[0] for a in o.planned}
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
    tb: r.RouterTestbed,
    o: Options,
    ip: int,
    server: dhcp_server.Options | None,
    target: str,
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
    p = r.ping(tb, o.node, tb.address(target, ip), ip, source=addr)
    evidence["ping"] = p
    if p["received"] < p["sent"]:
        failures.append(f"from {addr} to {target}: {p['received']}/{p['sent']} replies")
    return r.verdict(feature, ip, evidence, failures)
