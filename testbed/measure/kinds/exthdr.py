"""Measurement kind `exthdr`: IPv6 traffic with extension headers (Hop-by-Hop; four headers;
twenty Destination Options; Routing Header type 0; Segment Routing) through the router, with
and without an nftables rule that must parse to the upper-layer header; the router's CPU and
a capture at the receiver's link that shows the headers really crossed."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from testbed.api import TestbedLike
from testbed.measure import exthdr_packets, router_stress
from testbed.measure.kinds import base
from testbed.measure.kinds._stress_shared import ROUTER_METRICS, paced, through
from testbed.measure.kinds.base import Kind, Metric, Param
from testbed.measure.routercpu import RouterCpu

RULE_TABLE = "tbexthdr"


def check(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    try:
        exthdr_packets.data_for_frame(str(out["variant"]), int(out["frame_size"]))
    except ValueError as exc:
        raise base.ParamProblem("frame_size", str(exc), "a larger frame_size (the paper: 1280)"
                           ) from None


def snmp6(tb: TestbedLike, node: str) -> dict[str, int]:
    out = tb.run(node, ["cat", "/proc/net/snmp6"]).stdout
    return {k: int(v) for k, v in (ln.split() for ln in out.splitlines() if ln.strip())}


def load_rule(tb: TestbedLike, router: str, folder: Path, stack: ExitStack) -> None:
    """The upper-layer rule (`meta l4proto udp`, counted) on `router`, removed with `stack`."""
    rules = folder / f"exthdr-{router}.nft"
    rules.write_text(f"table inet {RULE_TABLE} {{\n  chain upper {{ type filter hook "
                     "forward priority 0; policy accept;\n    meta l4proto udp counter "
                     "accept\n  }\n}\n")
    tb.run(router, ["nft", "-f", str(rules)])
    stack.callback(tb.run, router, ["nft", "delete", "table", "inet", RULE_TABLE], check=False)
    stack.callback(rules.unlink, missing_ok=True)


def rule_packets(tb: TestbedLike, router: str) -> int:
    """The packets the upper-layer rule counted."""
    listing = json.loads(tb.run(router, ["nft", "-j", "list", "table", "inet",
                                         RULE_TABLE]).stdout)
    return sum(int(e["counter"]["packets"]) for item in listing.get("nftables", [])
               for e in item.get("rule", {}).get("expr", []) if "counter" in e)


def run(tb: TestbedLike, p: Mapping[str, Any], ctx: base.Context) -> base.Measured:
    variant = str(p["variant"])
    client, server, router = str(p["client"]), str(p["server"]), str(p["router"])
    in_if = router_stress.iface_towards(tb, router, client)
    cap_if = router_stress.iface_towards(tb, server, router)
    data = exthdr_packets.data_for_frame(variant, int(p["frame_size"]))
    folder = ctx.folder(tb)
    pcap = folder / f"exthdr-{ctx.port()}.pcap"
    duration = float(p["duration"])
    with ExitStack() as stack:
        if variant == "srh":  # the router processes SRv6 only where seg6_enabled is set
            for key in ("net.ipv6.conf.all.seg6_enabled",
                        f"net.ipv6.conf.{in_if}.seg6_enabled"):
                stack.enter_context(router_stress.sysctl_set(tb, router, key, "1"))
        if p["rule"]:
            load_rule(tb, router, folder, stack)
        cap = None
        if p["capture"]:
            cap = tb.popen(server, ["tcpdump", "-n", "-U", "-i", cap_if, "-c",
                                    str(int(p["capture_count"])), "-w", str(pcap),
                                    "ip6 and not icmp6"], name="tcpdump",
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            stack.callback(cap.stop)
            stack.callback(pcap.unlink, missing_ok=True)
            time.sleep(0.5)  # tcpdump opens its socket (no readiness signal but the file)
        h0 = snmp6(tb, router)
        cpu = stack.enter_context(RouterCpu(tb, routers=[router]))
        cpu.start()
        sent = tb.run(client, exthdr_packets.send_argv(
            ctx.python, variant=variant, src=tb.address(client, 6),
            dst=tb.address(server, 6), router=tb.address(router, 6, client), data=data,
            pps=float(p["pps"]), duration_s=duration, burst=int(p["burst"])),
            timeout=duration * 3 + 60)
        doc = cpu.stop()
        h1 = snmp6(tb, router)
        counter = rule_packets(tb, router) if p["rule"] else 0
        chains: list[dict[str, Any]] = []
        if cap is not None:
            time.sleep(0.2)
            cap.stop()
            if pcap.exists():
                chains = exthdr_packets.capture_chain(str(pcap))
    sdoc = json.loads(sent.stdout)
    want = list(exthdr_packets.EXPECTED[variant])
    ok = bool(chains) and all(c["chain"] == want for c in chains)
    if variant == "srh":
        ok = ok and all(c.get("segleft") == 0 and c["dst"] == tb.address(server, 6)
                        for c in chains)
    dur = float(sdoc["elapsed_s"]) or duration
    metrics = {
        "router_cpu_pct": float(doc["router_cpu_pct"]),
        "hosts_napi_cpu_pct": float(doc["hosts_napi_cpu_pct"]),
        "sender_pps": float(sdoc["achieved_pps"]),
        "attempted": float(sdoc["attempted"]),
        "frame_bytes": float(sdoc["frame_bytes"]),
        "ext_headers": float(len(want)),
        "captured": float(len(chains)),
        "chain_ok": 1.0 if ok else 0.0,
        "router_hdr_errors": float(h1.get("Ip6InHdrErrors", 0) - h0.get("Ip6InHdrErrors", 0)),
        "router_forwarded": float(h1.get("Ip6OutForwDatagrams", 0)
                                  - h0.get("Ip6OutForwDatagrams", 0)),
        "rule_packets": float(counter),
    }
    if sdoc["attempted"]:
        metrics["router_us_per_packet"] = float(doc["router_ns"]) / 1000.0 / sdoc["attempted"]
    metrics["sender_pps"] = float(sdoc["attempted"]) / dur if dur else metrics["sender_pps"]
    return base.Measured(metrics, {"sender": sdoc, "cpu": doc, "captured": chains[:5],
                              "expected_chain": want})


KIND = Kind(
    name="exthdr",
    doc="IPv6 extension headers (HbH, four, 20 DestOpts, RH0, SRH) through a router, with "
        "and without an upper-layer rule; router CPU; capture proof",
    tool="scapy-built packets from a raw socket (`python -m testbed.measure.exthdr_packets`); "
         "tcpdump + scapy at the receiver's link; nft",
    params=(
        *through("the router under test (the routing headers' segment)",
                 server="the final destination"),
        Param("variant", "str", "hbh", "none, hbh, four, dest20, rh0, srh",
              choices=exthdr_packets.VARIANTS),
        Param("rule", "bool", False, "an nftables forward rule `meta l4proto udp` that must "
              "walk the headers to the upper layer (the paper's ACL)"),
        Param("frame_size", "size", 1280, "Ethernet frame bytes (headers + UDP data)"),
        *paced(1000, "packets per second"),
        Param("burst", "int", 1, "packets sent back to back (same average rate): one wake-up "
              "of the router's thread per burst", max=1000),
        Param("capture", "bool", True, "capture at the receiver's link and check the chain"),
        Param("capture_count", "int", 20, "packets to capture", max=100_000),
    ),
    metrics=(
        *ROUTER_METRICS,
        Metric("sender_pps", "pkt/s", "packets per second sent"),
        Metric("attempted", "count", "packets sent"),
        Metric("frame_bytes", "B", "Ethernet frame bytes of each packet"),
        Metric("ext_headers", "count", "extension headers expected beyond the router"),
        Metric("captured", "count", "test packets captured at the receiver's link"),
        Metric("chain_ok", "flag", "1: every captured packet carries the expected headers"),
        Metric("router_hdr_errors", "count", "packets the router dropped for a bad header "
               "(Ip6InHdrErrors: RH0)"),
        Metric("router_forwarded", "count", "IPv6 datagrams the router forwarded"),
        Metric("rule_packets", "count", "packets the upper-layer rule matched"),
    ),
    runner=run,
    check=check,
    programs=("tcpdump", "nft"),
    measures="cost",
)
