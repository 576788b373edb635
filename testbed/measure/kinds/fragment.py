"""Measurement kind `fragment`: IPv4 datagrams through a router whose next link has a small
MTU (dobrinov-2016 topology B): fragments per datagram on that link, fragments per second and
the router's CPU at a fixed packet rate. The MTU is set for the trial and restored after."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.measure import router_stress
from testbed.measure.kinds._stress_shared import (
    ROUTER_METRICS,
    STREAM_METRICS,
    paced,
    runner,
    through,
)
from testbed.measure.kinds.base import Kind, Metric, Param, ParamProblem


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    if int(out["frame_size"]) < 64:
        raise ParamProblem("frame_size", "below Ethernet's 64-byte minimum", "frame_size >= 64")
    if int(out["core_mtu"]) < 68:
        raise ParamProblem("core_mtu", f"{out['core_mtu']} is below IPv4's minimum MTU of 68 "
                           "(RFC 791)", "68 to 65535; IPv6 links need at least 1280")


KIND = Kind(
    name="fragment",
    doc="IPv4 fragmentation by a router: fragments per datagram and per second, router CPU",
    tool="`udpprobe` (IPv4); `ip -s link` and /proc/net/snmp (FragCreates) counters",
    params=(
        *through("the router that fragments"),
        Param("next_hop", "node", "r2", "the far end of the small-MTU link"),
        Param("core_mtu", "int", 1500, "MTU of the router-next_hop link for this trial (IPv4: "
              "68 and up; a link that carries IPv6 needs 1280: use topology two-routers-v4)",
              max=65535),
        Param("frame_size", "size", 1518, "Ethernet frame bytes the sender's datagram would "
              "fill (its IP datagram is frame_size - 18 bytes)"),
        *paced(5000, "datagrams per second (the paper: 5000)"),
    ),
    metrics=(
        *STREAM_METRICS,
        *ROUTER_METRICS,
        Metric("core_mtu", "B", "MTU of the small link"),
        Metric("ip_payload", "B", "IP payload of each datagram (UDP header + data)"),
        Metric("expected_fragments_per_datagram", "count", "fragments RFC 791 arithmetic "
               "predicts"),
        Metric("link_packets_per_datagram", "count", "packets received on the small link per "
               "datagram sent"),
        Metric("emitted_per_datagram", "count", "packets the router put onto the small link "
               "(its transmit counter, sent and dropped) per datagram sent"),
        Metric("fragments_per_datagram", "count", "FragCreates / FragOKs of the router"),
        Metric("fragmented_datagrams", "count", "datagrams the router fragmented"),
        Metric("fragment_failures", "count", "datagrams whose fragmentation failed midway "
               "(FragFails: the next link's queue full; their fragments count in FragCreates)"),
        Metric("fragments_per_s", "pkt/s", "fragments the router created per second"),
        Metric("router_pps_out", "pkt/s", "packets per second onto the small link"),
    ),
    runner=runner(router_stress.fragmentation),
    check=check,
    measures="cost",
)
