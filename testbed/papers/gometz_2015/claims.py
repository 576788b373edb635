"""The claims of Gometz 2015 (go:1-go:10): one check per claim, and their declarations."""
# ruff: noqa: RUF001  (claims and evidence keep the papers' minus, times and approx signs)

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from testbed.papers import Claim
from testbed.report.claims import (
    CLOSE,
    Data,
    Outcome,
    Status,
    frac,
    mbps,
    not_measured,
    param,
    size_of,
    verdict,
)
from testbed.report.verdict import (
    cells_ratio,
    describe_effect,
    holm,
    ratio,
    refuted,
    slope,
    tost_p,
)
from testbed.results import TrialRow


def _go_series(d: Data) -> tuple[str, dict[tuple[Any, ...], list[float]]]:
    """The paper's throughput (iperf TCP, write length = frame size), else RFC 2544's."""
    tcp = [r for r in d.select("iperf3") if param(r, "protocol") == "tcp"]
    if tcp:
        return "iperf TCP", d.cells(tcp, "receiver_bps",
                                    lambda r: (int(param(r, "ip")), size_of(r)))
    return "RFC 2544", d.cells(d.select("rfc2544"), "throughput_bps",
                               lambda r: (int(param(r, "ip")), size_of(r)))


GO1_MARGIN = CLOSE
GO1_TOLERANCE = (f"equivalent within ±{GO1_MARGIN:.0%} per frame size (TOST, Holm-corrected over "
                 "the sizes; ours: the paper names no margin), IPv4's pooled advantage above 0")


