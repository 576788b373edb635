"""Measurement kind `featurecheck`: a router feature's functional check (gometz-2015 go:6-go:9)
on one IP version, on its own topology built for the trial: works / fails / not supported."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testbed.api import TestbedLike
from testbed.errors import MissingCapability
from testbed.measure.kinds import base
from testbed.measure.kinds._nested import built
from testbed.measure.kinds.base import Kind, Metric, Param

STATUS = {"works": 1.0, "fails": 0.0, "not supported": -1.0}


def checkable() -> dict[str, str]:
    """Feature kind -> the topology its check builds: the features that declare one."""
    from testbed import features

    found = {kind: getattr(cls, "check_topology", "") for kind, cls in features.registry().items()}
    return {kind: str(top) for kind, top in sorted(found.items()) if top}


def outcome(results: Sequence[Mapping[str, Any]]) -> str:
    """One status of several results: not supported if none applies, else works if all do."""
    applied = [r for r in results if r["status"] != "not supported"]
    if not applied:
        return "not supported"
    return "works" if all(r["status"] == "works" for r in applied) else "fails"


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    have = checkable()
    if out["feature"] not in have:
        raise base.ParamProblem("feature", f"no check for {out['feature']!r}", ", ".join(have))


def kernel_needs(p: Mapping[str, Any]) -> tuple[str, ...]:
    """What the check's own topology needs of the kernel (e.g. ipsec: esp)."""
    from testbed.features import kernel_needs_of_file
    from testbed.topology import find_topology

    topology = str(p.get("topology") or checkable().get(str(p["feature"]), ""))
    return kernel_needs_of_file(find_topology(topology)) if topology else ()


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    del tb, ctx  # the check builds its own topology
    kind = str(p["feature"])
    topology = str(p.get("topology") or checkable()[kind])
    ip = int(p["ip"])
    results: list[dict[str, Any]] = []
    try:
        with built(topology) as ftb:
            found = [f for f in ftb.plan.features if f.kind == kind]
            for f in found:
                res = f.check(ftb, ip, ftb.plan.features).to_dict()  # a RouterFeature's
                res["evidence"].setdefault("node", f.node)
                results.append(res)
    except MissingCapability as exc:
        results = [{"feature": kind, "ip": ip, "status": "not supported", "evidence": {},
                    "reason": str(exc).splitlines()[0]}]  # fmt: skip
    if not results:
        results = [{"feature": kind, "ip": ip, "status": "not supported", "evidence": {},
                    "reason": f"{topology} has no {kind} feature"}]  # fmt: skip
    status = outcome(results)
    return base.Measured(
        {"status": STATUS[status], "works": 1.0 if status == "works" else 0.0},
        {"feature": kind, "ip": ip, "topology": topology, "status": status, "checks": results},
    )


KIND = Kind(
    name="featurecheck",
    doc="a router feature's functional check (traffic + counters), one IP version",
    tool="nft counters, ping, iperf3, tc, dnsmasq leases, xfrm (the feature's own check)",
    params=(
        Param("feature", "str", "nat", "the feature kind checked (one with a check topology)"),
        Param("ip", "ip", 4, "IP version checked", choices=(4, 6)),
        Param("topology", "str", None, "the topology it builds (default: the feature's own)"),
    ),
    metrics=(
        Metric("status", "flag", "1 works, 0 fails, -1 not supported (here or for the version)"),
        Metric("works", "flag", "1 when the feature worked on this IP version"),
    ),
    runner=run,
    check=check,
    kernel_needs=kernel_needs,
    measures="function",
)
