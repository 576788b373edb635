"""The typed actions a measurement applies for one trial, in a scope of the Testbed's journal
(`tb.scope()`): a link's MTU, the route cache, a pinned neighbour entry; each undone when the
scope ends. Same contract as `testbed.actions` (describe, apply, defer the undo)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from testbed.api import TestbedLike, Undo


@dataclass(frozen=True)
class SetMtu:
    """The MTU of `ifname` on `node`; the undo sets the MTU it had before."""

    node: str
    ifname: str
    mtu: int

    def describe(self) -> str:
        return f"{self.node}: mtu {self.mtu} on {self.ifname}  [undo: the MTU before]"

    def apply(self, env: TestbedLike) -> None:
        shown = env.run(self.node, ["ip", "-j", "link", "show", "dev", self.ifname]).stdout
        old = str(int(json.loads(shown)[0]["mtu"]))
        node, ifname = self.node, self.ifname
        env.defer(
            Undo(
                f"{node}: mtu {old} on {ifname}",
                lambda: env.run(node, ["ip", "link", "set", "dev", ifname, "mtu", old],
                                check=False),
                within=env.netns(node),
            )
        )
        env.run(node, ["ip", "link", "set", "dev", ifname, "mtu", str(self.mtu)])


@dataclass(frozen=True)
class PinNeighbour:
    """A permanent neighbour entry `addr` -> `lladdr` on `ifname` in `ns`; the undo removes it
    (the kernel learns the neighbour again when it next needs it)."""

    ns: str
    ifname: str
    addr: str
    lladdr: str

    def describe(self) -> str:
        return (f"{self.ns}: neighbour {self.addr} lladdr {self.lladdr} on {self.ifname} "
                f"permanent  [undo: remove it]")

    def apply(self, env: TestbedLike) -> None:
        ns, ifname, addr = self.ns, self.ifname, self.addr
        env.defer(Undo(f"{ns}: remove neighbour {addr} on {ifname}",
                       lambda: env.handle(ns).delete_neighbour(ifname, addr), within=ns))
        env.handle(ns).set_neighbour(ifname, addr, self.lladdr)


@dataclass(frozen=True)
class FlushRouteCache:
    """Flush `node`'s route cache (the path MTUs it learnt) of the IP versions in `now`, and
    those in `after` when the scope ends (exit status ignored: a version may be off)."""

    node: str
    now: tuple[int, ...] = ()
    after: tuple[int, ...] = ()

    def describe(self) -> str:
        def versions(vs: tuple[int, ...]) -> str:
            return "/".join(f"IPv{v}" for v in vs) or "nothing"

        return (f"{self.node}: flush the route cache ({versions(self.now)})  [undo: flush "
                f"{versions(self.after)}]")

    def apply(self, env: TestbedLike) -> None:
        node = self.node

        def flush(versions: tuple[int, ...]) -> None:
            for v in versions:
                env.run(node, ["ip", f"-{v}", "route", "flush", "cache"], check=False)

        if self.after:
            after = self.after
            env.defer(Undo(f"{node}: flush the route cache", lambda: flush(after),
                           within=env.netns(node)))
        flush(self.now)
