"""Zeadally & Raicu 2004, end-system IPv6 stacks (Linux): its claims (ze:1-ze:9), its figures
(latency, throughput, stack costs, connections per second) and the numbers its text quotes."""
# ruff: noqa: RUF001  (claims and evidence keep the papers' minus, times and approx signs)

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from testbed.papers import Claim, Paper
from testbed.report.claims import (
    Data,
    Outcome,
    Status,
    cross_os,
    frac,
    mbps,
    not_measured,
    param,
    printed_trial,
    size_of,
)
from testbed.report.data import Dataset, metric
from testbed.report.figures import (
    Figure,
    Row,
    const,
    grouped,
    rows_of,
    select,
)
from testbed.report.tables import (
    Quote,
    any_point,
    both,
    change,
    ip_is,
    mean_text,
    per_label,
    proto_is,
    range_text,
)
from testbed.report.verdict import (
    cells_ratio,
    compare,
    describe_effect,
    judge,
    judge_all,
    mean_ci,
    ratio,
    shrinks,
    side,
)
from testbed.results import TrialRow


def _ze(d: Data, kind: str, protocol: str | None, metric: str) -> dict[tuple[Any, ...], float]:
    rows = [r for r in d.select(kind) if protocol is None or param(r, "protocol") == protocol]
    return d.means(rows, metric, lambda r: (int(param(r, "ip")), size_of(r)))


ZE1_TOLERANCE = ("every size's TCP throughput at or above 88 Mbit/s (sec. 4.1: about 93, the "
                 "line rate) and IPv4 − IPv6 inside 0 … 3 Mbit/s (the paper: about 1), by 95 % "
                 "intervals")


def ze_1(d: Data) -> Outcome:
    rows = [r for r in d.select("iperf3") if param(r, "protocol") == "tcp"]
    thr = d.cells(rows, "receiver_bps", lambda r: (int(param(r, "ip")), size_of(r)))
    if not thr:
        return not_measured("TCP throughput (iperf3)")
    exact = d.exact_rows(rows)
    states = []
    cis = {k: mean_ci(v, exact) for k, v in thr.items()}
    for ci in cis.values():
        states.append(side(ci, 88e6, math.inf))
    low_k = min(thr, key=lambda k: statistics.fmean(thr[k]))
    ev = f"lowest TCP throughput {mbps(statistics.fmean(thr[low_k]))} Mbit/s at IPv{low_k[0]} " \
         f"{low_k[1]} B"
    ci = cis[low_k]
    ev += f" (95 % {mbps(ci.low)} … {mbps(ci.high)})" if ci else " (one repetition)"
    common = [s for ip, s in thr if ip == 4 and (6, s) in thr]
    gaps = [statistics.fmean(thr[(4, s)]) - statistics.fmean(thr[(6, s)]) for s in common]
    gap = mean_ci(gaps, exact) if len(gaps) >= 3 or exact else None
    states.append(side(gap, 0.0, 3e6) if common else "inconclusive")
    if gap is not None:
        ev += f"; IPv4 − IPv6 {mbps(gap.value)} Mbit/s (95 % {mbps(gap.low)} … {mbps(gap.high)}" \
              f", {len(gaps)} sizes)"
    status: Status = ("does not hold" if "does not hold" in states else "holds"
                      if all(x == "holds" for x in states) else "inconclusive")
    reason = "" if status != "inconclusive" else (
        "a size's interval straddles 88 Mbit/s or has one repetition, or the IPv4 − IPv6 gap "
        "has too few sizes: more repetitions would decide it")
    return Outcome(status, ev, reason, sum(len(v) for v in thr.values()), None, None,
                   ZE1_TOLERANCE)


ZE2_TOLERANCE = ("IPv6/IPv4 − 1 inside ±10 % at every size (TOST per size; ours: the paper "
                 "says 'similar' and prints no number)")
ZE4_TOLERANCE = ("TCP/UDP − 1 inside ±20 % at every (IP version, size) (TOST per cell; ours: "
                 "the paper says 'about equal')")


def _ze_cells(d: Data, kind: str, protocol: str, metric: str) -> dict[tuple[Any, ...], list[float]]:
    rows = [r for r in d.select(kind) if param(r, "protocol") == protocol]
    return d.cells(rows, metric, lambda r: (int(param(r, "ip")), size_of(r)))


