"""Statistics of trial groups: summaries with confidence intervals, Welch t-test, one-way ANOVA."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

DEFAULT_PERCENTILES: tuple[float, ...] = (1.0, 5.0, 25.0, 75.0, 95.0, 99.0, 99.9)


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one group of values."""

    n: int
    mean: float
    stdev: float  # sample standard deviation (ddof=1); 0 for n = 1
    min: float
    max: float
    median: float
    ci95_low: float  # Student-t 95% confidence interval of the mean (equal to mean for n = 1)
    ci95_high: float
    percentiles: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe(values: Sequence[float], percentiles: Sequence[float] = DEFAULT_PERCENTILES
             ) -> Summary:
    """n, mean, stdev, min, max, median, 95% CI of the mean, and percentiles of `values`."""
    a = np.asarray(values, dtype=float)
    a = a[~np.isnan(a)]
    n = int(a.size)
    if n == 0:
        raise ValueError("cannot describe an empty group")
    mean = float(a.mean())
    sd = float(a.std(ddof=1)) if n > 1 else 0.0
    half = float(sps.t.ppf(0.975, n - 1)) * sd / math.sqrt(n) if n > 1 and sd > 0 else 0.0
    pct = {f"p{q:g}": float(np.percentile(a, q)) for q in percentiles}
    return Summary(
        n=n, mean=mean, stdev=sd, min=float(a.min()), max=float(a.max()),
        median=float(np.median(a)), ci95_low=mean - half, ci95_high=mean + half, percentiles=pct,
    )


@dataclass(frozen=True)
class TestResult:
    """A hypothesis test: statistic, p-value, and what was tested."""

    test: str
    statistic: float
    pvalue: float
    df: float | tuple[float, float]
    significant_at_0_05: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def welch_t(a: Sequence[float], b: Sequence[float]) -> TestResult:
    """Welch's two-sample t-test (unequal variances) of the means of `a` and `b`."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size < 2 or y.size < 2:
        raise ValueError("Welch's t-test needs at least two values in each group")
    res = sps.ttest_ind(x, y, equal_var=False)
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    denom = (vx**2 / (x.size - 1) + vy**2 / (y.size - 1))
    df = float((vx + vy) ** 2 / denom) if denom > 0 else float("nan")
    p = float(res.pvalue)
    return TestResult("welch_t", float(res.statistic), p, df, bool(p < 0.05))


def anova(groups: Sequence[Sequence[float]]) -> TestResult:
    """One-way ANOVA across two or more groups."""
    arrays = [np.asarray(g, dtype=float) for g in groups]
    if len(arrays) < 2 or any(g.size < 1 for g in arrays):
        raise ValueError("ANOVA needs at least two non-empty groups")
    res = sps.f_oneway(*arrays)
    k = len(arrays)
    n = sum(int(g.size) for g in arrays)
    p = float(res.pvalue)
    return TestResult("anova_oneway", float(res.statistic), p, (float(k - 1), float(n - k)),
                      bool(p < 0.05))
