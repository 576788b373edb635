"""Shared parts of the mechanisms: key checks, node and network lookups, kernel-state probes."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from testbed.addressing import AddressPlan
from testbed.errors import SpecError
from testbed.topology import Topology

if TYPE_CHECKING:
    from testbed.testbed import Testbed

SECTION = "mechanism"


def check_keys(topo: Topology, table: Mapping[str, Any], allowed: Iterable[str]) -> None:
    allowed = sorted(allowed)
    for k in table:
        if k not in allowed:
            raise SpecError(
                topo.source,
                f"{SECTION}.{k}",
                f"unknown key '{k}' for kind {table.get('kind')!r}",
                ", ".join(allowed),
            )


def node_key(
    topo: Topology,
    table: Mapping[str, Any],
    key: str,
    *,
    default: str | None = None,
    role: str | None = None,
) -> str:
    """A node named by `key` (or the default); it must exist and have `role` if given."""
    name = table.get(key, default)
    names = topo.node_names
    if name is None:
        raise SpecError(topo.source, f"{SECTION}.{key}", "missing", ", ".join(names))
    if not isinstance(name, str) or name not in names:
        raise SpecError(topo.source, f"{SECTION}.{key}", f"unknown node {name!r}", ", ".join(names))
    if role is not None and topo.node(name).role != role:
        raise SpecError(
            topo.source,
            f"{SECTION}.{key}",
            f"{name} is a {topo.node(name).role}, the mechanism needs a {role} here",
            ", ".join(n.name for n in topo.nodes if n.role == role) or f"a node with role {role}",
        )
    return name


def need_stack(topo: Topology, node: str, families: Sequence[int], why: str) -> None:
    have = topo.node(node).families
    if not all(f in have for f in families):
        want = {(4,): "ipv4", (6,): "ipv6", (4, 6): "dual"}[tuple(sorted(families))]
        raise SpecError(
            topo.source,
            f"nodes.{node}.stack",
            f"{node} has stack {topo.node(node).stack!r}, but {why}",
            f"stack = {want!r}",
        )


def network_key(
    topo: Topology,
    table: Mapping[str, Any],
    key: str,
    version: int,
    *,
    default: str | None = None,
    lengths: Sequence[int] | None = None,
) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    text = table.get(key, default)
    example = "2001:db8:ffff::/96" if version == 6 else "192.168.255.0/24"
    where = f"{SECTION}.{key}"
    if text is None:
        raise SpecError(topo.source, where, "missing", f"an IPv{version} network like {example}")
    try:
        net = ipaddress.ip_network(str(text), strict=True)
    except ValueError as exc:
        raise SpecError(
            topo.source, where, f"bad network {text!r}: {exc}", f"a network like {example}"
        ) from None
    if net.version != version:
        raise SpecError(
            topo.source, where, f"{text!r} is not an IPv{version} network", f"like {example}"
        )
    if lengths is not None and net.prefixlen not in lengths:
        raise SpecError(
            topo.source,
            where,
            f"prefix length /{net.prefixlen} is not allowed",
            "/" + ", /".join(str(n) for n in lengths),
        )
    return net


def check_no_overlap(
    topo: Topology, plan: AddressPlan, key: str, net: ipaddress.IPv4Network | ipaddress.IPv6Network
) -> None:
    """The mechanism's network must not overlap any link subnet of the address plan."""
    for iface in plan.interfaces:
        for cidr in iface.addresses:
            sub = ipaddress.ip_interface(cidr).network
            if sub.version == net.version and sub.overlaps(net):
                raise SpecError(
                    topo.source,
                    f"{SECTION}.{key}",
                    f"{net} overlaps {sub}, the subnet of {iface.node}'s {iface.name}",
                    "a network that no link uses",
                )


def bool_key(topo: Topology, table: Mapping[str, Any], key: str, default: bool) -> bool:
    value = table.get(key, default)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise SpecError(topo.source, f"{SECTION}.{key}", f"not a boolean: {value!r}", "true, false")
    return value


def name_key(topo: Topology, table: Mapping[str, Any], key: str, default: str) -> str:
    """An interface or instance name: 1-15 letters, digits, '-' or '_'."""
    value = table.get(key, default)
    ok = (
        isinstance(value, str)
        and 0 < len(value) <= 15
        and all(c.isalnum() or c in "-_" for c in value)
    )
    if not ok:
        raise SpecError(
            topo.source,
            f"{SECTION}.{key}",
            f"bad name {value!r}",
            "1-15 letters, digits, '-' or '_'",
        )
    return str(value)


def int_key(
    topo: Topology, table: Mapping[str, Any], key: str, default: int, low: int, high: int
) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(
            topo.source, f"{SECTION}.{key}", f"bad value {value!r}", f"an integer {low}-{high}"
        )
    return value


def plan_address(
    topo: Topology, plan: AddressPlan, node: str, family: int, peer: str | None, key: str
) -> str:
    try:
        return plan.address(node, family, peer)
    except KeyError:
        towards = f" on its link to {peer}" if peer else ""
        raise SpecError(
            topo.source,
            key,
            f"{node} has no IPv{family} address{towards}, which the mechanism needs",
            "a topology whose links give it one",
        ) from None


# --- kernel state, read with `ip -j` in a node -------------------------------------------------


def ip_json(tb: Testbed, node: str, args: Sequence[str]) -> list[dict[str, Any]]:
    out = tb.run(node, ["ip", "-j", *args], check=False)
    if out.returncode != 0 or not out.stdout.strip():
        return []
    try:
        data = json.loads(out.stdout)
    except json.JSONDecodeError:
        return []
    return data if isinstance(data, list) else []


def link_up(tb: Testbed, node: str, dev: str) -> str | None:
    links = ip_json(tb, node, ["link", "show", "dev", dev])
    if not links:
        return f"no interface {dev} on {node}"
    if "UP" not in links[0].get("flags", []):
        return f"{dev} on {node} is not up"
    return None


def has_route(tb: Testbed, node: str, family: int, dst: str, dev: str) -> str | None:
    routes = ip_json(tb, node, [f"-{family}", "route", "show", dst])
    for r in routes:
        if r.get("dev") == dev:
            return None
    return f"no route {dst} dev {dev} on {node}"


def has_address(tb: Testbed, node: str, dev: str, address: str) -> str | None:
    for link in ip_json(tb, node, ["addr", "show", "dev", dev]):
        for a in link.get("addr_info", []):
            if ipaddress.ip_address(a.get("local", "::")) == ipaddress.ip_address(address):
                if a.get("tentative"):
                    return f"{address} on {node}/{dev} is still tentative"
                return None
    return f"no address {address} on {node}/{dev}"


def all_ready(*reasons: str | None) -> str | None:
    for r in reasons:
        if r is not None:
            return r
    return None


def register_address(
    tb: Testbed, node: str, family: int, address: str, bind: str | None = None
) -> None:
    """Make `tb.address(node, family)` answer `address` (what peers connect to), and
    `tb.bind_address(node, family)` answer `bind` (what `node` listens on) when they differ."""
    tb.mechanism_addresses[(node, family)] = address
    if bind is not None:
        tb.bind_addresses[(node, family)] = bind
