"""Quintero et al. 2016, IPv6 transition mechanisms (6to4, ISATAP, NAT64 with TAYGA and Jool): its
claims (qu:1-qu:11) and its figures (throughput and one-way delay per mechanism)."""
# ruff: noqa: RUF001  (claims and evidence keep the papers' minus, times and approx signs)

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from testbed import results
from testbed.papers import Claim, Paper
from testbed.report.claims import (
    MOST,
    Data,
    Outcome,
    Status,
    cross_os,
    frac,
    not_measured,
    param,
    rate_bps,
    size_of,
    verdict,
)
from testbed.report.data import Dataset, Value, metric, params_of
from testbed.report.figures import (
    SIZE_LABEL,
    Figure,
    grouped,
    point_key,
    rate_label,
    rows_of,
    select,
    size_key,
)
from testbed.report.figures import rate_bps as rate_of
from testbed.report.verdict import cells_ratio, judge, judge_share

NATIVE4, NATIVE6, SIXTOFOUR, ISATAP, TAYGA, JOOL = (
    "native4", "native6", "6to4", "isatap", "nat64-tayga", "nat64-jool")


TUNNELS = (SIXTOFOUR, ISATAP)


def _mechs(d: Data, kind: str, protocol: str, metric: str
           ) -> dict[tuple[Any, ...], dict[str, float]]:
    """(rate, size) -> {mechanism (topology): mean metric}."""
    rows = [r for r in d.select(kind) if param(r, "protocol") == protocol]
    out: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict)
    for (topo, rate, size), v in d.means(
            rows, metric, lambda r: (r.point.get("topology"), rate_bps(r), size_of(r))).items():
        out[(rate, size)][str(topo)] = v
    return dict(out)


def _owd_cells(d: Data, protocols: Sequence[str] = ("udp", "tcp")
               ) -> list[tuple[str, float | None, int, dict[str, float]]]:
    out = []
    for proto in protocols:
        for (rate, size), m in _mechs(d, "pingpong", proto, "owd_median_us").items():
            out.append((proto, rate, size, m))
    return out


def _thr_cells(d: Data) -> list[tuple[str, float | None, int, dict[str, float]]]:
    return [("udp", rate, size, m)
            for (rate, size), m in _mechs(d, "iperf3", "udp", "receiver_bps").items()]


def _best(m: Mapping[str, float], higher_better: bool) -> str:
    return max(m, key=lambda k: m[k]) if higher_better else min(m, key=lambda k: m[k])


QU1_TOLERANCE = ("native IPv4 best in most cells (sign test: the share's 95 % interval above "
                 "50 %) and native IPv6 within 10 % of it, pooled over the cells (TOST; ours: "
                 "the paper says 'closely followed')")


def qu_1(d: Data) -> Outcome:
    """IPv4 best: a sign test over the (protocol, rate, size) cells of OWD and throughput;
    IPv6 close: IPv6's cost over IPv4's (OWD ratio, inverse throughput ratio) pooled."""
    best4, pairs = 0, []
    for cells, higher_better in ((_owd_cells(d), False), (_thr_cells(d), True)):
        for *_, m in cells:
            if NATIVE4 not in m or NATIVE6 not in m:
                continue
            best4 += _best(m, higher_better) == NATIVE4
            a, b = (m[NATIVE6], m[NATIVE4]) if higher_better else (m[NATIVE4], m[NATIVE6])
            pairs.append(([a], [b]))
    if not pairs:
        return not_measured("native IPv4 and native IPv6 in the same cells")
    rows = [r for r in d.select("pingpong") + d.select("iperf3")
            if r.point.get("topology") in (NATIVE4, NATIVE6)]
    best = judge_share(best4, len(pairs), QU1_TOLERANCE, "native IPv4 best",
                       exact=d.exact_rows(rows))
    close = judge(cells_ratio(pairs, exact=d.exact_rows(rows)), "within", 0.10, QU1_TOLERANCE,
                  "native IPv6's cost over IPv4's", needs="three or more cells")
    states = {best.status, close.status}
    status: Status = ("does not hold" if "does not hold" in states else "holds"
                      if states == {"holds"} else "inconclusive")
    reason = {"holds": "", "inconclusive": best.reason or close.reason,
              "does not hold": d.serialization_reason()}[status]
    return Outcome(status, f"{best.evidence}; {close.evidence}", reason, close.n, close.effect,
                   close.interval, QU1_TOLERANCE)


