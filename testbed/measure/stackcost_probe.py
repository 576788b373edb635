"""End-system stack costs (zeadally-2004) probe: socket creation, TCP connect, connections/s,
per-packet send and echo; JSON.

Run with `python -m testbed.measure.stackcost_probe server|client ...`. The client times, IPv4 or
IPv6 by the address given: creating (and closing) TCP and UDP sockets, TCP connection set-up, the
"web client" cycle (create, connect, send 1 byte, receive it back, close), sending one 64-byte
UDP datagram (the server discards it), and one 64-byte message echoed over an open TCP
connection (send, the peer's receive and send, receive).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from testbed.measure import probe
from testbed.measure.pingpong_probe import summarize_owd

MODULE = "testbed.measure.stackcost_probe"


def argv(python: str, role: str, *, host: str, port: int, count: int = 1000) -> list[str]:
    """argv that runs this probe as `role` ("server" or "client")."""
    return probe.argv(python, MODULE, role, host=host, port=port,
                      options={"count": count} if role == "client" else None)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def summarize_us(samples_ns: Sequence[int]) -> dict[str, float]:
    """mean/min/max/median/p99 of durations in microseconds (from nanoseconds)."""
    # summarize_owd halves its input (RTT -> OWD); double to keep durations as they are.
    s = summarize_owd([2 * v for v in samples_ns])
    keep = ("n", "mean_us", "min_us", "max_us", "median_us", "p99_us", "stdev_us")
    return {k: s[k] for k in keep if k in s}


MESSAGE = 64  # bytes of the per-packet operations' payload


def _discard(sock: socket.socket) -> None:
    while True:
        sock.recv(65536)


def serve(host: str, port: int) -> int:
    """Accept connections one after another and echo what arrives until the client closes;
    discard UDP datagrams sent to the same port."""
    us = socket.socket(_family(host), socket.SOCK_DGRAM)
    us.bind((host, port))
    threading.Thread(target=_discard, args=(us,), daemon=True).start()
    ls = socket.socket(_family(host), socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(128)
    while True:
        conn, _ = ls.accept()
        try:
            while True:
                data = conn.recv(4096)
                if not data:
                    break
                conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()


def client(host: str, port: int, count: int) -> dict[str, Any]:
    """Time each stack operation `count` times; return the JSON document."""
    fam = _family(host)
    clock = time.perf_counter_ns
    create_tcp: list[int] = []
    create_udp: list[int] = []
    for _ in range(count):
        t0 = clock()
        s = socket.socket(fam, socket.SOCK_STREAM)
        t1 = clock()
        s.close()
        create_tcp.append(t1 - t0)
        t0 = clock()
        s = socket.socket(fam, socket.SOCK_DGRAM)
        t1 = clock()
        s.close()
        create_udp.append(t1 - t0)
    connect: list[int] = []
    for _ in range(count):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        t0 = clock()
        s.connect((host, port))
        t1 = clock()
        s.close()  # linger 0: reset, so no TIME_WAIT piles up
        connect.append(t1 - t0)
    cycle: list[int] = []
    t_start = clock()
    for _ in range(count):
        t0 = clock()
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect((host, port))
        s.sendall(b"x")
        if s.recv(1) != b"x":
            raise ConnectionError("echo server answered something else")
        s.close()
        cycle.append(clock() - t0)
    elapsed = (clock() - t_start) / 1e9
    send, echo = _per_packet(fam, host, port, count)
    return {
        "probe": "stackcost",
        "host": host,
        "ip": 6 if fam == socket.AF_INET6 else 4,
        "count": count,
        "tcp_socket_create": summarize_us(create_tcp),
        "udp_socket_create": summarize_us(create_udp),
        "tcp_connect": summarize_us(connect),
        "connection_cycle": summarize_us(cycle),
        "connections_per_s": count / elapsed if elapsed > 0 else 0.0,
        "udp_send": summarize_us(send),
        "tcp_echo": summarize_us(echo),
        "note": "socket creation excludes close; connect is the TCP handshake as seen by "
        "connect(); a cycle is create, connect, send 1 byte, receive it back, close; "
        f"udp_send is one sendto() of {MESSAGE} bytes; tcp_echo is {MESSAGE} bytes sent and "
        "received back on an open connection (TCP_NODELAY)",
    }


def _per_packet(fam: socket.AddressFamily, host: str, port: int, count: int
                ) -> tuple[list[int], list[int]]:
    """Per datagram: sendto() of MESSAGE bytes; per message: MESSAGE bytes echoed over TCP."""
    clock = time.perf_counter_ns
    payload = b"x" * MESSAGE
    send: list[int] = []
    with socket.socket(fam, socket.SOCK_DGRAM) as u:
        u.connect((host, port))
        for _ in range(count):
            t0 = clock()
            u.send(payload)
            send.append(clock() - t0)
    echo: list[int] = []
    with socket.create_connection((host, port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            t0 = clock()
            s.sendall(payload)
            got = 0
            while got < MESSAGE:
                chunk = s.recv(MESSAGE - got)
                if not chunk:
                    raise ConnectionError("echo server closed the connection")
                got += len(chunk)
            echo.append(clock() - t0)
    return send, echo


def main(argv_: Sequence[str] | None = None) -> int:
    p = probe.parser(MODULE, ("server", "client"), 7780)
    p.add_argument("--count", type=int, default=1000)
    a = p.parse_args(argv_)
    if a.role == "server":
        try:
            return serve(a.host, a.port)
        except KeyboardInterrupt:
            return 0
    probe.emit(client(a.host, a.port, a.count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
