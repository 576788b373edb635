"""Claims ledger: every claim function on synthetic trials where it should hold and where not."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testbed import models, papers
from testbed.papers.gamess_morales.claims import _gm_net_owd, fit_pi
from testbed.report import claims
from testbed.report.claims import evaluate
from testbed.results import TrialRow

PAPERS = papers.builtin_ids()
CHECKS = {c.id: c.check for p in PAPERS for c in papers.get(p).claims}


def claims_for(paper: str) -> list[tuple[str, str]]:
    return [(c.id, c.text) for c in papers.get(paper).claims]

_keys = itertools.count()


def row(kind: str, metrics: dict[str, float], point: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None, *, status: str = "ok",
        result: dict[str, Any] | None = None, qdiscs: list[dict[str, Any]] | None = None,
        experiment: str = "x") -> TrialRow:
    return TrialRow(f"k{next(_keys)}", "run1", experiment, "quick", "m", kind, point or {}, "",
                    0, 0.0, 1.0, status, None if status == "ok" else "boom", metrics,
                    {"params": params or {}, **(result or {})}, {}, qdiscs or [])


def status(cid: str, trials: list[TrialRow]) -> str:
    return CHECKS[cid](claims.Data(trials)).status


RATE_NAME = {10e6: "ethernet", 100e6: "fastethernet", 1e9: "gigabit"}


# --- the registry and the API ------------------------------------------------------------------


def test_every_claim_has_a_function_and_evaluate_returns_them_in_order() -> None:
    for paper in PAPERS:
        ids = [cid for cid, _ in claims_for(paper)]
        assert ids and all(cid in CHECKS for cid in ids)
        res = evaluate(paper, [])
        assert [r.claim_id for r in res] == ids
        assert all(r.status in ("not measured", "not measurable here") for r in res)
        assert all(r.evidence == "" and r.reason for r in res)
    assert len(CHECKS) == sum(len(claims_for(p)) for p in PAPERS) == 55


def test_paper_of_experiment() -> None:
    assert papers.resolve("transition").id == "quintero-2016"
    assert papers.resolve("gamess-morales").id == "gamess-morales"
    assert papers.paper_of("smoke") is None
    with pytest.raises(ValueError, match="unknown paper"):
        papers.get("nobody-1999")


def test_every_papers_experiments_exist_and_belong_to_one_paper() -> None:
    root = Path(__file__).resolve().parents[2] / "experiments"
    seen: dict[str, str] = {}
    for p in papers.all_papers():
        for e in p.experiments:
            assert (root / f"{e}.toml").exists(), (p.id, e)
            assert seen.setdefault(e, p.id) == p.id


def test_claim_texts_match_shared_claims_md() -> None:
    path = Path(__file__).resolve().parents[2] / ".." / "shared" / "claims.md"
    if not path.exists():
        pytest.skip("no ../shared/claims.md beside this checkout")
    found = dict(re.findall(r"^- (\w+:\d+) (.*)$", path.read_text(), re.M))
    ours = {cid: text for p in PAPERS for cid, text in claims_for(p)}
    assert ours == found


def test_failed_trials_are_ignored() -> None:
    bad = [row("stackcost", {"tcp_connect_us": 1.0}, {"ip": 4}, status="error"),
           row("stackcost", {"tcp_connect_us": 2.0}, {"ip": 6}, status="error")]
    assert status("ze:7", bad) == "not measured"


def test_cross_os_and_vendor_claims_are_not_measurable() -> None:
    for cid in ("qu:11", "ze:9", "go:10"):
        out = CHECKS[cid](claims.Data([]))
        assert out.status == "not measurable here" and out.reason


@pytest.mark.parametrize("cid", ["go:6", "go:7", "go:8", "go:9", "do:6", "do:8", "do:10",
                                 "do:11", "do:12", "do:13", "do:14", "do:15", "do:16"])
def test_unimplemented_measurements_say_what_is_missing(cid: str) -> None:
    # whatever trials exist, these need a probe that does not exist yet
    trials = [row("iperf3", {"receiver_bps": 1e6}, {"ip": 4, "protocol": "udp"})]
    out = CHECKS[cid](claims.Data(trials))
    assert out.status == "not measured" and out.reason.startswith("not measured: needs")


def test_a_claim_that_raises_is_an_error_with_its_exception() -> None:
    # a trial without `ip` cannot be keyed: int(None) raises; evaluate never does, and the
    # ledger says "error" with the exception, never "not measured"
    res = evaluate("zeadally-2004", [row("iperf3", {"receiver_bps": 1.0}, {},
                                         {"protocol": "tcp"})])
    assert res[0].status == "error"
    assert "TypeError" in res[0].reason and "int()" in res[0].reason
    broken = claims.Claim("x:1", "t", lambda d: {}["missing"])
    out = claims.judge(broken, "x", claims.Data([]))
    assert out.status == "error" and out.reason == "the check raised KeyError: 'missing'"


# --- gamess-morales ----------------------------------------------------------------------------

TBF = [{"kind": "tbf", "node": "h1"}]
NETEM = [{"kind": "netem", "node": "h1"}]


def gm_trials(thr: Callable[[float, int, int], float] | None = None,
              owd: Callable[[float, int, int, int], float] | None = None,
              rates: tuple[float, ...] = (10e6, 100e6), qdiscs: list[dict[str, Any]] = NETEM,
              limited: bool = False) -> list[TrialRow]:
    """Trials as the paper's tables: model throughput (x 0.998) and model OWD (+ 20 µs)."""
    thr = thr or (lambda rate, ip, n: 0.998 * models.max_throughput_bps(n, rate, ip))
    owd = owd or (lambda rate, r, ip, n: models.owd(n, rate, ip, r) * 1e6 + 20)
    out = []
    for rate in rates:
        for ip, sizes in ((4, (10, 100, 1000, 1480, 1481, 1500, 2960, 2961)),
                          (6, (10, 100, 1000, 1460, 1461, 1500, 2900, 2901))):
            for n in sizes:
                out.append(row("rfc2544", {"throughput_bps": thr(rate, ip, n),
                                           "generator_limited": float(limited)},
                               {"topology.rate": RATE_NAME[rate], "topology.routers": 0,
                                "ip_payload": n}, {"ip": ip}, qdiscs=qdiscs))
            if rate >= 1e9:
                continue
            for routers in (0, 1, 2):
                for n in (100, 1000):
                    out.append(row("pingpong", {"owd_median_us": owd(rate, routers, ip, n),
                                                "probe_overhead_median_us": 15.0},
                                   {"topology.rate": RATE_NAME[rate], "topology.routers": routers,
                                    "ip_payload": n}, {"ip": ip, "protocol": "udp"},
                                   qdiscs=qdiscs))
    # two repetitions per cell (throughput 0.05 % apart): every cell has its own interval
    return out + [row(t.kind, {k: v * (1.0005 if k == "throughput_bps" else 1)
                               for k, v in t.metrics.items()}, dict(t.point),
                      dict(t.result["params"]), qdiscs=t.qdiscs) for t in out]


