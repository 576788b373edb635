"""Transition mechanisms (tunnels, translators) set up on a built Testbed from [mechanism]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from testbed.errors import SpecError

if TYPE_CHECKING:
    from testbed.testbed import Testbed

KINDS: tuple[str, ...] = ()


def apply_mechanism(tb: Testbed) -> None:
    """Start what the topology's [mechanism] table asks for; undo is pushed onto `tb`."""
    kind = tb.topology.mechanism_dict.get("kind")
    raise SpecError(
        tb.topology.source,
        "mechanism.kind",
        f"unknown mechanism {kind!r}",
        ", ".join(KINDS) or "none yet",
    )
