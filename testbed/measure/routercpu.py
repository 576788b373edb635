"""The router's own CPU: each interface's receive path in its own NAPI kernel thread, timed.

Kernel forwarding has no process of its own: on veth it runs in softirq context of whichever
CPU handed the packet over — usually inside the *sender's* system call — so machine-wide
softirq/system time (`cpu.py`) mixes the router's work with the generator's and receiver's.

This module separates it. For one trial (`RouterCpu` is a context manager: a scope of the
Testbed's journal, which undoes what it sets) every interface of every node gets threaded
NAPI: GRO on (which gives a veth its NAPI instance; forwarded UDP is not aggregated,
rx-udp-gro-forwarding stays off) and
`/sys/class/net/IF/threaded` = 1, and TSO off on every device (a veth hands packets to its
peer's NAPI only when the sending device has no TSO). The kernel then receives each interface's
packets in a kernel thread `napi/IF-ID`: for a router that thread does the whole forwarding
path — IP receive, netfilter (nftables rules), routing, fragmentation, ICMP replies and the
transmit onto the next veth — and nothing else. Its exact run time (`/proc/PID/schedstat`,
nanoseconds) over the trial is the router's CPU; the end hosts' receive threads are reported
apart, and the generator's and receiver's own processes are never counted.

`router_cpu_pct` is percent of one CPU (the paper's router had one). Not counted: a shaped
egress queue (tbf) drained later by a timer runs in softirq elsewhere (small: a dequeue).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from testbed.actions import Command
from testbed.api import TestbedLike
from testbed.errors import KernelError
from testbed.kthreads import (
    group_napi_thread,
    napi_threads,
    new_napi_thread,
    parse_schedstat,
    run_ns,
    threaded_path,
    write_argv,
)

__all__ = ["RouterCpu", "features", "napi_threads", "node_ifaces", "parse_schedstat",
           "write_argv"]

def features(ethtool_json: str) -> dict[str, bool]:
    """{feature: active} from `ethtool --json -k IF`."""
    doc = json.loads(ethtool_json)
    item = doc[0] if isinstance(doc, list) else doc
    return {k: bool(v.get("active")) for k, v in item.items() if isinstance(v, dict)}


@dataclass(frozen=True)
class Iface:
    node: str
    ifname: str


def node_ifaces(tb: TestbedLike, node: str) -> list[str]:
    """The interfaces of `node` except loopback (`ip -j link`)."""
    out = tb.run(node, ["ip", "-j", "link", "show"]).stdout
    return [str(i["ifname"]) for i in json.loads(out or "[]") if i.get("ifname") != "lo"
            and "LOOPBACK" not in i.get("flags", [])]


class RouterCpu:
    """Threaded NAPI on every interface for one trial; `start()`/`stop()` time the threads.

    What it sets is a `Command` per interface (with the undo that puts back what was read
    before) applied in a scope of the Testbed's journal, which ends with the block.
    `routers`: the nodes whose threads make `router_cpu_pct` (default: role = router).
    """

    def __init__(self, tb: TestbedLike, routers: Sequence[str] | None = None,
                 nodes: Sequence[str] | None = None) -> None:
        self.tb = tb
        topo = tb.topology
        names = list(nodes or topo.node_names)
        if routers is None:
            routers = [n.name for n in topo.nodes if getattr(n, "role", "") == "router"
                       and n.name in names]
        self.routers = list(routers)
        self.nodes = names
        self.threads: dict[Iface, int] = {}
        self.stack = ExitStack()
        self._t0 = 0.0
        self._ns0: dict[Iface, int] = {}

    # -- scope --------------------------------------------------------------------------------

    def __enter__(self) -> RouterCpu:
        with ExitStack() as opening:
            opening.enter_context(self.tb.scope())
            self._setup()
            self.stack = opening.pop_all()  # open until __exit__ (closed now on a failure)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.threads.clear()
        self.stack.__exit__(et, ev, tb)

    def _setup(self) -> None:
        ifaces = [Iface(n, i) for n in self.nodes for i in node_ifaces(self.tb, n)]
        threaded: dict[Iface, str] = {}
        for f in ifaces:  # TSO off everywhere first: a sender's TSO bypasses the peer's NAPI
            feats = features(self.tb.run(f.node, ["ethtool", "--json", "-k", f.ifname]).stdout)
            threaded[f] = self.tb.run(f.node, ["cat", f"/sys/class/net/{f.ifname}/threaded"],
                                      check=False).stdout.strip() or "0"
            gro = "on" if feats.get("generic-receive-offload", False) else "off"
            tso = "on" if feats.get("tcp-segmentation-offload", False) else "off"
            self.tb.apply(Command(f.node, ("ethtool", "-K", f.ifname, "tso", "off", "gro", "on"),
                                  ("ethtool", "-K", f.ifname, "gro", gro, "tso", tso)))
        for f in ifaces:
            path = threaded_path(f.ifname)
            if threaded[f] == "1":  # threaded already: a CPU budget's (testbed.kthreads)
                pid = group_napi_thread(self.tb.netns(f.node), f.ifname)
                if pid is None:
                    raise KernelError(
                        "find the threaded-NAPI kernel thread of", f"{f.ifname} on {f.node}", 0,
                        "it was threaded already, but not by the node's CPU budget")
                self.threads[f] = pid
                continue
            before = napi_threads()
            self.tb.apply(Command(f.node, write_argv(path, "1"), write_argv(path, threaded[f])))
            self.threads[f] = new_napi_thread(before, napi_threads(), f.ifname, f.node)

    def router_threads(self) -> list[int]:
        """The thread ids of the routers' receive threads (for a sender that reads them itself)."""
        return [pid for f, pid in self.threads.items() if f.node in self.routers]

    # -- sampling -----------------------------------------------------------------------------

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._ns0 = {f: run_ns(pid) or 0 for f, pid in self.threads.items()}

    def stop(self) -> dict[str, Any]:
        seconds = time.monotonic() - self._t0
        per: dict[str, Any] = {}
        router_ns = hosts_ns = 0
        for f, pid in self.threads.items():
            now = run_ns(pid)
            if now is None:
                per[f"{f.node}:{f.ifname}"] = {"pid": pid, "error": "thread gone"}
                continue
            ns = now - self._ns0.get(f, 0)
            per[f"{f.node}:{f.ifname}"] = {"pid": pid, "ns": ns}
            if f.node in self.routers:
                router_ns += ns
            else:
                hosts_ns += ns

        def pct(ns: int) -> float:
            return 100.0 * ns / 1e9 / seconds if seconds > 0 else 0.0

        return {
            "method": "threaded NAPI: run time of each interface's receive thread "
                      "(/proc/PID/schedstat)",
            "seconds": seconds,
            "routers": self.routers,
            "router_cpu_pct": pct(router_ns),
            "router_ns": router_ns,
            "hosts_napi_cpu_pct": pct(hosts_ns),
            "threads": per,
            "unit": "% of one CPU",
        }
