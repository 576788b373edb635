"""One grammar for rates, durations, sizes and percentages, whoever reads them."""

from __future__ import annotations

import pytest

from testbed import topology_values, units
from testbed.errors import SpecError


@pytest.mark.parametrize(
    ("value", "bps"),
    [
        (10, 10e6),
        (2.5, 2.5e6),
        ("100", 100e6),
        ("10mbit", 10e6),
        ("10 Mbit/s", 10e6),
        ("10mbps", 10e6),
        ("10Mb/s", 10e6),
        ("500kbit", 500e3),
        ("1.5gbit", 1.5e9),
        ("1 Gbit/s", 1e9),
        ("fastethernet", 100e6),
        ("Fast-Ethernet", 100e6),
        ("gigabit", 1e9),
    ],
)
def test_every_reader_agrees_on_a_rate(value: object, bps: float) -> None:
    assert units.rate(value) == pytest.approx(bps)
    assert units.in_spec(units.rate, value, "t.toml", "links[0].rate") == pytest.approx(bps)
    assert units.rate(str(value), unlimited=False) == pytest.approx(bps)
    assert units.rate(value, zero=True) == pytest.approx(bps)


@pytest.mark.parametrize("value", ["", "fast", "10m", "-5", 0, -1, True, "abc", "1e6", 1e6, "0bit"])
def test_bad_rates_are_refused_by_every_reader(value: object) -> None:
    with pytest.raises(units.UnitError):
        units.rate(value)
    with pytest.raises(SpecError) as err:
        units.in_spec(units.rate, value, "t.toml", "links[0].rate")
    assert "links[0].rate" in str(err.value) and "t.toml" in str(err.value)
    with pytest.raises(ValueError):
        units.rate(str(value), unlimited=False)


def test_unlimited_only_where_allowed() -> None:
    assert units.rate("unlimited") is None
    assert units.rate("max") is None
    with pytest.raises(units.UnitError, match="a limit is needed"):
        units.rate("unlimited", unlimited=False)


@pytest.mark.parametrize("value", [None, 0, "0", "unlimited", "max"])
def test_a_measurements_rate_may_be_zero_or_unset_for_unlimited(value: object) -> None:
    assert units.rate(value, zero=True) is None
    if value in (None, 0, "0"):
        with pytest.raises(units.UnitError):
            units.rate(value)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(5, 5e-3), ("5ms", 5e-3), ("250us", 250e-6), ("250 µs", 250e-6), ("1s", 1.0), (0, 0.0)],
)
def test_durations(value: object, seconds: float) -> None:
    assert units.duration(value) == pytest.approx(seconds)
    assert topology_values.parse_duration(value, "t.toml", "k") == pytest.approx(seconds)


def test_duration_default_unit_and_range() -> None:
    assert units.duration(2, default_unit="s") == 2.0
    for bad in ("5 parsecs", -1, "61s", "1ns", True):
        with pytest.raises(units.UnitError):
            units.duration(bad)
    with pytest.raises(units.UnitError):
        units.duration(0, zero=False)


@pytest.mark.parametrize(
    ("value", "n"), [(1500, 1500), ("1500", 1500), ("1500B", 1500), ("9kB", 9000), ("64KiB", 65536)]
)
def test_sizes(value: object, n: int) -> None:
    assert units.size(value, hi=1 << 20) == n


def test_bad_sizes() -> None:
    for bad in (0, 70000, "1.5", 1.5, "12 parsecs", True):
        with pytest.raises(units.UnitError):
            units.size(bad)


def test_percent_and_format() -> None:
    assert units.percent("1%") == 1.0
    assert units.percent(50) == 50.0
    with pytest.raises(units.UnitError):
        units.percent(101)
    assert units.format_rate(10e6) == "10 Mbit/s"
    assert units.format_rate(1.5e9) == "1.5 Gbit/s"
    assert units.format_rate(None) == "unlimited"