def ze_2(d: Data) -> Outcome:
    thr = _ze_cells(d, "iperf3", "udp", "receiver_bps")
    common = sorted(s for ip, s in thr if ip == 4 and (6, s) in thr)
    if not common:
        return not_measured("UDP throughput of IPv4 and IPv6 at equal sizes")
    o = judge_all([(f"{s} B", ratio(thr[(4, s)], thr[(6, s)], exact=d.exact)) for s in common],
                  "within", 0.10, ZE2_TOLERANCE, "IPv6/IPv4 − 1 of UDP throughput")
    small = common[0]
    wire = -20 / (small + 8 + 40 + 38)  # 20 more header bytes a datagram, Ethernet 38 on the wire
    return replace(o, reason=o.reason or (
        "" if o.status == "holds" else f"on a saturated link IPv6's 20 more header bytes alone "
        f"cost {wire:+.1%} at {small} B"))


def ze_3(d: Data) -> Outcome:
    """The IPv6 deficit must shrink from 128 to 512 B: the difference of the two log ratios,
    with its interval."""
    thr = _ze_cells(d, "iperf3", "udp", "receiver_bps")
    need = [(ip, s) for ip in (4, 6) for s in (128, 512)]
    if not all(k in thr for k in need):
        return not_measured("UDP throughput of IPv4 and IPv6 at 128 and 512 B")
    small = ratio(thr[(4, 128)], thr[(6, 128)], exact=d.exact)
    large = ratio(thr[(4, 512)], thr[(6, 512)], exact=d.exact)
    arith = {s: (16 / s, 4 / s) for s in (128, 512)}
    ev = (f"address bytes per message: 128 B {arith[128][0]:.1%} vs {arith[128][1]:.1%}, 512 B "
          f"{arith[512][0]:.1%} vs {arith[512][1]:.2%}; measured IPv6/IPv4 − 1 of UDP "
          f"throughput: 128 B " + (describe_effect(small) if small else "no interval")
          + ", 512 B " + (describe_effect(large) if large else "no interval"))
    return replace(judge(shrinks(small, large), "above", 0.0, "the deficit shrinks: 512 B's "
                         "ratio over 128 B's above 0 (95 % interval; the paper's 12.5 % vs 3 %)",
                         "512 B over 128 B", needs="two or more repetitions at 128 and 512 B"),
                   evidence=ev)


def _rtt(d: Data, protocol: str) -> dict[tuple[Any, ...], float]:
    rtt = _ze(d, "pingpong", protocol, "rtt_median_us")
    if not rtt:  # results stored before rtt_* existed: the round trip is twice owd
        rtt = {k: 2 * v for k, v in _ze(d, "pingpong", protocol, "owd_median_us").items()}
    return rtt


def _rtt_raw(d: Data, protocol: str) -> dict[tuple[Any, ...], list[float]]:
    rtt = _ze_cells(d, "pingpong", protocol, "rtt_median_us")
    if not rtt:  # results stored before rtt_* existed: the round trip is twice owd
        rtt = {k: [2 * v for v in vs]
               for k, vs in _ze_cells(d, "pingpong", protocol, "owd_median_us").items()}
    return rtt


def ze_4(d: Data) -> Outcome:
    tcp, udp = _rtt_raw(d, "tcp"), _rtt_raw(d, "udp")
    common = sorted(k for k in tcp if k in udp)
    if not common:
        return not_measured("TCP and UDP round-trip latency at equal sizes")
    exact = d.exact_rows(d.select("pingpong"))
    return judge_all([(f"IPv{ip} {s} B", ratio(udp[(ip, s)], tcp[(ip, s)], exact=exact))
                      for ip, s in common], "within", 0.20, ZE4_TOLERANCE, "TCP/UDP − 1 of RTT",
                     needs="two or more repetitions per cell")


ZE5_BOUND = -0.035
ZE5_TOLERANCE = ("IPv6/IPv4 − 1 pooled over the cells below −3.5 % (half the paper's smallest "
                 "reduction, 7 %, sec. 4.2)")


def _rtt_cells(d: Data) -> list[tuple[list[float], list[float]]]:
    """(IPv4 RTTs, IPv6 RTTs) per (protocol, size) measured for both."""
    pairs = []
    for proto in ("tcp", "udp"):
        rows = [r for r in d.select("pingpong") if param(r, "protocol") == proto]
        key = lambda r: (int(param(r, "ip")), size_of(r))  # noqa: E731
        rtt = d.cells(rows, "rtt_median_us", key)
        if not rtt:  # results stored before rtt_* existed: the round trip is twice owd
            rtt = {k: [2 * v for v in vs]
                   for k, vs in d.cells(rows, "owd_median_us", key).items()}
        pairs += [(rtt[(4, s)], rtt[(6, s)]) for ip, s in sorted(rtt) if ip == 4 and (6, s) in rtt]
    return pairs