@pytest.mark.parametrize("cid", [f"gm:{i}" for i in range(1, 10) if i != 4])
def test_gamess_claims_hold_on_the_models_numbers(cid: str) -> None:
    assert status(cid, gm_trials()) == "holds", CHECKS[cid](claims.Data(gm_trials()))


def test_gm4_on_four_real_clock_payloads_is_inconclusive_and_holds_on_virtual_ones() -> None:
    # four equal payloads at 100 Mbit/s, one repetition on the real clock: a sign test over
    # four cells cannot show "IPv4 above IPv6" (4/4: interval 40 % ... 100 %)
    out = CHECKS["gm:4"](claims.Data(gm_trials()))
    assert out.status == "inconclusive" and "more cells" in out.reason
    virtual = gm_trials()
    for t in virtual:
        t.result["clock"] = {"clock": "virtual", "in_vm": True}
    assert status("gm:4", virtual) == "holds"


def test_gm1_gm8_do_not_hold_when_ipv6_is_faster() -> None:
    swapped = gm_trials(owd=lambda rate, r, ip, n: 100.0 if ip == 6 else 110.0,
                        thr=lambda rate, ip, n: 9e6 if ip == 6 else 8e6, qdiscs=TBF)
    assert status("gm:1", swapped) == "does not hold"
    out = CHECKS["gm:8"](claims.Data(swapped))
    assert out.status == "does not hold" and "-10.0 µs" in out.evidence
    assert out.reason == claims.NO_SERIALIZATION


def test_gm2_gm3_gm4_do_not_hold_without_the_fragmentation_fall() -> None:
    flat = gm_trials(thr=lambda rate, ip, n: rate * 0.9)
    for cid in ("gm:2", "gm:3", "gm:4"):
        assert status(cid, flat) == "does not hold"
    # the right shape at the wrong peak
    low = gm_trials(thr=lambda rate, ip, n: 0.9 * models.max_throughput_bps(n, rate, ip))
    assert status("gm:2", low) == "does not hold"
    assert "peak (1480 B) vs the paper's 9.62 Mbit/s: effect -10.0%" in CHECKS["gm:2"](
        claims.Data(low)).evidence


