"""Shared parts of the router features: interface addresses, nft counters and words, traffic
for the checks, the functional check's result (options are read by `features.base.Options`)."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from testbed import waiting
from testbed.addressing import Interface
from testbed.api import TestbedLike
from testbed.checks import wait_listening
from testbed.features.base import Feature
from testbed.measure import iperf

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network


# --- addresses and nft words ----------------------------------------------------------------------


def iface_net(iface: Interface, family: int) -> IPNet | None:
    for a in iface.addresses:
        i = ipaddress.ip_interface(a)
        if i.version == family:
            return i.network
    return None


def iface_addr(iface: Interface, family: int) -> str | None:
    return iface.address(family)


def nft_quote(text: str) -> str:
    """An nft string literal (names and comments are only letters, digits, '-', '_', '.')."""
    if not text or not all(c.isalnum() or c in "-_.:/" for c in text):
        raise ValueError(f"not a safe nft word: {text!r}")
    return f'"{text}"'


# --- checks -----------------------------------------------------------------------------------


@dataclass
class CheckResult:
    """The outcome of one feature's functional check on one IP version, with its evidence."""

    feature: str
    ip: int
    status: str  # "works", "fails" or "not supported"
    evidence: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "works"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def not_supported(feature: str, ip: int, why: str) -> CheckResult:
    return CheckResult(feature, ip, "not supported", {}, why)


def verdict(feature: str, ip: int, evidence: dict[str, Any], failures: list[str]) -> CheckResult:
    if failures:
        return CheckResult(feature, ip, "fails", evidence, "; ".join(failures))
    return CheckResult(feature, ip, "works", evidence, "")


def nft_counters(tb: TestbedLike, node: str, table: str, family: str) -> dict[str, int]:
    """Packet counts of the rules of an nft table that carry a comment: comment -> packets."""
    out = tb.run(node, ["nft", "-j", "list", "table", family, table], check=False)
    if out.returncode != 0:
        return {}
    doc = json.loads(out.stdout or "{}")
    counts: dict[str, int] = {}
    for item in doc.get("nftables", []):
        rule = item.get("rule")
        if not rule or "comment" not in rule:
            continue
        for expr in rule.get("expr", []):
            if isinstance(expr, dict) and "counter" in expr:
                counts[rule["comment"]] = counts.get(rule["comment"], 0) + int(
                    expr["counter"]["packets"]
                )
    return counts


@contextmanager
def nft_table(
    tb: TestbedLike, node: str, ruleset: str, family: str, table: str
) -> Iterator[None]:
    """Load a temporary nft table on `node` for a check; it is deleted afterwards."""
    tb.run(node, ["nft", "-f", "-"], input=ruleset)
    try:
        yield
    finally:
        tb.run(node, ["nft", "delete", "table", family, table], check=False)


def nft_table_text(family: str, table: str, *chains: tuple[str, str, Sequence[str]]) -> str:
    """The `nft -f` text of one table: each chain as (name, its `type ... ;` line, its rules)."""
    out = [f"table {family} {table} {{"]
    for name, head, rules in chains:
        out += [f"    chain {name} {{", f"        {head}", *(f"        {x}" for x in rules)]
        out.append("    }")
    return "\n".join([*out, "}"]) + "\n"


def count_sources_ruleset(table: str, family: int, sources: Mapping[str, str]) -> str:
    """A table that counts packets arriving at a node (input hook) by source: name -> address.
    Used on the far side of a translating router: which source addresses arrive."""
    key = "ip" if family == 4 else "ip6"
    rules = [f"{key} saddr {ipaddress.ip_address(addr)} counter comment {nft_quote(name)}"
             for name, addr in sources.items()]
    return nft_table_text("inet", table, ("input", "type filter hook input priority -300; "
                                          "policy accept;", rules))


