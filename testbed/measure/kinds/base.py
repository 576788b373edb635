"""What a measurement kind is: typed parameters, metrics with units, the runner signature, and
the helpers every runner shares (server/client lifecycle, CPU sampling, sizes, rates)."""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from testbed import units, waiting
from testbed.api import ProcessLike, TestbedLike
from testbed.checks import wait_listening
from testbed.errors import CommandError, DaemonError, SpecError
from testbed.measure import ping_tool, probe
from testbed.measure.cpu import CpuSampler

# --- what a runner is given -----------------------------------------------------------------


@dataclass
class Context:
    """Per-run helpers: a fresh port per server (from `first_port` on), the Python that runs
    the probes, and (for tests only) a fixed scratch folder; otherwise files go to the
    testbed's scratch folder."""

    python: str = sys.executable
    scratch: Path | None = None
    first_port: int = 20000
    _ports: itertools.count[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._ports = itertools.count(self.first_port)

    def port(self) -> int:
        return next(self._ports)

    def folder(self, tb: TestbedLike) -> Path:
        """Where a runner's files go: inside the run's scratch folder (removed with the run,
        and by `testbed clean` after a crash)."""
        d = self.scratch if self.scratch is not None else tb.scratch_dir() / "measure"
        d.mkdir(parents=True, exist_ok=True)
        return d


@dataclass(frozen=True)
class Measured:
    """A trial's outcome: flat numeric metrics (each declared by the kind, with a unit) and the
    full result document (stored as JSON)."""

    metrics: dict[str, float]
    result: dict[str, Any]


Runner = Callable[[TestbedLike, Mapping[str, Any], Context], Measured]


# --- declarations ---------------------------------------------------------------------------

PARAM_TYPES = ("bool", "int", "number", "str", "node", "ip", "size", "rate", "ratio", "names")
"""bool: true/false; int: an integer 1..max; number: above 0 and at most max; str: text (usually
with choices); node: a node name of the topology; ip: 4 or 6; size: bytes 1..65535; rate: a bit
rate ("10mbit", "ethernet", a number of Mbit/s); ratio: "IPv4/IPv6" percentages ("90/10");
names: a list of strings (a value, not a sweep)."""

UNITS = {
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "bit/s": "bits per second",
    "pkt/s": "packets (datagrams) per second",
    "conn/s": "connections per second",
    "%": "percent",
    "B": "bytes",
    "count": "a number of things (packets, trials, steps)",
    "flag": "1 (yes) or 0 (no)",
}
"""The units a metric may declare (docs/measurements.md lists them)."""


@dataclass(frozen=True)
class Param:
    """One parameter of a kind: name, type (PARAM_TYPES), default (None: optional, unset),
    allowed values, upper bound (int, number) and a one-line meaning."""

    name: str
    type: str
    default: Any = None
    doc: str = ""
    choices: tuple[Any, ...] = ()
    max: float | None = None

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter {self.name}: type {self.type!r} not in {PARAM_TYPES}")


@dataclass(frozen=True)
class Metric:
    """One stored metric: name (a `{placeholder}` makes it a family, e.g. `cpu_{program}_pct`),
    unit (a key of UNITS) and a one-line meaning."""

    name: str
    unit: str
    doc: str

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"metric {self.name}: unit {self.unit!r} not in {sorted(UNITS)}")

    @property
    def family(self) -> bool:
        return "{" in self.name

    def matches(self, key: str) -> bool:
        if not self.family:
            return key == self.name
        parts = re.split(r"\{[a-z_]+\}", self.name)
        rx = "[A-Za-z0-9.+-]+".join(re.escape(p) for p in parts)
        return re.fullmatch(rx, key) is not None


Measures = Literal["delay", "throughput", "timing", "cost", "function"]
"""What a kind measures, for the tier choice (testbed.tiers) and parallel runs:
delay: per-packet delay over the experiment's links (shaped links need netem's per-packet
serialization, so the full-kernel tier where the host lacks netem); throughput: a rate through
shaped links (tbf on the host is faithful; trials may run side by side on shaped links);
timing: arrival times at a receiver; cost: CPU or loss costs of a stack or router; function:
whether something works."""

