"""Figures in each paper's own form, and the table of numbers behind each (n, 95 % CI, model)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import models, units
from testbed.report.data import Dataset, Stat, Value, group, metric, params_of

ModelFn = Callable[[str, float], float | None]  # (series, x) -> model value, or None


@dataclass
class Row:
    """One point of a figure: a series at one x, with its statistics and the model's value."""

    series: str
    x: Any  # number, or a category label for bar charts
    n: int
    mean: float
    ci_low: float
    ci_high: float
    min: float
    max: float
    env: str
    model: float | None = None
    key: tuple[str, str, Any] = ("", "", None)  # (measurement, point, env) of its statistic
    extra: dict[str, float] = field(default_factory=dict)  # more columns for its table

    @property
    def ratio(self) -> float | None:
        """ours / model."""
        return self.mean / self.model if self.model else None


@dataclass
class Figure:
    """A figure: what it shows, the rows behind it, and the model curves drawn over them."""

    id: str
    paper: str
    title: str
    xlabel: str
    ylabel: str
    style: str  # "lines", "minmeanmax" (categorical x, min-max bars), "bars" (categorical)
    rows: list[Row]
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # series -> model
    note: str = ""
    logx: bool = False
    png: str = ""  # file names beside the HTML, set by draw()
    svg: str = ""
    png_b64: str = ""

    @property
    def has_model(self) -> bool:
        return any(r.model is not None for r in self.rows)

    @property
    def extra_columns(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.rows:
            for k in r.extra:
                seen.setdefault(k, None)
        return list(seen)

    def series(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.rows:
            seen.setdefault(r.series, None)
        return list(seen)


# --- helpers -------------------------------------------------------------------------------


def rate_bps(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return units.rate(str(v), unlimited=False)
    except ValueError:
        return None


def rate_label(v: Any) -> str:
    bps = rate_bps(v)
    if bps is None:
        return str(v)
    return f"{bps / 1e9:g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:g} Mbit/s"


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def rows_of(stats: Sequence[Stat], series: Callable[[Stat], str], x: Callable[[Stat], Any],
            model: ModelFn | None = None) -> list[Row]:
    """Rows from statistics; a series gets its environment in its label when the figure mixes
    environments (a statistic never does)."""
    envs = {s.env for s in stats}
    out = []
    for s in stats:
        label = series(s) + (f" [{s.env.label}]" if len(envs) > 1 else "")
        xv = x(s)
        sm = s.summary
        out.append(Row(label, xv, sm.n, sm.mean, sm.ci95_low, sm.ci95_high, sm.min, sm.max,
                       s.env.label, model(series(s), xv) if model else None, _stat_key(s)))
    out.sort(key=lambda r: (r.series, _num(r.x) if not isinstance(r.x, str) else 0.0))
    return out


def _sel(ds: Dataset, experiment: str, measurements: Iterable[str] | None = None,
         kinds: Iterable[str] | None = None) -> list[Any]:
    ms = set(measurements) if measurements is not None else None
    ks = set(kinds) if kinds is not None else None
    return [t for t in ds.trials if t.experiment == experiment
            and (ms is None or t.measurement in ms) and (ks is None or t.kind in ks)]


def _stats(ds: Dataset, trials: list[Any], value: Value, name: str) -> list[Stat]:
    return group(ds, trials, value, name)


def _point_key(key: str) -> Callable[[Stat], Any]:
    def get(s: Stat) -> Any:
        return s.point.get(key)

    return get


def _const(value: Any) -> Callable[[Stat], Any]:
    def get(s: Stat) -> Any:
        return value

    return get


def _stat_key(s: Stat) -> tuple[str, str, Any]:
    return (s.measurement, str(sorted(s.point.items())), s.env)


def add_extra(ds: Dataset, rows: list[Row], trials: list[Any], value: Value, column: str
              ) -> None:
    """Add the mean of `value` over each row's trials as one more table column."""
    means = {_stat_key(s): s.mean for s in group(ds, trials, value, column)}
    for r in rows:
        if r.key in means:
            r.extra[column] = means[r.key]


def _size_key(point: dict[str, Any]) -> str | None:
    for k in ("ip_payload", "size", "length", "frame_size"):
        if point.get(k) is not None:
            return k
    return None


SIZE_LABEL = {"ip_payload": "IP payload (bytes)", "size": "UDP/TCP message (bytes)",
              "length": "datagram / write size (bytes)", "frame_size": "Ethernet frame (bytes)"}


# --- gamess-morales ------------------------------------------------------------------------


def gamess_figures(ds: Dataset, experiment: str = "gamess-morales") -> list[Figure]:
    figs: list[Figure] = []
    tput = _sel(ds, experiment, kinds=["rfc2544"])
    stats = _stats(ds, tput, metric("throughput_bps", 1e-6), "throughput_mbps")
    # a figure for every point measured, also where every trial failed (it says so)
    for rate in sorted({params_of(t).get("topology.rate") for t in tput},
                       key=lambda v: rate_bps(v) or 0):
        sub = [s for s in stats if s.point.get("topology.rate") == rate]
        bps = rate_bps(rate)

        def tp_model(series: str, x: Any, bps: float | None = bps) -> float | None:
            ip = 6 if series.startswith("IPv6") else 4
            return models.max_throughput_bps(int(x), bps, ip) / 1e6 if bps else None

        rows = rows_of(sub, lambda s: f"IPv{s.point.get('ip')}", lambda s: s.point.get(
            "ip_payload"), tp_model)
        curves = {}
        if bps:
            xs = sorted({int(r.x) for r in rows})
            hi = max(xs) if xs else 1500
            for ip in sorted({int(s.point.get("ip", 4)) for s in sub}):
                grid = range(max(1, min(xs) if xs else 1), hi + 1, max(1, hi // 400))
                curves[f"IPv{ip}"] = [(float(n), models.max_throughput_bps(n, bps, ip) / 1e6)
                                      for n in grid]
        figs.append(Figure(
            f"gm-throughput-{rate}", "gamess-morales",
            f"Zero-loss UDP throughput vs IP payload, {rate_label(rate)}, point-to-point "
            "(Tables I-II)", "IP payload (bytes)", "throughput (Mbit/s of IP payload)", "lines",
            rows, curves, note="points: RFC 2544 search, mean with 95 % CI; dashed: the model, "
            "equation (7); dotted: the gap"))
    owdt = _sel(ds, experiment, kinds=["pingpong"])
    ostats = _stats(ds, owdt, metric("owd_mean_us"), "owd_mean_us")
    keys = sorted({(int(params_of(t).get("ip", 4)), params_of(t).get("topology.rate"))
                   for t in owdt},
                  key=lambda k: (rate_bps(k[1]) or 0, k[0]))
    for ip, rate in keys:
        sub = [s for s in ostats if int(s.point.get("ip", 4)) == ip
               and s.point.get("topology.rate") == rate]
        bps = rate_bps(rate)

        def owd_model(series: str, x: Any, bps: float | None = bps, ip: int = ip
                      ) -> float | None:
            routers = int(series.split()[0])
            if not bps:
                return None
            return models.owd(int(x), bps, ip, routers, propagation_s=30e-6) * 1e6

        def routers_of(s: Stat) -> str:
            r = int(s.point.get("topology.routers", 0))
            return f"{r} router" + ("" if r == 1 else "s")

        rows = rows_of(sub, routers_of, lambda s: s.point.get("ip_payload"), owd_model)
        add_extra(ds, rows, owdt, metric("probe_overhead_mean_us"), "probe overhead (µs)")
        curves = {}
        mine = [params_of(t) for t in owdt if int(params_of(t).get("ip", 4)) == ip
                and params_of(t).get("topology.rate") == rate]
        if bps:  # the model over every payload and router count asked for, measured or not
            xs = sorted({int(p["ip_payload"]) for p in mine if p.get("ip_payload")}) or [10, 1480]
            for routers in sorted({int(p.get("topology.routers", 0)) for p in mine}):
                rs = f"{routers} router" + ("" if routers == 1 else "s")
                curves[rs] = [(float(n), models.owd(n, bps, ip, routers, 30e-6) * 1e6)
                              for n in range(min(xs), max(xs) + 1, max(1, max(xs) // 200))]
        figs.append(Figure(
            f"gm-owd-v{ip}-{rate}", "gamess-morales",
            f"One-way delay (RTT/2) vs IP payload, IPv{ip}, {rate_label(rate)}, per router count "
            "(Tables III-VI)", "IP payload (bytes)", "one-way delay (µs)", "lines", rows, curves,
            note="points: UDP ping-pong, mean OWD with 95 % CI over repetitions (probe overhead "
            "included); dashed: equation (9) with π = 30 µs; dotted: the gap"))
    return figs


# --- quintero-2016 (experiment "transition") --------------------------------------------------


def quintero_figures(ds: Dataset, experiment: str = "transition") -> list[Figure]:
    figs: list[Figure] = []
    specs: list[tuple[str, list[str], Value, str, str]] = [
        ("throughput", ["iperf3"], metric("receiver_bps", 1e-6), "receiver_mbps",
         "UDP throughput (Mbit/s, iperf3 receiver)"),
        ("owd", ["pingpong"], metric("owd_mean_us"), "owd_mean_us", "one-way delay (µs)"),
    ]
    for what, kinds, value, name, ylabel in specs:
        trials = _sel(ds, experiment, kinds=kinds)
        stats = _stats(ds, trials, value, name)
        keys = sorted({(str(params_of(t).get("protocol", "udp")),
                        params_of(t).get("topology.rate")) for t in trials},
                      key=lambda k: (k[0], rate_bps(k[1]) or 0))
        for proto, rate in keys:
            sub = [s for s in stats if str(s.point.get("protocol", "udp")) == proto
                   and s.point.get("topology.rate") == rate]
            sk = next((k for t in trials if (k := _size_key(params_of(t)))), "size")
            rows = rows_of(sub, lambda s: str(s.point.get("topology")), _point_key(sk))
            title = ("Throughput" if what == "throughput" else f"{proto.upper()} one-way delay")
            figs.append(Figure(
                f"qu-{what}-{proto}-{rate}", "quintero-2016",
                f"{title} vs payload per mechanism, {rate_label(rate)}",
                SIZE_LABEL.get(sk, sk), ylabel, "lines", rows,
                note="one curve per mechanism; mean with 95 % CI over repetitions"))
    return figs


# --- gometz-2015 ---------------------------------------------------------------------------


def _minmeanmax(ds: Dataset, trials: list[Any], mean_v: Value, min_v: Value, max_v: Value,
                name: str) -> list[Row]:
    """IPv4 beside IPv6 per frame size: mean of `mean_v` with its CI, min of `min_v`, max of
    `max_v` over the repetitions."""
    means = _stats(ds, trials, mean_v, name)

    lows = {_stat_key(s): s.summary.min for s in _stats(ds, trials, min_v, name + "_min")}
    highs = {_stat_key(s): s.summary.max for s in _stats(ds, trials, max_v, name + "_max")}
    rows = rows_of(means, lambda s: f"IPv{s.point.get('ip')}",
                   lambda s: s.point.get(_size_key(s.point) or "frame_size"))
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
        sel = _sel(ds, experiment, kinds=[kind])
        if sel:
            v = metric(name, 1e-6)
            figs.append(Figure(
                fig_id, "gometz-2015", title, "Ethernet frame (bytes)", ylabel, "minmeanmax",
                _minmeanmax(ds, sel, v, v, v, column),
                note="marker: mean over repetitions; bar: min to max"))
    lat = _sel(ds, experiment, kinds=["ping"])
    if lat:
        figs.append(Figure(
            "go-latency", "gometz-2015", "ICMP echo round-trip latency per frame size, IPv4 "
            "beside IPv6", "Ethernet frame (bytes)", "round-trip time (ms)", "minmeanmax",
            _minmeanmax(ds, lat, metric("rtt_mean_ms"), metric("rtt_min_ms"),
                        metric("rtt_max_ms"), "rtt_ms"),
            note="marker: mean RTT (mean over repetitions of each run's mean); bar: the lowest "
            "and highest single echo"))
    return figs


# --- dobrinov-2016 -------------------------------------------------------------------------


def _v6_share(s: Stat) -> float:
    ratio = s.point.get("ratio")
    if not ratio:
        return 100.0 if int(s.point.get("ip", 4)) == 6 else 0.0
    a, b = (float(x) for x in str(ratio).split("/"))
    return 100.0 * b / (a + b)


def _offered_mbps(s: Stat) -> float:
    return (rate_bps(s.point.get("rate")) or 0.0) / 1e6


def dobrinov_figures(ds: Dataset, experiment: str = "dobrinov-2016") -> list[Figure]:
    figs: list[Figure] = []
    mixed = _sel(ds, experiment, kinds=["iperf3"])
    if mixed:
        def label(s: Stat) -> str:
            d = "bidirectional" if s.point.get("direction") == "bidir" else "one way"
            return f"{s.point.get('frame_size')} B, {d}"

        rates = {str(params_of(t).get("rate")) for t in mixed}
        by_load = len({str(t.point.get("rate")) for t in mixed if "rate" in t.point}) > 1
        for what, value, name, ylabel in (
                ("throughput", metric("receiver_bps", 1e-6), "receiver_mbps",
                 "throughput at the receiver (Mbit/s)"),
                ("cpu", metric("cpu_machine_softirq_pct"), "cpu_softirq_pct",
                 "router CPU, softirq (% of machine)")):
            stats = _stats(ds, mixed, value, name)
            x: Callable[[Stat], Any] = _offered_mbps if by_load else _v6_share
            xlabel = ("offered load (Mbit/s)" if by_load
                      else "IPv6 share of the offered traffic (%)")
            figs.append(Figure(
                f"do-mixed-{what}", "dobrinov-2016",
                f"{'Throughput' if what == 'throughput' else 'Router CPU'} vs "
                f"{'offered load' if by_load else 'IPv4/IPv6 mix'} (offered "
                f"{', '.join(sorted(rate_label(r) for r in rates))})",
                xlabel, ylabel, "lines", rows_of(stats, label, x),
                note="CPU is the machine's softirq share: kernel forwarding has no process"))
    ipd = _sel(ds, experiment, kinds=["receiver"])
    if ipd:
        for what, value, name, ylabel in (
                ("ipd", metric("ipd_mean_us", 1e-3), "ipd_mean_ms",
                 "mean inter-packet delay at the receiver (ms)"),
                ("cpu", metric("cpu_machine_softirq_pct"), "cpu_softirq_pct",
                 "router CPU, softirq (% of machine)")):
            stats = _stats(ds, ipd, value, name)
            figs.append(Figure(
                f"do-load-{what}", "dobrinov-2016",
                f"{'Inter-packet delay' if what == 'ipd' else 'Router CPU'} vs offered load, "
                "1518-byte frames", "offered load (Mbit/s)", ylabel, "lines",
                rows_of(stats, lambda s: f"IPv{s.point.get('ip')}",
                        lambda s: (rate_bps(s.point.get("rate")) or 0) / 1e6)))
    return figs + _dobrinov_stress_figures(ds, experiment)


ROUTER_CPU = "router CPU (% of one CPU: its NAPI threads)"


def _mix_label(s: Stat) -> str:
    ratio = s.point.get("ratio") or ("0/100" if int(s.point.get("ip", 4)) == 6 else "100/0")
    return f"IPv4/IPv6 {ratio}" + (", bidir" if s.point.get("direction") == "bidir" else "")


def _dobrinov_stress_figures(ds: Dataset, experiment: str) -> list[Figure]:
    """The stress kinds' figures (Figs. 3-17 of the paper, in our units)."""
    figs: list[Figure] = []

    def fig(fid: str, kinds: list[str], value: Value, name: str, title: str, xlabel: str,
            ylabel: str, series: Callable[[Stat], str], x: Callable[[Stat], Any],
            style: str = "lines", note: str = "") -> None:
        trials = _sel(ds, experiment, kinds=kinds)
        stats = _stats(ds, trials, value, name) if trials else []
        if stats:
            figs.append(Figure(fid, "dobrinov-2016", title, xlabel, ylabel, style,
                               rows_of(stats, series, x), note=note))

    frame = _point_key("frame_size")
    fig("do-max-traffic", ["maxtraffic"], metric("max_received_bps", 1e-6), "max_mbps",
        "Fig. 3/10: zero-loss maximum traffic vs frame size", "Ethernet frame (bytes)",
        "maximum traffic, UDP data (Mbit/s)", _mix_label, frame,
        note="generator_limited = 1 in a trial's metrics: the Python senders set the limit")
    fig("do-max-cpu", ["maxtraffic"], metric("router_cpu_pct"), "router_cpu_pct",
        "Fig. 5/9: router CPU at the maximum traffic", "Ethernet frame (bytes)", ROUTER_CPU,
        _mix_label, frame)
    fig("do-max-pps", ["maxtraffic"], metric("received_pps"), "received_pps",
        "Fig. 6: packets per second at the maximum traffic", "Ethernet frame (bytes)",
        "frames per second received", _mix_label, frame)

    def load_label(s: Stat) -> str:
        return f"{_mix_label(s)}, {s.point.get('frame_size')} B"

    load_x = _point_key("load")
    fig("do-load-router-cpu", ["load"], metric("router_cpu_pct"), "router_cpu_pct",
        "Figs. 4/7: router CPU vs offered load", "offered load (share of Fast Ethernet)",
        ROUTER_CPU, load_label, load_x)
    fig("do-load-loss", ["load"], metric("loss_percent"), "loss_percent",
        "Fig. 8: frame loss vs offered load", "offered load (share of Fast Ethernet)",
        "frame loss (%)", load_label, load_x)
    fig("do-icmp", ["icmpload"], metric("router_cpu_pct"), "router_cpu_pct",
        "Fig. 12: router CPU under ICMP echo load", "echo requests per second", ROUTER_CPU,
        lambda s: f"ICMPv{s.point.get('ip')}, {s.point.get('size')} B", _point_key("pps"))

    def acl_x(s: Stat) -> str:
        if s.point.get("acl") is False:
            return "no ACL"
        return f"{s.point.get('rules')} lines, {s.point.get('apply')}"

    fig("do-acl-cpu", ["acl"], metric("router_cpu_pct"), "router_cpu_pct",
        "Fig. 13: router CPU with ACLs", "ACL", ROUTER_CPU, _mix_label, acl_x, style="bars")
    fig("do-acl-traffic", ["acl"], metric("received_bps", 1e-6), "received_mbps",
        "Fig. 14: traffic with ACLs", "ACL", "traffic received, UDP data (Mbit/s)", _mix_label,
        acl_x, style="bars")
    fig("do-exthdr", ["exthdr"], metric("router_cpu_pct"), "router_cpu_pct",
        "Figs. 15/18: router CPU with IPv6 extension headers", "packets per second", ROUTER_CPU,
        lambda s: f"{s.point.get('variant')}{' + rule' if s.point.get('rule') else ''}",
        _point_key("pps"), note="rh0 is dropped by the router (RFC 5095); srh is forwarded")
    fig("do-frag-cpu", ["fragment"], metric("router_cpu_pct"), "router_cpu_pct",
        "Figs. 16/17: r1's CPU vs frame size per r1-r2 MTU (5000 datagrams/s)",
        "Ethernet frame (bytes)", ROUTER_CPU, lambda s: f"MTU {s.point.get('core_mtu')}", frame)
    fig("do-frag-fragments", ["fragment"], metric("fragments_per_datagram"),
        "fragments_per_datagram", "Fragments per datagram vs frame size",
        "Ethernet frame (bytes)", "fragments per datagram (r1's FragCreates/FragOKs)",
        lambda s: f"MTU {s.point.get('core_mtu')}", frame)
    fig("do-reset", ["reset"], metric("outage_mean_ms"), "outage_mean_ms",
        "Table 7: outage when the router restarts", "restart", "outage at the receiver (ms)",
        _const("mean of the restarts"), _point_key("method"), style="bars")
    return figs


# --- zeadally-2004 -------------------------------------------------------------------------


def rtt_us(t: Any) -> float | None:
    """Round-trip time (µs) as the paper reports it: the stored RTT, else 2 x the stored OWD."""
    for k in ("rtt_mean_us",):
        v = t.metrics.get(k)
        if isinstance(v, (int, float)):
            return float(v)
    v = t.metrics.get("owd_mean_us")
    return 2.0 * float(v) if isinstance(v, (int, float)) else None


def zeadally_figures(ds: Dataset, experiment: str = "zeadally-2004") -> list[Figure]:
    figs: list[Figure] = []
    lat = _sel(ds, experiment, kinds=["pingpong"])
    if lat:
        stats = _stats(ds, lat, rtt_us, "rtt_mean_us")
        figs.append(Figure(
            "ze-latency", "zeadally-2004", "Round-trip latency vs message size, TCP and UDP",
            "message size (bytes)", "round-trip time (µs)", "lines",
            rows_of(stats, lambda s: f"{str(s.point.get('protocol')).upper()}/IPv"
                    f"{s.point.get('ip')}", lambda s: s.point.get("size")),
            note="ping-pong round trips, mean with 95 % CI over repetitions"))
    tput = _sel(ds, experiment, kinds=["iperf3"])
    if tput:
        stats = _stats(ds, tput, metric("receiver_bps", 1e-6), "receiver_mbps")
        figs.append(Figure(
            "ze-throughput", "zeadally-2004", "TCP and UDP throughput vs message size",
            "message size (bytes)", "throughput (Mbit/s, iperf3 receiver)", "lines",
            rows_of(stats, lambda s: f"{str(s.point.get('protocol')).upper()}/IPv"
                    f"{s.point.get('ip')}", lambda s: s.point.get("length"))))
    stack = _sel(ds, experiment, kinds=["stackcost"])
    if stack:
        rows: list[Row] = []
        for m, label in (("tcp_socket_create_us", "TCP socket creation"),
                         ("udp_socket_create_us", "UDP socket creation"),
                         ("tcp_connect_us", "TCP connect")):
            rows += rows_of(_stats(ds, stack, metric(m), m),
                            lambda s: f"IPv{s.point.get('ip')}", _const(label))
        figs.append(Figure(
            "ze-stack", "zeadally-2004", "Stack costs: socket creation and TCP connect",
            "operation", "time (µs, median of each trial)", "bars", rows))
        figs.append(Figure(
            "ze-cps", "zeadally-2004", "Connections per second (connect, 1-byte exchange, close)",
            "IP version", "connections per second", "bars",
            rows_of(_stats(ds, stack, metric("connections_per_s"), "connections_per_s"),
                    lambda s: f"IPv{s.point.get('ip')}", lambda s: "connections/s")))
    return figs


FIGURES: dict[str, Callable[[Dataset], list[Figure]]] = {
    "gamess-morales": gamess_figures,
    "quintero-2016": quintero_figures,
    "gometz-2015": gometz_figures,
    "dobrinov-2016": dobrinov_figures,
    "zeadally-2004": zeadally_figures,
}


# --- drawing -------------------------------------------------------------------------------


def draw(fig: Figure, out: Path) -> None:
    """Write `<id>.png` and `<id>.svg` into `out` and keep the PNG (base64) for embedding."""
    import base64
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "svg.hashsalt": "testbed",
                         "svg.fonttype": "none"})
    f, ax = plt.subplots(figsize=(9, 4.8), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    series = fig.series()
    color = {s: colors[i % len(colors)] for i, s in enumerate(series)}
    if fig.style == "lines":
        for s in series:
            rs = [r for r in fig.rows if r.series == s]
            xs = [_num(r.x) for r in rs]
            ys = [r.mean for r in rs]
            yerr = [[r.mean - r.ci_low for r in rs], [r.ci_high - r.mean for r in rs]]
            # with a model the points stand alone (the model draws the shape between them)
            ax.errorbar(xs, ys, yerr=yerr, marker="o", ms=5, capsize=3, color=color[s],
                        label=s, linestyle="none" if fig.curves else "-", linewidth=1.2)
            for r, x in zip(rs, xs, strict=True):
                if r.model is not None:
                    ax.plot([x, x], [r.mean, r.model], linestyle=":", color=color[s],
                            linewidth=1.5)
            base = s.split(" [")[0]
            if fig.curves.get(base):
                cx, cy = zip(*fig.curves[base], strict=True)
                ax.plot(cx, cy, linestyle="--", linewidth=1, color=color[s], alpha=0.8,
                        label=f"{s}: model")
        bases = {s.split(" [")[0] for s in series}
        for i, (name, pts) in enumerate(sorted(fig.curves.items())):
            if name not in bases and pts:
                cx, cy = zip(*pts, strict=True)
                ax.plot(cx, cy, linestyle="--", linewidth=1,
                        color=colors[(len(series) + i) % len(colors)],
                        label=f"{name}: model (nothing measured)")
        if fig.logx:
            ax.set_xscale("log")
        values = [v for r in fig.rows for v in (r.mean, r.model) if v is not None and v > 0]
        if values and max(values) / min(values) > 30:
            ax.set_yscale("log")  # ours and the model far apart: both stay readable
            from matplotlib.ticker import FuncFormatter, LogLocator

            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
    else:
        cats: list[Any] = []
        for r in fig.rows:
            if r.x not in cats:
                cats.append(r.x)
        if fig.style == "minmeanmax":
            cats.sort(key=_num)
        pos = {c: i for i, c in enumerate(cats)}
        width = 0.8 / max(1, len(series))
        for i, s in enumerate(series):
            rs = [r for r in fig.rows if r.series == s]
            xs = [pos[r.x] - 0.4 + width * (i + 0.5) for r in rs]
            if fig.style == "bars":
                ax.bar(xs, [r.mean for r in rs], width=width * 0.9, color=color[s], label=s,
                       yerr=[[r.mean - r.ci_low for r in rs], [r.ci_high - r.mean for r in rs]],
                       capsize=3)
            else:
                ax.errorbar(xs, [r.mean for r in rs],
                            yerr=[[r.mean - r.min for r in rs], [r.max - r.mean for r in rs]],
                            fmt="o", ms=6, capsize=5, color=color[s], label=f"{s} (min-mean-max)")
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([str(c) for c in cats])
    ax.set_xlabel(fig.xlabel)
    ax.set_ylabel(fig.ylabel)
    ax.grid(True, alpha=0.3)
    if series or fig.curves:
        ax.legend(fontsize=9, loc="best", ncol=1 if len(series) < 5 else 2)
    if not series:
        ax.text(0.5, 0.5, "no successful trials (see Failed trials)", transform=ax.transAxes,
                ha="center")
    f.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.png, fig.svg = f"{fig.id}.png", f"{fig.id}.svg"
    buf = io.BytesIO()
    f.savefig(buf, format="png")
    (out / fig.png).write_bytes(buf.getvalue())
    f.savefig(out / fig.svg)
    plt.close(f)
    fig.png_b64 = base64.b64encode(buf.getvalue()).decode("ascii")
