"""Measurement kind `routerprofile`: one router profile (plain forwarding, conntrack, firewall,
NAT, VPN) on its own topology: TCP throughput, one-way delay and CPU (gometz-2015 go:10)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.api import TestbedLike
from testbed.measure.kinds import base
from testbed.measure.kinds._nested import built
from testbed.measure.kinds.base import Kind, Metric, Param

PLAIN = "plain"  # every profile parameter of the topology left false
PORT = 5201  # the firewall profile lets tcp/5201 through


def profiles(topology: str) -> list[str]:
    """ "plain" and the topology's boolean parameters (each switches one profile's features
    on: topologies/router-profile.toml has conntrack, firewall, nat and vpn)."""
    from testbed.tomlfile import read_toml
    from testbed.topology import find_topology

    path = find_topology(topology)
    raw = read_toml(path, "topology", "a path such as topologies/router-profile.toml")
    params = raw.get("params", {})
    return [PLAIN, *(k for k, v in params.items() if isinstance(v, bool))]


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    have = profiles(str(out["topology"]))
    if out["profile"] not in have:
        raise base.ParamProblem("profile", f"{out['topology']} has no profile {out['profile']!r}",
                           ", ".join(have))  # fmt: skip


def kernel_needs(p: Mapping[str, Any]) -> tuple[str, ...]:
    """What the profile's features need of the kernel (vpn: esp), the others switched off."""
    from testbed.features import kernel_needs_of_file
    from testbed.topology import find_topology

    topology = str(p["topology"])
    switches = {k: k == p["profile"] for k in profiles(topology) if k != PLAIN}
    return kernel_needs_of_file(find_topology(topology), switches)


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    del tb  # the profile builds its own topology
    from testbed.measure import kinds

    ip = int(p["ip"])
    here = "routerprofile"
    profile = str(p["profile"])
    switch = {} if profile == PLAIN else {profile: "true"}
    with built(str(p["topology"]), switch) as ptb:
        pctx = base.Context(python=ctx.python, first_port=PORT)
        flow = kinds.validate_params(
            "iperf3",
            {"client": "h1", "server": "h2", "ip": ip, "protocol": "tcp",
             "duration": p["duration"], "cpu": bool(p["cpu"])},
            here, "measurement",
        )  # fmt: skip
        thr = kinds.measure("iperf3", ptb, flow, pctx)
        echo = kinds.validate_params(
            "ping",
            {"client": "h1", "server": "h2", "ip": ip, "count": p["count"], "interval": 0.01},
            here, "measurement",
        )  # fmt: skip
        lat = kinds.measure("ping", ptb, echo, pctx)
    metrics = {"throughput_bps": thr.metrics["receiver_bps"]}
    if "rtt_median_ms" in lat.metrics:
        metrics["rtt_median_ms"] = lat.metrics["rtt_median_ms"]
        metrics["owd_ms"] = lat.metrics["rtt_median_ms"] / 2
    metrics["loss_percent"] = lat.metrics["loss_percent"]
    metrics.update({k: v for k, v in thr.metrics.items() if k.startswith("cpu_")})
    return base.Measured(metrics, {"profile": p["profile"], "iperf3": thr.result,
                                   "ping": lat.result})


KIND = Kind(
    name="routerprofile",
    doc="a router profile's TCP throughput, one-way delay (half the ping round trip) and CPU",
    tool="iperf3, ping; profiles are features of topologies/router-profile.toml",
    params=(
        Param("profile", "str", PLAIN, "plain, or a boolean parameter of the topology"),
        Param("ip", "ip", 4, "IP version of the traffic", choices=(4, 6)),
        Param("duration", "number", 5, "seconds of TCP traffic", max=3600.0),
        Param("count", "int", 100, "echo requests for the delay", max=100_000),
        Param("cpu", "bool", True, "sample CPU use during the TCP transfer"),
        Param("topology", "str", "router-profile", "the topology (its params switch profiles)"),
    ),
    metrics=(
        Metric("throughput_bps", "bit/s", "TCP goodput h1 -> h2 through the router"),
        Metric("rtt_median_ms", "ms", "median ping round trip h1 -> h2"),
        Metric("owd_ms", "ms", "one-way delay: half the median round trip"),
        Metric("loss_percent", "%", "echo requests without a reply"),
        *base.CPU_METRICS,
    ),
    runner=run,
    check=check,
    kernel_needs=kernel_needs,
    measures="cost",
)
