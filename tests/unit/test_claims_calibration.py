"""Calibration on the papers' own numbers: every claim whose paper prints numbers it reads holds
on them (Paper.printed), unless the paper contradicts itself, which CONTRADICTS then quotes."""

from __future__ import annotations

import itertools

import pytest

from testbed import papers
from testbed.report import claims
from testbed.report.claims import evaluate, printed_trial
from testbed.results import TrialRow

# claim id -> where the paper contradicts itself (none found so far)
CONTRADICTS: dict[str, str] = {}

PRINTED = [p.id for p in papers.all_papers() if p.printed is not None]


@pytest.mark.parametrize("paper", PRINTED)
def test_every_claim_holds_on_the_papers_own_numbers(paper: str) -> None:
    judged = [r for r in evaluate(paper, []) if r.on_paper is not None]
    assert judged, f"{paper} prints numbers, yet no claim reads them"
    for r in judged:
        assert r.on_paper is not None
        if r.claim_id in CONTRADICTS:
            continue
        assert r.on_paper.status == "holds", (r.claim_id, r.on_paper)


def test_which_claims_are_judged_on_the_papers_numbers() -> None:
    on = {r.claim_id for p in PRINTED for r in evaluate(p, []) if r.on_paper is not None}
    assert {f"gm:{i}" for i in range(1, 10)} <= on  # Tables I-VI
    assert {"ze:6", "ze:7", "ze:8", "do:8", "do:9"} <= on


def test_gm1_gm8_read_the_papers_own_exceptions() -> None:
    # the paper's Tables III-VI: IPv6 above IPv4 in 58 of 60 OWD cells, not every one
    res = {r.claim_id: r for r in evaluate("gamess-morales", [])}
    gm8 = res["gm:8"].on_paper
    assert gm8 is not None and "58/60 cells" in gm8.evidence
    gm6 = res["gm:6"].on_paper
    assert gm6 is not None and "138/144 cells" in gm6.evidence


def test_do2_far_more_on_the_papers_own_drops() -> None:
    # Fig. 3's drop from 1518 to 1522 B: 5.31 % pure IPv4, 33.33 % pure IPv6 (sec. 4.1); with
    # an IPv6 drop only as large as the IPv4 one, "far more" does not hold
    def rows(v6_drop: float) -> list[TrialRow]:
        return [printed_trial("dobrinov-2016", "maxtraffic",
                              {"ratio": ratio, "frame_size": size},
                              {"max_received_bps": 100e6 * (1 - drop if size == 1522 else 1),
                               "router_cpu_pct": 5.0})
                for (ratio, drop), size in itertools.product(
                    (("100/0", 0.0531), ("0/100", v6_drop)), (1518, 1522))]

    do2 = next(c for c in papers.get("dobrinov-2016").claims if c.id == "do:2")
    assert do2.check(claims.Data(rows(0.3333), exact=True)).status == "holds"
    assert do2.check(claims.Data(rows(0.06), exact=True)).status == "does not hold"
