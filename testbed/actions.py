"""The typed plan actions: what one build step does (apply), says (describe) and undoes (defer).

Every action is a frozen dataclass with `describe()` (one line for `testbed plan`) and
`apply(env)`. An action that leaves something behind registers its undo with `env.defer(...)`
(before creating it when a half-made object must still be removed, like the kernel
selftests' `defer`); the Testbed keeps those undos in a journal with nested scopes and runs
them in reverse. Core actions name namespaces (the plan compiler resolves nodes); feature
actions name nodes, resolved with `env.netns(node)` when applied.

`{scratch}` in a feature action's argv or file text stands for the run's scratch folder
(see `SCRATCH`), so a plan is printable before the run's folder exists. The readiness checks
actions wait on are in `testbed.checks` (importable from here too).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from testbed import kthreads, netlink, processes
from testbed.api import TestbedLike, Undo
from testbed.checks import SCRATCH as SCRATCH
from testbed.checks import Check as Check
from testbed.checks import FileExists as FileExists
from testbed.checks import HasAddress as HasAddress
from testbed.checks import HasRoute as HasRoute
from testbed.checks import LinkExists as LinkExists
from testbed.checks import LinkIsUp as LinkIsUp
from testbed.checks import Listening as Listening
from testbed.checks import Succeeds as Succeeds
from testbed.checks import argv_text, expand, poll, run_in
from testbed.checks import scratch as scratch
from testbed.errors import DaemonError, KernelError, MissingCapability
from testbed.shaping import Qdisc
from testbed.waiting import Deadline

if TYPE_CHECKING:
    from testbed.processes import ManagedProcess

NETNS_ETC = Path("/etc/netns")

# ---------------------------------------------------------------------------- core actions


@dataclass(frozen=True)
class CreateNamespace:
    node: str
    ns: str

    def describe(self) -> str:
        return f"create namespace {self.ns} for {self.node}"

    def apply(self, env: TestbedLike) -> None:
        # deferred first: a namespace half-created when the process is stopped (or when
        # creation fails midway) is still removed
        env.defer(
            Undo(f"remove namespace {self.ns}", lambda: remove_namespace(self.ns), removes=self.ns)
        )
        netlink.create_netns(self.ns)


@dataclass(frozen=True)
class SetSysctls:
    """Sysctls in a namespace. As a core action, a fresh namespace's: no undo, they go with the
    namespace. With `restore` (the feature action `Sysctl`) the values are read first and the
    undo writes them back. `name` is what describe() and the undo's message call the place
    (default: the namespace)."""

    ns: str
    values: tuple[tuple[str, str], ...]
    restore: bool = False
    name: str = ""

    def describe(self) -> str:
        return f"{self.name or self.ns}: sysctl " + " ".join(f"{k}={v}" for k, v in self.values)

    def apply(self, env: TestbedLike) -> None:
        ns = self.ns
        if self.restore:
            before = {k: netlink.read_sysctl(ns, k) for k, _v in self.values}
            env.defer(
                Undo(
                    f"restore {', '.join(before)} on {self.name or ns}",
                    lambda: netlink.set_sysctls(ns, before) if netlink.netns_exists(ns) else None,
                    within=ns,
                )
            )
        netlink.set_sysctls(ns, dict(self.values))


@dataclass(frozen=True)
class AddVeth:
    ns_a: str
    if_a: str
    ns_b: str
    if_b: str
    mtu: int
    index_a: int = 0
    index_b: int = 0

    def describe(self) -> str:
        return (
            f"veth {self.ns_a}/{self.if_a} (ifindex {self.index_a}) <-> "
            f"{self.ns_b}/{self.if_b} (ifindex {self.index_b}) mtu {self.mtu}"
        )

    def apply(self, env: TestbedLike) -> None:
        env.defer(
            Undo(
                f"remove {self.ns_a}/{self.if_a}",
                lambda: _delete_link(env, self.ns_a, self.if_a),
                within=self.ns_a,
            )
        )
        env.handle(self.ns_a).add_veth(
            self.if_a, self.ns_b, self.if_b, self.mtu, self.index_a, self.index_b
        )


def _delete_link(env: TestbedLike, ns: str, ifname: str) -> None:
    if netlink.netns_exists(ns):
        env.handle(ns).delete_link(ifname)


@dataclass(frozen=True)
class AddAddress:
    ns: str
    ifname: str
    cidr: str

    def describe(self) -> str:
        return f"{self.ns}: address {self.cidr} on {self.ifname}"

    def apply(self, env: TestbedLike) -> None:
        env.handle(self.ns).add_address(self.ifname, self.cidr)


@dataclass(frozen=True)
class LinkUp:
    ns: str
    ifname: str

    def describe(self) -> str:
        return f"{self.ns}: {self.ifname} up"

    def apply(self, env: TestbedLike) -> None:
        env.handle(self.ns).set_up(self.ifname)


@dataclass(frozen=True)
class AddRoute:
    ns: str
    dst: str
    via: str
    dev: str

    def describe(self) -> str:
        return f"{self.ns}: route {self.dst} via {self.via} dev {self.dev}"

    def apply(self, env: TestbedLike) -> None:
        env.handle(self.ns).add_route(self.dst, self.via, self.dev)


@dataclass(frozen=True)
class OffloadOff:
    ns: str
    ifname: str

    def describe(self) -> str:
        return f"{self.ns}: segmentation offloads off on {self.ifname} (netem counts per packet)"

    def apply(self, env: TestbedLike) -> None:
        run_in(
            env, self.ns, ["ethtool", "-K", self.ifname, "tso", "off", "gso", "off", "gro", "off"]
        )


@dataclass(frozen=True)
class SetQdisc:
    ns: str
    ifname: str
    qdisc: Qdisc

    def describe(self) -> str:
        return f"{self.ns}: tc {' '.join(self.qdisc.argv(self.ifname))}"

    def apply(self, env: TestbedLike) -> None:
        processes.run(
            netlink.tc_argv(self.ns, self.qdisc.argv(self.ifname)), where=f"namespace {self.ns}"
        )
        env.defer(
            Undo(
                f"remove the qdisc of {self.ns}/{self.ifname}",
                lambda: _del_root_qdisc(self.ns, self.ifname),
                within=self.ns,
            )
        )


def _del_root_qdisc(ns: str, ifname: str) -> None:
    if netlink.netns_exists(ns):
        processes.run(netlink.tc_argv(ns, ["qdisc", "del", "dev", ifname, "root"]), check=False)


@dataclass(frozen=True)
class WaitInterfaces:
    """Wait until every listed interface is up and (where IPv6 is on) has its link-local."""

    interfaces: tuple[tuple[str, bool, tuple[str, ...]], ...]  # (ns, ipv6 on, ifnames)
    deadline_s: float = 10.0

    def describe(self) -> str:
        n = sum(len(names) for _ns, _v6, names in self.interfaces)
        return f"wait until {n} interfaces are up (carrier, IPv6 link-local)"

    def apply(self, env: TestbedLike) -> None:
        import time

        from testbed import signals

        pending = {ns: (v6, set(names)) for ns, v6, names in self.interfaces if names}
        deadline = Deadline(self.deadline_s)
        while pending:
            waiting: dict[str, list[str]] = {}
            for ns, (v6, names) in pending.items():
                left = env.handle(ns).not_ready(v6, names)
                if left:
                    waiting[ns] = left
            pending = {ns: pending[ns] for ns in waiting}
            if not pending:
                return
            signals.check()
            if deadline.expired():
                where = "; ".join(f"{ns}: {', '.join(v)}" for ns, v in waiting.items())
                raise KernelError("bring up interfaces (carrier and IPv6 link-local)", where, 110)
            time.sleep(0.02)


# ---------------------------------------------------------------------------- feature actions


@dataclass(frozen=True)
class Sysctl:
    """Set sysctls in a node; the undo restores the values read before: SetSysctls with
    `restore`, in the node's namespace (resolved when applied), named by the node."""

    node: str
    values: tuple[tuple[str, str], ...]

    def at(self, ns: str) -> SetSysctls:
        return SetSysctls(ns, self.values, restore=True, name=self.node)

    def describe(self) -> str:
        return self.at("").describe()  # names the node: the namespace is not needed

    def apply(self, env: TestbedLike) -> None:
        self.at(env.netns(self.node)).apply(env)


