"""Router restarts under a constant stream, and the outage seen in the receiver's timestamps
(dobrinov-2016's software vs hardware reset, compared with a one-way ANOVA).

Two ways to restart a router node (`METHODS`):
- `links` (the "software" reset): every interface of the router down, then up again; the
  addresses and routes the kernel dropped with them are put back from the topology's plan.
- `namespace` (the "hardware" reset: power off, all state lost): the router's namespace is
  destroyed — its veths, addresses, routes, sysctls and processes with it — and rebuilt from
  the plan with its links, the peers' ends (addresses, routes, qdiscs) and its routes.

`restart` asks the Testbed for either (`relink_node`, `rebuild_node`: the latter replays the
plan's actions for that node through the same code that built it). A transition mechanism's
daemons are not restarted.
The outage is the largest gap between consecutive arrivals at the receiver (`udpprobe recv
--timestamps`, user-space clock); packets lost during it are counted too.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from typing import Any

from testbed import waiting
from testbed.api import TestbedLike
from testbed.errors import DaemonError, SpecError
from testbed.measure import udpprobe

METHODS = ("links", "namespace")


def restart(tb: TestbedLike, node: str, method: str) -> None:
    if method == "links":
        tb.relink_node(node)
    elif method == "namespace":
        tb.rebuild_node(node)
    else:
        raise SpecError("measurement", "method", f"unknown reset method {method!r}",
                        ", ".join(METHODS))


def outage_once(tb: TestbedLike, ctx: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    """One restart of `router` while `client` streams to `server` at `pps`: the outage (the
    largest gap between arrivals) and what was lost. Fails if the stream did not come back
    within `timeout` s."""
    ip = int(p["ip"])
    pps = float(p["pps"])
    timeout = float(p["timeout"])
    pre = float(p["pre_s"])
    port = ctx.port()
    out = ctx.folder(tb) / f"reset-{port}.json"
    from testbed.checks import wait_listening

    rx = tb.popen(p["server"], udpprobe.recv_argv(
        ctx.python, host=tb.address(p["server"], ip), port=port, out=str(out), idle_s=timeout,
        max_wait_s=timeout + 15, timestamps=True), name="udpprobe-recv")
    try:
        wait_listening(tb, p["server"], port, "udp", rx, what="udp receiver")
        duration = pre + timeout
        tx = tb.popen(p["client"], udpprobe.send_argv(
            ctx.python, host=tb.address(p["server"], ip), port=port, size=int(p["size"]),
            pps=pps, duration_s=duration), name="udpprobe-send", stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        time.sleep(pre)
        t0 = time.monotonic()
        restart(tb, str(p["router"]), str(p["method"]))
        restart_s = time.monotonic() - t0
        sent_text, err = tx.popen.communicate(timeout=waiting.process_timeout(duration * 3 + 30))
        if tx.popen.returncode != 0:
            raise DaemonError("udp sender", p["client"], f"exit {tx.popen.returncode}", err)
        udpprobe.senders_done(rx)
        rx.popen.wait(timeout=waiting.process_timeout(timeout + 30))
    finally:
        rx.stop()
    if not out.exists():
        raise DaemonError("udp receiver", p["server"], "ended without writing its count")
    got = json.loads(out.read_text())
    out.unlink()
    sent = json.loads(sent_text)
    lost = int(sent["attempted"]) - int(got["received"])
    gap_s = float(got["timing"]["ipd"].get("max_us", 0.0)) / 1e6
    if got["timing"]["ipd"].get("n", 0) == 0 or got["span_s"] < duration - timeout / 2:
        raise DaemonError("reset", str(p["router"]), f"the stream did not come back within "
                          f"{timeout:g} s of the {p['method']} restart (received "
                          f"{got['received']} of {sent['attempted']})",
                          "raise `timeout`, or check the rebuilt routes")
    return {"outage_s": gap_s, "lost": lost, "lost_time_s": lost / pps,
            "restart_call_s": restart_s, "received": got["received"],
            "attempted": sent["attempted"]}


def outages(tb: TestbedLike, p: Mapping[str, Any], ctx: Any) -> tuple[dict[str, float],
                                                             dict[str, Any]]:
    """`count` restarts by `method`; the outages (ms) and their mean."""
    runs = [outage_once(tb, ctx, p) for _ in range(int(p["count"]))]
    ms = [r["outage_s"] * 1000.0 for r in runs]
    m: dict[str, float] = {"outage_mean_ms": sum(ms) / len(ms), "outage_max_ms": max(ms),
                           "outage_min_ms": min(ms),
                           "lost_mean": sum(r["lost"] for r in runs) / len(runs),
                           "restart_call_mean_ms": 1000.0 * sum(r["restart_call_s"]
                                                                for r in runs) / len(runs),
                           "timeout_s": float(p["timeout"])}
    for i, v in enumerate(ms, 1):
        m[f"outage_{i}_ms"] = v
    return m, {"outages_ms": ms, "runs": runs, "method": p["method"]}
