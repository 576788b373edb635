"""Sequential repetitions: the precision rule, its checks, and the runs that stop a cell early
(alone, resumed, and as a parallel run's coordinator counts them)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from testbed import results, sequential
from testbed.errors import CommandError, SpecError
from testbed.experiment import run_experiment
from testbed.experiment_spec import Experiment, experiment_from_dict, plan
from testbed.measure.kinds import Measured
from tests.unit.test_experiment import fake_open, quiet

RULE = {"metric": "owd_mean_us", "relative": 0.01}


@pytest.fixture(autouse=True)
def quiet_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests judge the rule, not this machine: the fidelity record of each fake trial
    says "not applicable", as on the virtual clock, so a busy host running the suite (a guest
    beside it) does not mark them suspect and leave them out of the rule's count."""
    from testbed import experiment, fidelity

    monkeypatch.setattr(experiment.HostWatch, "record",
                        lambda self, result: fidelity.not_applicable("real"))


def spec(reps: int = 6, rule: Any = None) -> Experiment:
    """One pingpong measurement on a chain, two cells (sizes 10 and 100), `reps` each."""
    m: dict[str, Any] = {"kind": "pingpong", "size": [10, 100], "count": 50}
    if rule is not None:
        m["precision"] = dict(rule) if isinstance(rule, Mapping) else rule
    raw = {"topology": "chain", "repetitions": reps, "params": {"rate": "ethernet"},
           "measurements": {"owd": m}}
    return experiment_from_dict(raw, file="x.toml")


def steady_or_noisy(tb: Any, t: Any, ctx: Any) -> Measured:
    """Size 10: 50 µs every time (a cell whose trials agree); size 100: 50 or 100 µs in turn."""
    noisy = t.params["size"] != 10 and t.repetition % 2 == 0
    v = 100.0 if noisy else 50.0
    return Measured({"owd_mean_us": v}, {})


def test_the_rule_is_met_by_the_width_of_the_interval_only() -> None:
    rule = sequential.Precision("owd_mean_us", 0.005)
    assert rule.met([100.0, 100.0]) is None  # fewer than `after`
    assert rule.met([100.0, 100.0, 100.0]) == 0.0
    # 99, 100, 101: sd 1, t(0.975, 2) = 4.303: half-width 2.48 % of the mean
    assert rule.met([99.0, 100.0, 101.0]) is None
    assert sequential.Precision("x", 0.03).met([99.0, 100.0, 101.0]) == pytest.approx(
        0.02484, abs=1e-4)
    # the same spread far from any claim's number: the rule never looks at where the mean is
    assert sequential.Precision("x", 0.03).met([999.0, 1000.0, 1001.0]) == pytest.approx(
        0.002484, abs=1e-5)
    assert rule.met([0.0, 0.0, 0.0]) is None  # no share of a zero mean


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (5, "measurements.owd.precision"),
        ({**RULE, "colour": 1}, "measurements.owd.precision.colour"),
        ({"metric": "receiver_bps", "relative": 0.01}, "measurements.owd.precision.metric"),
        ({"relative": 0.01}, "measurements.owd.precision.metric"),
        ({**RULE, "relative": 0}, "measurements.owd.precision.relative"),
        ({**RULE, "relative": 1.5}, "measurements.owd.precision.relative"),
        ({**RULE, "relative": True}, "measurements.owd.precision.relative"),
        ({**RULE, "after": 2}, "measurements.owd.precision.after"),
    ],
)
def test_a_bad_rule_names_its_key(raw: Any, key: str) -> None:
    with pytest.raises(SpecError) as err:
        spec(rule=raw)
    assert err.value.key == key


def test_the_rule_travels_with_the_run_and_is_gone_where_a_cell_runs_once() -> None:
    from testbed.experiment_spec import for_clock

    exp = spec(rule={**RULE, "after": 4})
    assert exp.to_dict()["measurements"][0]["precision"] == {**RULE, "after": 4}
    assert len(plan(exp)) == 12  # the plan lists every repetition: the rule only stops early
    once = for_clock(exp, "virtual")  # pingpong is exact on the virtual clock
    assert once.measurements[0].once and once.measurements[0].precision is None
    assert "precision" not in once.to_dict()["measurements"][0]


