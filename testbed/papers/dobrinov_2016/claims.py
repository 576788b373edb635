"""The claims of Dobrinov et al. 2016 (do:1-do:16): one check per claim, and their declarations."""
# ruff: noqa: RUF001, RUF003  (claims and evidence keep the papers' minus, times and approx signs)

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from testbed.papers import Claim
from testbed.report.claims import (
    CLOSE,
    GENERATOR,
    LINUX_ROUTER,
    Data,
    Outcome,
    Status,
    linfit,
    mbps,
    not_measured,
    param,
    size_of,
    verdict,
)
from testbed.report.verdict import cells_ratio, difference, judge
from testbed.results import TrialRow


def _v6_share(row: TrialRow) -> float | None:
    ratio = param(row, "ratio")
    if ratio:
        try:
            a, b = (float(x) for x in str(ratio).split("/"))
        except ValueError:
            return None
        return b / (a + b) if a + b else None
    ip = param(row, "ip")
    return 1.0 if ip == 6 else 0.0 if ip == 4 else None


def _cpu(row: TrialRow) -> float | None:
    m = row.metrics
    if "cpu_machine_softirq_pct" not in m:
        return None
    return float(m["cpu_machine_softirq_pct"]) + float(m.get("cpu_machine_system_pct", 0.0))


def _do_mixed(d: Data, direction: str = "forward"
              ) -> tuple[dict[tuple[Any, ...], float], dict[tuple[Any, ...], float]]:
    """(frame_size, IPv6 share) -> (mean receiver bit/s, mean router-side CPU %): from the
    zero-loss searches (kind maxtraffic: the router's own CPU) when the senders limited none
    of them, else from iperf3's mixed flows (the machine's softirq + system share)."""
    best = [r for r in d.select("maxtraffic") if "max_received_bps" in r.metrics
            and (param(r, "direction") or "forward") == direction]
    if best and not any(r.metrics.get("generator_limited") for r in best):
        def mkey(r: TrialRow) -> tuple[Any, ...]:
            return (size_of(r), _v6_share(r))

        return (d.means(best, "max_received_bps", mkey), d.means(best, "router_cpu_pct", mkey))
    rows = [r for r in d.select("iperf3") if param(r, "protocol") == "udp"
            and (param(r, "direction") or "forward") == direction and param(r, "ratio")]
    def key(r: TrialRow) -> tuple[Any, ...]:
        return (size_of(r), _v6_share(r))

    traffic = d.means(rows, "receiver_bps", key)
    cpu: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for r in rows:
        c = _cpu(r)
        if c is not None:
            cpu[(size_of(r), _v6_share(r))].append(c)
    return traffic, {k: statistics.fmean(v) for k, v in cpu.items()}


def _by_size(cells: Mapping[tuple[Any, ...], float]) -> dict[Any, dict[float, float]]:
    out: dict[Any, dict[float, float]] = defaultdict(dict)
    for (size, share), v in cells.items():
        if share is not None:
            out[size][share] = v
    return dict(out)


def do_1(d: Data) -> Outcome:
    traffic, cpu = _do_mixed(d)
    t, c = _by_size(traffic), _by_size(cpu)
    sizes = [s for s in t if len(t[s]) >= 2 and s in c and len(c[s]) >= 2]
    if not sizes:
        return not_measured("mixed IPv4/IPv6 traffic at two or more IPv6 shares, with CPU")
    ok = True
    parts = []
    for s in sorted(sizes):
        lo, hi = min(t[s]), max(t[s])
        more_cpu = c[s][hi] > c[s][lo]
        less = t[s][hi] < t[s][lo] * (1 - 0.01)
        ok = ok and more_cpu and less
        parts.append(f"{s} B: IPv6 {lo:.0%}→{hi:.0%}: CPU {c[s][lo]:.1f}→{c[s][hi]:.1f} %, "
                     f"traffic {mbps(t[s][lo])}→{mbps(t[s][hi])} Mbit/s")
    return verdict(ok, "; ".join(parts), LINUX_ROUTER + " (the paper's Cisco 1841 was "
                    "CPU-bound; Linux forwards the offered load)")


