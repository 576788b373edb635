"""Router restarts under a constant stream, and the outage seen in the receiver's timestamps
(dobrinov-2016's software vs hardware reset, compared with a one-way ANOVA).

Two ways to restart a router node (`METHODS`):
- `links` (the "software" reset): every interface of the router down, then up again; the
  addresses and routes the kernel dropped with them are put back from the topology's plan.
- `namespace` (the "hardware" reset: power off, all state lost): the router's namespace is
  destroyed — its veths, addresses, routes, sysctls and processes with it — and rebuilt from
  the plan with its links, the peers' ends (addresses, routes, qdiscs) and its routes.

`restart` works on a built `testbed.testbed.Testbed` (it replays the plan's actions for that
node through the same code that built it). A transition mechanism's daemons are not restarted.
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
from testbed.errors import DaemonError, SpecError
from testbed.measure import udpprobe

METHODS = ("links", "namespace")


def _affected(plan: Any, node: str) -> set[tuple[str, str]]:
    """(namespace, interface) of every end of every link of `node`."""
    ns = plan.namespaces[node]
    out = set()
    for a in plan.actions:
        if type(a).__name__ == "AddVeth" and ns in (a.ns_a, a.ns_b):
            out.add((a.ns_a, a.if_a))
            out.add((a.ns_b, a.if_b))
    return out


def node_actions(plan: Any, node: str) -> list[Any]:
    """The plan's actions that rebuild `node` and its links' far ends, in plan order."""
    ns = plan.namespaces[node]
    ends = _affected(plan, node)
    keep = []
    for a in plan.actions:
        kind = type(a).__name__
        if kind in ("CreateNamespace", "SetSysctls"):
            wanted = a.ns == ns
        elif kind == "AddVeth":
            wanted = ns in (a.ns_a, a.ns_b)
        elif kind in ("AddAddress", "LinkUp", "OffloadOff", "SetQdisc"):
            wanted = (a.ns, a.ifname) in ends
        elif kind == "AddRoute":
            wanted = a.ns == ns or (a.ns, a.dev) in ends
        elif kind == "WaitInterfaces":  # the typed plan's own wait (every interface)
            wanted = True
        else:
            wanted = False
        if wanted:
            keep.append(a)
    return keep


def restart_links(tb: Any, node: str) -> None:
    """Every interface of `node` down and up; addresses and routes put back (`replace`)."""
    plan = tb.plan
    ns = plan.namespaces[node]
    ifaces = [i.name for i in tb.interfaces(node)]
    for i in ifaces:
        tb.run(node, ["ip", "link", "set", "dev", i, "down"])
    for i in ifaces:
        tb.run(node, ["ip", "link", "set", "dev", i, "up"])
    for a in plan.actions:
        kind = type(a).__name__
        if getattr(a, "ns", None) != ns:
            continue
        if kind == "AddAddress":
            tb.run(node, ["ip", "addr", "replace", a.cidr, "dev", a.ifname])
        elif kind == "AddRoute":
            argv = ["ip", "route", "replace", a.dst]
            if a.via:
                argv += ["via", a.via]
            if a.dev:
                argv += ["dev", a.dev]
            tb.run(node, argv)


def _remove_namespace(ns: str) -> None:
    """testbed's own removal (kill what runs inside, remove, confirm): in testbed.actions where
    the typed plan has it, else in testbed.testbed."""
    import importlib
    import importlib.util

    owner = "testbed.actions" if importlib.util.find_spec("testbed.actions") else "testbed.testbed"
    importlib.import_module(owner).remove_namespace(ns)


def _apply(tb: Any, action: Any) -> None:
    """Apply one plan action the way the Testbed built it (action.apply(env), or the older
    interpreter's _apply)."""
    if hasattr(action, "apply"):
        action.apply(tb)
    else:
        tb._apply(action)


def restart_namespace(tb: Any, node: str) -> None:
    """Destroy `node`'s namespace and rebuild it (and its links) from the plan."""
    plan = tb.plan
    ns = plan.namespaces[node]
    actions = node_actions(plan, node)
    # the rebuild's undos duplicate the build's (which remove the namespace and its links by
    # name at teardown): they are dropped, so the rebuilt router outlives the trial's scope
    journal = tb._scopes[-1] if hasattr(tb, "_scopes") else tb._journal
    n0 = len(journal)
    handle = tb._handles.pop(ns, None)
    if handle is not None:
        handle.close()
    _remove_namespace(ns)
    # the kernel destroys a removed namespace's devices (and their veth peers) asynchronously
    peers = [(n, i) for n, i in _affected(plan, node) if n != ns]
    by_ns = {v: k for k, v in plan.namespaces.items()}

    def gone() -> bool:
        return all(tb.run(by_ns[n], ["ip", "link", "show", "dev", i], check=False).returncode
                   != 0 for n, i in peers)

    if not waiting.wait_for(gone, 10.0):
        raise DaemonError("reset", node, "the peers' interfaces of the removed namespace "
                          "still exist after 10 s", ", ".join(f"{n}/{i}" for n, i in peers))
    try:
        for a in actions:
            _apply(tb, a)
        if hasattr(tb, "_wait_ready"):
            tb._wait_ready()
    finally:
        tb._close_handles()
        del journal[n0:]


def restart(tb: Any, node: str, method: str) -> None:
    if method == "links":
        restart_links(tb, node)
    elif method == "namespace":
        restart_namespace(tb, node)
    else:
        raise SpecError("measurement", "method", f"unknown reset method {method!r}",
                        ", ".join(METHODS))


def outage_once(tb: Any, ctx: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    """One restart of `router` while `client` streams to `server` at `pps`: the outage (the
    largest gap between arrivals) and what was lost. Fails if the stream did not come back
    within `timeout` s."""
    ip = int(p["ip"])
    pps = float(p["pps"])
    timeout = float(p["timeout"])
    pre = float(p["pre_s"])
    port = ctx.port()
    out = ctx.folder(tb) / f"reset-{port}.json"
    from testbed.measure.kinds.base import wait_listening

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


def outages(tb: Any, p: Mapping[str, Any], ctx: Any) -> tuple[dict[str, float],
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