def test_a_cell_whose_trials_agree_stops_after_three(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    s = run_experiment(spec(rule=RULE), db=db, open_testbed=fake_open([]), progress=quiet(),
                       run_trial=steady_or_noisy)
    assert (s.planned, s.ran, s.failed, s.spared) == (12, 9, 0, 3)
    with closing(results.connect(db)) as con:
        rows = list(results.trials(con))
        by_size: dict[int, list[int]] = {}
        for r in rows:
            by_size.setdefault(r.point["size"], []).append(r.repetition)
        assert by_size == {10: [0, 1, 2], 100: [0, 1, 2, 3, 4, 5]}
        assert results.runs(con)[0]["finished"] is not None  # spared trials leave no hole


def test_without_a_rule_every_repetition_runs(tmp_path: Path) -> None:
    s = run_experiment(spec(), db=tmp_path / "r.sqlite", open_testbed=fake_open([]),
                       progress=quiet(), run_trial=steady_or_noisy)
    assert (s.ran, s.spared) == (12, 0)


def test_a_failed_trial_does_not_count_and_resume_runs_only_what_the_rule_still_needs(
        tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    calls = {"n": 0}

    def second_fails(tb: Any, t: Any, ctx: Any) -> Measured:
        calls["n"] += 1
        if calls["n"] == 2:  # the steady cell's repetition 1
            raise CommandError(["probe"], 1, "boom", "node h1")
        return steady_or_noisy(tb, t, ctx)

    s = run_experiment(spec(rule=RULE), db=db, open_testbed=fake_open([]), progress=quiet(),
                       run_trial=second_fails)
    # the steady cell needed a fourth trial for three that count; the two left are spared
    assert (s.ran, s.failed, s.spared) == (9, 1, 2)
    s2 = run_experiment(spec(rule=RULE), db=db, resume=True, open_testbed=fake_open([]),
                        progress=quiet(), run_trial=steady_or_noisy)
    # the failed repetition is retried (it is planned and not recorded ok); nothing else runs
    assert s2.run_id == s.run_id and (s2.ran, s2.spared) == (1, 0)
    with closing(results.connect(db)) as con:
        assert results.runs(con)[0]["finished"] is not None


def test_counted_leaves_out_failed_and_suspect_trials() -> None:
    from testbed import fidelity

    def row(status: str, verdict: str) -> results.TrialRow:
        return results.TrialRow(
            trial_key="k", run_id="r", experiment="e", profile="full", measurement="m",
            kind="pingpong", point={}, group_key="{}", repetition=0, started=0.0,
            finished=0.0, status=status, error=None, metrics={"owd_mean_us": 5.0},
            result={fidelity.KEY: {"verdict": verdict, "reasons": []}}, topology={},
            qdiscs=[])

    assert sequential.counted(row("ok", fidelity.OK), "owd_mean_us") == 5.0
    assert sequential.counted(row("ok", fidelity.SUSPECT), "owd_mean_us") is None
    assert sequential.counted(row("error", fidelity.OK), "owd_mean_us") is None
    assert sequential.counted(row("ok", fidelity.OK), "owd_max_us") is None


def test_a_parallel_runs_coordinator_does_not_retry_spared_trials(tmp_path: Path) -> None:
    """The coordinator asks what a share left unrecorded: a precise cell's unrun repetitions
    are not missing (else it would retry them, or record them as failed), and the run ends."""
    from testbed.experiment import trial_row
    from testbed.parallel import RunBook
    from testbed.shares import Share

    exp = spec(rule=RULE)
    book = RunBook(exp, tmp_path / "p.sqlite", False, clock="real")
    keys = tuple(t.key(book.run_id) for t in book.trials)
    share = Share(0, book.run_id, keys)
    for t in book.trials[:3]:  # the steady cell's first three, as a worker would commit them
        results.write_trial(book.con, trial_row(exp, book.run_id, t, started=0.0, finished=0.0,
                                                metrics={"owd_mean_us": 50.0}))
    assert book.missing(share) == keys[6:]
    summary = book.finish()
    assert (summary.planned, summary.ran, summary.spared) == (12, 3, 3)
