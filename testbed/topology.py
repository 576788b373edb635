"""Topology files: TOML with parameters becomes frozen, validated dataclasses (no root needed)."""

from __future__ import annotations

import ipaddress
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import units
from testbed.errors import SpecError

RATE_PRESETS = units.RATE_PRESETS
ROLES = ("host", "router")
STACKS = ("ipv4", "ipv6", "dual")
MTU_MIN_V4 = 68
MTU_MIN_V6 = 1280
MTU_MAX = 65535
NODE_NAME = re.compile(r"^[a-z][a-z0-9]{0,14}$")
PARAM_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Sane ranges: a rate outside them rounds to 0 bit/s or overflows the kernel's tbf/netem
# fields; a delay beyond a minute is not a network path this testbed models.
RATE_MIN_BPS = units.RATE_MIN_BPS
RATE_MAX_BPS = units.RATE_MAX_BPS
DURATION_MAX_S = units.DURATION_MAX_S
DURATION_MIN_S = units.DURATION_MIN_S
MAX_NESTING = 16  # tables/arrays deeper than this are refused (no topology needs more than 4)
MAX_FILE_BYTES = 1 << 20
MAX_CHAIN_ROUTERS = 250  # nodes send with TTL/hop limit 255 (plan.MAX_HOPS): 250 are crossable

_TOP_KEYS = {
    "name",
    "description",
    "params",
    "defaults",
    "addressing",
    "nodes",
    "links",
    "chains",
    "routes",
    "features",
    "mechanism",  # refused with the [[features]] tables that replace it
}
_NODE_KEYS = {"role", "stack", "description"}
_LINK_KEYS = {
    "endpoints",
    "rate",
    "mtu",
    "delay",
    "jitter",
    "loss",
    "ipv4",
    "ipv6",
    "addresses",
    "shaping",
}
_DEFAULT_KEYS = {"rate", "mtu", "delay", "jitter", "loss", "stack", "shaping"}
_CHAIN_KEYS = {"from", "to", "routers", "prefix", "stack"}
_ROUTE_KEYS = {"node", "to", "via"}
_ADDRESSING_KEYS = {"ipv4", "ipv6", "ipv4_prefixlen", "ipv6_prefixlen"}
SHAPERS = ("auto", "tbf", "netem")


@dataclass(frozen=True)
class Node:
    """A host or router; `stack` says which IP versions it runs."""

    name: str
    role: str = "host"
    stack: str = "dual"

    @property
    def families(self) -> tuple[int, ...]:
        return {"ipv4": (4,), "ipv6": (6,), "dual": (4, 6)}[self.stack]


@dataclass(frozen=True)
class Shape:
    """How a link is shaped in both directions: rate on the wire, delay, jitter and loss."""

    rate_bps: float | None = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss_pct: float = 0.0
    shaper: str = "auto"

    @property
    def is_plain(self) -> bool:
        return self.rate_bps is None and not self.needs_netem

    @property
    def needs_netem(self) -> bool:
        return self.delay_s > 0 or self.jitter_s > 0 or self.loss_pct > 0 or self.shaper == "netem"


@dataclass(frozen=True)
class Link:
    """A point-to-point link (a veth pair) between two nodes."""

    index: int
    a: str
    b: str
    mtu: int = 1500
    shape: Shape = field(default_factory=Shape)
    subnet4: str | None = None
    subnet6: str | None = None
    addresses: tuple[tuple[str, tuple[str, ...]], ...] = ()
    key: str = ""

    def other(self, node: str) -> str:
        return self.b if node == self.a else self.a

    def explicit_addresses(self, node: str) -> tuple[str, ...]:
        for name, addrs in self.addresses:
            if name == node:
                return addrs
        return ()


@dataclass(frozen=True)
class Route:
    """An explicit static route on one node."""

    node: str
    to: str
    via: str


