"""Jool, the in-kernel stateful NAT64 (netfilter mode): instance argv, start, readiness, stop."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from testbed.daemons.base import Node, poll
from testbed.errors import DaemonError
from testbed.waiting import process_timeout

PROTOCOLS = ("--tcp", "--udp", "--icmp")


@dataclass(frozen=True)
class JoolConfig:
    """A stateful NAT64 instance: its name, the prefix (pool6) and the IPv4 pool (pool4)."""

    instance: str
    pool6: str
    pool4: str

    def add_argv(self) -> list[str]:
        return ["jool", "instance", "add", self.instance, "--netfilter", "--pool6", self.pool6]

    def pool4_argvs(self) -> list[list[str]]:
        # every port, so that a /24 pool behaves like the paper's dynamic pool
        return [
            ["jool", "-i", self.instance, "pool4", "add", proto, self.pool4, "1-65535", "--force"]
            for proto in PROTOCOLS
        ]

    def display_argv(self) -> list[str]:
        return ["jool", "instance", "display", "--no-headers", "--csv"]

    def remove_argv(self) -> list[str]:
        return ["jool", "instance", "remove", self.instance]


def listed(display_csv: str, instance: str) -> bool:
    """Whether `jool instance display --csv` output lists `instance` (in this namespace)."""
    for line in display_csv.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if instance in fields:
            return True
    return False


class Jool:
    """A Jool instance in one node's namespace. Not a process: the kernel module does the work;
    an instance belongs to its namespace and goes away with it."""

    program = "jool"
    deadline_s = 10.0

    def __init__(self, node: str, config: JoolConfig) -> None:
        self.node = node
        self.config = config
        self.started = False

    def _run(self, tb: Node, argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
        out = tb.run(self.node, argv, check=False, timeout=process_timeout(30))
        if out.returncode != 0:
            raise DaemonError(
                "jool",
                self.node,
                f"{what} failed (exit {out.returncode})",
                out.stderr or out.stdout,
            )
        return out

    def ready(self, tb: Node) -> str | None:
        out = tb.run(self.node, self.config.display_argv(), check=False)
        if out.returncode != 0:
            return f"`jool instance display` failed: {(out.stderr or out.stdout).strip()}"
        if not listed(out.stdout, self.config.instance):
            return f"instance {self.config.instance} is not listed"
        return None

    def start(self, tb: Node) -> None:
        self._run(tb, self.config.add_argv(), f"adding instance {self.config.instance}")
        self.started = True
        tb.add_cleanup(lambda: self.stop(tb), f"remove jool instance {self.config.instance}")
        for argv in self.config.pool4_argvs():
            self._run(tb, argv, f"adding pool4 {self.config.pool4} ({argv[5]})")
        reason = poll(lambda: self.ready(tb), deadline_s=self.deadline_s)
        if reason is not None:
            raise DaemonError("jool", self.node, f"not ready after {self.deadline_s:g} s: {reason}")

    def stop(self, tb: Node) -> None:
        if not self.started:
            return
        self.started = False
        out = tb.run(self.node, self.config.remove_argv(), check=False, timeout=process_timeout(30))
        if out.returncode != 0 and self.ready(tb) is None:
            raise DaemonError("jool", self.node, "could not remove its instance", out.stderr)