@dataclass(frozen=True)
class Command:
    """Run argv in a node (exit 0 expected); `undo_argv`, if any, runs on undo (its exit
    status is ignored: the object may be gone already)."""

    node: str
    argv: tuple[str, ...]
    undo_argv: tuple[str, ...] = ()
    unless: tuple[Check, ...] = ()  # skipped (no undo either) when these already hold
    # run the undo even when the node's namespace is removed in the same teardown: for state
    # the kernel frees lazily after the namespace is gone (e.g. a Jool instance)
    always_undo: bool = False

    def describe(self) -> str:
        undo = f"  [undo: {argv_text(self.undo_argv)}]" if self.undo_argv else ""
        unless = f"  (unless {', '.join(c.describe() for c in self.unless)})" if self.unless else ""
        return f"{self.node}: {argv_text(self.argv)}{undo}{unless}"

    def apply(self, env: TestbedLike) -> None:
        ns = env.netns(self.node)
        if self.unless and all(c.check(env) is None for c in self.unless):
            return
        if self.undo_argv:
            # deferred first: a command that failed halfway may have created its object
            undo = self.undo_argv
            env.defer(
                Undo(
                    f"{self.node}: {argv_text(undo)}",
                    lambda: (
                        run_in(env, ns, undo, check=False) if netlink.netns_exists(ns) else None
                    ),
                    within=None if self.always_undo else ns,
                )
            )
        run_in(env, ns, self.argv)