DO2_FAR = 2.0
DO2_TOLERANCE = ("'far more': the IPv6-heaviest mix's drop at least 2× the IPv4-heaviest's "
                 "(and above 1 %); the paper prints 33.33 % vs 5.31 %, 6.3× (sec. 4.1, Fig. 3)")


def do_2(d: Data) -> Outcome:
    traffic, _ = _do_mixed(d)
    t = _by_size(traffic)
    if 1518 not in t or 1522 not in t:
        return not_measured("mixed traffic at 1518 and 1522-byte frames (have: "
                             + (", ".join(str(s) for s in sorted(t)) or "none") + ")")
    shares = sorted(set(t[1518]) & set(t[1522]))
    drops = {sh: 1 - t[1522][sh] / t[1518][sh] for sh in shares}
    rises = all(all(t[a][sh] <= t[b][sh] * 1.01 for sh in shares if sh in t[a] and sh in t[b])
                for a, b in zip(sorted(t), sorted(t)[1:], strict=False) if b <= 1518)
    far = True
    if len(shares) >= 2:  # "far more": the paper's 33.33 % vs 5.31 % is 6.3×; we ask 2×
        heavy, light = drops[max(shares)], drops[min(shares)]
        far = heavy > 0.01 and heavy >= DO2_FAR * max(light, 0.0)
    ok = rises and all(v > 0 for v in drops.values()) and far
    txt = ", ".join(f"IPv6 {sh:.0%}: {v:.1%}" for sh, v in drops.items())
    o = verdict(ok, f"rises to 1518 B: {'yes' if rises else 'no'}; drop 1518→1522 {txt}"
                f"; IPv6-heaviest drop ≥ {DO2_FAR:g}× the IPv4-heaviest: "
                f"{'yes' if far else 'no'}", LINUX_ROUTER)
    return replace(o, tolerance=DO2_TOLERANCE)


def do_3(d: Data) -> Outcome:
    traffic, _ = _do_mixed(d)
    t = {s: v for s, v in _by_size(traffic).items() if len(v) >= 2 and 0.0 in v}
    if not t:
        return not_measured("mixed traffic including pure IPv4 at two or more shares")
    ok = True
    parts = []
    for s, by in sorted(t.items()):
        order = [by[k] for k in sorted(by)]
        monotone = all(b <= a * 1.005 for a, b in itertools.pairwise(order))
        strict = order[-1] < order[0] * (1 - 0.01)
        ok = ok and monotone and strict
        parts.append(f"{s} B: " + ", ".join(f"IPv6 {k:.0%} {mbps(v)}"
                                            for k, v in sorted(by.items())))
    return verdict(ok, "; ".join(parts) + " Mbit/s", LINUX_ROUTER)


def do_4(d: Data) -> Outcome:
    _, cpu = _do_mixed(d)
    c = _by_size(cpu)
    if not c:
        return not_measured("router CPU under mixed traffic")
    parts = []
    ok = True
    share_sizes = [s for s in c if len(c[s]) >= 2]
    for s in share_sizes:
        rises = c[s][max(c[s])] > c[s][min(c[s])]
        ok = ok and rises
        parts.append(f"{s} B: CPU IPv6 {min(c[s]):.0%} {c[s][min(c[s])]:.1f} % → "
                     f"{max(c[s]):.0%} {c[s][max(c[s])]:.1f} %")
    v4 = {s: by[0.0] for s, by in c.items() if 0.0 in by}
    if len(v4) >= 2:
        small, large = min(v4), max(v4)
        ok = ok and v4[small] > v4[large]
        parts.append(f"pure IPv4 CPU {small} B {v4[small]:.1f} % vs {large} B {v4[large]:.1f} %")
    else:
        parts.append("not measured: IPv4 CPU at two or more frame sizes")
    if not share_sizes and len(v4) < 2:
        return not_measured("CPU at two IPv6 shares or two frame sizes")
    return verdict(ok, "; ".join(parts), LINUX_ROUTER)


