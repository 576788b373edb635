"""ICMP echo load on a router (dobrinov-2016 test 8): echo requests paced from a client, the
router's receive-thread cost per echo read by the sender in parts, on the virtual clock settled
and rerun when the sender was held up."""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed import waiting
from testbed.api import TestbedLike
from testbed.errors import DaemonError
from testbed.measure import on_schedule
from testbed.measure.router_stress import iface_towards
from testbed.measure.routercpu import RouterCpu
from testbed.trial_actions import PinNeighbour


def icmp_counters(tb: TestbedLike, node: str, ip: int) -> tuple[int, int]:
    """(echo requests received, echo replies sent) of `node` (/proc/net/snmp or snmp6)."""
    if ip == 4:
        text = tb.run(node, ["cat", "/proc/net/snmp"]).stdout
        lines = [ln.split() for ln in text.splitlines() if ln.startswith("Icmp:")]
        c = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:]), strict=False))
        return c.get("InEchos", 0), c.get("OutEchoReps", 0)
    text = tb.run(node, ["cat", "/proc/net/snmp6"]).stdout
    c6 = {k: int(v) for k, v in (ln.split() for ln in text.splitlines() if ln.strip())}
    return c6.get("Icmp6InEchos", 0), c6.get("Icmp6OutEchoReplies", 0)


def pin_neighbour(tb: TestbedLike, node: str, peer: str, ip: int) -> str:
    """`node`'s neighbour entry for `peer`'s address a permanent one for the block's scope (the
    MAC read from `peer`): the router's reply path then never changes neighbour state mid-trial.
    With a learned entry the state depends on timers with a random period (reachable time,
    RFC 4861 §6.3.2) — REACHABLE takes the cached-header path, STALE/DELAY the resolving one —
    and on the virtual clock an ICMPv6 echo cost 13.18 or 13.47 µs by the state it met, once
    switching in mid-trial. Returns the pinned address."""
    addr = tb.address(peer, ip, node)
    ifname = iface_towards(tb, node, peer)
    peer_if = iface_towards(tb, peer, node)
    mac = next((str(link["address"]) for link in tb.handle(tb.netns(peer)).links()
                if link["ifname"] == peer_if and link.get("address")), None)
    if mac is None:
        raise DaemonError("netlink: links", peer, f"no MAC address on {peer_if}")
    tb.apply(PinNeighbour(tb.netns(node), ifname, addr, mac))
    return addr


def chunk_costs(watch: Mapping[str, Any], answered: float) -> list[float]:
    """Router run time (µs) per answered request in each part of the sender's schedule, from the
    sender's own schedstat readings (`exthdr_packets.send(watch=...)`); `answered`: the share of
    requests answered (replies / sent)."""
    samples = list(watch.get("samples", []))
    out = []
    for a, b in itertools.pairwise(samples):
        sent = int(b[1]) - int(a[1])
        if sent <= 0 or answered <= 0:
            continue
        out.append(run_ns_between(a, b) / 1000.0 / (sent * answered))
    return out