def ze_5(d: Data) -> Outcome:
    pairs = _rtt_cells(d)
    if not pairs:
        return not_measured("IPv4 and IPv6 round-trip latency at equal sizes")
    rels = [statistics.fmean(b) / statistics.fmean(a) - 1 for a, b in pairs]
    in_range = sum(-0.15 <= v <= -0.07 for v in rels)
    exact = d.exact_rows(d.select("pingpong"))
    o = judge(cells_ratio(pairs, exact=exact), "below", ZE5_BOUND, ZE5_TOLERANCE,
              "IPv6 vs IPv4 RTT", needs="three or more (protocol, size) cells, or two or more "
              "repetitions per cell")
    return replace(o, evidence=f"7–15 % lower in {frac(in_range, len(rels))} cells; "
                   + o.evidence + " (paper: −7 … −15 %)")


def _ze_stack(metric: str, paper_effect: float, label: str, where: str
              ) -> Callable[[Data], Outcome]:
    """IPv6 over IPv4 of a stack cost, declared: judged against half the paper's effect, the
    interval must lie beyond it (a 0.1 % difference is no "+12 %")."""
    bound = paper_effect / 2
    tol = (f"IPv6/IPv4 − 1 {'above' if bound > 0 else 'below'} {bound:+.1%} (half the "
           f"paper's {paper_effect:+.1%}, {where})")
    return compare("stackcost", metric, {"ip": 4}, {"ip": 6}, "above" if bound > 0 else "below",
                   bound, tol, f"{label} IPv6 vs IPv4",
                   needs="two or more stackcost repetitions per IP version")


CLAIMS: tuple[Claim, ...] = (
    Claim('ze:1', "Linux TCP throughput ≈ line rate (~93 Mbit/s) at all sizes for both versions, IPv6 ~1 Mbit/s lower.", ze_1),  # noqa: E501
    Claim('ze:2', "UDP throughput IPv4 and IPv6 similar on Linux.", ze_2),
    Claim('ze:3', "Address-size overhead: 12.5 % vs 3 % at 128 B, 3 % vs 0.78 % at 512 B.", ze_3),
    Claim('ze:4', "TCP and UDP round-trip latency are about equal.", ze_4),
    Claim('ze:5', "On Linux, TCP and UDP round-trip latency is 7–15 % lower with IPv6 than with IPv4.", ze_5,  # noqa: E501
          effect=True),
    Claim('ze:6', "TCP/IPv6 socket creation costs more than TCP/IPv4 (+12 % on Linux).", _ze_stack("tcp_socket_create_us", 0.12, "TCP socket creation µs", "sec. 4.3"),  # noqa: E501
          effect=True),
    Claim('ze:7', "TCP connect is slower with IPv6 (about +50 % on Linux).", _ze_stack("tcp_connect_us", 0.50, "TCP connect µs", "sec. 4.3"),  # noqa: E501
          effect=True),
    Claim('ze:8', "Connections per second drop with IPv6 (Linux 450 → 426, −5 %).", _ze_stack("connections_per_s", 426 / 450 - 1, "connections/s", "sec. 4.4: 450 → 426"),  # noqa: E501
          effect=True),
    Claim('ze:9', "(cross-OS) Linux beats Windows 2000 and Solaris 8 on every metric — not measurable here.", cross_os),  # noqa: E501
)


def rtt_us(t: Any) -> float | None:
    """Round-trip time (µs) as the paper reports it: the stored RTT, else 2 x the stored OWD."""
    for k in ("rtt_mean_us",):
        v = t.metrics.get(k)
        if isinstance(v, (int, float)):
            return float(v)
    v = t.metrics.get("owd_mean_us")
    return 2.0 * float(v) if isinstance(v, (int, float)) else None


