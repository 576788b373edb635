"""Experiment files: topology, sweeps, repetitions, measurements, profiles; the trial loop."""

from __future__ import annotations

import itertools
import math
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import results
from testbed.errors import SpecError, TestbedError, UsageError
from testbed.measure import kinds
from testbed.progress import Progress

TOP_KEYS = ("name", "description", "topology", "params", "sweep", "repetitions", "measurements",
            "quick", "paper", "clock")
CLOCKS = ("real", "virtual")
"""`clock = ...` in an experiment file: the clock its numbers must be measured on (absent: any).
'virtual' is the full-kernel tier on QEMU's instruction counter (`testbed vm --clock virtual`),
which `testbed run` boots by itself."""
PROFILE_KEYS = ("repetitions", "params", "sweep", "measurements")
MEASUREMENT_META = ("kind", "description", "where")
PROFILES = ("full", "quick")
MAX_REPETITIONS = 1000
MAX_TRIALS = 100_000
MAX_TOPOLOGY_POINTS = 1000
COMPILE_CHECK_NODES = 64  # check_topologies compiles the address plan of topologies this small
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class MeasurementSpec:
    """One measurement of an experiment: its kind, fixed parameters, and its own sweeps."""

    name: str
    kind: str
    params: dict[str, Any]  # defaults merged, list values removed (they are in `sweep`)
    sweep: dict[str, list[Any]]
    where: dict[str, list[Any]] = field(default_factory=dict)  # only at these topology points
    description: str = ""  # the experiment file's `description` of this measurement

    def applies(self, tp: TopologyPoint) -> bool:
        for k, allowed in self.where.items():
            value = tp.topology if k == "topology" else tp.params.get(k.split(".", 1)[1])
            if value not in allowed:
                return False
        return True


@dataclass(frozen=True)
class Experiment:
    """An experiment file resolved for one profile."""

    name: str
    file: str
    profile: str
    description: str
    topology: list[str]  # topology names or paths (more than one: a sweep)
    params: dict[str, Any]  # fixed topology parameters
    topo_sweep: dict[str, list[Any]]  # topology.<param> -> values
    meas_sweep: dict[str, list[Any]]  # measurement parameter -> values (all that accept it)
    repetitions: int
    measurements: list[MeasurementSpec]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    clock: str | None = None  # "virtual" / "real": the clock it must run on; None: any
    paper: str = ""  # the paper it reproduces (free text; testbed.papers maps experiments)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "file": self.file, "profile": self.profile,
            "description": self.description, "topology": self.topology, "params": self.params,
            "topo_sweep": self.topo_sweep, "meas_sweep": self.meas_sweep,
            "repetitions": self.repetitions, "clock": self.clock, "paper": self.paper,
            "measurements": [{"name": m.name, "kind": m.kind, "params": m.params,
                              "sweep": m.sweep, "where": m.where,
                              "description": m.description} for m in self.measurements],
        }


@dataclass(frozen=True)
class TopologyPoint:
    """A topology file with its parameters: built once for all the trials that need it."""

    topology: str
    params: dict[str, Any]
    swept: dict[str, Any]  # the swept keys ("topology", "topology.<p>") and their values

    @property
    def label(self) -> str:
        extra = ",".join(f"{k.split('.', 1)[-1]}={v}" for k, v in self.swept.items()
                         if k != "topology")
        return self.topology + (f"[{extra}]" if extra else "")


@dataclass(frozen=True)
class TrialPlan:
    """One trial to run."""

    topo: TopologyPoint
    measurement: MeasurementSpec
    params: dict[str, Any]  # measurement parameters for this trial
    point: dict[str, Any]  # everything swept, identifying the group
    repetition: int

    @property
    def group_key(self) -> str:
        return results.canonical(self.point)

    def key(self, run_id: str) -> str:
        return f"{run_id}/{self.measurement.name}/{self.group_key}/{self.repetition}"

    @property
    def label(self) -> str:
        pt = ",".join(f"{k}={v}" for k, v in self.point.items()
                      if not k.startswith("topology"))
        return f"{self.topo.label} {self.measurement.name}({pt}) #{self.repetition}"