def do_5(d: Data) -> Outcome:
    traffic, _ = _do_mixed(d)
    t = _by_size(traffic)
    sizes = sorted(s for s in t if s is not None)
    if len(sizes) < 2:
        return not_measured("traffic at two or more frame sizes")
    from testbed.measure.ping import udp_data_size

    pps: dict[int, float] = {}
    for s in sizes:
        vals = [v / (8.0 * udp_data_size(int(s), 4 if sh < 0.5 else 6)) for sh, v in t[s].items()]
        pps[s] = statistics.fmean(vals)
    falls = all(pps[b] < pps[a] for a, b in itertools.pairwise(sizes))
    return verdict(falls, "packets/s " + ", ".join(f"{s} B {pps[s]:.0f}" for s in sizes))


def do_7(d: Data) -> Outcome:
    uni_t, uni_c = _do_mixed(d)
    bi_t, bi_c = _do_mixed(d, "bidir")
    common = [k for k in bi_t if k in uni_t]
    if not common:
        return not_measured("unidirectional and bidirectional mixed traffic at the same "
                             "frame size and share")
    ok = True
    parts = []
    for k in sorted(common):
        size, share = k
        per_dir = bi_t[k] / 2
        half = per_dir / max(v for kk, v in uni_t.items() if kk[0] == size)
        cpu_more = k in bi_c and k in uni_c and bi_c[k] > uni_c[k]
        mixed = share is not None and 0 < share < 1
        ok = ok and cpu_more and (not mixed or 0.35 <= half <= 0.65)
        parts.append(f"{size} B IPv6 {share:.0%}: CPU bidir {bi_c.get(k, math.nan):.1f} vs "
                     f"uni {uni_c.get(k, math.nan):.1f} %, per-direction traffic "
                     f"{half:.0%} of the unidirectional maximum")
    return verdict(ok, "; ".join(parts), LINUX_ROUTER)


def do_9(d: Data) -> Outcome:
    rows = [r for r in d.select("receiver") if size_of(r) in (None, 1518)]

    def short(r: TrialRow) -> bool:  # the sender fell behind its schedule: its gaps, not the path's
        m = r.metrics
        return "sender_pps" in m and m["sender_pps"] < 0.95 * m.get("offered_pps", 0.0)

    slow = sorted({f"IPv{param(r, 'ip')} {param(r, 'rate')} "
                   f"({r.metrics['sender_pps']:.0f} of {r.metrics['offered_pps']:.0f} pps)"
                   for r in rows if short(r)})
    ipd: dict[tuple[Any, ...], float] = d.means(
        [r for r in rows if not short(r)], "ipd_mean_us",
        lambda r: (param(r, "rate"), int(param(r, "ip"))))
    # the mixed stream (kind load with ipd = true): one receiver for IPv4 and IPv6 at once
    loads = {0.1: "10mbit", 0.95: "95mbit"}
    mixed = [r for r in d.select("load") if "ipd_mean_us" in r.metrics
             and size_of(r) in (None, 1518) and param(r, "ratio") == "50/50"
             and float(param(r, "load") or 0) in loads]
    slow += sorted({f"50/50 at {float(param(r, 'load')):.0%} ({r.metrics['sender_pps']:.0f} of "
                    f"{r.metrics['offered_pps']:.0f} pps)" for r in mixed if short(r)})
    ipd.update(d.means([r for r in mixed if not short(r)], "ipd_mean_us",
                       lambda r: (loads[float(param(r, "load"))], "50/50")))
    if not ipd:
        if slow:
            return Outcome("not measured", "", "not measured: the sender fell short of the "
                           "offered rate in every trial: " + ", ".join(slow))
        return not_measured("receiver inter-packet delay of 1518-byte frames")
    expect = {"10mbit": 1200.0, "95mbit": 120.0}
    ok = True
    parts = []
    for rate, target in expect.items():
        got = {ip: v for (r, ip), v in ipd.items() if str(r) == rate}
        if not got:
            parts.append(f"{rate} not measured")
            continue
        near = all(abs(v / target - 1) <= 0.10 for v in got.values())
        # IPv4 vs IPv6 at the same offered rate; the mixed stream (offered as a share of the
        # wire, not of IP payload) is judged by its nearness to the paper's delay only
        pure = [v for ip, v in got.items() if ip in (4, 6)]
        same = len(pure) < 2 or max(pure) <= min(pure) * (1 + CLOSE)
        ok = ok and near and same
        parts.append(f"{rate}: " + ", ".join(
            f"{'IPv' if ip in (4, 6) else ''}{ip} {v:.0f} µs"
            for ip, v in sorted(got.items(), key=lambda kv: str(kv[0])))
            + f" (paper ~{target:.0f} µs)")
    if all("not measured" in p for p in parts):
        return not_measured("inter-packet delay at 10 or 95 Mbit/s")
    if slow:
        parts.append("not judged, sender short: " + ", ".join(slow))
    return verdict(ok, "; ".join(parts), GENERATOR if slow else "")


