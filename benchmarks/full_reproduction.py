"""Benchmark: what a full reproduction costs (issue 29) — trials and time per paper, before and
after measuring exact virtual-clock cells once, and whether those cells' repetitions differ.

Usage (from the checkout):

    .venv/bin/python benchmarks/full_reproduction.py [--db QUICK.sqlite ...] [--workers 2]
        [--check-exact N] [--json FILE]

Part 1 (no runs): per paper, the full profile's trials as `testbed reproduce PAPER --dry-run`
plans them on this machine, host and VM tier, with every repetition (before,
$TESTBED_EXACT_ONCE=0) and with each exact virtual-clock cell once (after, the default; see
`experiment_spec.for_clock`). With `--db` (databases of earlier runs of the papers, e.g. their
quick profiles) it also projects the wall time: each measurement's median wall time per trial
in those runs times its full trials, the VM tier's share divided by `--workers` guests side by
side. Quick trials are shorter than full ones (durations, counts), so the projection is a
lower bound; it shows where the time goes and what a cut saves.

Part 3 (`--compare-runs BEFORE AFTER`): two databases of full runs of one paper, before and
after a cut (e.g. results/reproductions/PAPER.sqlite kept from the published run, and the
next): per measurement the trials' summed wall time before and after and the ratio, and how
many cells have the same median of their primary metric (throughput, or the median RTT/OWD)
with the largest relative difference; then the runs' spans.

Part 4 (always; no runs): the full runs measured — every version of each published
docs/reproductions/PAPER/run.json in git's history (`git log`), plus any `--full-db DB` (a full
run's database not published, e.g. a second run): per paper the first and the latest such run's
trials, wall time and trials per hour, the ratio of their wall times, and what the five cost
together where each was measured (the latest run), against the 60 minutes issue 29 asks for.

Part 5 (always; no runs): the floor on this machine — per paper, the seconds its real-clock
(host tier) trials must at least send traffic: each cell's fewest trials (its repetitions, or
its `precision` rule's `after`) times its `duration`, one search step for the searching kinds,
nothing for kinds that have no `duration` (ping-pong counts, packet counts, restarts): a lower
bound. Real-clock trials cannot share this machine's CPUs (docs/parallel.md: `--workers` on
the real clock is refused on 2 cores), so no schedule here beats that sum, whatever the guests
cost.

Part 2 (`--check-exact N [--grid transition]`, as root; boots virtual-clock guests): the first
N cells of gamess-morales' OWD grid (IPv4, ethernet, routers 0.., payloads 10..1480 B, 1000
exchanges; or quintero-2016's six testbeds, UDP 50 and 1500 B, with `--grid transition`),
each measured three times in one guest with $TESTBED_EXACT_ONCE=0, then the same cells once
each in a second guest (the default), and per cell: the three medians' spread and the single
run's difference from their mean. Target: within 0.1 µs or 0.01 %, which is what measuring a
cell once must not lose.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import closing
from pathlib import Path
from typing import Any

from testbed import papers, results
from testbed.capabilities import missing
from testbed.experiment_spec import (
    EXACT_ONCE_ENV,
    TrialPlan,
    find_experiment,
    load_experiment,
    plan,
)
from testbed.tiers import choose

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ("gamess-morales", "zeadally-2004", "quintero-2016", "dobrinov-2016", "gometz-2015")


def plan_counts(paper: str, exact_once: bool) -> list[dict[str, Any]]:
    """(experiment, measurement, tier, trials) of the paper's full profile."""
    old = os.environ.get(EXACT_ONCE_ENV)
    os.environ[EXACT_ONCE_ENV] = "1" if exact_once else "0"
    try:
        out = []
        for name in papers.get(paper).experiments:
            exp = load_experiment(find_experiment(name), "full")
            for c in choose(exp, missing):
                out.append({"experiment": c.experiment, "measurement": c.measurement,
                            "tier": c.tier, "trials": c.trials})
        return out
    finally:
        if old is None:
            os.environ.pop(EXACT_ONCE_ENV, None)
        else:
            os.environ[EXACT_ONCE_ENV] = old


