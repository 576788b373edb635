"""The dobrinov-2016 stress figures: each stress kind's trials become its figure's rows."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

from testbed import results
from testbed.papers.dobrinov_2016 import dobrinov_figures
from testbed.report.data import load as load_db


def test_stress_figures_from_trials(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    n = 0
    with closing(results.connect(db)) as con:
        run = results.start_run(con, "dobrinov-2016", "quick", {}, {"kernel": "6.1"}, 0)

        def trial(measurement: str, kind: str, point: dict[str, Any],
                  metrics: dict[str, float], params: dict[str, Any] | None = None) -> None:
            nonlocal n
            n += 1
            gk = results.canonical(point)
            results.write_trial(con, results.TrialRow(
                f"{run}/{measurement}/{gk}/{n}", run, "dobrinov-2016", "quick", measurement,
                kind, point, gk, 0, 1.0, 2.0, "ok", None, metrics,
                {"params": params or {}}, {}, []))

        for load in (0.1, 0.5):
            trial("load", "load", {"ratio": "0/100", "frame_size": 512, "load": load},
                  {"router_cpu_pct": 10 * load, "loss_percent": 0.0})
        for size in (512, 1518):
            trial("maxtraffic", "maxtraffic", {"ratio": "50/50", "frame_size": size},
                  {"max_received_bps": size * 6e4, "router_cpu_pct": 3.0,
                   "received_pps": 1e6 / size})
        trial("acl_none", "acl", {"ratio": "100/0"}, {"router_cpu_pct": 2.0,
                                                     "received_bps": 9e7}, {"acl": False})
        trial("acl", "acl", {"ratio": "100/0", "rules": 25, "apply": "both"},
              {"router_cpu_pct": 3.0, "received_bps": 9e7}, {"acl": True})
        for mtu in (1500, 68):
            trial("fragment", "fragment", {"core_mtu": mtu, "frame_size": 1518},
                  {"router_cpu_pct": 2.0 if mtu == 1500 else 6.0,
                   "fragments_per_datagram": 1.0 if mtu == 1500 else 31.0})
        trial("reset", "reset", {"method": "links"}, {"outage_mean_ms": 1000.0})
        trial("icmp", "icmpload", {"ip": 6, "pps": 100, "size": 100}, {"router_cpu_pct": 0.2})
        trial("exthdr", "exthdr", {"variant": "srh", "rule": False, "pps": 1000},
              {"router_cpu_pct": 1.0})
    figs = {f.id: f for f in dobrinov_figures(load_db(db, experiments=["dobrinov-2016"]))}
    assert {"do-max-traffic", "do-max-cpu", "do-max-pps", "do-load-router-cpu", "do-load-loss",
            "do-icmp", "do-acl-cpu", "do-acl-traffic", "do-exthdr", "do-frag-cpu",
            "do-frag-fragments", "do-reset"} <= set(figs)
    assert [(r.x, r.mean) for r in figs["do-load-router-cpu"].rows] == [(0.1, 1.0), (0.5, 5.0)]
    assert {r.x for r in figs["do-acl-cpu"].rows} == {"no ACL", "25 lines, both"}
    assert {r.series for r in figs["do-frag-fragments"].rows} == {"MTU 1500", "MTU 68"}
    assert figs["do-max-traffic"].rows[0].series == "IPv4/IPv6 50/50"
    assert figs["do-reset"].rows[0].mean == 1000.0


def test_reset_quotes_and_anova_from_trials(tmp_path: Path) -> None:
    from testbed.papers.dobrinov_2016 import QUOTES

    quote = {q.what: q.ours for q in QUOTES}

    db = tmp_path / "r.sqlite"
    with closing(results.connect(db)) as con:
        run = results.start_run(con, "dobrinov-2016", "quick", {}, {"kernel": "6.1"}, 0)
        for i, (method, ms) in enumerate((("links", [67.5, 67.8, 66.9, 67.5, 66.8]),
                                           ("namespace", [66.3, 67.2, 67.4, 66.5, 67.0]))):
            point = {"method": method}
            results.write_trial(con, results.TrialRow(
                f"{run}/reset/{i}", run, "dobrinov-2016", "quick", "reset", "reset", point,
                results.canonical(point), 0, 1.0, 2.0, "ok", None,
                {"outage_mean_ms": sum(ms) / 5}, {"params": {}, "outages_ms": ms}, {}, []))
    ds = load_db(db, experiments=["dobrinov-2016"])
    assert quote["software reset time, mean of 5"](ds)  # type: ignore[misc] == "0.067 s (n = 5; interfaces down and up)"
    # the paper's own Table 7 numbers (its Table 8 prints F = 2.29, p = 0.168 from a hardware
    # mean of 66.86 s; the five values listed average 66.88 s)
    assert quote["one-way ANOVA, reset mode"](ds)  # type: ignore[misc] == "F = 2.19, p = 0.177 (df 1, 8)"
