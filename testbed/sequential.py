"""Sequential repetitions: a measurement's `precision` rule (stop repeating a cell once the 95 %
interval of its mean is narrow enough) and which of a run's planned trials it leaves unrun."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testbed import fidelity, results
from testbed.errors import SpecError
from testbed.stats import describe

if TYPE_CHECKING:
    import sqlite3

    from testbed.experiment_spec import TrialPlan

KEYS = ("metric", "relative", "after")
MIN_AFTER = 3
"""Fewer than three repetitions give an interval on one degree of freedom (a t quantile of
12.7): a rule met there would be met only by values that agree to the bit, and two values that
happen to agree say little about the third."""


@dataclass(frozen=True)
class Precision:
    """Repeat a cell at most `repetitions` times, but stop once at least `after` trials of it
    give a 95 % interval of the mean of `metric` (Student t, as every report interval) whose
    half-width is at most `relative` of the mean. Only trials that count in the verdicts count
    here (ok, not suspect). Stopping on the interval's width, never on its position, does not
    steer a verdict: a cell stops because its trials agree, whatever they agree on."""

    metric: str
    relative: float
    after: int = MIN_AFTER

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "relative": self.relative, "after": self.after}

    def met(self, values: Sequence[float]) -> float | None:
        """The interval's half-width as a share of the mean when `values` meet the rule, else
        None (too few, a zero mean, or too wide)."""
        if len(values) < self.after:
            return None
        s = describe(values)
        if s.mean == 0 or not math.isfinite(s.mean):
            return None
        rel = (s.ci95_high - s.mean) / abs(s.mean)
        return rel if rel <= self.relative else None

    def describe(self) -> str:
        return (f"stops a cell once {self.after}+ trials give a 95 % interval of the mean "
                f"{self.metric} within ±{100 * self.relative:g} %")


def parse(raw: Any, file: str, key: str, metrics: Sequence[str]) -> Precision | None:
    """A measurement's `precision = { metric = ..., relative = ..., after = ... }` (None when
    absent); `metrics`: those its kind reports."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError(file, key, "must be a table",
                        '{ metric = "receiver_bps", relative = 0.005, after = 3 }')
    for k in raw:
        if k not in KEYS:
            raise SpecError(file, f"{key}.{k}", "unknown key", ", ".join(KEYS))
    metric = raw.get("metric")
    if not isinstance(metric, str) or metric not in metrics:
        raise SpecError(file, f"{key}.metric", f"{metric!r} is not a metric of this kind",
                        ", ".join(metrics))
    rel = raw.get("relative")
    if isinstance(rel, bool) or not isinstance(rel, int | float) or not 0 < rel < 1:
        raise SpecError(file, f"{key}.relative", f"{rel!r} is not a share of the mean",
                        "a number between 0 and 1, e.g. 0.005 for ±0.5 %")
    after = raw.get("after", MIN_AFTER)
    if isinstance(after, bool) or not isinstance(after, int) or after < MIN_AFTER:
        raise SpecError(file, f"{key}.after", f"{after!r} is too few repetitions to stop after",
                        f"an integer of at least {MIN_AFTER}")
    return Precision(metric, float(rel), after)


def counted(row: results.TrialRow, metric: str) -> float | None:
    """The `metric` of a stored trial when it counts in the verdicts (ok, not suspect)."""
    if row.status != "ok" or fidelity.is_suspect(row.result):
        return None
    v = row.metrics.get(metric)
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def unneeded(con: sqlite3.Connection, run_id: str, trials: Sequence[TrialPlan]) -> set[str]:
    """Keys of `trials` not yet recorded whose cell's recorded trials (in run `run_id`) already
    meet its measurement's precision rule: they need not run. A pure function of the stored
    trials, so a resumed run, a parallel run's coordinator and its workers agree."""
    cells: dict[tuple[str, str], list[TrialPlan]] = defaultdict(list)
    for t in trials:
        if t.measurement.precision is not None:
            cells[(t.measurement.name, t.group_key)].append(t)
    if not cells:
        return set()
    stored: dict[tuple[str, str], list[results.TrialRow]] = defaultdict(list)
    names = {name for name, _ in cells}
    for name in names:
        keys = [g for n, g in cells if n == name]
        one = keys[0] if len(keys) == 1 else None  # after each trial: its own cell's rows
        for r in results.trials(con, run_id=run_id, measurement=name, group_key=one):
            if (r.measurement, r.group_key) in cells:
                stored[(r.measurement, r.group_key)].append(r)
    out: set[str] = set()
    for cell, members in cells.items():
        rows = sorted(stored.get(cell, []), key=lambda r: r.repetition)
        rule = members[0].measurement.precision
        assert rule is not None
        values = [v for r in rows if (v := counted(r, rule.metric)) is not None]
        if rule.met(values) is None:
            continue
        have = {r.trial_key for r in rows}
        out |= {k for t in members if (k := t.key(run_id)) not in have}
    return out
