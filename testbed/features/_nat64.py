"""What the two NAT64 features share: prefix and pool checks, the servers and clients."""

from __future__ import annotations

import ipaddress

from testbed.daemons.tayga import embed
from testbed.errors import SpecError
from testbed.features.base import Feature, NodeAddress, Option, Options

RFC6052_LENGTHS = (32, 40, 48, 56, 64, 96)
DEFAULT_PREFIX = "2001:db8:ffff::/96"
DEFAULT_POOL4 = "192.168.255.0/24"
WELL_KNOWN_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")

NAT64_OPTIONS = (
    Option("prefix", "the NAT64 prefix (RFC 6052 length /32../96)", DEFAULT_PREFIX),
    Option("pool4", "the IPv4 pool translated IPv6 clients get", DEFAULT_POOL4),
)


class Nat64(Feature):
    """IPv6-only clients reach IPv4-only servers at PREFIX+IPv4 through the router `node`."""

    node_role = "router"
    pool4_lengths: tuple[int, ...] = tuple(range(8, 33))

    def configure(self, opts: Options) -> None:
        router = self.node
        opts.need_stack(router, (4, 6), "the NAT64 translator needs IPv4 and IPv6")
        prefix = opts.network("prefix", 6, lengths=RFC6052_LENGTHS)
        assert isinstance(prefix, ipaddress.IPv6Network)
        if prefix.prefixlen < 96 and prefix.network_address.packed[8] != 0:
            raise opts.error("prefix", "bits 64-71 of the prefix must be zero", "RFC 6052, 2.2")
        pool4 = opts.network("pool4", 4, lengths=self.pool4_lengths)
        assert isinstance(pool4, ipaddress.IPv4Network)
        opts.no_overlap("prefix", prefix)
        opts.no_overlap("pool4", pool4)
        servers: list[tuple[str, str]] = []
        clients: list[str] = []
        for n in opts.topology.nodes:
            if n.name == router:
                continue
            if n.stack == "ipv4":
                for iface in opts.addresses.of(n.name):
                    v4 = iface.address(4)
                    if v4 is not None:
                        servers.append((n.name, v4))
                        break
            elif n.stack == "ipv6":
                clients.append(n.name)
        if not servers or not clients:
            raise SpecError(
                opts.file,
                "nodes",
                "NAT64 joins IPv6-only clients to IPv4-only servers; this topology has "
                f"{len(clients)} IPv6-only and {len(servers)} IPv4-only nodes",
                "at least one node with stack = 'ipv6' and one with stack = 'ipv4'",
            )
        self.prefix = str(prefix)
        self.pool4 = str(pool4)
        self.servers = tuple(servers)
        self.clients = tuple(clients)
        self.router_v4 = opts.address_of(router, 4, servers[0][0])
        self.router_v6 = opts.address_of(router, 6, clients[0])

    def synthesized(self, ipv4: str) -> str:
        return embed(self.prefix, ipv4)

    def addresses(self) -> list[NodeAddress]:
        """Each IPv4-only server is reached from IPv6 at PREFIX+IPv4 and listens on its IPv4."""
        return [NodeAddress(n, 6, self.synthesized(v4), bind=v4) for n, v4 in self.servers]
