"""The claims engine: a claim's declaration (`Claim`), its verdict (`Outcome`, `ClaimResult`),
the trials it is judged on (`Data`: never pooling tiers, clocks or shapers in one statistic), and
`evaluate`, which judges every claim of a registered paper (testbed.papers)."""


from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from testbed import units
from testbed.report.data import Env, trial_env
from testbed.results import TrialRow

if TYPE_CHECKING:
    from testbed.papers import Paper

Status = Literal["holds", "does not hold", "inconclusive", "not measured", "not measurable here",
                 "error"]
STATUSES: tuple[Status, ...] = ("holds", "does not hold", "inconclusive", "not measured",
                                "not measurable here", "error")

# Thresholds, named so that the evidence can quote them.
CLOSE = 0.05  # "very close", "similar", "no significant difference" (relative)
MOST = 0.75  # "almost all", "most" cells
NO_SERIALIZATION = ("the host tier shapes with tbf, which passes a packet on an idle link at once: "
                    "no per-packet serialization delay (the full-kernel tier's netem rate has it)")
LINUX_ROUTER = "a Linux router on this machine is not the paper's hardware router"
GENERATOR = "the Python UDP sender cannot offer every rate (limited_by = generator)"


@dataclass(frozen=True)
class Outcome:
    """A verdict: the status, its deciding numbers, the known reason, and where the engine
    computed them the number of observations, the effect, its 95 % interval and the tolerance."""

    status: Status
    evidence: str
    reason: str = ""
    n: int | None = None
    effect: float | None = None
    interval: tuple[float, float] | None = None
    tolerance: str = ""  # the tolerance the verdict used and where it comes from


def not_measured(missing: str) -> Outcome:
    """Nothing of the claim can be checked on these trials: say what is missing."""
    return Outcome("not measured", "", f"not measured: needs {missing}")


