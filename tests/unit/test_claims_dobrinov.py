"""dobrinov-2016 claims do:6, do:8, do:10-16 on paper-like and contrary stress trials."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from testbed import papers
from testbed.report import claims
from testbed.results import TrialRow

CHECKS = {c.id: c.check for c in papers.get("dobrinov-2016").claims}

_keys = itertools.count()


def row(kind: str, metrics: dict[str, float], point: dict[str, Any],
        params: dict[str, Any] | None = None, result: dict[str, Any] | None = None) -> TrialRow:
    return TrialRow(f"d{next(_keys)}", "run1", "dobrinov-2016", "quick", "m", kind, point, "",
                    0, 0.0, 1.0, "ok", None, metrics, {"params": params or {}, **(result or {})},
                    {}, [])


def check(cid: str, trials: list[TrialRow]) -> claims.Outcome:
    return CHECKS[cid](claims.Data(trials))


def load_rows(v6_onset: float, v4_onset: float | None) -> list[TrialRow]:
    out = []
    for ratio, onset in (("100/0", v4_onset), ("0/100", v6_onset)):
        for load in (0.1, 0.5, 0.95):
            lost = 5.0 if onset is not None and load >= onset else 0.0
            out.append(row("load", {"loss_percent": lost, "router_cpu_pct": 10 * load},
                           {"ratio": ratio, "frame_size": 512, "load": load}))
    return out


def test_do6_loss_onset() -> None:
    assert check("do:6", load_rows(0.5, 0.95)).status == "holds"
    assert check("do:6", load_rows(0.5, None)).status == "holds"
    out = check("do:6", load_rows(0.95, 0.5))
    assert out.status == "does not hold" and "IPv4 50%" in out.evidence
    none = [r for r in load_rows(0.5, None) if r.point["ratio"] == "100/0"]
    assert check("do:6", none).status == "not measured"


def reset_rows(a: list[float], b: list[float]) -> list[TrialRow]:
    return [row("reset", {"outage_mean_ms": sum(v) / len(v)}, {"method": m},
                result={"outages_ms": v}) for m, v in (("links", a), ("namespace", b))]


def test_do8_anova_of_the_two_restarts() -> None:
    paper_srt, paper_hrt = [67.5, 67.8, 66.9, 67.5, 66.8], [66.3, 67.2, 67.4, 66.5, 67.0]
    out = check("do:8", reset_rows(paper_srt, paper_hrt))
    assert out.status == "holds" and "F=2.19, p=0.177" in out.evidence  # the paper's Table 7
    out = check("do:8", reset_rows([1000, 1010, 990, 1005, 995], [30, 40, 35, 45, 38]))
    assert out.status == "does not hold" and out.reason
    assert check("do:8", reset_rows([1.0], [2.0])).status == "not measured"


def icmp_rows(v6_factor: float, reps: int = 3) -> list[TrialRow]:
    out = []
    for ip, pps, size, i in itertools.product((4, 6), (100, 4000), (100, 1472), range(reps)):
        cpu = pps / 1000 * (1 + size / 1000) * (v6_factor if ip == 6 else 1.0) * (1 + 0.01 * i)
        out.append(row("icmpload", {"router_cpu_pct": cpu}, {"ip": ip, "pps": pps, "size": size}))
    return out


def test_do10_icmp() -> None:
    assert check("do:10", icmp_rows(0.67)).status == "holds"
    # one repetition per cell: the rises with rate and size have no interval
    assert check("do:10", icmp_rows(0.67, reps=1)).status == "inconclusive"
    out = check("do:10", icmp_rows(1.2))
    assert out.status == "does not hold" and "ICMPv6" in out.evidence
    assert check("do:10", [r for r in icmp_rows(0.5) if r.point["ip"] == 4]).status == \
        "not measured"
    # the IPv6/IPv4 comparison is read at the top rate, as the paper's 90 % vs 60 %: a low
    # rate's CPU (the router's idle baseline) cannot decide it either way
    baseline = [replace(r, metrics={"router_cpu_pct": (0.1 if r.point["ip"] == 6 else 0.3)
                                    * (1 + 0.01 * (int(r.trial_key[1:]) % 3))})
                if r.point["pps"] == 100 else r for r in icmp_rows(1.0)]
    out = check("do:10", baseline)
    assert out.status == "does not hold" and "at 4000/s over 2 cells" in out.evidence


def acl_rows(both_extra: float, rules_gap: float, v6_cut: float) -> list[TrialRow]:
    out = []
    for ratio, rep in itertools.product(("100/0", "50/50", "0/100"), (-1, 0, 1)):
        share = int(ratio.split("/")[1]) / 100
        out.append(row("acl", {"router_cpu_pct": 5.0 + 0.05 * rep, "loss_percent": 0.0},
                       {"ratio": ratio}, {"acl": False}))
        for rules, apply in itertools.product((1, 25), ("in", "both")):
            cpu = 6.0 + (rules_gap if rules == 25 else 0) + (both_extra if apply == "both"
                                                              else 0) + 0.05 * rep
            loss = 100 * v6_cut if share >= 0.5 else 0.0
            out.append(row("acl", {"router_cpu_pct": cpu, "loss_percent": loss},
                           {"ratio": ratio, "rules": rules, "apply": apply}, {"acl": True}))
    return out


def test_do11_do12_acls() -> None:
    paper = acl_rows(both_extra=3.0, rules_gap=0.5, v6_cut=0.2)
    assert check("do:11", paper).status == "holds"
    assert check("do:12", paper).status == "holds"
    assert check("do:11", acl_rows(both_extra=-1.0, rules_gap=0.5, v6_cut=0.2)).status == \
        "does not hold"
    assert check("do:11", acl_rows(both_extra=3.0, rules_gap=5.0, v6_cut=0.2)).status == \
        "does not hold"
    out = check("do:12", acl_rows(both_extra=3.0, rules_gap=0.5, v6_cut=0.0))
    assert out.status == "does not hold" and "+0.0 to +0.0 points" in out.evidence
    assert check("do:12", []).status == "not measured"
    # one odd trial (77 % loss in one set-up) does not make it hold
    odd = acl_rows(both_extra=3.0, rules_gap=0.5, v6_cut=0.0)
    odd.append(row("acl", {"router_cpu_pct": 6.0, "loss_percent": 77.0},
                   {"ratio": "0/100", "rules": 25, "apply": "in"}, {"acl": True}))
    assert check("do:12", odd).status == "does not hold"


def ext_rows(four: float, dest20: float, srh_added: float) -> list[TrialRow]:
    out = []
    for pps, rep in itertools.product((1000, 5000), (-1, 0, 1)):  # three repetitions
        base = pps / 1000 + 0.05 * rep
        for variant, extra in (("none", 0.0), ("hbh", 1.0), ("four", four), ("dest20", dest20),
                               ("srh", srh_added * pps / 5000)):
            out.append(row("exthdr", {"router_cpu_pct": base + extra},
                           {"variant": variant, "rule": False, "pps": pps}))
        out.append(row("exthdr", {"router_cpu_pct": base, "router_hdr_errors": 100.0,
                                  "attempted": 100.0, "captured": 0.0},
                       {"variant": "rh0", "rule": False, "pps": pps}))
    return out


def test_do13_do16_extension_headers() -> None:
    paper = ext_rows(four=1.5, dest20=1.6, srh_added=1.0)
    assert check("do:13", paper).status == "holds"
    assert check("do:16", paper).status == "holds"
    assert "RH0 dropped by the router: yes" in check("do:16", paper).evidence
    assert check("do:13", ext_rows(four=1.5, dest20=9.0, srh_added=1.0)).status == \
        "does not hold"
    assert check("do:16", ext_rows(four=1.5, dest20=1.6, srh_added=-0.5)).status == \
        "does not hold"
    assert check("do:16", ext_rows(four=1.5, dest20=1.6, srh_added=9.0)).status == \
        "does not hold"
    # one repetition a rate cannot bound the noise: inconclusive, saying what would decide it
    once = ext_rows(four=1.5, dest20=1.6, srh_added=1.0)[:6]
    out = check("do:16", once)
    assert out.status == "inconclusive" and "more repetitions" in out.reason
    assert check("do:13", []).status == "not measured"


def frag_rows(cpu_per_fragment: float, wobble: float = 0.0) -> list[TrialRow]:
    out = []
    for mtu, size, rep in itertools.product((1500, 500, 68), (128, 1518), (-1, 0, 1)):
        n = -(-(size - 38) // ((mtu - 20) // 8 * 8))
        cpu = 5.0 + cpu_per_fragment * (n - 1) + (wobble if mtu == 68 else 0) + 0.02 * rep
        out.append(row("fragment", {"router_cpu_pct": cpu, "fragments_per_datagram": float(n),
                                    "received_pps": 5000.0},
                       {"core_mtu": mtu, "frame_size": size}))
    for size, rep in itertools.product((118, 518, 918), (-1, 0, 1)):
        n = -(-(size - 38) // 80)
        out.append(row("fragment", {"router_cpu_pct": 5.0 + cpu_per_fragment * n + 0.02 * rep,
                                    "fragments_per_datagram": float(n)},
                       {"core_mtu": 100, "frame_size": size}))
    return out


def test_do14_do15_fragmentation() -> None:
    assert check("do:14", frag_rows(0.5)).status == "holds"
    assert check("do:15", frag_rows(0.5)).status == "holds"
    out = check("do:14", frag_rows(0.0))  # no extra CPU: not shown (noise), never "holds"
    assert out.status == "inconclusive" and "1.0\N{MULTIPLICATION SIGN}" in out.evidence
    assert check("do:14", frag_rows(-0.5)).status == "does not hold"
    assert check("do:15", frag_rows(-0.5)).status == "does not hold"
    assert check("do:14", []).status == "not measured"
    assert check("do:15", frag_rows(0.5)[:2]).status == "not measured"


def test_do15_needs_a_straight_line_and_a_residual_degree_of_freedom() -> None:
    rows = frag_rows(0.5)
    once = rows[:-9] + rows[-9::3]  # the last nine: MTU 100, three sizes, three repetitions
    mtu100 = [r for r in once if r.point.get("core_mtu") == 100]
    assert len(mtu100) == 3  # three points, one each: the line cannot be tested
    out = check("do:15", once)
    assert out.status == "inconclusive" and "not testable" in out.evidence
    # rising but bent (CPU flat to 6 fragments, then steep): the line misses beyond the scatter
    bent = [r for r in rows if r.point.get("core_mtu") != 100]
    for size, rep in itertools.product((118, 318, 518, 718, 918), (-1, 0, 1)):
        n = -(-(size - 38) // 80)
        bent.append(row("fragment", {"router_cpu_pct": 5.0 + max(0, n - 6) ** 2 + 0.05 * rep,
                                     "fragments_per_datagram": float(n)},
                        {"core_mtu": 100, "frame_size": size}))
    out = check("do:15", bent)
    assert out.status == "does not hold" and "straight line" in out.reason


def test_do15_takes_the_papers_mtu_100_before_an_mtu_with_more_counts() -> None:
    """The full profile's `fragment` grid at MTU 68 measures more fragment counts (1-34, and
    the measured count moves between trials) than Fig. 17's MTU 100 test has (1-11); a bent
    MTU 68 curve must not decide a straight MTU 100 line's verdict."""
    rows = frag_rows(0.5)
    for n, rep in itertools.product(range(2, 36, 3), (-1, 0, 1)):
        rows.append(row("fragment", {"router_cpu_pct": 3.0 + 0.01 * n ** 3 + 0.02 * rep,
                                     "fragments_per_datagram": float(n)},
                        {"core_mtu": 68, "frame_size": 38 + 48 * n}))
    out = check("do:15", rows)
    assert out.status == "holds" and out.evidence.startswith("MTU 100: 9 trials at 3")
    bent = check("do:15", [r for r in rows if r.point.get("core_mtu") != 100])
    assert bent.status == "does not hold" and bent.evidence.startswith("MTU 68:")

