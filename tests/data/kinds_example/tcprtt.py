"""Measurement kind `tcprtt`: median TCP round trip of the ping-pong probe (contract example)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.measure import pingpong
from testbed.measure.kinds.base import (
    CPU,
    CPU_METRICS,
    ENDPOINTS,
    Context,
    Kind,
    Measured,
    Metric,
    Param,
    ParamProblem,
    TestbedLike,
    cpu_metrics,
    cpu_window,
    listen_address,
    run_client,
    serve,
)


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    """Cross-parameter rules (single values are checked from the declarations)."""
    if out["size"] > 1000 and out["count"] > 10_000:
        raise ParamProblem("count", "too many large messages for one trial", "count <= 10000")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    ip = int(p["ip"])
    listen = listen_address(tb, p["server"], ip)
    # start the server on a fresh port, wait until it listens; stopped (and its files
    # removed) when the block ends, whatever happens inside
    with serve(tb, ctx, p["server"],
               lambda port, _out: pingpong.argv(ctx.python, "server", host=listen, port=port,
                                                protocol="tcp", size=p["size"],
                                                busy_poll=False),
               proto="tcp", what="ping-pong server", name="pingpong-server") as srv, \
            cpu_window(tb, p, KIND) as cpu:  # CPU sampled while the client runs
        doc = run_client(
            tb, p["client"],
            pingpong.argv(ctx.python, "client", host=tb.address(p["server"], ip),
                          port=srv.port, protocol="tcp", size=p["size"],
                          count=p["count"], busy_poll=False, timeout_s=10.0),
            timeout_s=10.0 * p["count"] + 60, what="ping-pong client")
    metrics = {"rtt_median_us": 2.0 * doc["owd"]["median_us"], "lost": float(doc["lost"]),
               **cpu_metrics(cpu)}
    return Measured(metrics, {"probe": doc, "cpu": cpu or None})


KIND = Kind(
    name="tcprtt",
    doc="median TCP round trip of the ping-pong probe",
    tool="`python -m testbed.measure.pingpong`",
    params=(
        *ENDPOINTS,
        Param("size", "size", 64, "message bytes"),
        Param("count", "int", 100, "round trips", max=1_000_000),
        *CPU,
    ),
    metrics=(
        Metric("rtt_median_us", "us", "median round trip"),
        Metric("lost", "count", "requests without a reply"),
        *CPU_METRICS,
    ),
    runner=run,
    check=check,
    programs=(),  # the probe is python3, which is never sampled as a feature's program
)
