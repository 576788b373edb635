"""Router stressors of dobrinov-2016 as plain functions over a TestbedLike: mixed IPv4/IPv6
UDP streams (offered load, zero-loss maximum), ICMP echo load, fragment counting.

What a stressor changes for a trial (MTUs, sysctls, route caches) is a typed action
(testbed.actions) applied in a scope of the Testbed's journal (`tb.scope()`), which undoes it.

Traffic comes from the project's own paced UDP probe (`udpprobe`, one sender and one receiver
per IP version and direction) and from `ping`; the router's CPU from `routercpu.RouterCpu`.
ACL rule sets live in `acl.py`, extension headers in `exthdr_packets.py`, restarts in `reset.py`.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import kthreads, units, waiting
from testbed.actions import Sysctl
from testbed.api import ProcessLike, TestbedLike
from testbed.errors import DaemonError, SpecError
from testbed.measure import on_schedule, ping_tool, rfc2544_search, udpprobe
from testbed.measure.routercpu import RouterCpu
from testbed.trial_actions import FlushRouteCache, SetMtu

WIRE_EXTRA = 20  # preamble + SFD (8) and inter-frame gap (12) beyond a frame with its FCS
MIN_FRAME = {4: 64, 6: 67}  # the paper's 64/67: the smallest frame carrying 1 UDP byte (IPv6)
LINE_RATES = {"ethernet": 10e6, "fastethernet": 100e6, "gigabit": 1e9}


def ratio_shares(ratio: str | None, ip: int = 4) -> list[tuple[int, float]]:
    """[(ip version, share)] of "90/10" (IPv4 90 %, IPv6 10 %); no ratio: all on `ip`."""
    if not ratio:
        return [(ip, 1.0)]
    try:
        a, b = (float(x) for x in str(ratio).split("/"))
    except ValueError:
        raise SpecError("measurement", "ratio", f"cannot read {ratio!r}",
                        "IPv4/IPv6 percentages such as 100/0, 90/10, 50/50") from None
    total = a + b
    if total <= 0 or a < 0 or b < 0:
        raise SpecError("measurement", "ratio", f"{ratio!r} has no traffic",
                        "IPv4/IPv6 percentages such as 100/0, 90/10, 50/50")
    return [(v, s / total) for v, s in ((4, a), (6, b)) if s > 0]


def frame_for(frame_size: int, ip: int) -> int:
    """The frame sent for `frame_size` over IPv`ip`: at least the smallest that carries a byte
    of UDP data (64 B for IPv4, 67 B for IPv6, the paper's "64/67")."""
    return max(int(frame_size), MIN_FRAME[ip])


def udp_data(frame_size: int, ip: int) -> int:
    """UDP data bytes of a `frame_size`-byte Ethernet frame (frames above 1518 B are datagrams
    that the IP layer fragments: the bytes beyond one frame's header are still data)."""
    return ping_tool.udp_data_size(frame_for(frame_size, ip), ip)


def line_bps(value: Any) -> float:
    """A line rate: a preset name (fastethernet) or a number of bit/s."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if str(value) in LINE_RATES:
        return LINE_RATES[str(value)]
    try:
        return units.rate(str(value), unlimited=False)
    except ValueError as exc:
        raise SpecError("measurement", "line_rate", str(exc), "fastethernet, ethernet, 100mbit"
                        ) from None


def pps_for_load(load: float, line: float, frame_size: int) -> float:
    """Frames per second that fill `load` (0..1) of a `line` bit/s Ethernet with such frames."""
    return load * line / (8.0 * (frame_size + WIRE_EXTRA))


@dataclass(frozen=True)
class FlowSpec:
    """One paced UDP flow: IP version, from and to which node, frames per second."""

    ip: int
    src: str
    dst: str
    pps: float


def _wait_udp(tb: TestbedLike, node: str, port: int, proc: ProcessLike) -> None:
    from testbed.checks import wait_listening

    wait_listening(tb, node, port, "udp", proc, what="udp receiver")


def run_flows(tb: TestbedLike, ctx: Any, flows: Sequence[FlowSpec], frame_size: int,
              duration: float, cpu: RouterCpu | None = None, idle_s: float = 0.5,
              timestamps: bool = False) -> dict[str, Any]:
    """Run every flow at once for `duration` s; per flow what was offered, sent and received,
    and the router's CPU over the sending time. With `timestamps`, the flows to one node share
    one receiver bound to `::` (IPv4 arrives IPv4-mapped), whose arrival times give the
    inter-packet delay of the mixed stream as it reaches the receiver."""
    keys = [(f.dst, 0 if timestamps else f.ip) for f in flows]
    recv: dict[tuple[str, int], tuple[int, Path, ProcessLike]] = {}
    try:
        for key, f in zip(keys, flows, strict=True):
            if key in recv:
                continue
            port = ctx.port()
            out = ctx.folder(tb) / f"stress-{port}.json"
            host = "::" if timestamps else tb.address(f.dst, f.ip)
            rx = tb.popen(f.dst, udpprobe.recv_argv(
                ctx.python, host=host, port=port, out=str(out), idle_s=idle_s,
                max_wait_s=duration + 15, timestamps=timestamps), name="udpprobe-recv")
            recv[key] = (port, out, rx)
        for (dst, _ip), (port, _out, rx) in recv.items():
            _wait_udp(tb, dst, port, rx)
        if cpu is not None:
            cpu.start()
        senders = []
        # a CPU-budgeted router: every sender starts on the budget's refill grid, so each run
        # meets the same refills (otherwise the window holds a varying part of its first period)
        align = kthreads.budget_period_s(tb.netns(n.name) for n in tb.topology.nodes) or 0.0
        for key, f in zip(keys, flows, strict=True):
            argv = udpprobe.send_argv(ctx.python, host=tb.address(f.dst, f.ip),
                                      port=recv[key][0], size=udp_data(frame_size, f.ip),
                                      pps=f.pps, duration_s=duration, align_s=align)
            senders.append(tb.popen(f.src, argv, name="udpprobe-send", stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True))
        sent_docs = []
        for f, snd in zip(flows, senders, strict=True):
            out_text, err = snd.popen.communicate(
                timeout=waiting.process_timeout(duration * 3 + 30))
            if snd.popen.returncode != 0:
                raise DaemonError("udp sender", f.src, f"exit {snd.popen.returncode}", err)
            sent_docs.append(json.loads(out_text))
        cpu_doc = cpu.stop() if cpu is not None else None
        got: dict[tuple[str, int], dict[str, Any]] = {}
        for _port, _out, rx in recv.values():
            udpprobe.senders_done(rx)
        for key, (_port, out, rx) in recv.items():
            rx.popen.wait(timeout=waiting.process_timeout(duration + 30))
            if not out.exists():
                raise DaemonError("udp receiver", key[0], "ended without writing its count")
            got[key] = json.loads(out.read_text())
            out.unlink()
    finally:
        for _port, _out, rx in recv.values():
            rx.stop()
    per: list[dict[str, Any]] = []
    for key, f, sent in zip(keys, flows, sent_docs, strict=True):
        attempted = int(sent["attempted"])
        alone = keys.count(key) == 1
        per.append({
            "ip": f.ip, "src": f.src, "dst": f.dst, "offered_pps": f.pps,
            "sender_pps": float(sent["achieved_pps"]), "attempted": attempted,
            "received": min(int(got[key]["received"]), attempted) if alone else None,
            "elapsed_s": float(sent["elapsed_s"]), "udp_data": udp_data(frame_size, f.ip),
        })
    receivers: list[dict[str, Any]] = []
    for key, g in got.items():
        mine = [i for i, k in enumerate(keys) if k == key]
        attempted = sum(int(per[i]["attempted"]) for i in mine)
        doc: dict[str, Any] = {"dst": key[0], "flows": mine, "attempted": attempted,
                               "received": min(int(g["received"]), attempted),
                               "udp_bits": sum(float(per[i]["udp_data"]) * 8.0
                                               for i in mine) / len(mine)}
        if "timing" in g:
            doc["ipd"] = {k: v for k, v in g["timing"]["ipd"].items() if k != "histogram"}
        receivers.append(doc)
    return {"flows": per, "receivers": receivers, "cpu": cpu_doc, "frame_size": frame_size,
            "duration_s": duration}


def on_time_flows(tb: TestbedLike, ctx: Any, flows: Sequence[FlowSpec], frame_size: int,
                  duration: float, cpu: RouterCpu | None = None,
                  timestamps: bool = False) -> dict[str, Any]:
    """`run_flows`; on the virtual clock measured again while a sender fell behind its
    schedule (`on_schedule.least_late`: a held-up sender met the router with other work beside
    it), the document then saying `behind_schedule` and `earlier_attempts`. On the host's clock
    once: the trial's fidelity record judges its senders (testbed.fidelity)."""
    if not waiting.is_virtual():
        return run_flows(tb, ctx, flows, frame_size, duration, cpu, timestamps=timestamps)

    def attempt() -> tuple[dict[str, float], dict[str, Any]]:
        doc = run_flows(tb, ctx, flows, frame_size, duration, cpu, timestamps=timestamps)
        return stream_metrics(doc), doc

    return on_schedule.least_late(attempt, lambda got: on_schedule.flows_short(got[1]["flows"]))[1]


def stream_metrics(doc: Mapping[str, Any]) -> dict[str, float]:
    """Totals of `run_flows`: offered/sent/received packets per second, loss, application
    traffic (UDP data bit/s received), router CPU; the mixed stream's inter-packet delay when
    its receiver took arrival times."""
    flows = doc["flows"]
    # over the time the senders really took (a slow generator stretches it beyond `duration`)
    dur = max([float(doc["duration_s"])] + [float(f["elapsed_s"]) for f in flows])
    attempted = sum(f["attempted"] for f in flows)
    recvs = doc.get("receivers") or [
        {"received": f["received"], "udp_bits": f["udp_data"] * 8.0} for f in flows]
    received = sum(r["received"] for r in recvs)
    out: dict[str, float] = {
        "offered_pps": sum(f["offered_pps"] for f in flows),
        "sender_pps": sum(f["sender_pps"] for f in flows),
        "received_pps": received / dur,
        "loss_percent": 100.0 * (attempted - received) / attempted if attempted else 0.0,
        "received_bps": sum(r["received"] * r["udp_bits"] for r in recvs) / dur,
        "attempted": float(attempted),
        "received": float(received),
    }
    for v in (4, 6):
        fv = [f for f in flows if f["ip"] == v]
        if fv and all(f["received"] is not None for f in fv):
            att = sum(f["attempted"] for f in fv)
            out[f"v{v}_received_bps"] = sum(f["received"] * f["udp_data"] * 8.0
                                            for f in fv) / dur
            out[f"v{v}_loss_percent"] = (100.0 * (att - sum(f["received"] for f in fv)) / att
                                         if att else 0.0)
    ipd = next((r["ipd"] for r in recvs if r.get("ipd", {}).get("n")), None)
    if ipd:
        for k in ("mean_us", "median_us", "p99_us", "stdev_us"):
            out[f"ipd_{k}"] = float(ipd[k])
    cpu = doc.get("cpu")
    if cpu:
        # % of one CPU over the traffic (the senders' time), not over the sampling window,
        # which also holds the senders' start and the rings' drain: on the virtual clock that
        # window is tens of seconds of guest time (a program's start costs instructions), so
        # the window's share said 0.1-4 % where the router spent 9.4 µs on each of 10,417
        # frames a second (9.8 %)
        out["router_cpu_pct"] = 100.0 * float(cpu["router_ns"]) / 1e9 / dur
        out["hosts_napi_cpu_pct"] = float(cpu["hosts_napi_cpu_pct"])
        if received:
            out["router_us_per_packet"] = float(cpu["router_ns"]) / 1000.0 / received
    return out


def mix_flows(ratio: str | None, ip: int, total_pps: float, direction: str,
              client: str, server: str) -> list[FlowSpec]:
    """The flows of a mix: `total_pps` split by the ratio, per direction (bidir: each
    direction carries `total_pps`, as the paper's "same amount in both directions")."""
    ends = [(client, server)] + ([(server, client)] if direction == "bidir" else [])
    return [FlowSpec(v, a, b, total_pps * share) for a, b in ends
            for v, share in ratio_shares(ratio, ip)]


def offered_load(tb: TestbedLike, p: Mapping[str, Any], ctx: Any) -> tuple[dict[str, float],
                                                                   dict[str, Any]]:
    """One point of an offered-load sweep: `load` of `line_rate` in `frame_size` frames."""
    frame = int(p["frame_size"])
    line = line_bps(p["line_rate"])
    if p.get("pps") is not None:
        pps = float(p["pps"])
    else:
        pps = pps_for_load(float(p["load"]), line, frame)
    flows = mix_flows(p.get("ratio"), int(p["ip"]), pps, str(p["direction"]), p["client"],
                      p["server"])
    duration = udpprobe.lasting(float(p["duration"]), p.get("packets"),
                                pps * (2 if p["direction"] == "bidir" else 1))
    with router_fragments(tb, p["client"], p.get("ingress_mtu")), RouterCpu(tb) as cpu:
        doc = on_time_flows(tb, ctx, flows, frame, duration, cpu,
                            timestamps=bool(p.get("ipd")))
    m = stream_metrics(doc)
    m["offered_load"] = float(p["load"]) if p.get("pps") is None else pps * 8.0 * (
        frame + WIRE_EXTRA) / line
    m["offered_bps_wire"] = pps * 8.0 * (frame + WIRE_EXTRA) * (2 if p["direction"] == "bidir"
                                                                else 1)
    return m, {"stream": doc, "line_bps": line}


def max_traffic(tb: TestbedLike, p: Mapping[str, Any], ctx: Any) -> tuple[dict[str, float],
                                                                  dict[str, Any]]:
    """Zero-loss search (RFC 2544 style) over the total frame rate of a mix; the router's CPU
    and packets per second at the highest rate that lost nothing."""
    frame = int(p["frame_size"])
    line = line_bps(p["line_rate"])
    top = pps_for_load(1.0, line, frame)
    duration = float(p["duration"])
    done: list[tuple[rfc2544_search.TrialOutcome, dict[str, Any]]] = []
    with router_fragments(tb, p["client"], p.get("ingress_mtu")), RouterCpu(tb) as cpu:

        def trial(rate: float) -> rfc2544_search.TrialOutcome:
            flows = mix_flows(p.get("ratio"), int(p["ip"]), rate, str(p["direction"]),
                              p["client"], p["server"])
            doc = on_time_flows(tb, ctx, flows, frame, duration, cpu)
            sent = sum(f["attempted"] for f in doc["flows"])
            got = sum(r["received"] for r in doc["receivers"])
            achieved = sum(f["sender_pps"] for f in doc["flows"]) / max(1, len(
                {f["src"] for f in doc["flows"]}))
            out = rfc2544_search.TrialOutcome(offered=rate, achieved=achieved, sent=sent,
                                       received=got, duration_s=duration)
            done.append((out, doc))
            return out

        res = rfc2544_search.throughput_search(
            trial, max_rate=top, resolution=float(p["resolution"]) * top,
            max_trials=int(p["max_trials"]))
    metrics: dict[str, float] = {"line_pps": top, "search_trials": float(len(res.trials)),
                                 "generator_limited": 1.0 if res.limited_by == "generator"
                                 else 0.0}
    best_doc = None
    if res.throughput is not None:
        passing = [(o.achieved, d) for o, d in done if rfc2544_search.passed(o, 0.0)]
        best_doc = max(passing, key=lambda x: x[0])[1] if passing else None
        metrics["max_pps"] = res.throughput
        if best_doc is not None:
            sm = stream_metrics(best_doc)
            metrics["max_received_bps"] = sm["received_bps"]
            metrics["received_pps"] = sm["received_pps"]
            for k in ("router_cpu_pct", "router_us_per_packet", "v4_received_bps",
                      "v6_received_bps"):
                if k in sm:
                    metrics[k] = sm[k]
    return metrics, {"search": res.to_dict(), "best": best_doc, "line_bps": line}


# --- fragmentation (IPv4, topology B) ------------------------------------------------------


def link_counters(tb: TestbedLike, node: str) -> dict[str, dict[str, int]]:
    """{ifname: {"rx_packets", "tx_packets"}} of `node` (`ip -j -s link`)."""
    out = json.loads(tb.run(node, ["ip", "-j", "-s", "link", "show"]).stdout or "[]")
    return {str(i["ifname"]): {"rx_packets": int(i["stats64"]["rx"]["packets"]),
                               "tx_packets": int(i["stats64"]["tx"]["packets"]),
                               "tx_dropped": int(i["stats64"]["tx"].get("dropped", 0))}
            for i in out if "stats64" in i}


def snmp_ip(tb: TestbedLike, node: str) -> dict[str, int]:
    """The `Ip:` counters of /proc/net/snmp in `node` (FragCreates, FragOKs, ForwDatagrams)."""
    text = tb.run(node, ["cat", "/proc/net/snmp"]).stdout
    lines = [ln.split() for ln in text.splitlines() if ln.startswith("Ip:")]
    if len(lines) < 2:
        raise DaemonError("cat /proc/net/snmp", node, "no Ip: counters")
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:], strict=False)}