def trial_costs(dbs: list[Path]) -> dict[tuple[str, str], float]:
    """(experiment, measurement) -> median wall seconds per ok trial in these databases."""
    walls: dict[tuple[str, str], list[float]] = defaultdict(list)
    for db in dbs:
        with closing(results.connect(db)) as con:
            for t in results.trials(con):
                if t.status == "ok" and t.finished > t.started:
                    walls[(t.experiment, t.measurement)].append(t.finished - t.started)
    return {k: statistics.median(v) for k, v in walls.items()}


def projection(rows: list[dict[str, Any]], costs: dict[tuple[str, str], float],
               workers: int) -> tuple[float, int]:
    """(projected seconds, trials without a measured cost)."""
    total, unknown = 0.0, 0
    for r in rows:
        c = costs.get((r["experiment"], r["measurement"]))
        if c is None:
            unknown += r["trials"]
            continue
        total += r["trials"] * c / (workers if r["tier"] == "vm" else 1)
    return total, unknown


def hours(s: float) -> str:
    return f"{s / 3600:.2f} h"


def part1(a: argparse.Namespace) -> dict[str, Any]:
    costs = trial_costs(a.db) if a.db else {}
    doc: dict[str, Any] = {}
    print(f"{'paper':<16} {'trials before':>13} {'after':>7} {'ratio':>6}   "
          f"{'VM before':>9} {'after':>6}" + (f"   {'projected before':>16} {'after':>9} "
                                               f"{'ratio':>6}" if costs else ""))
    sums = [0, 0, 0.0, 0.0]
    for paper in PAPERS:
        before, after = plan_counts(paper, False), plan_counts(paper, True)
        nb, na = (sum(r["trials"] for r in x) for x in (before, after))
        vb, va = (sum(r["trials"] for r in x if r["tier"] == "vm") for x in (before, after))
        line = f"{paper:<16} {nb:>13} {na:>7} {na / nb:>6.2f}   {vb:>9} {va:>6}"
        entry: dict[str, Any] = {"trials_before": nb, "trials_after": na,
                                 "vm_before": vb, "vm_after": va}
        sums[0] += nb
        sums[1] += na
        if costs:
            (pb, ub), (pa, _) = (projection(x, costs, a.workers) for x in (before, after))
            line += f"   {hours(pb):>16} {hours(pa):>9} {pa / pb if pb else 0:>6.2f}"
            if ub:
                line += f"   ({ub} trials with no cost in --db)"
            entry |= {"projected_before_s": round(pb), "projected_after_s": round(pa),
                      "trials_without_cost": ub}
            sums[2] += pb
            sums[3] += pa
        print(line)
        doc[paper] = entry
    line = f"{'all five':<16} {sums[0]:>13} {sums[1]:>7} {sums[1] / sums[0]:>6.2f}"
    if costs:
        line += f"   {'':>9} {'':>6}   {hours(sums[2]):>16} {hours(sums[3]):>9} " \
                f"{sums[3] / sums[2] if sums[2] else 0:>6.2f}"
    print(line)
    return doc


CHECK_TOML = """\
name = "exact-once-check"
description = "benchmarks/full_reproduction.py: OWD cells repeated on the virtual clock"
topology = "chain"
repetitions = {reps}

[params]
rate = "ethernet"
mtu = 1500

[sweep]
"topology.routers" = {routers}

[measurements.owd_v4]
kind = "pingpong"
ip = 4
protocol = "udp"
ip_payload = {payloads}
count = 1000
"""


CHECK_TOML_TRANSITION = """\
name = "exact-once-check"
description = "benchmarks/full_reproduction.py: quintero's OWD cells repeated on the virtual clock"
topology = ["native4", "native6", "6to4", "isatap", "nat64-tayga", "nat64-jool"]
repetitions = {reps}

[params]
rate = "ethernet"

[measurements.owd_v4]
kind = "pingpong"
where = {{ topology = ["native4"] }}
ip = 4
protocol = "udp"
size = {payloads}
count = 1000

[measurements.owd_v6]
kind = "pingpong"
where = {{ topology = ["native6", "6to4", "isatap", "nat64-tayga"] }}
ip = 6
protocol = "udp"
size = {payloads}
count = 1000

# its own measurement, as in experiments/transition.toml: Jool's cells are repeated even in
# the "once" run (its OWD moves, Feature.virtual_varies), the others' measured once
[measurements.owd_v6_jool]
kind = "pingpong"
where = {{ topology = ["nat64-jool"] }}
ip = 6
protocol = "udp"
size = {payloads}
count = 1000
"""
GRIDS = {"chain": (CHECK_TOML, [10, 100, 400, 700, 1000, 1480], 6),
         "transition": (CHECK_TOML_TRANSITION, [50, 1500], 1)}
