"""TAYGA, the userspace stateless NAT64 on a tun device: its config and addresses (RFC 6052)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class TaygaConfig:
    """What TAYGA needs: its tun device, its own addresses, the NAT64 prefix and the pool."""

    device: str
    ipv4_addr: str
    prefix: str
    dynamic_pool: str
    ipv6_addr: str | None = None  # None: TAYGA maps ipv4_addr into the prefix itself

    def text(self, data_dir: str | None = None) -> str:
        lines = [
            "# written by testbed (testbed/daemons/tayga.py)",
            f"tun-device {self.device}",
            f"ipv4-addr {self.ipv4_addr}",
            f"prefix {self.prefix}",
            f"dynamic-pool {self.dynamic_pool}",
        ]
        if self.ipv6_addr is not None:
            lines.append(f"ipv6-addr {self.ipv6_addr}")
        if data_dir:
            lines.append(f"data-dir {data_dir}")
        return "\n".join(lines) + "\n"


def tayga_addresses(prefix: str, pool4: str) -> tuple[str, str]:
    """TAYGA's own IPv4 address (the pool's first host, which TAYGA then leaves out of the
    pool) and its IPv6 address (that IPv4 address inside the prefix: TAYGA derives it itself
    when the config names a prefix, and refuses an explicit ipv6-addr inside the prefix)."""
    pool = ipaddress.IPv4Network(pool4)
    v4 = pool.network_address + 1
    return str(v4), embed(prefix, str(v4))


def embed(prefix: str, ipv4: str) -> str:
    """RFC 6052: an IPv4 address inside an IPv6 prefix of length 32, 40, 48, 56, 64 or 96."""
    net = ipaddress.IPv6Network(prefix)
    v4 = int(ipaddress.IPv4Address(ipv4)).to_bytes(4, "big")
    raw = bytearray(net.network_address.packed)
    pos = net.prefixlen // 8
    for b in v4:
        if pos == 8:  # bits 64-71 (the "u" octet) stay zero
            pos += 1
        raw[pos] = b
        pos += 1
    return str(ipaddress.IPv6Address(bytes(raw)))
