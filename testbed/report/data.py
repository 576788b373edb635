"""Report data: runs and trials selected from the results database, grouped per measurement,
sweep point and environment (tier, clock, shaping), with n and 95 % confidence intervals."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed import fidelity, results
from testbed.errors import UsageError

if TYPE_CHECKING:
    from testbed.stats import Summary


@dataclass(frozen=True)
class Env:
    """Where a trial was measured. Trials of different environments never share a statistic."""

    tier: str  # "host" or "vm" (full-kernel tier), or what the run's provenance says
    clock: str  # "real" or "virtual"
    shaping: str  # qdisc that shaped the links: "netem" (serialization per packet), "tbf", "none"

    @property
    def label(self) -> str:
        return f"{self.tier}/{self.clock} clock/{self.shaping}"


@dataclass
class Dataset:
    """The runs and trials a report is made of."""

    db: Path
    runs: list[dict[str, Any]]
    trials: list[results.TrialRow]
    envs: dict[str, Env] = field(default_factory=dict)  # trial_key -> Env
    suspect: list[results.TrialRow] = field(default_factory=list)  # as stored; left out

    def experiments(self) -> list[str]:
        return sorted({r["experiment"] for r in self.runs})

    def runs_of(self, experiments: Iterable[str]) -> list[dict[str, Any]]:
        names = set(experiments)
        return [r for r in self.runs if r["experiment"] in names]

    def trials_of(self, experiments: Iterable[str]) -> list[results.TrialRow]:
        names = set(experiments)
        return [t for t in self.trials if t.experiment in names]

    def env(self, t: results.TrialRow) -> Env:
        return self.envs.get(t.trial_key) or trial_env(t, {})


def _qdisc_kinds(doc: Any) -> set[str]:
    kinds: set[str] = set()
    if isinstance(doc, Mapping):
        k = doc.get("kind")
        if isinstance(k, str):
            kinds.add(k)
        for v in doc.values():
            kinds |= _qdisc_kinds(v)
    elif isinstance(doc, list):
        for v in doc:
            kinds |= _qdisc_kinds(v)
    return kinds


def run_tier(prov: Mapping[str, Any]) -> str:
    """The tier a run was measured on, from its provenance ("host" when it says nothing)."""
    tier = prov.get("tier")
    if isinstance(tier, str) and tier:
        return tier
    if prov.get("in_vm") or prov.get("hostname") == "virtme-ng":
        return "vm"
    return "host"


def run_clock(prov: Mapping[str, Any]) -> str:
    return results.clock_kind(prov.get("clock")) or "real"


def trial_env(t: results.TrialRow, prov: Mapping[str, Any]) -> Env:
    """A trial's environment: its tier and clock (its own record first, then its run's: a run
    coordinated on the host has trials measured in guests), and the qdiscs in force."""
    doc = t.result.get("clock") if isinstance(t.result, Mapping) else None
    clock = results.clock_kind(doc)
    tier = "vm" if isinstance(doc, Mapping) and doc.get("in_vm") else run_tier(prov)
    kinds = _qdisc_kinds(t.qdiscs)
    shaping = "netem" if "netem" in kinds else "tbf" if "tbf" in kinds else "none"
    return Env(tier, clock or run_clock(prov), shaping)


def load(db: Path, run_ids: Sequence[str] = (), experiments: Sequence[str] = ()) -> Dataset:
    """Runs named by id, and every run of the named experiments, with all their trials. A
    trial whose host did not keep up (testbed.fidelity: suspect) is left out of every statistic
    and verdict: it comes with status "suspect" saying why (the report lists those apart from the
    failed ones), and as stored in `Dataset.suspect`."""
    if not db.exists():
        raise UsageError(f"no results database at {db}",
                         hint="run an experiment first (testbed run smoke --quick), or pass --db")
    if not run_ids and not experiments:
        raise UsageError("nothing selected for the report",
                         hint="give --run ID or --experiment NAME (repeatable)")
    with closing(results.connect(db)) as con:
        all_runs = results.runs(con)
        known_ids = {r["run_id"] for r in all_runs}
        known_exps = sorted({r["experiment"] for r in all_runs})
        for rid in run_ids:
            if rid not in known_ids:
                raise UsageError(f"{db}: no run {rid!r}", hint="see: testbed results list")
        for name in experiments:
            if name not in known_exps:
                raise UsageError(f"{db}: no runs of experiment {name!r}",
                                 hint="runs exist for: " + (", ".join(known_exps) or "none"))
        chosen = [r for r in all_runs if r["run_id"] in set(run_ids)
                  or r["experiment"] in set(experiments)]
        rows: list[results.TrialRow] = []
        for r in chosen:
            rows.extend(results.trials(con, run_id=r["run_id"]))
    provs = {r["run_id"]: r["provenance"] for r in chosen}
    envs = {t.trial_key: trial_env(t, provs.get(t.run_id, {})) for t in rows}
    suspect = [t for t in rows if t.status == "ok" and fidelity.is_suspect(t.result)]
    out = {t.trial_key for t in suspect}
    rows = [replace(t, status="suspect", error="left out of verdicts (kept in the database): the "
                    "host did not keep up: " + "; ".join(fidelity.suspect_reasons(t.result)))
            if t.trial_key in out else t for t in rows]
    return Dataset(db, chosen, rows, envs, suspect)


# --- grouping -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """One statistic: a metric over the repetitions of one sweep point in one environment."""

    experiment: str
    measurement: str
    point: dict[str, Any]  # the sweep point with the measurement's fixed parameters
    env: Env
    metric: str
    summary: Summary

    @property
    def n(self) -> int:
        return self.summary.n

    @property
    def mean(self) -> float:
        return self.summary.mean


Value = Callable[[results.TrialRow], float | None]


def metric(name: str, scale: float = 1.0) -> Value:
    """A value getter: metric `name` of a trial times `scale` (None when the trial lacks it)."""

    def get(t: results.TrialRow) -> float | None:
        v = t.metrics.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return float(v) * scale

    return get


def group(ds: Dataset, trials: Iterable[results.TrialRow], value: Value, name: str,
          keys: Callable[[results.TrialRow], bool] | None = None) -> list[Stat]:
    """Statistics of `value` per (experiment, measurement, sweep point, environment), over the
    successful trials (optionally only those `keys` accepts). Order: first seen."""
    from testbed.stats import describe  # numpy and SciPy: only when a statistic is made

    buckets: dict[tuple[str, str, str, Env], tuple[dict[str, Any], list[float]]] = {}
    for t in trials:
        if t.status != "ok" or (keys is not None and not keys(t)):
            continue
        v = value(t)
        if v is None:
            continue
        k = (t.experiment, t.measurement, t.group_key, ds.env(t))
        buckets.setdefault(k, (params_of(t), []))[1].append(v)
    return [Stat(e, m, pt, env, name, describe(vals))
            for (e, m, _g, env), (pt, vals) in buckets.items()]


def params_of(t: results.TrialRow) -> dict[str, Any]:
    """A trial's measurement parameters (fixed and swept) and its sweep point, in one mapping."""
    params = t.result.get("params") if isinstance(t.result, Mapping) else None
    return {**(params if isinstance(params, Mapping) else {}), **t.point}


def description(t: results.TrialRow) -> str:
    """The experiment file's description of the trial's measurement ("" when none was stored)."""
    d = t.result.get("description") if isinstance(t.result, Mapping) else None
    return d if isinstance(d, str) else ""


def unit(t: results.TrialRow, metric_name: str) -> str | None:
    """The unit stored with a trial's metric (None for trials stored before units were)."""
    return results.stored_units(t).get(metric_name)


def failed(trials: Iterable[results.TrialRow]) -> list[results.TrialRow]:
    return [t for t in trials if t.status == "error"]