def ping(
    tb: TestbedLike, node: str, dst: str, ip: int, count: int = 3, source: str | None = None
) -> dict[str, Any]:
    """Ping and report sent/received (the return path works when replies arrive)."""
    argv = ["ping", f"-{ip}", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2"]
    if source:
        argv += ["-I", source]
    argv.append(dst)
    out = tb.run(node, argv, check=False, timeout=waiting.process_timeout(count * 0.2 + 10))
    received = 0
    for line in out.stdout.splitlines():
        if "packets transmitted" in line:
            parts = line.split(",")
            received = int(parts[1].strip().split()[0])
    return {"from": node, "to": dst, "sent": count, "received": received}


def tool_env(tb: TestbedLike) -> dict[str, str]:
    """The environment for the checks' iperf3: TMPDIR in the run's scratch folder. iperf3
    creates a temp file per stream; in the full-kernel tier's guest /tmp is an overlay on the
    host's /tmp over 9p, where that creation failed now and then (ENOENT) while the host's
    /tmp changed underneath."""
    folder = tb.scratch_dir() / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(folder)}


def tcp_connect(
    tb: TestbedLike,
    server: str,
    client: str,
    dst: str,
    ip: int,
    listen_port: int,
    dst_port: int | None = None,
    *,
    seconds: int = 1,
    timeout_ms: int = 2000,
) -> dict[str, Any]:
    """An iperf3 TCP test from `client` to `dst`:`dst_port` with the server on `server`:
    `listen_port` (they differ behind a port forward). Reports whether data arrived."""
    env = tool_env(tb)
    srv = tb.popen(
        server,
        iperf.server_argv(listen_port),
        name="iperf3-server",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_listening(tb, server, listen_port, "tcp", srv, what="iperf3 server")
        argv = iperf.client_argv(dst, port=dst_port or listen_port, duration_s=seconds, ip=ip)
        argv += ["--connect-timeout", str(timeout_ms)]
        proc = tb.popen(client, argv, name="iperf3-client", stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        stdout, _err = proc.popen.communicate(timeout=waiting.process_timeout(seconds + 20))
        received = 0
        error = ""
        try:
            res = iperf.parse_iperf3(stdout, argv=argv, where=f"node {client}")
            received = sum(f.received_bytes for f in res.flows)
        except Exception as exc:  # a refused or timed-out connection: iperf3 reports an error
            error = str(exc).splitlines()[0][:200]
        return {
            "from": client,
            "to": f"{dst} port {dst_port or listen_port}",
            "received_bytes": received,
            "error": error,
        }
    finally:
        srv.stop()


def translate_prefix(address: str, inside: IPNet, outside: IPNet) -> str:
    """RFC 6296-style mapping of the prefix with the host part kept (what nft's prefix NAT does)."""
    a = int(ipaddress.ip_address(address))
    host = a & int(inside.hostmask)
    return str(ipaddress.ip_address(int(outside.network_address) | host))


class RouterFeature(Feature):
    """A feature with a functional check: traffic through it proves it works, per IP version.

    `check(tb, ip, others)` gets the run's other configured features (a DHCP client finds
    its server among them); `check_topology` names the topology file (topologies/) that
    builds the feature for the featurecheck measurement kind."""

    check_topology: ClassVar[str] = ""
    o: Any  # the parsed options (each module's own `Options` dataclass)

    def check(self, tb: TestbedLike, ip: int, others: Sequence[Feature]) -> CheckResult:
        raise NotImplementedError


def run_checks(
    tb: TestbedLike,
    features: Sequence[Feature],
    kind: str | None = None,
    ips: Sequence[int] = (4, 6),
) -> list[CheckResult]:
    """The functional checks of a built testbed's router features (of `kind`, or all), per IP
    version; a feature without IPv`ip` reports "not supported" with its reason."""
    out = []
    for f in features:
        if not isinstance(f, RouterFeature) or (kind is not None and f.kind != kind):
            continue
        for ip in ips:
            res = f.check(tb, ip, features)
            res.evidence.setdefault("node", f.node)
            out.append(res)
    return out
