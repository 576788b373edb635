"""Experiment files read and checked (topology, sweeps, repetitions, measurements, profiles),
and the trials they expand to; `testbed.experiment` runs them."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed import results, sequential
from testbed.errors import SpecError, UsageError
from testbed.measure import kinds
from testbed.tomlfile import check_keys
from testbed.waiting import CLOCKS

TOP_KEYS = ("name", "description", "topology", "params", "sweep", "repetitions", "measurements",
            "quick", "paper", "clock")
"""`clock = ...` in an experiment file: the clock its numbers must be measured on (absent: any).
'virtual' is the full-kernel tier on QEMU's instruction counter (`testbed vm --clock virtual`),
which `testbed run` boots by itself."""
PROFILE_KEYS = ("repetitions", "params", "sweep", "measurements")
MEASUREMENT_META = ("kind", "description", "where", "repetitions", "precision")
PROFILES = ("full", "quick")
MAX_REPETITIONS = 1000
MAX_TRIALS = 100_000
MAX_TOPOLOGY_POINTS = 1000
COMPILE_CHECK_NODES = 64  # check_topologies compiles the address plan of topologies this small
SHIPPED_EXPERIMENTS = Path(__file__).resolve().parent / "experiments"  # package data


@dataclass(frozen=True)
class MeasurementSpec:
    """One measurement of an experiment: its kind, fixed parameters, and its own sweeps."""

    name: str
    kind: str
    params: dict[str, Any]  # defaults merged, list values removed (they are in `sweep`)
    sweep: dict[str, list[Any]]
    where: dict[str, list[Any]] = field(default_factory=dict)  # only at these topology points
    description: str = ""  # the experiment file's `description` of this measurement
    repetitions: int | None = None  # its own repetitions (else the experiment's)
    once: str = ""  # why each cell is measured once here (for_clock: exact on the virtual clock)
    varies: str = ""  # why it keeps its repetitions although its kind is exact there (for_clock)
    precision: sequential.Precision | None = None  # stop a cell's repetitions once it is precise

    def reps(self, default: int) -> int:
        """How many times each of its points is measured (at most, with a `precision` rule)."""
        return self.repetitions or default

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
    paper: str = ""  # the paper it reproduces (an id of a paper module in testbed/papers/), if any

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "file": self.file, "profile": self.profile,
            "description": self.description, "topology": self.topology, "params": self.params,
            "topo_sweep": self.topo_sweep, "meas_sweep": self.meas_sweep,
            "repetitions": self.repetitions, "clock": self.clock, "paper": self.paper,
            "measurements": [{"name": m.name, "kind": m.kind, "params": m.params,
                              "sweep": m.sweep, "where": m.where,
                              "description": m.description,
                              **({"repetitions": 1, "once": m.once} if m.once else {}),
                              **({"varies": m.varies} if m.varies else {}),
                              **({"precision": m.precision.to_dict()}
                                 if m.precision is not None and not m.once else {})}
                             for m in self.measurements],
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


def _table(d: Mapping[str, Any], key: str, file: str, prefix: str = "") -> dict[str, Any]:
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise SpecError(file, f"{prefix}{key}", "must be a table", f"[{prefix}{key}]")
    return dict(v)


def find_experiment(name: str) -> Path:
    """An experiment by path, or by name: experiments/NAME.toml in the current folder, then the
    experiments shipped with testbed (package data, found from any folder)."""
    p = Path(name)
    if p.suffix == ".toml" or "/" in name:
        if p.is_file():
            return p
        raise UsageError(f"no experiment file {name}",
                         hint="a path to an experiment file, or one of: " + ", ".join(
                             shipped_experiments()))
    for base in (Path("experiments"), SHIPPED_EXPERIMENTS):
        cand = base / f"{name}.toml"
        if cand.is_file():
            return cand
    raise UsageError(f"no experiment called {name!r}",
                     hint="known: " + ", ".join(shipped_experiments()))


def shipped_experiments() -> list[str]:
    return sorted(q.stem for q in SHIPPED_EXPERIMENTS.glob("*.toml"))


def load_experiment(path: str | Path, profile: str = "full") -> Experiment:
    """Read and validate an experiment file for `profile` ("full" or "quick"); creates nothing."""
    file = str(path)
    if profile not in PROFILES:
        raise UsageError(f"no profile {profile!r}", hint="full or quick")
    from testbed.tomlfile import read_toml

    raw = read_toml(Path(path), "experiment", "experiments/*.toml")
    if profile == "quick" and "quick" not in raw:
        raise SpecError(file, "quick", "this experiment has no quick profile",
                        "a [quick] table (fewer points, same shape), or run it without --quick")
    exp = experiment_from_dict(raw, file=file, profile=profile)
    check_selection(exp)
    return exp


def check_selection(exp: Experiment) -> None:
    """Every measurement's `where` names a topology point's key and selects at least one
    point: a selection that yields no trials is an error naming why, never `0 trials`."""
    points = list(itertools.islice(_iter_topology_points(exp), MAX_TOPOLOGY_POINTS + 1))
    given = {"topology"} | {f"topology.{k}" for k in exp.params} | set(exp.topo_sweep)
    for m in exp.measurements:
        key = f"measurements.{m.name}.where"
        for wk in m.where:
            if wk not in given:
                raise SpecError(exp.file, f"{key}.{wk}",
                                "no topology point has this key, so it selects nothing",
                                ", ".join(sorted(given)) + " (set it in [params] or [sweep])")
        if m.where and not any(m.applies(tp) for tp in points):
            seen = {wk: sorted({str(tp.topology if wk == "topology"
                                    else tp.params.get(wk.split(".", 1)[1])) for tp in points})
                    for wk in m.where}
            took = "; ".join(f"{k} is {v}" for k, v in seen.items())
            raise SpecError(exp.file, key, f"selects none of the {exp.profile} profile's "
                            f"topology points ({took})",
                            "values the sweep takes, or drop the measurement from this profile")


def experiment_from_dict(raw: Mapping[str, Any], *, file: str, profile: str = "full"
                         ) -> Experiment:
    """An experiment from its file's table (`load_experiment` reads the file), validated."""
    check_keys(raw, TOP_KEYS, file, "")
    name = raw.get("name", Path(file).stem)
    if not isinstance(name, str) or not name:
        raise SpecError(file, "name", "must be a non-empty string")
    if "topology" not in raw:
        raise SpecError(file, "topology", "missing", "a topology name such as chain")
    topology = _names(raw["topology"], file, "topology")
    clock = raw.get("clock")
    if clock is not None and clock not in CLOCKS:
        raise SpecError(file, "clock", f"{clock!r} is not a clock", " or ".join(CLOCKS))
    reps, params, sweep, meas_raw = _profile_view(raw, file, profile)
    topology, topo_sweep, meas_sweep = _split_sweep(sweep, topology, file)
    measurements = [_measurement(mname, mraw, meas_sweep, file)
                    for mname, mraw in meas_raw.items()]
    for k in meas_sweep:
        if not any(kinds.KINDS[m.kind].param(k) is not None for m in measurements):
            raise SpecError(file, f"sweep.{k}", "no measurement of this experiment takes it",
                            "topology, topology.<param>, or a parameter of a measurement")
    _check_plain(params, topo_sweep, file)
    exp = Experiment(
        name=name, file=file, profile=profile,
        description=_text(raw, "description", file, "a line of text"),
        topology=topology, params=params, topo_sweep=topo_sweep, meas_sweep=meas_sweep,
        repetitions=reps, measurements=measurements, raw=dict(raw), clock=clock,
        paper=_text(raw, "paper", file,
                    'the paper\'s id, e.g. "gometz-2015-ipv4-ipv6-open-source-routers"'),
    )
    total = count_trials(exp)
    if total > MAX_TRIALS:
        raise SpecError(file, "repetitions" if reps > 1 else "sweep",
                        f"{total} trials: more than {MAX_TRIALS}",
                        "fewer sweep values or repetitions (or split the experiment)")
    return exp