"""--check-exact's grids: gamess-morales' chain (routers 0.. x payloads) and quintero-2016's six
testbeds (their UDP OWD at 50 and 1500 B; Jool's moves, docs/vm.md)."""


def medians(db: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    with closing(results.connect(db)) as con:
        for t in results.trials(con):
            if t.status == "ok":
                out[t.group_key].append(t.metrics["owd_median_us"])
    return out


def part2(a: argparse.Namespace) -> dict[str, Any]:
    template, payloads, nrouters = GRIDS[a.grid]
    cells = [(r, p) for r in range(nrouters) for p in payloads][: a.check_exact]
    routers = sorted({r for r, _ in cells})
    sizes = sorted({p for _, p in cells})
    tb = [str(ROOT / ".venv" / "bin" / "testbed")]
    if not Path(tb[0]).exists():
        tb = [sys.executable, "-m", "testbed.cli"]
    runs: dict[str, dict[str, list[float]]] = {}
    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tb-exact-") as tmp:
        for label, reps, once in (("repeated", 3, "0"), ("once", 3, "1")):
            f = Path(tmp) / f"{label}.toml"
            f.write_text(template.format(reps=reps, routers=routers, payloads=sizes))
            db = Path(tmp) / f"{label}.sqlite"
            t0 = time.monotonic()
            subprocess.run([*tb, "run", str(f), "--clock", "virtual", "--db", str(db)],
                           cwd=ROOT, env={**os.environ, EXACT_ONCE_ENV: once}, check=True)
            walls[label] = time.monotonic() - t0
            runs[label] = medians(db)
    print(f"\n{'cell':<44} {'3 repetitions (µs)':>32} {'spread':>8} {'once':>11} "
          f"{'once - mean':>11}")
    worst = 0.0
    ok = 0
    for key, vals in sorted(runs["repeated"].items()):
        one = runs["once"].get(key, [float("nan")])
        mean = statistics.fmean(vals)
        spread = max(vals) - min(vals)
        diff = one[0] - mean
        limit = max(0.1, 1e-4 * mean)
        ok += spread <= limit and abs(diff) <= limit
        worst = max(worst, spread, abs(diff))
        print(f"{key[:44]:<44} {' '.join(f'{v:.3f}' for v in vals):>32} {spread:>8.3f} "
              f"{one[0]:>11.3f} {diff:>+11.3f}   ({len(one)} trial)")
    n = len(runs["repeated"])
    print(f"{ok} of {n} cells within 0.1 µs or 0.01 % (worst {worst:.3f} µs); wall time: "
          f"3 repetitions {walls['repeated']:.0f} s, once {walls['once']:.0f} s "
          f"({walls['once'] / walls['repeated']:.2f})")
    return {"cells": n, "within": ok, "worst_us": worst, "wall_s": walls,
            "medians": runs}


PRIMARY = ("throughput_bps", "receiver_bps", "rtt_median_us", "owd_median_us", "rtt_median_ms")
"""The metric a cell is compared on in part 3 (the first one a trial has)."""


def run_walls(db: Path) -> dict[str, Any]:
    """Per measurement: ok trials, summed trial seconds, and per cell (group) the primary
    metric of each repetition; plus the run's span (first start to last finish)."""
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"trials": 0, "seconds": 0.0,
                                                          "cells": defaultdict(list)})
    first, last = float("inf"), 0.0
    with closing(results.connect(db)) as con:
        for t in results.trials(con):
            if t.status != "ok":
                continue
            m = per[f"{t.experiment}/{t.measurement}"]
            m["trials"] += 1
            m["seconds"] += t.finished - t.started
            first, last = min(first, t.started), max(last, t.finished)
            key = next((k for k in PRIMARY if k in t.metrics), None)
            if key is not None:
                m["cells"][t.group_key].append(float(t.metrics[key]))
    return {"measurements": per, "span_s": max(0.0, last - first)}


