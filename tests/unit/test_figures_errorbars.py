"""Error bars of categorical figures: a mean a rounding step outside its values still draws."""

from __future__ import annotations

from pathlib import Path

from testbed.report import figures


def _row(series: str, x: int, mean: float, lo: float, hi: float) -> figures.Row:
    return figures.Row(series, x, 3, mean, lo, hi, lo, hi, "host")


def test_a_mean_one_rounding_step_below_its_minimum_draws(tmp_path: Path) -> None:
    # the values of a full gometz-2015 run: three equal throughputs whose mean is 1 ulp low
    rows = [_row("IPv4", 1280, 974.4923076923075, 974.4923076923076, 974.4923076923076),
            _row("IPv6", 1280, 958.7999999999998, 958.8, 958.8)]
    assert rows[0].mean < rows[0].min
    for style in ("minmeanmax", "bars"):
        fig = figures.Figure(f"t-{style}", "p", "t", "frame", "Mbit/s", style, rows)
        figures.draw(fig, tmp_path)
        assert (tmp_path / f"t-{style}.png").stat().st_size > 0


def test_error_bars_are_never_negative_and_keep_real_spans() -> None:
    rows = [_row("a", 1, 10.0, 8.0, 13.0), _row("a", 2, 5.0 - 1e-13, 5.0, 5.0)]
    below, above = figures.error_bars(rows, lambda r: (r.min, r.max))
    assert below == [2.0, 0.0] and above[0] == 3.0 and above[1] > 0
