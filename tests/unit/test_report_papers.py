"""The papers' printed numbers in testbed.papers.gamess_morales against the model
(testbed.models) and against the cells tests/unit/test_models.py checks; the paper registry."""

from __future__ import annotations

import pytest

from testbed import models
from testbed import papers as registry
from testbed.papers import gamess_morales as papers

RATES = [models.RATES[r] for r in papers.RATE_NAMES]


@pytest.mark.parametrize(("ip", "table"), [(4, papers.TABLE_I), (6, papers.TABLE_II)])
def test_throughput_max_columns_are_the_model(ip: int, table: dict[int, tuple[
        tuple[float, float], ...]]) -> None:
    assert len(table) == 10
    for n, row in table.items():
        for bps, (_exp, printed_max) in zip(RATES, row, strict=True):
            assert round(models.max_throughput_bps(n, bps, ip) / 1e6, 2) == printed_max, (n, bps)


@pytest.mark.parametrize(("name", "ip", "rate", "table"), papers.OWD_TABLES)
def test_owd_model_rows_are_the_model(name: str, ip: int, rate: str,
                                      table: dict[int, tuple[tuple[int, ...], ...]]) -> None:
    assert len(table) == 6
    for n, (_measured, model_row) in table.items():
        for routers, printed in enumerate(model_row):
            us = models.owd(n, models.RATES[rate], ip, routers, papers.PROPAGATION_S) * 1e6
            assert round(us) == printed, (name, n, routers)


def test_model_rows_match_test_models() -> None:
    test_models = pytest.importorskip("tests.unit.test_models")
    for ours, theirs in ((papers.TABLE_III, test_models.TABLE_III),
                         (papers.TABLE_IV, test_models.TABLE_IV),
                         (papers.TABLE_V, test_models.TABLE_V),
                         (papers.TABLE_VI, test_models.TABLE_VI)):
        assert {n: model for n, (_m, model) in ours.items()} == theirs
    for ours_t, theirs_t in ((papers.TABLE_I, test_models.TABLE_I),
                             (papers.TABLE_II, test_models.TABLE_II)):
        assert {n: tuple(mx for _e, mx in row) for n, row in ours_t.items()} == theirs_t


@pytest.mark.parametrize(("table", "n", "col", "value"), [
    (papers.TABLE_I, 10, 2, 30.70),      # the GigabitEthernet small-payload shortfall
    (papers.TABLE_I, 2960, 0, 9.59),
    (papers.TABLE_II, 10, 0, 1.09),
    (papers.TABLE_II, 1461, 2, 894.25),
])
def test_measured_throughput_cells(table: dict[int, tuple[tuple[float, float], ...]], n: int,
                                   col: int, value: float) -> None:
    assert table[n][col][0] == value


@pytest.mark.parametrize(("table", "n", "routers", "value"), [
    (papers.TABLE_III, 10, 0, 104),
    (papers.TABLE_IV, 400, 3, 289),      # printed out of line with its row; kept as printed
    (papers.TABLE_V, 100, 5, 1002),
    (papers.TABLE_VI, 1000, 2, 317),
])
def test_measured_owd_cells(table: dict[int, tuple[tuple[int, ...], ...]], n: int,
                            routers: int, value: int) -> None:
    assert table[n][0][routers] == value


def test_every_paper_has_experiments_title_and_citation() -> None:
    for p in registry.all_papers():
        assert p.experiments and p.title and p.citation and p.claims
        assert all(q.where for q in p.quotes)
    p = registry.paper_of("transition")
    assert p is not None and p.id == "quintero-2016"
    assert registry.paper_of("smoke") is None
