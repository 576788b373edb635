"""The one Testbed interface: what actions, runners, stressors and feature checks may ask of it.

`testbed.testbed.Testbed` provides it; tests pass fakes. Everything a consumer needs of a built
topology is a method here (no `tb: Any`, no private names): its nodes' namespaces, addresses
and interfaces, running programs in a node, the undo journal (`defer`, `scope`, `apply`: what
a trial changes is a typed action applied in the trial's scope, undone when the scope ends) and
the two restarts of a router node the reset stressor needs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from testbed import netlink
from testbed.addressing import Interface
from testbed.topology_model import Topology


@dataclass(frozen=True)
class Undo:
    """One journal entry: what it undoes (for messages) and how.

    `within`: the namespace the undone object lives in. When the same unwinding removes that
    namespace (an entry with `removes` = it), the entry is skipped: removing the namespace
    removes the object too.
    """

    what: str
    run: Callable[[], object]
    within: str | None = None
    removes: str | None = None  # the namespace this undo removes


class Action(Protocol):
    """Any plan action (testbed.actions): one line for `testbed plan`, and how it is applied."""

    def describe(self) -> str: ...

    def apply(self, env: TestbedLike) -> None: ...


class ProcessLike(Protocol):
    """A background process started by `TestbedLike.popen` (testbed.processes.ManagedProcess)."""

    @property
    def pid(self) -> int: ...

    @property
    def popen(self) -> subprocess.Popen[Any]: ...

    def alive(self) -> bool: ...

    def stop(self, grace: float = 2.0) -> int | None: ...


class TestbedLike(Protocol):
    """A built topology, as every consumer sees it (docs/architecture.md, "Stable APIs")."""

    @property
    def topology(self) -> Topology: ...

    # -- nodes --------------------------------------------------------------------------------

    def netns(self, node: str) -> str: ...

    def address(self, node: str, family: int, peer: str | None = None) -> str: ...

    def bind_address(self, node: str, family: int) -> str: ...

    def interfaces(self, node: str) -> list[Interface]: ...

    def scratch_dir(self) -> Path: ...

    def qdiscs(self) -> list[dict[str, Any]]: ...

    # -- programs in a node -------------------------------------------------------------------

    def run(
        self,
        node: str,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]: ...

    def popen(
        self, node: str, argv: Sequence[str], *, name: str = "", **popen_kw: Any
    ) -> ProcessLike: ...

    # -- the undo journal ---------------------------------------------------------------------

    def handle(self, ns: str) -> netlink.Netns: ...

    def defer(self, undo: Undo) -> None: ...

    def add_cleanup(self, fn: Callable[[], object], what: str = "cleanup") -> None: ...

    def scope(self) -> AbstractContextManager[TestbedLike]: ...

    def apply(self, action: Action) -> None: ...

    # -- restarting a node (the reset stressor) -----------------------------------------------

    def relink_node(self, node: str) -> None: ...

    def rebuild_node(self, node: str) -> None: ...