@dataclass(frozen=True)
class Tc(Command):
    """A tc command (qdisc, class, filter) in a node; `tc` is prepended to argv and undo."""

    def describe(self) -> str:
        undo = f"  [undo: tc {argv_text(self.undo_argv)}]" if self.undo_argv else ""
        return f"{self.node}: tc {argv_text(self.argv)}{undo}"

    def apply(self, env: TestbedLike) -> None:
        Command(
            self.node,
            ("tc", *self.argv),
            ("tc", *self.undo_argv) if self.undo_argv else (),
        ).apply(env)


@dataclass(frozen=True)
class WriteFile:
    """A file in the run's scratch folder (`name` may contain '/'); argv and other files
    reference it as `scratch(name)`. Removed on undo (and with the run's folder)."""

    name: str
    text: str
    mode: int = 0o644

    def describe(self) -> str:
        lines = self.text.count("\n")
        return f"write {scratch(self.name)} ({lines} lines)"

    def apply(self, env: TestbedLike) -> None:
        path = env.scratch_dir() / self.name
        path.parent.mkdir(parents=True, exist_ok=True)
        env.defer(Undo(f"remove {path}", lambda: path.unlink(missing_ok=True)))
        path.write_text(expand(self.text, env))
        path.chmod(self.mode)


@dataclass(frozen=True)
class EtcFile:
    """/etc/netns/NS/NAME: `ip netns exec` binds it over /etc/NAME for the node's programs
    (e.g. resolv.conf). Removed on undo, and with the namespace."""

    node: str
    name: str
    text: str

    def describe(self) -> str:
        body = "; ".join(
            line.strip() for line in self.text.splitlines() if line.strip() and line[0] != "#"
        )
        return f"{self.node}: /etc/{self.name} (as /etc/netns/NS/{self.name}): {body}"

    def apply(self, env: TestbedLike) -> None:
        folder = NETNS_ETC / env.netns(self.node)
        path = folder / self.name
        folder.mkdir(parents=True, exist_ok=True)
        env.defer(Undo(f"remove {path}", lambda: _remove_etc(path)))
        path.write_text(expand(self.text, env))


def _remove_etc(path: Path) -> None:
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # other files still there, or gone already
        path.parent.rmdir()


