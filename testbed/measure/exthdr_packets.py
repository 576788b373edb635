"""IPv6 extension-header traffic (dobrinov-2016): packets built with scapy, a paced sender, and
the capture check that the headers really crossed the link.

Variants (`VARIANTS`): `none`; `hbh` (one Hop-by-Hop header); `four` (Hop-by-Hop, Routing
type 0 with nothing left to visit, an atomic Fragment header, Destination Options — the paper's
order); `dest20` (twenty Destination Options headers); `rh0` (Routing Header type 0 naming the
router as the next hop with one segment left: Linux drops it, RFC 5095); `srh` (a Segment
Routing header, type 4, RFC 8754: the router is the active segment and forwards to the final
one — today's equivalent; the router needs `seg6_enabled`, set per trial by `stress.sysctl_set`).

`echo4`/`echo6` are ICMP echo requests to the router itself (its ICMP load test), packed
with `struct` (`echo_bytes`): they run in the full-kernel tier, where importing scapy cost
8-18 s of guest time per trial against 2 s of echoes; a unit test holds them equal to scapy's.
The sender runs inside a node as `python -m testbed.measure.exthdr_packets send ...`: the
packet is built once, a raw socket (IPPROTO_RAW: the header is the packet's own) sends it paced.
`capture_chain` reads a pcap with scapy and names each packet's header chain.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any

from testbed.measure import probe

VARIANTS = ("none", "hbh", "four", "dest20", "rh0", "srh")
ECHO = ("echo4", "echo6")  # ICMP echo requests to the router itself (the ICMP load test)
# The header chain (scapy layer names between IPv6 and UDP) each variant must show on the wire
# beyond the router; rh0 never gets there.
EXPECTED: dict[str, tuple[str, ...]] = {
    "none": (),
    "hbh": ("IPv6ExtHdrHopByHop",),
    "four": ("IPv6ExtHdrHopByHop", "IPv6ExtHdrRouting", "IPv6ExtHdrFragment",
             "IPv6ExtHdrDestOpt"),
    "dest20": ("IPv6ExtHdrDestOpt",) * 20,
    "rh0": ("IPv6ExtHdrRouting",),
    "srh": ("IPv6ExtHdrSegmentRouting",),
}


def build(variant: str, src: str, dst: str, router: str, data: int, port: int = 9,
          ) -> Any:
    """The scapy packet of `variant` from `src` to `dst` (via `router` for rh0/srh) with
    `data` bytes of UDP data."""
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import (
        IPv6,
        IPv6ExtHdrDestOpt,
        IPv6ExtHdrFragment,
        IPv6ExtHdrHopByHop,
        IPv6ExtHdrRouting,
        IPv6ExtHdrSegmentRouting,
        PadN,
    )
    from scapy.packet import Raw

    udp = UDP(sport=port, dport=port) / Raw(b"\x5a" * data)
    if variant == "none":
        return IPv6(src=src, dst=dst, hlim=64) / udp
    if variant == "hbh":
        return IPv6(src=src, dst=dst, hlim=64) / IPv6ExtHdrHopByHop(
            options=[PadN(optdata=b"\x00" * 4)]) / udp
    if variant == "four":
        return (IPv6(src=src, dst=dst, hlim=64)
                / IPv6ExtHdrHopByHop(options=[PadN(optdata=b"\x00" * 4)])
                / IPv6ExtHdrRouting(type=0, segleft=0, addresses=[dst])
                / IPv6ExtHdrFragment(offset=0, m=0, id=0x1234)
                / IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\x00" * 4)]) / udp)
    if variant == "dest20":
        pkt: Any = IPv6(src=src, dst=dst, hlim=64)
        for _ in range(20):
            pkt = pkt / IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\x00" * 4)])
        return pkt / udp
    if variant == "rh0":
        return IPv6(src=src, dst=router, hlim=64) / IPv6ExtHdrRouting(
            type=0, segleft=1, addresses=[dst]) / udp
    if variant == "srh":
        # segment list in reverse order: [final destination, router]; the router is active
        return IPv6(src=src, dst=router, hlim=64) / IPv6ExtHdrSegmentRouting(
            addresses=[dst, router], segleft=1, lastentry=1) / udp
    raise ValueError(f"unknown packet variant {variant!r}: one of "
                     + ", ".join(VARIANTS) + " (" + ", ".join(ECHO) + ": echo_bytes)")


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of `data`."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return int(~total & 0xFFFF)


def echo_bytes(variant: str, src: str, router: str, data: int, ident: int = 9) -> bytes:
    """The IPv4 (`echo4`) or IPv6 (`echo6`) packet of an ICMP echo request from `src` to
    `router` with `data` bytes of data (0x5a), sequence 1: the bytes scapy's
    IP()/ICMP() or IPv6()/ICMPv6EchoRequest() would give."""
    payload = b"\x5a" * data
    if variant == "echo4":
        icmp = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + payload
        icmp = icmp[:2] + struct.pack("!H", _checksum(icmp)) + icmp[4:]
        addrs = socket.inet_pton(socket.AF_INET, src) + socket.inet_pton(socket.AF_INET, router)
        head = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(icmp), 1, 0, 64, 1, 0) + addrs
        head = head[:10] + struct.pack("!H", _checksum(head)) + head[12:]
        return head + icmp
    if variant == "echo6":
        s6, d6 = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, router)
        icmp = struct.pack("!BBHHH", 128, 0, 0, ident, 1) + payload
        pseudo = s6 + d6 + struct.pack("!I3xB", len(icmp), 58)
        icmp = icmp[:2] + struct.pack("!H", _checksum(pseudo + icmp)) + icmp[4:]
        return struct.pack("!IHBB", 6 << 28, len(icmp), 58, 64) + s6 + d6 + icmp
    raise ValueError(f"unknown echo variant {variant!r}: one of {', '.join(ECHO)}")


def data_for_frame(variant: str, frame_size: int) -> int:
    """UDP data bytes that make the variant's packet an Ethernet frame of `frame_size` bytes
    (header and FCS included; the paper used 1280-byte frames to leave room for the headers)."""
    addr = "2001:db8::1"
    empty = len(bytes(build(variant, addr, addr, addr, 0)))
    data = frame_size - 18 - empty
    if data < 0:
        raise ValueError(f"a {frame_size}-byte frame cannot hold the {variant} headers "
                         f"({empty + 18} bytes without data)")
    return data


def chain_of(pkt: Any) -> tuple[str, ...]:
    """Names of the layers between the IPv6 header and the upper-layer header of `pkt`."""
    names = []
    layer = pkt.getlayer("IPv6")
    if layer is None:
        return ()
    layer = layer.payload
    while layer is not None and layer.name != "NoPayload":
        cls = type(layer).__name__
        if not cls.startswith("IPv6ExtHdr"):
            break
        names.append(cls)
        layer = layer.payload
    return tuple(names)


def capture_chain(pcap: str) -> list[dict[str, Any]]:
    """Each captured IPv6 packet's header chain, destination and (SRH) segments left."""
    import importlib

    from scapy.utils import rdpcap

    for layers in ("scapy.layers.l2", "scapy.layers.inet6"):  # so that the pcap decodes
        importlib.import_module(layers)

    out = []
    for pkt in rdpcap(pcap):
        ip6 = pkt.getlayer("IPv6")
        if ip6 is None or not pkt.haslayer("UDP"):  # ND, MLD, ICMPv6 errors: not ours
            continue
        doc: dict[str, Any] = {"chain": list(chain_of(pkt)), "dst": ip6.dst}
        srh = pkt.getlayer("IPv6ExtHdrSegmentRouting")
        if srh is not None:
            doc["segleft"] = int(srh.segleft)
        out.append(doc)
    return out