# --- loading ----------------------------------------------------------------------------------


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


def _check_keys(d: Mapping[str, Any], allowed: Sequence[str], file: str, prefix: str) -> None:
    for k in d:
        if k not in allowed:
            where = f"{prefix}.{k}" if prefix else (k or '""')
            raise SpecError(file, where, "unknown key", ", ".join(allowed))


def _table(d: Mapping[str, Any], key: str, file: str, prefix: str = "") -> dict[str, Any]:
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise SpecError(file, f"{prefix}{key}", "must be a table", f"[{prefix}{key}]")
    return dict(v)


def find_experiment(name: str) -> Path:
    """An experiment by path, or by name in experiments/ (cwd first, then the source tree)."""
    p = Path(name)
    if p.suffix == ".toml" or "/" in name:
        if p.exists():
            return p
        raise UsageError(f"no experiment file {name}", hint="see experiments/*.toml")
    for base in (Path("experiments"), REPO / "experiments"):
        cand = base / f"{name}.toml"
        if cand.exists():
            return cand
    known = sorted(q.stem for q in (REPO / "experiments").glob("*.toml"))
    raise UsageError(f"no experiment called {name!r}", hint="known: " + ", ".join(known))


def find_topology(name: str, relative_to: Path | None = None) -> Path:
    """A topology by path, or by name in topologies/ (next to the experiment, cwd, source tree)."""
    p = Path(name)
    if p.suffix == ".toml" or "/" in name:
        cands = [p] + ([relative_to / p] if relative_to else [])
    else:
        bases = ([relative_to.parent / "topologies"] if relative_to else []) + [
            Path("topologies"), REPO / "topologies"]
        cands = [b / f"{name}.toml" for b in bases]
    for c in cands:
        if c.exists():
            return c
    raise SpecError(str(relative_to or name), "topology", f"no topology {name!r}",
                    "a name in topologies/ (p2p, host-router, one-router, two-routers, chain) "
                    "or a path")


def load_experiment(path: str | Path, profile: str = "full") -> Experiment:
    """Read and validate an experiment file for `profile` ("full" or "quick"); creates nothing."""
    file = str(path)
    if profile not in PROFILES:
        raise UsageError(f"no profile {profile!r}", hint="full or quick")
    from testbed.topology import read_toml

    raw = read_toml(Path(path), "experiment", "experiments/*.toml")
    return experiment_from_dict(raw, file=file, profile=profile)


