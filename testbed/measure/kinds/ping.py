"""Measurement kind `ping`: ICMP echo round trips with the system's ping."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from testbed import waiting
from testbed.api import TestbedLike
from testbed.measure import ping_tool
from testbed.measure.kinds import base
from testbed.measure.kinds.base import Kind, Metric, Param


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    base.one_size(out, given)
    base.fits(out, [int(out["ip"])], "icmp")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    ip_v = int(p["ip"])
    size = (
        ping_tool.icmp_data_size(int(p["frame_size"]), ip_v)
        if p.get("frame_size") is not None
        else int(p.get("size") or 56)
    )
    argv = ping_tool.ping_argv(tb.address(p["server"], ip_v), ip=ip_v, size=size,
                          count=int(p["count"]), interval_s=float(p["interval"]))
    proc = tb.run(p["client"], argv, check=False,
                  timeout=waiting.process_timeout(float(p["count"]) * 2 + 30))
    r = ping_tool.parse_ping(proc.stdout)
    metrics = {"loss_percent": r.loss_percent, "icmp_data": float(size)}
    if r.rtts_ms:
        metrics.update({
            "rtt_min_ms": min(r.rtts_ms),
            "rtt_mean_ms": statistics.fmean(r.rtts_ms),
            "rtt_max_ms": max(r.rtts_ms),
            "rtt_median_ms": statistics.median(r.rtts_ms),
        })
    return base.Measured(metrics, {"argv": argv, **r.to_dict()})


KIND = Kind(
    name="ping",
    doc="ICMP echo round trips (ping)",
    tool="`ping` (text parser)",
    params=(
        *base.ENDPOINTS,
        Param("frame_size", "size", None, "Ethernet frame bytes (-s frame - 18 - IP header - 8)"),
        Param("size", "size", None, "ICMP data bytes (ping -s; default 56)"),
        Param("count", "int", 120, "echo requests", max=10_000_000),
        Param("interval", "number", 0.01, "seconds between requests", max=60),
    ),
    metrics=(
        Metric("loss_percent", "%", "echo requests without a reply"),
        Metric("icmp_data", "B", "ICMP data bytes of each request"),
        Metric("rtt_min_ms", "ms", "smallest round trip"),
        Metric("rtt_mean_ms", "ms", "mean round trip"),
        Metric("rtt_max_ms", "ms", "largest round trip"),
        Metric("rtt_median_ms", "ms", "median round trip"),
    ),
    runner=run,
    check=check,
    measures="delay",
)
