"""The virtual-clock tier measures one-way delay deterministically: the model plus costs the test
measures itself, to within 1 µs (runs in its own `testbed vm --clock virtual` boot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testbed import models, waiting
from testbed.measure import kinds
from testbed.testbed import Testbed
from testbed.topology import load_topology

pytestmark = [pytest.mark.root, pytest.mark.kernel("netem", clock="virtual")]

CHAIN = Path(__file__).resolve().parents[2] / "topologies" / "chain.toml"
RATE = 10e6  # "ethernet"
PAYLOADS = (100, 1000, 10)  # 10 B: a frame below the 64-byte minimum, padded on the wire
TOLERANCE_US = 1.0


def owd_cells(routers: int, runs: int = 1) -> dict[int, list[dict[str, Any]]]:
    """Per IP payload, `runs` ping-pong results (median OWD, loopback overhead, mode)."""
    topo = load_topology(CHAIN, {"routers": str(routers), "rate": "ethernet"})
    out: dict[int, list[dict[str, Any]]] = {}
    ctx = kinds.Context()
    with Testbed(topo) as tb:
        for n in PAYLOADS:
            for _ in range(runs):
                params = kinds.validate_params(
                    "pingpong", {"ip": 4, "ip_payload": n, "count": 100, "cpu": False},
                    "test", "owd")
                m = kinds.measure("pingpong", tb, params, ctx)
                out.setdefault(n, []).append({
                    "median": m.metrics["owd_median_us"],
                    "overhead": m.metrics["probe_overhead_median_us"],
                    "lost": m.metrics["lost"],
                    "reason": m.result["probe"]["mode_reason"],
                    "busy": m.metrics["busy_poll"],
                })
    return out


def model_us(n: int, routers: int) -> float:
    return models.owd(n, RATE, 4, routers, propagation_s=0.0) * 1e6


def test_the_guest_runs_on_the_virtual_clock() -> None:
    info = waiting.clock_info()
    assert info["clock"] == "virtual" and info["icount_shift"] == 0
    # host wall time read through 9p is the host's, not the guest's leaping clock
    assert abs(waiting.host_time() - waiting.host_time()) < 60


def test_owd_is_the_model_plus_end_host_and_router_costs_measured_here() -> None:
    direct = owd_cells(0, runs=2)
    routed = owd_cells(1)
    report = []
    for n in PAYLOADS:
        a, b = direct[n]
        for cell in (a, b, routed[n][0]):
            assert cell["lost"] == 0
            assert cell["busy"] == 0.0 and "outnumber 1 CPU" in cell["reason"]
        # deterministic: the same cell twice (new processes, same topology) within 1 µs
        assert abs(a["median"] - b["median"]) <= TOLERANCE_US, (a, b)
        # the end hosts' cost is the probe's own loopback overhead, measured in the same trial
        predicted = model_us(n, 0) + a["overhead"]
        report.append((n, a["median"], predicted))
        assert abs(a["median"] - predicted) <= TOLERANCE_US, (n, a, predicted)
    # the per-router cost, measured at the first payload, predicts the other payload
    n0 = PAYLOADS[0]
    host0 = direct[n0][0]["median"] - model_us(n0, 0)
    per_router = routed[n0][0]["median"] - model_us(n0, 1) - host0
    assert 0 < per_router < 50, per_router
    for n1 in PAYLOADS[1:]:
        host1 = direct[n1][0]["median"] - model_us(n1, 0)
        predicted = model_us(n1, 1) + host1 + per_router
        measured = routed[n1][0]["median"]
        print(f"virtual-clock OWD (µs): {report}; per-router cost {per_router:.2f} µs; "
              f"1 router, {n1} B: measured {measured:.2f}, predicted {predicted:.2f}")
        assert abs(measured - predicted) <= TOLERANCE_US, (measured, predicted, per_router)
