"""The claims of Gamess & Morales (gm:1-gm:9): one check per claim, and their declarations."""
# ruff: noqa: RUF001  (claims and evidence keep the papers' minus, times and approx signs)

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from dataclasses import replace
from typing import Any

from testbed import models
from testbed.papers import Claim
from testbed.report.claims import (
    CLOSE,
    GENERATOR,
    Data,
    Outcome,
    Status,
    frac,
    linfit,
    mbps,
    not_measured,
    param,
    rate_bps,
    rate_name,
    size_of,
    verdict,
)
from testbed.report.verdict import judge_share


def _gm_throughput(d: Data, *, exclude_limited: bool = True) -> dict[tuple[Any, ...], float]:
    """(rate bit/s, ip, ip_payload) -> mean zero-loss throughput (bit/s of IP payload)."""
    rows = [r for r in d.select("rfc2544") if not (exclude_limited and
                                                   r.metrics.get("generator_limited"))]
    return d.means(rows, "throughput_bps",
                   lambda r: (rate_bps(r), int(param(r, "ip")), size_of(r)))


def _gm_limited(d: Data) -> set[tuple[Any, ...]]:
    return {(rate_bps(r), int(param(r, "ip")), size_of(r)) for r in d.select("rfc2544")
            if r.metrics.get("generator_limited")}


def _gm_owd(d: Data) -> dict[tuple[Any, ...], float]:
    """(rate, routers, ip, ip_payload) -> mean of the median OWD (µs)."""
    return d.means(d.select("pingpong"), "owd_median_us",
                   lambda r: (rate_bps(r), int(r.point.get("topology.routers", 0)),
                              int(param(r, "ip")), size_of(r)))


GM1_TOLERANCE = ("IPv4 better in most equal-payload cells: the 95 % interval of the share above "
                 "50 % (sign test); the paper's own Tables I-VI: 18/18 throughput and 58/60 OWD "
                 "cells, so not 'every' cell")
GM6_SHARE = 0.90
GM6_TOLERANCE = ("within 10 % (or 10 µs) of eq. (10) in at least 90 % of the cells; the paper's "
                 "own Tables III-VI: 138/144 cells (96 %) with π fitted, 31 µs")
GM8_TOLERANCE = ("IPv6 OWD above IPv4 in most equal-payload cells: the 95 % interval of the share "
                 "above 50 % (sign test); the paper's own Tables III-VI: 58/60 cells")


def gm_1(d: Data) -> Outcome:
    thr, owd = _gm_throughput(d), _gm_owd(d)
    t_cells = [(k, thr[k], thr[(k[0], 6, k[2])]) for k in thr
               if k[1] == 4 and (k[0], 6, k[2]) in thr]
    o_cells = [(k, owd[k], owd[(k[0], k[1], 6, k[3])]) for k in owd
               if k[2] == 4 and (k[0], k[1], 6, k[3]) in owd]
    if not t_cells and not o_cells:
        return not_measured("IPv4 and IPv6 throughput or OWD at equal payloads")
    t_ok = sum(a > b for _, a, b in t_cells)
    o_ok = sum(a < b for _, a, b in o_cells)
    ev = (f"throughput IPv4 > IPv6 in {frac(t_ok, len(t_cells))} cells" if t_cells else
          "throughput: no equal payload of both versions that the sender could offer")
    ev += f", OWD IPv4 < IPv6 in {frac(o_ok, len(o_cells))} cells (equal payload)"
    if o_cells:
        med = statistics.median(b - a for _, a, b in o_cells)
        ev += f"; median OWD gap IPv6 − IPv4 {med:+.1f} µs"
    o = judge_share(t_ok + o_ok, len(t_cells) + len(o_cells), GM1_TOLERANCE,
                    "IPv4 better (throughput and OWD)",
                    exact=d.exact_rows(d.select("rfc2544") + d.select("pingpong")))
    return replace(o, evidence=f"{ev}; {o.evidence}",
                   reason=o.reason or ("" if o.status == "holds" else d.serialization_reason()))