def test_do15_a_mild_bend_measured_loosely_is_inconclusive_not_a_coin_toss() -> None:
    """This host's shape (CPU 3.4, 3.6, 3.9, 4.6, 4.9 % at 1-11 fragments: the slope at the
    ends ±0.77 of the mean): with a scatter of 0.5 its interval reaches both sides of ±60 %
    (inconclusive; a p value flipped here between runs); a parabola as steep (3.4 % + 0.015 %
    * (n - 1)², flat at the bottom) measured tightly does not hold; a straight line measured
    loosely holds when its interval stays inside."""
    means = {1: 3.44, 4: 3.57, 6: 3.89, 9: 4.56, 11: 4.93}
    noise = (-0.5, 0.0, 0.5)

    def rows(shape: dict[int, float], scatter: float) -> list[TrialRow]:
        return [row("fragment", {"router_cpu_pct": v + scatter * e,
                                 "fragments_per_datagram": float(n)},
                    {"core_mtu": 100, "frame_size": 38 + 80 * n})
                for n, v in shape.items() for e in noise]

    loose = check("do:15", rows(means, 1.0))
    assert loose.status == "inconclusive" and "bend +" in loose.evidence
    steep = {n: 3.4 + 0.015 * (n - 1) ** 2 for n in means}
    assert check("do:15", rows(steep, 0.02)).status == "does not hold"
    line = {n: 3.3 + 0.16 * n for n in means}
    assert check("do:15", rows(line, 0.1)).status == "holds"


def test_do9_judges_the_mixed_stream_too() -> None:
    rows = [row("receiver", {"ipd_mean_us": v + rep}, {"ip": ip, "rate": rate},
                {"frame_size": 1518})
            for ip, rate, v in ((4, "10mbit", 1200.0), (6, "10mbit", 1190.0)) for rep in (0, 1)]
    mix = [row("load", {"ipd_mean_us": 1210.0 + rep, "sender_pps": 812.0, "offered_pps": 812.7},
               {"ratio": "50/50", "load": 0.1}, {"frame_size": 1518}) for rep in (0, 1)]
    out = check("do:9", rows + mix)
    assert out.status == "holds" and "50/50 1210 µs" in out.evidence
    far = [row("load", {"ipd_mean_us": 2000.0 + rep, "sender_pps": 812.0, "offered_pps": 812.7},
               {"ratio": "50/50", "load": 0.1}, {"frame_size": 1518}) for rep in (0, 1)]
    assert check("do:9", rows + far).status == "does not hold"
