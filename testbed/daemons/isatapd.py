"""isatapd, the ISATAP host daemon: creates the ISATAP interface, solicits the router."""

from __future__ import annotations

from pathlib import Path

from testbed.daemons.base import Daemon, Node


class Isatapd(Daemon):
    """`isatapd` (foreground unless --daemon) with one potential router; ready once the host
    has an autoconfigured global address on its ISATAP interface and a default route there.
    It solicits at start and then at 80% of the router lifetime (it refuses intervals under
    121 s); without a reachable router it keeps running and logs why, so readiness times out."""

    program = "isatapd"
    deadline_s = 20.0

    def __init__(
        self,
        node: str,
        workdir: Path,
        *,
        router: str,
        device: str = "is0",
        expect_address: str | None = None,
    ) -> None:
        super().__init__(node, workdir)
        self.router = router
        self.device = device
        self.expect_address = expect_address

    def argv(self) -> list[str]:
        return [
            "isatapd",
            "--name",
            self.device,
            "--router",
            self.router,
            "--check-dns",
            "0",
            "--user",
            "root",
            "--verbose",
            "--pid",
            str(self.path("isatapd.pid")),
        ]

    def ready(self, tb: Node) -> str | None:
        link = tb.run(self.node, ["ip", "link", "show", "dev", self.device], check=False)
        if link.returncode != 0:
            return f"no interface {self.device} yet"
        addrs = tb.run(
            self.node,
            ["ip", "-6", "-o", "addr", "show", "dev", self.device, "scope", "global"],
            check=False,
        ).stdout
        if not addrs.strip():
            return f"no global address autoconfigured on {self.device} yet (no router advert)"
        if self.expect_address is not None and f" {self.expect_address}/" not in addrs:
            return f"{self.device} has {addrs.split()[3]}, not the expected {self.expect_address}"
        if "tentative" in addrs:
            return "the address is still tentative (DAD)"
        route = tb.run(self.node, ["ip", "-6", "route", "show", "default"], check=False).stdout
        if f"dev {self.device}" not in route:
            return f"no default route via {self.device} yet"
        return None