def _sawtooth(d: Data, ip: int, rate: float, knee: int, second: int | None,
              peak_mbps: float | None) -> Outcome:
    thr = {k[2]: v for k, v in _gm_throughput(d).items() if k[0] == rate and k[1] == ip}
    if knee not in thr or knee + 1 not in thr:
        have = ", ".join(str(n) for n in sorted(thr)) or "none"
        return not_measured(f"IPv{ip} throughput at {knee} and {knee + 1} B at "
                             f"{rate_name(rate)} (have: {have})")
    below = [thr[n] for n in sorted(thr) if n <= knee]
    rises = all(b >= a * (1 - 0.002) for a, b in itertools.pairwise(below))
    falls = thr[knee + 1] < thr[knee]
    parts = [f"{n} B {mbps(v)}" for n, v in sorted(thr.items())]
    ok = rises and falls
    ev = (f"IPv{ip} at {rate_name(rate)} (Mbit/s): {', '.join(parts)}; rises to {knee}: "
          f"{'yes' if rises else 'no'}; falls at {knee + 1}: {'yes' if falls else 'no'}")
    if second is not None:
        if second in thr and second - 1 in thr:
            again = thr[second] < thr[second - 1]
            ok = ok and again
            ev += f"; falls again at {second}: {'yes' if again else 'no'}"
        else:
            ev += f"; fall at {second} not measured"
    if peak_mbps is not None:
        peak = max(thr.values()) / 1e6
        close = abs(peak / peak_mbps - 1) <= 0.02
        ok = ok and close
        ev += f"; peak {peak:.2f} vs paper {peak_mbps:.2f} Mbit/s"
    return verdict(ok, ev)


def gm_2(d: Data) -> Outcome:
    return _sawtooth(d, 4, 10e6, 1480, 2961, 9.62)


def gm_3(d: Data) -> Outcome:
    return _sawtooth(d, 6, 10e6, 1460, 2901, 9.49)


GM4_TOLERANCE = ("the sawtooth at 100 Mbit/s (rises to 1480/1460 B, falls after) and IPv4 above "
                 "IPv6 in most equal payloads (sign test; the paper's Tables I-II: 6/6)")


def gm_4(d: Data) -> Outcome:
    v4 = _sawtooth(d, 4, 100e6, 1480, None, None)
    v6 = _sawtooth(d, 6, 100e6, 1460, None, None)
    if v4.status == "not measured" and v6.status == "not measured":
        return not_measured("throughput at 100 Mbit/s around 1480/1460 B")
    thr = _gm_throughput(d)
    pairs = [(thr[k], thr[(k[0], 6, k[2])]) for k in thr
             if k[0] == 100e6 and k[1] == 4 and (k[0], 6, k[2]) in thr]
    above = sum(a > b for a, b in pairs)
    share = judge_share(above, len(pairs), GM4_TOLERANCE, "IPv4 > IPv6 at equal payloads",
                        exact=d.exact_rows(d.select("rfc2544")))
    states = {v4.status, v6.status, share.status} - {"not measured"}
    status: Status = ("does not hold" if "does not hold" in states else "holds"
                      if states == {"holds"} else "inconclusive")
    return Outcome(status, f"{v4.evidence} | {v6.evidence} | {share.evidence}",
                   share.reason if status == "inconclusive" else "", share.n, share.effect,
                   share.interval, GM4_TOLERANCE)


def gm_5(d: Data) -> Outcome:
    thr = _gm_throughput(d, exclude_limited=False)
    limited = _gm_limited(d)
    if not thr:
        return not_measured("zero-loss throughput (rfc2544) at a shaped rate")
    worst: tuple[float, tuple[float, int, int] | None] = (0.0, None)
    slow: list[str] = []
    gig_small: list[tuple[int, int, float, bool]] = []
    gig_large: list[tuple[int, int, float, bool]] = []
    for (rate, ip, n), v in thr.items():
        if rate is None or n is None:
            continue
        ratio = v / models.max_throughput_bps(n, rate, ip)
        if rate >= 1e9:
            (gig_small if n <= 100 else gig_large).append((ip, n, ratio, (rate, ip, n) in limited))
        elif (rate, ip, n) in limited:  # measures the sender, not the path: shown, not judged
            slow.append(f"v{ip} {n} B at {rate_name(rate)} {ratio:.2f}")
        elif abs(ratio - 1) >= abs(worst[0] - 1) or worst[1] is None:
            worst = (ratio, (rate, ip, n))
    ok = True
    parts = []
    if worst[1] is not None:
        rate, ip, n = worst[1]
        ok = abs(worst[0] - 1) <= CLOSE
        parts.append(f"10/100 Mbit/s: worst measured/model {worst[0]:.3f} "
                     f"(IPv{ip} {n} B at {rate_name(rate)})")
    reason = ""
    if slow:
        parts.append("not judged, generator-limited: " + ", ".join(slow))
    for label, cells in (("small (≤100 B)", gig_small), ("larger", gig_large)):
        if cells:
            txt = ", ".join(f"v{ip} {n} B {r:.2f}{'*' if lim else ''}"
                            for ip, n, r, lim in sorted(cells))
            parts.append(f"1 Gbit/s {label}: {txt}")
    if gig_large and any(abs(r - 1) > CLOSE for _, _, r, _ in gig_large):
        ok = False
        if any(lim for *_, lim in gig_large):
            reason = GENERATOR
    if worst[1] is None and not gig_small and not gig_large:
        return not_measured("a throughput cell the sender could offer (all generator-limited)")
    if gig_small or gig_large:
        parts.append("* = generator-limited")
    else:
        parts.append("1 Gbit/s not measured")
    return verdict(ok, "; ".join(parts), reason)