def _profile_view(raw: Mapping[str, Any], file: str, profile: str
                  ) -> tuple[int, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Repetitions, [params], [sweep] and [measurements] of `profile` (quick: the file's
    [quick] tables over the full ones)."""
    params = _table(raw, "params", file)
    sweep = _table(raw, "sweep", file)
    reps = raw.get("repetitions", 1)
    meas_raw = _table(raw, "measurements", file)
    quick = _table(raw, "quick", file)
    check_keys(quick, PROFILE_KEYS, file, "quick")
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
    return reps, params, sweep, meas_raw


def _split_sweep(sweep: Mapping[str, Any], topology: list[str], file: str
                 ) -> tuple[list[str], dict[str, list[Any]], dict[str, list[Any]]]:
    """[sweep] as the topologies, the topology parameters' sweeps and the measurements'."""
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
    return topology, topo_sweep, meas_sweep


def _measurement(mname: str, mraw: Any, meas_sweep: Mapping[str, list[Any]], file: str
                 ) -> MeasurementSpec:
    """[measurements.NAME]: its kind, parameters (every combination the trials will take
    validated), own sweeps, `where` and description."""
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
    return MeasurementSpec(mname, kind.name, merged, own_sweep, _where(mraw, key, file),
                           _text(mraw, "description", file, "a line of text", key),
                           _reps(mraw.get("repetitions"), file, f"{key}.repetitions"),
                           precision=sequential.parse(mraw.get("precision"), file,
                                                      f"{key}.precision",
                                                      [m.name for m in kind.metrics]))


def _reps(v: Any, file: str, key: str) -> int | None:
    """A measurement's own `repetitions` (None: the experiment's)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_REPETITIONS:
        raise SpecError(file, key, f"{v!r} is not a repetition count",
                        f"an integer from 1 to {MAX_REPETITIONS}")
    return v


