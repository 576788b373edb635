"""Dobrinov et al. 2016, router performance with IPv4/IPv6 traffic: its figures (mixed traffic,
load, stress tests), the numbers its text and Tables 7-8 print, and its claims (claims.py)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from testbed.papers import Paper, Variant
from testbed.papers.dobrinov_2016.claims import CLAIMS
from testbed.report.claims import printed_trial
from testbed.report.data import Dataset, Stat, Value, metric, params_of
from testbed.report.figures import (
    Figure,
    const,
    grouped,
    point_key,
    rate_label,
    rows_of,
    select,
)
from testbed.report.figures import rate_bps as rate_of
from testbed.report.tables import (
    Quote,
    both,
    ip_is,
    is_rate,
    mean_text,
)
from testbed.results import TrialRow


def _share_pct(s: Stat) -> float:
    ratio = s.point.get("ratio")
    if not ratio:
        return 100.0 if int(s.point.get("ip", 4)) == 6 else 0.0
    a, b = (float(x) for x in str(ratio).split("/"))
    return 100.0 * b / (a + b)


def _offered_mbps(s: Stat) -> float:
    return (rate_of(s.point.get("rate")) or 0.0) / 1e6


def dobrinov_figures(ds: Dataset, experiment: str = "dobrinov-2016") -> list[Figure]:
    figs: list[Figure] = []
    mixed = select(ds, experiment, kinds=["iperf3"])
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
            stats = grouped(ds, mixed, value, name)
            x: Callable[[Stat], Any] = _offered_mbps if by_load else _share_pct
            xlabel = ("offered load (Mbit/s)" if by_load
                      else "IPv6 share of the offered traffic (%)")
            figs.append(Figure(
                f"do-mixed-{what}", "dobrinov-2016",
                f"{'Throughput' if what == 'throughput' else 'Router CPU'} vs "
                f"{'offered load' if by_load else 'IPv4/IPv6 mix'} (offered "
                f"{', '.join(sorted(rate_label(r) for r in rates))})",
                xlabel, ylabel, "lines", rows_of(stats, label, x),
                note="CPU is the machine's softirq share: kernel forwarding has no process"))
    ipd = select(ds, experiment, kinds=["receiver"])
    if ipd:
        for what, value, name, ylabel in (
                ("ipd", metric("ipd_mean_us", 1e-3), "ipd_mean_ms",
                 "mean inter-packet delay at the receiver (ms)"),
                ("cpu", metric("cpu_machine_softirq_pct"), "cpu_softirq_pct",
                 "router CPU, softirq (% of machine)")):
            stats = grouped(ds, ipd, value, name)
            figs.append(Figure(
                f"do-load-{what}", "dobrinov-2016",
                f"{'Inter-packet delay' if what == 'ipd' else 'Router CPU'} vs offered load, "
                "1518-byte frames", "offered load (Mbit/s)", ylabel, "lines",
                rows_of(stats, lambda s: f"IPv{s.point.get('ip')}",
                        lambda s: (rate_of(s.point.get("rate")) or 0) / 1e6)))
    return figs + _dobrinov_stress_figures(ds, experiment) + _budget_figures(ds)


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
        trials = select(ds, experiment, kinds=kinds)
        stats = grouped(ds, trials, value, name) if trials else []
        if stats:
            figs.append(Figure(fid, "dobrinov-2016", title, xlabel, ylabel, style,
                               rows_of(stats, series, x), note=note))

    frame = point_key("frame_size")
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

    load_x = point_key("load")
    fig("do-load-router-cpu", ["load"], metric("router_cpu_pct"), "router_cpu_pct",
        "Figs. 4/7: router CPU vs offered load", "offered load (share of Fast Ethernet)",
        ROUTER_CPU, load_label, load_x)
    fig("do-load-loss", ["load"], metric("loss_percent"), "loss_percent",
        "Fig. 8: frame loss vs offered load", "offered load (share of Fast Ethernet)",
        "frame loss (%)", load_label, load_x)
    fig("do-icmp", ["icmpload"], metric("router_cpu_pct"), "router_cpu_pct",
        "Fig. 12: router CPU under ICMP echo load", "echo requests per second", ROUTER_CPU,
        lambda s: f"ICMPv{s.point.get('ip')}, {s.point.get('size')} B", point_key("pps"))

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
        point_key("pps"), note="rh0 is dropped by the router (RFC 5095); srh is forwarded")
    fig("do-frag-cpu", ["fragment"], metric("router_cpu_pct"), "router_cpu_pct",
        "Figs. 16/17: r1's CPU vs frame size per r1-r2 MTU (5000 datagrams/s)",
        "Ethernet frame (bytes)", ROUTER_CPU, lambda s: f"MTU {s.point.get('core_mtu')}", frame)
    fig("do-frag-fragments", ["fragment"], metric("fragments_per_datagram"),
        "fragments_per_datagram", "Fragments per datagram vs frame size",
        "Ethernet frame (bytes)", "fragments per datagram (r1's FragCreates/FragOKs)",
        lambda s: f"MTU {s.point.get('core_mtu')}", frame)
    fig("do-reset", ["reset"], metric("outage_mean_ms"), "outage_mean_ms",
        "Table 7: outage when the router restarts", "restart", "outage at the receiver (ms)",
        const("mean of the restarts"), point_key("method"), style="bars")
    return figs


BUDGET = "dobrinov-2016-budget"  # the CPU-budgeted router beside an unlimited one (issue 27)


def _budget_label(s: Stat) -> str:
    b = str(s.point.get("topology.budget"))
    who = "unlimited router" if b == "none" else f"router budget {float(b):.0%} of a CPU"
    return f"{who}, {_mix_label(s)}"


def _budget_figures(ds: Dataset) -> list[Figure]:
    """The budgeted router beside the unlimited one (virtual clock): loss and router time per
    frame vs offered load, and the zero-loss maximum per mix."""
    figs: list[Figure] = []
    for fid, kinds, value, name, title, xlabel, ylabel, x, style in (
            ("do-budget-loss", ["load"], metric("loss_percent"), "loss_percent",
             "Budgeted router: frame loss vs offered load, 64-byte frames",
             "offered load (share of Ethernet)", "frame loss (%)", point_key("load"), "lines"),
            ("do-budget-cost", ["load"], metric("router_us_per_packet"), "router_us_per_packet",
             "Budgeted router: router time per frame vs offered load",
             "offered load (share of Ethernet)", "router time per frame (virtual µs)",
             point_key("load"), "lines"),
            ("do-budget-max", ["maxtraffic"], metric("received_pps"), "received_pps",
             "Budgeted router: zero-loss maximum (frames/s)", "Ethernet frame (bytes)",
             "frames per second received", point_key("frame_size"), "bars")):
        trials = select(ds, BUDGET, kinds=kinds)
        stats = grouped(ds, trials, value, name) if trials else []
        if stats:
            figs.append(Figure(fid, "dobrinov-2016", title, xlabel, ylabel, style,
                               rows_of(stats, _budget_label, x),
                               note="virtual clock: a µs is a thousand instructions "
                               "(docs/vm.md)"))
    return figs


def _ipd(bps: float) -> Callable[[Dataset], str | None]:
    def get(ds: Dataset) -> str | None:
        parts = []
        for v in (4, 6):
            t = mean_text(ds, "dobrinov-2016", metric("ipd_mean_us", 1e-3),
                           both(is_rate(bps), ip_is(v)), ".3f")
            if t:
                parts.append(f"IPv{v}: {t} ms")
        return " / ".join(parts) or None

    return get


def _outages(ds: Dataset, method: str) -> list[float]:
    """Every restart outage (ms) of the dobrinov `reset` trials by `method`."""
    out: list[float] = []
    for t in ds.trials:
        if (t.experiment == "dobrinov-2016" and t.kind == "reset" and t.status == "ok"
                and params_of(t).get("method") == method):
            ms = t.result.get("outages_ms") if isinstance(t.result, dict) else None
            out.extend(float(v) for v in ms or [])
    return out


def _reset(method: str, label: str) -> Callable[[Dataset], str | None]:
    def get(ds: Dataset) -> str | None:
        ms = _outages(ds, method)
        if not ms:
            return None
        from testbed.stats import describe

        s = describe(ms)
        return f"{s.mean / 1000:.3f} s (n = {s.n}; {label})"

    return get


def _reset_anova(ds: Dataset) -> str | None:
    from testbed import stats

    a, b = _outages(ds, "links"), _outages(ds, "namespace")
    if len(a) < 2 or len(b) < 2:
        return None
    r = stats.anova([a, b])
    df = r.df if isinstance(r.df, tuple) else (r.df, 0.0)
    return f"F = {r.statistic:.2f}, p = {r.pvalue:.3g} (df {df[0]:g}, {df[1]:g})"


QUOTES: tuple[Quote, ...] = (
    Quote("software reset time, mean of 5", "67.3 s", "Table 7",
          _reset("links", "interfaces down and up")),
    Quote("hardware reset time, mean of 5", "66.86 s", "Table 7",
          _reset("namespace", "namespace destroyed and rebuilt")),
    Quote("one-way ANOVA, reset mode", "F = 2.29, p = 0.1684 (df 1, 8)", "Table 8", _reset_anova),
    Quote("inter-packet delay, 1518 B at 10 Mbit/s", "1.2 ms", "sec. 4.1", _ipd(10e6)),
    Quote("inter-packet delay, 1518 B at 95 Mbit/s", "0.12 ms", "sec. 4.1", _ipd(95e6)),
    Quote("max traffic drop 1518 → 1522 B, 100/0 and 0/100", "5.31 % and 33.33 %",
          "sec. 4.1, Fig. 3"),
    Quote("IPv4 vs IPv6 CPU cost (below 95 % CPU)", "≈ 10 % (9.84 %)", "sec. 4.1, Fig. 7"),
)


TABLE_7 = {"links": (67.5, 67.8, 66.9, 67.5, 66.8),  # software reset (s), Table 7
           "namespace": (66.3, 67.2, 67.4, 66.5, 67.0)}  # hardware reset (s)


def printed() -> list[TrialRow]:
    """Table 7's reset times (kind reset; the paper's software reset as "links", hardware as
    "namespace") and sec. 4.1's inter-packet delays for 1518-byte frames (kind receiver). The
    paper prints its traffic and CPU as figures only: no trials are made up for them."""
    out = [printed_trial("dobrinov-2016", "reset", {"method": m}, {
        "outage_mean_ms": 1000 * statistics.fmean(v)}, {"outages_ms": [1000 * x for x in v]})
        for m, v in TABLE_7.items()]
    out += [printed_trial("dobrinov-2016", "receiver", {
        "ip": ip, "rate": rate, "frame_size": 1518}, {"ipd_mean_us": us}) for ip in (4, 6)
            for rate, us in (("10mbit", 1200.0), ("95mbit", 120.0))]
    return out


PAPER = Paper(
    id='dobrinov-2016',
    title="Dobrinov et al. 2016: Router performance with IPv4/IPv6 traffic",
    citation=(
        "N. Dobrinov, L. Parra, L. Garcia, O. Romero: \"Comparative Study of a Router "
        "Performance with IPv4 and IPv6 Traffic\", Network Protocols and Algorithms 8(3), "
        "2016, doi:10.5296/npa.v8i3.10190"),
    experiments=('dobrinov-2016', BUDGET),
    claims=CLAIMS,
    variants=(
        Variant("CPU-budgeted router (10 % of a CPU; virtual clock)", BUDGET,
                {"topology.budget": "0.1"}),
        Variant("the same router unlimited (virtual clock)", BUDGET,
                {"topology.budget": "none"})),
    figures=dobrinov_figures,
    quotes=QUOTES,
    printed=printed,
    order=4,
)
