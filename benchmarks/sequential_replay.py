"""Benchmark: what a precision rule (testbed/sequential.py) saves on a stored full run, and what
it changes — every repetition (the run as stored) beside the run as the rule would have left it.

Usage (from the checkout):

    .venv/bin/python benchmarks/sequential_replay.py EXPERIMENT DB [--out SPARED.sqlite]
        [--stored-as NAME]

Whether a cell is done is a function of its stored trials in repetition order, so replaying a
run that measured every repetition gives exactly what a run with the rule would have stored:
the trials after the one that met the rule are those it would not have run. Per measurement
with a rule in EXPERIMENT's full profile (the file as it is now): cells, cells stopped early,
trials kept/all, their summed wall time kept/all and the ratio, and the largest relative change
of a cell's mean of the rule's metric (kept trials vs all). `--out`: a copy of DB without the
spared trials, for `testbed report --db SPARED --experiment ...` and `testbed report --compare`
against the report of DB itself (same verdicts is what the rule must keep).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from collections import defaultdict
from contextlib import closing
from pathlib import Path

from testbed import results, sequential
from testbed.experiment_spec import find_experiment, load_experiment


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment")
    ap.add_argument("db", type=Path)
    ap.add_argument("--out", type=Path, help="write a copy of DB without the spared trials")
    ap.add_argument("--stored-as", metavar="NAME",
                    help="the runs in DB are of this experiment (a probe of the same "
                    "measurements under another name), not EXPERIMENT")
    args = ap.parse_args(argv)
    exp = load_experiment(find_experiment(args.experiment), "full")
    rules = {m.name: m.precision for m in exp.measurements if m.precision is not None}
    if not rules:
        print(f"{args.experiment}: no measurement has a precision rule", file=sys.stderr)
        return 1
    with closing(results.connect(args.db)) as con:
        cells: dict[tuple[str, str, str], list[results.TrialRow]] = defaultdict(list)
        for r in results.trials(con, experiment=args.stored_as or exp.name):
            if r.measurement in rules and r.profile == "full":
                cells[(r.measurement, r.run_id, r.group_key)].append(r)
    spared: list[str] = []
    print(f"{'measurement':<22} {'cells':>5} {'early':>5} {'trials kept/all':>16} "
          f"{'time kept/all (min)':>20} {'ratio':>6} {'max Δmean':>10}")
    for name, rule in rules.items():
        mine = {k: v for k, v in cells.items() if k[0] == name}
        early = kept = total = 0
        t_kept = t_all = shift = 0.0
        for rows in mine.values():
            rows.sort(key=lambda r: r.repetition)
            stop = len(rows)
            for k in range(1, len(rows) + 1):
                vals = [v for r in rows[:k]
                        if (v := sequential.counted(r, rule.metric)) is not None]
                if rule.met(vals) is not None:
                    stop = k
                    break
            early += stop < len(rows)
            kept, total = kept + stop, total + len(rows)
            t_kept += sum(r.finished - r.started for r in rows[:stop])
            t_all += sum(r.finished - r.started for r in rows)
            spared += [r.trial_key for r in rows[stop:]]
            every = [v for r in rows if (v := sequential.counted(r, rule.metric)) is not None]
            some = [v for r in rows[:stop] if (v := sequential.counted(r, rule.metric)) is not None]
            if every and some and statistics.fmean(every):
                shift = max(shift, abs(statistics.fmean(some) / statistics.fmean(every) - 1))
        ratio = t_kept / t_all if t_all else float("nan")
        print(f"{name:<22} {len(mine):>5} {early:>5} {f'{kept}/{total}':>16} "
              f"{f'{t_kept / 60:.1f}/{t_all / 60:.1f}':>20} {ratio:>6.2f} {100 * shift:>9.3f}%")
    if args.out is not None:
        shutil.copy(args.db, args.out)
        with closing(results.connect(args.out)) as con, con:
            con.executemany("DELETE FROM trials WHERE trial_key=?", [(k,) for k in spared])
        print(f"{len(spared)} spared trials left out in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
