"""The verdict engine (testbed.report.verdict) and the claims Data's environments: intervals,
tolerances, inconclusive answers, Holm, TOST, and cells that never pool tiers or clocks."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from testbed import papers
from testbed.report import claims, verdict
from testbed.results import TrialRow

_keys = itertools.count()


def row(kind: str, metrics: dict[str, float], point: dict[str, Any], *, run: str = "run1",
        clock: dict[str, Any] | None = None) -> TrialRow:
    return TrialRow(f"k{next(_keys)}", run, "zeadally-2004", "quick", "m", kind, point, "", 0,
                    0.0, 1.0, "ok", None, metrics, {"params": {}, "clock": clock}, {}, [])


def check(cid: str, trials: list[TrialRow], runs: list[dict[str, Any]] | None = None
          ) -> claims.Outcome:
    c = next(c for p in papers.all_papers() for c in p.claims if c.id == cid)
    return c.check(claims.Data(trials, runs or []))


def stack(v4: list[float], v6: list[float], metric: str = "tcp_socket_create_us"
          ) -> list[TrialRow]:
    return ([row("stackcost", {metric: v}, {"ip": 4}) for v in v4]
            + [row("stackcost", {metric: v}, {"ip": 6}) for v in v6])


def test_ratio_interval_and_tolerance() -> None:
    e = verdict.ratio([10.0, 10.1, 9.9], [11.2, 11.3, 11.1])
    assert e is not None and e.value == pytest.approx(0.12, abs=1e-3)
    assert e.low < 0.12 < e.high and e.n == 6
    assert verdict.judge(e, "above", 0.06, "t", "x").status == "holds"
    assert verdict.judge(e, "below", 0.06, "t", "x").status == "does not hold"
    wide = verdict.ratio([10.0, 12.0], [11.0, 13.0])
    out = verdict.judge(wide, "above", 0.06, "t", "x")
    assert out.status == "inconclusive" and "straddles" in out.reason
    short = verdict.judge(verdict.ratio([10.0], [11.0]), "above", 0.06, "t", "x", needs="more")
    assert short.status == "inconclusive" and short.reason == "evidence short: needs more"


def test_a_socket_a_tenth_of_a_percent_dearer_is_no_plus_twelve() -> None:
    # the old sign test made ze:6 hold on any IPv6 excess
    out = check("ze:6", stack([3.0, 3.01, 2.99, 3.0], [3.003, 3.013, 2.993, 3.003]))
    assert out.status == "does not hold", out
    assert out.interval is not None and out.n == 8 and "half the paper's +12.0%" in out.tolerance
    # noisy enough to straddle the half-effect bound: inconclusive, never a flip
    noisy = check("ze:6", stack([3.0, 3.6, 2.5], [3.2, 3.9, 2.8]))
    assert noisy.status == "inconclusive" and "more repetitions" in noisy.reason
    assert check("ze:6", stack([3.0], [3.4])).status == "inconclusive"


def test_tost_and_holm() -> None:
    same = verdict.ratio([100.0, 100.2, 99.8, 100.1], [100.1, 99.9, 100.0, 100.2])
    assert same is not None and verdict.tost_p(same, 0.05) < 0.001
    assert verdict.judge(same, "within", 0.05, "t", "x").status == "holds"
    far = verdict.ratio([100.0, 100.2, 99.8], [120.0, 120.2, 119.8])
    assert far is not None and verdict.tost_p(far, 0.05) > 0.5
    assert verdict.judge(far, "within", 0.05, "t", "x").status == "does not hold"
    assert verdict.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_one_cell_beyond_by_noise_among_many_does_not_refute_every_cell_claims() -> None:
    """judge_all and go:1/go:3 refute "every cell" only where a cell is beyond the tolerance
    after Holm's correction over the cells: one interval wholly beyond among seven is what
    noise alone gives one run in ~six (gometz-2015's go:3 in one full run of three, 28 Nov);
    a cell far beyond refutes, and so do more cells beyond than noise would put there; one
    cell alone is judged by its interval, as before."""
    near = verdict.ratio([100.0, 101.0, 99.0], [108.0, 109.0, 107.0])  # +8 %, just beyond
    assert near is not None and near.low > 0.05
    same = verdict.ratio([100.0, 101.0, 99.0], [100.2, 101.2, 99.2])
    assert same is not None
    assert 0.0025 < verdict.p_beyond(near, "within", 0.05) < verdict.ONE_SIDE
    alone = verdict.judge_all([("a", near)], "within", 0.05, "t", "x")
    assert alone.status == "does not hold"  # one cell: the interval's rule, unchanged
    seven = [("near", near), *[(f"c{i}", same) for i in range(6)]]
    out = verdict.judge_all(seven, "within", 0.05, "t", "x")
    assert out.status == "inconclusive", out
    assert "not after Holm's correction over 7 cells" in out.reason
    assert verdict.refuted([near, same, same, None], "within", 0.05) == [False] * 4
    assert verdict.refuted([near, None], "within", 0.05) == [True, False]
    far = verdict.ratio([100.0, 101.0, 99.0], [130.0, 131.0, 129.0])
    assert far is not None and verdict.p_beyond(far, "within", 0.05) < 1e-4
    out = verdict.judge_all([("far", far), *seven[1:]], "within", 0.05, "t", "x")
    assert out.status == "does not hold" and "correction over 7 cells: far" in out.evidence
    # many cells each a little beyond on two repetitions (df = 1: no one cell survives Holm):
    # more cells beyond than noise puts there refutes
    two = verdict.ratio([100.0, 101.0], [109.0, 110.0])
    assert two is not None and two.low > 0.05 and verdict.p_beyond(two, "within", 0.05) > 0.0125
    assert verdict.refuted([two, two, same, same], "within", 0.05) == [True, True, False, False]
    assert verdict.refuted([two, same, same, same], "within", 0.05) == [False] * 4
    # one-sided claims: the wrong side only
    assert verdict.p_beyond(far, "above", 0.0) > 0.99
    assert verdict.p_beyond(far, "below", 0.0) < 1e-4
    # exact numbers (no standard error) decide by their interval, no correction
    exact = verdict.ratio([100.0], [106.0], exact=True)
    assert exact is not None and verdict.refuted([exact] * 7, "within", 0.05) == [True] * 7


def test_slope_and_sign_test() -> None:
    s = verdict.slope([1, 2, 3, 4], [2.0, 4.1, 5.9, 8.0])
    assert s is not None and s.low > 1.5 and s.high < 2.5
    assert verdict.judge_share(58, 60, "t", "x").status == "holds"
    assert verdict.judge_share(30, 60, "t", "x").status == "inconclusive"
    assert verdict.judge_share(5, 60, "t", "x").status == "does not hold"


def test_bend_is_the_ends_slope_against_the_mean_slope() -> None:
    xs = [1.0, 1.0, 6.0, 6.0, 11.0, 11.0]
    straight = verdict.bend(xs, [3.0 + 0.5 * x + e for x, e in zip(xs, [0.01, -0.01] * 3,
                                                                       strict=True)])
    assert straight is not None and straight.low < 0 < straight.high
    assert straight.high - straight.low < 0.1
    # y = x²: slope 2x, 2 at the bottom end and 22 at the top against a mean of 12: ±10/12
    sq = verdict.bend(xs, [x * x for x in xs])
    assert sq is not None and sq.value == pytest.approx(10 / 12)
    assert sq.low == pytest.approx(sq.value) and sq.high == pytest.approx(sq.value)
    assert verdict.bend(xs, [-x * x for x in xs]).value == pytest.approx(10 / 12)  # type: ignore[union-attr]
    assert verdict.bend([1.0, 6.0, 11.0], [1.0, 2.0, 3.0]) is None  # no residual freedom
    assert verdict.bend(xs, [1.0, 1.0, 2.0, 2.0, 1.0, 1.0]) is None  # no mean slope

def test_cells_of_two_clocks_are_never_pooled() -> None:
    real = [row("stackcost", {"connections_per_s": 450.0 + i}, {"ip": ip}) for ip in (4, 6)
            for i in range(3)]
    virt = [row("stackcost", {"connections_per_s": 10.0 + i}, {"ip": ip},
                clock={"clock": "virtual", "in_vm": True}) for ip in (4, 6) for i in range(2)]
    d = claims.Data(real + virt)
    cells = d.cells(d.select("stackcost"), "connections_per_s", lambda r: (r.point["ip"],))
    assert cells[(4,)] == [450.0, 451.0, 452.0]  # the environment with the most trials
    assert any("never pooled" in n and "vm/virtual" in n for n in d.notes)


def test_by_construction_is_labelled_and_not_confirmation() -> None:
    from testbed.report.claims import evaluate

    res = {r.claim_id: r for r in evaluate("dobrinov-2016", [])}
    assert res["do:1"].basis.startswith("by construction")
    assert res["do:13"].basis.startswith("cause absent here")
    gm = {r.claim_id: r for r in evaluate("gamess-morales", [])}
    assert all(gm[c].basis.startswith("by construction") for c in ("gm:2", "gm:3", "gm:9"))
    held = claims.ClaimResult("x:1", "x", "t", "holds", "", basis="by construction: framing")
    assert not held.confirms


def test_virtual_clock_numbers_are_taken_as_they_are() -> None:
    # the virtual clock gives the same numbers on every run (docs/vm.md): one repetition a cell
    # is enough; on the real clock two cells of one repetition are not
    def rtt(clock: dict[str, Any] | None) -> list[TrialRow]:
        out = []
        for ip, size, proto in itertools.product((4, 6), (64,), ("udp", "tcp")):
            t = row("pingpong", {"rtt_median_us": 60.0 * (0.9 if ip == 6 else 1.0)},
                    {"ip": ip, "size": size}, clock=clock)
            t.result["params"] = {"protocol": proto}
            out.append(t)
        return out

    virtual = rtt({"clock": "virtual", "in_vm": True})
    assert claims.Data(virtual).exact_rows(virtual)
    assert check("ze:5", virtual).status == "holds"
    out = check("ze:5", rtt(None))
    assert out.status == "inconclusive" and "evidence short" in out.reason


def test_side_of_a_bound() -> None:
    import math

    d = verdict.difference([1.0, 1.1, 0.9], [3.0, 3.1, 2.9])
    assert verdict.side(d, 0.0, math.inf) == "holds"
    assert verdict.side(d, -math.inf, 0.0) == "does not hold"
    assert verdict.side(d, 1.0, 3.0) == "holds" and verdict.side(d, 5.0, 6.0) == "does not hold"
    same = verdict.mean_ci([0.0], exact=True)  # exactly no effect: "above 0" does not hold
    assert verdict.side(same, 0.0, math.inf) == "does not hold"
    assert verdict.side(verdict.difference([1.0, 2.0], [1.5, 1.0]), 0.0, math.inf) == \
        "inconclusive"
    assert verdict.side(None, 0.0, 1.0) == "inconclusive"


def test_all_of_counts_an_unmeasured_part_as_missing_evidence() -> None:
    from testbed.report.claims import Outcome, not_measured
    from testbed.report.verdict import all_of

    held = Outcome("holds", "a: fine", n=4, effect=0.1, interval=(0.05, 0.15))
    refuted = Outcome("does not hold", "b: wrong", n=4, effect=-0.1, interval=(-0.2, -0.05))
    part = all_of([held, not_measured("the tunnels")], "tol")
    assert part.status == "inconclusive" and "not measured: the tunnels" in part.reason
    assert all_of([held, refuted, not_measured("x")], "tol").status == "does not hold"
    assert all_of([not_measured("x"), not_measured("y")], "tol").status == "not measured"
    assert all_of([held, held], "tol").status == "holds"


def test_qu6_with_native_cells_only_is_inconclusive_not_holds() -> None:
    from testbed.report.claims import Data
    from tests.unit.test_claims import CHECKS, qu_trials

    natives = [t for t in qu_trials() if t.point["topology"] in ("native4", "native6")]
    out = CHECKS["qu:6"](Data(natives))
    assert out.status == "inconclusive" and "6to4 over native IPv6" in out.reason, out


def test_a_search_result_is_known_to_its_step_not_to_a_t_interval() -> None:
    """Two RFC 2544 searches one grid step apart: the t interval at n = 2 spans ±10 % and
    makes "within ±5 %" inconclusive by chance; their steps' overlap does not. Values farther
    apart than two steps differ by more than the grid: the t interval again."""
    model = 100.0
    t_only = verdict.against([100.5, 101.9], model)
    assert t_only is not None and t_only.high - t_only.low > 0.15
    e = verdict.against([100.5, 101.9], model, resolution=1.0)
    assert e is not None
    assert e.low == pytest.approx(0.009) and e.high == pytest.approx(0.015)
    assert verdict.side(verdict.Difference(e.value, e.low, e.high, e.n), -0.05, 0.05) == "holds"
    one = verdict.against([100.5], model, resolution=1.0)  # one search: ±its step
    assert one is not None and one.low == pytest.approx(-0.005) and one.high == pytest.approx(0.015)
    far = verdict.against([100.0, 104.0, 108.0], model, resolution=1.0)
    assert far is not None and far.low < 0.0  # spread beyond the grid: the t interval
    assert verdict.against([100.0], model) is None  # no step, one value: no interval


def test_a_budgeted_router_on_the_virtual_clock_is_not_exact() -> None:
    """Its forwarding moves 3-6 % between runs (the cgroup's periods against the traffic):
    such trials are not taken as exact numbers; the same router unlimited is."""
    from dataclasses import replace

    def budget(share: str) -> TrialRow:
        t = row("load", {"router_cpu_pct": 10.0}, {"ip": 4},
                clock={"clock": "virtual", "in_vm": True})
        return replace(t, topology={"features": [{"kind": "cpu-budget", "node": "r1",
                                                  "share": share}]})

    assert claims.moves_on_virtual_clock(budget("0.1"))
    assert not claims.moves_on_virtual_clock(budget("none"))
    assert not claims.moves_on_virtual_clock(budget("1.0"))
    assert not claims.Data([budget("0.1")]).exact_rows([budget("0.1")])
    assert claims.Data([budget("none")]).exact_rows([budget("none")])


def test_a_trial_through_jool_on_the_virtual_clock_is_not_exact() -> None:
    """Jool's OWD moves by up to 3 us between trials on the virtual clock (docs/vm.md): its
    trials are not exact numbers; TAYGA's, on the same clock, are."""
    from dataclasses import replace

    def through(kind: str) -> TrialRow:
        t = row("pingpong", {"owd_median_us": 240.0}, {"ip": 6},
                clock={"clock": "virtual", "in_vm": True})
        return replace(t, topology={"features": [{"kind": kind, "node": "r1"}]})

    jool, tayga = through("nat64-jool"), through("nat64-tayga")
    assert claims.moves_on_virtual_clock(jool) and not claims.moves_on_virtual_clock(tayga)
    assert not claims.Data([jool, tayga]).exact_rows([jool, tayga])
    assert claims.Data([tayga]).exact_rows([tayga])


def test_do10_rises_need_intervals() -> None:
    """do:10's "CPU rises with rate and size" is judged with intervals, not by comparing two
    single numbers: one repetition per cell on the real clock is inconclusive, whichever way
    the means lie; with repetitions a clear rise holds its part."""
    def icmp(reps: int, up: float) -> list[TrialRow]:
        out = []
        for ip, pps, size, i in itertools.product((4, 6), (100.0, 4000.0), (100, 1452),
                                                  range(reps)):
            cpu = 0.2 if pps == 100.0 else 4.0 * (up if size == 1452 else 1.0)
            cpu *= 1.0 + 0.01 * i
            out.append(row("icmpload", {"router_cpu_pct": cpu * (0.6 if ip == 6 else 1.0)},
                           {"ip": ip, "pps": pps, "size": size}))
        return out

    one = check("do:10", icmp(1, 0.9))  # a fall of one repetition decides nothing
    assert one.status == "inconclusive"
    assert "router CPU rise" in one.evidence
    falls = check("do:10", icmp(3, 0.8))  # a clear fall with size, three repetitions
    assert falls.status == "does not hold"


def test_a_ratio_takes_exactness_per_side() -> None:
    """A virtual-clock cell measured once (exact) against Jool's repeated cell: the interval
    comes from the repeated side; one value on a side that is not exact gives none."""
    once, repeated = [2636.0], [2698.2, 2696.9, 2700.0]
    e = verdict.ratio(once, repeated, (True, False))
    assert e is not None and e.low < e.value < e.high
    assert e.value == pytest.approx(2698.3667 / 2636.0 - 1, rel=1e-6)
    assert verdict.ratio(once, repeated) is None
    assert verdict.ratio(once, repeated, (False, True)) is None  # the single side is not exact
    one_cell = verdict.cells_ratio([(once, repeated)], (True, False))
    assert one_cell is not None and one_cell.high - one_cell.low > 0
    assert verdict.cells_ratio([(once, repeated)]) is None
    assert verdict.cells_ratio([([1.0], [2.0])], (True, True)) is not None  # as exact=True


def test_qu10_judges_jool_repeated_against_tayga_measured_once() -> None:
    """On the virtual clock TAYGA's cells are measured once (exact) and Jool's repeated (its
    OWD moves): one payload above 1750 B per protocol and rate still gives each an interval,
    from Jool's repetitions; without the repetitions there is none."""
    from dataclasses import replace

    clock = {"clock": "virtual", "in_vm": True}

    def owd(mech: str, v: float, rate: str, proto: str) -> TrialRow:
        t = row("pingpong", {"owd_median_us": v},
                {"topology": mech, "topology.rate": rate, "size": 2000},
                clock=clock)
        t.result["params"] = {"ip": 6, "protocol": proto}
        return replace(t, topology={"features": [{"kind": mech, "node": "r1"}]})

    rows: list[TrialRow] = []
    for rate, proto in itertools.product(("ethernet", "fastethernet"), ("udp", "tcp")):
        rows.append(owd("nat64-tayga", 3037.0, rate, proto))
        rows += [owd("nat64-jool", v, rate, proto) for v in (3499.0, 3500.6, 3497.9)]
    out = check("qu:10", rows)
    assert out.status == "does not hold" and "no interval" not in out.evidence, out
    once = [r for r in rows if r.point["topology"] == "nat64-tayga"] + [
        r for r in rows if r.point["topology"] == "nat64-jool"][::3]
    assert "no interval" in check("qu:10", once).evidence