def iface_towards(tb: TestbedLike, node: str, peer: str) -> str:
    """The interface of `node` on its link to `peer`."""
    for i in tb.interfaces(node):
        if i.peer_node == peer:
            return str(i.name)
    raise SpecError("topology", f"links ({node}-{peer})", f"{node} has no link to {peer}",
                    "a topology with that link (two-routers-v4 has r1-r2)")


def expected_fragments(ip_payload: int, mtu: int) -> int:
    """Fragments an IPv4 router makes of a datagram of `ip_payload` bytes (after its 20-byte
    header) for a link of `mtu`: each fragment carries a multiple of 8 bytes but the last."""
    per = (mtu - 20) // 8 * 8
    if per <= 0:
        raise ValueError(f"an MTU of {mtu} carries no IPv4 fragment data")
    return max(1, math.ceil(ip_payload / per))


@contextmanager
def link_mtu(tb: TestbedLike, a: str, b: str, mtu: int) -> Iterator[None]:
    """Both ends of the a-b link at `mtu` for the block (a scope of the Testbed's journal:
    their old MTUs back after it)."""
    with tb.scope():
        for node, peer in ((a, b), (b, a)):
            tb.apply(SetMtu(node, iface_towards(tb, node, peer), mtu))
        yield


@contextmanager
def sysctl_set(tb: TestbedLike, node: str, key: str, value: str) -> Iterator[None]:
    """`key` = `value` in `node` for the block; the value read before back after it."""
    with tb.scope():
        tb.apply(Sysctl(node, ((key, value),)))
        yield