def _gm_net_owd(d: Data) -> dict[tuple[Any, ...], float]:
    """(rate, routers, ip, payload) -> OWD less the probe's own loopback cost (µs), at the
    paper's two rates: what equation (10) describes."""
    owd = _gm_owd(d)
    over = d.means(d.select("pingpong"), "probe_overhead_median_us",
                   lambda r: (rate_bps(r), int(r.point.get("topology.routers", 0)),
                              int(param(r, "ip")), size_of(r)))
    # on a busy machine the probe's median cost can exceed the OWD's: never below zero
    return {k: max(0.0, v - over.get(k, 0.0)) for k, v in owd.items()
            if k[0] in (10e6, 100e6) and k[3] is not None}


def fit_pi(net: dict[tuple[Any, ...], float]) -> float | None:
    """The per-link cost π (s) that fits equation (9) to these cells best (least squares), as
    the paper fitted its own π = 30 µs: measured - model(π = 0) = (routers + 1) · π."""
    num = den = 0.0
    for (rate, routers, ip, n), v in net.items():
        links = routers + 1
        num += links * (v * 1e-6 - models.owd(n, rate, ip, routers, propagation_s=0.0))
        den += links * links
    return num / den if den else None


def gm_6(d: Data) -> Outcome:
    net = _gm_net_owd(d)
    pi = fit_pi(net)
    if pi is None:
        return not_measured("OWD at 10 or 100 Mbit/s")
    cells = []
    for (rate, routers, ip, n), v in net.items():
        model = models.owd(n, rate, ip, routers, propagation_s=max(pi, 0.0)) * 1e6
        cells.append((abs(v - model) <= max(0.10 * model, 10.0), rate, routers, ip, n, v, model))
    close = sum(c[0] for c in cells)
    worst = max(cells, key=lambda c: abs(c[5] / c[6] - 1) if c[6] else 0.0)
    ev = (f"π fitted here {pi * 1e6:.1f} µs per link (the paper fitted "
          f"{models.DEFAULT_PROPAGATION_S * 1e6:.0f} µs); with it, within 10 % (or 10 µs) of "
          f"eq. (10) in {frac(close, len(cells))} cells, less the probe's loopback cost; worst "
          f"IPv{worst[3]} {worst[4]} B, {worst[2]} routers at {rate_name(worst[1])}: "
          f"{worst[5]:.0f} µs vs model {worst[6]:.0f} µs")
    o = verdict(close >= GM6_SHARE * len(cells) and pi >= 0, ev, d.serialization_reason())
    return replace(o, n=len(cells), effect=close / len(cells), tolerance=GM6_TOLERANCE)


