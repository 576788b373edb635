"""Readiness checks (what a plan waits on, and `wait_listening` for a server a measurement or a
feature's check starts) and what every action shares: running an argv in a namespace, the
`{scratch}` placeholder of the run's scratch folder.

A check is a frozen dataclass with `describe()` and `check(env)`: None when it holds, else what
is still missing; `poll` waits until every check of a list holds.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from testbed import processes, waiting
from testbed.api import ProcessLike, TestbedLike
from testbed.errors import DaemonError
from testbed.waiting import Deadline, process_timeout

SCRATCH = "{scratch}"
POLL_S = 0.05


def scratch(name: str) -> str:
    """The placeholder path of a file in the run's scratch folder ('{scratch}/NAME')."""
    return f"{SCRATCH}/{name}"


# ---------------------------------------------------------------------------- the interpreter side


def expand(text: str, env: TestbedLike) -> str:
    return text.replace(SCRATCH, str(env.scratch_dir())) if SCRATCH in text else text


def run_in(
    env: TestbedLike,
    ns: str,
    argv: Sequence[str],
    *,
    check: bool = True,
    input: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv (placeholders expanded) in namespace `ns`."""
    return processes.run(
        processes.ns_argv(ns, [expand(a, env) for a in argv]),
        check=check,
        input=input,
        timeout=timeout if timeout is not None else process_timeout(60),
        where=f"namespace {ns}",
    )


def argv_text(argv: Sequence[str]) -> str:
    """argv as one line (an argument with a space quoted), for messages and `testbed plan`."""
    return " ".join(a if a and " " not in a else repr(a) for a in argv)


# ---------------------------------------------------------------------------- readiness checks


class Check(Protocol):
    """A readiness condition: None when it holds, else what is still missing."""

    def describe(self) -> str: ...

    def check(self, env: TestbedLike) -> str | None: ...


def _ip_json(env: TestbedLike, node: str, args: Sequence[str]) -> list[dict[str, object]]:
    out = run_in(env, env.netns(node), ["ip", "-j", *args], check=False)
    if out.returncode != 0 or not out.stdout.strip():
        return []
    try:
        data = json.loads(out.stdout)
    except json.JSONDecodeError:
        return []
    return data if isinstance(data, list) else []


@dataclass(frozen=True)
class LinkIsUp:
    node: str
    dev: str

    def describe(self) -> str:
        return f"{self.dev} on {self.node} is up"

    def check(self, env: TestbedLike) -> str | None:
        links = _ip_json(env, self.node, ["link", "show", "dev", self.dev])
        if not links:
            return f"no interface {self.dev} on {self.node}"
        flags = links[0].get("flags", [])
        if not isinstance(flags, list) or "UP" not in flags:
            return f"{self.dev} on {self.node} is not up"
        return None


@dataclass(frozen=True)
class LinkExists:
    node: str
    dev: str

    def describe(self) -> str:
        return f"{self.dev} exists on {self.node}"

    def check(self, env: TestbedLike) -> str | None:
        if not _ip_json(env, self.node, ["link", "show", "dev", self.dev]):
            return f"no interface {self.dev} on {self.node} yet"
        return None


@dataclass(frozen=True)
class HasAddress:
    node: str
    dev: str
    address: str

    def describe(self) -> str:
        return f"{self.node}/{self.dev} has {self.address} (not tentative)"

    def check(self, env: TestbedLike) -> str | None:
        want = ipaddress.ip_address(self.address)
        for link in _ip_json(env, self.node, ["addr", "show", "dev", self.dev]):
            infos = link.get("addr_info", [])
            for a in infos if isinstance(infos, list) else []:
                if ipaddress.ip_address(str(a.get("local", "::"))) == want:
                    if a.get("tentative"):
                        return f"{self.address} on {self.node}/{self.dev} is still tentative"
                    return None
        return f"no address {self.address} on {self.node}/{self.dev}"


@dataclass(frozen=True)
class HasRoute:
    node: str
    family: int
    dst: str
    dev: str

    def describe(self) -> str:
        return f"{self.node} routes {self.dst} into {self.dev}"

    def check(self, env: TestbedLike) -> str | None:
        for r in _ip_json(env, self.node, [f"-{self.family}", "route", "show", self.dst]):
            if r.get("dev") == self.dev:
                return None
        return f"no route {self.dst} dev {self.dev} on {self.node}"


@dataclass(frozen=True)
class Listening:
    """A socket listens on each of `addresses` at `port` (`ss -l`; udp or tcp)."""

    node: str
    proto: str
    addresses: tuple[str, ...]
    port: int

    def describe(self) -> str:
        return f"{self.node} listens on {self.proto} " + ", ".join(
            self._shown(a) for a in self.addresses
        )

    def _shown(self, addr: str) -> str:
        return f"[{addr}]:{self.port}" if ":" in addr else f"{addr}:{self.port}"

    def check(self, env: TestbedLike) -> str | None:
        flag = "-u" if self.proto == "udp" else "-t"
        out = run_in(env, env.netns(self.node), ["ss", "-H", "-l", "-n", flag], check=False)
        for addr in self.addresses:
            if self._shown(addr) not in out.stdout:
                return f"not listening on {self.proto} {self._shown(addr)} yet"
        return None


@dataclass(frozen=True)
class Succeeds:
    """argv exits 0 in `node` (and prints `contains`, when given)."""

    node: str
    argv: tuple[str, ...]
    contains: str = ""

    def describe(self) -> str:
        tail = f" and prints {self.contains!r}" if self.contains else ""
        return f"`{argv_text(self.argv)}` succeeds on {self.node}{tail}"

    def check(self, env: TestbedLike) -> str | None:
        out = run_in(env, env.netns(self.node), self.argv, check=False)
        if out.returncode != 0:
            return f"`{argv_text(self.argv)}` exits {out.returncode} on {self.node}"
        if self.contains and self.contains not in out.stdout:
            return f"`{argv_text(self.argv)}` does not print {self.contains!r} yet"
        return None


@dataclass(frozen=True)
class FileExists:
    """A file exists (a daemon's pid file); `path` may use the {scratch} placeholder."""

    path: str

    def describe(self) -> str:
        return f"{self.path} exists"

    def check(self, env: TestbedLike) -> str | None:
        return None if Path(expand(self.path, env)).exists() else f"no {self.path} yet"


def poll(
    env: TestbedLike,
    checks: Sequence[Check],
    deadline_s: float,
    alive: Callable[[], bool] | None = None,
) -> str | None:
    """Wait until every check holds; the last reason one did not (None: all hold)."""
    import time

    end = Deadline(deadline_s)
    while True:
        reason = next((r for r in (c.check(env) for c in checks) if r is not None), None)
        if reason is None:
            return None
        if (alive is not None and not alive()) or end.expired():
            return reason
        time.sleep(POLL_S)


def wait_listening(
    tb: TestbedLike,
    node: str,
    port: int,
    proto: str,
    proc: ProcessLike | None = None,
    deadline_s: float = 60.0,
    what: str = "server",
    read_proc: bool = True,
) -> None:
    """Wait until something listens on `port` in `node` (or fail saying what did not).

    With `read_proc`, the server's process (`proc`) and a real namespace, the socket tables
    are read from /proc/PID/net of that process: no program is started per poll (`ip netns
    exec` + `ss`, two program starts that cost ~0.2-0.5 s each under the full-kernel tier's
    emulation). Otherwise (a third-party server, a fake testbed, no process) `ss` is polled
    in the node.

    The deadline is a `waiting.Deadline`: host wall time in a virtual-clock guest, where the
    guest clock leaps while the server starts (it reads its program over 9p). A server that
    dies ends the wait at once; the long deadline is for a slow start (a Python probe starting
    under the full-kernel tier's software emulation on a busy host takes > 10 s).
    """
    from testbed import netlink

    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    pid = getattr(proc, "pid", None)
    ns = tb.netns(node) if isinstance(pid, int) and hasattr(tb, "netns") else None
    by_proc = read_proc and ns is not None and netlink.netns_exists(ns)

    def listening() -> bool:
        if by_proc:
            assert isinstance(pid, int) and ns is not None
            return netlink.listening_in_netns_of(pid, ns, port, proto)
        out = tb.run(node, ["ss", flag, "sport", "=", f":{port}"], check=False).stdout
        return bool(out.strip())

    def died() -> bool:
        return proc is not None and not proc.alive()

    if waiting.wait_for(listening, deadline_s, give_up=died):
        return
    raise DaemonError(
        what,
        node,
        f"did not listen on {proto} port {port} within {deadline_s} s",
        "is the program installed and the address configured? see `testbed doctor`",
    )
