"""How a run's trials are cut into shares for parallel workers (`testbed run --workers`,
`--cluster`): whole topology points, or whole sweep cells, balanced by the trials each cell is
expected to run; and the share file a worker reads."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.errors import UsageError
from testbed.experiment_spec import TrialPlan


@dataclass(frozen=True)
class Share:
    """Trials of one run given to one worker: whole topology points (built once) or, when
    there are fewer points than workers, whole sweep cells (every repetition together)."""

    index: int
    run_id: str
    keys: tuple[str, ...]
    attempt: int = 1  # 2: the retry of what a dead worker's share left unrecorded

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "run_id": self.run_id, "keys": list(self.keys),
                "attempt": self.attempt}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Share:
        return cls(int(d["index"]), str(d["run_id"]), tuple(str(k) for k in d["keys"]),
                   int(d.get("attempt", 1)))


def read_share(path: Path) -> Share:
    """A share file (`testbed run --share FILE`): JSON with run_id and keys."""
    try:
        return Share.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--share {path}: not a share file ({exc})",
                         hint="share files are written by testbed run --workers/--cluster"
                         ) from None


def _cells(unit: Sequence[TrialPlan]) -> list[list[TrialPlan]]:
    """`unit`'s trials by sweep cell, in order of first appearance (a measurement repeated in
    rounds has a cell's repetitions apart: experiment_spec._order)."""
    cells: dict[tuple[str, str], list[TrialPlan]] = {}
    for t in unit:
        cells.setdefault((t.measurement.name, t.group_key), []).append(t)
    return list(cells.values())


BUILD_COST = 0.5
"""A topology point's build, in trials' worth of time: cutting a point between two shares costs
one more build (in the VM tier a chain's build takes a few seconds; a trial about 7)."""


def _expected(cell: Sequence[TrialPlan]) -> int:
    """A cell's trials, or the least it runs where `precision` may stop it early."""
    rule = cell[0].measurement.precision if cell else None
    return min(len(cell), rule.after) if rule is not None else len(cell)


def _weight(unit: Sequence[TrialPlan]) -> int:
    return sum(_expected(c) for c in _cells(unit))


def _cut(unit: list[TrialPlan]) -> tuple[list[TrialPlan], list[TrialPlan]] | None:
    """`unit` cut between its sweep cells near its middle, or None if it is one cell."""
    cells = _cells(unit)
    if len(cells) < 2:
        return None
    total = sum(_expected(c) for c in cells)
    half, acc = 0, 0
    while half < len(cells) - 1 and acc + _expected(cells[half]) <= total / 2:
        acc += _expected(cells[half])
        half += 1
    half = max(half, 1)
    return [t for c in cells[:half] for t in c], [t for c in cells[half:] for t in c]


def _assign(units: list[list[TrialPlan]], n: int) -> list[list[list[TrialPlan]]]:
    """Heaviest first, each to the least loaded of `n` shares (expected trials + builds)."""
    loads: list[list[list[TrialPlan]]] = [[] for _ in range(min(n, len(units)))]

    def cost(share: list[list[TrialPlan]]) -> float:
        return sum(_weight(u) + BUILD_COST for u in share)

    for u in sorted(units, key=_weight, reverse=True):
        min(loads, key=cost).append(u)
    return loads


def _makespan(loads: list[list[list[TrialPlan]]]) -> float:
    return max((sum(_weight(u) + BUILD_COST for u in share) for share in loads), default=0.0)


def split(trials: Sequence[TrialPlan], run_id: str, n: int) -> list[Share]:
    """At most `n` shares of `trials` (in plan order), balanced by the trials each cell is
    expected to run (`_expected`) plus builds. A topology
    point stays whole (each worker builds it once) unless cutting it between sweep cells
    shortens the longest share: with fewer points than workers, or points that do not divide
    evenly (3 equal points on 2 workers: 6 + 6 trials instead of 8 + 4). A cell's repetitions
    stay together; every trial is in exactly one share."""
    if n < 1:
        raise UsageError(f"--workers {n}: need at least 1")
    units = [list(g) for _, g in itertools.groupby(trials, key=lambda t: t.topo)]
    best = _makespan(_assign(units, n))
    while units:
        big = max((u for u in units if _cut(u) is not None), key=_weight, default=None)
        if big is None:
            break
        halves = _cut(big)
        assert halves is not None
        i = units.index(big)
        candidate = units[:i] + list(halves) + units[i + 1:]
        span = _makespan(_assign(candidate, n))
        if span >= best and len(units) >= n:
            break
        units, best = candidate, min(best, span)
    order = {id(t): i for i, t in enumerate(trials)}
    return [Share(i, run_id, tuple(t.key(run_id) for t in sorted(
                (t for u in share for t in u), key=lambda t: order[id(t)])))
            for i, share in enumerate(_assign(units, n)) if share]
