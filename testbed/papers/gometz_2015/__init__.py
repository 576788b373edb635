"""Gometz 2015, IPv4 and IPv6 in open source routers (RFC 2544): its figures (min/mean/max per
frame size), the numbers its text quotes, the feature matrix and router-profile table
(feature_matrix.py), and its claims (claims.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testbed.papers import Paper
from testbed.papers.gometz_2015 import feature_matrix
from testbed.papers.gometz_2015.claims import CLAIMS
from testbed.report.data import Dataset, Value, metric
from testbed.report.figures import (
    Figure,
    Row,
    grouped,
    rows_of,
    select,
    size_key,
    stat_key,
)
from testbed.report.tables import (
    Quote,
    fmt_env,
    values_per_env,
)
from testbed.results import TrialRow


def _minmeanmax(ds: Dataset, trials: list[Any], mean_v: Value, min_v: Value, max_v: Value,
                name: str) -> list[Row]:
    """IPv4 beside IPv6 per frame size: mean of `mean_v` with its CI, min of `min_v`, max of
    `max_v` over the repetitions."""
    means = grouped(ds, trials, mean_v, name)

    lows = {stat_key(s): s.summary.min for s in grouped(ds, trials, min_v, name + "_min")}
    highs = {stat_key(s): s.summary.max for s in grouped(ds, trials, max_v, name + "_max")}
    rows = rows_of(means, lambda s: f"IPv{s.point.get('ip')}",
                   lambda s: s.point.get(size_key(s.point) or "frame_size"))
    for r in rows:
        r.min = lows.get(r.key, r.min)
        r.max = highs.get(r.key, r.max)
    return rows


def gometz_figures(ds: Dataset, experiment: str = "gometz-2015") -> list[Figure]:
    figs: list[Figure] = []
    throughput = (  # (kind, metric, figure id, title, y label, table column)
        ("rfc2544", "throughput_bps", "go-throughput-rfc2544",
         "RFC 2544 zero-loss throughput per frame size, IPv4 beside IPv6",
         "throughput (Mbit/s of IP payload)", "throughput_mbps"),
        ("iperf3", "receiver_bps", "go-throughput-tcp",
         "iperf3 TCP throughput per frame size, IPv4 beside IPv6 (the paper's tool)",
         "throughput (Mbit/s)", "tcp_mbps"),
    )
    for kind, name, fig_id, title, ylabel, column in throughput:
        sel = select(ds, experiment, kinds=[kind])
        if sel:
            v = metric(name, 1e-6)
            figs.append(Figure(
                fig_id, "gometz-2015", title, "Ethernet frame (bytes)", ylabel, "minmeanmax",
                _minmeanmax(ds, sel, v, v, v, column),
                note="marker: mean over repetitions; bar: min to max"))
    lat = select(ds, experiment, kinds=["ping"])
    if lat:
        figs.append(Figure(
            "go-latency", "gometz-2015", "ICMP echo round-trip latency per frame size, IPv4 "
            "beside IPv6", "Ethernet frame (bytes)", "round-trip time (ms)", "minmeanmax",
            _minmeanmax(ds, lat, metric("rtt_mean_ms"), metric("rtt_min_ms"),
                        metric("rtt_max_ms"), "rtt_ms"),
            note="marker: mean RTT (mean over repetitions of each run's mean); bar: the lowest "
            "and highest single echo"))
    return figs


def _spread(ds: Dataset) -> str | None:
    per = {}
    for env, vals in values_per_env(ds, "gometz-2015", metric("throughput_bps", 1e-6),
                             lambda p: int(p.get("ip", 4)) == 6
                             and p.get("frame_size") == 1518).items():
        per[env] = f"{max(vals) - min(vals):.2f} Mbit/s (n = {len(vals)})"
    return fmt_env(per)


def _loss(ds: Dataset) -> str | None:
    per: dict[str, list[float]] = {}
    for t in ds.trials:
        if t.experiment != "gometz-2015" or t.status != "ok":
            continue
        fl = t.result.get("frame_loss") if isinstance(t.result, dict) else None
        if isinstance(fl, list):
            per.setdefault(ds.env(t).label, []).extend(
                float(p.get("loss_percent", 0.0)) for p in fl if isinstance(p, dict))
    return fmt_env({env: f"max {max(v):.2f} % over {len(v)} frame-loss trials"
                     for env, v in per.items() if v})


QUOTES: tuple[Quote, ...] = (
    Quote("frame loss rate, every test", "0 %", "sec. 7", _loss),
    Quote("IPv6 throughput spread at 1518 B (VyOS)", "90 Mbit/s", "sec. 8", _spread),
)


def _extras(ds: Dataset, trials: Sequence[TrialRow]) -> dict[str, list[Any]]:
    """The feature matrix and the router-profile table."""
    return {"feature_rows": list(feature_matrix.feature_matrix(trials, lambda t: ds.env(t).tier)),
            "profile_rows": list(feature_matrix.profile_table(trials))}


PAPER = Paper(
    id='gometz-2015',
    title="Gometz 2015: IPv4 and IPv6 in open source routers (RFC 2544)",
    citation=(
        "D. Gometz: \"Performance comparison of IPv4 and IPv6 in open source router "
        "distributions\", bachelor degree project, University of Skövde, 2015"),
    experiments=('gometz-2015', 'gometz-2015-kernel'),
    claims=CLAIMS,
    figures=gometz_figures,
    quotes=QUOTES,
    extras=_extras,
    order=3,
)
