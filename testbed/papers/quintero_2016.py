"""Quintero et al. 2016, IPv6 transition mechanisms (6to4, ISATAP, NAT64 with TAYGA and Jool): its
claims (qu:1-qu:11) and its figures (throughput and one-way delay per mechanism)."""
# ruff: noqa: RUF001, RUF002  (claims and evidence keep the papers' minus, times and approx signs)

from __future__ import annotations

import itertools
import weakref
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from testbed import results
from testbed.papers import Claim, Paper
from testbed.report.claims import (
    Data,
    Outcome,
    Status,
    cross_os,
    not_measured,
    param,
    rate_bps,
    rate_name,
    size_of,
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
from testbed.report.verdict import (
    Expect,
    all_of,
    cells_ratio,
    judge,
    judge_all,
    judge_between,
    judge_share,
)

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


Cells = dict[tuple[Any, ...], list[float]]
Exact = dict[str, bool]  # mechanism (topology) -> its cells are exact
Keep = Callable[[str, "float | None", "int | None"], bool]
QU_NEEDS = "three or more cells, or two or more repetitions per cell"


_VALS: weakref.WeakKeyDictionary[Data, dict[str, tuple[Cells, Exact, set[str]]]] = (
    weakref.WeakKeyDictionary())


def _vals(d: Data, kind: str) -> tuple[Cells, Exact]:
    """(mechanism, protocol, rate, size) -> the cell's values: OWD (pingpong) or UDP throughput
    (iperf3); and per mechanism whether they are exact (printed or virtual-clock numbers that
    repeat; Jool's OWD does not, docs/vm.md). Computed once per Data (claims read them many
    times); the environment notes are added to `d.notes` each time."""
    per = _VALS.setdefault(d, {})
    if kind not in per:
        if kind == "pingpong":
            rows, name = d.select("pingpong"), "owd_median_us"
        else:
            rows = [r for r in d.select("iperf3") if param(r, "protocol") == "udp"]
            name = "receiver_bps"
        kept, d.notes = d.notes, set()
        vals = d.cells(rows, name, lambda r: (str(r.point.get("topology")),
                                              str(param(r, "protocol")), rate_bps(r),
                                              size_of(r)))
        by_mech: dict[str, list[results.TrialRow]] = defaultdict(list)
        for r in rows:
            by_mech[str(r.point.get("topology"))].append(r)
        per[kind] = (vals, {m: d.exact_rows(rs) for m, rs in by_mech.items()}, d.notes)
        d.notes = kept
    vals, exact, notes = per[kind]
    d.notes |= notes
    return vals, exact


def _ex(exact: Exact, a: str, b: str) -> tuple[bool, bool]:
    """Whether mechanism a's and b's cells are exact (`cells_ratio` per side)."""
    return exact.get(a, False), exact.get(b, False)


def _pairs(vals: dict[tuple[Any, ...], list[float]], a: str, b: str, keep: Keep
           ) -> list[tuple[list[float], list[float]]]:
    """(a's values, b's values) of every (protocol, rate, size) cell both have and `keep` takes."""
    keys = sorted({k[1:] for k in vals if k[0] == a and (b, *k[1:]) in vals and keep(*k[1:])},
                  key=str)
    return [(vals[(a, *k)], vals[(b, *k)]) for k in keys]


def _any(p: str, r: float | None, s: int | None) -> bool:
    return True


def _cmp(d: Data, kind: str, a: str, b: str, expect: Expect, bound: float, what: str,
         tolerance: str, keep: Keep = _any) -> Outcome:
    """b over a (b/a − 1) pooled over the cells `keep` takes, judged against `bound`; "not
    measured" (naming `what`) when no cell has both, which `all_of` counts as missing evidence."""
    vals, exact = _vals(d, kind)
    pairs = _pairs(vals, a, b, keep)
    if not pairs:
        return not_measured(what)
    return judge(cells_ratio(pairs, _ex(exact, a, b)), expect, bound, tolerance, what,
                 QU_NEEDS)


QU2_TOLERANCE = ("6to4/ISATAP − 1 inside ±10 % in OWD and throughput (TOST; ours: the paper says "
                 "'similar', sec. V, Figs. 16-35, no number); each tunnel's OWD over native "
                 "IPv6's above 0 and its throughput below (the paper's cause, an extra IPv4 "
                 "header on the IPv6 packet; pooled over the cells)")


def qu_2(d: Data) -> Outcome:
    parts = [
        _cmp(d, "pingpong", ISATAP, SIXTOFOUR, "within", 0.10, "6to4 vs ISATAP OWD",
             QU2_TOLERANCE),
        _cmp(d, "iperf3", ISATAP, SIXTOFOUR, "within", 0.10, "6to4 vs ISATAP throughput",
             QU2_TOLERANCE),
        *(_cmp(d, "pingpong", NATIVE6, t, "above", 0.0, f"{t} over native IPv6 OWD",
               QU2_TOLERANCE) for t in TUNNELS),
        *(_cmp(d, "iperf3", NATIVE6, t, "below", 0.0, f"{t} over native IPv6 throughput",
               QU2_TOLERANCE) for t in TUNNELS)]
    return all_of(parts, QU2_TOLERANCE, d.serialization_reason())


QU3_TOLERANCE = ("each tunnel's TCP OWD at 10 Mbit/s over every other mechanism's above 0, "
                 "pooled over the payloads ('almost all payload sizes', sec. V.A.1, Fig. 16; "
                 "the paper prints no number)")


def qu_3(d: Data) -> Outcome:
    vals, exact = _vals(d, "pingpong")
    others = sorted({k[0] for k in vals} - set(TUNNELS))
    cells = []
    for t, o in itertools.product(TUNNELS, others):
        pairs = _pairs(vals, o, t, lambda p, r, s: p == "tcp" and r == 10e6)
        if pairs:
            cells.append((f"{t} over {o}", cells_ratio(pairs, _ex(exact, o, t))))
    if not cells:
        return not_measured("TCP OWD at 10 Mbit/s with 6to4, ISATAP and another mechanism")
    o = judge_all(cells, "above", 0.0, QU3_TOLERANCE, "TCP OWD at 10 Mbit/s", QU_NEEDS)
    return replace(o, reason=o.reason or ("" if o.status == "holds" else
                                          d.serialization_reason()))


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
    exact = {m: d.exact_rows(r for r in rows if r.point.get("topology") == m)
             for m in (TAYGA, JOOL)}
    e = cells_ratio(pairs, exact=_ex(exact, TAYGA, JOOL))
    o = judge(e, "below", 0.0, QU4_TOLERANCE, "Jool vs TAYGA OWD up to 1750 B",
              needs="three or more cells, or two or more repetitions per cell")
    if o.status == "holds" and e is not None and e.low < -0.20:
        o = replace(o, status="inconclusive", reason="the interval reaches below −20 %: "
                    "'similar' is not shown; more repetitions would narrow it")
    if o.status == "does not hold" or (e is not None and e.high < -0.20):
        o = replace(o, status="does not hold", reason="")
    return o


QU5_TOLERANCE = ("each NAT64's OWD at 10 Mbit/s over native IPv6's below 0, pooled over "
                 "protocols and payloads ('lower OWD than IPv6 in almost all cases', sec. "
                 "V.A.1, Fig. 16; the paper prints no number)")


def qu_5(d: Data) -> Outcome:
    vals, exact = _vals(d, "pingpong")
    cells = [(f"{t} over native IPv6", cells_ratio(pairs, _ex(exact, NATIVE6, t)))
             for t in (TAYGA, JOOL)
             if (pairs := _pairs(vals, NATIVE6, t, lambda p, r, s: r == 10e6))]
    if not cells:
        return not_measured("OWD at 10 Mbit/s of native IPv6 and a NAT64")
    o = judge_all(cells, "below", 0.0, QU5_TOLERANCE, "OWD at 10 Mbit/s", QU_NEEDS)
    return replace(o, reason=o.reason or ("" if o.status == "holds" else
                                          d.serialization_reason()))


QU6_TOLERANCE = ("UDP OWD at 100 Mbit/s, pooled over payloads: native IPv6 over IPv4 above 0, "
                 "each tunnel over native IPv6 above 0, 6to4/ISATAP − 1 inside ±10 % (ours: "
                 "'similar'), TAYGA over Jool above 1750 B above +50 % (ours: 'unexpectedly "
                 "high', sec. V.A.2, Fig. 20; the paper prints no number)")


def _udp100(p: str, r: float | None, s: int | None) -> bool:
    return p == "udp" and r == 100e6


def qu_6(d: Data) -> Outcome:
    def big(p: str, r: float | None, s: int | None) -> bool:
        return _udp100(p, r, s) and (s or 0) > 1750

    parts = [
        _cmp(d, "pingpong", NATIVE4, NATIVE6, "above", 0.0, "native IPv6 over IPv4",
             QU6_TOLERANCE, _udp100),
        *(_cmp(d, "pingpong", NATIVE6, t, "above", 0.0, f"{t} over native IPv6", QU6_TOLERANCE,
               _udp100) for t in TUNNELS),
        _cmp(d, "pingpong", ISATAP, SIXTOFOUR, "within", 0.10, "6to4 vs ISATAP", QU6_TOLERANCE,
             _udp100),
        _cmp(d, "pingpong", JOOL, TAYGA, "above", 0.5, "TAYGA over Jool above 1750 B",
             QU6_TOLERANCE, big)]
    return all_of(parts, QU6_TOLERANCE, d.serialization_reason())


QU7_LOW, QU7_HIGH = 1 / 15 - 1, 1 / 5 - 1
QU7_TOLERANCE = ("TCP OWD at 100 Mbit/s over 10 Mbit/s − 1 inside −93 % … −80 % (5-15× lower; "
                 "ours around the paper's 'ten times faster', sec. V.A.2, Figs. 16 and 24), "
                 "pooled over mechanisms and payloads; and Fig. 16's shape at 100 Mbit/s: each "
                 "tunnel above native IPv4 and IPv6")


def qu_7(d: Data) -> Outcome:
    vals, exact = _vals(d, "pingpong")
    pairs = [(v, vals[(m, p, 100e6, s)]) for (m, p, r, s), v in sorted(vals.items(), key=str)
             if p == "tcp" and r == 10e6 and (m, p, 100e6, s) in vals]
    if not pairs:
        return not_measured("TCP OWD at both 10 and 100 Mbit/s")
    parts = [judge_between(cells_ratio(pairs, all(exact.values())), QU7_LOW, QU7_HIGH,
                           QU7_TOLERANCE, "TCP OWD 100 over 10 Mbit/s", QU_NEEDS)]
    parts += [_cmp(d, "pingpong", n, t, "above", 0.0, f"{t} over {n} at 100 Mbit/s",
                   QU7_TOLERANCE, lambda p, r, s: p == "tcp" and r == 100e6)
              for t, n in itertools.product(TUNNELS, (NATIVE4, NATIVE6))]
    return all_of(parts, QU7_TOLERANCE, d.serialization_reason())


MIXED_CLOCKS = ("the mechanisms' throughput was measured on different clocks: some on the "
                "host's real CPUs, some in the one-vCPU virtual-clock guest, where iperf3 -b 0 "
                "shares its one CPU with the router and the receiver (CPU-bound at 100 Mbit/s)")


def _thr_clocks_reason(d: Data) -> str:
    """MIXED_CLOCKS when the UDP throughput rows come from more than one clock, else ''."""
    rows = [r for r in d.select("iperf3") if param(r, "protocol") == "udp"]
    kinds = {results.clock_kind(r.result.get("clock")) or "real" for r in rows}
    return MIXED_CLOCKS if len(kinds) > 1 else ""


QU8_TOLERANCE = ("UDP throughput, pooled over payloads: native IPv6 over IPv4 below 0, each "
                 "tunnel over native IPv6 below 0, each NAT64 over native IPv4 below 0 (IPv4 the "
                 "upper bound), 6to4/ISATAP and Jool/TAYGA − 1 inside ±10 % (ours: 'similar', "
                 "sec. V.B.1, Fig. 28; the paper prints no number)")


def _thr_parts(d: Data, rate: float, tol: str) -> list[Outcome]:
    def at(p: str, r: float | None, s: int | None) -> bool:
        return r == rate

    specs: list[tuple[str, str, Expect, float]] = [
        (NATIVE4, NATIVE6, "below", 0.0), *((NATIVE6, t, "below", 0.0) for t in TUNNELS),
             *((NATIVE4, t, "below", 0.0) for t in (TAYGA, JOOL)),
             (ISATAP, SIXTOFOUR, "within", 0.10), (TAYGA, JOOL, "within", 0.10)]
    out = []
    for a, b, expect, bound in specs:
        out.append(_cmp(d, "iperf3", a, b, expect, bound, f"{b} over {a} at "
                        f"{rate_name(rate)}", tol, at))
    return out


def qu_8(d: Data) -> Outcome:
    parts = _thr_parts(d, 10e6, QU8_TOLERANCE)
    return all_of(parts, QU8_TOLERANCE, _thr_clocks_reason(d))


QU9_LOW, QU9_HIGH = 6.0, 12.0
QU9_TOLERANCE = ("qu:8's ordering at 100 Mbit/s, and throughput at 100 over 10 Mbit/s − 1 inside "
                 "+600 % … +1200 % (7-13×; ours around the paper's 'ten times faster', sec. "
                 "V.B.2, Fig. 32), pooled over mechanisms and payloads")


def qu_9(d: Data) -> Outcome:
    parts = _thr_parts(d, 100e6, QU9_TOLERANCE)
    vals, exact = _vals(d, "iperf3")
    pairs = [(v, vals[(m, p, 100e6, s)]) for (m, p, r, s), v in sorted(vals.items(), key=str)
             if r == 10e6 and (m, p, 100e6, s) in vals]
    parts.append(judge_between(cells_ratio(pairs, all(exact.values())), QU9_LOW, QU9_HIGH,
                               QU9_TOLERANCE, "throughput 100 over 10 Mbit/s", QU_NEEDS)
                 if pairs else
                 not_measured("throughput of one mechanism at both 10 and 100 Mbit/s"))
    return all_of(parts, QU9_TOLERANCE, _thr_clocks_reason(d))


QU10_TOLERANCE = ("Jool's OWD over TAYGA's above 1750 B below 0 for each protocol and rate, "
                  "pooled over payloads (TAYGA's anomaly, Fig. 20, and 'Jool has a lower OWD than "
                  "TAYGA', sec. V.A.2; the paper prints no number)")


def qu_10(d: Data) -> Outcome:
    vals, exact = _vals(d, "pingpong")
    cells = []
    for proto, rate in sorted({(k[1], k[2]) for k in vals}, key=str):
        def big(p: str, r: float | None, s: int | None, q: str = proto,
                at: float | None = rate) -> bool:
            return p == q and r == at and (s or 0) > 1750

        if pairs := _pairs(vals, TAYGA, JOOL, big):
            cells.append((f"{proto} at {rate_name(rate)}",
                          cells_ratio(pairs, _ex(exact, TAYGA, JOOL))))
    if not cells:
        return not_measured("OWD of TAYGA and Jool above 1750 B")
    o = judge_all(cells, "below", 0.0, QU10_TOLERANCE, "Jool over TAYGA above 1750 B", QU_NEEDS)
    slow = o.status == "does not hold" and any(
        e is not None and e.low > 0.05 for label, e in cells if label.startswith("udp"))
    return replace(o, reason=JOOL_REASSEMBLES if slow else o.reason)


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
    Claim('qu:2', "ISATAP and 6to4 perform similarly and lowest of all (extra IPv4 header).", qu_2,
          tolerance=QU2_TOLERANCE, effect=True),
    Claim('qu:3', "TCP OWD at 10 Mbit/s: ISATAP and 6to4 highest for almost all payloads.", qu_3,
          tolerance=QU3_TOLERANCE, effect=True),
    Claim('qu:4', "Jool and TAYGA have similar OWD, Jool slightly lower.", qu_4,
          tolerance=QU4_TOLERANCE, effect=True),
    Claim('qu:5', "At 10 Mbit/s NAT64 has lower OWD than native IPv6 (one IPv6 + one IPv4 serialization vs two IPv6).", qu_5,  # noqa: E501
          tolerance=QU5_TOLERANCE, effect=True),
    Claim('qu:6', "UDP OWD at 100 Mbit/s: IPv4 < IPv6 < ISATAP ≈ 6to4; TAYGA unexpectedly high above 1750 B, Jool normal.", qu_6,  # noqa: E501
          tolerance=QU6_TOLERANCE, effect=True),
    Claim('qu:7', "TCP OWD at 100 Mbit/s has the Ethernet shape, about 10× lower.", qu_7,
          tolerance=QU7_TOLERANCE, effect=True),
    Claim('qu:8', "UDP throughput at 10 Mbit/s: IPv4 upper bound, then IPv6; tunnels below IPv6 and similar; Jool ≈ TAYGA.", qu_8,  # noqa: E501
          tolerance=QU8_TOLERANCE, effect=True),
    Claim('qu:9', "UDP throughput at 100 Mbit/s: same shape, about 10× higher.", qu_9,
          tolerance=QU9_TOLERANCE, effect=True),
    Claim('qu:10', "Jool is preferable to TAYGA (no large-payload anomaly).", qu_10,
          tolerance=QU10_TOLERANCE, effect=True),
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