def schedstat(pids: Sequence[int]) -> list[list[int]]:
    """[run ns, wait ns, timeslices] of each pid (`probe.schedstat`; zeros once it is gone)."""
    return [probe.schedstat(pid) or [0, 0, 0] for pid in pids]


def send(variant: str, src: str, dst: str, router: str, data: int, pps: float,
         duration_s: float, burst: int = 1, watch: Sequence[int] = (),
         chunks: int = 20, align_s: float = 0.0) -> dict[str, Any]:
    """Send round(pps * duration) copies of the variant's packet, paced, from a raw socket,
    `burst` back to back at a time (the same average rate: a burst wakes the router's receive
    thread once, so its per-packet work is less buried under wake-ups).

    `watch`: thread ids (the router's receive threads) whose schedstat is read before the first
    packet, at the start of each of `chunks` equal parts of the schedule, and one period after
    the last packet — the router's run time over the traffic itself, in parts.

    `align_s`: start on the next whole multiple of it on the monotonic clock, with a timer slack
    of 1 ns (`pingpong_probe.precise_sleep`). On the virtual clock the guest's tick runs on
    that clock's grid, so the schedule then meets it at the same phase in every trial: at
    100 echoes/s which requests shared the router's CPU with a tick moved a cell's cost per echo
    by up to 3 % between repetitions."""
    if variant in ECHO:
        raw, chain = echo_bytes(variant, src, router, data), []
    else:
        pkt = build(variant, src, dst, router, data)
        raw, chain = bytes(pkt), list(chain_of(pkt))
    first_hop = router if variant in ("rh0", "srh", *ECHO) else dst
    family = socket.AF_INET if variant == "echo4" else socket.AF_INET6
    s = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW)
    total = max(1, round(pps * duration_s))
    errors = 0
    burst = max(1, int(burst))
    pids = [int(p) for p in watch]
    parts = max(1, min(int(chunks), total)) if pids else 0
    marks = {round(k * total / parts) for k in range(1, parts)} if parts else set()
    samples: list[list[Any]] = []
    if align_s > 0:
        from testbed.measure.pingpong_probe import precise_sleep

        precise_sleep()
        probe.sleep_to_grid(align_s)
    t0 = time.perf_counter()
    if pids:
        samples.append([0.0, 0, schedstat(pids)])
    max_lag = 0.0  # the furthest behind its schedule it fell (it catches up in a burst)
    for i in range(total):
        if i % burst == 0:
            due = t0 + i / pps
            wait = due - time.perf_counter()
            if wait > 0:  # on schedule: a late wake-up sends the next ones at once, never spins
                time.sleep(wait)
            else:
                max_lag = max(max_lag, -wait)
        if i in marks:
            samples.append([time.perf_counter() - t0, i, schedstat(pids)])
        try:
            s.sendto(raw, (first_hop, 0))
        except OSError:
            errors += 1
    elapsed = time.perf_counter() - t0
    if pids:  # one more period: the last request's reply is sent before the final reading
        time.sleep(max(0.0, t0 + total / pps - time.perf_counter()))
        samples.append([time.perf_counter() - t0, total, schedstat(pids)])
    s.close()
    doc: dict[str, Any] = {
        "variant": variant, "attempted": total, "errors": errors, "elapsed_s": elapsed,
        "max_lag_s": max_lag,
        "achieved_pps": (total - 1) / elapsed if elapsed > 0 and total > 1 else pps,
        "offered_pps": pps, "ip_bytes": len(raw), "frame_bytes": len(raw) + 18,
        "burst": burst, "chain": chain, "aligned_s": align_s}
    if pids:
        doc["watch"] = {"pids": pids, "fields": ["seconds", "sent", "schedstat per pid: run ns, "
                                                 "wait ns, timeslices"],
                        "samples": samples}
    return doc