def test_gm2_gm4_not_measured_without_their_payloads_or_rate() -> None:
    only_eth = [t for t in gm_trials(rates=(10e6,))]
    assert status("gm:4", only_eth) == "not measured"
    no_knee = [t for t in gm_trials() if t.point.get("ip_payload") not in (1480, 1481)]
    assert status("gm:2", no_knee) == "not measured"


def test_gm5_gigabit_small_payloads_may_fall_short_larger_may_not() -> None:
    def short_small(rate: float, ip: int, n: int) -> float:
        f = 0.3 if rate >= 1e9 and n <= 100 else 0.998
        return f * models.max_throughput_bps(n, rate, ip)

    assert status("gm:5", gm_trials(short_small, rates=(10e6, 1e9))) == "holds"

    def short_all(rate: float, ip: int, n: int) -> float:
        f = 0.3 if rate >= 1e9 else 0.998
        return f * models.max_throughput_bps(n, rate, ip)

    # the sender could not offer the gigabit rates: those cells measure it, not the path —
    # shown, never judged (they scatter with the machine's load: a verdict from them flipped
    # between two full runs); the cells it could offer decide
    limited_gig = [t for t in gm_trials(short_all, rates=(10e6, 1e9))
                   if t.point["topology.rate"] != "gigabit"] + [
        t for t in gm_trials(short_all, rates=(10e6, 1e9), limited=True)
        if t.point["topology.rate"] == "gigabit"]
    for cid in ("gm:5", "gm:9"):
        out = CHECKS[cid](claims.Data(limited_gig))
        assert out.status == "holds", cid
        judged, _, shown = out.evidence.partition("not judged, generator-limited: ")
        assert "v4 1000 B at 1 Gbit/s 0.30" in shown and "1 Gbit/s" not in judged, cid
    # the same shortfall where the sender did offer the rate is the path's: refuted
    out = CHECKS["gm:5"](claims.Data(gm_trials(short_all, rates=(10e6, 1e9))))
    assert out.status == "does not hold" and "v4 1000 B at 1 Gbit/s" in out.evidence
    far = gm_trials(lambda rate, ip, n: 0.8 * models.max_throughput_bps(n, rate, ip))
    assert status("gm:5", far) == "does not hold"
    # the same shortfall, but the sender could not offer the rate: not the path's, not judged
    mixed = [t for t in gm_trials() if not (t.kind == "rfc2544" and t.point["ip_payload"] == 10)]
    mixed += [t for t in gm_trials(lambda rate, ip, n: 0.5 * models.max_throughput_bps(
        n, rate, ip), limited=True) if t.kind == "rfc2544" and t.point["ip_payload"] == 10]
    out = CHECKS["gm:5"](claims.Data(mixed))
    assert out.status == "holds" and "not judged, generator-limited: v4 10 B" in out.evidence
    everything_limited = gm_trials(limited=True)
    assert status("gm:5", everything_limited) == "not measured"


def test_gm6_gm7_do_not_hold_without_serialization_delay() -> None:
    flat = gm_trials(owd=lambda rate, r, ip, n: 30.0 + 5 * r, qdiscs=TBF)
    for cid in ("gm:6", "gm:7"):
        out = CHECKS[cid](claims.Data(flat))
        assert out.status == "does not hold" and out.reason == claims.NO_SERIALIZATION


def test_gm7_needs_three_router_counts() -> None:
    two = [t for t in gm_trials() if t.point.get("topology.routers") != 2]
    assert status("gm:7", two) == "not measured"


def test_gm9_does_not_hold_above_the_model() -> None:
    over = gm_trials(lambda rate, ip, n: 1.05 * models.max_throughput_bps(n, rate, ip))
    assert status("gm:9", over) == "does not hold"


def test_a_search_that_never_bisected_reads_no_grid() -> None:
    """A gigabit cell credited the line rate at its first trial (`max_rate`) in every
    repetition is the line rate, not "+0.0 % (-1.0 … +1.0 %)" by a 1 % grid the search never
    walked: gm:9 ("below +1 %") holds on it; a bisected cell keeps its step."""
    def search_row(limited_by: str, value: float, step: float) -> TrialRow:
        return row("rfc2544", {"throughput_bps": value, "generator_limited": 0.0},
                   {"topology.rate": "gigabit", "topology.routers": 0, "ip_payload": 1480},
                   {"ip": 4}, qdiscs=NETEM,
                   result={"throughput": {"limited_by": limited_by, "resolution": step}})
    line = models.max_throughput_bps(1480, 1e9, 4)
    top = [search_row("max_rate", line, 0.01 * 1.02 * line) for _ in range(3)]
    assert status("gm:9", top) == "holds"
    walked = [search_row("device", line, 0.01 * 1.02 * line) for _ in range(3)]
    assert status("gm:9", walked) == "inconclusive"  # the grid's +1.02 % reaches past +1 %