@dataclass(frozen=True)
class Topology:
    """A whole topology as resolved from a file and its parameters."""

    name: str
    source: str
    description: str
    params: tuple[tuple[str, Any], ...]
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    routes: tuple[Route, ...] = ()
    ipv4_pool: str = "198.18.0.0/15"
    ipv6_pool: str = "2001:2::/48"
    ipv4_prefixlen: int = 24
    ipv6_prefixlen: int = 64
    features: tuple[tuple[tuple[str, Any], ...], ...] = ()  # [[features]] tables, in order

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def features_list(self) -> list[dict[str, Any]]:
        """The [[features]] tables (validated by testbed.features when a plan is compiled)."""
        return [dict(f) for f in self.features]

    def links_of(self, node: str) -> list[Link]:
        return [lk for lk in self.links if node in (lk.a, lk.b)]

    def to_dict(self) -> dict[str, Any]:
        """The resolved topology as plain data (for provenance and `testbed show`)."""
        return {
            "name": self.name,
            "source": self.source,
            "params": dict(self.params),
            "nodes": [{"name": n.name, "role": n.role, "stack": n.stack} for n in self.nodes],
            "links": [
                {
                    "endpoints": [lk.a, lk.b],
                    "mtu": lk.mtu,
                    "rate_bps": lk.shape.rate_bps,
                    "delay_s": lk.shape.delay_s,
                    "jitter_s": lk.shape.jitter_s,
                    "loss_pct": lk.shape.loss_pct,
                    "shaper": lk.shape.shaper,
                }
                for lk in self.links
            ],
            "routes": [{"node": r.node, "to": r.to, "via": r.via} for r in self.routes],
            "features": self.features_list,
        }


# ---------------------------------------------------------------------------- parsing helpers




def parse_duration(value: Any, file: str, key: str) -> float:
    """A duration (see `testbed.units.duration`; a plain number is milliseconds) in seconds."""
    return units.in_spec(units.duration, value, file, key)


def parse_loss(value: Any, file: str, key: str) -> float:
    """A loss percentage from 0 to 100."""
    return units.in_spec(units.percent, value, file, key)


def _check_keys(table: Mapping[str, Any], allowed: set[str], file: str, key: str) -> None:
    for k in table:
        if k not in allowed:
            where = f"{key}.{k}" if key else (k or '""')
            raise SpecError(file, where, f"unknown key '{k}'", ", ".join(sorted(allowed)))


