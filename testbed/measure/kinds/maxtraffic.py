"""Measurement kind `maxtraffic`: the most frames per second of an IPv4/IPv6 mix that cross
the router with zero loss (binary search), with the router's CPU at that rate."""

from __future__ import annotations

from testbed.measure import router_stress
from testbed.measure.kinds._stress_shared import MIX, ROUTER_METRICS, check_mix, runner
from testbed.measure.kinds.base import Kind, Metric, Param

KIND = Kind(
    name="maxtraffic",
    doc="zero-loss maximum of an IPv4/IPv6 mix through a router (pps, Mbit/s, router CPU)",
    tool="`udpprobe` senders and receivers; the RFC 2544 search of rfc2544_search.py",
    params=(
        *MIX,
        Param("resolution", "number", 0.02, "search resolution, share of the line's frame "
              "rate", max=1.0),
        Param("max_trials", "int", 12, "most search trials", max=100),
    ),
    metrics=(
        Metric("line_pps", "pkt/s", "frames per second the line carries at this frame size"),
        Metric("max_pps", "pkt/s", "zero-loss maximum, frames per second per direction"),
        Metric("max_received_bps", "bit/s", "UDP data per second received at the maximum "
               "(all directions)"),
        Metric("received_pps", "pkt/s", "frames per second received at the maximum"),
        Metric("v{ip}_received_bps", "bit/s", "one IP version's UDP data at the maximum"),
        Metric("search_trials", "count", "trials the search took"),
        Metric("generator_limited", "flag", "1: the senders, not the router, set the limit"),
        *ROUTER_METRICS,
    ),
    runner=runner(router_stress.max_traffic),
    check=check_mix,
    measures="cost",
)