def qu_2(d: Data) -> Outcome:
    similar = lowest = n = 0
    for cells, worse_is_higher in ((_owd_cells(d), True), (_thr_cells(d), False)):
        for *_, m in cells:
            if not all(t in m for t in TUNNELS) or len(m) < 3:
                continue
            n += 1
            a, b = m[SIXTOFOUR], m[ISATAP]
            similar += abs(a - b) <= 0.10 * max(a, b)
            others = [v for k, v in m.items() if k not in TUNNELS]
            if worse_is_higher:
                lowest += min(a, b) >= max(others)
            else:
                lowest += max(a, b) <= min(others)
    if not n:
        return not_measured("6to4 and ISATAP beside other mechanisms")
    ok = similar >= MOST * n and lowest >= MOST * n
    return verdict(ok, f"6to4 ≈ ISATAP (within 10 %) in {frac(similar, n)} cells; both "
                        f"worst of all in {frac(lowest, n)}", d.serialization_reason())


def qu_3(d: Data) -> Outcome:
    cells = [m for _, rate, _, m in _owd_cells(d, ("tcp",))
             if rate == 10e6 and all(t in m for t in TUNNELS) and len(m) >= 3]
    if not cells:
        return not_measured("TCP OWD at 10 Mbit/s with 6to4, ISATAP and another mechanism")
    top = sum(set(sorted(m, key=lambda k: -m[k])[:2]) == set(TUNNELS) for m in cells)
    return verdict(top >= MOST * len(cells),
                    f"6to4 and ISATAP the two highest TCP OWDs in {frac(top, len(cells))} "
                    "payloads at 10 Mbit/s", d.serialization_reason())


QU4_TOLERANCE = ("Jool/TAYGA − 1 inside −20 % … 0: 'similar' as within 20 % (ours; the paper "
                 "prints no number), 'slightly lower' as below 0")


def qu_4(d: Data) -> Outcome:
    """Jool over TAYGA, pooled over every (protocol, rate, size) cell measured through both, up
    to 1750 B (TAYGA's large-payload anomaly above it is qu:6's and qu:10's)."""
    rows = [r for r in d.select("pingpong") if r.point.get("topology") in (TAYGA, JOOL)
            and (size_of(r) or 0) <= 1750]
    vals = d.cells(rows, "owd_median_us", lambda r: (
        str(r.point.get("topology")), param(r, "protocol"), rate_bps(r), size_of(r)))
    pairs = [(vals[(TAYGA, *k[1:])], v) for k, v in vals.items()
             if k[0] == JOOL and (TAYGA, *k[1:]) in vals]
    if not pairs:
        return not_measured("OWD through both NAT64 translators (TAYGA and Jool)")
    e = cells_ratio(pairs, exact=d.exact_rows(rows))
    o = judge(e, "below", 0.0, QU4_TOLERANCE, "Jool vs TAYGA OWD up to 1750 B",
              needs="three or more cells, or two or more repetitions per cell")
    if o.status == "holds" and e is not None and e.low < -0.20:
        o = replace(o, status="inconclusive", reason="the interval reaches below −20 %: "
                    "'similar' is not shown; more repetitions would narrow it")
    if o.status == "does not hold" or (e is not None and e.high < -0.20):
        o = replace(o, status="does not hold", reason="")
    return o


def qu_5(d: Data) -> Outcome:
    cells = [m for _, rate, _, m in _owd_cells(d)
             if rate == 10e6 and NATIVE6 in m and (TAYGA in m or JOOL in m)]
    if not cells:
        return not_measured("OWD at 10 Mbit/s of native IPv6 and a NAT64")
    lower = sum(all(m[t] < m[NATIVE6] for t in (TAYGA, JOOL) if t in m) for m in cells)
    return verdict(lower >= MOST * len(cells),
                    f"NAT64 OWD below native IPv6 in {frac(lower, len(cells))} cells at 10 Mbit/s",
                    d.serialization_reason())


def qu_6(d: Data) -> Outcome:
    cells = [(size, m) for _, rate, size, m in _owd_cells(d, ("udp",))
             if rate == 100e6 and NATIVE4 in m and NATIVE6 in m]
    if not cells:
        return not_measured("UDP OWD at 100 Mbit/s of native IPv4 and IPv6")
    order = 0
    for _, m in cells:
        tun = [m[t] for t in TUNNELS if t in m]
        order += m[NATIVE4] < m[NATIVE6] and all(m[NATIVE6] < t for t in tun)
    ok = order >= MOST * len(cells)
    tunnels = any(t in m for _, m in cells for t in TUNNELS)
    ev = (f"IPv4 < IPv6{' < tunnels' if tunnels else ' (no tunnel measured)'} in "
          f"{frac(order, len(cells))} payloads at 100 Mbit/s")
    big = [(s, m) for s, m in cells if s > 1750 and TAYGA in m and JOOL in m]
    if big:
        high = sum(m[TAYGA] > 1.5 * m[JOOL] for _, m in big)
        ok = ok and high > 0
        ev += f"; TAYGA > 1.5 × Jool above 1750 B in {frac(high, len(big))} payloads"
    else:
        ev += "; TAYGA vs Jool above 1750 B not measured"
    return verdict(ok, ev, d.serialization_reason())


