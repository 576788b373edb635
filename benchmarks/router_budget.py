"""Benchmark: a router with a CPU budget (issue 27 part 2): forwarded rate vs budget, virtual clock.

Boots ONE virtual-clock guest (`testbed vm --clock virtual`) and, inside it, for each budget
builds `topologies/one-router-budget.toml` (`--set budget=B`: r1's threaded-NAPI threads in a
cgroup v2 group with cpu.max = B of one CPU; "none": the same group, no limit) and offers
64-byte frames (67 B for IPv6: the smallest that carries UDP data) from h1 to h2 with the
repo's UDP sender (`testbed/measure/udpprobe.py`) at a fixed high rate for a fixed time.
h2 drops them in an nftables rule whose counter is the forwarded count (no receiver process,
no ICMP port-unreachable replies back through r1). Prints, per IP version and budget: offered
and forwarded pps, forwarded/budget (proportional when the router is CPU-bound: constant),
r1's µs per forwarded packet (its NAPI threads' run time, /proc/PID/schedstat, in virtual µs
= 1000 instructions at icount shift 0) and how many cpu.max periods throttled it.

Usage (as root, from the checkout; the host part boots the guest and runs the guest part):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/router_budget.py [--budgets 0.05,0.1,0.2,0.4,none]
        [--ip 4,6] [--pps 30000] [--duration 1.0] [--frame 64] [--period 100ms]
        [--json FILE]
    .venv/bin/python benchmarks/router_budget.py --show FILE    # a stored result's table
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARK = "ROUTER-BUDGET-JSON "
SINK = """table inet tb_sink {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 9 counter drop
  }
}
"""


def sink_count(tb: Any) -> int:
    out = tb.run("h2", ["nft", "list", "table", "inet", "tb_sink"]).stdout
    m = re.search(r"counter packets (\d+)", out)
    if m is None:
        raise RuntimeError(f"no counter in h2's sink table: {out!r}")
    return int(m.group(1))


def one_budget(budget: str, ips: list[int], pps: float, duration: float, frame: int,
               period: str) -> list[dict[str, Any]]:
    """Build the topology with `budget`, offer load per IP version; one row each."""
    from testbed import kthreads, waiting
    from testbed.actions import NftRuleset
    from testbed.measure import udpprobe
    from testbed.measure.router_stress import frame_for, udp_data
    from testbed.measure.routercpu import RouterCpu
    from testbed.testbed import Testbed
    from testbed.topology import load_topology

    topo = load_topology(ROOT / "topologies" / "one-router-budget.toml", {"budget": budget,
                                                                             "period": period})
    rows = []
    with Testbed(topo) as tb:
        group_name = kthreads.budget_group(tb.netns("r1"))
        root, _why = kthreads.cpu_root()
        assert root is not None, "the feature mounted no cgroup v2 with cpu"
        group = kthreads.CpuGroup(root, group_name)
        cpu_max = (group.path / "cpu.max").read_text().strip()
        tb.apply(NftRuleset("h2", SINK, "inet tb_sink"))
        for ip in ips:
            size = udp_data(frame, ip)
            argv = udpprobe.send_argv(sys.executable, host=tb.address("h2", ip), port=9,
                                      size=size, pps=pps, duration_s=duration)
            # warm-up: neighbours resolved, the probe's code in the page cache
            tb.run("h1", udpprobe.send_argv(sys.executable, host=tb.address("h2", ip), port=9,
                                            size=size, pps=100, duration_s=0.05))
            time.sleep(0.2)
            with RouterCpu(tb, routers=["r1"], nodes=["r1"]) as cpu:
                c0, s0 = sink_count(tb), group.stat()
                cpu.start()
                sent = json.loads(tb.run("h1", argv, timeout=waiting.process_timeout(
                    duration * 20 + 60)).stdout)
                time.sleep(0.3)  # the rings drain (virtual time: cheap)
                doc = cpu.stop()
                c1, s1 = sink_count(tb), group.stat()
            fwd = c1 - c0
            secs = float(sent["elapsed_s"])
            offered = sent["attempted"] / secs
            rows.append({
                "budget": budget, "ip": ip, "frame": frame_for(frame, ip), "cpu_max": cpu_max,
                "offered_pps": offered, "sent": sent["sent"], "attempted": sent["attempted"],
                "eagain": sent["eagain"], "elapsed_s": secs, "forwarded": fwd,
                "forwarded_pps": fwd / secs, "loss": 1 - fwd / max(sent["attempted"], 1),
                "router_ns": doc["router_ns"],
                "us_per_packet": doc["router_ns"] / 1e3 / fwd if fwd else None,
                "throttled_periods": s1.get("nr_throttled", 0) - s0.get("nr_throttled", 0),
                "periods": s1.get("nr_periods", 0) - s0.get("nr_periods", 0),
            })
            print(f"  budget {budget} IPv{ip}: {rows[-1]['forwarded_pps']:.0f} pps forwarded",
                  flush=True)
    # the feature's undo removed the group
    assert not group.path.exists(), f"{group.path} left behind"
    return rows


def guest(a: argparse.Namespace) -> int:
    rows = []
    t0 = time.monotonic()
    for b in a.budgets:
        rows += one_budget(b, a.ip, a.pps, a.duration, a.frame, a.period)
    print(MARK + json.dumps({"rows": rows, "guest_s": time.monotonic() - t0,
                             "clock": os.environ.get("TESTBED_CLOCK", "real"),
                             "icount_shift": os.environ.get("TESTBED_ICOUNT_SHIFT")}))
    return 0


def table(doc: dict[str, Any]) -> str:
    """The rows as a table; `cpu used` = forwarded pps x µs per packet: the share of one CPU
    r1's threads ran per second of sending (the drain of the rings after the sender included)."""
    lines = [f"clock: {doc['clock']} (icount shift {doc['icount_shift']}); µs are virtual "
             "(1000 instructions) on the virtual clock",
             f"{'IP':>3} {'budget':>7} {'cpu.max':>14} {'offered pps':>12} {'fwd pps':>9} "
             f"{'loss':>6} {'fwd/budget':>11} {'µs/pkt':>7} {'cpu used':>8} {'throttled':>9}"]
    for r in doc["rows"]:
        share = None if r["budget"] == "none" else float(r["budget"])
        ratio = f"{r['forwarded_pps'] / share:11.0f}" if share else f"{'-':>11}"
        us = r["us_per_packet"]
        used = f"{r['forwarded_pps'] * us / 1e6:8.4f}" if us else f"{'-':>8}"
        lines.append(
            f"{r['ip']:>3} {r['budget']:>7} {r['cpu_max']:>14} {r['offered_pps']:12.0f} "
            f"{r['forwarded_pps']:9.0f} {r['loss']:6.1%} {ratio} "
            f"{us if us is None else f'{us:7.3f}':>7} {used} "
            f"{r['throttled_periods']:>4}/{r['periods']:<4}")
    return "\n".join(lines)