def send_argv(python: str, *, variant: str, src: str, dst: str, router: str, data: int,
              pps: float, duration_s: float, burst: int = 1,
              watch: Sequence[int] = (), align_s: float = 0.0) -> list[str]:
    argv = [python, "-m", "testbed.measure.exthdr_packets", "send", "--variant", variant,
            "--src", src, "--dst", dst, "--router", router, "--data", str(data),
            "--pps", f"{pps:.9g}", "--duration", f"{duration_s:g}", "--burst", str(burst)]
    for pid in watch:
        argv += ["--watch", str(int(pid))]
    if align_s > 0:
        argv += ["--align", f"{align_s:g}"]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbed.measure.exthdr_packets")
    p.add_argument("role", choices=("send", "chain"))
    p.add_argument("--variant", choices=VARIANTS + ECHO, default="hbh")
    p.add_argument("--src", default="")
    p.add_argument("--dst", default="")
    p.add_argument("--router", default="")
    p.add_argument("--data", type=int, default=100)
    p.add_argument("--pps", type=float, default=1000.0)
    p.add_argument("--duration", type=float, default=1.0)
    p.add_argument("--burst", type=int, default=1)
    p.add_argument("--pcap", default="")
    p.add_argument("--watch", type=int, action="append", default=[],
                   help="a thread id whose schedstat is read over the traffic (repeatable)")
    p.add_argument("--align", type=float, default=0.0,
                   help="start on the next whole multiple of this many seconds")
    a = p.parse_args(argv)
    if a.role == "send":
        doc: Any = send(a.variant, a.src, a.dst, a.router, a.data, a.pps, a.duration, a.burst,
                        a.watch, align_s=a.align)
    else:
        doc = capture_chain(a.pcap)
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
