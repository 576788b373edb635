"""ping latency: argv with sizes derived from Ethernet frame sizes, and a pure text parser."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

# Ethernet header (14) + FCS (4): what a frame size counts beyond the IP packet.
ETH_HEADER_FCS = 18
IP_HEADER = {4: 20, 6: 40}
ICMP_HEADER = 8
UDP_HEADER = 8

# RFC 2544 section 9.1 frame sizes; RFC 5180 adds 1522 (tagged) and jumbo frames for IPv6.
RFC2544_FRAME_SIZES: tuple[int, ...] = (64, 128, 256, 512, 1024, 1280, 1518)
RFC5180_EXTRA_FRAME_SIZES: tuple[int, ...] = (1522, 9018)

# gometz-2015: "A stream of 120 frames of the aforementioned sizes".
GOMETZ_ECHOES = 120


def icmp_data_size(frame_size: int, ip: int) -> int:
    """`ping -s` data size whose echo request fills an Ethernet frame of `frame_size` bytes."""
    size = frame_size - ETH_HEADER_FCS - IP_HEADER[ip] - ICMP_HEADER
    if size < 0:
        raise ValueError(f"a {frame_size}-byte frame cannot carry an IPv{ip} echo request")
    return size


def udp_data_size(frame_size: int, ip: int) -> int:
    """UDP data length whose datagram fills an Ethernet frame of `frame_size` bytes (no padding)."""
    size = frame_size - ETH_HEADER_FCS - IP_HEADER[ip] - UDP_HEADER
    if size < 0:
        raise ValueError(f"a {frame_size}-byte frame cannot carry an IPv{ip} UDP datagram")
    return size


def ping_argv(
    dest: str, *, ip: int, size: int, count: int = GOMETZ_ECHOES, interval_s: float = 0.01,
    timeout_s: float = 1.0,
) -> list[str]:
    """argv of `ping` sending `count` echoes of `size` data bytes; -n so nothing is resolved."""
    return ["ping", f"-{ip}", "-n", "-c", str(count), "-s", str(size),
            "-i", f"{interval_s:g}", "-W", f"{timeout_s:g}", dest]


@dataclass(frozen=True)
class PingResult:
    """Round-trip times (ms) of one ping run and its loss."""

    transmitted: int
    received: int
    loss_percent: float
    rtts_ms: tuple[float, ...]
    min_ms: float | None
    avg_ms: float | None
    max_ms: float | None
    mdev_ms: float | None
    reply_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rtts_ms"] = list(self.rtts_ms)
        return d


_REPLY = re.compile(r"^(\d+) bytes from .*?icmp_seq=(\d+).*? time=([\d.]+) ms", re.M)
_STATS = re.compile(
    r"(\d+) packets transmitted, (\d+) (?:packets )?received.*?([\d.]+)% packet loss"
)
_RTT = re.compile(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")


def parse_ping(text: str) -> PingResult:
    """Parse iputils `ping` output: every reply's time, and the summary lines."""
    stats = _STATS.search(text)
    if not stats:
        raise ValueError("no 'packets transmitted' summary in ping output")
    replies = _REPLY.findall(text)
    rtt = _RTT.search(text)
    vals = [float(v) for v in rtt.groups()] if rtt else [None] * 4
    return PingResult(
        transmitted=int(stats.group(1)),
        received=int(stats.group(2)),
        loss_percent=float(stats.group(3)),
        rtts_ms=tuple(float(r[2]) for r in replies),
        min_ms=vals[0],
        avg_ms=vals[1],
        max_ms=vals[2],
        mdev_ms=vals[3],
        reply_bytes=int(replies[0][0]) if replies else None,
    )