def experiment_from_dict(raw: Mapping[str, Any], *, file: str, profile: str = "full"
                         ) -> Experiment:
    _check_keys(raw, TOP_KEYS, file, "")
    name = raw.get("name", Path(file).stem)
    if not isinstance(name, str) or not name:
        raise SpecError(file, "name", "must be a non-empty string")
    if "topology" not in raw:
        raise SpecError(file, "topology", "missing", "a topology name such as chain")
    topology = _names(raw["topology"], file, "topology")
    clock = raw.get("clock")
    if clock is not None and clock not in CLOCKS:
        raise SpecError(file, "clock", f"{clock!r} is not a clock", " or ".join(CLOCKS))
    params = _table(raw, "params", file)
    sweep = _table(raw, "sweep", file)
    reps = raw.get("repetitions", 1)
    meas_raw = _table(raw, "measurements", file)
    quick = _table(raw, "quick", file)
    _check_keys(quick, PROFILE_KEYS, file, "quick")
    if profile == "quick":
        reps = quick.get("repetitions", reps)
        params.update(_table(quick, "params", file, "quick."))
        sweep.update(_table(quick, "sweep", file, "quick."))
        qm = _table(quick, "measurements", file, "quick.")
        for mname, over in qm.items():
            if mname not in meas_raw:
                raise SpecError(file, f"quick.measurements.{mname}", "no such measurement",
                                ", ".join(meas_raw))
            if not isinstance(over, dict):
                raise SpecError(file, f"quick.measurements.{mname}", "must be a table")
            if not isinstance(meas_raw[mname], dict):
                raise SpecError(file, f"measurements.{mname}", "must be a table",
                                f"[measurements.{mname}] with kind = ...")
            meas_raw[mname] = {**meas_raw[mname], **over}
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= MAX_REPETITIONS:
        raise SpecError(file, "repetitions", f"{reps!r} is not a repetition count",
                        f"an integer from 1 to {MAX_REPETITIONS}")
    if not meas_raw:
        raise SpecError(file, "measurements", "no measurements", "[measurements.NAME] tables")

    topo_sweep: dict[str, list[Any]] = {}
    meas_sweep: dict[str, list[Any]] = {}
    for k, v in sweep.items():
        values = _as_list(v)
        if not values:
            raise SpecError(file, f"sweep.{k}", "an empty list sweeps nothing")
        if k == "topology":
            topology = _names(values, file, "sweep.topology")
        elif k.startswith("topology."):
            topo_sweep[k] = values
        else:
            meas_sweep[k] = values

    measurements: list[MeasurementSpec] = []
    for mname, mraw in meas_raw.items():
        key = f"measurements.{mname}"
        if not isinstance(mraw, dict):
            raise SpecError(file, key, "must be a table", f"[{key}] with kind = ...")
        kind_name = mraw.get("kind")
        if not isinstance(kind_name, str):
            raise SpecError(file, f"{key}.kind", "missing", ", ".join(kinds.KINDS))
        kind = kinds.get(kind_name, file, f"{key}.kind")
        given = {k: v for k, v in mraw.items() if k not in MEASUREMENT_META}
        decl = {k: kinds.declared(kind, k, file, key) for k in given}
        own_sweep = {k: v for k, v in given.items() if isinstance(v, list)
                     and decl[k].type != "names"}
        for k, vals in own_sweep.items():
            if not vals:
                raise SpecError(file, f"{key}.{k}", "an empty list sweeps nothing")
        fixed = {k: v for k, v in given.items() if k not in own_sweep}
        for k, v in given.items():
            for i, one in enumerate(own_sweep.get(k, [v])):
                kinds.check_value(decl[k], one, file,
                                  f"{key}.{k}" + (f"[{i}]" if k in own_sweep else ""))
        relevant = {k: v for k, v in meas_sweep.items() if kind.param(k) is not None}
        for k, vals in relevant.items():
            for i, one in enumerate(vals):
                kinds.check_value(kinds.declared(kind, k, file, f"sweep.{k}"), one, file,
                                  f"sweep.{k}[{i}]")
        for k in relevant:
            if k in given:  # the global sweep would silently replace the measurement's own value
                raise SpecError(file, f"{key}.{k}",
                                f"is also swept by [sweep] {k} = {meas_sweep[k]!r}, which would "
                                "override it", f"move `{k}` out of [sweep] into the "
                                "measurements that sweep it")
        # validate every combination the trials will take (sizes against the IP version, ...)
        for combo in itertools.islice(_product({**relevant, **own_sweep}), 10000):
            kinds.validate(kind, {**fixed, **combo}, file, key)
        merged = kinds.validate(
            kind, {**fixed, **{k: v[0] for k, v in own_sweep.items()},
                   **{k: v[0] for k, v in relevant.items()}}, file, key)
        for k in own_sweep:
            merged.pop(k, None)
        where_raw = mraw.get("where", {})
        if not isinstance(where_raw, dict):
            raise SpecError(file, f"{key}.where", "must be a table",
                            'e.g. where = { "topology.routers" = [0] }')
        where: dict[str, list[Any]] = {}
        for wk, wv in where_raw.items():
            if wk != "topology" and not wk.startswith("topology."):
                raise SpecError(file, f"{key}.where.{wk}", "unknown key",
                                "topology or topology.<param>")
            where[wk] = _as_list(wv)
            for i, one in enumerate(where[wk]):
                if isinstance(one, list | dict):
                    raise SpecError(file, f"{key}.where.{wk}[{i}]", "must be a plain value",
                                    "a string, number or boolean")
        description = mraw.get("description", "")
        if not isinstance(description, str):
            raise SpecError(file, f"{key}.description", "must be a string", "a line of text")
        measurements.append(MeasurementSpec(mname, kind.name, merged, own_sweep, where,
                                            description))
    for k in meas_sweep:
        if not any(kinds.KINDS[m.kind].param(k) is not None for m in measurements):
            raise SpecError(file, f"sweep.{k}", "no measurement of this experiment takes it",
                            "topology, topology.<param>, or a parameter of a measurement")
    for k, v in params.items():
        if isinstance(v, list | dict):
            raise SpecError(file, f"params.{k}", "must be a plain value",
                            "a string, number or boolean (a list belongs in [sweep])")
    for k, vals in topo_sweep.items():
        for i, v in enumerate(vals):
            if isinstance(v, list | dict):
                raise SpecError(file, f"sweep.{k}[{i}]", "must be a plain value",
                                "a string, number or boolean")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise SpecError(file, "description", "must be a string", "a line of text")
    paper = raw.get("paper", "")
    if not isinstance(paper, str):
        raise SpecError(file, "paper", "must be a string",
                        'the paper\'s id, e.g. "gometz-2015-ipv4-ipv6-open-source-routers"')
    exp = Experiment(
        name=name, file=file, profile=profile, description=description,
        topology=topology, params=params, topo_sweep=topo_sweep, meas_sweep=meas_sweep,
        repetitions=reps, measurements=measurements, raw=dict(raw), clock=clock, paper=paper,
    )
    total = count_trials(exp)
    if total > MAX_TRIALS:
        raise SpecError(file, "repetitions" if reps > 1 else "sweep",
                        f"{total} trials: more than {MAX_TRIALS}",
                        "fewer sweep values or repetitions (or split the experiment)")
    return exp


