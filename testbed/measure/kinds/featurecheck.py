"""Measurement kind `featurecheck`: a router feature's functional check (gometz-2015 go:6-go:9)
on one IP version, on its own topology built for the trial: works / fails / not supported."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.errors import MissingCapability
from testbed.measure.kinds._nested import built
from testbed.measure.kinds.base import Context, Kind, Measured, Metric, Param, TestbedLike

# check name -> (the topology that builds it, the feature kind whose check runs, the result
# name kept: a dhcp-server's results for its SLAAC link are "slaac"), and its IP versions
CHECKS: dict[str, tuple[str, str, str]] = {
    "nat": ("router-nat", "nat", "nat"),
    "nptv6": ("router-nptv6", "nptv6", "nptv6"),
    "firewall": ("router-firewall", "firewall", "firewall"),
    "dhcp-server": ("router-dhcp", "dhcp-server", "dhcp-server"),
    "dhcp-relay": ("router-dhcp-relay", "dhcp-relay", "dhcp-relay"),
    "slaac": ("router-dhcp", "dhcp-server", "slaac"),
    "qos": ("router-qos", "qos", "qos"),
    "qos-hfsc": ("router-qos-hfsc", "qos-hfsc", "qos-hfsc"),
    "ipsec": ("router-ipsec", "ipsec", "ipsec"),
}
IPV6_ONLY = {
    "nptv6": "NPTv6 translates IPv6 prefixes only (IPv4 uses NAT)",
    "slaac": "SLAAC (router advertisements) configures IPv6 only",
}
STATUS = {"works": 1.0, "fails": 0.0, "not supported": -1.0}


def outcome(results: list[dict[str, Any]]) -> str:
    """One status of several results: not supported if none applies, else works if all do."""
    applied = [r for r in results if r["status"] != "not supported"]
    if not applied:
        return "not supported"
    return "works" if all(r["status"] == "works" for r in applied) else "fails"


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    del tb, ctx  # the check builds its own topology
    from testbed.features import _router

    name = str(p["feature"])
    topology, kind, keep = CHECKS[name]
    topology = str(p.get("topology") or topology)
    ip = int(p["ip"])
    if ip == 4 and name in IPV6_ONLY:
        status = "not supported"
        doc = {"feature": name, "ip": ip, "status": status, "evidence": {},
               "reason": IPV6_ONLY[name]}  # fmt: skip
        return Measured({"status": STATUS[status], "works": 0.0},
                        {"feature": name, "ip": ip, "topology": topology, "status": status,
                         "checks": [doc]})  # fmt: skip
    try:
        with built(topology) as ftb:
            results = [
                r.to_dict()
                for r in _router.run_checks(ftb, ftb.plan.features, kind, (ip,))
                if r.feature == keep
            ]
    except MissingCapability as exc:
        results = [{"feature": name, "ip": ip, "status": "not supported", "evidence": {},
                    "reason": str(exc).splitlines()[0]}]  # fmt: skip
    if not results:
        why = f"{topology} has no {kind} feature whose check gives {keep}"
        results = [{"feature": name, "ip": ip, "status": "not supported", "evidence": {},
                    "reason": why}]  # fmt: skip
    status = outcome(results)
    return Measured(
        {"status": STATUS[status], "works": 1.0 if status == "works" else 0.0},
        {"feature": name, "ip": ip, "topology": topology, "status": status, "checks": results},
    )


KIND = Kind(
    name="featurecheck",
    doc="a router feature's functional check (traffic + counters/captures), one IP version",
    tool="nft counters, ping, iperf3, tc, dnsmasq leases, xfrm",
    params=(
        Param("feature", "str", "nat", "the check", choices=tuple(CHECKS)),
        Param("ip", "ip", 4, "IP version checked", choices=(4, 6)),
        Param("topology", "str", None, "the topology it builds (default: the check's own)"),
    ),
    metrics=(
        Metric("status", "flag", "1 works, 0 fails, -1 not supported (here or for the version)"),
        Metric("works", "flag", "1 when the feature worked on this IP version"),
    ),
    runner=run,
)