def qu_7(d: Data) -> Outcome:
    cells = {(rate, size): m for _, rate, size, m in _owd_cells(d, ("tcp",))}
    ratios = []
    same_top = n = 0
    for (rate, size), slow in cells.items():
        fast = cells.get((100e6, size))
        if rate != 10e6 or fast is None:
            continue
        common = [k for k in slow if k in fast]
        if not common:
            continue
        n += 1
        ratios += [slow[k] / fast[k] for k in common]
        same_top += max(common, key=lambda k: slow[k]) == max(common, key=lambda k: fast[k])
    if not ratios:
        return not_measured("TCP OWD at both 10 and 100 Mbit/s")
    med = statistics.median(ratios)
    ok = 5 <= med <= 15 and same_top >= MOST * n
    return verdict(ok, f"median OWD(10 Mbit/s)/OWD(100 Mbit/s) {med:.1f} (5–15 accepted); "
                        f"same highest mechanism in {frac(same_top, n)} payloads",
                    d.serialization_reason())


def _thr_shape(m: Mapping[str, float]) -> bool:
    """IPv4 ≥ everything; IPv6 ≥ tunnels; tunnels similar; Jool ≈ TAYGA (10 %)."""
    ok = all(m[NATIVE4] >= v * 0.99 for v in m.values())
    if NATIVE6 in m:
        ok = ok and all(m[NATIVE6] >= m[t] * 0.99 for t in TUNNELS if t in m)
    if all(t in m for t in TUNNELS):
        ok = ok and abs(m[SIXTOFOUR] - m[ISATAP]) <= 0.10 * max(m[SIXTOFOUR], m[ISATAP])
    if TAYGA in m and JOOL in m:
        ok = ok and abs(m[TAYGA] - m[JOOL]) <= 0.10 * max(m[TAYGA], m[JOOL])
    return ok


def _qu_thr(d: Data, rate: float) -> tuple[int, int, dict[int, dict[str, float]]]:
    cells = {size: m for _, r, size, m in _thr_cells(d) if r == rate and NATIVE4 in m
             and len(m) >= 2}
    return sum(_thr_shape(m) for m in cells.values()), len(cells), cells


MIXED_CLOCKS = ("the mechanisms' throughput was measured on different clocks: some on the "
                "host's real CPUs, some in the one-vCPU virtual-clock guest, where iperf3 -b 0 "
                "shares its one CPU with the router and the receiver (CPU-bound at 100 Mbit/s)")


def _thr_clocks_reason(d: Data) -> str:
    """MIXED_CLOCKS when the UDP throughput rows come from more than one clock, else ''."""
    rows = [r for r in d.select("iperf3") if param(r, "protocol") == "udp"]
    kinds = {results.clock_kind(r.result.get("clock")) or "real" for r in rows}
    return MIXED_CLOCKS if len(kinds) > 1 else ""


def qu_8(d: Data) -> Outcome:
    good, n, _ = _qu_thr(d, 10e6)
    if not n:
        return not_measured("UDP throughput at 10 Mbit/s of native IPv4 and another mechanism")
    return verdict(good >= MOST * n, f"paper's ordering holds in {frac(good, n)} payloads "
                                      "at 10 Mbit/s", _thr_clocks_reason(d))


def qu_9(d: Data) -> Outcome:
    good, n, fast = _qu_thr(d, 100e6)
    if not n:
        return not_measured("UDP throughput at 100 Mbit/s of native IPv4 and another mechanism")
    _, _, slow = _qu_thr(d, 10e6)
    ratios = [fast[s][k] / slow[s][k] for s in fast if s in slow
              for k in fast[s] if k in slow[s] and slow[s][k] > 0]
    ok = good >= MOST * n
    ev = f"paper's ordering holds in {frac(good, n)} payloads at 100 Mbit/s"
    if ratios:
        med = statistics.median(ratios)
        ok = ok and 7 <= med <= 13
        ev += f"; median throughput ratio 100/10 Mbit/s {med:.1f} (7–13 accepted)"
    else:
        ev += "; ratio to 10 Mbit/s not measured"
    return verdict(ok, ev, _thr_clocks_reason(d))


def qu_10(d: Data) -> Outcome:
    cells = [(size, m) for *_, size, m in _owd_cells(d) if TAYGA in m and JOOL in m]
    big = [(s, m) for s, m in cells if s > 1750]
    if not big:
        return not_measured("OWD of TAYGA and Jool above 1750 B")
    anomaly = sum(m[TAYGA] > 1.5 * m[JOOL] for _, m in big)
    jool_ok = sum(m[JOOL] <= m[TAYGA] * 1.05 for _, m in big)
    udp_slow = [s for s, m in ((s, m) for _, _, s, m in _owd_cells(d, ("udp",))
                               if TAYGA in m and JOOL in m and s > 1750)
                if m[JOOL] > m[TAYGA] * 1.05]
    return verdict(jool_ok == len(big),
                    f"Jool ≤ TAYGA (+5 %) in {frac(jool_ok, len(big))} payloads above 1750 B; "
                    f"TAYGA anomaly (> 1.5 × Jool) in {frac(anomaly, len(big))}",
                    JOOL_REASSEMBLES if udp_slow else "")


