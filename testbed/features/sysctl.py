"""Generic: set sysctls in a node's namespace (restored on undo), e.g. a router's TTL or ECN."""

from __future__ import annotations

import re

from testbed.actions import Check, Succeeds, Sysctl
from testbed.api import Action
from testbed.features.base import Feature, Option, Options

_KEY = re.compile(r"^(net|kernel)\.[A-Za-z0-9_.\-/]+$")


class SysctlFeature(Feature):
    """`set = ["net.ipv4.ip_default_ttl=32", ...]`: namespaced sysctls of one node."""

    kind = "sysctl"
    summary = "set sysctls (net.*) in one node, e.g. ip_default_ttl, tcp_ecn"
    options = (Option("set", 'a list of "key=value", e.g. ["net.ipv4.tcp_ecn=1"]'),)

    def configure(self, opts: Options) -> None:
        raw = opts.raw("set")
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items:
            raise opts.error("set", f"not a list of key=value: {raw!r}", '["net.ipv4.tcp_ecn=1"]')
        values: list[tuple[str, str]] = []
        for item in items:
            key, sep, value = str(item).partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not _KEY.match(key) or not value or any(c.isspace() for c in value):
                raise opts.error(
                    "set",
                    f"bad entry {item!r}",
                    'key=value with a net.* key, e.g. "net.ipv4.tcp_ecn=1"',
                )
            values.append((key, value))
        self.values = tuple(values)

    def actions(self) -> list[Action]:
        return [Sysctl(self.node, self.values)]

    def ready(self) -> list[Check]:
        return [Succeeds(self.node, ("sysctl", "-n", k), contains=v) for k, v in self.values]