# --- quintero-2016 -----------------------------------------------------------------------------

MECHS = ("native4", "native6", "6to4", "isatap", "nat64-tayga", "nat64-jool")
OWD_F = {"native4": 1.0, "native6": 1.03, "6to4": 1.20, "isatap": 1.21, "nat64-tayga": 1.02,
         "nat64-jool": 1.01}
THR_F = {"native4": 1.0, "native6": 0.98, "6to4": 0.95, "isatap": 0.951, "nat64-tayga": 0.97,
         "nat64-jool": 0.97}


def qu_trials(owd_f: dict[str, float] | None = None, thr_f: dict[str, float] | None = None,
              tayga_anomaly: bool = True, rate_scaling: bool = True,
              rates: tuple[float, ...] = (10e6, 100e6)) -> list[TrialRow]:
    """Quintero-like data: OWD = serialization twice + 20 µs, scaled per mechanism; NAT64 below
    native IPv6 at 10 Mbit/s; TAYGA's large-payload anomaly at 100 Mbit/s (UDP)."""
    out = []
    for rate, size, mech in itertools.product(rates, (100, 1000, 2000, 4000), MECHS):
        ip = 4 if mech == "native4" else 6
        point = {"topology": mech, "topology.rate": RATE_NAME[rate], "size": size}
        eff = rate if rate_scaling else 10e6
        for proto in ("udp", "tcp"):
            f = (owd_f or OWD_F)[mech]
            if rate == 100e6 and mech.startswith("nat64"):
                f += 0.04  # above native IPv6 at 100 Mbit/s
            if tayga_anomaly and rate == 100e6 and proto == "udp" and size > 1750 and \
                    mech == "nat64-tayga":
                f *= 2
            owd = (2 * size * 8 / eff * 1e6 + 20) * f
            out.append(row("pingpong", {"owd_median_us": owd}, point,
                           {"ip": ip, "protocol": proto}))
        thr = eff * 0.95 * (thr_f or THR_F)[mech]
        out.append(row("iperf3", {"receiver_bps": thr}, {**point, "length": size,
                                                           "size": None},
                       {"ip": ip, "protocol": "udp"}))
    for t in out:  # iperf rows: the swept size is `length`
        if t.kind == "iperf3":
            t.point.pop("size")
    # two repetitions per cell (0.2 % apart): every cell has its own interval
    return out + [row(t.kind, {k: v * 1.002 for k, v in t.metrics.items()}, dict(t.point),
                      dict(t.result["params"])) for t in out]


@pytest.mark.parametrize("cid", [f"qu:{i}" for i in range(1, 11)])
def test_quintero_claims_hold_on_paper_like_data(cid: str) -> None:
    assert status(cid, qu_trials()) == "holds", CHECKS[cid](claims.Data(qu_trials()))


def test_qu1_qu2_qu3_qu8_do_not_hold_when_a_tunnel_beats_native() -> None:
    owd = {**OWD_F, "6to4": 0.9}
    thr = {**THR_F, "6to4": 1.1}
    bad = qu_trials(owd, thr)
    for cid in ("qu:1", "qu:2", "qu:3", "qu:8", "qu:9"):
        assert status(cid, bad) == "does not hold", cid


def test_qu4_qu10_do_not_hold_when_tayga_is_faster() -> None:
    bad = qu_trials({**OWD_F, "nat64-jool": 1.5}, tayga_anomaly=False)
    assert status("qu:4", bad) == "does not hold"
    assert status("qu:10", bad) == "does not hold"


def test_qu10_names_jools_reassembly_when_only_fragmented_udp_is_slower() -> None:
    trials = qu_trials(tayga_anomaly=False)
    for t in trials:  # Jool +15 % on UDP above the MTU only: the reassembly signature
        if t.kind == "pingpong" and t.point["topology"] == "nat64-jool" and \
                t.point["size"] > 1750 and t.result["params"]["protocol"] == "udp":
            t.metrics["owd_median_us"] *= 1.15
    out = CHECKS["qu:10"](claims.Data(trials))
    assert out.status == "does not hold" and "defragmentation" in out.reason
    tcp_only = qu_trials({**OWD_F, "nat64-jool": 1.5}, tayga_anomaly=False)
    for t in tcp_only:  # slower everywhere but on fragmented UDP: no reassembly reason
        if t.kind == "pingpong" and t.result["params"]["protocol"] == "udp":
            t.metrics["owd_median_us"] = t.metrics["owd_median_us"] / 1.5 * 1.01 \
                if t.point["topology"] == "nat64-jool" else t.metrics["owd_median_us"]
    out = CHECKS["qu:10"](claims.Data(tcp_only))
    assert out.status == "does not hold" and out.reason == ""