@contextmanager
def no_path_mtu(tb: TestbedLike, client: str) -> Iterator[None]:
    """For the block `client` sets no DF bit on IPv4 and learns no path MTU (its IPv4 route
    cache flushed), so a router on the way fragments instead of answering "fragmentation
    needed"."""
    with tb.scope():
        tb.apply(Sysctl(client, (("net.ipv4.ip_no_pmtu_disc", "1"),)))
        tb.apply(FlushRouteCache(client, now=(4,)))
        yield


@contextmanager
def router_fragments(tb: TestbedLike, client: str, mtu: int | None) -> Iterator[None]:
    """For one trial: the client's link to its router gets `mtu` (both ends) and the client
    sends IPv4 without DF and learns no path MTU, so datagrams larger than the router's next
    link are fragmented by the router (IPv4) or answered with Packet Too Big, after which the
    source fragments (IPv6) — the paper's 1522-byte and larger frames. None: nothing changes.
    After the block the client forgets the path MTUs it learnt (both IP versions)."""
    if not mtu:
        yield
        return
    router = tb.interfaces(client)[0].peer_node
    with tb.scope():
        tb.apply(FlushRouteCache(client, after=(4, 6)))
        with link_mtu(tb, client, router, int(mtu)), no_path_mtu(tb, client):
            yield


