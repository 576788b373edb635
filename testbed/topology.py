"""Topology files: TOML with parameters becomes frozen, validated dataclasses (no root needed)."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed import units
from testbed.errors import SpecError
from testbed.tomlfile import check_keys, read_toml
from testbed.topology_model import (
    MAX_CHAIN_ROUTERS,
    MTU_MAX,
    MTU_MIN_V4,
    MTU_MIN_V6,
    NODE_NAME,
    ROLES,
    SHAPERS,
    STACKS,
    Link,
    Node,
    Route,
    Shape,
    Topology,
)
from testbed.topology_values import (
    coerce_param,
    interface,
    network,
    parse_duration,
    parse_loss,
    prefixlen,
    substitute,
)

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
    check_keys(raw, _TOP_KEYS, file, "")
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
    check_keys(defaults, _DEFAULT_KEYS, file, "defaults")

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
        params[name] = coerce_param(name, text, declared[name], file)
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
        check_keys(chain, _CHAIN_KEYS, file, key)
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
    check_keys(addressing, _ADDRESSING_KEYS, file, "addressing")
    pool4 = network(addressing.get("ipv4", "198.18.0.0/15"), 4, file, "addressing.ipv4")
    pool6 = network(addressing.get("ipv6", "2001:2::/48"), 6, file, "addressing.ipv6")
    plen4 = prefixlen(addressing, "ipv4_prefixlen", 24, pool4.prefixlen, 30, file)
    plen6 = prefixlen(addressing, "ipv6_prefixlen", 64, pool6.prefixlen, 126, file)
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
        check_keys(spec, _NODE_KEYS, file, key)
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
    check_keys(spec, _LINK_KEYS, file, key)
    a, b = _link_endpoints(spec.get("endpoints"), key, names, file)
    merged = {**{k: v for k, v in defaults.items() if k != "stack"}, **spec}
    subnet4 = spec.get("ipv4")
    subnet6 = spec.get("ipv6")
    if subnet4 is not None:
        subnet4 = str(network(subnet4, 4, file, f"{key}.ipv4"))
    if subnet6 is not None:
        subnet6 = str(network(subnet6, 6, file, f"{key}.ipv6"))
    return Link(
        index=index,
        a=a,
        b=b,
        mtu=_link_mtu(merged.get("mtu", 1500), nodes[a], nodes[b], key, file),
        shape=_link_shape(merged, key, file),
        subnet4=subnet4,
        subnet6=subnet6,
        addresses=_link_addresses(spec.get("addresses", {}), (a, b), nodes, key, file),
        key=key,
    )


def _link_endpoints(ends: Any, key: str, names: set[str], file: str) -> tuple[str, str]:
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
    return a, b


def _link_shape(merged: Mapping[str, Any], key: str, file: str) -> Shape:
    rate = (units.in_spec(units.rate, merged["rate"], file, f"{key}.rate") if "rate" in merged
            else None)
    delay = parse_duration(merged.get("delay", 0), file, f"{key}.delay")
    jitter = parse_duration(merged.get("jitter", 0), file, f"{key}.jitter")
    loss = parse_loss(merged.get("loss", 0), file, f"{key}.loss")
    shaper = merged.get("shaping", "auto")
    if not isinstance(shaper, str) or shaper not in SHAPERS:
        raise SpecError(file, f"{key}.shaping", f"unknown shaper {shaper!r}", ", ".join(SHAPERS))
    return Shape(rate_bps=rate, delay_s=delay, jitter_s=jitter, loss_pct=loss, shaper=shaper)


def _link_mtu(mtu: Any, a: Node, b: Node, key: str, file: str) -> int:
    carries_v6 = 6 in a.families and 6 in b.families
    low = MTU_MIN_V6 if carries_v6 else MTU_MIN_V4
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not low <= mtu <= MTU_MAX:
        why = " (the link carries IPv6, which needs at least 1280)" if carries_v6 else ""
        raise SpecError(
            file,
            f"{key}.mtu",
            f"impossible MTU {mtu!r}{why}",
            f"an integer from {low} to {MTU_MAX}",
        )
    return mtu


def _link_addresses(addrs_raw: Any, ends: tuple[str, str], nodes: Mapping[str, Node], key: str,
                    file: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
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
        if node not in ends:
            raise SpecError(file, akey, f"{node!r} is not an endpoint of this link",
                            ", ".join(ends))
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
            iface = interface(text, file, f"{akey}[{j}]")
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
    return tuple(addresses)


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


def _load_routes(raw: Any, names: set[str], file: str) -> list[Route]:
    if not isinstance(raw, list):
        raise SpecError(file, "routes", "must be an array of tables ([[routes]])", "[[routes]]")
    routes = []
    for i, spec in enumerate(raw):
        key = f"routes[{i}]"
        if not isinstance(spec, dict):
            raise SpecError(file, key, "must be a table", ", ".join(sorted(_ROUTE_KEYS)))
        check_keys(spec, _ROUTE_KEYS, file, key)
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