def test_qu8_qu9_say_when_throughputs_come_from_different_clocks() -> None:
    bad = qu_trials(thr_f={**THR_F, "6to4": 1.1})
    assert all(CHECKS[c](claims.Data(bad)).reason == "" for c in ("qu:8", "qu:9"))
    for t in bad:  # the tunnels' throughput measured in the virtual-clock guest
        if t.kind == "iperf3" and t.point["topology"] in ("6to4", "isatap"):
            t.result["clock"] = {"clock": "virtual", "label": "virtual(icount shift=0)"}
    for cid in ("qu:8", "qu:9"):
        out = CHECKS[cid](claims.Data(bad))
        assert out.status == "does not hold" and "different clocks" in out.reason, cid


def test_qu5_qu6_qu7_do_not_hold_without_serialization() -> None:
    bad = qu_trials({**OWD_F, "nat64-tayga": 1.1, "nat64-jool": 1.1}, tayga_anomaly=False,
                    rate_scaling=False)
    assert status("qu:5", bad) == "does not hold"
    assert status("qu:6", bad) == "does not hold"
    assert status("qu:7", bad) == "does not hold"


def test_quintero_not_measured_without_the_mechanisms_or_rates() -> None:
    only_native = [t for t in qu_trials(rates=(10e6,)) if t.point["topology"] in
                   ("native4", "native6")]
    for cid in ("qu:2", "qu:3", "qu:4", "qu:5", "qu:6", "qu:7", "qu:9", "qu:10"):
        assert status(cid, only_native) == "not measured", cid
    assert status("qu:1", only_native) == "holds"


# --- gometz-2015 -------------------------------------------------------------------------------


def go_trials(tcp: Callable[[int, int, int], float] | None = None,
              rtt: Callable[[int, int], tuple[float, float]] | None = None,
              loss: float = 0.0) -> list[TrialRow]:
    """Gometz-like data: three repetitions (the paper's); IPv4 slightly above IPv6 (about 1 %,
    inside a 5 % equivalence margin); spread grows with size."""
    tcp = tcp or (lambda ip, size, rep: 900e6 - (10e6 if ip == 6 else 0)
                  + rep * (1e6 + size * (2.5e3 if ip == 6 else 2e3)))
    # mean and max RTT (ms): rising with size; IPv6 anomalies larger; neither always lower
    rtt = rtt or (lambda ip, size: (0.05 + size * 1e-5 + (
        (0.001 if ip == 6 else 0) if size < 1000 else (0.0005 if ip == 4 else 0)),
        0.2 if ip == 6 else 0.1))
    out = []
    for ip, size, rep in itertools.product((4, 6), (128, 512, 1518), (0, 1, 2)):
        point = {"ip": ip, "topology.rate": "gigabit"}
        out.append(row("iperf3", {"receiver_bps": tcp(ip, size, rep)},
                       {**point, "length": size}, {"protocol": "tcp"}))
        mean, worst = rtt(ip, size)
        out.append(row("ping", {"rtt_mean_ms": mean + rep * 3e-4, "rtt_max_ms": mean + worst},
                       {**point, "frame_size": size}))
        steps = [{"offered": 1e9 * (1 - k / 10), "loss_percent": loss if k == 0 else 0.0,
                  "generator_short": False} for k in range(3)]
        out.append(row("rfc2544", {"throughput_bps": 9e8}, {**point, "frame_size": size},
                       result={"frame_loss": steps}))
    return out


@pytest.mark.parametrize("cid", ["go:1", "go:3", "go:4", "go:5"])
def test_gometz_claims_hold_on_paper_like_data(cid: str) -> None:
    assert status(cid, go_trials()) == "holds", CHECKS[cid](claims.Data(go_trials()))


def test_go1_go3_do_not_hold_when_ipv6_is_far_ahead() -> None:
    bad = go_trials(tcp=lambda ip, size, rep: (950e6 if ip == 6 else 500e6) + rep * 1e6)
    assert status("go:1", bad) == "does not hold"
    assert status("go:3", bad) == "does not hold"


