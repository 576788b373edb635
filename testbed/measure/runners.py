"""Measurement kinds as data: their parameters, and a runner for each over a built Testbed."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from testbed import netlink, waiting
from testbed.errors import CommandError, DaemonError, SpecError
from testbed.measure import iperf, ping, pingpong, rfc2544, stackcost, udpprobe
from testbed.measure.cpu import CpuSampler


class ProcessLike(Protocol):
    @property
    def pid(self) -> int: ...

    def alive(self) -> bool: ...

    def stop(self, grace: float = 2.0) -> int | None: ...


def listen_address(tb: TestbedLike, node: str, ip_v: int) -> str:
    """Where a server on `node` listens for clients that reach it over IPv`ip_v`: its address,
    except under NAT64, where an IPv4-only server is reached at a synthesized IPv6 address."""
    bind = getattr(tb, "bind_address", None)
    return str(bind(node, ip_v)) if bind is not None else tb.address(node, ip_v)


class TestbedLike(Protocol):
    """What a runner needs of `testbed.testbed.Testbed`."""

    @property
    def topology(self) -> Any: ...

    def netns(self, node: str) -> str: ...

    def address(self, node: str, family: int, peer: str | None = None) -> str: ...

    def run(
        self, node: str, argv: list[str], *, check: bool = True, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]: ...

    def popen(self, node: str, argv: list[str], *, name: str = "", **popen_kw: Any) -> Any: ...

    def qdiscs(self) -> list[dict[str, Any]]: ...


@dataclass
class Context:
    """Per-run helpers: a fresh port per server, a scratch folder, the Python to run probes."""

    python: str = sys.executable
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="testbed-")))
    _ports: itertools.count[int] = field(default_factory=lambda: itertools.count(20000))

    def port(self) -> int:
        return next(self._ports)


@dataclass(frozen=True)
class Measured:
    """A trial's outcome: flat numeric metrics (for statistics) and the full result document."""

    metrics: dict[str, float]
    result: dict[str, Any]


Runner = Callable[[TestbedLike, Mapping[str, Any], Context], Measured]


@dataclass(frozen=True)
class Kind:
    """A measurement kind: its parameters with defaults, allowed values, and its runner."""

    name: str
    params: Mapping[str, Any]  # name -> default (None: optional, no default)
    choices: Mapping[str, tuple[Any, ...]]
    runner: Runner
    description: str


COMMON = {"client": "h1", "server": "h2", "ip": 4, "cpu": True, "cpu_processes": ["tayga"]}


# --- helpers --------------------------------------------------------------------------------


def wait_listening(
    tb: TestbedLike,
    node: str,
    port: int,
    proto: str,
    proc: Any = None,
    deadline_s: float = 60.0,
    what: str = "server",
) -> None:
    """Poll `ss` until something listens on `port` in `node` (or fail saying what did not).

    The deadline is a `waiting.Deadline`: host wall time in a virtual-clock guest, where the
    guest clock leaps while the server starts (it reads its program over 9p). A server that
    dies ends the wait at once; the long deadline is for a slow start (a Python probe starting
    under the full-kernel tier's software emulation on a busy host takes > 10 s).
    """
    flag = "-Hltn" if proto == "tcp" else "-Hlun"

    def listening() -> bool:
        out = tb.run(node, ["ss", flag, "sport", "=", f":{port}"], check=False).stdout
        return bool(out.strip())

    def died() -> bool:
        return proc is not None and not proc.alive()

    if waiting.wait_for(listening, deadline_s, give_up=died):
        return
    raise DaemonError(
        what,
        node,
        f"did not listen on {proto} port {port} within {deadline_s} s",
        "is the program installed and the address configured? see `testbed doctor`",
    )


def node_pids(tb: TestbedLike, names: list[str]) -> dict[str, int]:
    """pids of processes called one of `names` in any namespace of the testbed (translators)."""
    found: dict[str, int] = {}
    if not names:
        return found
    for node in tb.topology.node_names:
        ns = tb.netns(node)
        for pid in netlink.netns_pids(ns):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm in names:
                found[f"{comm}@{node}"] = int(pid)
    return found


