"""Benchmark: build and tear down `chain` with 5 and 50 routers; prints time against budget."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from testbed.testbed import Testbed
from testbed.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {5: 1.0, 50: 5.0}


def measure(routers: int, rate: str, reps: int) -> list[tuple[float, float]]:
    topo = load_topology(
        ROOT / "topologies" / "chain.toml", {"routers": str(routers), "rate": rate}
    )
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        tb = Testbed(topo)
        tb.__enter__()
        t1 = time.perf_counter()
        tb.__exit__(None, None, None)
        t2 = time.perf_counter()
        out.append((t1 - t0, t2 - t1))
    return out


def main() -> int:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"chain build + teardown, {reps} repetitions each (median; budget from the issue)")
    print(
        f"{'routers':>7} {'rate':>9} {'build s':>8} {'down s':>7} {'total s':>8} "
        f"{'budget s':>8} {'total/budget':>12}"
    )
    for routers in (5, 50):
        for rate in ("unlimited", "ethernet"):
            rows = measure(routers, rate, reps)
            build = statistics.median(r[0] for r in rows)
            down = statistics.median(r[1] for r in rows)
            total = statistics.median(r[0] + r[1] for r in rows)
            budget = BUDGET_S[routers]
            print(
                f"{routers:>7} {rate:>9} {build:>8.3f} {down:>7.3f} {total:>8.3f} "
                f"{budget:>8.1f} {total / budget:>12.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
