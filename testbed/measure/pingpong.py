"""Ping-pong one-way-delay probe (quintero-2016, gamess-morales): run with `python -m`, prints JSON.

A fixed-size UDP or TCP (TCP_NODELAY) message goes back and forth N times; the client stamps each
exchange with its own clock, so OWD = RTT / 2 needs no clock synchronisation. `summarize_owd` is
the pure part: RFC 8219 names (typical latency = median, worst case = 99.9th percentile) and
packet delay variation.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from testbed.measure import probe

MODULE = "testbed.measure.pingpong"

SEQ_BYTES = 8  # a message starts with its sequence number (fewer bytes in tiny messages)


def pack_seq(seq: int, size: int) -> bytes:
    """A `size`-byte message starting with `seq` (modulo what fits when size < 8)."""
    k = min(size, SEQ_BYTES)
    return (seq % (1 << (8 * k))).to_bytes(k, "big") + b"\x5a" * (size - k)


def unpack_seq(data: bytes, size: int) -> int:
    """The sequence number at the start of a message, as `pack_seq` wrote it."""
    return int.from_bytes(data[: min(size, SEQ_BYTES)], "big")


PR_SET_TIMERSLACK = 29


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask; the guest's vCPUs in the VM tier)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose_mode(busy_poll: bool, spinners: int, cpus: int | None = None) -> tuple[bool, str]:
    """Whether to busy-poll, and why: spin only when asked and the spinners fit on the CPUs.

    Spinners that outnumber the CPUs get the CPU only at scheduler ticks: every exchange then
    costs a tick (4 ms at 250 Hz) whatever the network does, so the probe blocks instead.
    """
    n = available_cpus() if cpus is None else cpus
    if not busy_poll:
        return False, "blocking: busy_poll = false"
    if spinners > n:
        return False, f"blocking: {spinners} spinning processes would outnumber {n} CPU(s)"
    return True, f"busy-poll: {spinners} spinning processes on {n} CPU(s)"


def precise_sleep() -> None:
    """Ask the kernel to wake this process on time (timer slack 1 ns instead of 50 µs)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


def argv(
    python: str, role: str, *, host: str, port: int, protocol: str = "udp", size: int = 64,
    count: int = 1000, busy_poll: bool = True, timeout_s: float = 1.0, warmup: int = 10,
) -> list[str]:
    """argv that runs this probe as `role` ("server" or "client")."""
    opts: dict[str, Any] = {"protocol": protocol, "size": size}
    if role == "client":
        opts |= {"count": count, "timeout": float(timeout_s), "warmup": warmup}
    opts["busy_poll"] = busy_poll
    return probe.argv(python, MODULE, role, host=host,
                      port=port, options=opts)


def percentile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of an already sorted sequence."""
    if not sorted_vals:
        return math.nan
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize_owd(rtts_ns: Sequence[int]) -> dict[str, float]:
    """OWD statistics in microseconds from round-trip times in nanoseconds (OWD = RTT/2).

    pdv_*: RFC 5481 packet delay variation, each delay minus the minimum (99th/99.9th percentile);
    ipdv_mean_us: mean absolute difference between consecutive delays (RFC 3393 style).
    """
    owd = [r / 2000.0 for r in rtts_ns]
    if not owd:
        return {"n": 0}
    s = sorted(owd)
    n = len(s)
    mean = sum(s) / n
    ipdv = [abs(b - a) for a, b in itertools.pairwise(owd)]
    return {
        "n": n,
        "mean_us": mean,
        "min_us": s[0],
        "max_us": s[-1],
        "median_us": percentile(s, 50),
        "p99_us": percentile(s, 99),
        "p999_us": percentile(s, 99.9),
        "stdev_us": math.sqrt(sum((v - mean) ** 2 for v in s) / (n - 1)) if n > 1 else 0.0,
        "typical_latency_us": percentile(s, 50),
        "worst_case_latency_us": percentile(s, 99.9),
        "pdv_p99_us": percentile(s, 99) - s[0],
        "pdv_p999_us": percentile(s, 99.9) - s[0],
        "ipdv_mean_us": sum(ipdv) / len(ipdv) if ipdv else 0.0,
    }


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _recv_exact(sock: socket.socket, n: int, busy: bool, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError from None
            continue
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return bytes(buf)


def serve(host: str, port: int, protocol: str, size: int, busy: bool) -> int:
    """Echo every message back until killed (UDP) or the client closes (TCP)."""
    precise_sleep()
    fam = _family(host)
    if protocol == "udp":
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.setblocking(not busy)
        while True:
            try:
                data, peer = s.recvfrom(65535)
            except BlockingIOError:
                continue
            s.sendto(data, peer)
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(4)
    while True:
        conn, _ = ls.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setblocking(not busy)
        try:
            while True:
                msg = _recv_exact(conn, size, busy, math.inf)
                conn.sendall(msg)
        except (ConnectionError, OSError):
            conn.close()


def client(
    host: str, port: int, protocol: str, size: int, count: int, busy: bool, timeout_s: float,
    warmup: int,
) -> dict[str, Any]:
    """Exchange `count` messages (after `warmup` untimed ones) and return the JSON document."""
    precise_sleep()
    fam = _family(host)
    if size < 1:
        raise ValueError("message size must be at least 1 byte")
    k = min(size, SEQ_BYTES)
    modulo = 1 << (8 * k)
    rtts: list[int] = []
    lost = 0
    if protocol == "udp":
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.connect((host, port))
    else:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(timeout_s * 5)
        s.connect((host, port))
    if busy:
        s.setblocking(False)
    else:
        s.settimeout(timeout_s)
    clock = time.perf_counter_ns
    for seq in range(warmup + count):
        msg = pack_seq(seq, size)
        deadline = time.monotonic() + timeout_s
        t0 = clock()
        if protocol == "udp":
            s.send(msg)
            got = -1
            while got != seq % modulo:
                try:
                    data = s.recv(65535)
                except (BlockingIOError, InterruptedError):
                    if time.monotonic() > deadline:
                        break
                    continue
                except TimeoutError:
                    break
                got = unpack_seq(data, size)
            t1 = clock()
            if got != seq % modulo:
                if seq >= warmup:
                    lost += 1
                continue
        else:
            s.sendall(msg)
            _recv_exact(s, size, busy, deadline if busy else math.inf)
            t1 = clock()
        if seq >= warmup:
            rtts.append(t1 - t0)
    s.close()
    return {
        "probe": "pingpong",
        "protocol": protocol,
        "host": host,
        "size": size,
        "count": count,
        "lost": lost,
        "busy_poll": busy,
        "mode": "busy-poll" if busy else "blocking",
        "clock": "time.perf_counter_ns on the client only; OWD = RTT/2",
        "owd": summarize_owd(rtts),
        "rtts_ns": rtts,
    }


def main(argv_: Sequence[str] | None = None) -> int:
    p = probe.parser(MODULE, ("server", "client"), 7777)
    p.add_argument("--protocol", choices=("udp", "tcp"), default="udp")
    p.add_argument("--size", type=int, default=64, help="message bytes (UDP data / TCP bytes)")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--timeout", type=float, default=1.0)
    p.add_argument("--busy-poll", action="store_true")
    a = p.parse_args(argv_)
    if a.role == "server":
        try:
            return serve(a.host, a.port, a.protocol, max(a.size, 1), a.busy_poll)
        except KeyboardInterrupt:
            return 0
    probe.emit(client(a.host, a.port, a.protocol, a.size, a.count, a.busy_poll, a.timeout,
                      a.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