def _names(value: Any, file: str, key: str) -> list[str]:
    """A topology name or a list of them (strings only)."""
    values = _as_list(value)
    if not values:
        raise SpecError(file, key, "an empty list names no topology", "e.g. \"chain\"")
    for i, v in enumerate(values):
        if not isinstance(v, str) or not v:
            where = f"{key}[{i}]" if isinstance(value, list) else key
            raise SpecError(file, where, f"not a topology name: {v!r}",
                            "a name in topologies/ (e.g. \"chain\") or a path")
    return list(values)


def count_trials(exp: Experiment) -> int:
    """How many trials plan(exp) yields, computed without listing them."""
    total = 0
    points = 0
    for tp in _iter_topology_points(exp):
        points += 1
        if points > MAX_TOPOLOGY_POINTS:
            raise SpecError(exp.file, "sweep", f"more than {MAX_TOPOLOGY_POINTS} topologies "
                            "to build", "fewer topology sweep values")
        for m in exp.measurements:
            if not m.applies(tp):
                continue
            accepted = kinds.KINDS[m.kind].param_names
            sweeps = {k: v for k, v in exp.meas_sweep.items() if k in accepted} | m.sweep
            total += math.prod(len(v) for v in sweeps.values()) * exp.repetitions
            if total > MAX_TRIALS:
                return total
    return total