def sampler(tb: TestbedLike, p: Mapping[str, Any]) -> CpuSampler | None:
    if not p.get("cpu", True):
        return None
    s = CpuSampler(node_pids(tb, list(p.get("cpu_processes") or [])))
    s.start()
    return s


def cpu_metrics(doc: dict[str, Any] | None) -> dict[str, float]:
    if doc is None:
        return {}
    m = doc["machine_percent"]
    out = {
        "cpu_machine_softirq_pct": m["softirq"],
        "cpu_machine_system_pct": m["system"],
        "cpu_machine_user_pct": m["user"],
    }
    for name, proc in doc["processes"].items():
        if "total" in proc:
            out[f"cpu_{name.split('@')[0]}_pct"] = proc["total"]
    return out


def bottleneck_bps(tb: TestbedLike) -> float | None:
    """Slowest shaped link rate of the topology (None when nothing is shaped)."""
    rates = [lk.shape.rate_bps for lk in tb.topology.links if lk.shape.rate_bps]
    return float(min(rates)) if rates else None


def parse_bps(value: Any, where: str) -> float | None:
    """A rate parameter (`testbed.units.rate`): None, 0 or 'unlimited' means unlimited."""
    if value in (None, 0, "0"):
        return None
    from testbed import units

    try:
        return units.rate(value)
    except units.UnitError as exc:
        raise SpecError(where, "rate", exc.what, exc.allowed) from None


def ip_payload_and_data(p: Mapping[str, Any], ip: int) -> tuple[int, int]:
    """(IP payload bytes, UDP data bytes) from `ip_payload`, `frame_size` or `size` (UDP data)."""
    if p.get("ip_payload") is not None:
        n = int(p["ip_payload"])
        return n, n - ping.UDP_HEADER
    if p.get("frame_size") is not None:
        data = ping.udp_data_size(int(p["frame_size"]), ip)
        return data + ping.UDP_HEADER, data
    data = int(p.get("size") or 18)
    return data + ping.UDP_HEADER, data


# --- iperf3 -------------------------------------------------------------------------------


def _flows(p: Mapping[str, Any]) -> list[tuple[int, float]]:
    """(ip version, share) of each concurrent flow: `ratio = "90/10"` is IPv4 90%, IPv6 10%."""
    ratio = p.get("ratio")
    if not ratio:
        return [(int(p["ip"]), 1.0)]
    try:
        a, b = (float(x) for x in str(ratio).split("/"))
    except ValueError:
        raise SpecError(
            "measurement",
            "ratio",
            f"cannot read {ratio!r}",
            "IPv4/IPv6 percentages such as 100/0, 90/10, 50/50",
        ) from None
    total = a + b
    return [(v, s / total) for v, s in ((4, a), (6, b)) if s > 0]


