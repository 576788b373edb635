"""The longest documented chain (250 routers) is crossable by ping over IPv4 and IPv6."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from testbed.testbed import Testbed
from testbed.topology import load_topology
from testbed.topology_model import MAX_CHAIN_ROUTERS

pytestmark = pytest.mark.root
ROOT = Path(__file__).resolve().parents[2]


def test_ping_across_the_longest_chain() -> None:
    topo = load_topology(ROOT / "topologies" / "chain.toml", {"routers": str(MAX_CHAIN_ROUTERS)})
    start = time.monotonic()
    timings: dict[str, float] = {}
    with Testbed(topo) as tb:
        timings["build_s"] = round(time.monotonic() - start, 1)
        for family in (4, 6):
            dst = tb.address("h2", family)
            t0 = time.monotonic()
            out = tb.run("h1", ["ping", f"-{family}", "-c", "3", "-W", "5", "-n", dst],
                         check=False, timeout=60)
            timings[f"ping{family}_s"] = round(time.monotonic() - t0, 2)
            assert out.returncode == 0, out.stdout + out.stderr
            assert "Time to live exceeded" not in out.stdout
            # the replies crossed every router: 255 minus one per router (h2 sends with 255)
            ttls = {int(w.split("=")[1]) for w in out.stdout.split() if w.startswith("ttl=")}
            assert ttls == {255 - MAX_CHAIN_ROUTERS}, out.stdout
            rtt = [ln for ln in out.stdout.splitlines() if "min/avg/max" in ln]
            timings[f"ping{family}_rtt"] = rtt[0].split("=")[1].strip() if rtt else "?"
    timings["total_s"] = round(time.monotonic() - start, 1)
    print(json.dumps(timings))
    out_path = os.environ.get("TESTBED_RELIABILITY_REPORT")
    if out_path:
        with open(out_path, "a") as fh:
            fh.write(json.dumps({"long_chain": timings}) + "\n")
