"""Measurement kind `pingpong`: one-way delay (RTT/2) of a UDP or TCP ping-pong probe."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from typing import Any

from testbed import waiting
from testbed.api import TestbedLike
from testbed.errors import CommandError
from testbed.measure import ping_tool, pingpong_probe
from testbed.measure.kinds import base
from testbed.measure.kinds.base import Kind, Metric, Param

TCP_HEADER = 20


def exchange(tb: TestbedLike, node_srv: str, node_cli: str, host: str, p: Mapping[str, Any],
             ctx: base.Context, size: int, listen: str | None = None,
             overhead: str | None = None,
             between: Callable[[], None] | None = None) -> dict[str, Any]:
    """One ping-pong run: a server in `node_srv`, the client in `node_cli` sending to `host`.

    With `overhead` (a loopback address) the same client process then measures the probe's
    own cost over loopback in `node_cli`, with a server it forks (the document's `overhead`):
    two program starts fewer than a second `exchange`, which cost seconds each in the
    full-kernel tier. The client prints the network document and waits; the network server
    is stopped and `between()` called (the runner closes its CPU window there) before it is
    told to go on, so the loopback run shares the CPU with nothing of the network run."""
    # client and server both spin when busy-polling: block when they would outnumber the CPUs
    busy, why = pingpong_probe.choose_mode(bool(p["busy_poll"]), spinners=2)
    kw: dict[str, Any] = {"protocol": p["protocol"], "size": size, "busy_poll": busy}
    tcp = p["protocol"] == "tcp"
    # TCP never loses a reply, so its wait only guards against a dead peer; a UDP reply later
    # than 1 s counts as lost
    timeout_s = float(p["count"]) * (10.0 if tcp else 1.0) + 60
    proc = None
    try:
        with base.serve(tb, ctx, node_srv,
                        lambda port, _out: pingpong_probe.argv(ctx.python, "server",
                                                         host=listen or host, port=port, **kw),
                        proto=p["protocol"], what="ping-pong server",
                        name="pingpong-server") as srv:
            argv = pingpong_probe.argv(ctx.python, "client", host=host, port=srv.port,
                                 count=int(p["count"]), timeout_s=10.0 if tcp else 1.0,
                                 overhead=overhead, **kw)
            if overhead is None:
                doc = base.run_client(tb, node_cli, argv, timeout_s=timeout_s,
                                      what="ping-pong client")
            else:
                proc = tb.popen(node_cli, argv, name="pingpong-client", stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                doc = _first_doc(proc, argv, node_cli, timeout_s)
        if between is not None:
            between()
        if proc is not None:
            rest, _err = proc.popen.communicate("go\n",
                                                timeout=waiting.process_timeout(timeout_s))
            if rest.strip():
                doc["overhead"] = base.json_doc(rest, argv, node_cli, "ping-pong client")
                doc["overhead"]["mode_reason"] = why
    finally:
        if proc is not None:
            proc.stop()
    doc["mode_reason"] = why
    return doc


def _first_doc(proc: Any, argv: list[str], node: str, timeout_s: float) -> dict[str, Any]:
    """The network document a client with `--overhead` prints first (then it waits), or a
    CommandError with what it printed when it failed."""
    first = proc.popen.stdout.readline()
    if first.strip():
        return base.json_doc(first, argv, node, "ping-pong client")
    out, err = proc.popen.communicate(timeout=waiting.process_timeout(timeout_s))
    raise CommandError(argv, proc.popen.returncode or 0,
                       f"ping-pong client printed no JSON document: {(err or out)[-600:]!r}",
                       f"node {node}")


def message_size(p: Mapping[str, Any]) -> int:
    """Message bytes: `ip_payload` less the UDP or TCP header, else `size` (default 64)."""
    if p.get("ip_payload") is not None:
        hdr = ping_tool.UDP_HEADER if p["protocol"] == "udp" else TCP_HEADER
        return int(p["ip_payload"]) - hdr
    return int(p.get("size") or 64)


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    base.one_size(out, given)
    base.fits(out, [int(out["ip"])], "tcp" if out.get("protocol") == "tcp" else "udp")


OWD = ("mean_us", "min_us", "max_us", "median_us", "p99_us", "p999_us", "stdev_us",
       "typical_latency_us", "worst_case_latency_us", "pdv_p99_us", "pdv_p999_us",
       "ipdv_mean_us")
RTT = ("mean_us", "min_us", "max_us", "median_us", "p99_us")


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    ip_v = int(p["ip"])
    size = message_size(p)
    lo = "::1" if ip_v == 6 else "127.0.0.1"
    with ExitStack() as window:  # CPU sampled during the network exchange only
        cpu = window.enter_context(base.cpu_window(tb, p, KIND))
        doc = exchange(tb, p["server"], p["client"], tb.address(p["server"], ip_v), p, ctx, size,
                       listen=base.listen_address(tb, p["server"], ip_v),
                       overhead=lo if p.get("overhead", True) and p.get("overhead_fork")
                       else None, between=window.close)
    owd = doc["owd"]
    metrics = {f"owd_{k}": float(owd[k]) for k in OWD if k in owd}
    # the round trip itself, as zeadally-2004 reports it (owd_* are RTT/2)
    metrics.update({f"rtt_{k}": 2.0 * float(owd[k]) for k in RTT if k in owd})
    metrics["lost"] = float(doc["lost"])
    metrics["busy_poll"] = 1.0 if doc["busy_poll"] else 0.0
    metrics["message_bytes"] = float(size)
    metrics.update(base.cpu_metrics(cpu))
    overhead = doc.pop("overhead", None)
    if p.get("overhead", True):
        if not isinstance(overhead, dict):  # a probe that did not measure it itself
            overhead = exchange(tb, p["client"], p["client"], lo, p, ctx, size)
        metrics["probe_overhead_median_us"] = overhead["owd"]["median_us"]
        metrics["probe_overhead_mean_us"] = overhead["owd"]["mean_us"]
        overhead.pop("rtts_ns", None)
    if not p.get("keep_samples", True):
        doc.pop("rtts_ns", None)
    return base.Measured(metrics, {
        "probe": doc,
        "probe_overhead_loopback": overhead,
        "overhead_note": "the same probe over loopback in the client's namespace: its own "
        "cost, included in every OWD above",
        "cpu": cpu or None,
    })


KIND = Kind(
    name="pingpong",
    doc="ping-pong one-way delay probe (OWD = RTT/2)",
    tool="`python -m testbed.measure.pingpong_probe`",
    params=(
        *base.ENDPOINTS,
        Param("protocol", "str", "udp", "transport (TCP with TCP_NODELAY)", choices=("udp", "tcp")),
        Param("size", "size", None, "message bytes (UDP data or TCP bytes; default 64)"),
        Param("ip_payload", "size", None, "IP payload bytes (UDP/TCP header + message)"),
        Param("count", "int", 1000, "round trips", max=10_000_000),
        Param("busy_poll", "bool", True, "spin instead of blocking when client and server fit on "
              "the CPUs"),
        Param("overhead", "bool", True, "also run the probe over loopback (its own cost)"),
        Param("overhead_fork", "bool", False, "the loopback run forked by the client, not two "
              "more programs: ~3.5 s less a trial in the full-kernel tier; its overhead reads "
              "0.2-1.5 µs higher there"),
        Param("keep_samples", "bool", True, "store every round trip in the result"),
        *base.CPU,
    ),
    metrics=(
        Metric("owd_mean_us", "us", "mean one-way delay (RTT/2)"),
        Metric("owd_min_us", "us", "smallest one-way delay"),
        Metric("owd_max_us", "us", "largest one-way delay"),
        Metric("owd_median_us", "us", "median one-way delay"),
        Metric("owd_p99_us", "us", "99th percentile one-way delay"),
        Metric("owd_p999_us", "us", "99.9th percentile one-way delay"),
        Metric("owd_stdev_us", "us", "standard deviation of the one-way delay"),
        Metric("owd_typical_latency_us", "us", "typical latency (median, RFC 8219)"),
        Metric("owd_worst_case_latency_us", "us", "worst-case latency (p99.9, RFC 8219)"),
        Metric("owd_pdv_p99_us", "us", "packet delay variation, p99 - min (RFC 5481)"),
        Metric("owd_pdv_p999_us", "us", "packet delay variation, p99.9 - min (RFC 5481)"),
        Metric("owd_ipdv_mean_us", "us", "mean |difference| of consecutive delays (RFC 3393)"),
        Metric("rtt_mean_us", "us", "mean round trip (as zeadally-2004 reports it)"),
        Metric("rtt_min_us", "us", "smallest round trip"),
        Metric("rtt_max_us", "us", "largest round trip"),
        Metric("rtt_median_us", "us", "median round trip"),
        Metric("rtt_p99_us", "us", "99th percentile round trip"),
        Metric("lost", "count", "requests without a reply in time"),
        Metric("busy_poll", "flag", "1: the probe spun (busy-polled), 0: it blocked"),
        Metric("message_bytes", "B", "message bytes of each request"),
        Metric("probe_overhead_median_us", "us", "median OWD of the probe over loopback"),
        Metric("probe_overhead_mean_us", "us", "mean OWD of the probe over loopback"),
        *base.CPU_METRICS,
    ),
    runner=run,
    check=check,
    measures="delay",
    virtual_exact=("on the virtual clock a cell's median OWD repeats within 0.1 µs or 0.01 % "
                   "across runs and guests, on an idle or a loaded host (144 of 144 cells, "
                   "docs/vm.md; benchmarks/virtual_clock.py, benchmarks/full_reproduction.py); "
                   "its interval comes from the round trips inside the trial"),
)