def gm_7(d: Data) -> Outcome:
    owd = _gm_owd(d)
    pi = fit_pi(_gm_net_owd(d))
    series: dict[tuple[Any, ...], dict[int, float]] = defaultdict(dict)
    for (rate, routers, ip, n), v in owd.items():
        if rate is not None and n is not None:
            series[(rate, ip, n)][routers] = v
    fits = []
    for (rate, ip, n), pts in series.items():
        if len(pts) < 3:
            continue
        xs = sorted(pts)
        ys = [pts[x] for x in xs]
        slope, r2 = linfit(xs, ys)
        prop = max(pi, 0.0) if pi is not None else models.DEFAULT_PROPAGATION_S
        model = (models.owd(n, rate, ip, 1, propagation_s=prop)
                 - models.owd(n, rate, ip, 0, propagation_s=prop)) * 1e6
        fits.append((rate, ip, n, slope, r2, model))
    if not fits:
        return not_measured("OWD at three or more router counts for one payload")
    ok_fits = [f for f in fits if f[4] >= 0.9 and abs(f[3] / f[5] - 1) <= 0.25]
    worst = min(fits, key=lambda f: f[3] / f[5])
    where = f"π fitted here {pi * 1e6:.1f} µs" if pi is not None else "the paper's π"
    ev = (f"linear (R² ≥ 0.9) with slope within 25 % of TTFS(m)+π ({where}) in "
          f"{frac(len(ok_fits), len(fits))} series; e.g. IPv{worst[1]} {worst[2]} B at "
          f"{rate_name(worst[0])}: {worst[3]:.1f} µs/router (R² {worst[4]:.2f}) vs model "
          f"{worst[5]:.1f}")
    return verdict(len(ok_fits) == len(fits), ev, d.serialization_reason())


def gm_8(d: Data) -> Outcome:
    owd = _gm_owd(d)
    cells = [(owd[k], owd[(k[0], k[1], 6, k[3])]) for k in owd
             if k[2] == 4 and (k[0], k[1], 6, k[3]) in owd]
    if not cells:
        return not_measured("IPv4 and IPv6 OWD at equal payloads")
    above = sum(b > a for a, b in cells)
    med = statistics.median(b - a for a, b in cells)
    o = judge_share(above, len(cells), GM8_TOLERANCE, "IPv6 OWD above IPv4",
                    exact=d.exact_rows(d.select("pingpong")))
    return replace(o, evidence=f"{o.evidence}; median gap {med:+.1f} µs",
                   reason=o.reason or ("" if o.status == "holds" else d.serialization_reason()))


def gm_9(d: Data) -> Outcome:
    thr = _gm_throughput(d, exclude_limited=False)
    ratios = [(v / models.max_throughput_bps(n, rate, ip), rate, ip, n)
              for (rate, ip, n), v in thr.items() if rate is not None and n is not None]
    if not ratios:
        return not_measured("zero-loss throughput (rfc2544) at a shaped rate")
    top = max(ratios)
    over = sum(r > 1.01 for r, *_ in ratios)
    return verdict(over == 0, f"measured ≤ model (+1 % tolerance) in "
                               f"{frac(len(ratios) - over, len(ratios))} cells; highest "
                               f"measured/model {top[0]:.3f} (IPv{top[2]} {top[3]} B at "
                               f"{rate_name(top[1])})")


BY_SHAPER = ("the link shaper (tbf, netem) frames packets by the same Ethernet/IP arithmetic "
             "as the model: the shape and the bound are the shaper's own, not a finding")

CLAIMS: tuple[Claim, ...] = (
    Claim('gm:1', "IPv4 performs slightly better than IPv6 (higher throughput, lower OWD) at every payload.", gm_1,  # noqa: E501
          effect=True),
    Claim('gm:2', "IPv4 Ethernet maximum throughput rises up to 1480 B, falls at 1481, repeats every 1480 B; peak 9.62 Mbit/s.", gm_2,  # noqa: E501
          construction=BY_SHAPER),
    Claim('gm:3', "IPv6 maximum rises up to 1460 B, falls at 1461 and 2901; peak 9.49 Mbit/s.", gm_3,  # noqa: E501
          construction=BY_SHAPER),
    Claim('gm:4', "Fast Ethernet has the same shape, IPv4 above IPv6.", gm_4),
    Claim('gm:5', "Measured throughput is very close to the model, except small payloads on GigabitEthernet (Tables I–II).", gm_5),  # noqa: E501
    Claim('gm:6', "Measured OWD through 0–5 routers is very close to equation (10) at 10 and 100 Mbit/s (Tables III–VI).", gm_6),  # noqa: E501
    Claim('gm:7', "OWD grows linearly with the number of routers (slope TTFS + π).", gm_7),
    Claim('gm:8', "IPv6 OWD is slightly above IPv4 at equal payload.", gm_8,
          effect=True),
    Claim('gm:9', "The models are an upper bound on achievable throughput.", gm_9,
          construction=BY_SHAPER),
)
