"""Experiment files: topology, sweeps, repetitions, measurements, profiles; the trial loop."""

from __future__ import annotations

import itertools
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import results
from testbed.errors import SpecError, TestbedError, UsageError
from testbed.measure import runners
from testbed.progress import Progress

TOP_KEYS = ("name", "description", "topology", "params", "sweep", "repetitions", "measurements",
            "quick", "paper")
PROFILE_KEYS = ("repetitions", "params", "sweep", "measurements")
MEASUREMENT_META = ("kind", "description", "where")
PROFILES = ("full", "quick")
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class MeasurementSpec:
    """One measurement of an experiment: its kind, fixed parameters, and its own sweeps."""

    name: str
    kind: str
    params: dict[str, Any]  # defaults merged, list values removed (they are in `sweep`)
    sweep: dict[str, list[Any]]
    where: dict[str, list[Any]] = field(default_factory=dict)  # only at these topology points

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "file": self.file, "profile": self.profile,
            "description": self.description, "topology": self.topology, "params": self.params,
            "topo_sweep": self.topo_sweep, "meas_sweep": self.meas_sweep,
            "repetitions": self.repetitions,
            "measurements": [{"name": m.name, "kind": m.kind, "params": m.params,
                              "sweep": m.sweep, "where": m.where} for m in self.measurements],
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
            where = f"{prefix}.{k}" if prefix else k
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
    try:
        raw = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SpecError(file, "", "no such experiment file", "experiments/*.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(file, "", f"not valid TOML: {exc}", "TOML syntax") from None
    return experiment_from_dict(raw, file=file, profile=profile)


def experiment_from_dict(raw: Mapping[str, Any], *, file: str, profile: str = "full"
                         ) -> Experiment:
    _check_keys(raw, TOP_KEYS, file, "")
    name = raw.get("name", Path(file).stem)
    if not isinstance(name, str) or not name:
        raise SpecError(file, "name", "must be a non-empty string")
    if "topology" not in raw:
        raise SpecError(file, "topology", "missing", "a topology name such as chain")
    topology = [str(t) for t in _as_list(raw["topology"])]
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
            meas_raw[mname] = {**meas_raw[mname], **over}
    if not isinstance(reps, int) or reps < 1:
        raise SpecError(file, "repetitions", f"{reps!r} must be a positive integer")
    if not meas_raw:
        raise SpecError(file, "measurements", "no measurements", "[measurements.NAME] tables")

    topo_sweep: dict[str, list[Any]] = {}
    meas_sweep: dict[str, list[Any]] = {}
    for k, v in sweep.items():
        values = _as_list(v)
        if not values:
            raise SpecError(file, f"sweep.{k}", "an empty list sweeps nothing")
        if k == "topology":
            topology = [str(t) for t in values]
        elif k.startswith("topology."):
            topo_sweep[k] = values
        else:
            meas_sweep[k] = values

    measurements: list[MeasurementSpec] = []
    for mname, mraw in meas_raw.items():
        key = f"measurements.{mname}"
        if not isinstance(mraw, dict):
            raise SpecError(file, key, "must be a table", f"[{key}] with kind = ...")
        kind = mraw.get("kind")
        if not isinstance(kind, str):
            raise SpecError(file, f"{key}.kind", "missing", ", ".join(runners.KINDS))
        given = {k: v for k, v in mraw.items() if k not in MEASUREMENT_META}
        own_sweep = {k: v for k, v in given.items() if isinstance(v, list)
                     and k != "cpu_processes"}
        for k, vals in own_sweep.items():
            if not vals:
                raise SpecError(file, f"{key}.{k}", "an empty list sweeps nothing")
        fixed = {k: v for k, v in given.items() if k not in own_sweep}
        accepted = set(runners.KINDS[kind].params) if kind in runners.KINDS else set()
        relevant = {k: v for k, v in meas_sweep.items() if k in accepted}
        for k in relevant:
            if k in given:  # the global sweep would silently replace the measurement's own value
                raise SpecError(file, f"{key}.{k}",
                                f"is also swept by [sweep] {k} = {meas_sweep[k]!r}, which would "
                                "override it", f"move `{k}` out of [sweep] into the "
                                "measurements that sweep it")
        # validate every combination the trials will take (sizes against the IP version, ...)
        for combo in itertools.islice(_product({**relevant, **own_sweep}), 10000):
            runners.validate_params(kind, {**fixed, **combo}, file, key)
        merged = runners.validate_params(
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
        measurements.append(MeasurementSpec(mname, kind, merged, own_sweep, where))
    for k in meas_sweep:
        if not any(k in runners.KINDS[m.kind].params for m in measurements):
            raise SpecError(file, f"sweep.{k}", "no measurement of this experiment takes it",
                            "topology, topology.<param>, or a parameter of a measurement")
    return Experiment(
        name=name, file=file, profile=profile, description=str(raw.get("description", "")),
        topology=topology, params=params, topo_sweep=topo_sweep, meas_sweep=meas_sweep,
        repetitions=reps, measurements=measurements, raw=dict(raw),
    )


# --- expansion --------------------------------------------------------------------------------


def _product(d: Mapping[str, list[Any]]) -> Iterator[dict[str, Any]]:
    keys = list(d)
    for combo in itertools.product(*(d[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def topology_points(exp: Experiment) -> list[TopologyPoint]:
    pts = []
    for topo in exp.topology:
        for combo in _product(exp.topo_sweep):
            params = dict(exp.params)
            params.update({k.split(".", 1)[1]: v for k, v in combo.items()})
            swept = ({"topology": topo} if len(exp.topology) > 1 else {}) | combo
            pts.append(TopologyPoint(topo, params, swept))
    return pts


def plan(exp: Experiment) -> list[TrialPlan]:
    """Every trial, grouped by topology point so each topology is built once."""
    out = []
    for tp in topology_points(exp):
        for m in exp.measurements:
            if not m.applies(tp):
                continue
            accepted = runners.KINDS[m.kind].params
            sweeps = {k: v for k, v in exp.meas_sweep.items() if k in accepted} | m.sweep
            for combo in _product(sweeps):
                params = {**m.params, **combo}
                point = {"topology": tp.topology, **{f"topology.{k}": v for k, v in
                                                     sorted(tp.params.items())}, **combo}
                for rep in range(exp.repetitions):
                    out.append(TrialPlan(tp, m, params, point, rep))
    return out


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
    ctx: runners.Context | None = None,
    run_trial: Callable[[Any, TrialPlan, runners.Context], runners.Measured] | None = None,
) -> RunSummary:
    """Run every trial of `exp`, storing each in `db` as it finishes; with `resume`, continue
    the last unfinished run of the same experiment and profile, skipping its finished trials."""
    trials = plan(exp)
    ctx = ctx or runners.Context()
    base = Path(exp.file).resolve()

    def default_trial(tb: Any, t: TrialPlan, c: runners.Context) -> runners.Measured:
        return runners.KINDS[t.measurement.kind].runner(tb, t.params, c)

    do_trial = run_trial or default_trial
    with closing(results.connect(db)) as con:
        run_id = results.unfinished_run(con, exp.name, exp.profile) if resume else None
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
            except TestbedError as exc:
                # the topology could not be built (or torn down): every trial left says why
                for t in members:
                    key = t.key(run_id)
                    if key in results.done_keys(con, run_id):
                        continue
                    now = time.time()
                    results.write_trial(con, results.TrialRow(
                        key, run_id, exp.name, exp.profile, t.measurement.name,
                        t.measurement.kind, t.point, t.group_key, t.repetition, now, now,
                        "error", f"topology {tp.label}: {exc}", {}, {}, {}, []))
                    prog.finish(ok=False)
                    failed += 1
                prog.note(f"topology {tp.label} failed: {exc}")
        prog.close()
        if not todo or all(t.key(run_id) in results.done_keys(con, run_id) for t in trials):
            results.finish_run(con, run_id)
        return RunSummary(run_id, len(trials), len(trials) - len(todo), len(todo) - failed,
                          failed, db)


def _one(con: Any, run_id: str, exp: Experiment, t: TrialPlan, tb: Any, topo_doc: Any,
         qdiscs: Any, do_trial: Callable[[Any, TrialPlan, runners.Context], runners.Measured],
         ctx: runners.Context, prog: Progress) -> int:
    prog.start(t.label)
    started = time.time()
    try:
        m = do_trial(tb, t, ctx)
    except Exception as exc:  # any failure is this trial's, never the run's
        reason = str(exc) if isinstance(exc, TestbedError) else f"{type(exc).__name__}: {exc}"
        row = results.TrialRow(
            t.key(run_id), run_id, exp.name, exp.profile, t.measurement.name, t.measurement.kind,
            t.point, t.group_key, t.repetition, started, time.time(), "error", reason,
            {}, {"params": t.params}, topo_doc, qdiscs)
        results.write_trial(con, row)
        prog.finish(ok=False)
        prog.note(f"trial failed: {t.label}: {reason}")
        return 1
    row = results.TrialRow(
        t.key(run_id), run_id, exp.name, exp.profile, t.measurement.name, t.measurement.kind,
        t.point, t.group_key, t.repetition, started, time.time(), "ok", None,
        m.metrics, {"params": t.params, **m.result}, topo_doc, qdiscs)
    results.write_trial(con, row)
    prog.finish()
    return 0