def test_go3_the_order_of_two_noisy_means_does_not_decide() -> None:
    # repetitions scattered by ±33 %, IPv6's means 2 % above IPv4's at every size: nothing
    # is shown either way (the quick profile's TCP cells flipped go:3 so between runs)
    noisy = go_trials(tcp=lambda ip, size, rep: (600e6, 1200e6, 900e6)[rep]
                      + (20e6 if ip == 6 else 0))
    assert status("go:3", noisy) == "inconclusive"
    # IPv6 shown 2 % above IPv4 at every size (inside the margin, tight repetitions): refuted
    ahead = go_trials(tcp=lambda ip, size, rep: 900e6 * (1.02 if ip == 6 else 1.0) + rep * 1e5)
    assert status("go:3", ahead) == "does not hold"


def test_go2_spread_grows_with_enough_repetitions() -> None:
    # the spread rises with frame size and IPv6's is 1.8 times IPv4's (the paper's 90 vs
    # 51 Mbit/s): with the paper's three repetitions that is not shown (inconclusive); with
    # twenty it is
    def spread(reps: int) -> list[TrialRow]:
        return [row("iperf3", {"receiver_bps": 900e6 + (rep - reps / 2) * size * (
                    3.6e3 if ip == 6 else 2e3)}, {"ip": ip, "length": size}, {"protocol": "tcp"})
                for ip, size, rep in itertools.product((4, 6), (128, 512, 1518), range(reps))]

    assert status("go:2", spread(3)) == "inconclusive"
    assert status("go:2", spread(20)) == "holds"
    shrinking = [row("iperf3", {"receiver_bps": 900e6 + (rep - 5) * 3e6 / size},
                     {"ip": ip, "length": size}, {"protocol": "tcp"})
                 for ip, size, rep in itertools.product((4, 6), (128, 512, 1518), range(10))]
    assert status("go:2", shrinking) == "does not hold"


def test_go2_needs_repetitions() -> None:
    even = go_trials(tcp=lambda ip, size, rep: 900e6 + rep * 1e6)
    assert status("go:2", even) != "holds"
    one_rep = [t for t in go_trials() if t.kind != "iperf3" or t.metrics["receiver_bps"] < 9e8
               or True]
    single = [t for i, t in enumerate(one_rep) if t.kind != "iperf3" or i % 2 == 0]
    keep = {}
    for t in single:
        if t.kind == "iperf3":
            keep[(t.point["ip"], t.point["length"])] = t
    assert status("go:2", list(keep.values())) == "not measured"


def test_go4_does_not_hold_when_latency_falls_with_size() -> None:
    bad = go_trials(rtt=lambda ip, size: (0.1 - size * 1e-5, 0.1))
    assert status("go:4", bad) == "does not hold"


def test_go5_judges_the_steps_at_or_below_the_measured_throughput() -> None:
    # loss at line rate (above the measured 900 Mbit/s) is RFC 2544's start, not the paper's test
    out = CHECKS["go:5"](claims.Data(go_trials(loss=12.5)))
    assert out.status == "holds", out
    assert "36/36 steps at or below" in out.evidence and "18/18 series lost" in out.evidence
    # loss at a step the throughput test had passed does not hold, and says where
    lossy = go_trials()
    for t in lossy:
        if t.kind == "rfc2544":
            t.result["frame_loss"][1]["loss_percent"] = 0.4
    out = CHECKS["go:5"](claims.Data(lossy))
    assert out.status == "does not hold" and "0.4 % at 900" in out.evidence, out
    # a sender that could not offer a step does not count as 0 %
    short = go_trials()
    for t in short:
        if t.kind == "rfc2544":
            for p in t.result["frame_loss"]:
                p["generator_short"] = True
    assert status("go:5", short) == "not measured"
    # one series whose sender could offer no step of the paper's test: "every test" not shown
    partly = go_trials()
    for p in partly[2].result["frame_loss"]:
        p["generator_short"] = True
    out = CHECKS["go:5"](claims.Data(partly))
    assert out.status == "inconclusive" and "1 of 18 series" in out.reason, out
    assert status("go:5", [row("rfc2544", {"throughput_bps": 1.0}, {"ip": 4})]) == \
        "not measured"


# --- dobrinov-2016 -----------------------------------------------------------------------------


