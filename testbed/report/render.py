"""The report page: gathers figures, tables, claims ledger, provenance and failed trials per paper
and renders them into one self-contained HTML page (Jinja2), with PNG and SVG files beside it."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import papers, results
from testbed.report import ledger
from testbed.report.claims import STATUSES, ClaimResult, evaluate
from testbed.report.data import Dataset, load, run_clock, run_tier
from testbed.report.figures import Figure, draw
from testbed.report.tables import PaperTable, QuoteRow, quote_rows


@dataclass
class RunInfo:
    run_id: str
    experiment: str
    profile: str
    started: str
    finished: str
    ok: int
    errors: int
    planned: int
    tier: str
    clock: str
    shaping: str
    provenance: dict[str, Any]


@dataclass
class FailedTrial:
    experiment: str
    measurement: str
    point: str
    repetition: int
    error: str


@dataclass
class Section:
    """Everything the page shows for one paper (or one experiment of no paper)."""

    paper: str
    title: str
    experiments: list[str]
    figures: list[Figure] = field(default_factory=list)
    paper_tables: list[PaperTable] = field(default_factory=list)
    quotes: list[QuoteRow] = field(default_factory=list)
    claims: list[ClaimResult] = field(default_factory=list)
    feature_rows: list[Any] = field(default_factory=list)  # a paper's extras (gometz-2015)
    profile_rows: list[Any] = field(default_factory=list)
    claims_note: str = ""
    runs: list[RunInfo] = field(default_factory=list)
    failed: list[FailedTrial] = field(default_factory=list)
    left_out: list[FailedTrial] = field(default_factory=list)  # suspect: the host did not keep up
    trials_ok: int = 0

    @property
    def variant_labels(self) -> list[str]:
        """The other systems this section's claims are also judged on (Paper.variants)."""
        return list(dict.fromkeys(label for c in self.claims for label, _ in c.variants))

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(r.status for r in self.claims)
        return {s: c.get(s, 0) for s in STATUSES}


@dataclass
class Report:
    db: Path
    out: Path
    sections: list[Section]
    generated: str

    @property
    def html(self) -> Path:
        return self.out / "index.html"

    def by_construction(self) -> int:
        """Claims that hold by construction (not counted as confirmation)."""
        return sum(1 for s in self.sections for c in s.claims
                   if c.status == "holds" and not c.confirms)

    def counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for s in self.sections:
            total.update(s.counts)
        return {s: total.get(s, 0) for s in STATUSES}


def _evaluate(paper: papers.Paper, trials: Sequence[results.TrialRow],
              runs: Sequence[dict[str, Any]]) -> tuple[list[ClaimResult], str]:
    """The claims ledger, or why there is none (a check that raises is an "error" row of the
    ledger; this catches what breaks outside any one check)."""
    try:
        return evaluate(paper, trials, runs), ""
    except Exception as exc:  # a bug outside the checks must not hide the rest of the report
        return [], f"the claims ledger could not be evaluated: {type(exc).__name__}: {exc}"


def _ts(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "unfinished"


def _run_info(ds: Dataset, r: dict[str, Any]) -> RunInfo:
    prov = r["provenance"]
    shaping = sorted({ds.env(t).shaping for t in ds.trials if t.run_id == r["run_id"]})
    return RunInfo(r["run_id"], r["experiment"], r["profile"], _ts(r["started"]),
                   _ts(r["finished"]), r["ok"], r["errors"], r["planned"], run_tier(prov),
                   run_clock(prov), ", ".join(shaping) or "-", prov)


def _failed(trials: Sequence[results.TrialRow], status: str = "error") -> list[FailedTrial]:
    out = []
    for t in trials:
        if t.status != status:
            continue
        pt = ", ".join(f"{k}={v}" for k, v in t.point.items())
        out.append(FailedTrial(t.experiment, t.measurement, pt, t.repetition,
                               (t.error or "no reason recorded").strip()))
    return out


def _paper_section(ds: Dataset, paper: papers.Paper, names: list[str], out: Path) -> Section:
    trials = ds.trials_of(names)
    runs = ds.runs_of(names)
    sec = Section(paper.id, paper.title, names, runs=[_run_info(ds, r) for r in runs],
                  failed=_failed(trials), left_out=_failed(trials, "suspect"),
                  trials_ok=sum(1 for t in trials if t.status == "ok"))
    sec.figures = paper.figures(ds) if paper.figures else []
    for f in sec.figures:
        draw(f, out)
    sec.paper_tables = paper.tables(ds) if paper.tables else []
    sec.quotes = quote_rows(ds, paper.quotes)
    extras = paper.extras(ds, trials) if paper.extras else {}
    sec.feature_rows = extras.get("feature_rows", [])
    sec.profile_rows = extras.get("profile_rows", [])
    sec.claims, sec.claims_note = _evaluate(paper, trials, runs)
    return sec


def build(ds: Dataset, out: Path) -> Report:
    """Every section's data (figures drawn into `out`), ready for the template."""
    sections: list[Section] = []
    by_paper: dict[str, list[str]] = {}
    others: list[str] = []
    for e in ds.experiments():
        p = papers.paper_of(e)
        if p is None:
            others.append(e)
        else:
            by_paper.setdefault(p.id, []).append(e)
    for paper in papers.all_papers():
        if paper.id in by_paper:
            sections.append(_paper_section(ds, paper, by_paper[paper.id], out))
    for e in others:
        trials = ds.trials_of([e])
        sections.append(Section(
            f"experiment:{e}", e, [e], runs=[_run_info(ds, r) for r in ds.runs_of([e])],
            failed=_failed(trials), left_out=_failed(trials, "suspect"),
            trials_ok=sum(1 for t in trials if t.status == "ok"),
            claims_note="this experiment reproduces no paper: no claims"))
    return Report(ds.db, out, sections, time.strftime("%Y-%m-%d %H:%M:%S %Z"))


def fmt(v: Any, digits: int = 4) -> str:
    """A number for a table: 4 significant digits, no exponent for everyday magnitudes."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    x = float(v)
    if math.isnan(x):
        return "-"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag >= 6 or mag < -4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def render(report: Report) -> Path:
    """Write index.html into the report folder and return its path."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("testbed.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    page = env.get_template("report.html").render(report=report, statuses=STATUSES)
    report.out.mkdir(parents=True, exist_ok=True)
    report.html.write_text(page)
    return report.html


def write_report(db: Path, out: Path, run_ids: Sequence[str] = (),
                 experiments: Sequence[str] = ()) -> Report:
    """Load the selection from `db`, draw and tabulate it, and write `out`/index.html and
    `out`/ledger.json."""
    ds = load(db, run_ids, experiments)
    out.mkdir(parents=True, exist_ok=True)
    report = build(ds, out)
    render(report)
    ledger.write(report)
    return report
