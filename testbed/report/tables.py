"""Paper-vs-emulator tables: Gamess & Morales Tables I-VI cell by cell, and the numbers the
other papers quote in their text beside ours."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from testbed import models, results
from testbed.report import papers
from testbed.report.data import Dataset, Stat, group, metric, params_of
from testbed.report.figures import rate_bps, rate_label, rtt_us
from testbed.stats import describe


@dataclass
class Cell:
    """One cell of a paper's table beside ours."""

    table: str
    payload: int
    column: str  # link rate (Tables I-II) or number of routers (Tables III-VI)
    paper: float | int  # as printed (Tables III-VI print whole microseconds)
    model: float
    ours: Stat | None
    unit: str

    @property
    def ours_over_model(self) -> float | None:
        return self.ours.mean / self.model if self.ours and self.model else None

    @property
    def ours_over_paper(self) -> float | None:
        return self.ours.mean / self.paper if self.ours and self.paper else None


@dataclass
class PaperTable:
    id: str
    name: str  # "Table III"
    title: str
    unit: str
    column_name: str
    cells: list[Cell]

    @property
    def measured(self) -> list[Cell]:
        return [c for c in self.cells if c.ours is not None]


def _index(stats: Iterable[Stat], key: Callable[[Stat], tuple[Any, ...]]
           ) -> dict[tuple[Any, ...], list[Stat]]:
    out: dict[tuple[Any, ...], list[Stat]] = {}
    for s in stats:
        out.setdefault(key(s), []).append(s)
    return out


def gamess_tables(ds: Dataset, experiment: str = "gamess-morales") -> list[PaperTable]:
    """Tables I-VI: every printed cell with the model (testbed.models) and ours where measured
    (one cell per environment the data was measured in)."""
    trials = [t for t in ds.trials if t.experiment == experiment]
    tput = group(ds, [t for t in trials if t.kind == "rfc2544"],
                 metric("throughput_bps", 1e-6), "throughput_mbps")
    owd = group(ds, [t for t in trials if t.kind == "pingpong"], metric("owd_mean_us"),
                "owd_mean_us")

    def tkey(s: Stat) -> tuple[Any, ...]:
        return (int(s.point.get("ip", 4)), int(s.point.get("ip_payload") or 0),
                rate_bps(s.point.get("topology.rate")), int(s.point.get("topology.routers", 0)))

    tidx, oidx = _index(tput, tkey), _index(owd, tkey)
    out = []
    for name, ip, table in papers.THROUGHPUT_TABLES:
        cells = []
        for n, row in table.items():
            for rname, (exp, _printed_max) in zip(papers.RATE_NAMES, row, strict=True):
                bps = models.RATES[rname]
                model = models.max_throughput_bps(n, bps, ip) / 1e6
                found: list[Stat | None] = list(tidx.get((ip, n, bps, 0), [])) or [None]
                for s in found:
                    cells.append(Cell(name, n, rate_label(rname), exp, model, s, "Mbit/s"))
        out.append(PaperTable(name.lower().replace(" ", "-"), name, f"{name}: zero-loss UDP "
                              f"throughput, IPv{ip}, point-to-point (Mbit/s of IP payload)",
                              "Mbit/s", "link", cells))
    for name, ip, rname, otable in papers.OWD_TABLES:
        bps = models.RATES[rname]
        cells = []
        for n, (measured, _model_row) in otable.items():
            for routers, exp in enumerate(measured):
                model = models.owd(n, bps, ip, routers, papers.PROPAGATION_S) * 1e6
                ofound: list[Stat | None] = list(oidx.get((ip, n, bps, routers), [])) or [None]
                for s in ofound:
                    cells.append(Cell(name, n, str(routers), exp, model, s, "µs"))
        out.append(PaperTable(name.lower().replace(" ", "-"), name,
                              f"{name}: one-way delay, IPv{ip}, {rate_label(rname)}, "
                              "0-5 routers (µs)", "µs", "routers", cells))
    return out


# --- numbers quoted in the text ---------------------------------------------------------------


def _values(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
            where: Callable[[dict[str, Any]], bool]) -> dict[str, list[float]]:
    """Values per environment label from the successful trials of `experiment`."""
    out: dict[str, list[float]] = {}
    for t in ds.trials:
        if t.experiment != experiment or t.status != "ok" or not where(params_of(t)):
            continue
        v = value(t)
        if v is not None:
            out.setdefault(ds.env(t).label, []).append(v)
    return out


def _fmt_env(per_env: dict[str, str]) -> str | None:
    if not per_env:
        return None
    if len(per_env) == 1:
        return next(iter(per_env.values()))
    return "; ".join(f"{v} [{k}]" for k, v in per_env.items())


def _mean_text(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
               where: Callable[[dict[str, Any]], bool], fmt: str) -> str | None:
    per = {}
    for env, vals in _values(ds, experiment, value, where).items():
        s = describe(vals)
        ci = f" ± {(s.ci95_high - s.mean):{fmt}}" if s.n > 1 else ""
        per[env] = f"{s.mean:{fmt}}{ci} (n = {s.n})"
    return _fmt_env(per)


