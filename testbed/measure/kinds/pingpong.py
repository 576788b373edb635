"""Measurement kind `pingpong`: one-way delay (RTT/2) of a UDP or TCP ping-pong probe."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.measure import ping, pingpong
from testbed.measure.kinds import base

TCP_HEADER = 20


def exchange(tb: base.TestbedLike, node_srv: str, node_cli: str, host: str, p: Mapping[str, Any],
             ctx: base.Context, size: int, listen: str | None = None) -> dict[str, Any]:
    """One ping-pong run: a server in `node_srv`, the client in `node_cli` sending to `host`."""
    # client and server both spin when busy-polling: block when they would outnumber the CPUs
    busy, why = pingpong.choose_mode(bool(p["busy_poll"]), spinners=2)
    kw: dict[str, Any] = {"protocol": p["protocol"], "size": size, "busy_poll": busy}
    tcp = p["protocol"] == "tcp"
    with base.serve(tb, ctx, node_srv,
               lambda port, _out: pingpong.argv(ctx.python, "server", host=listen or host,
                                                port=port, **kw),
               proto=p["protocol"], what="ping-pong server", name="pingpong-server") as srv:
        doc = base.run_client(
            tb, node_cli,
            pingpong.argv(ctx.python, "client", host=host, port=srv.port, count=int(p["count"]),
                          timeout_s=10.0 if tcp else 1.0, **kw),
            # TCP never loses a reply, so its wait only guards against a dead peer; a UDP reply
            # later than 1 s counts as lost
            timeout_s=float(p["count"]) * (10.0 if tcp else 1.0) + 60,
            what="ping-pong client")
    doc["mode_reason"] = why
    return doc


def message_size(p: Mapping[str, Any]) -> int:
    """Message bytes: `ip_payload` less the UDP or TCP header, else `size` (default 64)."""
    if p.get("ip_payload") is not None:
        hdr = ping.UDP_HEADER if p["protocol"] == "udp" else TCP_HEADER
        return int(p["ip_payload"]) - hdr
    return int(p.get("size") or 64)


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    base.one_size(out, given)
    base.fits(out, [int(out["ip"])], "tcp" if out.get("protocol") == "tcp" else "udp")


OWD = ("mean_us", "min_us", "max_us", "median_us", "p99_us", "p999_us", "stdev_us",
       "typical_latency_us", "worst_case_latency_us", "pdv_p99_us", "pdv_p999_us",
       "ipdv_mean_us")
RTT = ("mean_us", "min_us", "max_us", "median_us", "p99_us")


def run(tb: base.TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    ip_v = int(p["ip"])
    size = message_size(p)
    with base.cpu_window(tb, p, KIND) as cpu:
        doc = exchange(tb, p["server"], p["client"], tb.address(p["server"], ip_v), p, ctx, size,
                       listen=base.listen_address(tb, p["server"], ip_v))
    owd = doc["owd"]
    metrics = {f"owd_{k}": float(owd[k]) for k in OWD if k in owd}
    # the round trip itself, as zeadally-2004 reports it (owd_* are RTT/2)
    metrics.update({f"rtt_{k}": 2.0 * float(owd[k]) for k in RTT if k in owd})
    metrics["lost"] = float(doc["lost"])
    metrics["busy_poll"] = 1.0 if doc["busy_poll"] else 0.0
    metrics["message_bytes"] = float(size)
    metrics.update(base.cpu_metrics(cpu))
    overhead = None
    if p.get("overhead", True):
        lo = "::1" if ip_v == 6 else "127.0.0.1"
        overhead = exchange(tb, p["client"], p["client"], lo, p, ctx, size)
        metrics["probe_overhead_median_us"] = overhead["owd"]["median_us"]
        metrics["probe_overhead_mean_us"] = overhead["owd"]["mean_us"]
        overhead.pop("rtts_ns", None)
    if not p.get("keep_samples", True):
        doc.pop("rtts_ns", None)
    return base.Measured(metrics, {
        "probe": doc,
        "probe_overhead_loopback": overhead,
        "overhead_note": "the same probe over loopback in the client's namespace: its own "
        "cost, included in every OWD above",
        "cpu": cpu or None,
    })


PARAMS = base.param_table("""
protocol | str | "udp" | udp, tcp | transport (TCP with TCP_NODELAY)
size | size |  |  | message bytes (UDP data or TCP bytes; default 64)
ip_payload | size |  |  | IP payload bytes (UDP/TCP header + message)
count | int | 1000 | max 10000000 | round trips
busy_poll | bool | true |  | spin instead of blocking when client and server fit on the CPUs
overhead | bool | true |  | also run the probe over loopback (its own cost)
keep_samples | bool | true |  | store every round trip in the result
""")

METRICS = base.metric_table("""
owd_mean_us | us | mean one-way delay (RTT/2)
owd_min_us | us | smallest one-way delay
owd_max_us | us | largest one-way delay
owd_median_us | us | median one-way delay
owd_p99_us | us | 99th percentile one-way delay
owd_p999_us | us | 99.9th percentile one-way delay
owd_stdev_us | us | standard deviation of the one-way delay
owd_typical_latency_us | us | typical latency (median, RFC 8219)
owd_worst_case_latency_us | us | worst-case latency (p99.9, RFC 8219)
owd_pdv_p99_us | us | packet delay variation, p99 - min (RFC 5481)
owd_pdv_p999_us | us | packet delay variation, p99.9 - min (RFC 5481)
owd_ipdv_mean_us | us | mean |difference| of consecutive delays (RFC 3393)
rtt_mean_us | us | mean round trip (as zeadally-2004 reports it)
rtt_min_us | us | smallest round trip
rtt_max_us | us | largest round trip
rtt_median_us | us | median round trip
rtt_p99_us | us | 99th percentile round trip
lost | count | requests without a reply in time
busy_poll | flag | 1: the probe spun (busy-polled), 0: it blocked
message_bytes | B | message bytes of each request
probe_overhead_median_us | us | median OWD of the probe over loopback
probe_overhead_mean_us | us | mean OWD of the probe over loopback
""")

KIND = base.Kind("pingpong", "ping-pong one-way delay probe (OWD = RTT/2)",
                 "`python -m testbed.measure.pingpong`", (*base.ENDPOINTS, *PARAMS, *base.CPU),
                 (*METRICS, *base.CPU_METRICS), run, check)
