"""Jool, the in-kernel stateful NAT64 (netfilter mode): the argv of an instance and its pools."""

from __future__ import annotations

from dataclasses import dataclass

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
