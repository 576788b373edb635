"""The tier choice of `testbed reproduce`: per measurement and topology, the host kernel or the
full-kernel tier (on its virtual clock), and why — read from what the kinds declare
(`Kind.measures`, `Kind.host_reason`, `Kind.kernel_needs`) and what the topologies' features
need of the kernel."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testbed.measure.kinds import Kind

# testbed.measure.kinds, testbed.experiment and testbed.features are imported where they are
# used: the CLI imports this module to build its parser, for every command (a guest's too)

TIERS = ("auto", "host", "vm")
NETEM_FOR_DELAY = ("a delay measurement over shaped links needs per-packet serialization "
                   "(netem); tbf shapes throughput only")


@dataclass(frozen=True)
class Choice:
    """Where one measurement of one experiment runs (on some of its topologies), and why."""

    experiment: str
    measurement: str
    topologies: tuple[str, ...]
    tier: str  # "host" or "vm"
    clock: str  # "real" or "virtual"
    reason: str
    trials: int
    at_most: bool = False  # `trials` is a ceiling: a precision rule may stop cells earlier

    @property
    def spec(self) -> str:
        """EXPERIMENT:MEASUREMENT@TOPOLOGY+TOPOLOGY (what --only takes)."""
        return f"{self.experiment}:{self.measurement}@{'+'.join(self.topologies)}"


def timed_kinds(exp: Any) -> list[str]:
    """The kinds of `exp` that time delays or CPU costs (all but throughput): other trials'
    load on the same host changes their numbers (testbed.parallel's host workers)."""
    from testbed.measure import kinds

    return sorted({m.kind for m in exp.measurements if kinds.get(m.kind).measures != "throughput"})


def _shaped(exp: Any) -> bool:
    rate = exp.params.get("rate")
    rates = exp.topo_sweep.get("topology.rate", [rate])
    return any(r not in (None, "unlimited", 0) for r in rates) or rate is None


def _feature_kernel_needs(exp: Any, topo: str) -> tuple[str, ...]:
    """The kernel features a topology's [[features]] declare (e.g. sit, jool)."""
    from testbed.features import kernel_needs_of_file
    from testbed.topology import find_topology

    source = getattr(exp, "file", None)
    return kernel_needs_of_file(find_topology(topo, Path(source) if source else None))


def _kind_kernel_needs(m: Any, trials: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Topology -> the kernel features the trials of measurement `m` need by themselves (kinds
    that build their own topology declare them: a feature check of ipsec, a VPN profile)."""
    from testbed.measure import kinds

    hook = kinds.get(m.kind).kernel_needs
    out: dict[str, tuple[str, ...]] = {}
    if hook is None:
        return out
    asked: dict[str, tuple[str, ...]] = {}  # a hook may read files: once per distinct params
    for t in trials:
        if t.measurement.name == m.name:
            key = json.dumps(t.params, sort_keys=True, default=str)
            if key not in asked:
                asked[key] = hook(t.params)
            have = out.get(t.topo.topology, ())
            out[t.topo.topology] = have + tuple(f for f in asked[key] if f not in have)
    return out


def _tier(kind: Kind, needs: list[tuple[str, str]],
          missing: Callable[[Sequence[str]], list[str]], forced: str) -> tuple[str, str]:
    """(tier, reason) of one measurement on one topology that needs `needs` (feature, why)."""
    features = list(dict.fromkeys(f for f, _ in needs))
    lacking = missing(features) if features else []
    why = "; ".join(w for f, w in needs if f in lacking)
    if forced != "auto":
        return forced, f"--tier {forced}" + (
            f" (the host lacks {', '.join(lacking)}: {why})" if lacking and forced == "host"
            else "")
    if lacking:
        return "vm", f"{why} - the host lacks {', '.join(lacking)}"
    if kind.virtual_reason:
        return "vm", kind.virtual_reason
    reason = (kind.host_reason if not features else "the host has " + ", ".join(features))
    return "host", reason or "the host has what it needs"


def choose(exp: Any, missing: Callable[[Sequence[str]], list[str]],
           forced: str = "auto") -> list[Choice]:
    """Per measurement and topology: the host kernel where it has what the measurement needs and
    its timing is faithful (e.g. throughput through tbf-shaped links), the full-kernel tier on
    its virtual clock otherwise (per-packet serialization delay needs netem; 6to4/ISATAP need
    sit, Jool its module). Topologies of one measurement on the same tier share one choice."""
    from testbed.experiment_spec import for_clock, plan
    from testbed.measure import kinds

    trials = plan(exp)
    virtual = for_clock(exp, "virtual")  # the VM tier runs on it: exact cells once
    once = {m.name: m.once for m in virtual.measurements if m.once}
    varies = {m.name: m.varies for m in virtual.measurements if m.varies}

    def count(ts: Sequence[Any]) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for t in ts:
            k = (t.measurement.name, t.topo.topology)
            out[k] = out.get(k, 0) + 1
        return out

    counts = {"host": count(trials), "vm": count(plan(virtual) if once else trials)}
    out = []
    for m in exp.measurements:
        kind = kinds.get(m.kind)
        own_needs = _kind_kernel_needs(m, trials)
        base: list[tuple[str, str]] = []  # (feature, why)
        if exp.params.get("delay") or exp.params.get("loss"):
            base.append(("netem", "links with delay/loss need netem"))
        if kind.measures == "delay" and _shaped(exp):
            base.append(("netem", NETEM_FOR_DELAY))
        groups: dict[tuple[str, str], list[str]] = {}  # (tier, reason) -> topologies
        for topo in (str(t) for t in m.where.get("topology", exp.topology)):
            needs = base + [(f, f"{topo} needs the kernel's {f}")
                            for f in _feature_kernel_needs(exp, topo)]
            needs += [(f, f"{m.name} builds what needs {f}")
                      for f in own_needs.get(topo, ()) if f not in (g for g, _ in needs)]
            groups.setdefault(_tier(kind, needs, missing, forced), []).append(topo)
        for (tier, reason), ts in groups.items():
            n = sum(counts[tier].get((m.name, t), 0) for t in ts)
            if tier == "vm" and m.name in once:
                reason += "; each cell once: exact on the virtual clock"
            if tier == "vm" and m.name in varies:
                reason += f"; repeated on the virtual clock: {varies[m.name].split(':', 1)[0]}"
            rule = None if tier == "vm" and m.name in once else m.precision
            if rule is not None:
                reason += f"; at most, as it {rule.describe()}"
            out.append(Choice(exp.name, m.name, tuple(ts), tier,
                              "virtual" if tier == "vm" else "real", reason, n,
                              rule is not None))
    return out