def _coerce_param(name: str, text: str, default: Any, file: str) -> Any:
    """Turn a `--set name=text` value into the type of the declared default."""
    key = f"params.{name}"
    try:
        if isinstance(default, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        raise SpecError(
            file,
            key,
            f"--set {name}={text}: not a {type(default).__name__}",
            f"a {type(default).__name__} like {default!r}",
        ) from None
    return text


def substitute(value: Any, params: Mapping[str, Any], file: str, key: str) -> Any:
    """Replace ${param} references; a whole-string reference keeps the parameter's type."""
    if isinstance(value, str):

        def lookup(name: str) -> Any:
            if name not in params:
                raise SpecError(
                    file,
                    key,
                    f"unknown parameter '${{{name}}}'",
                    ", ".join(sorted(params)) or "no parameters are declared",
                )
            return params[name]

        whole = PARAM_REF.fullmatch(value)
        if whole:
            return lookup(whole.group(1))

        def repl(m: re.Match[str]) -> str:
            return str(lookup(m.group(1)))

        return PARAM_REF.sub(repl, value)
    if isinstance(value, list):
        return [substitute(v, params, file, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {
            k: substitute(v, params, file, f"{key}.{k}" if key else k) for k, v in value.items()
        }
    return value


# ---------------------------------------------------------------------------- loading


def read_toml(path: Path, what: str, example: str) -> dict[str, Any]:
    """Read a TOML file, refusing cleanly what is missing, unreadable, too large, not UTF-8,
    not TOML or nested deeper than any testbed file needs (raises SpecError, exit 2)."""
    file = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(file, "", f"no such {what} file", example) from None
    except IsADirectoryError:
        raise SpecError(file, "", f"is a directory, not a {what} file", example) from None
    except OSError as exc:
        raise SpecError(file, "", f"cannot read it: {exc.strerror or exc}", example) from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(file, "", f"larger than {MAX_FILE_BYTES} bytes", f"a {what} file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SpecError(
            file, "", f"not UTF-8 text (byte {exc.start}, line {line})", "a UTF-8 TOML file"
        ) from None
    if _bracket_depth(text) > 4 * MAX_NESTING:
        raise SpecError(file, "", f"nested deeper than {MAX_NESTING} levels", "flatter TOML")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(file, "", f"not valid TOML: {exc}", "TOML syntax") from None
    except RecursionError:
        raise SpecError(file, "", "nested too deeply to read", "flatter TOML") from None
    key = _too_deep(raw)
    if key is not None:
        raise SpecError(file, key, f"nested deeper than {MAX_NESTING} levels", "flatter TOML")
    return raw


def _bracket_depth(text: str) -> int:
    """The deepest run of opening brackets/braces (a cheap guard before the parser recurses)."""
    depth = best = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return best


def _too_deep(value: Any) -> str | None:
    """The key path of the first value nested deeper than MAX_NESTING, if any."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        v, key, depth = stack.pop()
        if depth > MAX_NESTING:
            return key or "(top level)"
        if isinstance(v, dict):
            stack.extend((x, f"{key}.{k}" if key else str(k), depth + 1) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, f"{key}[{i}]", depth + 1) for i, x in enumerate(v))
    return None


SHIPPED_TOPOLOGIES = Path(__file__).resolve().parent / "topologies"  # package data


def shipped_topologies() -> list[str]:
    return sorted(q.stem for q in SHIPPED_TOPOLOGIES.glob("*.toml"))


def find_topology(name: str | Path, relative_to: Path | None = None) -> Path:
    """A topology by path, or by name: topologies/NAME.toml beside the experiment file
    `relative_to`, in the current folder, then the topologies shipped with testbed."""
    text = str(name)
    p = Path(text)
    if p.suffix == ".toml" or "/" in text:
        cands = [p] + ([relative_to / p] if relative_to else [])
    else:
        bases = ([relative_to.parent / "topologies"] if relative_to else []) + [
            Path("topologies"), SHIPPED_TOPOLOGIES]
        cands = [b / f"{text}.toml" for b in bases]
    for c in cands:
        if c.exists():
            return c
    raise SpecError(str(relative_to or text), "topology", f"no topology {text!r}",
                    "a path, or a name: " + ", ".join(shipped_topologies()))


def load_topology(path: str | Path, overrides: Mapping[str, str] | None = None) -> Topology:
    """Read, parameterise and validate a topology file. Raises SpecError; creates nothing."""
    p = Path(path)
    file = str(path)
    raw = read_toml(p, "topology", "a path such as topologies/chain.toml")
    return topology_from_dict(raw, file=file, overrides=overrides or {}, default_name=p.stem)


def topology_from_dict(
    raw: Mapping[str, Any],
    *,
    file: str = "<topology>",
    overrides: Mapping[str, str] | None = None,
    default_name: str = "topology",
) -> Topology:
    """Validate an already-parsed topology table (the body of a topology file)."""
    _check_keys(raw, _TOP_KEYS, file, "")
    params = _resolve_params(raw, overrides or {}, file)
    body = {k: v for k, v in raw.items() if k != "params"}
    body = substitute(body, params, file, "")

    name = body.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise SpecError(file, "name", "must be a non-empty string", "a name like 'chain'")
    description = body.get("description", "")
    if not isinstance(description, str):
        raise SpecError(file, "description", "must be a string", "a line of text")

    defaults = body.get("defaults", {})
    if not isinstance(defaults, dict):
        raise SpecError(file, "defaults", "must be a table", ", ".join(sorted(_DEFAULT_KEYS)))
    _check_keys(defaults, _DEFAULT_KEYS, file, "defaults")

    nodes, links = _load_nodes_and_links(body, defaults, file)
    pool4, pool6, plen4, plen6 = _load_addressing(body, file)
    routes = _load_routes(body.get("routes", []), {n.name for n in nodes}, file)
    if "mechanism" in body:
        raise SpecError(
            file,
            "mechanism",
            "[mechanism] was replaced by [[features]] tables (any number compose on a topology)",
            "[[features]] with kind, node and options: see docs/features.md "
            '(e.g. kind = "nat64-jool", node = "r1"; 6to4: one table per host)',
        )
    features = _load_features(body.get("features", []), file)

    topo = Topology(
        name=name,
        source=file,
        description=description,
        params=tuple(sorted(params.items())),
        nodes=tuple(nodes),
        links=tuple(links),
        routes=tuple(routes),
        ipv4_pool=str(pool4),
        ipv6_pool=str(pool6),
        ipv4_prefixlen=plen4,
        ipv6_prefixlen=plen6,
        features=features,
    )
    if not topo.nodes:
        raise SpecError(file, "nodes", "a topology needs at least one node", "[nodes.NAME] tables")
    return topo


def _resolve_params(raw: Mapping[str, Any], overrides: Mapping[str, str],
                    file: str) -> dict[str, Any]:
    """The file's [params] with the `--set` overrides applied (each must be declared)."""
    declared = raw.get("params", {})
    if not isinstance(declared, dict):
        raise SpecError(file, "params", "must be a table", "name = default value pairs")
    params: dict[str, Any] = dict(declared)
    for name, text in overrides.items():
        if name not in declared:
            raise SpecError(
                file,
                f"params.{name}",
                f"--set {name}: no such parameter",
                ", ".join(sorted(declared)) or "this file declares no parameters",
            )
        params[name] = _coerce_param(name, text, declared[name], file)
    return params


def _load_nodes_and_links(body: Mapping[str, Any], defaults: Mapping[str, Any],
                          file: str) -> tuple[list[Node], list[Link]]:
    """[nodes], [[links]] and the nodes and links each [[chains]] table expands to."""
    nodes = _load_nodes(body.get("nodes", {}), defaults, file)
    node_names = {n.name for n in nodes}
    links_raw = body.get("links", [])
    if not isinstance(links_raw, list):
        raise SpecError(file, "links", "must be an array of tables ([[links]])", "[[links]]")
    link_specs: list[tuple[str, dict[str, Any]]] = [
        (f"links[{i}]", lk) for i, lk in enumerate(links_raw)
    ]

    chains = body.get("chains", [])
    if not isinstance(chains, list):
        raise SpecError(file, "chains", "must be an array of tables ([[chains]])", "[[chains]]")
    for ci, chain in enumerate(chains):
        key = f"chains[{ci}]"
        if not isinstance(chain, dict):
            raise SpecError(file, key, "must be a table", ", ".join(sorted(_CHAIN_KEYS)))
        _check_keys(chain, _CHAIN_KEYS, file, key)
        new_nodes, new_links = _expand_chain(chain, node_names, defaults, file, key)
        for n in new_nodes:
            nodes.append(n)
            node_names.add(n.name)
        link_specs.extend(new_links)

    links = [
        _load_link(i, spec, key, node_names, {n.name: n for n in nodes}, defaults, file)
        for i, (key, spec) in enumerate(link_specs)
    ]
    _check_link_uniqueness(links, file)
    return nodes, links


def _load_addressing(
    body: Mapping[str, Any], file: str
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network,
           ipaddress.IPv4Network | ipaddress.IPv6Network, int, int]:
    """[addressing]: the IPv4 and IPv6 pools and the prefix length of each link's subnet."""
    addressing = body.get("addressing", {})
    if not isinstance(addressing, dict):
        raise SpecError(file, "addressing", "must be a table", ", ".join(sorted(_ADDRESSING_KEYS)))
    _check_keys(addressing, _ADDRESSING_KEYS, file, "addressing")
    pool4 = _network(addressing.get("ipv4", "198.18.0.0/15"), 4, file, "addressing.ipv4")
    pool6 = _network(addressing.get("ipv6", "2001:2::/48"), 6, file, "addressing.ipv6")
    plen4 = _prefixlen(addressing, "ipv4_prefixlen", 24, pool4.prefixlen, 30, file)
    plen6 = _prefixlen(addressing, "ipv6_prefixlen", 64, pool6.prefixlen, 126, file)
    return pool4, pool6, plen4, plen6


def _load_features(raw: Any, file: str) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """The shape of [[features]] tables; testbed.features checks their meaning."""
    if not isinstance(raw, list):
        raise SpecError(
            file, "features", "must be an array of tables ([[features]])", "[[features]]"
        )
    out = []
    for i, table in enumerate(raw):
        key = f"features[{i}]"
        if not isinstance(table, dict):
            raise SpecError(file, key, "must be a table", "kind = ..., node = ..., options")
        for k, v in table.items():
            plain = isinstance(v, str | bool) or (
                isinstance(v, int | float) and math.isfinite(v) and abs(v) < 2**63
            )
            if not plain and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                raise SpecError(
                    file,
                    f"{key}.{k}",
                    f"bad value {v!r}",
                    "a string, a number, true/false, or a list of strings",
                )
        if not isinstance(table.get("kind"), str):
            raise SpecError(
                file,
                f"{key}.kind",
                f"missing or not a string: {table.get('kind')!r}",
                'a feature kind such as "nat64-jool" (`testbed features` lists them)',
            )
        out.append(tuple(table.items()))
    return tuple(out)


def _load_nodes(raw: Any, defaults: Mapping[str, Any], file: str) -> list[Node]:
    if not isinstance(raw, dict):
        raise SpecError(file, "nodes", "must be a table of [nodes.NAME] tables", "[nodes.h1]")
    nodes = []
    for name, spec in raw.items():
        key = f"nodes.{name}"
        _check_node_name(name, file, key)
        if not isinstance(spec, dict):
            raise SpecError(file, key, "must be a table", ", ".join(sorted(_NODE_KEYS)))
        _check_keys(spec, _NODE_KEYS, file, key)
        role = spec.get("role", "host")
        if not isinstance(role, str) or role not in ROLES:
            raise SpecError(file, f"{key}.role", f"unknown role {role!r}", ", ".join(ROLES))
        stack = spec.get("stack", defaults.get("stack", "dual"))
        if not isinstance(stack, str) or stack not in STACKS:
            raise SpecError(file, f"{key}.stack", f"unknown stack {stack!r}", ", ".join(STACKS))
        nodes.append(Node(name=name, role=role, stack=stack))
    return nodes


def _check_node_name(name: str, file: str, key: str) -> None:
    if not NODE_NAME.fullmatch(name):
        raise SpecError(
            file,
            key,
            f"bad node name {name!r}",
            "1-15 characters: a lower-case letter, then letters or digits",
        )


def _expand_chain(
    chain: Mapping[str, Any], names: set[str], defaults: Mapping[str, Any], file: str, key: str
) -> tuple[list[Node], list[tuple[str, dict[str, Any]]]]:
    """A chain `from` — r1 — ... — rN — `to`, with N routers named prefix1..prefixN."""
    for end in ("from", "to"):
        if end not in chain:
            raise SpecError(file, f"{key}.{end}", "missing", "the name of a declared node")
        if not isinstance(chain[end], str) or chain[end] not in names:
            raise SpecError(
                file, f"{key}.{end}", f"unknown node {chain[end]!r}", ", ".join(sorted(names))
            )
    count = chain.get("routers", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_CHAIN_ROUTERS:
        raise SpecError(
            file,
            f"{key}.routers",
            f"bad router count {count!r}",
            f"an integer from 0 to {MAX_CHAIN_ROUTERS}",
        )
    prefix = chain.get("prefix", "r")
    if not isinstance(prefix, str):
        raise SpecError(
            file,
            f"{key}.prefix",
            f"bad prefix {prefix!r}",
            "a string such as 'r' (names r1, r2, ...)",
        )
    stack = chain.get("stack", defaults.get("stack", "dual"))
    if not isinstance(stack, str) or stack not in STACKS:
        raise SpecError(file, f"{key}.stack", f"unknown stack {stack!r}", ", ".join(STACKS))
    new_nodes = []
    for i in range(1, count + 1):
        name = f"{prefix}{i}"
        _check_node_name(name, file, f"{key}.prefix")
        if name in names:
            raise SpecError(
                file,
                f"{key}.prefix",
                f"router name {name!r} is already a node",
                "a prefix whose names are free",
            )
        new_nodes.append(Node(name=name, role="router", stack=stack))
    path = [chain["from"], *(n.name for n in new_nodes), chain["to"]]
    links = [
        (f"{key} (link {path[i]}-{path[i + 1]})", {"endpoints": [path[i], path[i + 1]]})
        for i in range(len(path) - 1)
    ]
    return new_nodes, links


def _load_link(
    index: int,
    spec: Any,
    key: str,
    names: set[str],
    nodes: Mapping[str, Node],
    defaults: Mapping[str, Any],
    file: str,
) -> Link:
    if not isinstance(spec, dict):
        raise SpecError(file, key, "must be a table", ", ".join(sorted(_LINK_KEYS)))
    _check_keys(spec, _LINK_KEYS, file, key)
    ends = spec.get("endpoints")
    if not isinstance(ends, list) or len(ends) != 2 or not all(isinstance(e, str) for e in ends):
        raise SpecError(
            file,
            f"{key}.endpoints",
            f"bad endpoints {ends!r}",
            'a list of two node names, e.g. ["h1", "r1"]',
        )
    a, b = ends
    for e in (a, b):
        if e not in names:
            raise SpecError(
                file, f"{key}.endpoints", f"unknown node {e!r}", ", ".join(sorted(names))
            )
    if a == b:
        raise SpecError(
            file, f"{key}.endpoints", f"a link from {a!r} to itself", "two different nodes"
        )
    merged = {**{k: v for k, v in defaults.items() if k != "stack"}, **spec}
    rate = (units.in_spec(units.rate, merged["rate"], file, f"{key}.rate") if "rate" in merged
            else None)
    delay = parse_duration(merged.get("delay", 0), file, f"{key}.delay")
    jitter = parse_duration(merged.get("jitter", 0), file, f"{key}.jitter")
    loss = parse_loss(merged.get("loss", 0), file, f"{key}.loss")
    shaper = merged.get("shaping", "auto")
    if not isinstance(shaper, str) or shaper not in SHAPERS:
        raise SpecError(file, f"{key}.shaping", f"unknown shaper {shaper!r}", ", ".join(SHAPERS))
    mtu = merged.get("mtu", 1500)
    carries_v6 = 6 in nodes[a].families and 6 in nodes[b].families
    low = MTU_MIN_V6 if carries_v6 else MTU_MIN_V4
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not low <= mtu <= MTU_MAX:
        why = " (the link carries IPv6, which needs at least 1280)" if carries_v6 else ""
        raise SpecError(
            file,
            f"{key}.mtu",
            f"impossible MTU {mtu!r}{why}",
            f"an integer from {low} to {MTU_MAX}",
        )
    subnet4 = spec.get("ipv4")
    subnet6 = spec.get("ipv6")
    if subnet4 is not None:
        subnet4 = str(_network(subnet4, 4, file, f"{key}.ipv4"))
    if subnet6 is not None:
        subnet6 = str(_network(subnet6, 6, file, f"{key}.ipv6"))
    addrs_raw = spec.get("addresses", {})
    if not isinstance(addrs_raw, dict):
        raise SpecError(
            file,
            f"{key}.addresses",
            "must be a table",
            '{ h1 = ["198.18.0.1/24", "2001:2::1/64"] }',
        )
    addresses = []
    for node, lst in addrs_raw.items():
        akey = f"{key}.addresses.{node}"
        if node not in (a, b):
            raise SpecError(file, akey, f"{node!r} is not an endpoint of this link", f"{a}, {b}")
        if isinstance(lst, str):
            lst = [lst]
        if not isinstance(lst, list):
            raise SpecError(
                file,
                akey,
                "must be a list of addresses with prefix length",
                '["198.18.0.1/24", "2001:2::1/64"]',
            )
        checked = []
        for j, text in enumerate(lst):
            iface = _interface(text, file, f"{akey}[{j}]")
            fam = iface.version
            if fam not in nodes[node].families:
                raise SpecError(
                    file,
                    f"{akey}[{j}]",
                    f"IPv{fam} address on {node}, whose stack is {nodes[node].stack}",
                    "addresses of the node's IP versions",
                )
            checked.append(str(iface))
        addresses.append((node, tuple(checked)))
    return Link(
        index=index,
        a=a,
        b=b,
        mtu=mtu,
        shape=Shape(rate_bps=rate, delay_s=delay, jitter_s=jitter, loss_pct=loss, shaper=shaper),
        subnet4=subnet4,
        subnet6=subnet6,
        addresses=tuple(addresses),
        key=key,
    )


def _check_link_uniqueness(links: list[Link], file: str) -> None:
    seen: dict[frozenset[str], str] = {}
    for lk in links:
        pair = frozenset((lk.a, lk.b))
        if pair in seen:
            raise SpecError(
                file,
                lk.key,
                f"a second link between {lk.a} and {lk.b} (first at {seen[pair]})",
                "one link per pair of nodes",
            )
        seen[pair] = lk.key


def _prefixlen(
    addressing: dict[str, Any], key: str, default: int, low: int, high: int, file: str
) -> int:
    """`addressing.KEY`: the prefix length of each link's subnet, `low` (the pool's) to `high`."""
    plen = addressing.get(key, default)
    if isinstance(plen, bool) or not isinstance(plen, int) or not low <= plen <= high:
        raise SpecError(
            file,
            f"addressing.{key}",
            f"bad prefix length {plen!r}",
            f"an integer from {low} to {high}",
        )
    return plen


def _network(text: Any, version: int, file: str, key: str) -> Any:
    try:
        net = ipaddress.ip_network(str(text), strict=True)
    except ValueError as exc:
        raise SpecError(
            file,
            key,
            f"bad IPv{version} network {text!r}: {exc}",
            "a network like '198.18.0.0/24'" if version == 4 else "a network like '2001:2::/64'",
        ) from None
    if net.version != version:
        raise SpecError(
            file, key, f"{text!r} is not an IPv{version} network", f"an IPv{version} network"
        )
    clash = next((n for n in UNUSABLE[version] if net.overlaps(n)), None)
    if clash is not None:
        raise SpecError(
            file,
            key,
            f"{net} cannot address a link: it overlaps {clash} ({UNUSABLE[version][clash]})",
            "a unicast network such as the benchmarking ranges 198.18.0.0/15 or 2001:2::/48",
        )
    return net


# Ranges whose addresses no interface of a link can hold (pools and link subnets must avoid
# them): the kernel refuses or misroutes them (e.g. ::/0 made h1 ::1/64: errno 99 at `up`).
UNUSABLE: dict[int, dict[Any, str]] = {
    4: {ipaddress.ip_network(n): why for n, why in (
        ("0.0.0.0/8", "this network, RFC 1122"), ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"), ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved, RFC 1112"))},
    6: {ipaddress.ip_network(n): why for n, why in (
        ("::/127", "unspecified and loopback"), ("fe80::/10", "link-local"),
        ("ff00::/8", "multicast"))},
}


def _interface(text: Any, file: str, key: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    if not isinstance(text, str) or "/" not in text:
        raise SpecError(
            file,
            key,
            f"bad address {text!r}",
            "an address with prefix length, e.g. '198.18.0.1/24' or '2001:2::1/64'",
        )
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError as exc:
        raise SpecError(
            file,
            key,
            f"bad address {text!r}: {exc}",
            "an address with prefix length, e.g. '198.18.0.1/24'",
        ) from None
    clash = next((n for n in UNUSABLE[iface.version] if iface.ip in n), None)
    if clash is not None:
        raise SpecError(
            file,
            key,
            f"{iface.ip} cannot be a link's address: it lies in {clash} "
            f"({UNUSABLE[iface.version][clash]})",
            "a unicast address such as '198.18.0.1/24' or '2001:2::1/64'",
        )
    return iface


def _load_routes(raw: Any, names: set[str], file: str) -> list[Route]:
    if not isinstance(raw, list):
        raise SpecError(file, "routes", "must be an array of tables ([[routes]])", "[[routes]]")
    routes = []
    for i, spec in enumerate(raw):
        key = f"routes[{i}]"
        if not isinstance(spec, dict):
            raise SpecError(file, key, "must be a table", ", ".join(sorted(_ROUTE_KEYS)))
        _check_keys(spec, _ROUTE_KEYS, file, key)
        for k in _ROUTE_KEYS:
            if k not in spec:
                raise SpecError(file, f"{key}.{k}", "missing", ", ".join(sorted(_ROUTE_KEYS)))
        if not isinstance(spec["node"], str) or spec["node"] not in names:
            raise SpecError(
                file, f"{key}.node", f"unknown node {spec['node']!r}", ", ".join(sorted(names))
            )
        to = spec["to"]
        for k in ("to", "via"):
            if not isinstance(spec[k], str):
                raise SpecError(
                    file, f"{key}.{k}", f"must be a string, got {spec[k]!r}", "e.g. '198.18.5.0/24'"
                )
        if to == "default":
            to = "0.0.0.0/0" if ":" not in str(spec["via"]) else "::/0"
        try:
            dst = ipaddress.ip_network(str(to), strict=True)
        except ValueError as exc:
            raise SpecError(
                file,
                f"{key}.to",
                f"bad destination {to!r}: {exc}",
                "a network like '198.18.5.0/24', or 'default'",
            ) from None
        try:
            via = ipaddress.ip_address(str(spec["via"]))
        except ValueError as exc:
            raise SpecError(
                file, f"{key}.via", f"bad gateway {spec['via']!r}: {exc}", "an address"
            ) from None
        if via.version != dst.version:
            raise SpecError(
                file,
                f"{key}.via",
                "gateway and destination differ in IP version",
                f"an IPv{dst.version} gateway",
            )
        routes.append(Route(node=spec["node"], to=str(dst), via=str(via)))
    return routes
