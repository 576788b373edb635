"""Declarations shared by the router-stress kinds of dobrinov-2016 (load, maxtraffic, acl,
icmpload, exthdr, fragment, reset): parameters, metrics, checks, runners."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from testbed.api import TestbedLike
from testbed.measure.kinds.base import Context, Measured, Metric, Param, ParamProblem, Runner
from testbed.measure.router_stress import MIN_FRAME

MIX = (
    Param("client", "node", "h1", "the node that sends"),
    Param("server", "node", "h2", "the node that receives"),
    Param("ip", "ip", 4, "IP version when no ratio is given", choices=(4, 6)),
    Param("ratio", "ratio", None, "IPv4/IPv6 shares of the frames, e.g. \"90/10\" (unset: "
          "all on `ip`)"),
    Param("frame_size", "size", 1518, "Ethernet frame bytes incl. header and FCS (IPv6 at "
          "least 67: the paper's 64/67); above 1518 the sender's IP layer fragments"),
    Param("direction", "str", "forward", "forward (client to server) or bidir (both ways, "
          "each direction the same load)", choices=("forward", "bidir")),
    Param("line_rate", "rate", "fastethernet", "the line the load is a share of"),
    Param("duration", "number", 2, "seconds of traffic", max=3600.0),
    Param("ingress_mtu", "int", None, "MTU of the client's link to its router for the trial "
          "(e.g. 9000): larger datagrams then reach the router whole, which fragments IPv4 and "
          "answers IPv6 with Packet Too Big (the source fragments); unset: the topology's",
          max=65535),
)

DURATION = Param("duration", "number", 2, "seconds", max=3600.0)
"""The length of a paced stream (exthdr, fragment, icmpload; MIX has its own wording)."""

PPS_INSTEAD = Param("pps", "number", None, "frames per second instead of `load`",
                    max=10_000_000.0)
"""An offered load given as a frame rate (load, acl)."""


def through(router: str, server: str = "the receiver") -> tuple[Param, Param, Param]:
    """`client` (h1) sends through `router` (r1, meaning `router`) to `server` (h2)."""
    return (
        Param("client", "node", "h1", "the sender"),
        Param("server", "node", "h2", server),
        Param("router", "node", "r1", router),
    )


def paced(pps: float, doc: str) -> tuple[Param, Param]:
    """A paced stream: `pps` (default `pps`, meaning `doc`, at most a million) for DURATION."""
    return Param("pps", "number", pps, doc, max=1_000_000.0), DURATION


Measure = Callable[[TestbedLike, Mapping[str, Any], Context],
                   tuple[dict[str, float], dict[str, Any]]]


def runner(measure: Measure) -> Runner:
    """A kind's runner from a function that returns (metrics, result document)."""

    def run(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
        metrics, doc = measure(tb, p, ctx)
        return Measured(metrics, doc)

    return run


STREAM_METRICS = (
    Metric("offered_pps", "pkt/s", "frames per second asked of the senders (all flows)"),
    Metric("sender_pps", "pkt/s", "frames per second the senders achieved"),
    Metric("received_pps", "pkt/s", "frames per second received (all flows)"),
    Metric("loss_percent", "%", "frames sent but not received"),
    Metric("received_bps", "bit/s", "UDP data received per second (the paper's application "
           "traffic)"),
    Metric("attempted", "count", "datagrams offered"),
    Metric("received", "count", "datagrams received"),
    Metric("v{ip}_received_bps", "bit/s", "UDP data received per second of one IP version"),
    Metric("v{ip}_loss_percent", "%", "loss of one IP version's flows"),
)

ROUTER_METRICS = (
    Metric("router_cpu_pct", "%", "the router's forwarding CPU: run time of its interfaces' "
           "threaded-NAPI kernel threads, % of one CPU (routercpu.py)"),
    Metric("hosts_napi_cpu_pct", "%", "the end hosts' receive threads, % of one CPU (apart)"),
    Metric("router_us_per_packet", "us", "router run time per frame received"),
)


def check_mix(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    """A frame must carry a byte of UDP data over IPv4 (64 B); IPv6 frames are raised to 67."""
    if int(out["frame_size"]) < MIN_FRAME[4]:
        raise ParamProblem("frame_size", f"a {out['frame_size']}-byte frame is below "
                           "Ethernet's minimum of 64", "frame_size >= 64 (IPv6 sends 67)")
