"""QoS feature: HTB or HFSC classes on a router's egress, packets classified by nftables marks."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from testbed import units, waiting
from testbed.actions import Check, NftRuleset, Succeeds, Tc
from testbed.api import Action, TestbedLike
from testbed.checks import wait_listening
from testbed.features import _router as r
from testbed.features.base import Feature, Option
from testbed.features.base import Options as FeatureOptions
from testbed.measure import iperf

KIND = "qos"  # HTB; "qos-hfsc": HFSC
TABLE = "tb_qos"
SCHEDULERS = ("htb", "hfsc")
ROOT = 1  # classid 1:1 is the parent of every class; leaves are 1:10, 1:11, ...
QUANTUM = 3028  # bytes a class may send per round when it borrows (two full frames)
CHECK_LENGTH = 1200  # UDP data bytes per datagram in the check
L2_HEADER = 14  # what the qdisc counts besides the IP packet on a veth
MIN_SHARE = 0.85  # a class must get this part of its guarantee under overload (timer slack)
MAX_TOTAL = 1.2  # all classes together at most this part of the link rate (clock jitter in the VM)


def _burst(rate_bps: int) -> int:
    """HTB bucket: 10 ms at the rate (at least two full frames); tc's default (one frame)
    starves a class when the kernel's timers fire late, as they do on a busy host."""
    return max(3028, rate_bps // 8 // 100)


def goodput_share(ip: int, length: int = CHECK_LENGTH) -> float:
    """The part of what a class sends that iperf3 counts as received data (UDP over IPv`ip`
    over Ethernet): the scheduler's rates count whole frames."""
    return length / (length + 8 + (20 if ip == 4 else 40) + L2_HEADER)


@dataclass(frozen=True)
class Class:
    """A traffic class: its guaranteed rate and the packets it takes (None: the default)."""

    name: str
    rate_bps: int
    proto: str | None
    port: int | None
    minor: int

    @property
    def classid(self) -> str:
        return f"1:{self.minor}"


@dataclass(frozen=True)
class Options:
    node: str
    towards: str
    dev: str
    scheduler: str
    rate_bps: int
    classes: tuple[Class, ...]
    client: str  # the check sends from here through the router to `towards`

    @property
    def default(self) -> Class:
        return next(c for c in self.classes if c.proto is None)


def _rate(opts: FeatureOptions, key: str, text: Any) -> int:
    """A rate option (or a class's rate) in bit/s; errors name `key`."""
    if text is None:
        raise opts.error(key, "missing", "a rate like 20mbit")
    try:
        return int(units.rate(str(text), unlimited=False))
    except ValueError as exc:
        raise opts.error(key, str(exc), "a rate like 20mbit") from None


def parse(opts: FeatureOptions, scheduler: str) -> Options:
    """Validate: classes "NAME:RATE[:PROTO/PORT]", exactly one without PROTO/PORT (the
    default), guaranteed rates adding up to at most the link rate."""
    plan, nodes = opts.addresses, opts.topology.node_names
    node = opts.node
    towards = opts.node_name("towards")
    dev = opts.link(node, "towards", towards).name
    if scheduler not in SCHEDULERS:
        raise opts.error("kind", f"unknown scheduler {scheduler!r}", ", ".join(SCHEDULERS))
    total = _rate(opts, "rate", opts.table.get("rate"))
    specs = opts.strings("classes")
    fix = '["gold:15mbit:udp/5001", "bulk:5mbit"]'
    if len(specs) < 2:
        raise opts.error("classes", "needs at least two classes", fix)
    classes: list[Class] = []
    for i, spec in enumerate(specs):
        key = f"classes[{i}]"
        parts = spec.split(":")
        if len(parts) not in (2, 3) or not parts[0]:
            raise opts.error(key, f"not NAME:RATE[:PROTO/PORT]: {spec!r}", fix)
        name = parts[0]
        if not all(c.isalnum() or c in "-_" for c in name) or name in (c.name for c in classes):
            raise opts.error(key, f"bad or repeated class name {name!r}", "letters, digits, - or _")
        rate = _rate(opts, key, parts[1])
        proto, port = opts.proto_port(key, parts[2]) if len(parts) == 3 else (None, None)
        classes.append(Class(name, rate, proto, port, 10 + i))
    defaults = [c for c in classes if c.proto is None]
    if len(defaults) != 1:
        raise opts.error(
            "classes",
            f"{len(defaults)} classes match no traffic (no PROTO/PORT); exactly one must "
            "(the default class)",
            fix,
        )
    guaranteed = sum(c.rate_bps for c in classes)
    if guaranteed > total:
        raise opts.error(
            "classes",
            f"the classes guarantee {guaranteed / 1e6:g} Mbit/s in all, more than "
            f"rate = {total / 1e6:g} Mbit/s",
            "class rates that add up to at most the rate",
        )
    peers = [i.peer_node for i in plan.of(node) if i.peer_node != towards]
    client = opts.table.get("client", peers[0] if peers else None)
    if not isinstance(client, str) or client not in nodes or client in (node, towards):
        raise opts.error("client", f"bad node {client!r} for the check", "a node behind the router")
    return Options(node, towards, dev, scheduler, total, tuple(classes), client)


def tc_argvs(o: Options) -> list[list[str]]:
    """tc commands (without `tc -n NS`): root qdisc, parent class, one class per traffic class.
    HTB: rate = guarantee, ceil = the link rate. HFSC: real-time + link-sharing curve `sc`
    at the guarantee, upper limit `ul` at the link rate."""
    dev = o.dev
    root = f"1:{ROOT}"
    total = str(o.rate_bps)
    out: list[list[str]] = []
    if o.scheduler == "htb":
        out.append(["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb",
                    "default", str(o.default.minor)])  # fmt: skip
        out.append(["class", "add", "dev", dev, "parent", "1:", "classid", root, "htb",
                    "rate", total, "ceil", total, "burst", str(_burst(o.rate_bps)),
                    "cburst", str(_burst(o.rate_bps))])  # fmt: skip
        for c in o.classes:
            out.append(["class", "add", "dev", dev, "parent", root, "classid", c.classid, "htb",
                        "rate", str(c.rate_bps), "ceil", total,
                        "burst", str(_burst(c.rate_bps)), "cburst", str(_burst(o.rate_bps)),
                        "quantum", str(QUANTUM)])  # fmt: skip
    else:
        out.append(["qdisc", "replace", "dev", dev, "root", "handle", "1:", "hfsc",
                    "default", str(o.default.minor)])  # fmt: skip
        out.append(["class", "add", "dev", dev, "parent", "1:", "classid", root, "hfsc",
                    "sc", "rate", total, "ul", "rate", total])  # fmt: skip
        for c in o.classes:
            out.append(["class", "add", "dev", dev, "parent", root, "classid", c.classid, "hfsc",
                        "sc", "rate", str(c.rate_bps), "ul", "rate", total])  # fmt: skip
    return out


def leaf_argvs(o: Options) -> list[list[str]]:
    """A short FIFO under each class (about 100 ms at the link rate): under overload a class
    drops instead of queueing for seconds (the default: the device's 1000 packets)."""
    limit = max(8, o.rate_bps // 8 // 10 // 1500)
    return [
        ["qdisc", "add", "dev", o.dev, "parent", c.classid, "handle", f"{c.minor}:",
         "pfifo", "limit", str(limit)]
        for c in o.classes
    ]  # fmt: skip


def tc_undo_argv(o: Options) -> list[str]:
    return ["qdisc", "del", "dev", o.dev, "root"]


def ruleset(o: Options) -> str:
    """Classification: nftables sets the packet priority to the class id (HTB and HFSC take a
    priority equal to one of their class ids as the class), counting per class."""
    rules = []
    for c in o.classes:
        if c.proto is None:
            continue
        rules.append(
            f"oifname {r.nft_quote(o.dev)} {c.proto} dport {c.port} counter "
            f"meta priority set {c.classid} comment {r.nft_quote(c.name)}"
        )
    return r.nft_table_text("inet", TABLE, ("postrouting", "type filter hook postrouting "
                                            "priority mangle; policy accept;", rules))


def describe(o: Options) -> list[str]:
    parts = ", ".join(
        f"{c.name} {c.rate_bps / 1e6:g} Mbit/s ({c.proto}/{c.port})"
        if c.proto
        else f"{c.name} {c.rate_bps / 1e6:g} Mbit/s (default)"
        for c in o.classes
    )
    return [
        f"{o.node}: {o.scheduler.upper()} on {o.dev} (towards {o.towards}) at "
        f"{o.rate_bps / 1e6:g} Mbit/s: {parts}"
    ]


def class_stats(tb: TestbedLike, o: Options) -> list[str]:
    """`tc -s class show` as lines (tc prints no JSON for classes): kept as evidence."""
    out = tb.run(o.node, ["tc", "-s", "class", "show", "dev", o.dev], check=False)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def check(tb: TestbedLike, o: Options, ip: int, seconds: int = 3) -> r.CheckResult:
    """Overload: every class with a port sends at the full link rate at once, and so does the
    default class (UDP from `client` to `server` through the router), 2x the link rate or
    more in all. Each class must receive at least MIN_SHARE of its guaranteed rate."""
    feature = KIND if o.scheduler == "htb" else "qos-hfsc"
    flows = []
    base = 25200
    for i, c in enumerate(o.classes):
        port = c.port if c.proto == "udp" and c.port else base + i
        flows.append((c, port))
    bad = [c.name for c in o.classes if c.proto == "tcp"]
    if bad:
        return r.CheckResult(
            feature, ip, "fails", {}, f"the check sends UDP; class {bad[0]} is TCP"
        )
    client, server = o.client, o.towards
    dst = tb.address(server, ip)
    env = r.tool_env(tb)
    servers = []
    clients = []
    try:
        for _c, port in flows:
            srv = tb.popen(server, iperf.server_argv(port), name="iperf3-server",
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=env)  # fmt: skip
            servers.append(srv)
            wait_listening(tb, server, port, "tcp", srv, what="iperf3 server")
        for c, port in flows:
            argv = iperf.client_argv(
                dst, port=port, protocol="udp", duration_s=seconds,
                bitrate_bps=o.rate_bps, length=CHECK_LENGTH, ip=ip,
            )  # fmt: skip
            proc = tb.popen(client, argv, name="iperf3-client", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
            clients.append((c, argv, proc))
        got: dict[str, float] = {}
        errors: list[str] = []
        for c, argv, proc in clients:
            out, _err = proc.popen.communicate(timeout=waiting.process_timeout(seconds + 30))
            try:
                got[c.name] = iperf.parse_iperf3(out, argv=argv).receiver_bps
            except Exception as exc:
                errors.append(f"{c.name}: {str(exc).splitlines()[0][:200]}")
    finally:
        for srv in servers:
            srv.stop()
    evidence = {
        "scheduler": o.scheduler,
        "link_bps": o.rate_bps,
        "offered_bps_per_class": o.rate_bps,
        "received_bps": got,
        "guaranteed_bps": {c.name: c.rate_bps for c in o.classes},
        "tc_classes": class_stats(tb, o),
        "classified": r.nft_counters(tb, o.node, TABLE, "inet"),
    }
    failures = list(errors)
    share = goodput_share(ip)
    evidence["goodput_share"] = share
    for c in o.classes:
        if c.name in got and got[c.name] < MIN_SHARE * c.rate_bps * share:
            failures.append(
                f"{c.name} got {got[c.name] / 1e6:.2f} Mbit/s of data under overload, less than "
                f"{MIN_SHARE:.0%} of its guaranteed {c.rate_bps / 1e6:g} Mbit/s of frames "
                f"({c.rate_bps * share / 1e6:.2f} Mbit/s of data)"
            )
    total = sum(got.values())
    if got and total < MIN_SHARE * o.rate_bps * share:
        failures.append(
            f"only {total / 1e6:.2f} Mbit/s arrived in all: the senders did not overload the "
            f"{o.rate_bps / 1e6:g} Mbit/s link, so the guarantees were not tested (a slower "
            "link rate suits a slow machine)"
        )
    if total > MAX_TOTAL * o.rate_bps * share:
        failures.append(f"{total / 1e6:.2f} Mbit/s passed a {o.rate_bps / 1e6:g} Mbit/s limit")
    return r.verdict(feature, ip, evidence, failures)


class Qos(r.RouterFeature):
    """HTB classes on a router's egress with guaranteed rates."""

    kind = KIND
    check_topology = "router-qos"
    summary = "HTB classes on a router's egress, classified by nftables (guaranteed shares)"
    node_role = "router"
    options = (
        Option("towards", "the neighbour whose link gets the classes (egress)"),
        Option("rate", "the link rate the classes share (e.g. 20mbit)"),
        Option("classes", '"NAME:RATE[:PROTO/PORT]", one without PROTO/PORT (the default)'),
        Option("client", "the check's sender (default: the router's other neighbour)", None),
    )
    kernel = ("htb", "nftables")
    guest_modules = ("sch_htb", "nf_tables")
    scheduler = "htb"

    def configure(self, opts: FeatureOptions) -> None:
        self.o = parse(opts, self.scheduler)

    def actions(self) -> list[Action]:
        argvs = tc_argvs(self.o)
        out: list[Action] = [Tc(self.node, tuple(argvs[0]), tuple(tc_undo_argv(self.o)))]
        out += [Tc(self.node, tuple(a)) for a in argvs[1:] + leaf_argvs(self.o)]
        out.append(NftRuleset(self.node, ruleset(self.o), f"inet {TABLE}"))
        return out

    def ready(self) -> list[Check]:
        return [Succeeds(self.node, ("tc", "class", "show", "dev", self.o.dev), contains="1:10")]

    def check(self, tb: TestbedLike, ip: int, others: Sequence[Feature]) -> r.CheckResult:
        return check(tb, self.o, ip)


class QosHfsc(Qos):
    """HFSC classes on a router's egress with guaranteed rates (sch_hfsc)."""

    kind = "qos-hfsc"
    check_topology = "router-qos-hfsc"
    summary = "HFSC classes on a router's egress, classified by nftables (guaranteed shares)"
    kernel = ("hfsc", "nftables")
    guest_modules = ("sch_hfsc", "nf_tables")
    scheduler = "hfsc"
