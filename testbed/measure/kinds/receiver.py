"""Measurement kind `receiver`: packets per second and inter-packet delay at the receiver."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed import units
from testbed.api import TestbedLike
from testbed.measure import udpprobe
from testbed.measure.kinds import base
from testbed.measure.kinds.base import Kind, Metric, Param

IPD = ("mean_us", "median_us", "min_us", "max_us", "p99_us", "stdev_us")


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    base.one_size(out, given)
    base.fits(out, [int(out["ip"])], "udp")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    ip_v = int(p["ip"])
    n, data = base.ip_payload_and_data(p, ip_v)
    rate = units.rate(p.get("rate"), zero=True) or 10e6
    pps = rate / (8.0 * n)
    duration = udpprobe.lasting(float(p["duration"]), p.get("packets"), pps)
    listen = base.listen_address(tb, p["server"], ip_v)
    with base.serve(tb, ctx, p["server"],
               lambda port, out: udpprobe.recv_argv(
                   ctx.python, host=listen, port=port, out=str(out), idle_s=0.5,
                   max_wait_s=duration + 10, timestamps=True),
               proto="udp", what="udp receiver", name="udpprobe-recv", output=True) as rx:
        with base.cpu_window(tb, p, KIND) as cpu:
            sent = base.run_client(
                tb, p["client"],
                udpprobe.send_argv(ctx.python, host=tb.address(p["server"], ip_v),
                                   port=rx.port, size=data, pps=pps, duration_s=duration),
                timeout_s=duration * 3 + 30, what="udp sender")
        udpprobe.senders_done(rx.proc)
        got = rx.result(duration + 30)
    timing = got["timing"]
    ipd = timing["ipd"]
    metrics = {
        "pps": timing["pps"],
        "received": float(got["received"]),
        "lost": float(max(0, sent["attempted"] - got["received"])),
        "offered_pps": pps,
        "sender_pps": sent["achieved_pps"],
    }
    if ipd.get("n"):
        metrics.update({f"ipd_{k}": float(ipd[k]) for k in IPD})
    metrics.update(base.cpu_metrics(cpu))
    return base.Measured(metrics, {"sender": sent, "receiver": got, "cpu": cpu or None,
                                   "duration_s": duration})


KIND = Kind(
    name="receiver",
    doc="receiver-side packets/s and inter-packet delay",
    tool="`udpprobe` with arrival times",
    params=(
        *base.ENDPOINTS,
        Param("frame_size", "size", 1518, "Ethernet frame bytes (header + FCS included)"),
        Param("ip_payload", "size", None, "IP payload bytes (UDP header + data)"),
        Param("size", "size", None, "UDP data bytes"),
        Param("rate", "rate", "10mbit", "offered rate of IP payload"),
        Param("duration", "number", 2, "seconds of traffic", max=3600),
        base.PACKETS,
        *base.CPU,
    ),
    metrics=(
        Metric("pps", "pkt/s", "datagrams received per second"),
        Metric("received", "count", "datagrams received"),
        Metric("lost", "count", "datagrams sent but not received"),
        Metric("offered_pps", "pkt/s", "datagrams per second asked of the sender"),
        Metric("sender_pps", "pkt/s", "datagrams per second the sender achieved"),
        Metric("ipd_mean_us", "us", "mean inter-packet delay at the receiver"),
        Metric("ipd_median_us", "us", "median inter-packet delay"),
        Metric("ipd_min_us", "us", "smallest inter-packet delay"),
        Metric("ipd_max_us", "us", "largest inter-packet delay"),
        Metric("ipd_p99_us", "us", "99th percentile inter-packet delay"),
        Metric("ipd_stdev_us", "us", "standard deviation of the inter-packet delay"),
        *base.CPU_METRICS,
    ),
    runner=run,
    check=check,
    measures="timing",
    host_reason="receiver timing of traffic paced below the link rate: the sender sets it",
)