def _where(mraw: Mapping[str, Any], key: str, file: str) -> dict[str, list[Any]]:
    """A measurement's `where`: the topology points it applies to."""
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
    return where


def _check_plain(params: Mapping[str, Any], topo_sweep: Mapping[str, list[Any]], file: str
                 ) -> None:
    """Topology parameters (fixed or swept) are plain values."""
    for k, v in params.items():
        if isinstance(v, list | dict):
            raise SpecError(file, f"params.{k}", "must be a plain value",
                            "a string, number or boolean (a list belongs in [sweep])")
    for k, vals in topo_sweep.items():
        for i, v in enumerate(vals):
            if isinstance(v, list | dict):
                raise SpecError(file, f"sweep.{k}[{i}]", "must be a plain value",
                                "a string, number or boolean")


def _text(d: Mapping[str, Any], key: str, file: str, allowed: str, prefix: str = "") -> str:
    """An optional string (empty when absent)."""
    value = d.get(key, "")
    if not isinstance(value, str):
        raise SpecError(file, f"{prefix}.{key}" if prefix else key, "must be a string", allowed)
    return value


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


def measurement_sweeps(exp: Experiment, m: MeasurementSpec) -> dict[str, list[Any]]:
    """What measurement `m` sweeps: the experiment's [sweep] values its kind accepts, then its
    own."""
    accepted = kinds.KINDS[m.kind].param_names
    return {k: v for k, v in exp.meas_sweep.items() if k in accepted} | m.sweep


EXACT_ONCE_ENV = "TESTBED_EXACT_ONCE"  # "0": repeat exact cells anyway (to show they agree)