def do_trials(cpu_f: float = 1.0, drop: float = 0.1, bidir_cpu: float = 1.5,
              sizes: tuple[int, ...] = (128, 512, 1518, 1522)) -> list[TrialRow]:
    """Dobrinov-like data: traffic falls and CPU rises with IPv6 share; 1522 fragments."""
    out = []
    for size, ratio in itertools.product(sizes, ("100/0", "50/50", "0/100")):
        share = int(ratio.split("/")[1]) / 100
        traffic = 90e6 * (1 - 0.2 * share) * (size / 1518) ** 0.1
        if size == 1522:
            traffic *= 1 - drop * (1 + 3 * share)
        cpu = (10 + 20 * share * cpu_f) * (1518 / size) ** 0.2
        out.append(row("iperf3", {"receiver_bps": traffic, "cpu_machine_softirq_pct": cpu,
                                  "cpu_machine_system_pct": 1.0},
                       {"ratio": ratio, "frame_size": size}, {"protocol": "udp"}))
        if size == 1518:
            out.append(row("iperf3", {"receiver_bps": traffic,
                                      "cpu_machine_softirq_pct": cpu * bidir_cpu},
                           {"ratio": ratio}, {"protocol": "udp", "direction": "bidir",
                                              "frame_size": 1518}))
    for ip, rate, ipd in ((4, "10mbit", 1230.0), (6, "10mbit", 1228.0), (4, "95mbit", 125.0),
                          (6, "95mbit", 126.0)):
        out.append(row("receiver", {"ipd_mean_us": ipd}, {"ip": ip, "rate": rate},
                       {"frame_size": 1518}))
    return twice(out)


def twice(rows: list[TrialRow]) -> list[TrialRow]:
    """Each trial and a second repetition 0.1 % above it: every cell has its own interval."""
    return rows + [row(t.kind, {k: v * 1.001 for k, v in t.metrics.items()}, dict(t.point),
                       dict(t.result["params"]), qdiscs=t.qdiscs) for t in rows]


@pytest.mark.parametrize("cid", ["do:1", "do:2", "do:3", "do:4", "do:5", "do:7", "do:9"])
def test_dobrinov_claims_hold_on_paper_like_data(cid: str) -> None:
    assert status(cid, do_trials()) == "holds", CHECKS[cid](claims.Data(do_trials()))


def test_dobrinov_claims_do_not_hold_on_contrary_data() -> None:
    flat_cpu = do_trials(cpu_f=-0.2, drop=-0.1, bidir_cpu=0.5)
    for cid in ("do:1", "do:2", "do:4", "do:7"):
        out = CHECKS[cid](claims.Data(flat_cpu))
        assert out.status == "does not hold", cid
    # more IPv6, more traffic
    even = twice([row("iperf3", {"receiver_bps": 90e6 * (1 + 0.05 * i),
                                 "cpu_machine_softirq_pct": 5.0},
                      {"ratio": r, "frame_size": 1518}, {"protocol": "udp"})
                  for i, r in enumerate(("100/0", "50/50", "0/100"))])
    assert status("do:3", even) == "does not hold"
    assert CHECKS["do:3"](claims.Data(even)).reason == claims.LINUX_ROUTER
    more_pps = twice([row("iperf3", {"receiver_bps": 1e3 * s * s},
                          {"ratio": "100/0", "frame_size": s}, {"protocol": "udp"})
                      for s in (128, 1518)])
    assert status("do:5", more_pps) == "does not hold"
    slow = twice([row("receiver", {"ipd_mean_us": 2000.0}, {"ip": 4, "rate": "10mbit"},
                      {"frame_size": 1518})])
    assert status("do:9", slow) == "does not hold"
    # a sender that fell behind its schedule makes the gaps: shown, not judged
    behind = [row("receiver", {"ipd_mean_us": 2000.0, "sender_pps": 480.0, "offered_pps": 845.0},
                  {"ip": 4, "rate": "10mbit"}, {"frame_size": 1518})]
    out = CHECKS["do:9"](claims.Data(behind))
    assert out.status == "not measured" and "480 of 845 pps" in out.reason
    out = CHECKS["do:9"](claims.Data(behind + [t for t in do_trials() if t.kind == "receiver"]))
    assert out.status == "holds" and "not judged, sender short" in out.evidence


def test_dobrinov_not_measured_parts() -> None:
    no_1522 = do_trials(sizes=(1518,))
    assert status("do:2", no_1522) == "not measured"
    assert status("do:5", no_1522) == "not measured"
    assert status("do:9", []) == "not measured"
    assert status("do:7", [t for t in no_1522 if param_dir(t) != "bidir"]) == "not measured"


def param_dir(t: TrialRow) -> Any:
    return claims.param(t, "direction")


# --- zeadally-2004 -----------------------------------------------------------------------------


