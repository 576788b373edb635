"""Paper-vs-emulator tables: a paper's printed cells beside ours (`Cell`, `PaperTable`), the
numbers a paper quotes in its text beside ours (`Quote`, `QuoteRow`), and the helpers that
compute "ours" per environment (never pooling two)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from testbed import results
from testbed.report.data import Dataset, Stat, params_of
from testbed.report.figures import rate_bps


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


def index_by(stats: Iterable[Stat], key: Callable[[Stat], tuple[Any, ...]]
           ) -> dict[tuple[Any, ...], list[Stat]]:
    out: dict[tuple[Any, ...], list[Stat]] = {}
    for s in stats:
        out.setdefault(key(s), []).append(s)
    return out


# --- numbers quoted in the text ---------------------------------------------------------------


def values_per_env(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
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


def fmt_env(per_env: dict[str, str]) -> str | None:
    if not per_env:
        return None
    if len(per_env) == 1:
        return next(iter(per_env.values()))
    return "; ".join(f"{v} [{k}]" for k, v in per_env.items())


def mean_text(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
               where: Callable[[dict[str, Any]], bool], fmt: str) -> str | None:
    from testbed.stats import describe

    per = {}
    for env, vals in values_per_env(ds, experiment, value, where).items():
        s = describe(vals)
        ci = f" ± {(s.ci95_high - s.mean):{fmt}}" if s.n > 1 else ""
        per[env] = f"{s.mean:{fmt}}{ci} (n = {s.n})"
    return fmt_env(per)


def change(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
            where: Callable[[dict[str, Any]], bool]) -> str | None:
    """IPv6 vs IPv4 in percent of IPv4, per environment."""
    v4 = values_per_env(ds, experiment, value, lambda p: where(p) and int(p.get("ip", 4)) == 4)
    v6 = values_per_env(ds, experiment, value, lambda p: where(p) and int(p.get("ip", 4)) == 6)
    from testbed.stats import describe

    per = {}
    for env in v4.keys() & v6.keys():
        a, b = describe(v4[env]), describe(v6[env])
        per[env] = (f"{100.0 * (b.mean - a.mean) / a.mean:+.1f} % "
                    f"(IPv4 {a.mean:.4g}, IPv6 {b.mean:.4g}; n = {a.n}, {b.n})")
    return fmt_env(per)


def is_rate(bps: float) -> Callable[[dict[str, Any]], bool]:
    return lambda p: rate_bps(p.get("rate")) == bps


def ip_is(v: int) -> Callable[[dict[str, Any]], bool]:
    return lambda p: int(p.get("ip", 4)) == v


Where = Callable[[dict[str, Any]], bool]


def proto_is(name: str) -> Where:
    return lambda p: p.get("protocol") == name


def both(a: Where, b: Where) -> Where:
    return lambda p: a(p) and b(p)


def any_point(p: dict[str, Any]) -> bool:
    return True


def range_text(ds: Dataset, experiment: str, value: Callable[[results.TrialRow], float | None],
                where: Where, size_key: str, unit: str) -> str | None:
    """Lowest and highest per-size mean, per environment ("at all sizes" claims)."""
    per = {}
    for env in values_per_env(ds, experiment, value, where):
        sizes: dict[Any, list[float]] = {}
        for t in ds.trials:
            p = params_of(t)
            if (t.experiment == experiment and t.status == "ok" and where(p)
                    and ds.env(t).label == env and (v := value(t)) is not None):
                sizes.setdefault(p.get(size_key), []).append(v)
        means = [sum(v) / len(v) for v in sizes.values()]
        per[env] = (f"{min(means):.1f} to {max(means):.1f} {unit} over {len(means)} sizes "
                    f"(n = {sum(len(v) for v in sizes.values())})")
    return fmt_env(per)


def per_label(values: Iterable[tuple[str, str | None]]) -> str | None:
    return " / ".join(f"{k}: {v}" for k, v in values if v) or None



@dataclass(frozen=True)
class Quote:
    """One number a paper prints, where it prints it, and how to find ours (None: nothing here
    measures it)."""

    what: str
    value: str  # as the paper states it
    where: str  # section / table in the paper
    ours: Callable[[Dataset], str | None] | None = None


@dataclass
class QuoteRow:
    what: str
    paper_value: str
    where: str
    ours: str  # "not measured" when the data has nothing for it


def quote_rows(ds: Dataset, quotes: Iterable[Quote]) -> list[QuoteRow]:
    out = []
    for q in quotes:
        ours = q.ours(ds) if q.ours is not None else None
        out.append(QuoteRow(q.what, q.value, q.where,
                            ours or ("not measured" if q.ours else "no such measurement here")))
    return out