def check_core_mtu(tb: TestbedLike, a: str, b: str, mtu: int, file: str, key: str) -> None:
    """A link below 1280 cannot carry IPv6: refuse it on a dual-stack topology, saying so."""
    nodes = {n.name: n for n in tb.topology.nodes}
    if mtu < 1280 and all(6 in nodes[x].families for x in (a, b)):
        raise SpecError(file, key, f"MTU {mtu} on {a}-{b}, a link that carries IPv6, which "
                        "needs at least 1280 (RFC 8200)",
                        "an IPv4-only topology for MTUs below 1280: topology = "
                        "\"two-routers-v4\" (dobrinov-2016 topology B, IPv4 only)")
    if mtu < 68:
        raise SpecError(file, key, f"MTU {mtu} is below IPv4's minimum of 68 (RFC 791)",
                        "68 to 65535")


def fragmentation(tb: TestbedLike, p: Mapping[str, Any], ctx: Any) -> tuple[dict[str, float],
                                                                   dict[str, Any]]:
    """IPv4 datagrams of `frame_size` at `pps` through r1, whose link to r2 has `core_mtu`:
    fragments per datagram on that link (r2's receive counter and r1's FragCreates), fragments
    per second, and r1's CPU."""
    a, b = str(p["router"]), str(p["next_hop"])
    mtu = int(p["core_mtu"])
    check_core_mtu(tb, a, b, mtu, "measurement", "core_mtu")
    frame = int(p["frame_size"])
    payload = udp_data(frame, 4) + ping_tool.UDP_HEADER
    # the sender sets no DF bit and learns no path MTU, so the router fragments (the paper's
    # IPv4 case); MTU and sender restored after the trial
    with link_mtu(tb, a, b, mtu), no_path_mtu(tb, str(p["client"])):
        in_b, out_a = iface_towards(tb, b, a), iface_towards(tb, a, b)
        with RouterCpu(tb, routers=[a]) as cpu:
            c0, s0, e0 = link_counters(tb, b)[in_b], snmp_ip(tb, a), link_counters(tb, a)[out_a]
            flows = [FlowSpec(4, p["client"], p["server"], float(p["pps"]))]
            doc = run_flows(tb, ctx, flows, frame, float(p["duration"]), cpu)
            c1, s1, e1 = link_counters(tb, b)[in_b], snmp_ip(tb, a), link_counters(tb, a)[out_a]
    sm = stream_metrics(doc)
    sent = sum(f["attempted"] for f in doc["flows"])
    on_link = c1["rx_packets"] - c0["rx_packets"]
    emitted = (e1["tx_packets"] + e1["tx_dropped"]) - (e0["tx_packets"] + e0["tx_dropped"])
    creates = s1.get("FragCreates", 0) - s0.get("FragCreates", 0)
    oks = s1.get("FragOKs", 0) - s0.get("FragOKs", 0)
    fails = s1.get("FragFails", 0) - s0.get("FragFails", 0)
    dur = max([float(p["duration"])] + [float(f["elapsed_s"]) for f in doc["flows"]])
    m = {**sm,
         "core_mtu": float(mtu),
         "ip_payload": float(payload),
         "expected_fragments_per_datagram": float(expected_fragments(payload, mtu)),
         "link_packets_per_datagram": on_link / sent if sent else 0.0,
         "emitted_per_datagram": emitted / sent if sent else 0.0,
         "fragments_per_datagram": creates / oks if oks else 1.0,
         "fragmented_datagrams": float(oks),
         "fragment_failures": float(fails),
         "fragments_per_s": creates / dur,
         "router_pps_out": on_link / dur}
    return m, {"stream": doc, "link_rx_packets": on_link, "emitted": emitted,
               "frag_creates": creates,
               "frag_oks": oks, "router": a, "link": f"{a}-{b}"}
