"""Measurement kind `tcprtt`: median TCP round trip of the ping-pong probe (contract example)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.api import TestbedLike
from testbed.measure import pingpong_probe
from testbed.measure.kinds import base
from testbed.measure.kinds.base import Kind, Metric, Param


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    """Cross-parameter rules (single values are checked from the declarations)."""
    if out["size"] > 1000 and out["count"] > 10_000:
        raise base.ParamProblem("count", "too many large messages for one trial",
                                "count <= 10000")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    ip = int(p["ip"])
    listen = base.listen_address(tb, p["server"], ip)
    # start the server on a fresh port, wait until it listens; stopped (and its files
    # removed) when the block ends, whatever happens inside
    with base.serve(tb, ctx, p["server"],
                    lambda port, _out: pingpong_probe.argv(ctx.python, "server", host=listen,
                                                     port=port, protocol="tcp", size=p["size"],
                                                     busy_poll=False),
                    proto="tcp", what="ping-pong server", name="pingpong-server") as srv, \
            base.cpu_window(tb, p, KIND) as cpu:  # CPU sampled while the client runs
        doc = base.run_client(
            tb, p["client"],
            pingpong_probe.argv(ctx.python, "client", host=tb.address(p["server"], ip),
                          port=srv.port, protocol="tcp", size=p["size"],
                          count=p["count"], busy_poll=False, timeout_s=10.0),
            timeout_s=10.0 * p["count"] + 60, what="ping-pong client")
    metrics = {"rtt_median_us": 2.0 * doc["owd"]["median_us"], "lost": float(doc["lost"]),
               **base.cpu_metrics(cpu)}
    return base.Measured(metrics, {"probe": doc, "cpu": cpu or None})


KIND = Kind(
    name="tcprtt",  # the module's name
    doc="median TCP round trip of the ping-pong probe",
    tool="`python -m testbed.measure.pingpong_probe`",
    # Param(name, type (base.PARAM_TYPES), default (None: unset), meaning, choices=, max=)
    params=(
        *base.ENDPOINTS,
        Param("size", "size", 64, "message bytes"),
        Param("count", "int", 100, "round trips", max=1_000_000),
        *base.CPU,
    ),
    # Metric(name, unit (a key of base.UNITS), meaning)
    metrics=(
        Metric("rtt_median_us", "us", "median round trip"),
        Metric("lost", "count", "requests without a reply"),
        *base.CPU_METRICS,
    ),
    runner=run,
    check=check,  # cross-parameter rules (single values are checked from the declarations)
    programs=(),  # programs it starts (never sampled as a feature's CPU; python never is)
    measures="delay",  # base.Measures: what the tier choice and parallel runs read
    host_reason="",  # why the host kernel measures it faithfully, if it does
)
