"""The gometz-2015 feature matrix (feature x IPv4/IPv6 -> works / fails / not supported, with
the evidence, beside the paper's documentation study) and the router-profile table."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed import results

# check -> (what the matrix row says, the paper's finding for VyOS, for pfSense; sec. 6.4)
PAPER_FEATURES: dict[str, tuple[str, str, str]] = {
    "nat": ("source/destination NAT", "yes (CLI)", "yes (web GUI)"),
    "nptv6": ("NPTv6 (IPv6 prefix translation)", "yes", "not mentioned"),
    "dhcp-server": ("DHCP server / DHCPv6", "yes / yes", "yes / yes"),
    "dhcp-relay": ("DHCP relay", "yes", "yes"),
    "slaac": ("SLAAC (router advertisements)", "not studied", "not studied"),
    "firewall": ("firewall, IPv4 and IPv6", "yes (netfilter; groups IPv4 only)", "yes"),
    "ipsec": ("IPsec VPN", "yes", "yes"),
    "qos": ("QoS: tc HTB", "yes (tc)", "not described"),
    "qos-hfsc": ("QoS: tc HFSC", "yes (tc)", "not described"),
}
ORDER = tuple(PAPER_FEATURES)


@dataclass
class Cell:
    """One feature on one IP version, over its trials."""

    status: str  # works / fails / not supported / mixed (n of m work) / not measured
    n: int = 0
    evidence: str = ""  # one line: what proved it (or why not)
    detail: str = ""  # the first trial's checks as JSON


@dataclass
class FeatureRow:
    check: str
    label: str
    vyos: str
    pfsense: str
    cells: dict[int, Cell] = field(default_factory=dict)


def _evidence_line(check: dict[str, Any]) -> str:
    """What one check result shows, in a line."""
    if check.get("status") != "works":
        return str(check.get("reason") or check.get("status"))
    ev = check.get("evidence", {})
    parts: list[str] = []
    for key in ("arrived_from", "on_the_wire", "received_bps", "counters_delta", "lease"):
        v = ev.get(key) or (ev.get("snat") or {}).get(key)
        if not v:
            continue
        if key == "received_bps":
            v = {k: f"{x / 1e6:.2f} Mbit/s" for k, x in v.items()}
        if key == "counters_delta":
            v = {k: x for k, x in v.items() if k.startswith(("allow", "deny")) and x}
        parts.append(f"{key}: {json.dumps(v, sort_keys=True)}")
    for key in ("dnat0", "allowed", "denied"):
        if key in ev:
            d = ev[key]
            parts.append(f"{key}: {d.get('to')} {d.get('received_bytes')} B")
    ping = ev.get("ping") or ev.get("outbound_ping") or (ev.get("snat") or {}).get("ping")
    if ping:
        parts.append(f"ping {ping.get('received')}/{ping.get('sent')}")
    return "; ".join(parts)


IPV6_ONLY = {"nptv6": "NPTv6 translates IPv6 prefixes only", "slaac": "SLAAC is IPv6 only"}


def _status(checks: Sequence[dict[str, Any]]) -> str:
    applied = [c for c in checks if c.get("status") != "not supported"]
    if not applied:
        return "not supported"
    return "works" if all(c.get("status") == "works" for c in applied) else "fails"


def feature_matrix(
    trials: Sequence[results.TrialRow], tier_of: Callable[[results.TrialRow], str] | None = None
) -> list[FeatureRow]:
    """Rows in the paper's order; a cell per IP version from the featurecheck trials. A
    trial's checks are grouped by the name each result carries (a DHCP server's trial holds
    its SLAAC link's results as "slaac"). Trials where the feature could not be built (not
    supported on that tier) do not count against trials of another tier where it could; the
    cell names the tiers (`tier_of`, e.g. host or vm)."""
    got: dict[tuple[str, int], list[tuple[str, list[dict[str, Any]]]]] = {}
    for t in trials:
        if t.kind != "featurecheck" or t.status != "ok" or not isinstance(t.result, dict):
            continue
        ip = int(t.result.get("ip", 0))
        tier = tier_of(t) if tier_of is not None else ""
        by_name: dict[str, list[dict[str, Any]]] = {}
        for c in t.result.get("checks") or []:
            if isinstance(c, dict):
                by_name.setdefault(str(c.get("feature")), []).append(c)
        for name, checks in by_name.items():
            got.setdefault((name, ip), []).append((tier, checks))
    if not got:
        return []
    rows = []
    for check in [*ORDER, *sorted({c for c, _ip in got} - set(ORDER))]:
        label, vyos, pf = PAPER_FEATURES.get(check, (check, "-", "-"))
        row = FeatureRow(check, label, vyos, pf)
        for ip in (4, 6):
            per_trial = got.get((check, ip), [])
            if not per_trial:
                if ip == 4 and check in IPV6_ONLY and (check, 6) in got:
                    row.cells[ip] = Cell("not supported", 0, IPV6_ONLY[check])
                else:
                    row.cells[ip] = Cell("not measured")
                continue
            row.cells[ip] = _cell(per_trial)
        rows.append(row)
    return rows


def _cell(per_trial: Sequence[tuple[str, list[dict[str, Any]]]]) -> Cell:
    statuses = [(tier, _status(c), c) for tier, c in per_trial]
    applied = [x for x in statuses if x[1] != "not supported"]
    use = applied or statuses
    works = sum(1 for x in use if x[1] == "works")
    kinds = {x[1] for x in use}
    status = next(iter(kinds)) if len(kinds) == 1 else f"mixed ({works} of {len(use)} work)"
    tiers = sorted({x[0] for x in use if x[0]})
    if tiers:
        status += " (" + ", ".join(tiers) + ")"
    other = sorted({x[0] for x in statuses if x[1] == "not supported" and x[0]} - set(tiers))
    first = next((x for x in use if x[1] != "works"), use[0])
    line = "; ".join(_evidence_line(c) for c in first[2])
    if applied and other:
        line += f" [not supported on {', '.join(other)}]"
    return Cell(status, len(use), line, json.dumps(first[2], sort_keys=True)[:4000])


@dataclass
class ProfileRow:
    profile: str
    ip: int
    n: int
    throughput_mbps: float | None
    owd_ms: float | None
    cpu_softirq_system_pct: float | None
    vs_plain: float | None  # throughput / plain's, same IP version


PROFILE_ORDER = ("plain", "conntrack", "firewall", "nat", "vpn")


def profile_table(trials: Sequence[results.TrialRow]) -> list[ProfileRow]:
    """Mean throughput, one-way delay and CPU (softirq + system) per profile and version."""
    vals: dict[tuple[str, int], dict[str, list[float]]] = {}
    for t in trials:
        if t.kind != "routerprofile" or t.status != "ok":
            continue
        key = (str(t.point.get("profile", t.result.get("profile"))), int(t.point.get("ip", 4)))
        m = vals.setdefault(key, {"thr": [], "owd": [], "cpu": []})
        if "throughput_bps" in t.metrics:
            m["thr"].append(t.metrics["throughput_bps"] / 1e6)
        if "owd_ms" in t.metrics:
            m["owd"].append(t.metrics["owd_ms"])
        if "cpu_machine_softirq_pct" in t.metrics:
            m["cpu"].append(
                t.metrics["cpu_machine_softirq_pct"] + t.metrics.get("cpu_machine_system_pct", 0)
            )

    def mean(x: list[float]) -> float | None:
        return statistics.fmean(x) if x else None

    rows = []
    keys = sorted(vals, key=lambda k: (k[1], PROFILE_ORDER.index(k[0]) if k[0] in
                                        PROFILE_ORDER else 99, k[0]))  # fmt: skip
    for prof, ip in keys:
        m = vals[(prof, ip)]
        plain = mean(vals.get(("plain", ip), {}).get("thr", []))
        thr = mean(m["thr"])
        rows.append(ProfileRow(prof, ip, len(m["thr"]), thr, mean(m["owd"]), mean(m["cpu"]),
                               thr / plain if thr is not None and plain else None))  # fmt: skip
    return rows


def matrix_text(rows: Sequence[FeatureRow]) -> str:
    """The matrix as a Markdown table (for notes and the terminal)."""
    out = ["| feature | paper: VyOS | paper: pfSense | ours IPv4 | ours IPv6 |",
           "|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        c4, c6 = r.cells[4], r.cells[6]
        out.append(f"| {r.label} | {r.vyos} | {r.pfsense} | {c4.status} (n={c4.n}) | "
                   f"{c6.status} (n={c6.n}) |")  # fmt: skip
    return "\n".join(out)


def profile_text(rows: Sequence[ProfileRow]) -> str:
    def f(v: float | None, d: int) -> str:
        return "-" if v is None else f"{v:.{d}f}"

    out = ["| profile | IP | n | TCP Mbit/s | vs plain | OWD ms | CPU softirq+system % |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cpu = f(r.cpu_softirq_system_pct, 1)
        out.append(f"| {r.profile} | IPv{r.ip} | {r.n} | {f(r.throughput_mbps, 0)} | "
                   f"{f(r.vs_plain, 3)} | {f(r.owd_ms, 4)} | {cpu} |")  # fmt: skip
    return "\n".join(out)
