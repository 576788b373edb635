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
    frac,
    mbps,
    not_measured,
    param,
    rel,
    size_of,
    verdict,
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


def go_1(d: Data) -> Outcome:
    from testbed.stats import welch_t

    label, thr = _go_series(d)
    lat = d.cells(d.select("ping"), "rtt_mean_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    sizes = sorted({k[1] for k in thr if (6, k[1]) in thr and (4, k[1]) in thr})
    lsizes = sorted({k[1] for k in lat if (6, k[1]) in lat and (4, k[1]) in lat})
    if not sizes and not lsizes:
        return not_measured("IPv4 and IPv6 throughput or latency at equal frame sizes")
    signif = better4 = n = 0
    tests = []
    for series, higher_better, ss in ((thr, True, sizes), (lat, False, lsizes)):
        for s in ss:
            a, b = series[(4, s)], series[(6, s)]
            n += 1
            ma, mb = statistics.fmean(a), statistics.fmean(b)
            better4 += (ma > mb) if higher_better else (ma < mb)
            if len(a) >= 2 and len(b) >= 2 and (statistics.pstdev(a) or statistics.pstdev(b)):
                sig = welch_t(a, b).significant_at_0_05
                tests.append("t")
            else:
                sig = abs(rel(ma, mb)) > CLOSE
                tests.append("rel")
            signif += sig
    how = ("Welch t, p < 0.05" if all(t == "t" for t in tests)
           else f"Welch t where ≥ 2 repetitions, else |diff| > {CLOSE:.0%}")
    ok = signif == 0 and better4 > n / 2
    return verdict(ok, f"{label} throughput and ping RTT: significant IPv4/IPv6 difference "
                        f"({how}) in {frac(signif, n)} frame sizes; IPv4 better in "
                        f"{frac(better4, n)}")


def go_2(d: Data) -> Outcome:
    label, thr = _go_series(d)
    spread = {k: max(v) - min(v) for k, v in thr.items() if len(v) >= 2}
    per_ip: dict[int, dict[int, float]] = defaultdict(dict)
    for (ip, s), v in spread.items():
        per_ip[ip][s] = v
    if not per_ip or any(len(v) < 2 for v in per_ip.values()):
        return not_measured(f"{label} throughput with ≥ 2 repetitions at ≥ 2 frame sizes")
    ok = True
    parts = []
    for ip, by in sorted(per_ip.items()):
        small, large = by[min(by)], by[max(by)]
        ok = ok and large > small
        parts.append(f"IPv{ip} spread {min(by)} B {mbps(small)}, {max(by)} B "
                     f"{mbps(large)} Mbit/s")
    if 4 in per_ip and 6 in per_ip:
        s4, s6 = sum(per_ip[4].values()), sum(per_ip[6].values())
        ok = ok and s6 > s4
        parts.append(f"total spread IPv6 {mbps(s6)} vs IPv4 {mbps(s4)} Mbit/s")
    return verdict(ok, f"{label}: " + "; ".join(parts))


def go_3(d: Data) -> Outcome:
    label, thr = _go_series(d)
    sizes = sorted({s for ip, s in thr if ip == 4 and (6, s) in thr})
    if not sizes:
        return not_measured("IPv4 and IPv6 throughput at equal frame sizes")
    diffs = [(s, rel(statistics.fmean(thr[(4, s)]), statistics.fmean(thr[(6, s)])))
             for s in sizes]
    ge = sum(r >= 0 for _, r in diffs)
    big = max(diffs, key=lambda x: abs(x[1]))
    ok = ge > len(diffs) / 2 and abs(big[1]) <= CLOSE
    return verdict(ok, f"{label}: IPv4 ≥ IPv6 in {frac(ge, len(diffs))} frame sizes; largest "
                        f"difference {big[1]:+.1%} at {big[0]} B")


def go_4(d: Data) -> Outcome:
    rows = d.select("ping")
    mean = d.means(rows, "rtt_mean_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    worst = d.means(rows, "rtt_max_ms", lambda r: (int(param(r, "ip")), size_of(r)))
    by: dict[int, dict[int, float]] = defaultdict(dict)
    for (ip, s), v in mean.items():
        by[ip][s] = v
    if not by or any(len(v) < 2 for v in by.values()):
        return not_measured("ping RTT at two or more frame sizes")
    ok = True
    parts = []
    for ip, m in sorted(by.items()):
        rises = m[max(m)] > m[min(m)]
        ok = ok and rises
        parts.append(f"IPv{ip} mean RTT {min(m)} B {m[min(m)] * 1000:.0f} µs → {max(m)} B "
                     f"{m[max(m)] * 1000:.0f} µs")
    common = sorted(set(by.get(4, {})) & set(by.get(6, {})))
    if common:
        anom = {ip: sum(worst[(ip, s)] - mean[(ip, s)] for s in common) for ip in (4, 6)}
        lower4 = sum(by[4][s] < by[6][s] for s in common)
        ok = ok and anom[6] > anom[4] and 0 < lower4 < len(common)
        parts.append(f"anomalies (max − mean, summed) IPv6 {anom[6] * 1000:.0f} µs vs IPv4 "
                     f"{anom[4] * 1000:.0f} µs; IPv4 lower in {frac(lower4, len(common))} sizes")
    else:
        parts.append("IPv4 vs IPv6 not measured")
    return verdict(ok, "; ".join(parts))


def go_5(d: Data) -> Outcome:
    """The paper's frame loss test: steps of 10 % down from the measured throughput, all 0 %.
    Ours steps down from line rate (RFC 2544 §26.3); the steps at or below the measured
    throughput are the paper's test, those above it are shown but not judged."""
    series: list[tuple[TrialRow, list[dict[str, Any]]]] = []
    for row in d.select("rfc2544"):
        steps = row.result.get("frame_loss")
        if isinstance(steps, list) and steps and "throughput_bps" in row.metrics:
            series.append((row, steps))
    if not series:
        return not_measured("an RFC 2544 throughput and frame loss test (rfc2544 with "
                             "test = both)")
    judged = [(r, p) for r, s in series for p in s
              if float(p["offered"]) <= float(r.metrics["throughput_bps"]) * 1.0001
              and not p.get("generator_short")]
    if not judged:
        return not_measured("a frame loss step at or below the measured throughput (rfc2544 "
                             "with test = both steps down until two steps lose nothing)")
    lossy = [(r, p) for r, p in judged if float(p["loss_percent"]) > 0]
    above = sum(any(float(p["offered"]) > float(r.metrics["throughput_bps"]) * 1.0001
                    and float(p["loss_percent"]) > 0 for p in s) for r, s in series)
    ev = (f"{len(judged) - len(lossy)}/{len(judged)} steps at or below the measured "
          f"throughput lost nothing ({len(series)} series); above it (line rate down, "
          f"RFC 2544 §26.3) {frac(above, len(series))} series lost frames")
    if lossy:
        r, p = max(lossy, key=lambda x: float(x[1]["loss_percent"]))
        ev += (f"; worst {float(p['loss_percent']):.1f} % at {mbps(float(p['offered']))} "
               f"Mbit/s (IPv{param(r, 'ip')} {size_of(r)} B)")
    reason = ("frames were lost at a rate the throughput test had passed: the device is not "
              "steady at its own measured throughput")
    return verdict(not lossy, ev, reason)


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
        evidence = "; ".join(ev)
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


_GO6 = _feature_claim((("nat", 4), ("nat", 6), ("nptv6", 6)), "NAT and NPTv6")
_GO7 = _feature_claim((("dhcp-server", 4), ("dhcp-server", 6), ("dhcp-relay", 4),
                       ("dhcp-relay", 6)), "DHCP server/relay and DHCPv6")
_GO8 = _feature_claim((("firewall", 4), ("firewall", 6)), "the firewall")
_GO9 = _feature_claim((("ipsec", 4), ("ipsec", 6), ("qos", 4), ("qos", 6),
                       ("qos-hfsc", 4), ("qos-hfsc", 6)), "IPsec and HTB/HFSC QoS")

CLAIMS: tuple[Claim, ...] = (
    Claim('go:1', "IPv4 and IPv6 show no significant difference; IPv4 slightly better.", go_1),
    Claim('go:2', "Throughput spread (max − min) is small at small frames and grows at large frames; IPv6 spread larger.", go_2),  # noqa: E501
    Claim('go:3', "Average IPv4 throughput ≥ IPv6 at most frame sizes; differences too small to pick a winner.", go_3),  # noqa: E501
    Claim('go:4', "Latency rises with frame size; IPv6 has larger anomalies; neither version consistently lower.", go_4),  # noqa: E501
    Claim('go:5', "Frame loss was 0 % in every test (the paper stepped down by 10 % from its measured throughput; RFC 2544 §26.3 starts at the maximum rate).", go_5),  # noqa: E501
    Claim('go:6', "The router offers source/destination NAT and NPTv6 (IPv6 prefix translation).", _GO6),  # noqa: E501
    Claim('go:7', "The router offers DHCP server and relay, and DHCPv6.", _GO7),
    Claim('go:8', "The router's firewall filters IPv4 and IPv6 (netfilter); rule groups exist for IPv4.", _GO8),  # noqa: E501
    Claim('go:9', "The router supports IPsec VPN; QoS uses tc with HTB and HFSC.", _GO9),
    Claim('go:10', "(vendor) VyOS beats pfSense on throughput, pfSense has lower latency — not measurable here; the emulator's analogue compares router profiles (plain forwarding, conntrack, nftables rule sets).", go_10),  # noqa: E501
)