def run_iperf3(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    rate = parse_bps(p.get("rate"), "measurement")
    flows = _flows(p)
    servers = []
    for ip_v, _share in flows:
        port = ctx.port()
        srv = tb.popen(
            p["server"],
            iperf.server_argv(port),
            name="iperf3-server",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_listening(tb, p["server"], port, "tcp", srv, what="iperf3 server")
        servers.append((ip_v, port, srv))
    cpu = sampler(tb, p)
    procs = []
    for (ip_v, port, _srv), (_, share) in zip(servers, flows, strict=True):
        length = None
        if p.get("length") is not None:
            length = int(p["length"])
        elif p.get("ip_payload") is not None or p.get("frame_size") is not None:
            length = ip_payload_and_data(p, ip_v)[1]
        argv = iperf.client_argv(
            tb.address(p["server"], ip_v),
            port=port,
            protocol=p["protocol"],
            duration_s=float(p["duration"]),
            length=length,
            bitrate_bps=int(rate * share) if rate else None,
            direction=p["direction"],
            streams=int(p["streams"]),
            ip=ip_v,
            nodelay=bool(p.get("nodelay")),
        )
        procs.append(
            (
                ip_v,
                argv,
                tb.popen(
                    p["client"],
                    argv,
                    name="iperf3-client",
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        )
    results = {}
    for ip_v, argv, proc in procs:
        out, err = proc.popen.communicate(
            timeout=waiting.process_timeout(float(p["duration"]) + 30)
        )
        if proc.popen.returncode != 0 and not out.strip():
            raise CommandError(argv, proc.popen.returncode, err, f"node {p['client']}")
        results[ip_v] = iperf.parse_iperf3(out, argv=argv, where=f"node {p['client']}")
    cpu_doc = cpu.stop() if cpu else None
    for _ip, _port, srv in servers:
        srv.stop()
    metrics: dict[str, float] = {"receiver_bps": sum(r.receiver_bps for r in results.values())}
    for ip_v, r in results.items():
        metrics[f"v{ip_v}_receiver_bps"] = r.receiver_bps
        metrics[f"v{ip_v}_sender_bps"] = sum(f.sender_bps for f in r.flows)
        if r.protocol == "udp":
            lost = sum(f.lost_packets or 0 for f in r.flows)
            pk = sum(f.packets or 0 for f in r.flows)
            metrics[f"v{ip_v}_lost_percent"] = 100.0 * lost / pk if pk else 0.0
        else:
            metrics[f"v{ip_v}_retransmits"] = float(sum(f.retransmits or 0 for f in r.flows))
    metrics.update(cpu_metrics(cpu_doc))
    return Measured(
        metrics, {"flows": {f"v{k}": v.to_dict() for k, v in results.items()}, "cpu": cpu_doc}
    )


# --- RFC 2544 / 5180 ------------------------------------------------------------------------


def udp_trial(
    tb: TestbedLike,
    p: Mapping[str, Any],
    ctx: Context,
    ip_v: int,
    n: int,
    data: int,
    retries: int = 2,
) -> Callable[[float], rfc2544.TrialOutcome]:
    """A trial function for the search: offer `rate` bit/s of IP payload (n bytes a datagram)."""
    duration = float(p["duration"])
    dst = tb.address(p["server"], ip_v)
    listen = listen_address(tb, p["server"], ip_v)

    max_late = p.get("max_late_ms")
    max_late_s = float(max_late) / 1000.0 if max_late is not None else 0.002 * duration + 0.003

    def trial(rate: float) -> rfc2544.TrialOutcome:
        """Run once; rerun (up to twice) a trial that lost nothing but failed by lateness, or
        whose generator fell short: on a shared machine a descheduled sender or receiver can
        look like that for a moment; real overload (or a generator too slow) stays so."""
        out = once(rate)
        for _ in range(retries):
            short = out.generator_short(0.02)
            if not short and (out.lost or rfc2544.passed(out, 0.0, max_late_s)):
                break
            again = once(rate)
            if short and again.achieved <= out.achieved:
                continue
            out = again
        return out

    def once(rate: float) -> rfc2544.TrialOutcome:
        pps = rate / (8.0 * n)
        port = ctx.port()
        out = ctx.scratch / f"recv-{port}.json"
        rx = tb.popen(
            p["server"],
            udpprobe.recv_argv(
                ctx.python,
                host=listen,
                port=port,
                out=str(out),
                idle_s=float(p["drain_s"]),
                max_wait_s=duration + 10,
            ),
            name="udpprobe-recv",
        )
        wait_listening(tb, p["server"], port, "udp", rx, what="udp receiver")
        tx = tb.run(
            p["client"],
            udpprobe.send_argv(
                ctx.python, host=dst, port=port, size=data, pps=pps, duration_s=duration
            ),
            timeout=waiting.process_timeout(duration * 3 + 30),
        )
        sent = json.loads(tx.stdout)
        try:
            rx.popen.wait(timeout=waiting.process_timeout(duration + 30))
        finally:
            rx.stop()
        if not out.exists():
            raise DaemonError("udp receiver", p["server"], "ended without writing its count")
        got = json.loads(out.read_text())
        out.unlink()
        # Both clocks are CLOCK_MONOTONIC of this machine. (Kernel receive stamps are not used:
        # across veth and namespaces they can carry the sender's time, hiding the queue.)
        late = (got["last_ns"] - sent["end_ns"]) / 1e9 if got["last_ns"] else None
        achieved_rate = sent["achieved_pps"] * 8.0 * n
        return rfc2544.TrialOutcome(
            offered=rate,
            achieved=achieved_rate,
            sent=int(sent["attempted"]),
            received=int(got["received"]),
            late_s=late,
            duration_s=duration,
            extra={
                "sender": {
                    k: sent[k] for k in ("eagain", "elapsed_s", "achieved_pps", "max_lag_s")
                },
                "receiver_rcvbuf_drops": got["rcvbuf_drops"],
            },
        )

    return trial


def run_rfc2544(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    ip_v = int(p["ip"])
    n, data = ip_payload_and_data(p, ip_v)
    if data < 1:
        raise SpecError(
            "measurement",
            "frame_size",
            f"leaves {data} bytes of UDP data",
            "a frame or payload that carries at least one byte of UDP data",
        )
    link = bottleneck_bps(tb)
    max_rate = parse_bps(p.get("max_rate"), "measurement")
    if max_rate is None:
        if link is not None:
            from testbed.models import max_throughput_bps

            max_rate = 1.02 * max_throughput_bps(n, link, ip_v)
        else:
            max_rate = 1e9
    trial = udp_trial(tb, p, ctx, ip_v, n, data)
    max_late = p.get("max_late_ms")
    cpu = sampler(tb, p)
    metrics: dict[str, float] = {"ip_payload": n, "udp_data": data}
    result: dict[str, Any] = {
        "ip_payload": n,
        "udp_data": data,
        "max_rate_bps": max_rate,
        "rate_unit": "bit/s of IP payload (UDP header + data)",
    }
    # RFC 2544 section 26.3: the frame loss test starts at the maximum rate of the medium (the
    # model's line rate at the bottleneck link), not at the zero-loss throughput
    line_rate = max_rate
    if link is not None and parse_bps(p.get("max_rate"), "measurement") is None:
        from testbed.models import max_throughput_bps

        line_rate = max_throughput_bps(n, link, ip_v)
    result["line_rate_bps"] = line_rate
    if p["test"] in ("throughput", "both"):
        res = rfc2544.throughput_search(
            trial,
            max_rate=max_rate,
            resolution=float(p["resolution"]) * max_rate,
            max_late_s=(
                float(max_late) / 1000.0
                if max_late is not None
                else 0.002 * float(p["duration"]) + 0.003
            ),
        )
        result["throughput"] = res.to_dict()
        if res.throughput is not None:
            metrics["throughput_bps"] = res.throughput
            metrics["throughput_udp_data_bps"] = res.throughput * data / n
            metrics["throughput_pps"] = res.throughput / (8.0 * n)
        metrics["generator_limited"] = 1.0 if res.limited_by == "generator" else 0.0
        metrics["search_trials"] = float(len(res.trials))
    if p["test"] in ("frame_loss", "both"):
        pts = rfc2544.frame_loss_rate(trial, start_rate=line_rate)
        result["frame_loss"] = [pt.to_dict() for pt in pts]
        metrics["frame_loss_pct_at_start"] = pts[0].loss_percent
        metrics["frame_loss_pct_max"] = max(pt.loss_percent for pt in pts)
        metrics["frame_loss_steps"] = float(len(pts))
        metrics["frame_loss_start_generator_short"] = 1.0 if pts[0].generator_short else 0.0
    result["cpu"] = cpu.stop() if cpu else None
    metrics.update(cpu_metrics(result["cpu"]))
    return Measured(metrics, result)


# --- latency --------------------------------------------------------------------------------


def run_ping(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    ip_v = int(p["ip"])
    size = (
        ping.icmp_data_size(int(p["frame_size"]), ip_v)
        if p.get("frame_size") is not None
        else int(p.get("size") or 56)
    )
    argv = ping.ping_argv(
        tb.address(p["server"], ip_v),
        ip=ip_v,
        size=size,
        count=int(p["count"]),
        interval_s=float(p["interval"]),
    )
    proc = tb.run(
        p["client"], argv, check=False,
        timeout=waiting.process_timeout(float(p["count"]) * 2 + 30),
    )
    r = ping.parse_ping(proc.stdout)
    metrics = {"loss_percent": r.loss_percent, "icmp_data": float(size)}
    if r.rtts_ms:
        import statistics

        metrics.update(
            {
                "rtt_min_ms": min(r.rtts_ms),
                "rtt_mean_ms": statistics.fmean(r.rtts_ms),
                "rtt_max_ms": max(r.rtts_ms),
                "rtt_median_ms": statistics.median(r.rtts_ms),
            }
        )
    return Measured(metrics, {"argv": argv, **r.to_dict()})


def _pingpong_once(
    tb: TestbedLike,
    node_srv: str,
    node_cli: str,
    host: str,
    p: Mapping[str, Any],
    ctx: Context,
    size: int,
    listen: str | None = None,
) -> dict[str, Any]:
    port = ctx.port()
    # client and server both spin when busy-polling: block when they would outnumber the CPUs
    busy, why = pingpong.choose_mode(bool(p["busy_poll"]), spinners=2)
    kw = {"protocol": p["protocol"], "size": size, "busy_poll": busy}
    srv = tb.popen(
        node_srv,
        pingpong.argv(ctx.python, "server", host=listen or host, port=port, **kw),
        name="pingpong-server",
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_listening(tb, node_srv, port, p["protocol"], srv, what="ping-pong server")
        cli = tb.run(
            node_cli,
            pingpong.argv(ctx.python, "client", host=host, port=port, count=int(p["count"]),
                          timeout_s=10.0 if p["protocol"] == "tcp" else 1.0, **kw),
            # TCP never loses a reply, so its wait only guards against a dead peer; a UDP reply
            # later than 1 s counts as lost
            timeout=waiting.process_timeout(
                float(p["count"]) * (10.0 if p["protocol"] == "tcp" else 1.0) + 60
            ),
        )
    finally:
        srv.stop()
    doc: dict[str, Any] = json.loads(cli.stdout)
    doc["mode_reason"] = why
    return doc


def run_pingpong(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    ip_v = int(p["ip"])
    if p.get("ip_payload") is not None:
        hdr = ping.UDP_HEADER if p["protocol"] == "udp" else 20
        size = int(p["ip_payload"]) - hdr
    else:
        size = int(p.get("size") or 64)
    if size < 1:
        raise SpecError(
            "measurement",
            "ip_payload",
            "leaves no message bytes",
            "at least 9 (UDP) or 21 (TCP) bytes of IP payload",
        )
    doc = _pingpong_once(
        tb,
        p["server"],
        p["client"],
        tb.address(p["server"], ip_v),
        p,
        ctx,
        size,
        listen=listen_address(tb, p["server"], ip_v),
    )
    owd = doc["owd"]
    metrics = {f"owd_{k}": float(v) for k, v in owd.items() if k != "n"}
    # the round trip itself, as zeadally-2004 reports it (owd_* are RTT/2)
    for k in ("mean_us", "min_us", "max_us", "median_us", "p99_us"):
        if k in owd:
            metrics[f"rtt_{k}"] = 2.0 * float(owd[k])
    metrics["lost"] = float(doc["lost"])
    metrics["busy_poll"] = 1.0 if doc["busy_poll"] else 0.0
    metrics["message_bytes"] = float(size)
    overhead = None
    if p.get("overhead", True):
        lo = "::1" if ip_v == 6 else "127.0.0.1"
        overhead = _pingpong_once(tb, p["client"], p["client"], lo, p, ctx, size)
        metrics["probe_overhead_median_us"] = overhead["owd"]["median_us"]
        metrics["probe_overhead_mean_us"] = overhead["owd"]["mean_us"]
        overhead.pop("rtts_ns", None)
    if not p.get("keep_samples", True):
        doc.pop("rtts_ns", None)
    return Measured(
        metrics,
        {
            "probe": doc,
            "probe_overhead_loopback": overhead,
            "overhead_note": "the same probe over loopback in the client's "
            "namespace: its own cost, included in every OWD above",
        },
    )


def run_stackcost(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    ip_v = int(p["ip"])
    host = tb.address(p["server"], ip_v)
    port = ctx.port()
    listen = listen_address(tb, p["server"], ip_v)
    srv = tb.popen(
        p["server"],
        stackcost.argv(ctx.python, "server", host=listen, port=port),
        name="stackcost-server",
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_listening(tb, p["server"], port, "tcp", srv, what="stack-cost server")
        out = tb.run(
            p["client"],
            stackcost.argv(ctx.python, "client", host=host, port=port, count=int(p["count"])),
            timeout=waiting.process_timeout(float(p["count"]) + 120),
        )
    finally:
        srv.stop()
    doc = json.loads(out.stdout)
    metrics = {
        "tcp_socket_create_us": doc["tcp_socket_create"]["median_us"],
        "udp_socket_create_us": doc["udp_socket_create"]["median_us"],
        "tcp_connect_us": doc["tcp_connect"]["median_us"],
        "connection_cycle_us": doc["connection_cycle"]["median_us"],
        "connections_per_s": doc["connections_per_s"],
    }
    return Measured(metrics, doc)


def run_receiver(tb: TestbedLike, p: Mapping[str, Any], ctx: Context) -> Measured:
    ip_v = int(p["ip"])
    n, data = ip_payload_and_data(p, ip_v)
    rate = parse_bps(p.get("rate"), "measurement") or 10e6
    pps = rate / (8.0 * n)
    dst = tb.address(p["server"], ip_v)
    duration = float(p["duration"])
    port = ctx.port()
    out = ctx.scratch / f"timing-{port}.json"
    rx = tb.popen(
        p["server"],
        udpprobe.recv_argv(
            ctx.python,
            host=listen_address(tb, p["server"], ip_v),
            port=port,
            out=str(out),
            idle_s=0.5,
            max_wait_s=duration + 10,
            timestamps=True,
        ),
        name="udpprobe-recv",
    )
    wait_listening(tb, p["server"], port, "udp", rx, what="udp receiver")
    cpu = sampler(tb, p)
    tx = tb.run(
        p["client"],
        udpprobe.send_argv(
            ctx.python, host=dst, port=port, size=data, pps=pps, duration_s=duration
        ),
        timeout=waiting.process_timeout(duration * 3 + 30),
    )
    cpu_doc = cpu.stop() if cpu else None
    try:
        rx.popen.wait(timeout=waiting.process_timeout(duration + 30))
    finally:
        rx.stop()
    got = json.loads(out.read_text())
    sent = json.loads(tx.stdout)
    timing = got["timing"]
    ipd = timing["ipd"]
    metrics = {
        "pps": timing["pps"],
        "received": float(got["received"]),
        "lost": float(max(0, sent["attempted"] - got["received"])),
        "offered_pps": pps,
        "sender_pps": sent["achieved_pps"],
    }
    if ipd.get("n"):
        metrics.update(
            {
                f"ipd_{k}": float(ipd[k])
                for k in ("mean_us", "median_us", "min_us", "max_us", "p99_us", "stdev_us")
            }
        )
    metrics.update(cpu_metrics(cpu_doc))
    return Measured(metrics, {"sender": sent, "receiver": got, "cpu": cpu_doc})


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "iperf3",
            {
                **COMMON,
                "protocol": "tcp",
                "duration": 5,
                "length": None,
                "ip_payload": None,
                "frame_size": None,
                "rate": None,
                "direction": "forward",
                "streams": 1,
                "ratio": None,
                "nodelay": False,
            },
            {"protocol": iperf.PROTOCOLS, "direction": iperf.DIRECTIONS, "ip": (4, 6)},
            run_iperf3,
            "iperf3 TCP/UDP throughput; `ratio` runs IPv4 and IPv6 flows at once",
        ),
        Kind(
            "rfc2544",
            {
                **COMMON,
                "frame_size": None,
                "ip_payload": None,
                "size": None,
                "duration": 2,
                "resolution": 0.002,
                "max_rate": None,
                "test": "throughput",
                "drain_s": 0.5,
                "max_late_ms": None,
            },
            {"ip": (4, 6), "test": ("throughput", "frame_loss", "both")},
            run_rfc2544,
            "RFC 2544/5180 zero-loss throughput search and frame loss rate",
        ),
        Kind(
            "ping",
            {
                **COMMON,
                "frame_size": None,
                "size": None,
                "count": ping.GOMETZ_ECHOES,
                "interval": 0.01,
            },
            {"ip": (4, 6)},
            run_ping,
            "ICMP echo round trips (ping)",
        ),
        Kind(
            "pingpong",
            {
                **COMMON,
                "protocol": "udp",
                "size": None,
                "ip_payload": None,
                "count": 1000,
                "busy_poll": True,
                "overhead": True,
                "keep_samples": True,
            },
            {"protocol": ("udp", "tcp"), "ip": (4, 6)},
            run_pingpong,
            "ping-pong one-way delay probe (OWD = RTT/2)",
        ),
        Kind(
            "stackcost",
            {**COMMON, "count": 500},
            {"ip": (4, 6)},
            run_stackcost,
            "socket creation, TCP connect, connections per second",
        ),
        Kind(
            "receiver",
            {
                **COMMON,
                "frame_size": 1518,
                "ip_payload": None,
                "size": None,
                "rate": "10mbit",
                "duration": 2,
            },
            {"ip": (4, 6)},
            run_receiver,
            "receiver-side packets/s and inter-packet delay",
        ),
    )
}


def validate_params(kind: str, params: Mapping[str, Any], file: str, key: str) -> dict[str, Any]:
    """Merge defaults and check names and choices; raise SpecError naming the bad key."""
    if kind not in KINDS:
        raise SpecError(file, f"{key}.kind", f"unknown measurement kind {kind!r}", ", ".join(KINDS))
    k = KINDS[kind]
    out = dict(k.params)
    for name, value in params.items():
        if name not in k.params:
            raise SpecError(
                file, f"{key}.{name}", f"unknown parameter of {kind}", ", ".join(sorted(k.params))
            )
        if name in k.choices and value not in k.choices[name]:
            raise SpecError(
                file,
                f"{key}.{name}",
                f"{value!r} is not allowed",
                ", ".join(str(c) for c in k.choices[name]),
            )
        out[name] = value
    exclusive = [
        n for n in ("frame_size", "ip_payload", "size", "length") if params.get(n) is not None
    ]
    if len(exclusive) > 1:
        raise SpecError(
            file,
            key,
            f"give only one of {', '.join(exclusive)}",
            "one of frame_size, ip_payload, size",
        )
    _check_fits(kind, out, params, file, key)
    if kind != "receiver" and "frame_size" in out and params.get("ip_payload") is not None:
        out["frame_size"] = None
    if kind == "receiver" and (
        params.get("ip_payload") is not None or params.get("size") is not None
    ):
        out["frame_size"] = None
    for name in ("duration", "count"):
        if (
            name in out
            and out[name] is not None
            and (not isinstance(out[name], (int, float)) or out[name] <= 0 or math.isnan(out[name]))
        ):
            raise SpecError(file, f"{key}.{name}", f"{out[name]!r} must be a positive number")
    return out


def _check_fits(
    kind: str, out: Mapping[str, Any], params: Mapping[str, Any], file: str, key: str
) -> None:
    """A size must leave room for the probe's headers at every IP version the trial uses."""
    ips = [v for v, _share in _flows(out)] if kind == "iperf3" and out.get("ratio") else [
        out.get("ip")]
    for ip in ips:
        if ip not in ping.IP_HEADER:
            continue
        frame = params.get("frame_size")
        if frame is None and kind == "receiver" and not (
            params.get("ip_payload") is not None or params.get("size") is not None
        ):
            frame = out.get("frame_size")
        hdr = ping.ETH_HEADER_FCS + ping.IP_HEADER[ip]
        if frame is not None and kind in ("rfc2544", "receiver", "iperf3", "ping"):
            probe, need = (("an ICMP echo request", ping.ICMP_HEADER) if kind == "ping"
                           else ("one byte of UDP data", ping.UDP_HEADER + 1))
            if int(frame) < hdr + need:
                raise SpecError(
                    file, f"{key}.frame_size",
                    f"a {frame}-byte frame cannot carry {probe} over IPv{ip} (ip = {ip})",
                    f"frame_size >= {hdr + need} for IPv{ip}; a global [sweep] ip applies "
                    "to every measurement that takes ip",
                )
        payload = params.get("ip_payload")
        if payload is not None:
            need = 21 if kind == "pingpong" and out.get("protocol") == "tcp" else 9
            if int(payload) < need:
                raise SpecError(file, f"{key}.ip_payload",
                                f"{payload} bytes leave no message bytes after the headers",
                                f"ip_payload >= {need}")