def _go1_cells(d: Data) -> list[tuple[str, int, list[float], list[float], bool]]:
    """(series, size, values of the worse-if-higher side, of the other): throughput with IPv6
    first (IPv4 better when higher), ping RTT with IPv4 first (IPv4 better when IPv6's is)."""
    label, thr = _go_series(d)
    lat = d.cells(d.select("ping"), "rtt_mean_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    tcp = [r for r in d.select("iperf3") if param(r, "protocol") == "tcp"]
    exact_thr = d.exact_rows(tcp or d.select("rfc2544"))
    exact_lat = d.exact_rows(d.select("ping"))
    out = [(f"{label} throughput", s, thr[(6, s)], thr[(4, s)], exact_thr)
           for ip, s in sorted(thr) if ip == 4 and (6, s) in thr]
    return out + [("ping RTT", s, lat[(4, s)], lat[(6, s)], exact_lat) for ip, s in sorted(lat)
                  if ip == 4 and (6, s) in lat]


def go_1(d: Data) -> Outcome:
    """No significant difference as equivalence (TOST per frame size, Holm over the sizes),
    and 'IPv4 slightly better' as IPv4's advantage pooled over the cells."""
    cells = _go1_cells(d)
    if not cells:
        return not_measured("IPv4 and IPv6 throughput or latency at equal frame sizes")
    effects = [ratio(a, b, exact=exact) for _, _, a, b, exact in cells]
    short = [f"{what} {s} B" for (what, s, *_), e in zip(cells, effects, strict=True)
             if e is None]
    known = [e for e in effects if e is not None]
    adj = holm([tost_p(e, GO1_MARGIN) for e in known])
    beyond = refuted(known, "within", GO1_MARGIN)
    outside = [e for e, r in zip(known, beyond, strict=True) if r]
    equivalent = not short and all(p < 0.05 for p in adj)
    adv = cells_ratio([(a, b) for _, _, a, b, _ in cells],
                      exact=all(exact for *_, exact in cells))
    ev = (f"{len(cells)} cells; equivalent within ±{GO1_MARGIN:.0%} (Holm-corrected TOST p < "
          f"0.05) in {sum(p < 0.05 for p in adj)}/{len(cells)}"
          + (f"; no interval (one repetition) at {', '.join(short)}" if short else "")
          + (f"; {len(outside)} cells differ beyond the margin (Holm-corrected)" if outside
             else ""))
    if adv is not None:
        ev += f"; IPv4's advantage pooled: {describe_effect(adv)}"
    wrong = bool(outside) or (adv is not None and adv.high < 0)
    shown = equivalent and adv is not None and adv.low > 0
    status: Status = "does not hold" if wrong else "holds" if shown else "inconclusive"
    reason = "" if status != "inconclusive" else (
        "needs two or more repetitions per frame size" if short or adv is None else
        "equivalence or IPv4's advantage is not shown at this precision: more repetitions "
        "would decide it")
    return Outcome(status, ev, reason, adv.n if adv else None, adv.value if adv else None,
                   (adv.low, adv.high) if adv else None, GO1_TOLERANCE)


GO2_TOLERANCE = ("spread (each repetition's distance from its cell's mean) rising with frame "
                 "size: slope's 95 % interval above 0 per IP version; IPv6's over IPv4's above "
                 "0 (the paper: 51 vs 90 Mbit/s at 1518 B, sec. 8)")


def go_2(d: Data) -> Outcome:
    """The spread as each repetition's absolute deviation from its cell's mean: its slope over
    frame size per IP version (grows), and IPv6's over IPv4's with each frame size's deviations
    scaled by their mean (larger), by intervals."""
    label, thr = _go_series(d)
    dev: dict[int, list[tuple[float, float]]] = defaultdict(list)
    by_cell: dict[tuple[int, Any], list[float]] = {}
    for (ip, size), vals in thr.items():
        # three or more: two repetitions lie equally far from their mean (one number twice),
        # and a slope through such pairs has a zero-width interval that noise decides
        if len(vals) >= 3:
            m = statistics.fmean(vals)
            by_cell[(ip, size)] = [abs(v - m) for v in vals]
            dev[ip] += [(float(size), x) for x in by_cell[(ip, size)]]
    if not dev or any(len({x for x, _ in pts}) < 2 for pts in dev.values()):
        return not_measured(f"{label} throughput with ≥ 3 repetitions at ≥ 2 frame sizes")
    states, parts = [], []
    for ip, pts in sorted(dev.items()):
        sl = slope([x for x, _ in pts], [y for _, y in pts])
        states.append("inconclusive" if sl is None else "holds" if sl.low > 0
                      else "does not hold" if sl.high < 0 else "inconclusive")
        parts.append(f"IPv{ip} spread slope " + ("-" if sl is None else
                     f"{sl.value:.0f} bit/s per byte (95 % {sl.low:.0f} … {sl.high:.0f}, "
                     f"n = {sl.n})"))
    e = None
    if 4 in dev and 6 in dev:
        a, b = [], []  # deviations over their frame size's mean deviation (both versions)
        for ip, sz in sorted(by_cell):
            if ip == 4 and (6, sz) in by_cell:
                norm = statistics.fmean(by_cell[(4, sz)] + by_cell[(6, sz)]) or 1.0
                a += [x / norm for x in by_cell[(4, sz)]]
                b += [x / norm for x in by_cell[(6, sz)]]
        e = ratio(a, b)
        states.append("inconclusive" if e is None else "holds" if e.low > 0
                      else "does not hold" if e.high < 0 else "inconclusive")
        parts.append("IPv6's spread over IPv4's: " + ("-" if e is None else describe_effect(e)))
    status: Status = ("does not hold" if "does not hold" in states else "holds"
                      if all(x == "holds" for x in states) else "inconclusive")
    reason = "" if status != "inconclusive" else (
        "an interval straddles 0: more repetitions per frame size would decide it")
    return Outcome(status, f"{label}: " + "; ".join(parts), reason, e.n if e else None,
                   e.value if e else None, (e.low, e.high) if e else None, GO2_TOLERANCE)


GO3_TOLERANCE = (f"every frame size equivalent within ±{CLOSE:.0%} (TOST, Holm-corrected; "
                 "'too small to pick a winner') and IPv4 ≥ IPv6 at most sizes (the paper: all "
                 "but 128 and 1280 B, sec. 8), refuted where IPv6's 95 % interval lies above "
                 "IPv4's, not by the order of two means")


def go_3(d: Data) -> Outcome:
    """Equivalence per frame size by Holm-corrected TOST; "IPv4 ≥ IPv6 at most sizes" fails
    only where IPv6 is shown higher (its interval above 0) at half the sizes or more: two
    means' order inside intervals of ±50 % decided the verdict by noise between quick runs."""
    label, thr = _go_series(d)
    sizes = sorted({s for ip, s in thr if ip == 4 and (6, s) in thr})
    if not sizes:
        return not_measured("IPv4 and IPv6 throughput at equal frame sizes")
    tcp = [r for r in d.select("iperf3") if param(r, "protocol") == "tcp"]
    exact = d.exact_rows(tcp or d.select("rfc2544"))
    effects = [ratio(thr[(6, s)], thr[(4, s)], exact=exact) for s in sizes]
    ge = sum(statistics.fmean(thr[(4, s)]) >= statistics.fmean(thr[(6, s)]) for s in sizes)
    known = [e for e in effects if e is not None]
    ahead6 = sum(e.high < 0 for e in known)  # IPv6 shown above IPv4 (e: IPv4 over IPv6, less 1)
    adj = holm([tost_p(e, CLOSE) for e in known])
    outside = sum(refuted(known, "within", CLOSE))
    equivalent = len(known) == len(effects) and all(p < 0.05 for p in adj)
    status: Status = ("does not hold" if outside or ahead6 >= len(sizes) / 2 else "holds"
                      if equivalent else "inconclusive")
    worst = max(known, key=lambda e: max(abs(e.low), abs(e.high)), default=None)
    ev = (f"{label}: IPv4 ≥ IPv6 in {frac(ge, len(sizes))} frame sizes by the means, IPv6 "
          f"shown above IPv4 (95 % interval) in {frac(ahead6, len(sizes))}; equivalent within "
          f"±{CLOSE:.0%} (Holm-corrected TOST) in {sum(p < 0.05 for p in adj)}/{len(sizes)}"
          + (f"; widest: {describe_effect(worst)}" if worst else ""))
    reason = "" if status != "inconclusive" else (
        "needs two or more repetitions per frame size" if len(known) < len(effects) else
        "equivalence is not shown at this precision: more repetitions would decide it")
    return Outcome(status, ev, reason, worst.n if worst else None,
                   worst.value if worst else None, (worst.low, worst.high) if worst else None,
                   GO3_TOLERANCE)


def go_4(d: Data) -> Outcome:
    """Rises: the slope of RTT over frame size above 0 (interval) per IP version; IPv6's larger
    anomalies: its (max - mean) per trial over IPv4's, interval above 0; neither version lower
    at every size."""
    rows = d.select("ping")
    mean = d.cells(rows, "rtt_mean_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    worst = d.cells(rows, "rtt_max_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    if not mean or any(len({s for ip2, s in mean if ip2 == ip}) < 2 for ip, _ in mean):
        return not_measured("ping RTT at two or more frame sizes")
    parts, verdicts = [], []
    for ip in sorted({ip for ip, _ in mean}):
        pts = [(float(s), v) for (i, s), vs in mean.items() if i == ip for v in vs]
        sl = slope([x for x, _ in pts], [y for _, y in pts])
        verdicts.append(None if sl is None else sl.low > 0 if sl.low > 0 or sl.high < 0
                        else None)
        parts.append(f"IPv{ip} RTT slope " + ("-" if sl is None else
                     f"{sl.value * 1e6:.2f} ns/B (95 % {sl.low * 1e6:.2f} … "
                     f"{sl.high * 1e6:.2f}, n = {sl.n})"))
    common = sorted({s for ip, s in mean if ip == 4} & {s for ip, s in mean if ip == 6})
    anom = {ip: [w - m for s in common for w, m in zip(worst.get((ip, s), []),
                                                       mean.get((ip, s), []), strict=False)]
            for ip in (4, 6)}
    e = ratio(anom[4], anom[6], exact=d.exact_rows(rows)) if common else None
    verdicts.append(None if e is None else True if e.low > 0 else False if e.high < 0 else None)
    parts.append("IPv6 anomalies (max − mean) vs IPv4: " + ("-" if e is None
                                                              else describe_effect(e)))
    if common:
        lower4 = sum(statistics.fmean(mean[(4, s)]) < statistics.fmean(mean[(6, s)])
                     for s in common)
        verdicts.append(0 < lower4 < len(common) if len(common) >= 2 else None)
        parts.append(f"IPv4 lower in {frac(lower4, len(common))} sizes")
    status: Status = ("does not hold" if False in verdicts else "holds"
                      if all(v is True for v in verdicts) else "inconclusive")
    reason = "" if status != "inconclusive" else (
        "a part's interval straddles 0 or has too few points: more repetitions would decide it")
    return Outcome(status, "; ".join(parts), reason, e.n if e else None,
                   e.value if e else None, (e.low, e.high) if e else None,
                   "slopes and IPv6's extra anomalies above 0 (95 % intervals); ours")


GO5_TOLERANCE = ("0 % frames lost at every step at or below the measured throughput, in every "
                 "(IP version, frame size) series (the paper's sec. 4.2.3 and 5.3: 'reduced in "
                 "10 % intervals until no frames were lost', 0 % in every test; frames are "
                 "counted: no noise to bound)")


def go_5(d: Data) -> Outcome:
    """The paper's frame loss test: steps of 10 % down from the measured throughput, all 0 %.
    Ours steps down from line rate (RFC 2544 §26.3); the steps at or below the measured
    throughput are the paper's test, those above it are shown but not judged. A series with
    no such step the sender could offer leaves the claim inconclusive."""
    series: list[tuple[TrialRow, list[dict[str, Any]]]] = []
    for row in d.select("rfc2544"):
        steps = row.result.get("frame_loss")
        steps = [p for p in steps if isinstance(p, dict) and "offered" in p
                 and "loss_percent" in p] if isinstance(steps, list) else []
        if steps and "throughput_bps" in row.metrics:  # (results before `offered`: not read)
            series.append((row, steps))
    if not series:
        return not_measured("an RFC 2544 throughput and frame loss test (rfc2544 with "
                            "test = both)")

    def paper_step(r: TrialRow, p: dict[str, Any]) -> bool:
        return (float(p["offered"]) <= float(r.metrics["throughput_bps"]) * 1.0001
                and not p.get("generator_short"))

    judged = [(r, p) for r, s in series for p in s if paper_step(r, p)]
    if not judged:
        return not_measured("a frame loss step at or below the measured throughput (rfc2544 "
                            "with test = both steps down until two steps lose nothing)")
    lossy = [(r, p) for r, p in judged if float(p["loss_percent"]) > 0]
    above = sum(any(float(p["offered"]) > float(r.metrics["throughput_bps"]) * 1.0001
                    and float(p["loss_percent"]) > 0 for p in s) for r, s in series)
    unjudged = sorted({f"IPv{param(r, 'ip')} {size_of(r)} B" for r, s in series
                       if not any(paper_step(r, p) for p in s)})
    ev = (f"{len(judged) - len(lossy)}/{len(judged)} steps at or below the measured "
          f"throughput lost nothing ({len(series)} series); above it (line rate down, "
          f"RFC 2544 §26.3) {frac(above, len(series))} series lost frames")
    worst = max((float(p["loss_percent"]) for _, p in judged), default=0.0)
    if lossy:
        r, p = max(lossy, key=lambda x: float(x[1]["loss_percent"]))
        ev += (f"; worst {float(p['loss_percent']):.1f} % at {mbps(float(p['offered']))} "
               f"Mbit/s (IPv{param(r, 'ip')} {size_of(r)} B)")
        return Outcome("does not hold", ev, "frames were lost at a rate the throughput test "
                       "had passed: the device is not steady at its own measured throughput",
                       len(judged), worst / 100, None, GO5_TOLERANCE)
    if unjudged:
        return Outcome("inconclusive", ev + "; no step the sender could offer at or below the "
                       "measured throughput: " + ", ".join(unjudged),
                       f"evidence short: {len(unjudged)} of {len(series)} series have no step "
                       "of the paper's test; a sender that can offer their rates would decide "
                       "it", len(judged), 0.0, None, GO5_TOLERANCE)
    return Outcome("holds", ev, "", len(judged), 0.0, None, GO5_TOLERANCE)


def _feature_claim(parts: Sequence[tuple[str, int]], what: str) -> Callable[[Data], Outcome]:
    """A go:6-go:9 claim from the featurecheck trials: holds when every (check, IP version)
    of `parts` works in every trial; "not measured" names the parts this tier could not build
    (IPsec and HFSC need the full-kernel tier) or that were not run."""

    def check(d: Data) -> Outcome:
        got: dict[tuple[str, int], list[str]] = {}
        for r in d.select("featurecheck"):
            res = r.result if isinstance(r.result, dict) else {}
            got.setdefault((str(res.get("feature")), int(res.get("ip", 0))), []).append(
                str(res.get("status")))
        if not any(k in got for k in parts):
            return not_measured(f"featurecheck trials of {what}")
        ev, failing, missing = [], [], []
        for check_name, ip in parts:
            st = got.get((check_name, ip), [])
            label = f"{check_name} IPv{ip}"
            if not st or all(x == "not supported" for x in st):
                missing.append(label)
                continue
            st = [x for x in st if x != "not supported"]  # another tier could build it
            n_ok = st.count("works")
            ev.append(f"{label}: {n_ok}/{len(st)} work")
            if n_ok < len(st):
                failing.append(label)
        evidence = (f"functional check of {what} (featurecheck: traffic through the configured "
                    "feature behaves as configured; no performance is measured): "
                    + "; ".join(ev))
        if failing:
            return verdict(False, evidence, "failed its traffic check: " + ", ".join(failing))
        if missing:
            return Outcome("not measured", evidence, "not measured here: " + ", ".join(missing)
                           + " (not supported on this tier or not run; ipsec and qos-hfsc "
                           "need the full-kernel tier)")
        return verdict(True, evidence)

    return check


def go_10(d: Data) -> Outcome:
    thr: dict[tuple[str, int], list[float]] = {}
    for r in d.select("routerprofile"):
        if "throughput_bps" in r.metrics:
            thr.setdefault((str(param(r, "profile")), int(param(r, "ip") or 4)), []).append(
                r.metrics["throughput_bps"])
    ev = []
    for (prof, ip), v in sorted(thr.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        base = thr.get(("plain", ip))
        if prof != "plain" and base:
            ev.append(f"IPv{ip} {prof}/plain throughput "
                      f"{statistics.fmean(v) / statistics.fmean(base):.2f}")
    return Outcome("not measurable here", "; ".join(ev), "VyOS and pfSense are not emulated "
                   "(Linux only); the analogue, router profiles (plain forwarding, conntrack, "
                   "firewall, NAT), is in the report's profile table"
                   + ("" if ev else " once the routerprofile measurement has run"))


FEATURE_TOLERANCE = ("functional: every (feature, IP version) works in every featurecheck trial "
                     "(the paper lists the features its routers offer; it measures none of them)")
_GO6 = _feature_claim((("nat", 4), ("nat", 6), ("nptv6", 6)), "NAT and NPTv6")
_GO7 = _feature_claim((("dhcp-server", 4), ("dhcp-server", 6), ("dhcp-relay", 4),
                       ("dhcp-relay", 6)), "DHCP server/relay and DHCPv6")
_GO8 = _feature_claim((("firewall", 4), ("firewall", 6)), "the firewall")
_GO9 = _feature_claim((("ipsec", 4), ("ipsec", 6), ("qos", 4), ("qos", 6),
                       ("qos-hfsc", 4), ("qos-hfsc", 6)), "IPsec and HTB/HFSC QoS")

CLAIMS: tuple[Claim, ...] = (
    Claim('go:1', "IPv4 and IPv6 show no significant difference; IPv4 slightly better.", go_1,
          tolerance=GO1_TOLERANCE, effect=True),
    Claim('go:2', "Throughput spread (max − min) is small at small frames and grows at large frames; IPv6 spread larger.", go_2,  # noqa: E501
          tolerance=GO2_TOLERANCE, effect=True),
    Claim('go:3', "Average IPv4 throughput ≥ IPv6 at most frame sizes; differences too small to pick a winner.", go_3,  # noqa: E501
          tolerance=GO3_TOLERANCE),
    Claim('go:4', "Latency rises with frame size; IPv6 has larger anomalies; neither version consistently lower.", go_4,  # noqa: E501
          effect=True),
    Claim('go:5', "Frame loss was 0 % in every test (the paper stepped down by 10 % from its measured throughput; RFC 2544 §26.3 starts at the maximum rate).", go_5,  # noqa: E501
          tolerance=GO5_TOLERANCE, effect=True),
    Claim('go:6', "The router offers source/destination NAT and NPTv6 (IPv6 prefix translation).", _GO6,  # noqa: E501
          tolerance=FEATURE_TOLERANCE),
    Claim('go:7', "The router offers DHCP server and relay, and DHCPv6.", _GO7,
          tolerance=FEATURE_TOLERANCE),
    Claim('go:8', "The router's firewall filters IPv4 and IPv6 (netfilter); rule groups exist for IPv4.", _GO8,  # noqa: E501
          tolerance=FEATURE_TOLERANCE),
    Claim('go:9', "The router supports IPsec VPN; QoS uses tc with HTB and HFSC.", _GO9,
          tolerance=FEATURE_TOLERANCE),
    Claim('go:10', "(vendor) VyOS beats pfSense on throughput, pfSense has lower latency — not measurable here; the emulator's analogue compares router profiles (plain forwarding, conntrack, nftables rule sets).", go_10),  # noqa: E501
)