def part3(before: Path, after: Path) -> dict[str, Any]:
    """Two runs of one profile (before and after a cut): time per measurement and ratio, and
    how many cells have the same median of their primary metric (and the largest difference)."""
    b, a = run_walls(before), run_walls(after)
    print(f"\n{'measurement':<34} {'trials':>6} {'before':>9} {'after':>9} {'ratio':>6}   "
          f"{'cells same median':>17} {'largest difference':>18}")
    doc: dict[str, Any] = {}
    for name in sorted(set(b["measurements"]) | set(a["measurements"])):
        mb, ma = b["measurements"].get(name), a["measurements"].get(name)
        if mb is None or ma is None:
            print(f"{name:<34} only in {'after' if mb is None else 'before'}")
            continue
        same = n = 0
        worst = 0.0
        for cell, vals in mb["cells"].items():
            other = ma["cells"].get(cell)
            if not other:
                continue
            n += 1
            x, y = statistics.median(vals), statistics.median(other)
            same += x == y
            if x:
                worst = max(worst, abs(y - x) / abs(x))
        ratio = ma["seconds"] / mb["seconds"] if mb["seconds"] else 0.0
        print(f"{name:<34} {ma['trials']:>6} {mb['seconds'] / 60:>7.1f} m "
              f"{ma['seconds'] / 60:>7.1f} m {ratio:>6.2f}   {f'{same} of {n}':>17} "
              f"{100 * worst:>16.2f} %")
        doc[name] = {"trials": ma["trials"], "before_s": round(mb["seconds"], 1),
                     "after_s": round(ma["seconds"], 1), "cells": n, "same_median": same,
                     "largest_difference": worst}
    print(f"{'run (first start to last finish)':<34} {'':>6} {b['span_s'] / 60:>7.1f} m "
          f"{a['span_s'] / 60:>7.1f} m {a['span_s'] / b['span_s'] if b['span_s'] else 0:>6.2f}")
    doc["span_s"] = {"before": round(b["span_s"]), "after": round(a["span_s"])}
    return doc


def published(paper: str) -> list[dict[str, Any]]:
    """Every distinct full run published for `paper`, oldest first (git history of its
    run.json; a report written again from the same run counts once)."""
    path = f"docs/reproductions/{paper}/run.json"
    log = subprocess.run(["git", "log", "--reverse", "--format=%H", "--", path], cwd=ROOT,
                         capture_output=True, text=True).stdout.split()
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for rev in log:
        shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True,
                               text=True)
        if shown.returncode == 0:
            r = json.loads(shown.stdout)
            seen.setdefault((r["commit"], int(r["trials_ok"])), r)
    return [r for r in seen.values() if r.get("profile") == "full"]


def db_run(db: Path) -> tuple[str, dict[str, Any]] | None:
    """A full run's database as a run.json-like record: (paper, {commit, wall_s, trials_ok})."""
    with closing(results.connect(db)) as con:
        runs = [r for r in results.runs(con) if r["profile"] == "full"]
        rows = [t for t in results.trials(con) if t.status == "ok"]
    if not runs or not rows:
        return None
    paper = next((pid for pid in PAPERS
                  if runs[0]["experiment"] in papers.get(pid).experiments), None)
    if paper is None:
        return None
    commit = str(runs[0]["provenance"].get("git_revision") or "?")[:7]
    span = max(t.finished for t in rows) - min(t.started for t in rows)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(runs[0]["started"]))
    return paper, {"commit": commit, "wall_s": int(span), "trials_ok": len(rows), "date": when}


