"""DNS64 (RFC 6147) with unbound on one node: IPv6-only clients resolve IPv4-only servers'
names to AAAA records synthesised inside a NAT64 prefix (compose it with a NAT64 feature)."""

from __future__ import annotations

from testbed.actions import Daemon, EtcFile, Listening, WriteFile, scratch
from testbed.api import Action
from testbed.daemons import unbound
from testbed.features._nat64 import DEFAULT_PREFIX, RFC6052_LENGTHS
from testbed.features.base import Feature, Option, Options, Program


class Dns64(Feature):
    """A zone server (A records of the IPv4-only nodes as NAME.DOMAIN) and a DNS64 resolver
    on `node`'s IPv6 address; each client's /etc/resolv.conf points at it."""

    kind = "dns64"
    summary = "DNS64 resolver (unbound) for IPv6-only clients; pair it with a NAT64 feature"
    options = (
        Option("prefix", "the NAT64 prefix AAAA records are synthesised in", DEFAULT_PREFIX),
        Option("domain", "the zone of the servers' names (NODE.DOMAIN)", "test"),
        Option("clients", "nodes that resolve through it (default: the IPv6-only nodes)", None),
        Option("servers", "nodes with A records (default: the IPv4-only nodes)", None),
    )
    programs = (Program("unbound", "unbound", ("unbound", "-V")),)

    def configure(self, opts: Options) -> None:
        self.prefix = str(opts.network("prefix", 6, lengths=RFC6052_LENGTHS))
        domain = opts.text("domain")
        if not all(part.isalnum() for part in domain.split(".")):
            raise opts.error("domain", f"bad domain {domain!r}", "e.g. test")
        self.domain = domain
        clients = (
            opts.node_names("clients")
            if opts.raw("clients") is not None
            else [n for n in opts.nodes_with_stack("ipv6") if n != self.node]
        )
        servers = (
            opts.node_names("servers")
            if opts.raw("servers") is not None
            else [n for n in opts.nodes_with_stack("ipv4") if n != self.node]
        )
        if not clients or not servers:
            raise opts.error(
                "clients" if not clients else "servers",
                f"DNS64 needs clients and servers; found clients {clients}, servers {servers}",
                "IPv6-only and IPv4-only nodes in the topology, or the options clients/servers",
            )
        opts.need_stack(self.node, (6,), "the DNS64 resolver listens on IPv6")
        self.clients = tuple(clients)
        self.records = {f"{n}.{domain}": opts.address_of(n, 4) for n in servers}
        self.listen = opts.address_of(self.node, 6, clients[0])

    def actions(self) -> list[Action]:
        n = self.node
        work = f"dns64-{n}"
        zones = unbound.zones_of(self.records)
        out: list[Action] = [
            WriteFile(
                f"{work}/unbound-zone.conf",
                unbound.zone_config(records=self.records, workdir=scratch(work)),
            ),
            Daemon(
                n,
                ("unbound", "-d", "-c", scratch(f"{work}/unbound-zone.conf")),
                "unbound-zone",
                ready=(Listening(n, "udp", (unbound.ZONE_ADDRESS,), unbound.ZONE_PORT),),
            ),
            WriteFile(
                f"{work}/unbound-dns64.conf",
                unbound.dns64_config(
                    listen=[self.listen], prefix=self.prefix, zones=zones, workdir=scratch(work)
                ),
            ),
            Daemon(
                n,
                ("unbound", "-d", "-c", scratch(f"{work}/unbound-dns64.conf")),
                "unbound-dns64",
                ready=(Listening(n, "udp", (self.listen,), 53),),
            ),
        ]
        for c in self.clients:
            out.append(
                EtcFile(
                    c,
                    "resolv.conf",
                    f"# written by testbed: DNS64 on {n}\n"
                    f"nameserver {self.listen}\nsearch {self.domain}\n",
                )
            )
        return out
