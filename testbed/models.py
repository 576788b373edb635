"""The analytic models: Gamess-Morales TTFS, throughput and OWD, plus 6to4, ISATAP and NAT64."""

# Units: payloads and frames in bytes, bit rates in bit/s, times in seconds.
# The derivation, with worked numbers and every assumption, is in docs/models.md.

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from testbed import units

# --- Ethernet, as the paper counts it (section III) ------------------------------------------
IFG: Final = 12  # inter-frame gap
PREAMBLE: Final = 7
SFD: Final = 1
ETH_HEADER_FCS: Final = 18  # 14-byte header + 4-byte FCS
WIRE_OVERHEAD: Final = IFG + PREAMBLE + SFD + ETH_HEADER_FCS  # 38 bytes per frame
ETH_MIN_PAYLOAD: Final = 46  # shorter IP packets are padded up to this
ETH_MTU: Final = 1500

IPV4_HEADER: Final = 20
IPV6_HEADER: Final = 40
IPV6_FRAGMENT_HEADER: Final = 8
TUNNEL_MTU: Final = ETH_MTU - IPV4_HEADER  # 1480: the IPv6 MTU of a 6to4/ISATAP (sit) tunnel

MECHANISMS: Final = ("native", "6to4", "isatap", "nat64")

RATES: Final[dict[str, float]] = {k: v for k, v in units.RATE_PRESETS.items() if v is not None}

DEFAULT_PROPAGATION_S: Final = 30e-6  # the paper's measured pi


@dataclass(frozen=True)
class LinkFormat:
    """How one link carries the packet: IP header bytes in every frame, plus fragment extras."""

    name: str
    header: int  # IP header bytes in every frame (outer + inner for a tunnel)
    fragment_header: int  # extra bytes in each frame when the packet is fragmented

    def frame_payload(self, chunk: int, fragmented: bool) -> int:
        """Bytes of Ethernet payload for `chunk` bytes of data, before padding."""
        return self.header + (self.fragment_header if fragmented else 0) + chunk

    def wire_bytes(self, chunk: int, fragmented: bool) -> int:
        """Bytes on the wire (IFG, preamble, SFD, header, FCS, padding) for one frame."""
        return WIRE_OVERHEAD + max(ETH_MIN_PAYLOAD, self.frame_payload(chunk, fragmented))


IPV4: Final = LinkFormat("IPv4", IPV4_HEADER, 0)
IPV6: Final = LinkFormat("IPv6", IPV6_HEADER, IPV6_FRAGMENT_HEADER)
IPV6_IN_IPV4: Final = LinkFormat("IPv6-in-IPv4", IPV4_HEADER + IPV6_HEADER, IPV6_FRAGMENT_HEADER)


@dataclass(frozen=True)
class FragmentLayout:
    """How the sender splits n bytes: `count` fragments of `size` bytes, the last of `last`."""

    count: int  # 1 when the packet is not fragmented
    size: int  # data bytes in every fragment but the last (n when not fragmented)
    last: int  # m: data bytes in the last fragment (n when not fragmented)

    @property
    def fragmented(self) -> bool:
        return self.count > 1

    @property
    def chunks(self) -> tuple[int, ...]:
        """Data bytes of each fragment, in order."""
        return (self.size,) * (self.count - 1) + (self.last,)


@dataclass(frozen=True)
class _Sender:
    """The fragmenting end: the IP MTU it sees and the header its fragments carry."""

    mtu: int  # largest IP packet (of the sender's own family) it may send
    header: int
    fragment_header: int
    max_payload: int  # largest payload the protocol can express


def _check_ip(ip: int, mechanism: str) -> None:
    if mechanism not in MECHANISMS:
        raise ValueError(
            f"unknown mechanism {mechanism!r}; expected one of {', '.join(MECHANISMS)}"
        )
    if ip not in (4, 6):
        raise ValueError(f"ip must be 4 or 6, not {ip!r}")
    if mechanism != "native" and ip != 6:
        what = "carries IPv6 inside IPv4" if mechanism != "nat64" else "models an IPv6 sender"
        raise ValueError(f"{mechanism} {what}: use ip=6 (the sender's IP version)")


def _sender(ip: int, mechanism: str) -> _Sender:
    _check_ip(ip, mechanism)
    if ip == 4:
        return _Sender(ETH_MTU, IPV4_HEADER, 0, 65535 - IPV4_HEADER)
    if mechanism in ("6to4", "isatap"):
        # The host's tunnel interface has MTU 1480, so it fragments IPv6 to fit 1480.
        return _Sender(TUNNEL_MTU, IPV6_HEADER, IPV6_FRAGMENT_HEADER, 65535)
    if mechanism == "nat64":
        # The IPv6 host fragments for its own 1500-byte link; the translator turns each IPv6
        # fragment into one IPv4 fragment, and the whole datagram must fit IPv4's 16-bit length.
        return _Sender(ETH_MTU, IPV6_HEADER, IPV6_FRAGMENT_HEADER, 65535 - IPV4_HEADER)
    return _Sender(ETH_MTU, IPV6_HEADER, IPV6_FRAGMENT_HEADER, 65535)


