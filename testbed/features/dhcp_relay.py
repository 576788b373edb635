"""DHCP relay feature: dnsmasq on a router forwards a link's DHCPv4/DHCPv6 to a remote server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from testbed.addressing import AddressPlan
from testbed.features import _router as r

KIND = "dhcp-relay"
OPTIONS = ("kind", "node", "link", "server", "ip")


@dataclass(frozen=True)
class Options:
    node: str
    host: str  # the link's other end (where the clients are)
    dev: str
    server: str
    relays: tuple[tuple[int, str, str], ...]  # (family, local address on the link, server address)


def parse(w: r.Where, table: Mapping[str, Any], plan: AddressPlan, nodes: Sequence[str]) -> Options:
    r.check_keys(w, table, OPTIONS)
    node = r.node_opt(w, table, "node", nodes)
    host = r.node_opt(w, table, "link", nodes)
    server = r.node_opt(w, table, "server", nodes)
    if server == node:
        raise w.error(
            "server", f"{node} cannot relay to itself", "another node running dhcp-server"
        )
    iface = r.link_iface(w, plan, node, "link", host)
    relays = []
    for fam in r.versions_opt(w, table):
        local = r.iface_addr(iface, fam)
        try:
            remote = plan.address(server, fam)
        except KeyError:
            remote = None
        if local is None or remote is None:
            raise w.error(
                "ip", f"IPv{fam} needs addresses on {node}'s link and on {server}", "ip = [4]"
            )
        relays.append((fam, local, remote))
    return Options(node, host, iface.name, server, tuple(relays))


def argv(o: Options) -> list[str]:
    """dnsmasq as a relay only: `--dhcp-relay=LOCAL,SERVER` per version (DHCPv4 sets giaddr =
    LOCAL; DHCPv6 wraps the client's message in Relay-Forward with link-address = LOCAL)."""
    a = [
        "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
        "--user=root", "--pid-file", "--log-facility=-", "--log-dhcp",
        f"--interface={o.dev}",
    ]  # fmt: skip
    a += [f"--dhcp-relay={local},{remote}" for _fam, local, remote in o.relays]
    return a


def describe(o: Options) -> list[str]:
    how = ", ".join(f"IPv{f} {local} -> {remote}" for f, local, remote in o.relays)
    return [f"{o.node}: dnsmasq DHCP relay on {o.dev} (link to {o.host}) to {o.server}: {how}"]
