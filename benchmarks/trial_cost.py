"""Benchmark: where the wall time of one measurement trial goes (full-kernel tier, issue perf).

Run it where the trials run, e.g. on the virtual clock:

    flock /work/vm.lock .venv/bin/testbed vm --clock virtual -- \
        .venv/bin/python benchmarks/trial_cost.py [--trials 2] [--json FILE]

It prints, on the host's wall clock (`testbed.waiting.host_time`: the guest's own clock leaps):

- the cost of starting programs in a node: `ip netns exec NS true`, one `ss` poll, Python with
  and without `-S`/`-I`, and a probe's imports;
- per trial (pingpong UDP 100 B IP payload, 100 exchanges, with the loopback overhead run; and
  iperf3 UDP 1 s): total wall time, the time in each `run`/`popen` of the testbed (by
  program), and the OWD medians, so a before/after pair of runs shows the cost and that the
  numbers did not move. `--compare A.json B.json` prints two saved runs side by side.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from testbed import waiting
from testbed.measure import kinds, probe
from testbed.measure.kinds import base
from testbed.testbed import Testbed
from testbed.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent
CHAIN = ROOT / "topologies" / "chain.toml"


def now() -> float:
    return waiting.host_time()


class Timed:
    """A Testbed wrapper that adds up the wall time of each program it runs (by argv[0..1])."""

    def __init__(self, tb: Testbed) -> None:
        self.tb = tb
        self.spent: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tb, name)

    @staticmethod
    def label(argv: list[str]) -> str:
        found = probe.program_of(argv)
        if found is not None:
            return f"{found[0].rsplit('.', 1)[-1]} {found[1]}"
        return " ".join(Path(a).name for a in argv[:2])

    def run(self, node: str, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        t = now()
        try:
            return self.tb.run(node, argv, **kw)
        finally:
            key = "run " + self.label(argv)
            self.spent[key] += now() - t
            self.calls[key] += 1

    def popen(self, node: str, argv: list[str], **kw: Any) -> Any:
        t = now()
        try:
            return self.tb.popen(node, argv, **kw)
        finally:
            key = "popen " + self.label(argv)
            self.spent[key] += now() - t
            self.calls[key] += 1


def starts(tb: Testbed, n: int = 3) -> dict[str, float]:
    """Median wall seconds of starting a few things in node h1."""
    py = sys.executable
    cases = {
        "ip netns exec true": ["true"],
        "ss poll": ["ss", "-Hlun", "sport", "=", ":1"],
        "python -c pass": [py, "-c", "pass"],
        "python -S -c pass": [py, "-S", "-c", "pass"],
        "python -I -S -c pass": [py, "-I", "-S", "-c", "pass"],
        "python import pingpong": [py, "-c", "import testbed.measure.pingpong_probe"],
        "pingpong --help": [py, "-m", "testbed.measure.pingpong_probe", "--help"],
        "probe start --help": [*probe.start(py, "testbed.measure.pingpong_probe"), "--help"],
    }
    out = {}
    for name, argv in cases.items():
        times = []
        for _ in range(n):
            t = now()
            tb.run("h1", argv, check=False)
            times.append(now() - t)
        out[name] = sorted(times)[len(times) // 2]
    return out


def by_ss(wait: Any, *a: Any, **kw: Any) -> None:
    """`base.wait_listening` as before: `ss` polls for every server."""
    wait(*a, **{**kw, "read_proc": False})


def trial(tb: Testbed, kind: str, given: dict[str, Any], variant: str = "") -> dict[str, Any]:
    """One trial through a wrapper that times each program it runs."""
    timed = Timed(tb)
    params = kinds.validate_params(kind, given, "benchmark", kind)
    t = now()
    m = kinds.measure(kind, timed, params, kinds.Context())  # type: ignore[arg-type]
    total = now() - t
    keep = ("owd_median_us", "probe_overhead_median_us", "receiver_bps", "lost")
    return {"kind": kind + (f" ({variant})" if variant else ""), "wall_s": total,
            "metrics": {k: v for k, v in m.metrics.items() if k in keep},
            "spent_s": dict(timed.spent), "calls": dict(timed.calls)}


PINGPONG = {"ip": 4, "ip_payload": 100, "count": 100, "cpu": False}
IPERF3 = {"ip": 4, "protocol": "udp", "duration": 1, "rate": 5, "cpu": False}


def measure(trials: int, which: tuple[str, ...] = ("pingpong", "iperf3"),
            starts_too: bool = True) -> dict[str, Any]:
    topo = load_topology(CHAIN, {"routers": "0", "rate": "ethernet"})
    doc: dict[str, Any] = {"clock": waiting.clock_name(), "trials": []}
    with Testbed(topo) as tb:
        doc["starts_s"] = starts(tb) if starts_too else {}
        for _ in range(trials):
            for kind in which:
                if kind == "pingpong-fork":  # the loopback run forked by the client
                    doc["trials"].append(trial(tb, "pingpong",
                                               {**PINGPONG, "overhead_fork": True}, "fork"))
                elif kind in ("pingpong-old", "pingpong-before"):
                    # probes started with -m (site); "before": readiness by `ss` polls too
                    start, wait = probe.start, base.wait_listening
                    probe.start = lambda py, module: [py, "-m", module]  # type: ignore
                    if kind == "pingpong-before":
                        base.wait_listening = functools.partial(  # type: ignore
                            by_ss, wait)
                    try:
                        doc["trials"].append(trial(tb, "pingpong", PINGPONG, kind[9:]))
                    finally:
                        probe.start, base.wait_listening = start, wait  # type: ignore
                else:
                    doc["trials"].append(trial(tb, kind, {"pingpong": PINGPONG,
                                                          "iperf3": IPERF3}[kind]))
    return doc


def show(doc: dict[str, Any]) -> None:
    print(f"clock: {doc['clock']}")
    for name, s in doc["starts_s"].items():
        print(f"  start {name:<28} {s:7.2f} s")
    for t in doc["trials"]:
        print(f"{t['kind']}: {t['wall_s']:.1f} s  {t['metrics']}")
        for key, s in sorted(t["spent_s"].items(), key=lambda kv: -kv[1]):
            print(f"    {key:<36} x{t['calls'][key]:<3} {s:7.2f} s")


def compare(a: dict[str, Any], b: dict[str, Any]) -> None:
    print(f"{'':<30} {'before':>9} {'after':>9} {'ratio':>7}")
    for name in a["starts_s"]:
        x, y = a["starts_s"][name], b["starts_s"].get(name, float("nan"))
        print(f"start {name:<24} {x:9.2f} {y:9.2f} {x / y:7.2f}")
    for kind in ("pingpong", "iperf3"):
        xs = [t for t in a["trials"] if t["kind"] == kind]
        ys = [t for t in b["trials"] if t["kind"] == kind]
        for i, (x, y) in enumerate(zip(xs, ys, strict=False)):
            print(f"{kind} trial {i + 1} wall (s){'':<8} {x['wall_s']:9.2f} {y['wall_s']:9.2f} "
                  f"{x['wall_s'] / y['wall_s']:7.2f}")
            for k, v in x["metrics"].items():
                w = y["metrics"].get(k, float("nan"))
                print(f"  {k:<28} {v:9.3f} {w:9.3f}  diff {w - v:+.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--json", help="also write the document here")
    ap.add_argument("--kinds", default="pingpong,iperf3", help="which trials, in turn")
    ap.add_argument("--no-starts", action="store_true", help="skip the program-start costs")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.compare:
        compare(*(json.loads(Path(f).read_text()) for f in a.compare))
        return 0
    t = time.monotonic()
    doc = measure(a.trials, tuple(a.kinds.split(",")), not a.no_starts)
    show(doc)
    print("JSON " + json.dumps(doc))
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))
    print(f"total {time.monotonic() - t:.0f} s (guest clock)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