def _check_payload(n: int, ip: int, mechanism: str) -> _Sender:
    sender = _sender(ip, mechanism)
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"payload must be a whole number of bytes, not {n!r}")
    if not 1 <= n <= sender.max_payload:
        where = f"IPv{ip}" if mechanism == "native" else f"IPv{ip} over {mechanism}"
        raise ValueError(
            f"payload {n} bytes is out of range for {where}: 1..{sender.max_payload} bytes"
        )
    return sender


def _check_rate(bitrate_bps: float) -> None:
    if not (math.isfinite(bitrate_bps) and bitrate_bps > 0):
        raise ValueError(f"bit rate must be a positive number of bit/s, not {bitrate_bps!r}")


FRAGMENTERS: Final = ("paper", "linux")
"""How a sender cuts fragments: "paper", equation (6): the last fragment may fill the MTU (the
paper's senders sent 2900 B of IPv6 in two frames); "linux", a Linux UDP socket: every
fragment a multiple of 8 bytes, the last too (ip6_append_data cuts them before
fragmenting), so 2897-2900 B of IPv6 (native or to a NAT64) take three frames, not two
(and so on: the last 4 bytes below each further multiple of 1448)."""


def fragment_layout(n: int, ip: int, mechanism: str = "native",
                    fragmenter: str = "paper") -> FragmentLayout:
    """Split n bytes of IP payload as the sender does.

    Unfragmented up to MTU - header (IPv4 1480, IPv6 1460, IPv6 in a tunnel 1440). Beyond, every
    fragment but the last carries the largest multiple of 8 that fits with the fragment header
    (IPv4 1480, IPv6 1448, tunnelled IPv6 1432); the last may fill the MTU (IPv6: 1452), as in the
    paper's equation (6), or is cut like the others (`fragmenter="linux"`, see `FRAGMENTERS`).
    """
    s = _check_payload(n, ip, mechanism)
    if fragmenter not in FRAGMENTERS:
        raise ValueError(f"fragmenter must be one of {', '.join(FRAGMENTERS)}, not {fragmenter!r}")
    if n <= s.mtu - s.header:
        return FragmentLayout(1, n, n)
    last_max = s.mtu - s.header - s.fragment_header
    size = last_max // 8 * 8
    if fragmenter == "linux":
        last_max = size
    count = 1 + -(-(n - last_max) // size)
    return FragmentLayout(count, size, n - size * (count - 1))


def link_formats(ip: int, mechanism: str = "native") -> tuple[LinkFormat, LinkFormat]:
    """The format on the sender's side and on the far side of the boundary router."""
    _check_ip(ip, mechanism)
    if mechanism == "native":
        fmt = IPV4 if ip == 4 else IPV6
        return fmt, fmt
    if mechanism == "6to4":
        return IPV6_IN_IPV4, IPV6_IN_IPV4
    if mechanism == "isatap":
        return IPV6_IN_IPV4, IPV6
    return IPV6, IPV4  # nat64


def frame_bytes(n: int, ip: int, mechanism: str = "native", side: int = 0,
                fragmenter: str = "paper") -> tuple[int, ...]:
    """Wire bytes of each frame (padding, IFG, preamble, SFD, header, FCS) on one side of the path.

    side 0 is the sender's side; side 1 the far side of the ISATAP router or NAT64 translator
    (the same format as side 0 for native and 6to4). `fragmenter`: see `FRAGMENTERS`.
    """
    if side not in (0, 1):
        raise ValueError(f"side must be 0 (sender's side) or 1 (far side), not {side!r}")
    layout = fragment_layout(n, ip, mechanism, fragmenter)
    fmt = link_formats(ip, mechanism)[side]
    return tuple(fmt.wire_bytes(c, layout.fragmented) for c in layout.chunks)


def ttfs(n: int, bitrate_bps: float, ip: int, mechanism: str = "native", side: int = 0,
         fragmenter: str = "paper") -> float:
    """Total Time For Serialization (s) of n bytes of IP payload, equations (1)-(6)."""
    _check_rate(bitrate_bps)
    return sum(frame_bytes(n, ip, mechanism, side, fragmenter)) * 8 / bitrate_bps


def max_throughput_bps(n: int, bitrate_bps: float, ip: int, mechanism: str = "native",
                       fragmenter: str = "paper") -> float:
    """Maximum throughput (bit/s of IP payload), equation (7), at the path's bottleneck side.

    `fragmenter="linux"` for what a Linux sender can carry (see `FRAGMENTERS`)."""
    worst = max(ttfs(n, bitrate_bps, ip, mechanism, side, fragmenter) for side in (0, 1))
    return n * 8 / worst


def default_first_side_links(mechanism: str, routers: int) -> int:
    """Links from the sender to the ISATAP router / NAT64 translator (R1, as in Quintero 2016)."""
    if mechanism in ("native", "6to4"):
        return routers + 1
    return 1


def hop_formats(
    ip: int, mechanism: str, routers: int, first_side_links: int | None = None
) -> tuple[LinkFormat, ...]:
    """The format on each of the routers + 1 links, from the sender to the receiver."""
    if isinstance(routers, bool) or not isinstance(routers, int) or routers < 0:
        raise ValueError(f"routers must be a whole number >= 0, not {routers!r}")
    first, second = link_formats(ip, mechanism)
    links = routers + 1
    if first_side_links is None:
        first_side_links = default_first_side_links(mechanism, routers)
    if mechanism == "nat64":
        if routers < 1:
            raise ValueError("nat64 needs at least one router: the translator")
        lo, hi = 1, routers
    elif mechanism == "isatap":
        lo, hi = 1, links  # `links` means host-to-host ISATAP: every link tunnelled
    else:
        lo, hi = links, links
    if not lo <= first_side_links <= hi:
        raise ValueError(
            f"first_side_links={first_side_links} is impossible for {mechanism} "
            f"with {routers} router(s): allowed {lo}..{hi}"
        )
    return (first,) * first_side_links + (second,) * (links - first_side_links)


def _check_propagation(propagation_s: float) -> None:
    if not (math.isfinite(propagation_s) and propagation_s >= 0):
        raise ValueError(f"propagation time must be >= 0 s, not {propagation_s!r}")


def hop_serialization(
    n: int,
    bitrate_bps: float,
    ip: int,
    routers: int,
    mechanism: str = "native",
    first_side_links: int | None = None,
) -> tuple[float, ...]:
    """Equation (9)'s serialization terms, per link: all of TTFS(n) on the first, then m's frame."""
    _check_rate(bitrate_bps)
    layout = fragment_layout(n, ip, mechanism)
    formats = hop_formats(ip, mechanism, routers, first_side_links)
    first = sum(formats[0].wire_bytes(c, layout.fragmented) for c in layout.chunks)
    rest = [f.wire_bytes(layout.last, layout.fragmented) for f in formats[1:]]
    return tuple(b * 8 / bitrate_bps for b in (first, *rest))


def owd(
    n: int,
    bitrate_bps: float,
    ip: int,
    routers: int,
    propagation_s: float = DEFAULT_PROPAGATION_S,
    mechanism: str = "native",
    first_side_links: int | None = None,
) -> float:
    """One-way delay (s), equation (9): TTFS(n, B) + p * TTFS(m, B) + pi * (p + 1).

    m's term is the last fragment's own frame (with the IPv6 fragment header when fragmented).
    Per link, in the format that link carries. Equal to equation (10) when n is not fragmented.
    """
    _check_propagation(propagation_s)
    hops = hop_serialization(n, bitrate_bps, ip, routers, mechanism, first_side_links)
    return sum(hops) + propagation_s * (routers + 1)


def store_and_forward_owd(
    n: int,
    bitrate_bps: float,
    ip: int,
    routers: int,
    propagation_s: float = DEFAULT_PROPAGATION_S,
    mechanism: str = "native",
    first_side_links: int | None = None,
) -> float:
    """One-way delay (s) of an in-order store-and-forward pipeline of fragments (not in the paper).

    Each router starts a fragment when it has received it and its link is free. For a
    fragmented packet a router then adds its largest fragment's serialization, not the last
    fragment's as equation (9) assumes; unfragmented, both are equation (10).
    """
    _check_rate(bitrate_bps)
    _check_propagation(propagation_s)
    layout = fragment_layout(n, ip, mechanism)
    formats = hop_formats(ip, mechanism, routers, first_side_links)
    arrivals: Sequence[float] = [0.0] * layout.count  # when each fragment is ready to send
    for fmt in formats:
        done: list[float] = []
        free = 0.0
        for ready, chunk in zip(arrivals, layout.chunks, strict=True):
            free = max(ready, free) + fmt.wire_bytes(chunk, layout.fragmented) * 8 / bitrate_bps
            done.append(free)
        arrivals = [t + propagation_s for t in done]
    return arrivals[-1]


