"""Transition mechanisms (tunnels, translators) set up on a built Testbed from [mechanism]."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from testbed.errors import MissingCapability, SpecError
from testbed.topology import Topology

if TYPE_CHECKING:
    from testbed.testbed import Testbed

KINDS: tuple[str, ...] = ("6to4", "isatap", "nat64-tayga", "nat64-jool")


class Mechanism(Protocol):
    """A validated [mechanism] table: what it needs, what it does, and how to set it up."""

    @property
    def kind(self) -> str: ...

    @property
    def features(self) -> tuple[str, ...]: ...

    def describe(self) -> list[str]: ...

    def apply(self, tb: Testbed) -> None: ...


def _parsers() -> dict[str, Callable[[Topology, Mapping[str, Any]], Mechanism]]:
    from testbed.mechanisms import isatap, nat64, sixtofour

    return {
        "6to4": sixtofour.parse,
        "isatap": isatap.parse,
        "nat64-tayga": nat64.parse,
        "nat64-jool": nat64.parse,
    }


def parse_mechanism(topo: Topology) -> Mechanism:
    """Validate the topology's [mechanism] table (pure: no root, creates nothing)."""
    table = topo.mechanism_dict
    kind = table.get("kind")
    if kind is None:
        raise SpecError(topo.source, "mechanism.kind", "missing", ", ".join(KINDS))
    parsers = _parsers()
    if kind not in parsers:
        raise SpecError(
            topo.source, "mechanism.kind", f"unknown mechanism {kind!r}", ", ".join(KINDS)
        )
    return parsers[kind](topo, table)


def check_mechanism(topo: Topology) -> Mechanism:
    """Validate, then make sure this machine has what the mechanism needs (before building)."""
    from testbed import capabilities

    mech = parse_mechanism(topo)
    lacking = capabilities.missing(mech.features)
    if lacking:
        feature = lacking[0]
        cap = capabilities.probe().get(feature)
        fix = None
        if cap is not None and cap.kind == "program":
            fix = cap.fix
        raise MissingCapability(feature, f"the {mech.kind} mechanism of {topo.source}", fix)
    return mech


def apply_mechanism(tb: Testbed) -> None:
    """Start what the topology's [mechanism] table asks for; undo is pushed onto `tb`."""
    check_mechanism(tb.topology).apply(tb)


def describe_mechanism(topo: Topology) -> list[str]:
    """What the mechanism will set up, as lines (for `testbed plan`)."""
    return parse_mechanism(topo).describe() if topo.mechanism else []
