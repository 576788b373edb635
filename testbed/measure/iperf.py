"""iperf3 throughput: argv for server and client, and a pure parser of `iperf3 -J` output."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from testbed.errors import CommandError

Protocol = Literal["tcp", "udp"]
Direction = Literal["forward", "reverse", "bidir"]

DIRECTIONS: tuple[str, ...] = ("forward", "reverse", "bidir")
PROTOCOLS: tuple[str, ...] = ("tcp", "udp")


def server_argv(port: int, *, one_off: bool = True) -> list[str]:
    """argv of an iperf3 server on `port` (exits after one test when `one_off`)."""
    argv = ["iperf3", "-s", "-p", str(port)]
    if one_off:
        argv.append("-1")
    return argv


def client_argv(
    server: str,
    *,
    port: int = 5201,
    protocol: Protocol = "tcp",
    duration_s: float = 5.0,
    length: int | None = None,
    bitrate_bps: int | None = None,
    direction: Direction = "forward",
    streams: int = 1,
    ip: int | None = None,
    nodelay: bool = False,
) -> list[str]:
    """argv of an iperf3 client printing JSON; `bitrate_bps` None means unlimited (UDP: `-b 0`)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    secs = max(1, round(duration_s))  # iperf3 3.12 takes whole seconds
    argv = ["iperf3", "-c", server, "-p", str(port), "-J", "-t", str(secs)]
    if ip in (4, 6):
        argv.append(f"-{ip}")
    if protocol == "udp":
        argv += ["-u", "-b", str(bitrate_bps or 0)]
    elif bitrate_bps:
        argv += ["-b", str(bitrate_bps)]
    if length is not None:
        argv += ["-l", str(length)]
    if direction == "reverse":
        argv.append("-R")
    elif direction == "bidir":
        argv.append("--bidir")
    if streams > 1:
        argv += ["-P", str(streams)]
    if nodelay and protocol == "tcp":
        argv.append("-N")
    return argv


@dataclass(frozen=True)
class FlowResult:
    """One direction of an iperf3 test, as seen by sender and receiver."""

    direction: str  # "forward" (client to server) or "reverse"
    protocol: str
    seconds: float
    sent_bytes: int
    received_bytes: int
    sender_bps: float
    receiver_bps: float
    packets: int | None = None  # UDP: datagrams sent
    lost_packets: int | None = None  # UDP: datagrams lost
    lost_percent: float | None = None
    jitter_ms: float | None = None
    retransmits: int | None = None  # TCP


@dataclass(frozen=True)
class IperfResult:
    """A parsed `iperf3 -J` run: one FlowResult per direction, plus CPU use and settings."""

    protocol: str
    length: int
    target_bps: int
    duration_s: float
    flows: tuple[FlowResult, ...]
    cpu_host_percent: float | None
    cpu_remote_percent: float | None

    @property
    def receiver_bps(self) -> float:
        """Total goodput at the receivers, all directions together."""
        return sum(f.receiver_bps for f in self.flows)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["flows"] = [asdict(f) for f in self.flows]
        d["receiver_bps"] = self.receiver_bps
        return d


def _flow(end: dict[str, Any], suffix: str, direction: str, protocol: str) -> FlowResult:
    sent = end.get("sum_sent" + suffix) or end.get("sum" + suffix) or {}
    recv = end.get("sum_received" + suffix) or {}
    common: dict[str, Any] = {
        "direction": direction,
        "protocol": protocol,
        "seconds": float(recv.get("seconds", sent.get("seconds", 0.0))),
        "sent_bytes": int(sent.get("bytes", 0)),
        "received_bytes": int(recv.get("bytes", 0)),
        "sender_bps": float(sent.get("bits_per_second", 0.0)),
        "receiver_bps": float(recv.get("bits_per_second", 0.0)),
    }
    if protocol == "udp":
        return FlowResult(
            **common,
            packets=int(recv.get("packets", sent.get("packets", 0))),
            lost_packets=int(recv.get("lost_packets", 0)),
            lost_percent=float(recv.get("lost_percent", 0.0)),
            jitter_ms=float(recv.get("jitter_ms", 0.0)),
        )
    return FlowResult(
        **common,
        retransmits=int(sent["retransmits"]) if "retransmits" in sent else None,
    )


def parse_iperf3(text: str, *, argv: list[str] | None = None, where: str = "") -> IperfResult:
    """Parse `iperf3 -J` output; an "error" key becomes a CommandError saying what iperf3 said."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(argv or ["iperf3"], 0, f"output is not JSON: {exc}", where) from exc
    if not isinstance(doc, dict):
        raise CommandError(argv or ["iperf3"], 0, "output is not a JSON object", where)
    if doc.get("error"):
        raise CommandError(argv or ["iperf3"], 1, f"iperf3: {doc['error']}", where)
    start = doc.get("start", {}).get("test_start", {})
    protocol = str(start.get("protocol", "TCP")).lower()
    end = doc.get("end", {})
    reverse = bool(start.get("reverse", 0))
    flows = [_flow(end, "", "reverse" if reverse else "forward", protocol)]
    if "sum_sent_bidir_reverse" in end or "sum_received_bidir_reverse" in end:
        flows.append(_flow(end, "_bidir_reverse", "reverse", protocol))
    cpu = end.get("cpu_utilization_percent", {})
    return IperfResult(
        protocol=protocol,
        length=int(start.get("blksize", 0)),
        target_bps=int(start.get("target_bitrate", 0)),
        duration_s=float(start.get("duration", 0)),
        flows=tuple(flows),
        cpu_host_percent=float(cpu["host_total"]) if "host_total" in cpu else None,
        cpu_remote_percent=float(cpu["remote_total"]) if "remote_total" in cpu else None,
    )
