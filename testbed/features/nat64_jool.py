"""NAT64 (RFC 6146) with Jool, the in-kernel stateful translator, on a router."""

from __future__ import annotations

from testbed.actions import Check, Command, LoadModule, Succeeds
from testbed.api import Action
from testbed.daemons.jool import JoolConfig
from testbed.features._nat64 import NAT64_OPTIONS, Nat64
from testbed.features.base import Option, Options, Program


class Nat64Jool(Nat64):
    """A Jool instance (netfilter mode) in the router's namespace: pool6 = prefix, pool4."""

    kind = "nat64-jool"
    summary = "stateful NAT64 with Jool (kernel module) on a router"
    options = (*NAT64_OPTIONS, Option("instance", "the Jool instance's name", "testbed"))
    kernel = ("jool",)
    programs = (Program("jool", "jool-tools", ("jool", "--version")),)
    guest_modules = ("jool",)
    virtual_varies = (
        "Jool's one-way delay moves between trials on the virtual clock: a cell's median OWD "
        "1.6 us apart at 50 B and 3.2 us at 1500 B over three runs (each trial's whole "
        "distribution shifted, its spread inside the trial 0.4-0.9 us), where native, 6to4, "
        "ISATAP and TAYGA repeat within 0.03 us (docs/vm.md, 'What repeats on the virtual clock')")

    def configure(self, opts: Options) -> None:
        super().configure(opts)
        self.config = JoolConfig(opts.name("instance"), self.prefix, self.pool4)

    def actions(self) -> list[Action]:
        c = self.config
        # the instance belongs to the namespace, but the kernel frees it only some time after
        # the namespace is gone: removed explicitly, also when the namespace goes anyway
        out: list[Action] = [
            LoadModule("jool", "jool"),
            Command(
                self.node,
                tuple(c.add_argv()),
                undo_argv=tuple(c.remove_argv()),
                always_undo=True,
            ),
        ]
        out += [Command(self.node, tuple(argv)) for argv in c.pool4_argvs()]
        return out

    def ready(self) -> list[Check]:
        return [
            Succeeds(self.node, tuple(self.config.display_argv()), contains=self.config.instance)
        ]
