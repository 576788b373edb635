"""radvd, the router advertisement daemon: config for one interface and prefix, start, stop."""

from __future__ import annotations

from pathlib import Path

from testbed.daemons.base import Daemon, Node


def radvd_config(interface: str, prefix: str, *, unicast_only: bool = False) -> str:
    """Advertise `prefix` (autonomous, on-link) on `interface`. `unicast_only` is for links
    without multicast such as ISATAP: no unsolicited adverts, answers unicast to solicitors."""
    lines = [
        "# written by testbed (testbed/daemons/radvd.py)",
        f"interface {interface}",
        "{",
        "    AdvSendAdvert on;",
    ]
    if unicast_only:
        lines.append("    UnicastOnly on;")
    lines += [
        "    MinRtrAdvInterval 3;",
        "    MaxRtrAdvInterval 10;",
        f"    prefix {prefix}",
        "    {",
        "        AdvOnLink on;",
        "        AdvAutonomous on;",
        "    };",
        "};",
    ]
    return "\n".join(lines) + "\n"


class Radvd(Daemon):
    """`radvd -n` in the foreground, logging to stderr, with its pid file in the scratch folder."""

    program = "radvd"

    def __init__(
        self, node: str, workdir: Path, interface: str, prefix: str, *, unicast_only: bool
    ) -> None:
        super().__init__(node, workdir)
        self.interface = interface
        self.prefix = prefix
        self.unicast_only = unicast_only

    def config_files(self) -> dict[str, str]:
        return {
            "radvd.conf": radvd_config(self.interface, self.prefix, unicast_only=self.unicast_only)
        }

    def argv(self) -> list[str]:
        return [
            "radvd",
            "--nodaemon",
            "--logmethod",
            "stderr",
            "--debug",
            "1",
            "--config",
            str(self.path("radvd.conf")),
            "--pidfile",
            str(self.path("radvd.pid")),
        ]

    def ready(self, tb: Node) -> str | None:
        # radvd writes its pid file once it has read its config and opened its ICMPv6 socket
        if not self.path("radvd.pid").exists():
            return "no pid file yet"
        out = tb.run(self.node, ["ss", "-H", "-w", "-a", "-n", "-p"], check=False)
        if "radvd" not in out.stdout:
            return "no ICMPv6 raw socket of radvd yet"
        return None