JOOL_REASSEMBLES = ("Jool translates behind the kernel's IPv6 defragmentation: a fragmented UDP "
                    "datagram is reassembled on the router before it is translated, while TAYGA "
                    "translates each fragment as it arrives; Jool's UDP OWD above the MTU is "
                    "about one fragment's serialization higher (docs/transition.md)")


def quintero_figures(ds: Dataset, experiment: str = "transition") -> list[Figure]:
    figs: list[Figure] = []
    specs: list[tuple[str, list[str], Value, str, str]] = [
        ("throughput", ["iperf3"], metric("receiver_bps", 1e-6), "receiver_mbps",
         "UDP throughput (Mbit/s, iperf3 receiver)"),
        ("owd", ["pingpong"], metric("owd_mean_us"), "owd_mean_us", "one-way delay (µs)"),
    ]
    for what, kinds, value, name, ylabel in specs:
        trials = select(ds, experiment, kinds=kinds)
        stats = grouped(ds, trials, value, name)
        keys = sorted({(str(params_of(t).get("protocol", "udp")),
                        params_of(t).get("topology.rate")) for t in trials},
                      key=lambda k: (k[0], rate_of(k[1]) or 0))
        for proto, rate in keys:
            sub = [s for s in stats if str(s.point.get("protocol", "udp")) == proto
                   and s.point.get("topology.rate") == rate]
            sk = next((k for t in trials if (k := size_key(params_of(t)))), "size")
            rows = rows_of(sub, lambda s: str(s.point.get("topology")), point_key(sk))
            title = ("Throughput" if what == "throughput" else f"{proto.upper()} one-way delay")
            figs.append(Figure(
                f"qu-{what}-{proto}-{rate}", "quintero-2016",
                f"{title} vs payload per mechanism, {rate_label(rate)}",
                SIZE_LABEL.get(sk, sk), ylabel, "lines", rows,
                note="one curve per mechanism; mean with 95 % CI over repetitions"))
    return figs


CLAIMS: tuple[Claim, ...] = (
    Claim('qu:1', "Native IPv4 performs best, closely followed by native IPv6 (20 vs 40-byte header).", qu_1,  # noqa: E501
          tolerance=QU1_TOLERANCE, effect=True),
    Claim('qu:2', "ISATAP and 6to4 perform similarly and lowest of all (extra IPv4 header).", qu_2),
    Claim('qu:3', "TCP OWD at 10 Mbit/s: ISATAP and 6to4 highest for almost all payloads.", qu_3),
    Claim('qu:4', "Jool and TAYGA have similar OWD, Jool slightly lower.", qu_4,
          tolerance=QU4_TOLERANCE, effect=True),
    Claim('qu:5', "At 10 Mbit/s NAT64 has lower OWD than native IPv6 (one IPv6 + one IPv4 serialization vs two IPv6).", qu_5),  # noqa: E501
    Claim('qu:6', "UDP OWD at 100 Mbit/s: IPv4 < IPv6 < ISATAP ≈ 6to4; TAYGA unexpectedly high above 1750 B, Jool normal.", qu_6),  # noqa: E501
    Claim('qu:7', "TCP OWD at 100 Mbit/s has the Ethernet shape, about 10× lower.", qu_7),
    Claim('qu:8', "UDP throughput at 10 Mbit/s: IPv4 upper bound, then IPv6; tunnels below IPv6 and similar; Jool ≈ TAYGA.", qu_8),  # noqa: E501
    Claim('qu:9', "UDP throughput at 100 Mbit/s: same shape, about 10× higher.", qu_9),
    Claim('qu:10', "Jool is preferable to TAYGA (no large-payload anomaly).", qu_10),
    Claim('qu:11', "(cross-OS) modern OSes perform very similarly — not measurable here.", cross_os),  # noqa: E501
)


PAPER = Paper(
    id='quintero-2016',
    title="Quintero et al. 2016: IPv6 transition mechanisms (6to4, ISATAP, NAT64)",
    citation=(
        "A. Quintero, F. Sans, E. Gamess: \"Performance Evaluation of IPv4/IPv6 Transition"
        " Mechanisms\", IJCNIS 8(2), 2016, pp. 1-14, doi:10.5815/ijcnis.2016.02.01"),
    experiments=('transition',),
    claims=CLAIMS,
    aliases=("transition",),
    figures=quintero_figures,
    order=2,
)
