"""DHCP relay feature: dnsmasq on a router forwards a link's DHCPv4/DHCPv6 to a remote server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from testbed.actions import Daemon
from testbed.api import Action, TestbedLike
from testbed.features import _router as r
from testbed.features.base import Feature, Option
from testbed.features.base import Options as FeatureOptions
from testbed.features.dhcp_server import DNSMASQ, DhcpServer, listening_67

KIND = "dhcp-relay"


@dataclass(frozen=True)
class Options:
    node: str
    host: str  # the link's other end (where the clients are)
    dev: str
    server: str
    relays: tuple[tuple[int, str, str], ...]  # (family, local address on the link, server address)


def parse(opts: FeatureOptions) -> Options:
    plan = opts.addresses
    node = opts.node
    host = opts.node_name("link")
    server = opts.node_name("server")
    if server == node:
        raise opts.error(
            "server", f"{node} cannot relay to itself", "another node running dhcp-server"
        )
    iface = opts.link(node, "link", host)
    relays = []
    for fam in opts.versions():
        local = r.iface_addr(iface, fam)
        try:
            remote = plan.address(server, fam)
        except KeyError:
            remote = None
        if local is None or remote is None:
            raise opts.error(
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


class DhcpRelay(r.RouterFeature):
    """dnsmasq relaying one link's DHCPv4 and DHCPv6 to a server elsewhere."""

    kind = KIND
    check_topology = "router-dhcp-relay"
    summary = "dnsmasq DHCP relay (DHCPv4 and DHCPv6) on a router, to a server elsewhere"
    node_role = "router"
    options = (
        Option("link", "the neighbour on the relayed link (where the clients are)"),
        Option("server", "the node running the dhcp-server for that link"),
        Option("ip", 'IP versions relayed: 4, 6 or "both"', "both"),
    )
    programs = (DNSMASQ,)
    cpu_processes = ("dnsmasq",)

    def configure(self, opts: FeatureOptions) -> None:
        self.o = parse(opts)

    def actions(self) -> list[Action]:
        ready = (listening_67(self.node),) if any(f == 4 for f, _l, _s in self.o.relays) else ()
        return [Daemon(self.node, tuple(argv(self.o)), "dnsmasq-relay", ready=ready)]

    def check(self, tb: TestbedLike, ip: int, others: Sequence[Feature]) -> r.CheckResult:
        """The relay's check is the relayed server's: its clients get leases through it."""
        if ip not in (f for f, _l, _s in self.o.relays):
            return r.not_supported(KIND, ip, f"the relay forwards IPv{ip} not")
        for f in others:
            if isinstance(f, DhcpServer) and f.o.link == (self.node, self.o.host):
                res = f.check(tb, ip, others)
                res.feature = KIND
                res.evidence["relayed_by"] = self.node
                return res
        return r.not_supported(KIND, ip, f"no dhcp-server serves the link to {self.o.host}")