def host(a: argparse.Namespace) -> int:
    inner = [sys.executable, str(Path(__file__).resolve()), "--guest",
             "--budgets", ",".join(a.budgets), "--ip", ",".join(map(str, a.ip)),
             "--pps", str(a.pps), "--duration", str(a.duration), "--frame", str(a.frame),
             "--period", a.period]
    argv = [sys.executable, "-m", "testbed.cli", "vm", "--clock", "virtual", "--",
            "env", f"PYTHONPATH={ROOT}", *inner]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    doc = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(MARK):
            doc = json.loads(line[len(MARK):])
        else:
            print(line, end="", flush=True)
    rc = proc.wait()
    if doc is None:
        print(f"router_budget: the guest gave no result (exit {rc})", file=sys.stderr)
        return 1
    doc["wall_s"] = time.monotonic() - t0
    print(table(doc))
    print(f"wall {doc['wall_s']:.0f} s (guest part {doc['guest_s']:.0f} s on the guest's clock)")
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--guest", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--budgets", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                   default=["0.05", "0.1", "0.2", "0.4", "none"])
    p.add_argument("--ip", type=lambda s: [int(x) for x in s.split(",")], default=[4, 6])
    p.add_argument("--pps", type=float, default=30000.0)
    p.add_argument("--duration", type=float, default=1.0)
    p.add_argument("--frame", type=int, default=64)
    p.add_argument("--period", default="100ms", help="cpu.max period (the topology's `period`)")
    p.add_argument("--json", help="write the result document here")
    p.add_argument("--show", metavar="FILE", help="print the table of a stored --json result")
    a = p.parse_args()
    if a.show:
        print(table(json.loads(Path(a.show).read_text())))
        return 0
    return guest(a) if a.guest else host(a)


if __name__ == "__main__":
    sys.exit(main())
