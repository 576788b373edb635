"""Paced UDP sender and receiver probe (RFC 2544 trials, dobrinov-2016 receiver timing); JSON.

`send` offers `--pps` datagrams of `--size` data bytes for `--duration` seconds, never blocking:
a datagram the socket cannot take (EAGAIN) counts as offered and lost, and the JSON says how fast
the generator really went, so a slow generator is never mistaken for a slow device.
`recv` counts datagrams (adding the namespace's receive-buffer drops from /proc/net/snmp, which
arrived but found the socket full) and, with `--timestamps`, the inter-packet delays.
Pure parts: `parse_snmp_udp`, `interarrival_summary`, `histogram`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import math
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from testbed import waiting
from testbed.measure import probe
from testbed.measure.pingpong_probe import choose_mode, percentile, precise_sleep

MODULE = "testbed.measure.udpprobe"

PACINGS = ("auto", "spin", "sleep")
# send() errors that mean "no way there right now" (counted as lost, the sender goes on): no
# route (a router restarting), or a Packet Too Big reported once on the connected socket
UNREACHABLE = (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN,
               errno.EMSGSIZE)


def lasting(duration_s: float, packets: int | None, pps: float) -> float:
    """How long a paced stream of `pps` datagrams a second runs: `duration_s`, or longer where
    it must carry at least `packets` (e.g. enough arrivals for an inter-packet delay's tail)."""
    if packets is None or pps <= 0:
        return duration_s
    return max(duration_s, float(packets) / pps)


def send_argv(
    python: str, *, host: str, port: int, size: int, pps: float, duration_s: float,
    max_burst: int | None = None, pacing: str = "auto", align_s: float = 0.0,
    deadline_s: float | None = None,
) -> list[str]:
    """argv of the paced sender; `max_burst` defaults to 0.5 ms worth of datagrams (at least 4),
    about what a shaper's bucket takes at line rate. `pacing`: see `pacing_mode`. `align_s`:
    start on the next whole multiple of it on the monotonic clock; `deadline_s`: stop sending
    that long after the start (`send`)."""
    burst = max_burst if max_burst is not None else max(4, int(pps * 0.0005))
    options: dict[str, Any] = {"size": size, "pps": float(pps), "duration": float(duration_s),
                               "max_burst": burst, "pacing": pacing}
    if align_s > 0:
        options["align"] = float(align_s)
    if deadline_s is not None:
        options["deadline"] = float(deadline_s)
    return probe.argv(python, MODULE, "send", host=host, port=port, options=options)


def pacing_mode(pacing: str, cpus: int | None = None) -> tuple[bool, str]:
    """(spin?, why): the sender spins through the last 0.4 ms before a datagram is due unless
    told to sleep, or unless that spinning and the receiving side (receiver, forwarding)
    would need more CPUs than there are — on one CPU every spin steals the receiver's time."""
    if pacing == "spin":
        return True, "spin: --pacing spin"
    if pacing == "sleep":
        return False, "sleep: --pacing sleep"
    busy, why = choose_mode(True, spinners=2, cpus=cpus)
    return busy, why.replace("busy-poll", "spin").replace("blocking", "sleep")


def recv_argv(
    python: str, *, host: str, port: int, out: str, idle_s: float = 0.5, max_wait_s: float = 30.0,
    timestamps: bool = False,
) -> list[str]:
    """argv of the receiver: it exits `idle_s` after the last datagram (or after `max_wait_s`
    without any) and writes its JSON to `out`."""
    return probe.argv(python, MODULE, "recv", host=host, port=port, options={
        "out": out, "idle": float(idle_s), "max_wait": float(max_wait_s),
        "timestamps": timestamps})


def parse_snmp_udp(snmp: str, snmp6: str = "") -> dict[str, int]:
    """UDP counters of /proc/net/snmp (the two `Udp:` lines) and /proc/net/snmp6 (`Udp6*`)."""
    out: dict[str, int] = {}
    lines = [ln.split() for ln in snmp.splitlines() if ln.startswith("Udp:")]
    if len(lines) >= 2:
        out.update({f"Udp{k}": int(v) for k, v in zip(lines[0][1:], lines[1][1:], strict=False)})
    for ln in snmp6.splitlines():
        parts = ln.split()
        if len(parts) == 2 and parts[0].startswith("Udp6"):
            out[parts[0]] = int(parts[1])
    return out


def rcvbuf_errors(counters: dict[str, int]) -> int:
    """Datagrams that reached this host but were dropped because a socket buffer was full."""
    return counters.get("UdpRcvbufErrors", 0) + counters.get("Udp6RcvbufErrors", 0)


def histogram(values: Sequence[float], bins: int = 20) -> dict[str, list[float]]:
    """Equal-width histogram: bin edges and counts."""
    if not values:
        return {"edges": [], "counts": []}
    lo, hi = min(values), max(values)
    if hi == lo:
        return {"edges": [lo, hi], "counts": [float(len(values))]}
    width = (hi - lo) / bins
    counts = [0.0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    return {"edges": [lo + i * width for i in range(bins + 1)], "counts": counts}


def interarrival_summary(arrivals_ns: Sequence[int]) -> dict[str, Any]:
    """Packets per second and the inter-packet delay distribution (µs) from arrival times."""
    n = len(arrivals_ns)
    if n < 2:
        return {"packets": n, "pps": 0.0, "ipd": {"n": 0}}
    ipd = [(b - a) / 1000.0 for a, b in itertools.pairwise(arrivals_ns)]
    span_s = (arrivals_ns[-1] - arrivals_ns[0]) / 1e9
    s = sorted(ipd)
    mean = sum(s) / len(s)
    return {
        "packets": n,
        "pps": (n - 1) / span_s if span_s > 0 else 0.0,
        "span_s": span_s,
        "ipd": {
            "n": len(s),
            "mean_us": mean,
            "min_us": s[0],
            "max_us": s[-1],
            "median_us": percentile(s, 50),
            "p1_us": percentile(s, 1),
            "p99_us": percentile(s, 99),
            "stdev_us": math.sqrt(sum((v - mean) ** 2 for v in s) / (len(s) - 1)),
            "histogram": histogram(s),
        },
    }


SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
BUFFER_BYTES = 8 << 20


def _big_buffer(s: socket.socket, opt: int, force: int) -> None:
    """A large socket buffer, so pacing hiccups queue up instead of failing (FORCE needs root)."""
    try:
        s.setsockopt(socket.SOL_SOCKET, force, BUFFER_BYTES)
    except PermissionError:
        s.setsockopt(socket.SOL_SOCKET, opt, BUFFER_BYTES)


SIOCGSTAMPNS = 0x8907
_TIMESPEC = struct.Struct("@qq")


def kernel_stamp_ns(s: socket.socket) -> int | None:
    """Kernel receive time (CLOCK_REALTIME, ns) of the last datagram read from `s`.

    The first call also turns timestamping on for the socket (and may find none yet).
    """
    try:
        sec, nsec = _TIMESPEC.unpack(fcntl.ioctl(s.fileno(), SIOCGSTAMPNS, bytes(_TIMESPEC.size)))
    except OSError:
        return None
    return int(sec) * 1_000_000_000 + int(nsec)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _read_counters() -> dict[str, int]:
    try:
        snmp6 = Path("/proc/net/snmp6").read_text()
    except FileNotFoundError:
        snmp6 = ""
    return parse_snmp_udp(Path("/proc/net/snmp").read_text(), snmp6)


STALL_DATAGRAMS = 8
"""A sender this many datagrams behind its schedule at once (beyond `max_burst`) was stopped
(descheduled, or its guest busy elsewhere) rather than slow: a slow sender falls behind one or
two datagrams at a time."""


def send(host: str, port: int, size: int, pps: float, duration_s: float, max_burst: int = 4,
         pacing: str = "auto", align_s: float = 0.0,
         deadline_s: float | None = None) -> dict[str, Any]:
    """Offer round(pps * duration) datagrams at `pps`.

    With `deadline_s`, stop once that many seconds have passed since the first datagram, sent
    or not: a sender too slow for `pps` then offers what it can in about `duration`, instead of
    taking (pps / what it can) times as long to send them all; `attempted` says how many it
    offered, and `cut_short` that the deadline ended it.

    When it falls behind (descheduled, or too slow) it sends at most `max_burst` at once and
    delays the rest of its schedule: a catch-up burst would queue in a shaper and look like
    an overloaded device. The delay shows as `achieved_pps` below `offered_pps`. A delay of
    `STALL_DATAGRAMS` or more at once is a stall (the sender was not running), not a slow
    sender: `stalled_s` sums them and `paced_pps` is the rate it sent at apart from them.
    Between datagrams it sleeps, spinning through the last 0.4 ms when `pacing_mode` allows.
    With `align_s` it first sleeps to the next whole multiple of `align_s` seconds on the
    monotonic clock, where a CPU budget's quota refills (`kthreads.budget_period_s`).
    """
    spin, pacing_why = pacing_mode(pacing)
    precise_sleep()
    s = socket.socket(_family(host), socket.SOCK_DGRAM)
    _big_buffer(s, socket.SO_SNDBUF, SO_SNDBUFFORCE)
    s.connect((host, port))
    s.setblocking(False)
    total = max(1, round(pps * duration_s))
    if align_s > 0:
        probe.sleep_to_grid(align_s)
    got = _pace(s.send, b"\x5a" * size, total, pps, max_burst, spin, deadline_s)
    s.close()
    elapsed, stalled, done = got["elapsed_s"], got["stalled_s"], got["attempted"]
    # The last datagram is due at (total-1)/pps, so a perfect sender takes that long.
    ideal = (total - 1) / pps if total > 1 else 0.0
    achieved = (done - 1) / elapsed if elapsed > 0 and done > 1 else pps
    paced = (done - 1) / (elapsed - stalled) if elapsed > stalled and done > 1 else achieved
    return {
        "probe": "udpprobe-send",
        "host": host,
        "size": size,
        "offered_pps": pps,
        "attempted": done,
        "sent": done - got["eagain"] - got["refused"] - got["unreachable"],
        "scheduled": total,
        "cut_short": done < total,
        "deadline_s": deadline_s,
        "eagain": got["eagain"],
        "refused": got["refused"],
        "unreachable": got["unreachable"],
        "elapsed_s": elapsed,
        "max_lag_s": got["max_lag_s"],
        "max_burst": max_burst,
        "pacing": "spin" if spin else "sleep",
        "pacing_reason": pacing_why,
        "start_ns": got["start_ns"],
        "end_ns": got["end_ns"],
        "end_realtime_ns": got["end_realtime_ns"],
        "ideal_s": ideal,
        "achieved_pps": min(achieved, pps),
        "stalls": got["stalls"],
        "stalled_s": stalled,
        "paced_pps": min(paced, pps),
        "aligned_s": align_s,
        "note": "attempted = offered; eagain = the socket could not take it (counted as lost)",
    }


def _pace(sendf: Callable[[bytes], int], payload: bytes, total: int, pps: float,
          max_burst: int, spin: bool, deadline_s: float | None = None) -> dict[str, Any]:
    """`send`'s loop: `total` datagrams at `pps` (fewer when `deadline_s` seconds pass first);
    what it counted, and when it ran."""
    perf = time.perf_counter
    sleep = time.sleep
    i = eagain = refused = unreachable = 0
    max_lag = stalled = 0.0
    stalls = 0
    start_ns = time.perf_counter_ns()
    t0 = start = perf()  # t0: the schedule (delayed when behind); start: the real start
    end = math.inf if deadline_s is None else start + deadline_s
    while i < total:
        now = perf()
        if now >= end:
            break
        due = min(total, int((now - t0) * pps) + 1)
        if due <= i:
            wait = (i - (now - t0) * pps) / pps
            if not spin:
                sleep(max(wait, 0.0))
            elif wait > 0.0004:
                sleep(wait - 0.0002)
            continue
        lag = now - t0 - i / pps
        if lag > max_lag:
            max_lag = lag
        if due - i > max_burst:  # behind: delay the schedule rather than burst to catch up
            push = due - i - max_burst
            t0 += push / pps
            due = i + max_burst
            if push >= STALL_DATAGRAMS:
                stalled += push / pps
                stalls += 1
        for _ in range(due - i):
            try:
                sendf(payload)
            except BlockingIOError:
                eagain += 1
            except ConnectionRefusedError:
                refused += 1
            except OSError as exc:  # no route for a moment (a router restarting): lost
                if exc.errno not in UNREACHABLE:
                    raise
                unreachable += 1
        i = due
    elapsed = perf() - start
    end_ns = time.perf_counter_ns()
    return {"attempted": i, "eagain": eagain, "refused": refused, "unreachable": unreachable,
            "elapsed_s": elapsed, "max_lag_s": max_lag, "stalls": stalls, "stalled_s": stalled,
            "start_ns": start_ns, "end_ns": end_ns, "end_realtime_ns": time.time_ns()}


SENDERS_DONE = signal.SIGUSR1
"""Sent to a receiver once its senders have ended (`senders_done`): if nothing has come yet,
it waits `idle_s` more, then ends with what it has (nothing)."""


def senders_done(proc: Any) -> None:
    """Tell a receiver started by the caller (a ManagedProcess, or anything with `.popen`) that
    its senders have ended; a receiver that already ended is left alone."""
    popen = getattr(proc, "popen", proc)
    with contextlib.suppress(ProcessLookupError):
        popen.send_signal(SENDERS_DONE)


_WAKE: list[socket.socket] = []  # the pair behind the wakeup fd: open for the process's life


def _listen_for_senders_done() -> socket.socket:
    """From now on, `SENDERS_DONE` makes the returned socket readable and never ends this
    process, however late it comes (the receiver runs as a program's main thread)."""
    if not _WAKE:
        _WAKE.extend(socket.socketpair())
        for w in _WAKE:
            w.setblocking(False)
        signal.signal(SENDERS_DONE, lambda *_: None)
        signal.set_wakeup_fd(_WAKE[1].fileno(), warn_on_full_buffer=False)
    return _WAKE[0]


def _first_datagram(s: socket.socket, wake: socket.socket, buf: bytearray, idle_s: float,
                    max_wait_s: float) -> int:
    """Block until the first datagram (its size) or until the caller says its senders ended
    (`wake` readable), then wait `idle_s` more. No timer wakes this process meanwhile: on the
    virtual clock a wake-up would land at a point that depends on how long the sender took to
    start (host I/O) and shift the sender it shares the CPU with. On the real clock
    `max_wait_s` bounds the wait too (TimeoutError); in a virtual-clock guest a guest-time
    bound would fire early (the clock leaps while a program starts), so the caller's own
    host-time deadline, and its `stop`, bound it there."""
    ready, _, _ = select.select([s, wake], [], [], None if waiting.is_virtual() else max_wait_s)
    if not ready:
        raise TimeoutError("no datagram within max_wait_s")
    if s not in ready:  # the senders ended with nothing here yet: what is still in flight
        s.settimeout(idle_s)
    return s.recv_into(buf)


def recv(
    host: str, port: int, idle_s: float, max_wait_s: float, timestamps: bool,
) -> dict[str, Any]:
    """Count datagrams until `idle_s` passes without one; with none at all, until `idle_s`
    after the caller says the senders ended (`senders_done`), or `max_wait_s` (real clock)."""
    wake = _listen_for_senders_done()  # before the caller can see it listening
    s = socket.socket(_family(host), socket.SOCK_DGRAM)
    _big_buffer(s, socket.SO_RCVBUF, SO_RCVBUFFORCE)
    s.bind((host, port))
    kernel_stamp_ns(s)  # turn on receive timestamps
    before = _read_counters()
    buf = bytearray(65536)
    count = 0
    nbytes = 0
    arrivals: list[int] = []
    clock = time.perf_counter_ns
    first = last = 0
    try:
        nbytes = _first_datagram(s, wake, buf, idle_s, max_wait_s)
        first = last = clock()
        count = 1
        if timestamps:
            arrivals.append(first)
        s.settimeout(idle_s)
        recv_into = s.recv_into
        while True:
            nbytes += recv_into(buf)
            last = clock()
            count += 1
            if timestamps:
                arrivals.append(last)
    except TimeoutError:
        pass
    last_kernel = kernel_stamp_ns(s) if count else None
    after = _read_counters()
    dropped = rcvbuf_errors(after) - rcvbuf_errors(before)
    doc: dict[str, Any] = {
        "probe": "udpprobe-recv",
        "host": host,
        "received_by_socket": count,
        "bytes": nbytes,
        "rcvbuf_drops": dropped,
        "received": count + dropped,
        "first_ns": first,
        "last_ns": last,
        "last_kernel_realtime_ns": last_kernel,
        "span_s": (last - first) / 1e9,
        "rate_pps": (count - 1) / ((last - first) / 1e9) if last > first else 0.0,
        "note": "received = read by the probe + dropped by a full receive buffer in this "
        "namespace (they crossed the network)",
    }
    if timestamps:
        doc["timing"] = interarrival_summary(arrivals)
        doc["timing_note"] = "user-space arrival times (time.perf_counter_ns) at the receiver"
    return doc


def main(argv_: Sequence[str] | None = None) -> int:
    p = probe.parser(MODULE, ("send", "recv"), 7790)
    p.add_argument("--size", type=int, default=18)
    p.add_argument("--pps", type=float, default=1000.0)
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--out", default="-")
    p.add_argument("--idle", type=float, default=0.5)
    p.add_argument("--max-wait", type=float, default=30.0)
    p.add_argument("--timestamps", action="store_true")
    p.add_argument("--max-burst", type=int, default=4)
    p.add_argument("--pacing", choices=PACINGS, default="auto")
    p.add_argument("--align", type=float, default=0.0)
    p.add_argument("--deadline", type=float, default=None)
    a = p.parse_args(argv_)
    if a.role == "send":
        doc = send(a.host, a.port, a.size, a.pps, a.duration, a.max_burst, a.pacing, a.align,
                   a.deadline)
    else:
        doc = recv(a.host, a.port, a.idle, a.max_wait, a.timestamps)
    probe.emit(doc, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
