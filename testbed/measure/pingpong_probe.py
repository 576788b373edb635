"""Ping-pong one-way-delay probe (quintero-2016, gamess-morales): run with `python -m`, prints JSON.

A fixed-size UDP or TCP (TCP_NODELAY) message goes back and forth N times; the client stamps each
exchange with its own clock, so OWD = RTT / 2 needs no clock synchronisation. `summarize_owd` is
the pure part: RFC 8219 names (typical latency = median, worst case = 99.9th percentile) and
packet delay variation.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import json
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence

from testbed.measure import probe

TYPE_CHECKING = False  # typing costs a probe start milliseconds (seconds emulated)
if TYPE_CHECKING:
    from typing import Any

MODULE = "testbed.measure.pingpong_probe"

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
    overhead: str | None = None,
) -> list[str]:
    """argv that runs this probe as `role` ("server" or "client"); a client with `overhead`
    (a loopback address) then measures the probe's own cost there too (see `overhead_run`)."""
    opts: dict[str, Any] = {"protocol": protocol, "size": size}
    if role == "client":
        opts |= {"count": count, "timeout": float(timeout_s), "warmup": warmup,
                 "overhead": overhead}
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


def serve(host: str, port: int, protocol: str, size: int, busy: bool,
          ready: Callable[[int], None] | None = None) -> int:
    """Echo every message back until killed (UDP) or the client closes (TCP); `ready` is
    called with the bound port once the socket can take messages (port 0: any free port)."""
    precise_sleep()
    fam = _family(host)
    if protocol == "udp":
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.setblocking(not busy)
        buf = bytearray(65536)  # one buffer for every message: no allocation per exchange
        view = memoryview(buf)
        gc.disable()  # nor a collection in the middle of one (the process is killed at the end)
        if ready is not None:
            ready(s.getsockname()[1])
        while True:
            try:
                n, peer = s.recvfrom_into(buf)
            except BlockingIOError:
                continue
            s.sendto(view[:n], peer)
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(4)
    gc.disable()
    if ready is not None:
        ready(ls.getsockname()[1])
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
    # The timed loop allocates nothing large and never collects: an exchange's cost is then
    # the same instructions every time (on the virtual clock, the same nanoseconds).
    msg = bytearray(pack_seq(0, size))
    rbuf = bytearray(65536)
    head = memoryview(rbuf)[:k]
    gc_was = gc.isenabled()
    gc.disable()
    for seq in range(warmup + count):
        msg[:k] = (seq % modulo).to_bytes(k, "big")
        deadline = time.monotonic() + timeout_s
        t0 = clock()
        if protocol == "udp":
            s.send(msg)
            got = -1
            while got != seq % modulo:
                try:
                    s.recv_into(rbuf)
                except (BlockingIOError, InterruptedError):
                    if time.monotonic() > deadline:
                        break
                    continue
                except TimeoutError:
                    break
                got = int.from_bytes(head, "big")
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
    if gc_was:
        gc.enable()
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


def overhead_run(
    host: str, protocol: str, size: int, count: int, busy: bool, timeout_s: float, warmup: int,
) -> dict[str, Any]:
    """The probe's own cost: the same exchange over loopback `host`, with a server forked from
    this process (no second program start: under the full-kernel tier's emulation each Python
    start costs seconds). The server runs `serve`, exactly as the network server does."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server
        os.close(r)
        code = 1

        def ready(port: int) -> None:
            os.write(w, f"{port}\n".encode())
            os.close(w)

        try:
            code = serve(host, 0, protocol, max(size, 1), busy, ready)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(w)
    try:
        with os.fdopen(r) as f:
            line = f.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"loopback server on {host} did not start (it printed why)")
        return client(host, int(line), protocol, size, count, busy, timeout_s, warmup)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


class Loopback:
    """The loopback (overhead) run, forked at the client's start, before the network run: it
    waits for `run()`, then forks its server and runs the client, both from the state of a
    freshly started probe, as the separate programs they replace were (the allocator's state
    after a run changes the instructions an exchange costs, i.e. the virtual-clock time)."""

    def __init__(self, host: str, protocol: str, size: int, count: int, busy: bool,
                 timeout_s: float, warmup: int) -> None:
        go_r, self.go = os.pipe()
        self.result, res_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.go)
            os.close(self.result)
            code = 1
            try:
                if os.read(go_r, 1) == b"g":  # nothing: the client ended without a loopback run
                    doc = overhead_run(host, protocol, size, count, busy, timeout_s, warmup)
                    data = (json.dumps(doc) + "\n").encode()
                    while data:
                        data = data[os.write(res_w, data):]
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(go_r)
        os.close(res_w)

    def run(self) -> dict[str, Any]:
        """Start the loopback run and wait for its document."""
        os.write(self.go, b"g")
        os.close(self.go)
        with os.fdopen(self.result, "rb") as f:
            data = f.read()
        os.waitpid(self.pid, 0)
        self.pid = 0
        if not data.strip():
            raise RuntimeError("the loopback run printed no document (its error is above)")
        doc: dict[str, Any] = json.loads(data)
        return doc

    def cancel(self) -> None:
        """No loopback run after all: the child ends (it reads the end of its pipe)."""
        if self.pid:
            os.close(self.go)
            os.close(self.result)
            os.waitpid(self.pid, 0)
            self.pid = 0


def main(argv_: Sequence[str] | None = None) -> int:
    p = probe.parser(MODULE, ("server", "client"), 7777)
    p.add_argument("--protocol", choices=("udp", "tcp"), default="udp")
    p.add_argument("--size", type=int, default=64, help="message bytes (UDP data / TCP bytes)")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--timeout", type=float, default=1.0)
    p.add_argument("--busy-poll", action="store_true")
    p.add_argument("--overhead", metavar="LOOPBACK",
                   help="client: after printing its document, wait for a line (or the end) "
                   "on stdin, then run the same exchange over this loopback address with a "
                   "forked server (the probe's own cost) and print that document too")
    a = p.parse_args(argv_)
    if a.role == "server":
        try:
            return serve(a.host, a.port, a.protocol, max(a.size, 1), a.busy_poll)
        except KeyboardInterrupt:
            return 0
    loop = None
    if a.overhead:
        loop = Loopback(a.overhead, a.protocol, a.size, a.count, a.busy_poll, a.timeout,
                        a.warmup)
    try:
        probe.emit(client(a.host, a.port, a.protocol, a.size, a.count, a.busy_poll, a.timeout,
                          a.warmup))
    except BaseException:
        if loop is not None:
            loop.cancel()
        raise
    if loop is not None:
        # the caller stops the network server (and its CPU sampling) first: wait for its line
        sys.stdout.flush()
        sys.stdin.readline()
        probe.emit(loop.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