def do_6(d: Data) -> Outcome:
    """Loss onset: the lowest offered load with loss above 0.1 %, IPv6 (0/100) vs IPv4 (100/0),
    per frame size, from the `load` sweep."""
    rows = [r for r in d.select("load") if param(r, "ratio") in ("100/0", "0/100")
            and (param(r, "direction") or "forward") == "forward"]
    if not rows:
        return not_measured("an offered-load sweep (kind load) of pure IPv4 and pure IPv6")
    loss = d.means(rows, "loss_percent", lambda r: (size_of(r), param(r, "ratio"),
                                                    float(param(r, "load") or 0)))
    sizes = sorted({k[0] for k in loss if k[0] is not None})
    parts, ok, any_onset = [], True, False
    for s in sizes:
        onset: dict[str, float | None] = {}
        for ratio in ("100/0", "0/100"):
            loads = sorted(k[2] for k in loss if k[0] == s and k[1] == ratio)
            onset[ratio] = next((ld for ld in loads if loss[(s, ratio, ld)] > 0.1), None)
        if not all(any(k[0] == s and k[1] == r for k in loss) for r in onset):
            continue
        v4, v6 = onset["100/0"], onset["0/100"]
        any_onset = any_onset or v4 is not None or v6 is not None
        ok = ok and v6 is not None and (v4 is None or v6 < v4)
        parts.append(f"{s} B: IPv4 {'none' if v4 is None else f'{v4:.0%}'}, IPv6 "
                     f"{'none' if v6 is None else f'{v6:.0%}'}")
    if not parts:
        return not_measured("loss at the same frame sizes for pure IPv4 and pure IPv6")
    ev = "loss onset (first load with > 0.1 % loss): " + "; ".join(parts)
    return verdict(ok, ev, LINUX_ROUTER + (" (no loss up to the highest load offered: the "
                    "link, not the router, is the limit)" if not any_onset else ""))


def do_8(d: Data) -> Outcome:
    """One-way ANOVA of the outages of the two restart methods (5 each in the paper)."""
    from testbed import stats

    groups: dict[str, list[float]] = defaultdict(list)
    for r in d.select("reset"):
        ms = r.result.get("outages_ms") if isinstance(r.result, dict) else None
        if isinstance(ms, list):
            groups[str(param(r, "method"))].extend(float(v) for v in ms)
    if len(groups) < 2 or any(len(v) < 2 for v in groups.values()):
        return not_measured("router restarts by two methods, two or more outages each "
                             "(kind reset)")
    names = sorted(groups)
    res = stats.anova([groups[n] for n in names])
    ev = (", ".join(f"{n}: {statistics.fmean(groups[n]):.1f} ms (n={len(groups[n])})"
                    for n in names)
          + f"; one-way ANOVA F={res.statistic:.2f}, p={res.pvalue:.3g} (paper: 67.3 vs "
          "66.86 s, p=0.168)")
    return verdict(not res.significant_at_0_05, ev,
                    "restarting a namespace's links and rebuilding the namespace take "
                    "different kernel paths (link-state events vs new devices); the paper's "
                    "two resets both rebooted the same IOS")


DO10_BOUND = -0.165
DO10_TOLERANCE = ("ICMPv6/ICMPv4 CPU − 1 below −16.5 % (half the paper's −33 %, sec. 4.3, "
                  "Fig. 12)")