def _change(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
            where: Callable[[dict[str, Any]], bool]) -> str | None:
    """IPv6 vs IPv4 in percent of IPv4, per environment."""
    v4 = _values(ds, experiment, value, lambda p: where(p) and int(p.get("ip", 4)) == 4)
    v6 = _values(ds, experiment, value, lambda p: where(p) and int(p.get("ip", 4)) == 6)
    per = {}
    for env in v4.keys() & v6.keys():
        a, b = describe(v4[env]), describe(v6[env])
        per[env] = (f"{100.0 * (b.mean - a.mean) / a.mean:+.1f} % "
                    f"(IPv4 {a.mean:.4g}, IPv6 {b.mean:.4g}; n = {a.n}, {b.n})")
    return _fmt_env(per)


def _is_rate(bps: float) -> Callable[[dict[str, Any]], bool]:
    return lambda p: rate_bps(p.get("rate")) == bps


def _ip(v: int) -> Callable[[dict[str, Any]], bool]:
    return lambda p: int(p.get("ip", 4)) == v


Where = Callable[[dict[str, Any]], bool]


def _proto(name: str) -> Where:
    return lambda p: p.get("protocol") == name


def _both(a: Where, b: Where) -> Where:
    return lambda p: a(p) and b(p)


def _any(p: dict[str, Any]) -> bool:
    return True


def _spread(ds: Dataset) -> str | None:
    per = {}
    for env, vals in _values(ds, "gometz-2015", metric("throughput_bps", 1e-6),
                             lambda p: int(p.get("ip", 4)) == 6
                             and p.get("frame_size") == 1518).items():
        per[env] = f"{max(vals) - min(vals):.2f} Mbit/s (n = {len(vals)})"
    return _fmt_env(per)


def _loss(ds: Dataset) -> str | None:
    per: dict[str, list[float]] = {}
    for t in ds.trials:
        if t.experiment != "gometz-2015" or t.status != "ok":
            continue
        fl = t.result.get("frame_loss") if isinstance(t.result, dict) else None
        if isinstance(fl, list):
            per.setdefault(ds.env(t).label, []).extend(
                float(p.get("loss_percent", 0.0)) for p in fl if isinstance(p, dict))
    return _fmt_env({env: f"max {max(v):.2f} % over {len(v)} frame-loss trials"
                     for env, v in per.items() if v})


def _range_text(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
                where: Where, size_key: str, unit: str) -> str | None:
    """Lowest and highest per-size mean, per environment ("at all sizes" claims)."""
    per = {}
    for env in _values(ds, experiment, value, where):
        sizes: dict[Any, list[float]] = {}
        for t in ds.trials:
            p = params_of(t)
            if (t.experiment == experiment and t.status == "ok" and where(p)
                    and ds.env(t).label == env and (v := value(t)) is not None):
                sizes.setdefault(p.get(size_key), []).append(v)
        means = [sum(v) / len(v) for v in sizes.values()]
        per[env] = (f"{min(means):.1f} to {max(means):.1f} {unit} over {len(means)} sizes "
                    f"(n = {sum(len(v) for v in sizes.values())})")
    return _fmt_env(per)


def _ipd(bps: float) -> Callable[[Dataset], str | None]:
    def get(ds: Dataset) -> str | None:
        parts = []
        for v in (4, 6):
            t = _mean_text(ds, "dobrinov-2016", metric("ipd_mean_us", 1e-3),
                           _both(_is_rate(bps), _ip(v)), ".3f")
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


def _per(values: Iterable[tuple[str, str | None]]) -> str | None:
    return " / ".join(f"{k}: {v}" for k, v in values if v) or None


QUOTE_VALUES: dict[str, Callable[[Dataset], str | None]] = {
    "do_reset_sw": _reset("links", "interfaces down and up"),
    "do_reset_hw": _reset("namespace", "namespace destroyed and rebuilt"),
    "do_reset_anova": _reset_anova,
    "do_ipd_10": _ipd(10e6),
    "do_ipd_95": _ipd(95e6),
    "ze_cps_4": lambda ds: _mean_text(ds, "zeadally-2004", metric("connections_per_s"), _ip(4),
                                      ".0f"),
    "ze_cps_6": lambda ds: _mean_text(ds, "zeadally-2004", metric("connections_per_s"), _ip(6),
                                      ".0f"),
    "ze_cps_drop": lambda ds: _change(ds, "zeadally-2004", metric("connections_per_s"), _any),
    "ze_socket": lambda ds: _change(ds, "zeadally-2004", metric("tcp_socket_create_us"), _any),
    "ze_connect": lambda ds: _change(ds, "zeadally-2004", metric("tcp_connect_us"), _any),
    "ze_tcp": lambda ds: _per(
        (f"IPv{v}", _range_text(ds, "zeadally-2004", metric("receiver_bps", 1e-6),
                                _both(_proto("tcp"), _ip(v)), "length", "Mbit/s"))
        for v in (4, 6)),
    "ze_rtt": lambda ds: _per(
        (pr.upper(), _change(ds, "zeadally-2004", rtt_us, _proto(pr)))
        for pr in ("tcp", "udp")),
    "go_loss": _loss,
    "go_spread": _spread,
}


@dataclass
class QuoteRow:
    what: str
    paper_value: str
    where: str
    ours: str  # "not measured" when the data has nothing for it


def quote_rows(ds: Dataset, paper: str) -> list[QuoteRow]:
    out = []
    for q in papers.QUOTES:
        if q.paper != paper:
            continue
        ours = None
        if q.ours is not None:
            ours = QUOTE_VALUES[q.ours](ds)
        out.append(QuoteRow(q.what, q.value, q.where,
                            ours or ("not measured" if q.ours else "no such measurement here")))
    return out