THROUGHPUT_ON_HOST = "throughput through shaped links: tbf on the host is faithful"


class ParamProblem(Exception):
    """Raised by a kind's `check` for a bad combination: which parameter, what, how to fix."""

    def __init__(self, param: str, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.param = param
        self.problem = problem
        self.fix = fix


Check = Callable[[dict[str, Any], Mapping[str, Any]], None]
"""A kind's cross-parameter check: (merged params, params as given) -> None; it may adjust the
merged params (e.g. drop a default that a given alternative replaces) or raise ParamProblem."""


@dataclass(frozen=True)
class Kind:
    """A measurement kind: its parameters, metrics, runner and what it runs."""

    name: str
    doc: str
    tool: str  # what does the measuring, for docs/measurements.md
    params: tuple[Param, ...]
    metrics: tuple[Metric, ...]
    runner: Runner
    check: Check | None = None
    programs: tuple[str, ...] = ()  # program names it starts (never sampled as features' CPU)
    # kinds that build their own topology: the kernel features a trial with these (validated)
    # parameters needs, so that `testbed reproduce` can choose its tier before building
    kernel_needs: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None
    # what it measures (Measures): the tier choice and parallel runs read it; no default, so
    # that a new kind says whether it times delays over the links or a rate through them
    measures: Measures = field(kw_only=True)
    host_reason: str = ""  # why the host kernel measures it faithfully (`reproduce` says it)
    # why its numbers belong on the virtual clock even where the host could run it (a CPU cost:
    # the host's clock gives noise, the virtual clock a count of instructions); set, `reproduce`
    # runs it in the full-kernel tier on the virtual clock
    virtual_reason: str = ""
    # why a cell of this kind measured on the virtual clock gives the same numbers every time
    # (with the evidence); set, a virtual-clock run measures each cell once: repetitions that
    # cannot differ are not run (experiment_spec.for_clock, docs/vm.md)
    virtual_exact: str = ""
    # the parameters virtual_exact holds for (its evidence covers only those); None: all
    virtual_exact_for: Callable[[Mapping[str, Any]], bool] | None = None

    def exact_on_virtual(self, params: Mapping[str, Any], sweep: Mapping[str, list[Any]]) -> str:
        """Why a measurement of this kind with these fixed parameters and sweeps repeats
        exactly on the virtual clock (`virtual_exact`), or "" where it may not: the kind
        says nothing, or one of its parameter values lies outside `virtual_exact_for`."""
        if not self.virtual_exact:
            return ""
        test = self.virtual_exact_for
        if test is not None and not (test(params) and all(
                test({**params, k: v}) for k, values in sweep.items() for v in values)):
            return ""
        return self.virtual_exact

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def metric(self, key: str) -> Metric | None:
        """The declaration of a stored metric key (exact names first, then families)."""
        exact = next((m for m in self.metrics if not m.family and m.name == key), None)
        return exact or next((m for m in self.metrics if m.family and m.matches(key)), None)

    def undeclared(self, metrics: Mapping[str, float]) -> list[str]:
        return [k for k in metrics if self.metric(k) is None]

    def units(self, metrics: Mapping[str, float]) -> dict[str, str]:
        out = {}
        for k in metrics:
            m = self.metric(k)
            if m is not None:
                out[k] = m.unit
        return out


# --- validation (the one place) -------------------------------------------------------------


def _bad(file: str, key: str, v: Any, allowed: str) -> SpecError:
    return SpecError(file, key, f"bad value {v!r}", allowed)


def check_value(p: Param, v: Any, file: str, key: str) -> None:
    """Type, range and choices of one value of parameter `p`; SpecError(file, key, ...)."""
    if v is None:
        if p.default is None:
            return
        raise _bad(file, key, v, f"a value (default {p.default!r})")
    is_num = isinstance(v, int | float) and not isinstance(v, bool)
    if is_num and not math.isfinite(v):
        raise _bad(file, key, v, "a finite number")
    t = p.type
    if t == "bool" and not isinstance(v, bool):
        raise _bad(file, key, v, "true or false")
    if t == "node" and not isinstance(v, str):
        raise _bad(file, key, v, 'a node name such as "h1"')
    if t == "str" and not isinstance(v, str):
        raise _bad(file, key, v, "a string")
    if t == "names" and (not isinstance(v, list) or not all(isinstance(x, str) for x in v)):
        raise _bad(file, key, v, 'a list of program names, e.g. ["tayga"]')
    if t in ("int", "ip"):
        hi = int(p.max) if p.max is not None else None
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1
                and (hi is None or v <= hi)):
            raise _bad(file, key, v, f"an integer from 1 to {hi}" if hi else "an integer >= 1")
    if t == "size" and not (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 65535):
        raise _bad(file, key, v, "a size in bytes from 1 to 65535")
    if t == "number" and not (is_num and v > 0 and (p.max is None or v <= p.max)):
        raise _bad(file, key, v, "a number above 0"
                   + (f" and at most {p.max:g}" if p.max is not None else ""))
    if t == "ratio" and not _is_ratio(v):
        raise _bad(file, key, v, 'IPv4/IPv6 percentages such as "100/0", "90/10", "50/50"')
    if t == "rate":
        units.in_spec(lambda r: units.rate(r, zero=True), v, file, key)
    if p.choices and v not in p.choices:
        raise SpecError(file, key, f"{v!r} is not allowed", ", ".join(str(c) for c in p.choices))


