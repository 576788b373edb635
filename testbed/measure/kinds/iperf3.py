"""Measurement kind `iperf3`: TCP/UDP throughput with iperf3, IPv4 and IPv6 flows at once."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

from testbed import units, waiting
from testbed.api import TestbedLike
from testbed.errors import CommandError
from testbed.measure import iperf
from testbed.measure.kinds import base
from testbed.measure.kinds.base import Kind, Metric, Param


def flows(p: Mapping[str, Any]) -> list[tuple[int, float]]:
    """(ip version, share) of each concurrent flow: `ratio = "90/10"` is IPv4 90%, IPv6 10%."""
    ratio = p.get("ratio")
    if not ratio:
        return [(int(p["ip"]), 1.0)]
    a, b = (float(x) for x in str(ratio).split("/"))
    return [(v, s / (a + b)) for v, s in ((4, a), (6, b)) if s > 0]


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    base.one_size(out, given)
    base.fits(out, [v for v, _ in flows(out)], "udp")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    rate = units.rate(p.get("rate"), zero=True)
    duration = float(p["duration"])
    results = {}
    with ExitStack() as stack:
        servers = [
            (ip_v, share, stack.enter_context(base.serve(
                tb, ctx, p["server"], lambda port, _out: iperf.server_argv(port),
                proto="tcp", what="iperf3 server", name="iperf3-server")))
            for ip_v, share in flows(p)
        ]
        cpu = stack.enter_context(base.cpu_window(tb, p, KIND))
        clients = []
        for ip_v, share, srv in servers:
            length = None
            if p.get("length") is not None:
                length = int(p["length"])
            elif p.get("ip_payload") is not None or p.get("frame_size") is not None:
                length = base.ip_payload_and_data(p, ip_v)[1]
            argv = iperf.client_argv(
                tb.address(p["server"], ip_v), port=srv.port, protocol=p["protocol"],
                duration_s=duration, length=length,
                bitrate_bps=int(rate * share) if rate else None, direction=p["direction"],
                streams=int(p["streams"]), ip=ip_v, nodelay=bool(p.get("nodelay")),
            )
            proc = tb.popen(p["client"], argv, name="iperf3-client", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
            stack.callback(proc.stop)
            clients.append((ip_v, argv, proc))
        for ip_v, argv, proc in clients:
            out, err = proc.popen.communicate(timeout=waiting.process_timeout(duration + 30))
            if proc.popen.returncode != 0 and not out.strip():
                raise CommandError(argv, proc.popen.returncode, err, f"node {p['client']}")
            results[ip_v] = iperf.parse_iperf3(out, argv=argv, where=f"node {p['client']}")
    metrics: dict[str, float] = {"receiver_bps": sum(r.receiver_bps for r in results.values())}
    for ip_v, r in results.items():
        metrics[f"v{ip_v}_receiver_bps"] = r.receiver_bps
        metrics[f"v{ip_v}_sender_bps"] = sum(f.sender_bps for f in r.flows)
        if r.protocol == "udp":
            lost = sum(f.lost_packets or 0 for f in r.flows)
            pk = sum(f.packets or 0 for f in r.flows)
            metrics[f"v{ip_v}_lost_percent"] = 100.0 * lost / pk if pk else 0.0
        else:
            metrics[f"v{ip_v}_retransmits"] = float(sum(f.retransmits or 0 for f in r.flows))
    metrics.update(base.cpu_metrics(cpu))
    return base.Measured(
        metrics, {"flows": {f"v{k}": v.to_dict() for k, v in results.items()}, "cpu": cpu or None}
    )


VIRTUAL_EXACT = (
    "on the virtual clock a UDP cell's received rate (one stream, forward, unpaced) repeats "
    "within 0.1 %: quintero-2016's full run in two guests, 6to4's and ISATAP's 72 cells "
    "(50-10000 B, 10 and 100 Mbit/s) x 3 repetitions within 0.070 %, and 12 of them in a "
    "second boot within 0.065 % of that run's means (docs/vm.md, 'UDP throughput repeats on "
    "the virtual clock'); Jool moves, as its delays do, and keeps its repetitions")


def _one_udp_stream(p: Mapping[str, Any]) -> bool:
    """What VIRTUAL_EXACT's evidence covers: one UDP stream, client to server, sent as fast as
    it can (TCP, a paced rate, parallel or mixed flows were not shown to repeat)."""
    return (p.get("protocol") == "udp" and p.get("streams", 1) == 1 and p.get("ratio") is None
            and p.get("rate") is None and p.get("direction", "forward") == "forward")


KIND = Kind(
    name="iperf3",
    doc="iperf3 TCP/UDP throughput; `ratio` runs IPv4 and IPv6 flows at once",
    tool="`iperf3 -J`",
    params=(
        *base.ENDPOINTS,
        Param("protocol", "str", "tcp", "transport", choices=("tcp", "udp")),
        Param("duration", "number", 5, "seconds of traffic", max=3600),
        Param("length", "size", None, "iperf3 -l: bytes per write (TCP) or datagram (UDP)"),
        Param("ip_payload", "size", None, "IP payload bytes (UDP header + data)"),
        Param("frame_size", "size", None, "Ethernet frame bytes (header + FCS included)"),
        Param("rate", "rate", None, "offered rate (shared by ratio's flows); unset: unlimited"),
        Param("direction", "str", "forward", "who sends", choices=("forward", "reverse", "bidir")),
        Param("streams", "int", 1, "parallel streams (iperf3 -P)", max=128),
        Param("ratio", "ratio", None, "\"IPv4/IPv6\" shares of concurrent flows, e.g. \"90/10\""),
        Param("nodelay", "bool", False, "TCP_NODELAY (iperf3 -N)"),
        *base.CPU,
    ),
    metrics=(
        Metric("receiver_bps", "bit/s", "received rate of all flows together"),
        Metric("v{ip}_receiver_bps", "bit/s", "received rate of the IPv4 (v4) or IPv6 (v6) flow"),
        Metric("v{ip}_sender_bps", "bit/s", "sent rate of the v4 or v6 flow"),
        Metric("v{ip}_lost_percent", "%", "UDP datagrams lost, v4 or v6 flow"),
        Metric("v{ip}_retransmits", "count", "TCP retransmissions, v4 or v6 flow"),
        *base.CPU_METRICS,
    ),
    runner=run,
    check=check,
    programs=("iperf3",),
    measures="throughput",
    host_reason=base.THROUGHPUT_ON_HOST,
    virtual_exact=VIRTUAL_EXACT,
    virtual_exact_for=_one_udp_stream,
)
