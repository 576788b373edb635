"""Null-data calibration: for every claim that asserts an effect, synthetic data without it
(200 seeds) makes it hold at most 5 % of the time, and data with the paper's effect makes it
hold (tests/unit/nulldata.py has the generators; benchmarks/null_data.py prints the table)."""

from __future__ import annotations

import pytest

from testbed import papers
from tests.unit import nulldata


def test_every_effect_claim_has_a_generator_or_is_listed() -> None:
    effect = {c.id for p in papers.all_papers() for c in p.claims if c.effect}
    assert effect == set(nulldata.GENERATORS)


@pytest.mark.parametrize("cid", sorted(nulldata.GENERATORS))
def test_false_holds_at_most_5_percent_and_the_papers_effect_holds(cid: str) -> None:
    assert nulldata.hold_rate(cid, 200, effect=False) <= 0.05
    assert nulldata.hold_rate(cid, 20, effect=True) >= 0.9
