"""Measurement kind `icmpload`: echo requests to the router itself at a set rate and size;
the router's CPU answering them (ICMPv4 vs ICMPv6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.measure import echo_load
from testbed.measure.kinds._stress_shared import DURATION, ROUTER_METRICS, runner
from testbed.measure.kinds.base import Kind, Metric, Param, ParamProblem

HEADERS = {4: 20 + 8, 6: 40 + 8}  # IP + ICMP echo header


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    """An echo request must fit one 1500-byte packet (the raw sender does not fragment)."""
    ip, size = int(out["ip"]), int(out["size"])
    if size + HEADERS[ip] > 1500:
        raise ParamProblem("size", f"{size} data bytes make a {size + HEADERS[ip]}-byte "
                           f"ICMPv{ip} packet, above the 1500-byte MTU (ip = {ip})",
                           f"size <= {1500 - HEADERS[ip]} for ICMPv{ip} (1472 for ICMPv4, "
                           "1452 for ICMPv6)")


KIND = Kind(
    name="icmpload",
    doc="ICMP echo load on the router: its CPU per rate and size, ICMPv4 vs ICMPv6",
    tool="echo requests packed with struct (the bytes scapy builds), paced from a raw socket "
         "(`python -m testbed.measure.exthdr_packets`); the router's ICMP counters",
    params=(
        Param("client", "node", "h2", "the node that sends the echo requests"),
        Param("target", "node", "r1", "the router they are addressed to"),
        Param("ip", "ip", 4, "ICMPv4 or ICMPv6", choices=(4, 6)),
        Param("pps", "number", 1000, "echo requests per second", max=100_000.0),
        Param("size", "size", 100, "ICMP data bytes (ping -s)"),
        DURATION,
    ),
    metrics=(
        Metric("echo_pps", "pkt/s", "echo requests the router received per second"),
        Metric("reply_pps", "pkt/s", "echo replies the router sent per second"),
        Metric("loss_percent", "%", "requests the router did not answer"),
        Metric("icmp_data", "B", "ICMP data bytes"),
        Metric("router_us_per_echo", "us", "router run time per answered request: the lower "
               "quartile over 20 parts of the traffic (its steady cost)"),
        Metric("router_us_per_echo_mean", "us", "router run time per answered request over the "
               "whole traffic, rare events included"),
        *ROUTER_METRICS,
    ),
    runner=runner(echo_load.icmp_load),
    check=check,
    measures="cost",
    virtual_reason="the router's CPU per echo request is a cost: on the virtual clock a count "
                   "of instructions; on the host's clock it moved by ±15 % between 2 s "
                   "repetitions and do:10's ICMPv6-vs-ICMPv4 verdict flipped between quick runs",
    virtual_exact=("on the virtual clock a 4000/s cell's router cost per echo repeats within "
                   "0.01 % across boots and host loads, a 100/s cell's within 0.1 %: the "
                   "router's entry for the client is pinned, the guest settles before the "
                   "echoes, the sender starts on a 100 ms grid, a held-up sender's trial runs "
                   "again, and the cost is the lower quartile of 20 parts of the traffic "
                   "(docs/vm.md)"),
)