@dataclass(frozen=True)
class Daemon:
    """A long-running program in a node, in the foreground, its output in
    {scratch}/NAME-NODE.log; ready when every check in `ready` holds; stopped on undo."""

    node: str
    argv: tuple[str, ...]
    name: str
    ready: tuple[Check, ...] = ()
    deadline_s: float = 10.0
    after_stop: tuple[str, ...] = ()  # argv run in the node once it is stopped (exit ignored)

    def describe(self) -> str:
        until = "; ready when " + ", ".join(c.describe() for c in self.ready) if self.ready else ""
        then = f", then {argv_text(self.after_stop)}" if self.after_stop else ""
        return (
            f"{self.node}: start {self.name}: {argv_text(self.argv)}{until}  [undo: stop it{then}]"
        )

    def apply(self, env: TestbedLike) -> None:
        log_path = env.scratch_dir() / f"{self.name}-{self.node}.log"
        with open(log_path, "w") as log:
            proc: ManagedProcess = processes.ManagedProcess(
                processes.ns_argv(env.netns(self.node), [expand(a, env) for a in self.argv]),
                name=self.name,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        ns = env.netns(self.node)
        if self.after_stop:
            after = self.after_stop
            env.defer(
                Undo(
                    f"{self.node}: {argv_text(after)}",
                    lambda: (
                        run_in(env, ns, after, check=False) if netlink.netns_exists(ns) else None
                    ),
                    within=ns,
                )
            )
        env.defer(Undo(f"stop {self.name} on {self.node}", proc.stop))
        reason = poll(env, self.ready, self.deadline_s, alive=proc.alive)
        if reason is None:
            return
        output = log_path.read_text(errors="replace") if log_path.exists() else ""
        if not proc.alive():
            raise DaemonError(
                self.name,
                self.node,
                f"exited with code {proc.popen.wait()} before it was ready ({reason})",
                output,
            )
        raise DaemonError(
            self.name, self.node, f"not ready after {self.deadline_s:g} s: {reason}", output
        )


@dataclass(frozen=True)
class NftRuleset:
    """Load an nftables ruleset (`nft -f -`) in a node; undo deletes `table`
    ("FAMILY NAME", e.g. "inet tb_filter"), which the ruleset must create."""

    node: str
    ruleset: str
    table: str

    def describe(self) -> str:
        rules = sum(1 for line in self.ruleset.splitlines() if line.strip())
        return f"{self.node}: nft -f - (table {self.table}, {rules} lines)  [undo: delete it]"

    def apply(self, env: TestbedLike) -> None:
        ns = env.netns(self.node)
        family, name = self.table.split()
        env.defer(
            Undo(
                f"{self.node}: nft delete table {self.table}",
                lambda: (
                    run_in(env, ns, ["nft", "delete", "table", family, name], check=False)
                    if netlink.netns_exists(ns)
                    else None
                ),
                within=ns,
            )
        )
        run_in(env, ns, ["nft", "-f", "-"], input=expand(self.ruleset, env))


@dataclass(frozen=True)
class LoadModule:
    """Load a kernel module on the machine (host-wide: the one change outside namespaces);
    never unloaded (other runs may use it)."""

    module: str
    capability: str

    def describe(self) -> str:
        return f"modprobe {self.module} (if not loaded)"

    def apply(self, env: TestbedLike) -> None:
        if Path(f"/sys/module/{self.module}").exists():
            return
        if processes.run(["modprobe", self.module], check=False).returncode != 0:
            raise MissingCapability(self.capability, f"loading module {self.module}", None)


@dataclass(frozen=True)
class CpuBudget:
    """A node's CPU budget: threaded NAPI on `ifnames`, their kernel threads (all of its
    forwarding) in cgroup v2 group `testbed-<run>-<node>` with cpu.max `quota_us` per
    `period_us` (None: no limit). Undo: threads back to the root group, the group removed."""

    node: str
    ifnames: tuple[str, ...]
    quota_us: int | None
    period_us: int = 100_000

    def describe(self) -> str:
        share = ("no limit" if self.quota_us is None
                 else f"{100 * self.quota_us / self.period_us:g} % of one CPU")
        return (f"{self.node}: threaded NAPI on {', '.join(self.ifnames)}; their kernel threads "
                f"into cgroup {kthreads.budget_group(f'tb-RUN-{self.node}')}, cpu.max "
                f"\"{kthreads.cpu_max(self.quota_us, self.period_us)}\" ({share})  [undo: "
                "threads back to the root group, remove the group]")

    def apply(self, env: TestbedLike) -> None:
        ns = env.netns(self.node)
        ok, why = kthreads.has_cpu_controller()
        if not ok:
            raise MissingCapability("cgroup2-cpu", f"the CPU budget of {self.node} ({why})",
                                    kthreads.NEEDS_CPU)
        group = kthreads.CpuGroup(kthreads.ensure_cpu_root(), kthreads.budget_group(ns))
        env.defer(Undo(f"remove cgroup {group.name}", group.remove))  # outlives the namespace
        group.create(self.quota_us, self.period_us)
        for ifname in self.ifnames:  # threaded NAPI goes with the namespace: no undo
            before = kthreads.napi_threads()
            run_in(env, ns, kthreads.write_argv(kthreads.threaded_path(ifname), "1"))
            group.add(kthreads.new_napi_thread(before, kthreads.napi_threads(), ifname, ns))


@dataclass(frozen=True)
class WaitUntil:
    """A feature's readiness check: wait until every check holds."""

    what: str
    checks: tuple[Check, ...]
    deadline_s: float = 10.0

    def describe(self) -> str:
        return f"wait until {self.what} is ready: " + "; ".join(c.describe() for c in self.checks)

    def apply(self, env: TestbedLike) -> None:
        reason = poll(env, self.checks, self.deadline_s)
        if reason is not None:
            raise KernelError("set up", self.what, 0, reason)


# ---------------------------------------------------------------------------- trial actions
# What a stressor changes for one trial (testbed.measure), applied in the trial's scope
# (`tb.scope()`, `tb.apply(...)`): undone when the scope ends. A trial's sysctls are `Sysctl`.


def remove_namespace(ns: str) -> None:
    """Kill what runs in `ns`, remove it, and confirm it is gone."""
    processes.kill_netns_processes(ns)
    netlink.remove_netns(ns)
    # per-namespace /etc files (`ip netns exec` binds /etc/netns/NS/* over /etc), e.g. DNS64's
    # resolv.conf: they belong to the namespace and go with it, also after a crash
    shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
    if netlink.netns_exists(ns):
        raise KernelError("remove namespace", ns, 16)
