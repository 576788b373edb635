"""What a node feature is: declared options, needs and guest modules, its plan actions,
the addresses it adds (as data) and its readiness check; plus `Options`, the option reader.

A feature module defines one `Feature` subclass with a unique `kind`; defining it registers
it (testbed.features discovers the package's modules). See docs/features.md for a worked
example.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from testbed.actions import Check
from testbed.addressing import AddressPlan, Interface
from testbed.api import Action
from testbed.errors import SpecError
from testbed.topology_model import Topology

_REQUIRED: Any = object()
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


@dataclass(frozen=True)
class Option:
    """One option of a feature: its name, a one-line meaning, and its default (none: required)."""

    name: str
    help: str
    default: Any = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class Program:
    """A program a feature runs: its name, the Debian package that installs it (which is also
    its capability name in testbed.capabilities), and the argv that prints its version
    (stored with results; none: not recorded)."""

    name: str
    package: str
    version_argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeAddress:
    """An address a feature gives a node: `tb.address(node, family)` answers `address` (what
    peers reach it at) and `tb.bind_address(node, family)` answers `bind` (what a server on
    the node listens on) when that differs (NAT64: the IPv4 address behind the translation)."""

    node: str
    family: int
    address: str
    bind: str | None = None


# The registry: kind -> class. Filled by Feature.__init_subclass__; testbed.features imports
# every module of the package so that each one's class is defined.
REGISTRY: dict[str, type[Feature]] = {}


class Feature:
    """Base of every feature. A subclass sets the class attributes and implements
    `configure` (validate options, keep what `actions` needs) and `actions`."""

    kind: ClassVar[str] = ""  # the `kind` value of its [[features]] table; unique
    summary: ClassVar[str] = ""  # one line for `testbed features` and the docs
    options: ClassVar[tuple[Option, ...]] = ()  # besides kind, node and enabled
    # node: which node the feature is set up on; None: the table needs no `node`
    node_role: ClassVar[str | None] = ""  # "" any role, "host", "router"; None: no node key
    # What it needs on this machine, checked before anything is created: kernel features
    # (names of testbed.capabilities.KERNEL_FEATURES) and programs (each one a capability
    # named by its package; its version is stored with results).
    kernel: ClassVar[tuple[str, ...]] = ()
    programs: ClassVar[tuple[Program, ...]] = ()
    # Kernel modules the full-kernel tier loads in its guest (testbed.vm).
    guest_modules: ClassVar[tuple[str, ...]] = ()
    # processes whose CPU time a measurement reports by default when this feature is built
    cpu_processes: ClassVar[tuple[str, ...]] = ()
    # Why the numbers of a topology with this feature move between trials on the virtual
    # clock ("": they repeat there). A measurement that reaches such a topology keeps its
    # repetitions there instead of measuring each cell once (experiment_spec.for_clock).
    virtual_varies: ClassVar[str] = ""

    @classmethod
    def varies(cls, table: Mapping[str, Any]) -> str:
        """Why a topology with this feature, set up by `table` (its [[features]] table,
        parameters filled in), gives numbers that move between runs on the virtual clock, or
        "". The class's `virtual_varies`; a feature whose options decide it says so here."""
        return cls.virtual_varies

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if not cls.kind:
            return  # an abstract helper class
        reserved = [o.name for o in cls.options if o.name in ("kind", "node", "enabled")]
        if reserved:
            raise TypeError(f"feature {cls.kind!r}: option {reserved[0]!r} is a generic key")
        other = REGISTRY.get(cls.kind)
        if other is not None and other.__qualname__ != cls.__qualname__:
            raise TypeError(f"feature kind {cls.kind!r} is defined twice: {other} and {cls}")
        REGISTRY[cls.kind] = cls

    def __init__(self, opts: Options) -> None:
        self.node = opts.node
        self.index = opts.index
        self.configure(opts)

    # --- what a subclass writes -------------------------------------------------------------

    def configure(self, opts: Options) -> None:
        """Read and validate the options (raise opts.error(...)); pure: creates nothing."""

    def actions(self) -> list[Action]:
        """The typed plan actions, in order (testbed.actions); each brings its own undo."""
        return []

    def addresses(self) -> list[NodeAddress]:
        """Addresses this feature gives nodes (answered by tb.address()/bind_address())."""
        return []

    def ready(self) -> list[Check]:
        """Checks that hold once the feature works (the plan waits for them after actions)."""
        return []

    # --- derived --------------------------------------------------------------------------

    @classmethod
    def needs(cls) -> tuple[str, ...]:
        """Capability names (testbed.capabilities) this feature needs."""
        return (*cls.kernel, *(p.package for p in cls.programs))

    @property
    def label(self) -> str:
        return f"{self.kind} on {self.node}" if self.node else self.kind