def declared(kind: Kind, name: str, file: str, key: str) -> Param:
    """The declaration of parameter `name`, or SpecError(file, key.name) listing the others."""
    p = kind.param(name)
    if p is None:
        raise SpecError(file, f"{key}.{name}", f"unknown parameter of {kind.name}",
                        ", ".join(sorted(kind.param_names)))
    return p


def validate(kind: Kind, given: Mapping[str, Any], file: str, key: str) -> dict[str, Any]:
    """The parameters a runner gets: defaults merged with `given`, every value checked (names,
    types, ranges, choices) and the kind's cross-parameter check; SpecError names the key."""
    out = {p.name: p.default for p in kind.params}
    for name, value in given.items():
        check_value(declared(kind, name, file, key), value, file, f"{key}.{name}")
        out[name] = value
    if kind.check is not None:
        try:
            kind.check(out, given)
        except ParamProblem as exc:
            where = f"{key}.{exc.param}" if exc.param else key
            raise SpecError(file, where, exc.problem, exc.fix) from None
    return out


def _is_ratio(v: Any) -> bool:
    if not isinstance(v, str) or v.count("/") != 1:
        return False
    try:
        a, b = (float(x) for x in v.split("/"))
    except ValueError:
        return False
    return math.isfinite(a) and math.isfinite(b) and a >= 0 and b >= 0 and a + b > 0


# --- shared parameter groups and their checks -----------------------------------------------

ENDPOINTS = (
    Param("client", "node", "h1", "the node that runs the client (sender)"),
    Param("server", "node", "h2", "the node that runs the server (receiver)"),
    Param("ip", "ip", 4, "IP version of the traffic", choices=(4, 6)),
)

PACKETS = Param("packets", "int", None, "at least this many datagrams: the stream lasts "
                "longer than `duration` where its rate needs it (unset: `duration` alone)",
                max=100_000_000)
"""A paced stream's least count (receiver, load): a duration fitted to each rate."""

CPU = (
    Param("cpu", "bool", True, "sample CPU use (machine /proc/stat, programs by pid) during the "
          "traffic"),
    Param("cpu_processes", "names", None, "programs to sample by name; unset: the programs the "
          "topology's features run (every process in its namespaces but the kind's own)"),
)

CPU_METRICS = (
    Metric("cpu_machine_softirq_pct", "%", "softirq share of all CPUs (kernel forwarding)"),
    Metric("cpu_machine_system_pct", "%", "system share of all CPUs"),
    Metric("cpu_machine_user_pct", "%", "user share of all CPUs"),
    Metric("cpu_{program}_pct", "%", "a sampled program (e.g. tayga), % of one CPU, summed over "
           "its nodes"),
)

SIZES = ("frame_size", "ip_payload", "size", "length")