def zeadally_figures(ds: Dataset, experiment: str = "zeadally-2004") -> list[Figure]:
    figs: list[Figure] = []
    lat = select(ds, experiment, kinds=["pingpong"])
    if lat:
        stats = grouped(ds, lat, rtt_us, "rtt_mean_us")
        figs.append(Figure(
            "ze-latency", "zeadally-2004", "Round-trip latency vs message size, TCP and UDP",
            "message size (bytes)", "round-trip time (µs)", "lines",
            rows_of(stats, lambda s: f"{str(s.point.get('protocol')).upper()}/IPv"
                    f"{s.point.get('ip')}", lambda s: s.point.get("size")),
            note="ping-pong round trips, mean with 95 % CI over repetitions"))
    tput = select(ds, experiment, kinds=["iperf3"])
    if tput:
        stats = grouped(ds, tput, metric("receiver_bps", 1e-6), "receiver_mbps")
        figs.append(Figure(
            "ze-throughput", "zeadally-2004", "TCP and UDP throughput vs message size",
            "message size (bytes)", "throughput (Mbit/s, iperf3 receiver)", "lines",
            rows_of(stats, lambda s: f"{str(s.point.get('protocol')).upper()}/IPv"
                    f"{s.point.get('ip')}", lambda s: s.point.get("length"))))
    stack = select(ds, experiment, kinds=["stackcost"])
    if stack:
        rows: list[Row] = []
        for m, label in (("tcp_socket_create_us", "TCP socket creation"),
                         ("udp_socket_create_us", "UDP socket creation"),
                         ("tcp_connect_us", "TCP connect"),
                         ("udp_send_us", "UDP send, 64 B"),
                         ("tcp_echo_us", "TCP echo, 64 B")):
            rows += rows_of(grouped(ds, stack, metric(m), m),
                            lambda s: f"IPv{s.point.get('ip')}", const(label))
        figs.append(Figure(
            "ze-stack", "zeadally-2004",
            "Stack costs: socket creation, TCP connect, per-packet send and echo",
            "operation", "time (µs, median of each trial)", "bars", rows))
        figs.append(Figure(
            "ze-cps", "zeadally-2004", "Connections per second (connect, 1-byte exchange, close)",
            "IP version", "connections per second", "bars",
            rows_of(grouped(ds, stack, metric("connections_per_s"), "connections_per_s"),
                    lambda s: f"IPv{s.point.get('ip')}", lambda s: "connections/s")))
    return figs


QUOTES: tuple[Quote, ...] = (
    Quote("connections per second, Linux IPv4", "450", "sec. 4.4",
          lambda ds: mean_text(ds, "zeadally-2004", metric("connections_per_s"), ip_is(4), ".0f")),
    Quote("connections per second, Linux IPv6", "426", "sec. 4.4",
          lambda ds: mean_text(ds, "zeadally-2004", metric("connections_per_s"), ip_is(6), ".0f")),
    Quote("IPv6 connections/s degradation, Linux", "5 %", "sec. 4.4",
          lambda ds: change(ds, "zeadally-2004", metric("connections_per_s"), any_point)),
    Quote("TCP/IPv6 socket creation vs IPv4, Linux", "+12 %", "sec. 4.3",
          lambda ds: change(ds, "zeadally-2004", metric("tcp_socket_create_us"), any_point)),
    Quote("TCP connect time IPv6 vs IPv4, Linux", "≈ +50 %", "sec. 4.3",
          lambda ds: change(ds, "zeadally-2004", metric("tcp_connect_us"), any_point)),
    Quote("TCP throughput, Linux, all message sizes", "≈ 93 Mbit/s", "sec. 4.1, Fig. 1",
          lambda ds: per_label(
              (f"IPv{v}", range_text(ds, "zeadally-2004", metric("receiver_bps", 1e-6),
                                     both(proto_is("tcp"), ip_is(v)), "length", "Mbit/s"))
              for v in (4, 6))),
    Quote("round-trip latency IPv6 vs IPv4, Linux", "7-15 % lower", "sec. 4.2",
          lambda ds: per_label((pr.upper(), change(ds, "zeadally-2004", rtt_us, proto_is(pr)))
                               for pr in ("tcp", "udp"))),
)


def printed() -> list[TrialRow]:
    """The numbers sec. 4.3-4.4 print, as stackcost trials: connections per second (450, 426)
    and the IPv6 costs relative to IPv4 (socket +12 %, connect about +50 %; IPv4 = 1)."""
    return [printed_trial("zeadally-2004", "stackcost", {"ip": ip}, {
        "tcp_socket_create_us": 1.0 if ip == 4 else 1.12,
        "tcp_connect_us": 1.0 if ip == 4 else 1.5,
        "connections_per_s": 450.0 if ip == 4 else 426.0}) for ip in (4, 6)]


PAPER = Paper(
    id='zeadally-2004',
    title="Zeadally & Raicu 2004: End-system IPv6 stacks (Linux)",
    citation=(
        "S. Zeadally, R. Wasseem, I. Raicu: \"Comparison of end-system IPv6 protocol "
        "stacks\", 2004"),
    experiments=('zeadally-2004',),
    claims=CLAIMS,
    figures=zeadally_figures,
    quotes=QUOTES,
    printed=printed,
    order=5,
)
