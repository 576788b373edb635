"""Node features ([[features]] tables): the registry, discovered from this package's modules,
and reading a topology's feature tables into configured Feature objects."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from testbed.addressing import AddressPlan
from testbed.errors import SpecError
from testbed.features.base import REGISTRY, Feature, NodeAddress, Option, Options, Program
from testbed.topology_model import Topology

__all__ = [
    "Feature",
    "NodeAddress",
    "Option",
    "Options",
    "Program",
    "configure",
    "kinds",
    "registry",
    "virtual_varies",
]

GENERIC_OPTIONS = (
    Option("node", "the node it is set up on"),
    Option("enabled", "whether it is built (true/false)", True),
)
GENERIC_KEYS = ("kind", *(o.name for o in GENERIC_OPTIONS))
_loaded = False


def registry() -> dict[str, type[Feature]]:
    """kind -> Feature class, every module of this package imported (and any feature class
    defined elsewhere, e.g. in a test, since defining one registers it)."""
    global _loaded
    if not _loaded:
        for mod in pkgutil.iter_modules(__path__):
            if mod.name != "base" and not mod.name.startswith("_"):
                importlib.import_module(f"{__name__}.{mod.name}")
        _loaded = True
    return dict(REGISTRY)


def virtual_varies(tables: Iterable[Any]) -> str:
    """Why a topology with these [[features]] tables (or a stored topology's "features") gives
    numbers that move between runs on the virtual clock, or "": the first enabled feature that
    says so (`Feature.varies`). The one test of it, for the planner (experiment_spec.for_clock)
    and the report (report.claims)."""
    reg = registry()
    for table in tables:
        if not isinstance(table, Mapping):
            continue
        cls = reg.get(str(table.get("kind")))
        on = str(table.get("enabled", True)).lower() != "false"
        if cls is not None and on and (why := cls.varies(table)):
            return why
    return ""


def kinds() -> list[str]:
    return sorted(registry())


def classes() -> list[type[Feature]]:
    reg = registry()
    return [reg[k] for k in sorted(reg)]


def configure(topo: Topology, addresses: AddressPlan) -> list[Feature]:
    """The topology's enabled [[features]], validated (pure: raises SpecError, creates nothing)."""
    if not topo.features_list:
        return []  # nothing to look up: the feature modules are not imported (a guest's start)
    reg = registry()
    out: list[Feature] = []
    for i, table in enumerate(topo.features_list):
        key = f"features[{i}]"
        kind = table.get("kind")
        if kind is None:
            raise SpecError(topo.source, f"{key}.kind", "missing", ", ".join(kinds()))
        cls = reg.get(kind)
        if cls is None:
            raise SpecError(
                topo.source, f"{key}.kind", f"unknown feature {kind!r}", ", ".join(kinds())
            )
        allowed = [*GENERIC_KEYS, *(o.name for o in cls.options)]
        if cls.node_role is None:
            allowed.remove("node")
        for k in table:
            if k not in allowed:
                raise SpecError(
                    topo.source,
                    f"{key}.{k}",
                    f"unknown option for kind {kind!r}",
                    ", ".join(allowed),
                )
        opts = Options(topo, addresses, i, table, (*GENERIC_OPTIONS, *cls.options), None)
        enabled = opts.boolean("enabled")
        if cls.node_role is not None:
            if "node" not in table:
                raise SpecError(topo.source, f"{key}.node", "missing", ", ".join(topo.node_names))
            opts.node = opts.node_name("node", role=cls.node_role or None)
        if enabled:
            out.append(cls(opts))
    _check_clashes(topo, out)
    return out


def _check_clashes(topo: Topology, features: Iterable[Feature]) -> None:
    """Two features may not give one node two different addresses of one family."""
    seen: dict[tuple[str, int], tuple[str, Feature]] = {}
    for f in features:
        for a in f.addresses():
            prior = seen.get((a.node, a.family))
            if prior is not None and prior[0] != a.address:
                raise SpecError(
                    topo.source,
                    f"features[{f.index}]",
                    f"{f.label} gives {a.node} the IPv{a.family} address {a.address}, but "
                    f"{prior[1].label} (features[{prior[1].index}]) gives it {prior[0]}",
                    "features that give each node at most one extra address per family",
                )
            seen[(a.node, a.family)] = (a.address, f)


def kernel_needs(tables: Iterable[dict[str, object]]) -> tuple[str, ...]:
    """The kernel features (testbed.capabilities names) that feature tables' kinds need,
    read from the declarations alone (no validation: for choosing a tier before building)."""
    tables = list(tables)
    if not tables:
        return ()
    reg = registry()
    out: list[str] = []
    for t in tables:
        cls = reg.get(str(t.get("kind")))
        if cls is not None:
            out += [k for k in cls.kernel if k not in out]
    return tuple(out)


def kernel_needs_of_file(path: str | Path,
                         switches: Mapping[str, bool] | None = None) -> tuple[str, ...]:
    """kernel_needs of the [[features]] tables of a topology file: all of them, or with
    `switches` (boolean parameters such as a router profile's), those whose `enabled` is on:
    `enabled = "${vpn}"` counts only when switches["vpn"] (else the file's default) is true."""
    from testbed.tomlfile import read_toml

    raw = read_toml(Path(path), "topology", "a path such as topologies/chain.toml")
    tables = raw.get("features", [])
    if not isinstance(tables, list):
        return ()
    if switches is not None:
        from testbed.topology_values import substitute  # the one ${param} resolver

        defaults = raw.get("params", {})
        values = {**(defaults if isinstance(defaults, dict) else {}), **switches}
        tables = [t for i, t in enumerate(tables) if isinstance(t, dict) and bool(
            substitute(t.get("enabled", True), values, str(path), f"features[{i}].enabled"))]
    return kernel_needs(t for t in tables if isinstance(t, dict))


def guest_modules() -> tuple[str, ...]:
    """The kernel modules every feature wants the full-kernel tier's guest to load."""
    out: list[str] = []
    for cls in classes():
        out += [m for m in cls.guest_modules if m not in out]
    return tuple(out)


def programs() -> list[Program]:
    """Every program some feature runs (one entry per package)."""
    out: dict[str, Program] = {}
    for cls in classes():
        for p in cls.programs:
            out.setdefault(p.package, p)
    return list(out.values())


def reference_markdown() -> str:
    """The shipped features as a Markdown table, from their declarations (docs/features.md
    carries it between markers; a test keeps the two equal)."""
    rows = [
        "| kind | node | options (default) | needs | guest modules |",
        "|---|---|---|---|---|",
    ]
    for cls in classes():
        node = {None: "—", "": "any"}.get(cls.node_role, cls.node_role or "any")
        opts = ", ".join(
            f"`{o.name}`" + ("" if o.required else f" (`{o.default}`)" if o.default else "")
            for o in cls.options
        )
        rows.append(
            f"| `{cls.kind}` | {node} | {opts or '—'} | {', '.join(cls.needs()) or '—'} | "
            f"{', '.join(cls.guest_modules) or '—'} |"
        )
    return "\n".join(rows) + "\n"
