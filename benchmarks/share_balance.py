"""Benchmark: how evenly a parallel run's shares load its workers — the split that counts each
cell's planned repetitions (before) beside the one that counts what a cell is expected to run
(after: `precision.after` where the rule may stop it; testbed/shares.py), replayed on the trial
times a stored run measured.

Usage (from the checkout):

    .venv/bin/python benchmarks/share_balance.py EXPERIMENT DB [--run RUN] [--workers 2]
        [--clock virtual]

RUN (default: the run in DB of EXPERIMENT with the most trials placed on workers) was made by
`testbed run --workers N` or `testbed reproduce` (its guests' part). Its cells are planned again
from EXPERIMENT's full profile as the run stored it (the measurements and topologies it
planned); each trial costs the wall time it took in RUN, a trial the precision rule spared
nothing. Printed: per share of each split the summed trial time, the longest (the makespan:
when the last worker ends, builds and boots aside), and after/before; then the same with the
shares taken in turn by whichever worker is free, one share a worker against
what `testbed run --workers N` now cuts (`parallel.share_count`; a boot each on the virtual
clock); and, as a check of the
replay, what the run's own workers took (from each trial's placement).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from contextlib import closing
from pathlib import Path

from testbed import results
from testbed.experiment_spec import experiment_from_dict, for_clock, plan
from testbed.parallel import share_count
from testbed.shares import split

BOOT_S = 20.0
"""A guest's boot before its share's first trial on the virtual clock (docs/parallel.md)."""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("experiment", help="the experiment's name as stored (e.g. transition)")
    p.add_argument("db", type=Path)
    p.add_argument("--run", default=None)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--clock", default="virtual", help="the clock the run measured on")
    a = p.parse_args()
    with closing(results.connect(a.db)) as con:
        rows = [r for r in results.trials(con, experiment=a.experiment) if r.status == "ok"]
        runs = {r["run_id"]: r for r in results.runs(con)}
        specs = {str(x["run_id"]): json.loads(x["spec"]) for x in con.execute(
            "SELECT run_id, spec FROM runs WHERE experiment=?", (a.experiment,))}
    placed: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.result.get("placement", {}).get("worker"):
            placed[r.run_id] += 1
    run_id = a.run or max(placed, key=lambda k: placed[k], default=None)
    if run_id is None or run_id not in specs:
        print(f"share_balance: no run of {a.experiment} with placed trials in {a.db}",
              file=sys.stderr)
        return 2
    spec = specs[run_id]
    exp = for_clock(experiment_from_dict(_raw(spec), file=spec.get("file") or "x.toml"),
                    a.clock)
    took = {r.trial_key: r.finished - r.started for r in rows if r.run_id == run_id}
    trials = plan(exp)
    cells_run = {k.rsplit("/", 1)[0] for k in took}
    trials = [t for t in trials if t.key(run_id).rsplit("/", 1)[0] in cells_run]
    plain = [dataclasses.replace(t, measurement=dataclasses.replace(t.measurement,
                                                                    precision=None))
             for t in trials]
    print(f"{a.experiment} run {run_id} ({runs[run_id]['profile']}): {len(trials)} trials "
          f"planned in {len(cells_run)} cells, {len(took)} ran; {a.workers} workers")
    spans = {}
    for name, ts in (("before (planned repetitions)", plain), ("after (expected trials)",
                                                                trials)):
        loads = [sum(took.get(k, 0.0) for k in s.keys) / 60 for s in split(ts, run_id,
                                                                           a.workers)]
        spans[name] = max(loads)
        print(f"  {name:<30} shares " + " | ".join(f"{x:6.1f}" for x in loads)
              + f" min   longest {max(loads):6.1f} min")
    before, after = spans.values()
    print(f"  after / before: {after / before:.2f}")
    # testbed run --workers N now cuts N x SHARES_PER_WORKER shares, each taken by the first
    # worker free (list scheduling): replayed with a guest's boot (BOOT_S) for each share
    boot = BOOT_S / 60 if a.clock == "virtual" else 0.0
    for k in sorted({1, share_count(len(trials), a.workers) // a.workers}):
        shares = split(trials, run_id, a.workers * k)
        free = [0.0] * a.workers
        for sh in shares:
            i = free.index(min(free))
            free[i] += boot + sum(took.get(key, 0.0) for key in sh.keys) / 60
        label = f"{k} share(s) a worker, taken in turn"
        print(f"  {label:<30} workers " + " | ".join(f"{x:6.1f}" for x in free)
              + f" min   longest {max(free):6.1f} min ({len(shares)} shares, "
              f"{BOOT_S:.0f} s a boot)")
    by_worker: dict[str, float] = defaultdict(float)
    for r in rows:
        if r.run_id == run_id:
            by_worker[str(r.result.get("placement", {}).get("worker"))] += (
                r.finished - r.started) / 60
    print("  the run itself, per worker: " + " | ".join(
        f"{w} {m:.1f}" for w, m in sorted(by_worker.items())) + " min")
    return 0


def _raw(spec: dict[str, object]) -> dict[str, object]:
    """A stored experiment (Experiment.to_dict) back in the shape of an experiment file."""
    ms = spec.get("measurements", [])
    assert isinstance(ms, list)
    measurements = {}
    for m in ms:
        body = {"kind": m["kind"], **m["params"], **m["sweep"], "where": m["where"]}
        if m.get("precision"):
            body["precision"] = m["precision"]
        if m.get("repetitions"):
            body["repetitions"] = m["repetitions"]
        measurements[m["name"]] = body
    return {"name": spec["name"], "topology": spec["topology"], "params": spec["params"],
            "sweep": spec.get("topo_sweep", {}), "repetitions": spec["repetitions"],
            "measurements": measurements}


if __name__ == "__main__":
    sys.exit(main())
