"""Figures: the `Figure` and `Row` a paper module builds (each with the table of numbers behind
it: n, 95 % CI, model), the helpers to build them from grouped statistics, and drawing."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import units
from testbed.report.data import Dataset, Stat, Value, group

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


def num(v: Any) -> float:
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
                       s.env.label, model(series(s), xv) if model else None, stat_key(s)))
    out.sort(key=lambda r: (r.series, num(r.x) if not isinstance(r.x, str) else 0.0))
    return out


def select(ds: Dataset, experiment: str, measurements: Iterable[str] | None = None,
         kinds: Iterable[str] | None = None) -> list[Any]:
    ms = set(measurements) if measurements is not None else None
    ks = set(kinds) if kinds is not None else None
    return [t for t in ds.trials if t.experiment == experiment
            and (ms is None or t.measurement in ms) and (ks is None or t.kind in ks)]


def grouped(ds: Dataset, trials: list[Any], value: Value, name: str) -> list[Stat]:
    return group(ds, trials, value, name)


def point_key(key: str) -> Callable[[Stat], Any]:
    def get(s: Stat) -> Any:
        return s.point.get(key)

    return get


def const(value: Any) -> Callable[[Stat], Any]:
    def get(s: Stat) -> Any:
        return value

    return get


def stat_key(s: Stat) -> tuple[str, str, Any]:
    return (s.measurement, str(sorted(s.point.items())), s.env)


def add_extra(ds: Dataset, rows: list[Row], trials: list[Any], value: Value, column: str
              ) -> None:
    """Add the mean of `value` over each row's trials as one more table column."""
    means = {stat_key(s): s.mean for s in group(ds, trials, value, column)}
    for r in rows:
        if r.key in means:
            r.extra[column] = means[r.key]


def size_key(point: dict[str, Any]) -> str | None:
    for k in ("ip_payload", "size", "length", "frame_size"):
        if point.get(k) is not None:
            return k
    return None


SIZE_LABEL = {"ip_payload": "IP payload (bytes)", "size": "UDP/TCP message (bytes)",
              "length": "datagram / write size (bytes)", "frame_size": "Ethernet frame (bytes)"}


# --- drawing -------------------------------------------------------------------------------


def _draw_lines(fig: Figure, ax: Any, series: list[str], color: dict[str, Any],
                colors: list[Any]) -> None:
    for s in series:
        rs = [r for r in fig.rows if r.series == s]
        xs = [num(r.x) for r in rs]
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


def error_bars(rows: Sequence[Row], span: Callable[[Row], tuple[float, float]]
               ) -> list[list[float]]:
    """Matplotlib's yerr (below, above) for each row's mean and its (low, high) span, never
    negative: three equal values can have a mean one rounding step outside them (974.4923076923075
    under a min of …076 in a full gometz-2015 run), which matplotlib refuses."""
    below = [max(0.0, r.mean - span(r)[0]) for r in rows]
    above = [max(0.0, span(r)[1] - r.mean) for r in rows]
    return [below, above]


def _draw_categories(fig: Figure, ax: Any, series: list[str], color: dict[str, Any]) -> None:
    cats: list[Any] = []
    for r in fig.rows:
        if r.x not in cats:
            cats.append(r.x)
    if fig.style == "minmeanmax":
        cats.sort(key=num)
    pos = {c: i for i, c in enumerate(cats)}
    width = 0.8 / max(1, len(series))
    for i, s in enumerate(series):
        rs = [r for r in fig.rows if r.series == s]
        xs = [pos[r.x] - 0.4 + width * (i + 0.5) for r in rs]
        if fig.style == "bars":
            ax.bar(xs, [r.mean for r in rs], width=width * 0.9, color=color[s], label=s,
                   yerr=error_bars(rs, lambda r: (r.ci_low, r.ci_high)), capsize=3)
        else:
            ax.errorbar(xs, [r.mean for r in rs],
                        yerr=error_bars(rs, lambda r: (r.min, r.max)),
                        fmt="o", ms=6, capsize=5, color=color[s], label=f"{s} (min-mean-max)")
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([str(c) for c in cats])


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
        _draw_lines(fig, ax, series, color, colors)
    else:
        _draw_categories(fig, ax, series, color)
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