def ze_trials(tcp6: float = 92.5e6, udp6_f: float = 1.0, rtt6_f: float = 0.9,
              tcp_rtt_f: float = 1.05, v6_cost: float | None = None) -> list[TrialRow]:
    """Paper-like data, three repetitions with ±0.5 % noise; the stack costs are the paper's
    own ratios (socket +12 %, connect +50 %, connections/s 450 -> 426), five repetitions each
    with ±1 % noise, unless `v6_cost`."""
    out = []
    for ip, size, rep in itertools.product((4, 6), (64, 128, 512, 1408), (-1, 0, 1)):
        point = {"ip": ip, "topology.rate": "fastethernet"}
        wobble = 1 + 0.005 * rep
        out.append(row("iperf3", {"receiver_bps": 93.5e6 if ip == 4 else tcp6},
                       {**point, "length": size}, {"protocol": "tcp"}))
        deficit = 0.08 * min(1.0, 128 / size) if ip == 6 else 0.0  # header share shrinks
        udp = 95e6 * size / (size + 66) * (udp6_f if ip == 6 else 1.0) * (1 - deficit)
        out.append(row("iperf3", {"receiver_bps": udp * wobble}, {**point, "length": size},
                       {"protocol": "udp"}))
        rtt = 60.0 * (rtt6_f if ip == 6 else 1.0) * wobble
        out.append(row("pingpong", {"rtt_median_us": rtt}, {**point, "size": size},
                       {"protocol": "udp"}))
        out.append(row("pingpong", {"rtt_median_us": rtt * tcp_rtt_f},
                       {**point, "size": size}, {"protocol": "tcp"}))
    for ip, rep in itertools.product((4, 6), range(5)):
        noise = 1 + 0.01 * (rep - 2) / 2
        sock, conn, cps = ((1.0, 1.0, 1.0) if ip == 4 else (1.12, 1.5, 426 / 450)
                           if v6_cost is None else (v6_cost, v6_cost, 1 / v6_cost))
        out.append(row("stackcost", {"tcp_socket_create_us": 3.0 * sock * noise,
                                     "tcp_connect_us": 50.0 * conn * noise,
                                     "connections_per_s": 450 * cps / noise}, {"ip": ip}))
    return out


@pytest.mark.parametrize("cid", [f"ze:{i}" for i in range(1, 9)])
def test_zeadally_claims_hold_on_paper_like_data(cid: str) -> None:
    assert status(cid, ze_trials()) == "holds", CHECKS[cid](claims.Data(ze_trials()))


def test_zeadally_claims_do_not_hold_on_contrary_data() -> None:
    bad = ze_trials(tcp6=60e6, udp6_f=0.5, rtt6_f=1.3, tcp_rtt_f=2.0, v6_cost=0.8)
    for cid in ("ze:1", "ze:2", "ze:4", "ze:5", "ze:6", "ze:7", "ze:8"):
        assert status(cid, bad) == "does not hold", cid
    # the IPv6 deficit growing with size contradicts the address-size overhead
    grow = [t for t in ze_trials() if not (t.kind == "iperf3" and t.result["params"]
                                           ["protocol"] == "udp")]
    for (ip, size, v), w in itertools.product(
            ((4, 128, 90e6), (6, 128, 89e6), (4, 512, 90e6), (6, 512, 80e6)), (0.99, 1, 1.01)):
        grow.append(row("iperf3", {"receiver_bps": v * w}, {"ip": ip, "length": size},
                        {"protocol": "udp"}))
    assert status("ze:3", grow) == "does not hold"


def test_zeadally_latency_falls_back_to_twice_the_owd() -> None:
    old = [row("pingpong", {"owd_median_us": v + w}, {"ip": ip, "size": 64}, {"protocol": p})
           for ip, p, v in ((4, "udp", 30.0), (4, "tcp", 31.0), (6, "udp", 29.0),
                            (6, "tcp", 30.0)) for w in (-0.1, 0.0, 0.1)]
    out = CHECKS["ze:4"](claims.Data(old))
    assert out.status == "holds"
    assert status("ze:3", old) == "not measured"


def test_gm6_gm7_fit_the_emulators_own_pi_as_the_paper_fitted_its_own() -> None:
    # an emulator whose per-link cost is 4.4 µs, not the paper's 30 µs: eq. (10) with the
    # fitted π describes it, and the evidence says which π
    emu = gm_trials(owd=lambda rate, r, ip, n: models.owd(n, rate, ip, r, 4.4e-6) * 1e6 + 15)
    for cid in ("gm:6", "gm:7"):
        out = CHECKS[cid](claims.Data(emu))
        assert out.status == "holds", out
        assert "π fitted here 4.4 µs" in out.evidence
    net = _gm_net_owd(claims.Data(emu))
    pi = fit_pi(net)
    assert pi is not None and pi == pytest.approx(4.4e-6, abs=1e-9)


def test_gm6_does_not_hold_when_owd_ignores_the_payload() -> None:
    # one π cannot make a payload-blind delay look like serialization
    flat = gm_trials(owd=lambda rate, r, ip, n: 200.0 + 50.0 * r)
    out = CHECKS["gm:6"](claims.Data(flat))
    assert out.status == "does not hold", out
