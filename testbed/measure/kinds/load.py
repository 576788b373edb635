"""Measurement kind `load`: an offered load (share of a line) of mixed IPv4/IPv6 UDP frames
through the router: what arrives, the loss, packets per second and the router's own CPU."""

from __future__ import annotations

from testbed.measure import router_stress
from testbed.measure.kinds._stress_shared import (
    MIX,
    PPS_INSTEAD,
    ROUTER_METRICS,
    STREAM_METRICS,
    check_mix,
    runner,
)
from testbed.measure.kinds.base import PACKETS, Kind, Metric, Param

KIND = Kind(
    name="load",
    doc="offered load of mixed IPv4/IPv6 UDP frames through a router: loss, pps, router CPU",
    tool="`udpprobe` (one paced sender and receiver per IP version and direction)",
    params=(
        *MIX,
        Param("load", "number", 0.5, "share of `line_rate` offered (0.1 = 10 %)", max=1.0),
        PPS_INSTEAD,
        PACKETS,
        Param("ipd", "bool", False, "one receiver per node for all the flows (bound to ::), "
              "timing every arrival: the mixed stream's inter-packet delay"),
    ),
    metrics=(
        *STREAM_METRICS,
        *ROUTER_METRICS,
        Metric("offered_load", "%", "share of the line offered (a fraction: 0.5 = 50 %)"),
        Metric("ipd_mean_us", "us", "mean inter-packet delay of the mixed stream (ipd = true)"),
        Metric("ipd_median_us", "us", "median inter-packet delay (ipd = true)"),
        Metric("ipd_p99_us", "us", "99th percentile inter-packet delay (ipd = true)"),
        Metric("ipd_stdev_us", "us", "standard deviation of the inter-packet delay"),
        Metric("offered_bps_wire", "bit/s", "offered bits per second on the wire (with "
               "preamble and gap; both directions when bidir)"),
    ),
    runner=runner(router_stress.offered_load),
    check=check_mix,
    measures="cost",
)