def part4(extra: list[Path]) -> dict[str, Any]:
    """The full runs measured: per paper the first and the latest, and the five together."""
    runs = {paper: published(paper) for paper in PAPERS}
    for db in extra:
        got = db_run(db)
        if got is not None and got[0] in runs:
            runs[got[0]].append(got[1])
            runs[got[0]].sort(key=lambda r: str(r.get("date", "")))
    print("\nfull runs measured (published reports' history, and --full-db)\n"
          f"{'paper':<16} {'runs':>4}   {'first: trials':>13} {'wall':>8} {'trials/h':>8}   "
          f"{'latest: trials':>14} {'wall':>8} {'trials/h':>8} {'ratio':>6}")
    doc: dict[str, Any] = {}
    total, measured = 0, 0
    for paper, rs in runs.items():
        if not rs:
            print(f"{paper:<16} {0:>4}   not run full yet")
            continue
        b, a = rs[0], rs[-1]
        line = f"{paper:<16} {len(rs):>4}   "
        for r, width in ((b, 13), (a, 14)):
            w = int(r["wall_s"])
            line += (f"{int(r['trials_ok']):>{width}} {w // 60:>5}m{w % 60:02d} "
                     f"{3600 * int(r['trials_ok']) / w if w else 0:>8.0f}   ")
        print(line.rstrip() + f" {int(a['wall_s']) / int(b['wall_s']):>6.2f}")
        doc[paper] = {"first": b, "latest": a, "runs": len(rs)}
        total += int(a["wall_s"])
        measured += 1
    print(f"{'measured papers':<16} {measured:>4}   latest runs together: {total / 60:.0f} min "
          f"(issue 29 asks for all five in 60)")
    return doc


def host_floor(paper: str) -> dict[str, float]:
    """Per host-tier measurement (EXPERIMENT/MEASUREMENT): the least traffic seconds its cells
    send on the real clock in the full profile (Part 5)."""
    out: dict[str, float] = defaultdict(float)
    for name in papers.get(paper).experiments:
        exp = load_experiment(find_experiment(name), "full")
        host = {(c.measurement, t) for c in choose(exp, missing) if c.tier == "host"
                for t in c.topologies}
        cells: dict[tuple[str, str], list[TrialPlan]] = defaultdict(list)
        for t in plan(exp):
            if (t.measurement.name, t.topo.topology) in host:
                cells[(t.measurement.name, t.group_key)].append(t)
        for (mname, _), cell in cells.items():
            rule = cell[0].measurement.precision
            least = min(len(cell), rule.after) if rule is not None else len(cell)
            out[f"{name}/{mname}"] += least * float(cell[0].params.get("duration") or 0)
    return dict(out)


def part5() -> dict[str, Any]:
    """The real-clock floor per paper and for the five together, against 60 minutes."""
    print("\nfloor: real-clock (host tier) traffic seconds at the fewest trials each cell runs "
          "(a lower bound: no per-trial overhead, one search step, 0 s for kinds with no "
          "duration)\n"
          f"{'paper':<16} {'floor':>8}   largest parts")
    doc: dict[str, Any] = {}
    total = 0.0
    for paper in PAPERS:
        parts = host_floor(paper)
        s = sum(parts.values())
        total += s
        top = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        print(f"{paper:<16} {s / 60:>6.1f} m   "
              + ", ".join(f"{k.split('/', 1)[1]} {v / 60:.1f} m" for k, v in top if v))
        doc[paper] = {"floor_s": round(s), "parts_s": {k: round(v) for k, v in parts.items()}}
    print(f"{'all five':<16} {total / 60:>6.1f} m   (issue 29 asks for all five, host and "
          "guests, in 60 min on this 2-core machine)")
    doc["total_floor_s"] = round(total)
    return doc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", type=Path, action="append", default=[],
                   help="a database of earlier runs: per-trial costs for the projection")
    p.add_argument("--workers", type=int, default=2, help="guests side by side (default 2)")
    p.add_argument("--check-exact", type=int, default=0, metavar="N",
                   help="measure N OWD cells three times and once on the virtual clock")
    p.add_argument("--grid", choices=sorted(GRIDS), default="chain",
                   help="--check-exact's cells: gamess-morales' chain (default) or "
                   "quintero-2016's six testbeds")
    p.add_argument("--compare-runs", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                   help="databases of two full runs of one paper (before and after a cut): "
                   "time per measurement, ratio, and cells whose median is the same")
    p.add_argument("--full-db", type=Path, action="append", default=[], metavar="DB",
                   help="a full run's database not published (e.g. a second run): counted "
                   "among the measured full runs")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    a = p.parse_args()
    doc: dict[str, Any] = {"plan": part1(a)}
    if a.check_exact:
        doc["exact"] = part2(a)
    if a.compare_runs:
        doc["runs"] = part3(*a.compare_runs)
    doc["measured"] = part4(a.full_db)
    doc["floor"] = part5()
    if a.json:
        a.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