def run_ns_between(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The watched threads' run time (ns) between two of the sender's readings."""
    return sum(int(y[0]) - int(x[0]) for x, y in zip(a[2], b[2], strict=True))


def steady_cost(parts: list[float]) -> float:
    """The router's steady cost per echo from the parts' costs: their lower quartile. On the
    virtual clock other work only ever adds instructions to a part, never takes any away, so
    the cleanest parts are the low ones (the minimum as the estimator of a cost under additive
    noise: Chen & Revels, "Robust benchmarking in noisy environments", 2016); a quartile rather
    than the minimum, so that one part that lost some of its echoes' work to a neighbour does
    not decide. Measured: a rare event (a neighbour probe, a timer) lands in one part and moved
    a trial's mean by up to 2 %; at 100 echoes/s a periodic one (about every 0.24 s of guest
    time, 3.1 µs) lands in 8 or 9 of the 20 parts of 10 echoes, so the median sat between two
    levels (ICMPv4 100 B: 11.09 / 11.39 µs, 2.7 % apart in two quick runs) where the lower
    quartile is 11.09 in both."""
    if len(parts) < 2:
        return parts[0]
    return statistics.quantiles(parts, n=4, method="inclusive")[0]


# the echo sender starts on a 100 ms grid of the monotonic clock (a multiple of any tick
# period), so its schedule meets the guest's tick at the same phase in every trial
ALIGN_S = 0.1


def cpu_busy_share(window_s: float, stat: Path = Path("/proc/stat")) -> float:
    """The machine's busy share of all its CPUs over `window_s` (`/proc/stat`, every node's)."""
    def read() -> tuple[int, int]:
        f = [int(x) for x in stat.read_text().splitlines()[0].split()[1:]]
        idle = f[3] + (f[4] if len(f) > 4 else 0)  # idle + iowait
        return sum(f[:8]) - idle, sum(f[:8])
    b0, t0 = read()
    time.sleep(window_s)
    b1, t1 = read()
    return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0


def settle(min_s: float = 3.0, max_s: float = 10.0, window_s: float = 0.5,
           busy_max: float = 0.05) -> float:
    """Wait at least `min_s` and then (up to `max_s` in all) until the machine has been at most
    `busy_max` busy over a `window_s` window; the seconds waited. A topology just built is
    still announcing itself for a second or two (IPv6 duplicate address detection and MLD
    reports after random delays of up to 1 s, RFC 4862 §5.4.2, RFC 3810 §6.1); on the virtual
    clock an idle wait costs no wall time."""
    start = time.monotonic()
    time.sleep(min_s)
    while time.monotonic() - start < max_s:
        if cpu_busy_share(window_s) <= busy_max:
            break
    return time.monotonic() - start


def icmp_load(tb: TestbedLike, p: Mapping[str, Any], ctx: Any) -> tuple[dict[str, float],
                                                               dict[str, Any]]:
    """`icmp_trial`; on the virtual clock after the guest settles (`settle`), and measured
    again while the sender ends behind its schedule (`on_schedule.least_late`)."""
    if not waiting.is_virtual():
        return icmp_trial(tb, p, ctx)

    def attempt() -> tuple[dict[str, float], dict[str, Any]]:
        waited = settle()
        m, doc = icmp_trial(tb, p, ctx)
        doc["settled_s"] = waited
        return m, doc

    def behind(got: tuple[dict[str, float], dict[str, Any]]) -> float:
        # at the end, or at any point before it: a sender held up at its start catches up in a
        # burst and ends on time (one did: 1.5 s late after 400 of 8000 echoes, then 40,000/s,
        # and the router's ring dropped 57 % of them)
        sent = got[1]["sender"]
        total = int(sent["attempted"])
        ideal = (total - 1) / float(p["pps"]) if total > 1 else 0.0
        if ideal <= 0:
            return 0.0
        return max(0.0, float(sent["elapsed_s"]) / ideal - 1.0,
                   float(sent.get("max_lag_s") or 0.0) / ideal)

    return on_schedule.least_late(attempt, behind)


def icmp_trial(tb: TestbedLike, p: Mapping[str, Any], ctx: Any) -> tuple[dict[str, float],
                                                                dict[str, Any]]:
    """Echo requests from `client` to the router `target` at `pps` with `size` data bytes
    (packed as scapy would, paced from a raw socket: `ping -i` below 2 ms turns into a flood); the
    router's own counters say how many it answered.

    The router's cost per echo is the lower quartile (`steady_cost`) over 20 equal parts of the
    schedule of its receive thread's run time per answered request, read by the sender itself
    before each part and one period after the last request (so neither the sender's start nor
    the teardown is in it); the mean over the whole traffic is kept beside it
    (`router_us_per_echo_mean`).
    """
    from testbed.measure import exthdr_packets

    ip = int(p["ip"])
    pps = float(p["pps"])
    duration = float(p["duration"])
    target, client = str(p["target"]), str(p["client"])
    with RouterCpu(tb, routers=[target]) as cpu:
        pin_neighbour(tb, target, client, ip)
        argv = exthdr_packets.send_argv(
            ctx.python, variant=f"echo{ip}", src=tb.address(client, ip),
            dst=tb.address(target, ip, client), router=tb.address(target, ip, client),
            data=int(p["size"]), pps=pps, duration_s=duration, watch=cpu.router_threads(),
            align_s=ALIGN_S)
        c0 = icmp_counters(tb, target, ip)
        cpu.start()
        out = tb.run(client, argv, timeout=waiting.process_timeout(duration * 3 + 60))
        doc = cpu.stop()
        c1 = icmp_counters(tb, target, ip)
    sent = json.loads(out.stdout)
    if sent["errors"] >= sent["attempted"]:
        raise DaemonError("echo sender", client, f"every send failed ({sent['errors']})",
                          "is the router reachable from the client? see `testbed doctor`")
    requests, replies = c1[0] - c0[0], c1[1] - c0[1]
    elapsed = float(sent["elapsed_s"]) or duration
    m = {"hosts_napi_cpu_pct": float(doc["hosts_napi_cpu_pct"]),
         "loss_percent": 100.0 * (1 - replies / sent["attempted"]) if sent["attempted"] else 0.0,
         "echo_pps": requests / elapsed,
         "reply_pps": replies / elapsed,
         "icmp_data": float(p["size"])}
    parts = chunk_costs(sent.get("watch", {}), replies / sent["attempted"])
    extra: dict[str, Any] = {}
    if replies and parts:
        traffic_ns = run_ns_between(sent["watch"]["samples"][0], sent["watch"]["samples"][-1])
        m["router_us_per_echo"] = steady_cost(parts)
        m["router_us_per_echo_mean"] = traffic_ns / 1000.0 / replies
        extra = {"router_us_per_echo_parts": parts, "router_ns_traffic": traffic_ns,
                 "method": "lower quartile over the sender's 20 parts of the router's "
                           "receive-thread run time per answered request"}
    elif replies:  # no readings from the sender: the trial's window (RouterCpu)
        m["router_us_per_echo"] = m["router_us_per_echo_mean"] = (
            float(doc["router_ns"]) / 1000.0 / replies)
    if "router_us_per_echo" in m:
        # % of one CPU at the rate the router answered: the steady cost times the reply rate
        m["router_cpu_pct"] = m["router_us_per_echo"] * m["reply_pps"] / 1e4
    else:
        m["router_cpu_pct"] = 100.0 * float(doc["router_ns"]) / 1e9 / max(duration, elapsed)
    return m, {"argv": argv, "cpu": doc, "sender": sent, "router_requests": requests,
               "router_replies": replies, **extra}