def one_size(out: dict[str, Any], given: Mapping[str, Any]) -> None:
    """At most one way of giving the size; a given one replaces another's default."""
    named = [n for n in SIZES if given.get(n) is not None]
    if len(named) > 1:
        raise ParamProblem("", f"give only one of {', '.join(named)}",
                           "one of frame_size, ip_payload, size")
    if named:
        for n in SIZES:
            if n in out and n != named[0]:
                out[n] = None


def fits(out: Mapping[str, Any], ips: Sequence[int], probe: str) -> None:
    """A frame or IP payload must leave room for the probe's headers at every IP version used.
    probe: "udp" (one byte of UDP data), "icmp" (an echo request), "tcp" (one byte over TCP)."""
    for ip in ips:
        if ip not in ping_tool.IP_HEADER:
            continue
        frame = out.get("frame_size")
        if frame is not None and probe != "tcp":
            what, need = (("an ICMP echo request", ping_tool.ICMP_HEADER) if probe == "icmp"
                          else ("one byte of UDP data", ping_tool.UDP_HEADER + 1))
            hdr = ping_tool.ETH_HEADER_FCS + ping_tool.IP_HEADER[ip]
            if int(frame) < hdr + need:
                raise ParamProblem(
                    "frame_size", f"a {frame}-byte frame cannot carry {what} over IPv{ip} "
                    f"(ip = {ip})", f"frame_size >= {hdr + need} for IPv{ip}; a global [sweep] "
                    "ip applies to every measurement that takes ip")
        payload = out.get("ip_payload")
        if payload is not None:
            need = 21 if probe == "tcp" else 9
            if int(payload) < need:
                raise ParamProblem("ip_payload", f"{payload} bytes leave no message bytes after "
                                   "the headers", f"ip_payload >= {need}")


def ip_payload_and_data(p: Mapping[str, Any], ip: int, default_data: int = 18) -> tuple[int, int]:
    """(IP payload bytes, UDP data bytes) from `ip_payload`, `frame_size` or `size` (UDP data)."""
    if p.get("ip_payload") is not None:
        n = int(p["ip_payload"])
        return n, n - ping_tool.UDP_HEADER
    if p.get("frame_size") is not None:
        data = ping_tool.udp_data_size(int(p["frame_size"]), ip)
        return data + ping_tool.UDP_HEADER, data
    data = int(p.get("size") or default_data)
    return data + ping_tool.UDP_HEADER, data


def bottleneck_bps(tb: TestbedLike) -> float | None:
    """Slowest shaped link rate of the topology (None when nothing is shaped)."""
    rates = [lk.shape.rate_bps for lk in tb.topology.links if lk.shape.rate_bps]
    return float(min(rates)) if rates else None


def listen_address(tb: TestbedLike, node: str, ip_v: int) -> str:
    """Where a server on `node` listens for clients that reach it over IPv`ip_v`: its address,
    except under NAT64, where an IPv4-only server is reached at a synthesized IPv6 address."""
    bind = getattr(tb, "bind_address", None)
    return str(bind(node, ip_v)) if bind is not None else tb.address(node, ip_v)


# --- the server/client lifecycle ------------------------------------------------------------


@dataclass
class Server:
    """A server started by `serve`: its node, port, process and the file it writes (if any)."""

    node: str
    port: int
    proc: ProcessLike
    what: str
    output: Path | None = None

    def result(self, timeout_s: float) -> dict[str, Any]:
        """Wait for the server to end by itself, then read the JSON document it wrote."""
        try:
            waiting.wait_process(self.proc.popen, waiting.process_timeout(timeout_s) or 1e9)
        except subprocess.TimeoutExpired:
            raise DaemonError(self.what, self.node, f"did not end within {timeout_s:g} s",
                              "is the client reaching it? see `testbed doctor`") from None
        if self.output is None or not self.output.exists():
            raise DaemonError(self.what, self.node, "ended without writing its result")
        return json_doc(self.output.read_text(), [str(self.output)], self.node, self.what)