class Options:
    """One [[features]] table being read: typed getters that raise SpecError(file,
    "features[N].option", what, fix), and the topology and address plan for lookups."""

    def __init__(
        self,
        topology: Topology,
        addresses: AddressPlan,
        index: int,
        table: Mapping[str, Any],
        declared: Sequence[Option],
        node: str | None,
    ) -> None:
        self.topology = topology
        self.addresses = addresses
        self.index = index
        self.table = table
        self.declared = {o.name: o for o in declared}
        self.node: str = node or ""

    @property
    def file(self) -> str:
        return self.topology.source

    def key(self, option: str) -> str:
        """`features[N].option` (`features[N]` for the table as a whole: option "")."""
        return f"features[{self.index}].{option}" if option else f"features[{self.index}]"

    def error(self, option: str, what: str, fix: str | None = None) -> SpecError:
        return SpecError(self.file, self.key(option), what, fix)

    def raw(self, option: str) -> Any:
        decl = self.declared.get(option)
        if decl is None:
            raise KeyError(f"option {option!r} is not declared in the feature's `options`")
        if option in self.table:
            return self.table[option]
        if decl.required:
            raise self.error(option, "missing", decl.help)
        return decl.default

    # --- typed getters ----------------------------------------------------------------------

    def text(self, option: str) -> str:
        value = self.raw(option)
        if not isinstance(value, str) or not value:
            raise self.error(
                option, f"not a non-empty string: {value!r}", self.declared[option].help
            )
        return value

    def name(self, option: str) -> str:
        """An interface or instance name: 1-15 letters, digits, '-' or '_'."""
        value = self.raw(option)
        if not (isinstance(value, str) and 0 < len(value) <= 15 and set(value) <= _NAME_CHARS):
            raise self.error(option, f"bad name {value!r}", "1-15 letters, digits, '-' or '_'")
        return value

    def boolean(self, option: str) -> bool:
        value = self.raw(option)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"  # a ${param} substituted as text
        if not isinstance(value, bool):
            raise self.error(option, f"not a boolean: {value!r}", "true, false")
        return value

    def integer(self, option: str, low: int, high: int) -> int:
        value = self.raw(option)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.error(option, f"bad value {value!r}", f"an integer {low}-{high}")
        return value

    def number(self, option: str, low: float, high: float) -> float:
        value = self.raw(option)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(option, f"not a number: {value!r}", f"a number {low}-{high}")
        if not math.isfinite(value) or not low <= value <= high:
            raise self.error(option, f"out of range: {value!r}", f"a number {low}-{high}")
        return float(value)

    def versions(self, option: str = "ip", default: Sequence[int] | None = None
                 ) -> tuple[int, ...]:
        """IP versions: 4, 6, "both" or a list ["4", "6"]; unset: `default`, else the declared
        default."""
        value = self.table.get(option)
        if value is None:
            value = list(default) if default is not None else self.raw(option)
        if value == "both":
            value = [4, 6]
        fix = '4, 6, "both" or ["4", "6"]'
        out: list[int] = []
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v.isdigit():
                v = int(v)
            if v not in (4, 6) or isinstance(v, bool):
                raise self.error(option, f"not an IP version: {v!r}", fix)
            if v not in out:
                out.append(int(v))
        if not out:
            raise self.error(option, "names no IP version", fix)
        return tuple(out)

    def strings(self, option: str) -> list[str]:
        """A list of strings (a single string counts as a list of one; unset: none)."""
        value = self.table.get(option, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(option, f"not a list of strings: {value!r}", '["..."]')
        return list(value)

    def proto_port(self, key: str, text: Any) -> tuple[str, int]:
        """'tcp/5201' -> ("tcp", 5201); errors name `key` (an option or one of its items)."""
        fix = 'PROTO/PORT, e.g. "tcp/5201" or "udp/53"'
        if not isinstance(text, str) or text.count("/") != 1:
            raise self.error(key, f"not PROTO/PORT: {text!r}", fix)
        proto, port = text.split("/")
        if proto not in ("tcp", "udp"):
            raise self.error(key, f"unknown protocol {proto!r} in {text!r}", fix)
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise self.error(key, f"bad port {port!r} in {text!r}", "a port 1-65535")
        return proto, int(port)

    def choice(self, option: str, choices: Sequence[str]) -> str:
        value = self.raw(option)
        if value not in choices:
            raise self.error(option, f"unknown value {value!r}", ", ".join(choices))
        return str(value)

    def node_name(self, option: str, *, role: str | None = None) -> str:
        """A node of the topology (with `role`, when given)."""
        return self._node(self.raw(option), option, role)

    def node_names(self, option: str, *, role: str | None = None) -> list[str]:
        """A list of distinct nodes (a single name counts as a list of one)."""
        value = self.raw(option)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or len(set(map(str, value))) != len(value):
            raise self.error(option, f"not a list of distinct node names: {value!r}", '["h1"]')
        return [self._node(v, f"{option}", role) for v in value]

    def _node(self, name: Any, option: str, role: str | None) -> str:
        names = self.topology.node_names
        if not isinstance(name, str) or name not in names:
            raise self.error(option, f"unknown node {name!r}", ", ".join(names))
        have = self.topology.node(name).role
        if role is not None and have != role:
            fits = [n.name for n in self.topology.nodes if n.role == role]
            raise self.error(
                option,
                f"{name} is a {have}, {self.table.get('kind')} needs a {role} here",
                ", ".join(fits) or f"a node with role = {role!r}",
            )
        return name

    def network(
        self, option: str, version: int, *, lengths: Sequence[int] | None = None,
        example: str | None = None,
    ) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        """An IPv`version` network (of one of `lengths`); `example` goes into the errors."""
        text = self.raw(option)
        example = example or ("2001:db8:ffff::/96" if version == 6 else "192.168.255.0/24")
        try:
            net = ipaddress.ip_network(str(text), strict=True)
        except ValueError as exc:
            raise self.error(option, f"bad network {text!r}: {exc}", f"like {example}") from None
        if net.version != version:
            raise self.error(option, f"{text!r} is not an IPv{version} network", f"like {example}")
        if lengths is not None and net.prefixlen not in lengths:
            raise self.error(
                option,
                f"prefix length /{net.prefixlen} is not allowed",
                "/" + ", /".join(str(n) for n in lengths),
            )
        return net

    def no_overlap(self, option: str, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        """`net` overlaps no link subnet of the address plan."""
        hit = self.addresses.overlap(net)
        if hit is not None:
            raise self.error(option, f"{net} overlaps {hit}", "a network that no link uses")

    # --- topology lookups -------------------------------------------------------------------

    def link(self, node: str, option: str, peer: str) -> Interface:
        """`node`'s interface on its link to `peer` (named by `option`)."""
        for iface in self.addresses.of(node):
            if iface.peer_node == peer:
                return iface
        peers = ", ".join(i.peer_node for i in self.addresses.of(node))
        raise self.error(option, f"{node} has no link to {peer!r}",
                         f"a neighbour of {node}: {peers}")

    def need_stack(self, node: str, families: Sequence[int], why: str) -> None:
        have = self.topology.node(node).families
        if not all(f in have for f in families):
            want = {(4,): "ipv4", (6,): "ipv6", (4, 6): "dual"}[tuple(sorted(families))]
            raise SpecError(
                self.file,
                f"nodes.{node}.stack",
                f"{node} has stack {self.topology.node(node).stack!r}, but {why}",
                f"stack = {want!r}",
            )

    def address_of(self, node: str, family: int, peer: str | None = None) -> str:
        """`node`'s planned IPv`family` address (towards `peer`), or a SpecError."""
        try:
            return self.addresses.address(node, family, peer)
        except KeyError:
            towards = f" on its link to {peer}" if peer else ""
            raise SpecError(
                self.file,
                self.key("node"),
                f"{node} has no IPv{family} address{towards}, which {self.table.get('kind')} needs",
                "a topology whose links give it one",
            ) from None

    def nodes_with_stack(self, stack: str) -> list[str]:
        return [n.name for n in self.topology.nodes if n.stack == stack]
