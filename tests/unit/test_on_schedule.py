"""The virtual clock's rerun of a trial whose paced sender fell behind (measure.on_schedule)."""

from __future__ import annotations

from typing import Any

from testbed.measure import on_schedule


def _runs(lateness: list[float]) -> tuple[Any, list[int]]:
    calls: list[int] = []

    def run() -> tuple[dict[str, float], dict[str, Any]]:
        calls.append(1)
        i = len(calls) - 1
        return {"cost": 10.0 + i}, {"late": lateness[i]}
    return run, calls


def _behind(got: tuple[dict[str, float], dict[str, Any]]) -> float:
    return float(got[1]["late"])


def test_an_attempt_on_schedule_is_kept_at_once() -> None:
    run, calls = _runs([0.0002])
    m, doc = on_schedule.least_late(run, _behind)
    assert len(calls) == 1 and m["cost"] == 10.0
    assert doc["behind_schedule"] == 0.0002 and doc["earlier_attempts"] == []


def test_a_held_up_sender_is_measured_again_and_the_least_late_attempt_kept() -> None:
    run, calls = _runs([0.0073, 0.0301, 0.0005])
    m, doc = on_schedule.least_late(run, _behind)
    assert len(calls) == 3 and m["cost"] == 12.0
    assert [a["behind_schedule"] for a in doc["earlier_attempts"]] == [0.0073, 0.0301]
    assert doc["earlier_attempts"][0]["metrics"] == {"cost": 10.0}


def test_attempts_are_bounded_and_the_least_late_kept_when_none_is_on_time() -> None:
    run, calls = _runs([0.05, 0.02, 0.04, 0.0])
    m, doc = on_schedule.least_late(run, _behind)
    assert len(calls) == on_schedule.ATTEMPTS == 3
    assert m["cost"] == 11.0 and doc["behind_schedule"] == 0.02


def test_two_attempts_that_agree_on_their_lateness_end_the_rerun() -> None:
    """A sender beside a router at its CPU budget is 2.4 % short every time: that lateness is
    the trial's own, and a third attempt would not change it."""
    run, calls = _runs([0.0241, 0.0239, 0.0])
    m, doc = on_schedule.least_late(run, _behind)
    assert len(calls) == 2 and m["cost"] == 11.0 and doc["behind_schedule"] == 0.0239


def test_flows_short_is_the_largest_shortfall_of_any_flow() -> None:
    flows = [{"offered_pps": 10416.7, "sender_pps": 10416.2},
             {"offered_pps": 10416.7, "sender_pps": 10340.7}, {"offered_pps": 0.0}]
    assert abs(on_schedule.flows_short(flows) - (1 - 10340.7 / 10416.7)) < 1e-12
    assert on_schedule.flows_short([{"offered_pps": 100.0, "sender_pps": 101.0}]) == 0.0
    assert on_schedule.flows_short(None) == 0.0