def do_10(d: Data) -> Outcome:
    rows = d.select("icmpload")
    cpu = d.means(rows, "router_cpu_pct", lambda r: (int(param(r, "ip")),
                                                    float(param(r, "pps")), size_of(r)))
    if len({k[0] for k in cpu}) < 2:
        return not_measured("ICMPv4 and ICMPv6 echo load on the router with its CPU "
                             "(kind icmpload)")
    ok, parts = True, []
    for ip in (4, 6):
        mine = {k[1:]: v for k, v in cpu.items() if k[0] == ip}
        rates = sorted({k[0] for k in mine})
        sizes = sorted({k[1] for k in mine if k[1] is not None})
        if len(rates) >= 2 and (rates[-1], sizes[-1]) in mine and (rates[0], sizes[-1]) in mine:
            up = mine[(rates[-1], sizes[-1])] > mine[(rates[0], sizes[-1])]
            ok = ok and up
            parts.append(f"ICMPv{ip} {sizes[-1]} B: {rates[0]:g}→{rates[-1]:g}/s CPU "
                         f"{mine[(rates[0], sizes[-1])]:.2f}→{mine[(rates[-1], sizes[-1])]:.2f} %")
        if len(sizes) >= 2 and (rates[-1], sizes[0]) in mine and (rates[-1], sizes[-1]) in mine:
            up = mine[(rates[-1], sizes[-1])] > mine[(rates[-1], sizes[0])]
            ok = ok and up
            parts.append(f"ICMPv{ip} {rates[-1]:g}/s: {sizes[0]}→{sizes[-1]} B CPU "
                         f"{mine[(rates[-1], sizes[0])]:.2f}→{mine[(rates[-1], sizes[-1])]:.2f} %")
    common = [k[1:] for k in cpu if k[0] == 4 and (6, *k[1:]) in cpu]
    if not common:
        return verdict(ok, "; ".join(parts), LINUX_ROUTER)
    raw = d.cells(rows, "router_cpu_pct", lambda r: (int(param(r, "ip")),
                                                     float(param(r, "pps")), size_of(r)))
    o = judge(cells_ratio([(raw[(4, *k)], raw[(6, *k)]) for k in common]), "below", DO10_BOUND,
              DO10_TOLERANCE, f"ICMPv6 vs ICMPv4 router CPU over {len(common)} cells",
              needs="three or more cells, or two or more repetitions per cell")
    status = o.status if ok else "does not hold"
    return replace(o, status=status, evidence="; ".join([*parts, o.evidence]),
                   reason=o.reason if status == "inconclusive" else
                   "" if status == "holds" else LINUX_ROUTER)


def _acl_rows(d: Data) -> tuple[dict[tuple[Any, ...], float], dict[tuple[Any, ...], float]]:
    """(IPv6 share, rules (0 = none), apply) -> mean router CPU, and -> mean loss (%)."""
    rows = d.select("acl")

    def key(r: TrialRow) -> tuple[Any, ...]:
        rules = int(param(r, "rules") or 0) if param(r, "acl") is not False else 0
        return (_v6_share(r), rules, param(r, "apply") if rules else "-")

    return d.means(rows, "router_cpu_pct", key), d.means(rows, "loss_percent", key)


def do_11(d: Data) -> Outcome:
    cpu, _ = _acl_rows(d)
    shares = sorted({k[0] for k in cpu if k[0] is not None})
    if not shares or not any(k[1] == 0 for k in cpu) or not any(k[1] > 0 for k in cpu):
        return not_measured("router CPU with and without ACLs (kind acl, acl = false too)")
    ok, parts = True, []
    for sh in shares:
        base = cpu.get((sh, 0, "-"))
        one, many = cpu.get((sh, 1, "in")), cpu.get((sh, 25, "in"))
        both = cpu.get((sh, 25, "both"))
        bits = [f"IPv6 {sh:.0%}: none {base:.2f}" if base is not None else f"IPv6 {sh:.0%}:"]
        if base is not None and many is not None:
            ok = ok and many > base
            bits.append(f"25 in {many:.2f}")
        if one is not None and many is not None:
            ok = ok and abs(many - one) < 2.0
            bits.append(f"1 in {one:.2f} (|25−1| {abs(many - one):.2f} points)")
        if both is not None and many is not None:
            ok = ok and both > many
            bits.append(f"25 both {both:.2f}")
        parts.append(", ".join(bits) + " %")
    return verdict(ok, "router CPU: " + "; ".join(parts), LINUX_ROUTER)