def check_topologies(exp: Experiment) -> None:
    """Load and compile every topology point (pure), and check each measurement's nodes.

    Both `testbed run` and `testbed run --dry-run` call this before anything else, so
    the dry run refuses exactly what the real run would."""
    from testbed.plan import compile_plan
    from testbed.topology import load_topology

    base = Path(exp.file).resolve()
    for tp in _iter_topology_points(exp):
        try:
            path = find_topology(tp.topology, base)
        except SpecError as exc:
            key = "sweep.topology" if "topology" in tp.swept else "topology"
            raise SpecError(exp.file, key, exc.problem, exc.allowed) from None
        overrides = {k: _param_text(v) for k, v in tp.params.items()}
        try:
            topo = load_topology(path, overrides)
            if len(topo.nodes) <= COMPILE_CHECK_NODES:  # larger plans take seconds: at build
                compile_plan(topo, "check", netem_available=True)
        except SpecError as exc:
            raise SpecError(exp.file, _param_key(exc, tp, path, overrides),
                            f"topology {tp.label}: {exc.key or '(file)'}: {exc.problem}",
                            exc.allowed) from None
        for m in exp.measurements:
            if not m.applies(tp):
                continue
            for role in (p.name for p in kinds.KINDS[m.kind].params if p.type == "node"):
                node = m.params.get(role)
                if isinstance(node, str) and node not in topo.node_names:
                    raise SpecError(exp.file, f"measurements.{m.name}.{role}",
                                    f"no node {node!r} in topology {tp.label}",
                                    ", ".join(topo.node_names))


def _param_key(exc: SpecError, tp: TopologyPoint, path: Path, overrides: dict[str, str]
               ) -> str:
    """The experiment's key for a topology error caused by one of its parameters: the one
    named by the error, else the one without which the error goes away."""
    from testbed.topology import load_topology

    name = exc.key.split(".", 1)[1] if exc.key.startswith("params.") else None
    if name is None:
        swept_first = sorted(overrides, key=lambda k: f"topology.{k}" not in tp.swept)
        for k in swept_first:
            try:
                load_topology(path, {kk: v for kk, v in overrides.items() if kk != k})
            except SpecError as other:
                if (other.key, other.problem) == (exc.key, exc.problem):
                    continue
            name = k
            break
    if name is not None:
        return f"sweep.topology.{name}" if f"topology.{name}" in tp.swept else f"params.{name}"
    return "sweep.topology" if "topology" in tp.swept else "topology"


# --- expansion --------------------------------------------------------------------------------


