"""A router with a CPU budget: its threaded-NAPI forwarding threads capped by a cgroup's cpu.max.

Kernel forwarding has no process of its own; with threaded NAPI each interface's receive path
(IP receive, netfilter, routing, the transmit onto the next veth) runs in a kernel thread
`napi/IF-ID`. This feature gives the router's interfaces threaded NAPI (GRO on, TSO off on
both ends of each of its links: a veth hands packets to its peer's NAPI only when the sending
device has no TSO) and puts those threads into a cgroup v2 group with `cpu.max`: the router
then forwards at most `share` of one CPU's worth of packets, as a CPU-bound hardware router
does (docs/vm.md, "A router with a CPU budget"). Needs the cgroup v2 cpu controller, which the
full-kernel tier (`testbed vm`) has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed import units
from testbed.actions import Command, CpuBudget
from testbed.api import Action
from testbed.features.base import Feature, Option, Options

PERIOD_MIN_US, PERIOD_MAX_US = 1_000, 1_000_000  # what cpu.max takes
QUOTA_MIN_US = 1_000
SHARE_HELP = ('a fraction of one CPU, 0 < share <= 1 (0.2), a percentage ("20%"), or "none" '
              "(threads in the group, no limit)")


def parse_share(value: Any) -> float | None:
    """The share of one CPU (0 < share <= 1), None for "none"; ValueError otherwise."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("none", "max", "unlimited"):
            return None
        share = units.percent(text) / 100 if text.endswith("%") else float(text)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        share = float(value)
    else:
        raise ValueError(f"not a share: {value!r}")
    if not 0 < share <= 1:
        raise ValueError(f"share {value!r} is not in (0, 1]")
    return share


class CpuBudgetFeature(Feature):
    """`share = 0.2`: the router's forwarding threads get 20 % of one CPU per `period`."""

    kind = "cpu-budget"
    summary = "a router with a CPU budget: its threaded-NAPI forwarding capped by cgroup cpu.max"
    node_role = "router"
    options = (
        Option("share", SHARE_HELP),
        Option("period", "the cgroup's cpu.max period, 1ms-1s", "100ms"),
    )
    kernel = ("threaded-napi", "cgroup2-cpu")

    @classmethod
    def varies(cls, table: Mapping[str, Any]) -> str:
        """A share below one CPU binds, and where the kernel's bandwidth timer cuts the threads
        off moves between runs even on the virtual clock; "none" (or a whole CPU) does not."""
        try:
            share = parse_share(table.get("share", "none"))
        except ValueError:
            return ""  # configure() reports it, with the key
        if share is None or share >= 1:
            return ""
        return f"a CPU budget of {table.get('share')} (its numbers move between runs)"

    def configure(self, opts: Options) -> None:
        raw = opts.raw("share")
        try:
            self.share = parse_share(raw)
        except (ValueError, units.UnitError) as exc:
            raise opts.error("share", str(exc), SHARE_HELP) from None
        try:
            period_s = units.duration(opts.raw("period"), zero=False)
        except units.UnitError as exc:
            raise opts.error("period", exc.what, exc.allowed) from None
        self.period_us = round(period_s * 1e6)
        if not PERIOD_MIN_US <= self.period_us <= PERIOD_MAX_US:
            raise opts.error("period", f"{opts.raw('period')!r} is out of range", "1ms to 1s")
        self.quota_us = None if self.share is None else round(self.share * self.period_us)
        if self.quota_us is not None and self.quota_us < QUOTA_MIN_US:
            raise opts.error("share", f"{raw!r} of {self.period_us} µs is below cpu.max's "
                             f"{QUOTA_MIN_US} µs quota", "a larger share or a longer period")
        self.links = [(i.name, i.peer_node, i.peer_name) for i in opts.addresses.of(self.node)]
        if not self.links:
            raise opts.error("node", f"{self.node} has no links", "a router with links")

    def actions(self) -> list[Action]:
        out: list[Action] = []
        for ifname, peer, peer_if in self.links:
            out.append(Command(self.node, ("ethtool", "-K", ifname, "tso", "off", "gro", "on"),
                               ("ethtool", "-K", ifname, "gro", "off", "tso", "on")))
            out.append(Command(peer, ("ethtool", "-K", peer_if, "tso", "off"),
                               ("ethtool", "-K", peer_if, "tso", "on")))
        out.append(CpuBudget(self.node, tuple(i for i, _p, _q in self.links), self.quota_us,
                             self.period_us))
        return out
