"""Measurement kind `acl`: an ACL (nftables rules with a counter each) on the router's ingress,
egress or both interfaces for one trial, under an offered load or a zero-loss search; the
router's CPU, the traffic, and the counters that prove every packet walked every rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.api import TestbedLike
from testbed.measure import acl_rules, router_stress
from testbed.measure.kinds import base
from testbed.measure.kinds._stress_shared import (
    MIX,
    PPS_INSTEAD,
    ROUTER_METRICS,
    STREAM_METRICS,
    check_mix,
)
from testbed.measure.kinds.base import Kind, Metric, Param


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    check_mix(out, given)
    if not out["acl"] and ("rules" in given or "apply" in given):
        raise base.ParamProblem("acl", "acl = false (no ACL) with rules or apply given",
                           "acl = true, or leave out rules and apply for the baseline")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    router = str(p["router"])
    in_if = router_stress.iface_towards(tb, router, str(p["client"]))
    out_if = router_stress.iface_towards(tb, router, str(p["server"]))
    families = {v for v, _share in router_stress.ratio_shares(p.get("ratio"), int(p["ip"]))}
    dst = {v: tb.address(str(p["server"]), v) for v in families}
    rules = int(p["rules"]) if p["acl"] else 0
    with acl_rules.Acl(tb, router, rules, str(p["apply"]), in_if, out_if, dst,
                 ctx.folder(tb)) as scope:
        if p["test"] == "max":
            metrics, doc = router_stress.max_traffic(tb, p, ctx)
        else:
            metrics, doc = router_stress.offered_load(tb, p, ctx)
        counters = scope.counters()
    metrics.update(acl_rules.walked_metrics(counters, families))
    metrics["acl_rules"] = float(rules)
    return base.Measured(metrics, {**doc, "acl": {"rules": rules, "apply": p["apply"],
                                              "ruleset": scope.text, "counters": counters}})


KIND = Kind(
    name="acl",
    doc="ACL cost: nftables rule sets (0, 1, 25 lines) on the router's ingress/egress/both",
    tool="`nft` rule sets with a counter per rule; `udpprobe` traffic",
    params=(
        *MIX,
        Param("router", "node", "r1", "the router that gets the ACL"),
        Param("acl", "bool", True, "false: no ACL at all (the baseline)"),
        Param("rules", "int", 25, "lines per IP version: rules-1 deny other destinations, the "
              "last permits the traffic's", max=10_000),
        Param("apply", "str", "in", "in (ingress interface), out (egress) or both",
              choices=acl_rules.APPLY),
        Param("test", "str", "load", "load: a fixed offered load; max: zero-loss search",
              choices=("load", "max")),
        Param("load", "number", 0.5, "share of `line_rate` offered (test = load)", max=1.0),
        PPS_INSTEAD,
        Param("resolution", "number", 0.02, "search resolution (test = max)", max=1.0),
        Param("max_trials", "int", 12, "most search trials (test = max)", max=100),
    ),
    metrics=(
        *STREAM_METRICS,
        *ROUTER_METRICS,
        Metric("offered_load", "%", "share of the line offered (a fraction)"),
        Metric("offered_bps_wire", "bit/s", "offered bits per second on the wire"),
        Metric("line_pps", "pkt/s", "frames per second the line carries (test = max)"),
        Metric("max_pps", "pkt/s", "zero-loss maximum (test = max)"),
        Metric("max_received_bps", "bit/s", "UDP data per second at the maximum"),
        Metric("search_trials", "count", "search trials (test = max)"),
        Metric("generator_limited", "flag", "1: the senders set the limit (test = max)"),
        Metric("acl_rules", "count", "ACL lines per IP version"),
        Metric("acl_rule_visits", "count", "packets counted by all ACL lines together"),
        Metric("acl_min_rule_packets", "count", "the fewest packets any line of the traffic's "
               "IP versions counted (each of them read every line)"),
        Metric("acl_lines", "count", "ACL lines with a counter (all chains)"),
    ),
    runner=run,
    check=check,
    programs=("nft",),
    measures="cost",
)
