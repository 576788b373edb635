"""Measurement kind `reset`: restart the router (interfaces down/up, or its namespace destroyed
and rebuilt) while a constant stream flows; the outage from the receiver's packet timestamps,
`count` times per trial (the paper: 5 each, compared with a one-way ANOVA in claim do:8)."""

from __future__ import annotations

from testbed.measure import router_reset
from testbed.measure.kinds._stress_shared import runner, through
from testbed.measure.kinds.base import Kind, Metric, Param

KIND = Kind(
    name="reset",
    doc="router restart (links down/up vs namespace rebuilt): outage at the receiver",
    tool="`udpprobe` stream with arrival timestamps; `ip link`, the topology's plan",
    params=(
        *through("the router restarted"),
        Param("ip", "ip", 4, "IP version of the stream", choices=(4, 6)),
        Param("method", "str", "links", "links (interfaces down and up: the software reset) or "
              "namespace (destroyed and rebuilt: the hardware reset)",
              choices=router_reset.METHODS),
        Param("count", "int", 5, "restarts per trial", max=1000),
        Param("pps", "number", 1000, "stream datagrams per second", max=1_000_000.0),
        Param("size", "size", 100, "UDP data bytes"),
        Param("timeout", "number", 3, "seconds the stream may be out before the trial fails",
              max=600.0),
        Param("pre_s", "number", 0.5, "seconds of stream before the restart", max=60.0),
    ),
    metrics=(
        Metric("outage_mean_ms", "ms", "mean outage (largest gap between arrivals)"),
        Metric("outage_max_ms", "ms", "longest outage"),
        Metric("outage_min_ms", "ms", "shortest outage"),
        Metric("outage_{n}_ms", "ms", "outage of restart n"),
        Metric("lost_mean", "count", "datagrams lost per restart"),
        Metric("restart_call_mean_ms", "ms", "how long the restart itself took"),
        Metric("timeout_s", "s", "the trial's timeout"),
    ),
    runner=runner(router_reset.outages),
    measures="timing",
)