def do_12(d: Data) -> Outcome:
    """At one offered load, an ACL "cuts the traffic" at an IPv6 share when every ACL set-up
    there loses more than 1 point more than no ACL (one odd trial cannot make it hold), and
    does not when none does."""
    _, loss = _acl_rows(d)
    base = {k[0]: v for k, v in loss.items() if k[1] == 0}
    if not base or not any(k[1] > 0 for k in loss):
        return not_measured("traffic with and without ACLs at several IPv6 shares (kind acl)")
    ok, parts = True, []
    for sh in sorted(s for s in base if s is not None):
        cuts = [v - base[sh] for k, v in loss.items() if k[0] == sh and k[1] > 0]
        if not cuts:
            continue
        ok = ok and ((min(cuts) > 1.0) if sh >= 0.5 else (max(cuts) <= 1.0))
        parts.append(f"IPv6 {sh:.0%}: extra loss with an ACL {min(cuts):+.1f} to "
                     f"{max(cuts):+.1f} points ({len(cuts)} set-ups)")
    if not parts:
        return not_measured("ACL and no-ACL traffic at the same IPv6 share")
    return verdict(ok, "; ".join(parts) + " (paper: cuts only at ≥ 50 % IPv6)",
                    LINUX_ROUTER + " (the link, not the ACL, limits the traffic)")


def _exthdr_cpu(d: Data) -> dict[tuple[Any, ...], float]:
    """(variant, rule, pps) -> mean router CPU."""
    return d.means(d.select("exthdr"), "router_cpu_pct",
                   lambda r: (param(r, "variant"), bool(param(r, "rule")),
                              float(param(r, "pps"))))


def do_13(d: Data) -> Outcome:
    cpu = _exthdr_cpu(d)
    cells = [k for k in cpu if k[0] == "none"]
    if not cells or not any(k[0] in ("four", "dest20") for k in cpu):
        return not_measured("IPv6 traffic with none, 4 and 20 extension headers (kind exthdr)")
    ok, parts = True, []
    for _, rule, pps in sorted(cells, key=lambda k: (k[2], k[1])):
        base = cpu[("none", rule, pps)]
        got = {v: cpu[(v, rule, pps)] for v in ("hbh", "four", "dest20")
               if (v, rule, pps) in cpu}
        if not got:
            continue
        costs = all(v > base for v in got.values())
        same = ("four" not in got or "dest20" not in got
                or abs(got["four"] - got["dest20"]) <= max(2.0, 0.25 * got["four"]))
        ok = ok and costs and same
        parts.append(f"{pps:g}/s rule {'on' if rule else 'off'}: none {base:.2f}, "
                     + ", ".join(f"{v} {c:.2f}" for v, c in got.items()) + " %")
    return verdict(ok, "router CPU: " + "; ".join(parts), LINUX_ROUTER)


def _frag(d: Data, measurement: str | None = None) -> list[TrialRow]:
    return [r for r in d.select("fragment") if measurement is None or r.measurement == measurement]