def verdict(ok: bool, evidence: str, reason: str = "") -> Outcome:
    return Outcome("holds" if ok else "does not hold", evidence, "" if ok else reason)


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, declared: its id and text (as ../shared/claims.md words it), the check
    that judges it, the tolerance and where it comes from, the evidence it needs, and what the
    emulated system makes of it (holds by construction; the paper's cause is absent here)."""

    id: str
    text: str
    check: Callable[[Data], Outcome]
    tolerance: str = ""  # e.g. "±10 % (the paper's Table I spread)"
    needs: str = ""  # the evidence: cells, repetitions
    construction: str = ""  # why it holds by construction here ("" when it does not)
    cause_absent: str = ""  # the paper's cause that the emulated system lacks ("" when none)
    effect: bool = False  # asserts an effect (the null-data tests feed data without it)


@dataclass(frozen=True)
class ClaimResult:
    """One claim of a paper, evaluated: its verdict on our trials and, where the paper prints
    numbers, on the paper's own numbers."""

    claim_id: str
    paper: str
    text: str
    status: Status
    evidence: str
    reason: str = ""
    n: int | None = None
    effect: float | None = None
    interval: tuple[float, float] | None = None
    tolerance: str = ""
    basis: str = ""  # "by construction: ...", "cause absent here: ...", or ""
    on_paper: Outcome | None = None  # the verdict on the paper's printed numbers
    variants: tuple[tuple[str, Outcome], ...] = ()  # (variant's label, its verdict): Paper.variants

    @property
    def confirms(self) -> bool:
        """A "holds" that counts as confirmation (not one that holds by construction)."""
        return self.status == "holds" and not self.basis.startswith("by construction")


# --- reading trials --------------------------------------------------------------------------

def param(row: TrialRow, key: str) -> Any:
    """A trial's parameter: swept (its point) or fixed (the stored resolved parameters)."""
    if key in row.point:
        return row.point[key]
    params = row.result.get("params") if isinstance(row.result, dict) else None
    return params.get(key) if isinstance(params, dict) else None


def moves_on_virtual_clock(row: TrialRow) -> bool:
    """Whether a trial's numbers move between runs even on the virtual clock: a feature of its
    topology says so (features.virtual_varies: a binding CPU budget; Jool, docs/vm.md)."""
    from testbed.features import virtual_varies

    topo = row.topology if isinstance(row.topology, Mapping) else {}
    return bool(virtual_varies(topo.get("features") or []))


def size_of(row: TrialRow) -> int | None:
    """The size a trial swept: ip_payload, frame_size, size or length, whichever it has."""
    for key in ("ip_payload", "frame_size", "size", "length"):
        v = param(row, key)
        if v is not None:
            return int(v)
    return None


def rate_bps(row: TrialRow) -> float | None:
    """The topology's link rate (bit/s) of a trial, or None when unshaped or unknown."""
    v = row.point.get("topology.rate")
    if v is None or str(v) in ("unlimited", "max", "0"):
        return None
    try:
        return units.rate(str(v), unlimited=False)
    except ValueError:
        return None


def rate_name(bps: float | None) -> str:
    if bps is None:
        return "unshaped"
    names = {10e6: "10 Mbit/s", 100e6: "100 Mbit/s", 1e9: "1 Gbit/s"}
    return names.get(bps, f"{bps / 1e6:g} Mbit/s")


class Data:
    """The ok trials of one paper's experiments, with grouping helpers. A cell (`cells`,
    `means`) never pools trials of different environments (tier, clock, shaper): where one
    cell was measured in several, the environment with the most trials is kept and the others
    are named in `notes` (which the ledger appends to the claim's evidence)."""

    def __init__(self, trials: Sequence[TrialRow], runs: Sequence[Mapping[str, Any]] = (),
                 exact: bool = False):
        self.rows = [t for t in trials if t.status == "ok"]
        self.exact = exact  # a paper's printed numbers: taken as they are, no noise to bound
        self.runs = list(runs)
        provs = {str(r.get("run_id")): r.get("provenance") or {} for r in self.runs}
        self._envs = {id(t): trial_env(t, provs.get(t.run_id, {})) for t in self.rows}
        self.notes: set[str] = set()

    def env(self, row: TrialRow) -> Env:
        """Where a trial was measured (tier, clock, shaper)."""
        return self._envs.get(id(row)) or trial_env(row, {})

    def exact_rows(self, rows: Iterable[TrialRow]) -> bool:
        """Numbers to take as they are: a paper's printed ones, or trials all measured on the
        virtual clock (the same numbers on every run, docs/vm.md: no noise to bound) — except
        where a CPU budget binds a router (its cgroup's periods fall differently against the
        traffic in each run, and what it forwards moves by 3-6 %) or through Jool (its OWD
        moves by up to 3 us between trials): `moves_on_virtual_clock`, docs/vm.md."""
        rows = list(rows)
        return self.exact or (bool(rows) and all(self.env(r).clock == "virtual"
                                                 and not moves_on_virtual_clock(r)
                                                 for r in rows))

    def select(self, kind: str, **where: Any) -> list[TrialRow]:
        out = []
        for r in self.rows:
            if r.kind != kind:
                continue
            if all(param(r, k.replace("__", ".")) == v for k, v in where.items()):
                out.append(r)
        return out

    def cells(self, rows: Iterable[TrialRow], metric: str | Callable[[TrialRow], float | None],
              key: Callable[[TrialRow], tuple[Any, ...] | None]
              ) -> dict[tuple[Any, ...], list[float]]:
        """metric values (a metric's name, or a function of the trial) grouped by key(row)
        (rows without the metric or key are left out), each cell from one environment only."""
        per: dict[tuple[Any, ...], dict[Env, list[float]]] = defaultdict(dict)
        for r in rows:
            k = key(r)
            v = metric(r) if callable(metric) else r.metrics.get(metric)
            if k is None or v is None or isinstance(v, bool) or not math.isfinite(float(v)):
                continue
            per[k].setdefault(self.env(r), []).append(float(v))
        out: dict[tuple[Any, ...], list[float]] = {}
        for k, by_env in per.items():
            ranked = sorted(by_env.items(), key=lambda kv: (-len(kv[1]), kv[0].label))
            out[k] = ranked[0][1]
            if len(ranked) > 1:
                name = metric if isinstance(metric, str) else getattr(metric, "__name__", "")
                self.notes.add(f"{name}: cells measured in several environments are judged "
                               f"on {ranked[0][0].label} only (never pooled; set aside: "
                               + ", ".join(e.label for e, _ in ranked[1:]) + ")")
        return out

    def means(self, rows: Iterable[TrialRow], metric: str,
              key: Callable[[TrialRow], tuple[Any, ...] | None]) -> dict[tuple[Any, ...], float]:
        return {k: statistics.fmean(v) for k, v in self.cells(rows, metric, key).items()}

    def shapers(self) -> set[str]:
        """The shaping qdiscs in force in these trials ('tbf', 'netem')."""
        kinds = set()
        for r in self.rows:
            for q in r.qdiscs or []:
                if isinstance(q, dict) and q.get("kind") in ("tbf", "netem"):
                    kinds.add(str(q["kind"]))
        return kinds

    def serialization_reason(self) -> str:
        """NO_SERIALIZATION when the links were shaped by tbf only, else ''."""
        s = self.shapers()
        return NO_SERIALIZATION if "tbf" in s and "netem" not in s else ""


def frac(n: int, d: int) -> str:
    return f"{n}/{d}"


def mbps(v: float) -> str:
    return f"{v / 1e6:.2f}"


def rel(a: float, b: float) -> float:
    """Relative difference of a to b (a/b - 1)."""
    return a / b - 1.0 if b else math.inf


def cross_os(_: Data) -> Outcome:
    return Outcome("not measurable here", "", "the emulator runs Linux only; other operating "
                   "systems' stacks are not emulated")


# --- judging ---------------------------------------------------------------------------------


def _judge(claim: Claim, d: Data) -> Outcome:
    """A claim's check on `d`; a check that raises is an error, shown with its exception."""
    d.notes.clear()
    try:
        o = claim.check(d)
    except Exception as exc:  # a bug in one check must not hide the rest of the ledger
        return Outcome("error", "", f"the check raised {type(exc).__name__}: {exc}")
    if d.notes and o.status not in ("not measured", "not measurable here"):
        o = replace(o, evidence=o.evidence + "; " + "; ".join(sorted(d.notes)))
    if not o.tolerance and claim.tolerance and o.status in ("holds", "does not hold",
                                                            "inconclusive"):
        o = replace(o, tolerance=claim.tolerance)
    return o


def _basis(claim: Claim) -> str:
    if claim.construction:
        return "by construction: " + claim.construction
    if claim.cause_absent:
        return "cause absent here: " + claim.cause_absent
    return ""


def judge(claim: Claim, paper: str, d: Data, printed: Data | None = None,
          variants: Sequence[tuple[str, Data]] = ()) -> ClaimResult:
    """One claim judged on `d` (and on the paper's printed numbers, and on each variant's
    trials, when given)."""
    o = _judge(claim, d)
    on_paper = _judge(claim, printed) if printed is not None else None
    if on_paper is not None and on_paper.status in ("not measured", "not measurable here"):
        on_paper = None  # the paper prints nothing this claim reads
    judged = tuple((label, _judge(claim, vd)) for label, vd in variants)
    return ClaimResult(claim.id, paper, claim.text, o.status, o.evidence, o.reason, o.n,
                       o.effect, o.interval, o.tolerance, _basis(claim), on_paper, judged)


@dataclass(frozen=True)
class Variant:
    """Another system the paper's claims are also judged on, side by side with the main verdict
    (e.g. dobrinov-2016 on a CPU-budgeted router): the trials of `experiment` whose point has
    every `where` value (a topology parameter as "topology.NAME"). Its trials never enter the
    main verdict."""

    label: str
    experiment: str
    where: Mapping[str, str] = field(default_factory=dict)

    def takes(self, row: TrialRow) -> bool:
        return row.experiment == self.experiment and all(
            str(row.point.get(k)) == v for k, v in self.where.items())


def evaluate(paper: str | Paper, trials: Sequence[TrialRow],
             runs: Sequence[Mapping[str, Any]] = ()) -> list[ClaimResult]:
    """Every claim of `paper` (an id of testbed.papers, or a Paper), in its order, judged on
    `trials` (failed ones are ignored), on the paper's printed numbers where it has them, and
    on each of its variants' trials (which the main verdict leaves out)."""
    from testbed import papers

    p = papers.get(paper) if isinstance(paper, str) else paper
    of_variant = {v.experiment for v in p.variants}
    d = Data([t for t in trials if t.experiment not in of_variant], runs)
    printed = Data(p.printed(), exact=True) if p.printed is not None else None
    variants = [(v.label, Data([t for t in trials if v.takes(t)], runs)) for v in p.variants
                if any(v.takes(t) for t in trials)]
    return [judge(c, p.id, d, printed, variants) for c in p.claims]


def printed_trial(paper: str, kind: str, point: dict[str, Any], metrics: dict[str, float],
                  result: dict[str, Any] | None = None) -> TrialRow:
    """One number a paper prints, as a trial of `kind` (run "paper"), for judging its claims on
    its own data."""
    key = f"{paper}/{kind}/" + ",".join(f"{k}={v}" for k, v in sorted(point.items()))
    return TrialRow(key, "paper", paper, "printed", kind, kind, dict(point), key, 0, 0.0, 0.0,
                    "ok", None, dict(metrics), {"params": {}, **(result or {})}, None, [])