def for_clock(exp: Experiment, clock: str | None) -> Experiment:
    """The experiment as it runs on `clock`. On the virtual clock a measurement whose kind is
    exact there for its parameters (`Kind.exact_on_virtual`) is measured once per cell: its
    repetitions would give the same numbers (docs/vm.md), so they are not run, and `once` says
    why (it is stored with the run). Except where it reaches a topology whose numbers move
    between runs there (a CPU budget, or a feature that says so: `Feature.virtual_varies`;
    `varies` then says why it keeps its repetitions) or with $TESTBED_EXACT_ONCE=0. Both the
    planner of a run and its workers call this, so that they list the same trials."""
    if clock != "virtual" or os.environ.get(EXACT_ONCE_ENV, "1") == "0":
        return exp
    varying = [(p, why) for p in _iter_topology_points(exp) if (why := _varies(exp, p))]
    out = []
    for m in exp.measurements:
        why = kinds.KINDS[m.kind].exact_on_virtual(m.params, measurement_sweeps(exp, m))
        if why and m.reps(exp.repetitions) > 1 and not m.once:
            moving = [f"{p.label}: {w}" for p, w in varying if m.applies(p)]
            if moving:
                m = replace(m, varies=moving[0])
            else:
                m = replace(m, repetitions=1, once=why, precision=None)
        out.append(m)
    return replace(exp, measurements=out)


def _varies(exp: Experiment, tp: TopologyPoint) -> str:
    """Why the numbers of topology point `tp` move between runs on the virtual clock, or ""
    (an enabled feature that says so, e.g. a binding CPU budget: features.virtual_varies)."""
    from testbed import features
    from testbed.topology import find_topology, load_topology

    try:
        topo = load_topology(find_topology(tp.topology, Path(exp.file).resolve()),
                             {k: param_text(v) for k, v in tp.params.items()})
    except SpecError:
        return ""  # check_topologies reports it, with the experiment's key
    return features.virtual_varies(topo.features_list) if topo.features_list else ""


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
            sweeps = measurement_sweeps(exp, m)
            total += math.prod(len(v) for v in sweeps.values()) * m.reps(exp.repetitions)
            if total > MAX_TRIALS:
                return total
    return total


def check_topologies(exp: Experiment) -> None:
    """Load and compile every topology point (pure), and check each measurement's nodes.

    Both `testbed run` and `testbed run --dry-run` call this before anything else, so
    the dry run refuses exactly what the real run would."""
    from testbed.plan import compile_plan
    from testbed.topology import find_topology, load_topology

    base = Path(exp.file).resolve()
    for tp in _iter_topology_points(exp):
        try:
            path = find_topology(tp.topology, base)
        except SpecError as exc:
            key = "sweep.topology" if "topology" in tp.swept else "topology"
            raise SpecError(exp.file, key, exc.problem, exc.allowed) from None
        overrides = {k: param_text(v) for k, v in tp.params.items()}
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
            sweeps = measurement_sweeps(exp, m)
            for combo, rep in _order(sweeps, m.reps(exp.repetitions), rounds=m.precision is None):
                params = {**m.params, **combo}
                point = {"topology": tp.topology, **{f"topology.{k}": v for k, v in
                                                     sorted(tp.params.items())}, **combo}
                yield TrialPlan(tp, m, params, point, rep)


def _order(sweeps: Mapping[str, list[Any]], reps: int, *, rounds: bool
           ) -> Iterator[tuple[dict[str, Any], int]]:
    """A measurement's (cell, repetition) pairs in the order they run. In rounds (every cell
    once, then every cell again), so that the host's drift during a measurement falls on every
    cell alike, as scatter inside each cell, not as a difference between cells that a test
    takes for an effect (do:15's straight line); with a `precision` rule a cell's repetitions
    run in a row, since it decides after each whether the cell needs more."""
    if rounds:
        yield from ((combo, rep) for rep in range(reps) for combo in _product(sweeps))
    else:
        yield from ((combo, rep) for combo in _product(sweeps) for rep in range(reps))


def param_text(v: Any) -> str:
    """A topology parameter as the topology file's `${param}` reads it (booleans lowercase)."""
    return str(v).lower() if isinstance(v, bool) else str(v)
