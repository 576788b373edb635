"""Statistics of groups: summaries, Welch t-test, ANOVA."""

from __future__ import annotations

import math

import pytest

from testbed import stats


def test_describe_known_values() -> None:
    s = stats.describe([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s.n == 5 and s.mean == 3.0 and s.min == 1.0 and s.max == 5.0 and s.median == 3.0
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    # t(0.975, 4) = 2.776
    half = 2.7764451 * math.sqrt(2.5) / math.sqrt(5)
    assert s.ci95_low == pytest.approx(3.0 - half, rel=1e-6)
    assert s.ci95_high == pytest.approx(3.0 + half, rel=1e-6)
    assert s.percentiles["p25"] == 2.0 and s.percentiles["p99.9"] == pytest.approx(4.996)
    assert s.to_dict()["n"] == 5


def test_describe_single_value_and_nan() -> None:
    s = stats.describe([7.0, float("nan")])
    assert s.n == 1 and s.stdev == 0 and s.ci95_low == s.ci95_high == 7.0
    with pytest.raises(ValueError):
        stats.describe([])


def test_welch_detects_difference() -> None:
    a = [10.0, 10.1, 9.9, 10.05, 9.95]
    b = [11.0, 11.2, 10.8, 11.1, 10.9]
    r = stats.welch_t(a, b)
    assert r.test == "welch_t" and r.pvalue < 0.001 and r.significant_at_0_05
    assert r.statistic < 0
    same = stats.welch_t(a, list(reversed(a)))
    assert same.pvalue == pytest.approx(1.0)
    with pytest.raises(ValueError):
        stats.welch_t([1.0], [2.0, 3.0])


def test_welch_df_matches_welch_satterthwaite() -> None:
    r = stats.welch_t([1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0])
    va, vb = 1.0 / 3, (20.0 / 3) / 4
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    assert r.df == pytest.approx(df)


def test_anova() -> None:
    r = stats.anova([[1.0, 2.0, 3.0], [1.5, 2.5, 3.5], [10.0, 11.0, 12.0]])
    assert r.pvalue < 0.001 and r.df == (2.0, 6.0)
    assert not stats.anova([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]).significant_at_0_05
    with pytest.raises(ValueError):
        stats.anova([[1.0]])