def _product(d: Mapping[str, list[Any]]) -> Iterator[dict[str, Any]]:
    keys = list(d)
    for combo in itertools.product(*(d[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def _iter_topology_points(exp: Experiment) -> Iterator[TopologyPoint]:
    for topo in exp.topology:
        for combo in _product(exp.topo_sweep):
            params = dict(exp.params)
            params.update({k.split(".", 1)[1]: v for k, v in combo.items()})
            swept = ({"topology": topo} if len(exp.topology) > 1 else {}) | combo
            yield TopologyPoint(topo, params, swept)


def topology_points(exp: Experiment) -> list[TopologyPoint]:
    return list(_iter_topology_points(exp))


def plan(exp: Experiment) -> list[TrialPlan]:
    """Every trial, grouped by topology point so each topology is built once."""
    return list(iter_plan(exp))


def iter_plan(exp: Experiment) -> Iterator[TrialPlan]:
    """The trials of plan(exp), one at a time (the dry run prints them without a list)."""
    for tp in _iter_topology_points(exp):
        for m in exp.measurements:
            if not m.applies(tp):
                continue
            accepted = kinds.KINDS[m.kind].param_names
            sweeps = {k: v for k, v in exp.meas_sweep.items() if k in accepted} | m.sweep
            for combo in _product(sweeps):
                params = {**m.params, **combo}
                point = {"topology": tp.topology, **{f"topology.{k}": v for k, v in
                                                     sorted(tp.params.items())}, **combo}
                for rep in range(exp.repetitions):
                    yield TrialPlan(tp, m, params, point, rep)


# --- running ----------------------------------------------------------------------------------

OpenTestbed = Callable[[Path, Mapping[str, str]], AbstractContextManager[Any]]


@contextmanager
def open_real_testbed(path: Path, params: Mapping[str, str]) -> Iterator[Any]:
    """Load and build a topology with the real Testbed (root, host kernel)."""
    from testbed.testbed import Testbed
    from testbed.topology import load_topology

    topo = load_topology(path, params)
    with Testbed(topo) as tb:
        yield tb


@dataclass
class RunSummary:
    run_id: str
    planned: int
    skipped: int
    ran: int
    failed: int
    db: Path


def _param_text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def run_experiment(
    exp: Experiment,
    *,
    db: Path,
    resume: bool = False,
    open_testbed: OpenTestbed = open_real_testbed,
    progress: Progress | None = None,
    ctx: kinds.Context | None = None,
    run_trial: Callable[[Any, TrialPlan, kinds.Context], kinds.Measured] | None = None,
    share: tuple[str, Collection[str]] | None = None,
    on_commit: Callable[[], None] | None = None,
) -> RunSummary:
    """Run every trial of `exp`, storing each in `db` as it finishes; with `resume`, continue
    the last unfinished run of the same experiment and profile, skipping its finished trials.
    `share` = (run id, trial keys): only those trials of that run (a parallel run's worker,
    testbed.parallel); the run is left unfinished here (the run's own database finishes it).
    `on_commit` is called after each trial is stored, between trials (a guest's journal).

    A database that cannot be written (disk full, removed, locked) stops the run with a
    StoreError; every trial committed before stays, and `--resume` continues from there."""
    check_topologies(exp)
    trials = plan(exp)
    if share is not None:
        wanted = set(share[1])
        trials = [t for t in trials if t.key(share[0]) in wanted]
    ctx = ctx or kinds.Context()
    base = Path(exp.file).resolve()

    def default_trial(tb: Any, t: TrialPlan, c: kinds.Context) -> kinds.Measured:
        return kinds.measure(t.measurement.kind, tb, t.params, c)

    do_trial = run_trial or default_trial
    with closing(results.connect(db)) as con, _store_errors(con, db, exp):
        run_id = results.unfinished_run(con, exp.name, exp.profile) if resume else None
        if share is not None:
            run_id = results.start_run(con, exp.name, exp.profile, exp.to_dict(),
                                       results.provenance(), len(trials), run_id=share[0])
        if run_id is None:
            run_id = results.start_run(con, exp.name, exp.profile, exp.to_dict(),
                                       results.provenance(), len(trials))
        done = results.done_keys(con, run_id)
        todo = [t for t in trials if t.key(run_id) not in done]
        prog = progress or Progress(len(trials), len(trials) - len(todo))
        if resume:
            prog.note(f"resuming run {run_id}: {len(trials) - len(todo)} of {len(trials)} "
                      "trials already done")
        failed = 0
        for tp, group in itertools.groupby(todo, key=lambda t: t.topo):
            members = list(group)
            path = find_topology(tp.topology, base)
            overrides = {k: _param_text(v) for k, v in tp.params.items()}
            prog.note(f"building {tp.label}")
            try:
                with open_testbed(path, overrides) as tb:
                    topo_doc = tb.topology.to_dict() if hasattr(tb.topology, "to_dict") else str(
                        tb.topology)
                    qd = tb.qdiscs()
                    for t in members:
                        failed += _one(con, run_id, exp, t, tb, topo_doc, qd, do_trial, ctx, prog)
                        if on_commit is not None:
                            on_commit()
            except TestbedError as exc:
                # the topology could not be built (or torn down): every trial left says why
                for t in members:
                    key = t.key(run_id)
                    if key in results.done_keys(con, run_id):
                        continue
                    results.write_trial(con, error_row(
                        exp, run_id, t, f"topology {tp.label}: {exc}", time.time()))
                    prog.finish(ok=False)
                    failed += 1
                if on_commit is not None:
                    on_commit()
                prog.note(f"topology {tp.label} failed: {exc}")
        prog.close()
        finished = not todo or all(t.key(run_id) in results.done_keys(con, run_id)
                                   for t in trials)
        if share is None and finished:
            results.finish_run(con, run_id)
        return RunSummary(run_id, len(trials), len(trials) - len(todo), len(todo) - failed,
                          failed, db)


def error_row(exp: Experiment, run_id: str, t: TrialPlan, error: str, when: float,
              result: Mapping[str, Any] | None = None) -> results.TrialRow:
    """The record of trial `t` that failed before it could run (at `when`), saying why."""
    return results.TrialRow(
        t.key(run_id), run_id, exp.name, exp.profile, t.measurement.name, t.measurement.kind,
        t.point, t.group_key, t.repetition, when, when, "error", error, {}, dict(result or {}),
        {}, [])


@contextmanager
def _store_errors(con: Any, db: Path, exp: Experiment) -> Iterator[None]:
    """A SQLite error while running (disk full, file removed) becomes a StoreError that says
    how many trials are kept and how to resume."""
    try:
        yield
    except sqlite3.Error as exc:
        try:
            run_id = results.unfinished_run(con, exp.name, exp.profile)
            kept = f"the {len(results.done_keys(con, run_id))} trials" if run_id else "the trials"
        except sqlite3.Error:
            kept = "the trials"
        quick = " --quick" if exp.profile == "quick" else ""
        raise results.store_error(
            db, exc, "storing a trial failed",
            hint=f"{kept} stored before are kept; fix the cause, then continue with: "
            f"testbed run {exp.file}{quick} --resume --db {db}",
        ) from None


def _clock_doc(guest_started: float) -> dict[str, Any]:
    """The clock a trial ran on, and its start and end on the guest's own clock (which, on a
    virtual clock, leaps ahead of the host's wall clock stored as started/finished)."""
    return {"clock": results.clock_info(),
            "guest_time": {"started": guest_started, "finished": time.time()}}


def _trial_scope(tb: Any) -> AbstractContextManager[Any]:
    """The Testbed's nested undo scope for one trial (a stand-in testbed may have none)."""
    scope = getattr(tb, "scope", None)
    return scope() if scope is not None else nullcontext()


def _one(con: Any, run_id: str, exp: Experiment, t: TrialPlan, tb: Any, topo_doc: Any,
         qdiscs: Any, do_trial: Callable[[Any, TrialPlan, kinds.Context], kinds.Measured],
         ctx: kinds.Context, prog: Progress) -> int:
    prog.start(t.label)
    started = results.wall_time()
    guest_started = time.time()
    try:
        with _trial_scope(tb):  # what the trial starts (servers, files, rules) ends with it
            m = do_trial(tb, t, ctx)
    except Exception as exc:  # any failure is this trial's, never the run's
        reason = str(exc) if isinstance(exc, TestbedError) else f"{type(exc).__name__}: {exc}"
        row = results.TrialRow(
            t.key(run_id), run_id, exp.name, exp.profile, t.measurement.name, t.measurement.kind,
            t.point, t.group_key, t.repetition, started, results.wall_time(), "error", reason,
            {}, {"params": t.params, **_clock_doc(guest_started),
                 "description": t.measurement.description}, topo_doc, qdiscs)
        results.write_trial(con, row)
        prog.finish(ok=False)
        prog.note(f"trial failed: {t.label}: {reason}")
        return 1
    row = results.TrialRow(
        t.key(run_id), run_id, exp.name, exp.profile, t.measurement.name, t.measurement.kind,
        t.point, t.group_key, t.repetition, started, results.wall_time(), "ok", None,
        m.metrics, {"params": t.params, **m.result, **_clock_doc(guest_started),
                    "units": kinds.units_of(t.measurement.kind, m.metrics),
                    "description": t.measurement.description},
        topo_doc, qdiscs)
    results.write_trial(con, row)
    prog.finish()
    return 0