@contextmanager
def serve(
    tb: TestbedLike,
    ctx: Context,
    node: str,
    argv: Callable[[int, Path | None], list[str]],
    *,
    proto: str,
    what: str,
    name: str,
    output: bool = False,
) -> Iterator[Server]:
    """Start a server in `node` on a fresh port (`argv(port, output file or None)`), wait until
    it listens, hand it over, then stop it and remove its output file, whatever happened.

    With `output`, the server writes a JSON document to a file in the run's scratch folder
    (`Server.result()` waits for its end and reads it); otherwise its output is discarded."""
    port = ctx.port()
    out = ctx.folder(tb) / f"{name}-{port}.json" if output else None
    a = argv(port, out)
    proc = tb.popen(node, a, name=name, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # the project's probes: readiness read from /proc (no program started per poll);
        # third-party servers (iperf3) keep the `ss` poll, whose pause before the client
        # starts they were measured with
        wait_listening(tb, node, port, proto, proc, what=what,
                       read_proc=probe.program_of(a) is not None)
        yield Server(node, port, proc, what, out)
    finally:
        proc.stop()
        if out is not None:
            out.unlink(missing_ok=True)


def run_client(tb: TestbedLike, node: str, argv: list[str], *, timeout_s: float,
               what: str) -> dict[str, Any]:
    """Run a client to its end in `node` and read the JSON document it prints."""
    out = tb.run(node, argv, timeout=waiting.process_timeout(timeout_s))
    return json_doc(out.stdout, argv, node, what)


def json_doc(text: str, argv: Sequence[str], node: str, what: str) -> dict[str, Any]:
    """A probe's JSON document, or a CommandError that shows what it printed instead."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise CommandError(list(argv), 0, f"{what} printed no JSON document: {text[:300]!r}",
                           f"node {node}") from None
    if not isinstance(doc, dict):
        raise CommandError(list(argv), 0, f"{what} printed {type(doc).__name__}, not an object",
                           f"node {node}")
    return doc


# --- CPU sampling ---------------------------------------------------------------------------

TOOLS_NEVER_SAMPLED = ("ss", "ip", "sleep", "sh", "bash")


def feature_pids(tb: TestbedLike, names: Sequence[str] | None,
                 exclude: Sequence[str] = ()) -> dict[str, int]:
    """`program@node` -> pid of the programs to sample in the testbed's namespaces: those named
    in `names`, or (None) every process there but the measurement's own (`exclude`)."""
    from testbed import netlink

    found: dict[str, int] = {}
    if names is not None and not names:
        return found
    skip = set(exclude) | set(TOOLS_NEVER_SAMPLED)
    for node in tb.topology.node_names:
        for pid in netlink.netns_pids(tb.netns(node)):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if (comm in names) if names is not None else (comm not in skip):
                found[f"{comm}@{node}"] = int(pid)
    return found


@contextmanager
def cpu_window(tb: TestbedLike, p: Mapping[str, Any], kind: Kind) -> Iterator[dict[str, Any]]:
    """Sample CPU use while the block runs (when `p["cpu"]`): the document is filled in on
    exit (`{}` when not sampled); `cpu_metrics(doc)` flattens it into the declared metrics."""
    doc: dict[str, Any] = {}
    if not p.get("cpu", False):
        yield doc
        return
    names = p.get("cpu_processes")
    if names is None:  # the daemons the topology's features declare, else every process there
        plan: Any = getattr(tb, "plan", None)
        declared = list(plan.cpu_processes()) if hasattr(plan, "cpu_processes") else []
        names = declared or None
    s = CpuSampler(feature_pids(tb, names, exclude=("python3", "python", *kind.programs)))
    s.start()
    try:
        yield doc
    finally:
        doc.update(s.stop())


def cpu_metrics(doc: Mapping[str, Any] | None) -> dict[str, float]:
    """The CPU_METRICS of a sampler document (none when nothing was sampled)."""
    if not doc:
        return {}
    m = doc["machine_percent"]
    out = {
        "cpu_machine_softirq_pct": m["softirq"],
        "cpu_machine_system_pct": m["system"],
        "cpu_machine_user_pct": m["user"],
    }
    for name, proc in doc["processes"].items():
        if "total" in proc:
            key = f"cpu_{name.split('@')[0]}_pct"
            out[key] = out.get(key, 0.0) + proc["total"]
    return out
