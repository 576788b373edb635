"""Measurement kind `stackcost`: socket creation, TCP connect, connections per second,
per-packet send and echo."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.api import TestbedLike
from testbed.measure import stackcost_probe
from testbed.measure.kinds import base
from testbed.measure.kinds.base import Kind, Metric, Param


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    ip_v = int(p["ip"])
    listen = base.listen_address(tb, p["server"], ip_v)
    with base.serve(tb, ctx, p["server"],
               lambda port, _out: stackcost_probe.argv(ctx.python, "server", host=listen,
                                                       port=port),
               proto="tcp", what="stack-cost server", name="stackcost-server") as srv:
        doc = base.run_client(
            tb, p["client"],
            stackcost_probe.argv(ctx.python, "client", host=tb.address(p["server"], ip_v),
                           port=srv.port, count=int(p["count"])),
            timeout_s=float(p["count"]) + 120, what="stack-cost client")
    metrics = {
        "tcp_socket_create_us": doc["tcp_socket_create"]["median_us"],
        "udp_socket_create_us": doc["udp_socket_create"]["median_us"],
        "tcp_connect_us": doc["tcp_connect"]["median_us"],
        "connection_cycle_us": doc["connection_cycle"]["median_us"],
        "connections_per_s": doc["connections_per_s"],
    }
    for name in ("udp_send", "tcp_echo"):  # absent from documents of older runs
        if name in doc:
            metrics[f"{name}_us"] = doc[name]["median_us"]
    return base.Measured(metrics, doc)


KIND = Kind(
    name="stackcost",
    doc="socket creation, TCP connect, connections per second, per-packet send and echo",
    tool="`python -m testbed.measure.stackcost_probe`",
    params=(
        *base.ENDPOINTS,
        Param("count", "int", 500, "repetitions of each operation", max=10_000_000),
    ),
    metrics=(
        Metric("tcp_socket_create_us", "us", "median time to create a TCP socket"),
        Metric("udp_socket_create_us", "us", "median time to create a UDP socket"),
        Metric("tcp_connect_us", "us", "median TCP connect (handshake) time"),
        Metric("connection_cycle_us", "us", "median socket + connect + close"),
        Metric("connections_per_s", "conn/s", "TCP connections opened and closed per second"),
        Metric("udp_send_us", "us", "median time to send one 64-byte UDP datagram"),
        Metric("tcp_echo_us", "us", "median time to send 64 bytes over an open TCP connection "
               "and receive them back"),
    ),
    runner=run,
    measures="cost",
    host_reason="end-system stack costs: no link timing involved",
    virtual_reason="end-system stack costs: on the virtual clock a cost is a count of "
                   "instructions, the same in every run; the host's clock adds its load's noise",
)
