"""The topology model: frozen dataclasses for nodes, link shapes, links, routes and the topology,
with the limits a topology file is validated against (testbed.topology builds them from TOML)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from testbed import units

RATE_PRESETS = units.RATE_PRESETS
ROLES = ("host", "router")
STACKS = ("ipv4", "ipv6", "dual")
MTU_MIN_V4 = 68
MTU_MIN_V6 = 1280
MTU_MAX = 65535
NODE_NAME = re.compile(r"^[a-z][a-z0-9]{0,14}$")
# Sane ranges: a rate outside them rounds to 0 bit/s or overflows the kernel's tbf/netem
# fields; a delay beyond a minute is not a network path this testbed models.
RATE_MIN_BPS = units.RATE_MIN_BPS
RATE_MAX_BPS = units.RATE_MAX_BPS
DURATION_MAX_S = units.DURATION_MAX_S
DURATION_MIN_S = units.DURATION_MIN_S
MAX_CHAIN_ROUTERS = 250  # nodes send with TTL/hop limit 255 (plan.MAX_HOPS): 250 are crossable

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




# ---------------------------------------------------------------------------- loading