def do_14(d: Data) -> Outcome:
    rows = _frag(d)
    if not rows:
        return not_measured("IPv4 traffic through a small-MTU link (kind fragment, topology "
                             "two-routers-v4)")
    cpu = d.means(rows, "router_cpu_pct", lambda r: (size_of(r), int(param(r, "core_mtu"))))
    pps = d.means(rows, "received_pps", lambda r: (size_of(r), int(param(r, "core_mtu"))))
    frags = d.means(rows, "fragments_per_datagram",
                    lambda r: (size_of(r), int(param(r, "core_mtu"))))
    ok, parts, ratios = True, [], []
    for size in sorted({k[0] for k in cpu if k[0] is not None}):
        whole = {m: cpu[(size, m)] for (s, m) in cpu if s == size and frags.get((s, m)) == 1.0}
        cut = {m: cpu[(size, m)] for (s, m) in cpu if s == size and frags.get((s, m), 1) > 1}
        if len(whole) >= 2:
            lo, hi = min(whole.values()), max(whole.values())
            same = hi <= lo * 1.5 + 0.5
            same_pps = max(pps[(size, m)] for m in whole) <= 1.05 * min(pps[(size, m)]
                                                                       for m in whole)
            ok = ok and same and same_pps
            parts.append(f"{size} B unfragmented at MTU {sorted(whole)}: CPU {lo:.2f}–{hi:.2f} %")
        if whole and cut:
            ref = statistics.fmean(whole.values())
            worst = max(cut, key=lambda m: cut[m])
            ratios.append(cut[worst] / ref if ref else math.inf)
            parts.append(f"{size} B fragmented at MTU {worst} "
                         f"({frags[(size, worst)]:.0f} fragments): CPU {cut[worst]:.2f} % = "
                         f"{ratios[-1]:.1f}× unfragmented")
    if not parts:
        return not_measured("the same frame sizes at several MTUs")
    ok = ok and bool(ratios) and all(x > 1.0 for x in ratios)
    return verdict(ok, "; ".join(parts) + " (paper: 2.7×)", LINUX_ROUTER)


def do_15(d: Data) -> Outcome:
    rows = [r for r in _frag(d) if "fragments_per_datagram" in r.metrics
            and "router_cpu_pct" in r.metrics]
    pts = d.means(rows, "router_cpu_pct", lambda r: (float(r.metrics["fragments_per_datagram"]),
                                                    int(param(r, "core_mtu"))))
    by_mtu: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for (f, m), c in pts.items():
        by_mtu[m].append((f, c))
    best = max(by_mtu.values(), key=lambda v: len({f for f, _ in v}), default=[])
    if len({f for f, _ in best}) < 3:
        return not_measured("router CPU at three or more fragment counts at one MTU (kind "
                             "fragment, e.g. MTU 100 with frames 118–918 B)")
    xs, ys = [f for f, _ in best], [c for _, c in best]
    slope, r2 = linfit(xs, ys)
    ok = slope > 0 and r2 >= 0.9
    return verdict(ok, f"{len(xs)} points, CPU = {slope:.3f} % per fragment, R² = {r2:.3f} "
                    "(paper: +4.5 % per fragment, linear)", LINUX_ROUTER)


DO16_TOLERANCE = ("added router CPU below 2 points at ≤ 1000 packets/s and 6 points above "
                  "(the paper's RH0 numbers, sec. 4.5); the 95 % interval's top must be below")


def do_16(d: Data) -> Outcome:
    """A Segment Routing header's added CPU per rate: the Welch interval of srh - none must lie
    below the paper's bound ("little") and not wholly below 0 ("adds"); RH0 must be dropped."""
    rows = d.select("exthdr")
    raw = d.cells(rows, "router_cpu_pct", lambda r: (
        param(r, "variant"), bool(param(r, "rule")), float(param(r, "pps"))))
    rh0 = [r for r in rows if param(r, "variant") == "rh0"]
    rates = sorted(k[2] for k in raw if k[0] == "srh" and not k[1] and ("none", False, k[2]) in raw)
    if not rates:
        return not_measured("IPv6 traffic with and without a Segment Routing header at the "
                            "same rate (kind exthdr, variants none and srh)")
    states, parts = [], []
    for pps in rates:
        bound = 2.0 if pps <= 1000 else 6.0
        diff = difference(raw[("none", False, pps)], raw[("srh", False, pps)])
        if diff is None:
            states.append("inconclusive")
            parts.append(f"{pps:g}/s: no interval (one repetition)")
            continue
        states.append("does not hold" if diff.low > bound or diff.high < 0 else "holds"
                      if diff.high < bound else "inconclusive")
        parts.append(f"{pps:g}/s: {diff.value:+.2f} points (95 % {diff.low:+.2f} … "
                     f"{diff.high:+.2f}, n = {diff.n}; bound {bound:g})")
    if rh0:
        dropped = all(r.metrics.get("router_hdr_errors", 0) >= r.metrics.get("attempted", 1)
                      and not r.metrics.get("captured") for r in rh0)
        parts.append(f"RH0 dropped by the router: {'yes' if dropped else 'no'} "
                     f"({len(rh0)} trials)")
        states.append("holds" if dropped else "does not hold")
    status: Status = ("does not hold" if "does not hold" in states else "inconclusive"
                      if "inconclusive" in states else "holds")
    reason = {"holds": "", "does not hold": LINUX_ROUTER,
              "inconclusive": "an interval straddles the bound or a rate has one repetition: "
                              "more repetitions would decide it"}[status]
    return Outcome(status, "SRH vs none: " + "; ".join(parts), reason, tolerance=DO16_TOLERANCE)


BY_HEADERS = ("with a link-limited router whose CPU never saturates, the traffic and packet "
              "rates follow from Ethernet/IP header arithmetic alone (a synthetic link-limited "
              "router with flat CPU makes it hold): not a confirmation of the paper's cause")
CPU_BOUND = ("the paper's Cisco 1841 ran at 60-80 % CPU; the emulated router runs at a few %: "
             "a bound in CPU points copied from it cannot bind here")

CLAIMS: tuple[Claim, ...] = (
    Claim('do:1', "More IPv6 share → higher router CPU and lower maximum traffic.", do_1,
          construction=BY_HEADERS),
    Claim('do:2', "Maximum traffic rises with frame size up to 1518 B and drops from 1518 to 1522 (fragmentation), far more for IPv6-heavy mixes.", do_2,  # noqa: E501
          construction=BY_HEADERS),
    Claim('do:3', "At every frame size pure IPv4 carries the most traffic; more IPv6 means less.", do_3,  # noqa: E501
          construction=BY_HEADERS),
    Claim('do:4', "CPU rises with throughput and with IPv6 share; for IPv4 it rises as frames get smaller.", do_4,  # noqa: E501
          construction=BY_HEADERS),
    Claim('do:5', "Packets per second fall with frame size.", do_5,
          construction=BY_HEADERS),
    Claim('do:6', "IPv6 reaches its loss onset at a lower offered load than IPv4.", do_6,
          effect=True),
    Claim('do:7', "Bidirectional traffic needs more CPU; mixed bidirectional reaches about half the unidirectional maximum.", do_7),  # noqa: E501
    Claim('do:8', "Reset (software vs hardware restart) times do not differ significantly (one-way ANOVA, 5 repetitions each).", do_8),  # noqa: E501
    Claim('do:9', "Inter-packet delay at the receiver is ~1.2 ms at 10 Mbit/s and ~0.12 ms at 95 Mbit/s for 1518-byte frames, with no protocol effect.", do_9),  # noqa: E501
    Claim('do:10', "ICMP echo load on the router: CPU rises with size and rate; ICMPv6 costs less than ICMPv4.", do_10,  # noqa: E501
          tolerance=DO10_TOLERANCE, effect=True),
    Claim('do:11', "ACLs raise CPU; 1 vs 25 rules differ by < 2 %; both interfaces cost more than one.", do_11,  # noqa: E501
          cause_absent=CPU_BOUND),
    Claim('do:12', "ACLs cut maximum traffic only when IPv6 share ≥ 50 %.", do_12),
    Claim('do:13', "Extension headers cost CPU; 4 vs 20 extension headers make no difference.", do_13,  # noqa: E501
          cause_absent=CPU_BOUND),
    Claim('do:14', "Below the MTU, pps and CPU are the same for every MTU; fragmentation raises CPU (2.7× in the paper).", do_14,  # noqa: E501
          cause_absent=CPU_BOUND),
    Claim('do:15', "CPU is linear in fragments per packet.", do_15),
    Claim('do:16', "A Routing Header adds little CPU (< 2 % at 1000 pps, 6 % at 5000 pps). (RH0 is deprecated by RFC 5095 and dropped by Linux; the emulated analogue is a Segment Routing header.)", do_16,  # noqa: E501
          tolerance=DO16_TOLERANCE, cause_absent=CPU_BOUND, effect=True),
)
