"""The Testbed lifecycle: apply a plan, record an undo for everything, remove it all on exit."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from testbed import capabilities, netlink, processes, signals, state, waiting
from testbed.actions import (
    AddAddress,
    AddRoute,
    AddVeth,
    CreateNamespace,
    LinkUp,
    OffloadOff,
    SetQdisc,
    SetSysctls,
    WaitInterfaces,
    remove_namespace,
)
from testbed.addressing import Interface
from testbed.api import Action, Undo
from testbed.errors import DaemonError, MissingCapability, TestbedError, UsageError
from testbed.plan import Plan, plan_for, run_namespaces
from testbed.topology_model import Topology

Interrupted = signals.Interrupted  # SIGINT or SIGTERM, raised where every undo can run


class TeardownError(TestbedError):
    """Some undo steps failed; lists each."""


def _raise_nofile_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Testbed:
    """A topology built in namespaces `tb-<run>-<node>`; a context manager that undoes itself.

    With keep=True (what `testbed up` uses) a successful build is left in place and marked
    "up" in the run registry; `testbed down` removes it later.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        topology: Topology,
        name: str | None = None,
        *,
        keep: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.topology = topology
        self.name = state.check_run_name(name) if name else None
        self.keep = keep
        self.plan: Plan | None = None
        self.record: state.RunRecord | None = None
        # The undo journal: a stack of scopes, each a list of undos run in reverse when the
        # scope closes (scope 0: the build, closed by teardown).
        self._scopes: list[list[Undo]] = [[]]
        self._handles: dict[str, netlink.Netns] = {}
        self._signals = signals.Guard()
        self._mode_before = "raise"
        self._progress = progress
        self.build_seconds = 0.0
        # Libraries fork (pyroute2 opens netns sockets from a child): only the process that
        # built the testbed may ever tear it down.
        self._owner_pid = os.getpid()

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> Testbed:
        # Signals during the build only set a flag, checked between actions (never raised
        # inside pyroute2's callbacks or fork hooks); every object is in the journal and the
        # run record before it is created, so whatever was interrupted can be removed.
        self._owner_pid = os.getpid()
        self._signals.open()
        self._mode_before = signals.set_mode("defer")
        try:
            self.build()
            if not self.keep:
                signals.set_mode(self._mode_before)  # the body may be interrupted as usual
            signals.check()
        except BaseException as exc:
            if os.getpid() != self._owner_pid:
                raise
            try:
                self.teardown()
            except TestbedError as cleanup:
                exc.add_note(f"while cleaning up after it: {cleanup}")
            finally:
                signals.set_mode(self._mode_before)
            try:
                if not isinstance(exc, KeyboardInterrupt):
                    signals.check()  # a failure caused by the signal (a child killed by it)
            finally:
                self._signals.close()
            raise
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if os.getpid() != self._owner_pid:
            return
        signals.set_mode("defer")
        try:
            if self.keep and et is None and signals.pending() is None:
                assert self.record is not None
                self.record.state = "up"
                self.record.pid = 0
                self.record.save()
                self._scopes = [[]]
                self._close_handles()
            else:
                self.teardown()
        finally:
            signals.set_mode(self._mode_before)
            try:
                if et is None:
                    signals.check()  # interrupted while tearing down: still an interrupt
            finally:
                self._signals.close()

    # ------------------------------------------------------------------ build

    def _say(self, text: str) -> None:
        if self._progress is not None:
            self._progress(text)

    def build(self) -> None:
        start = time.monotonic()
        topo = self.topology
        name = self.name or state.new_run_name()
        plan = plan_for(topo, name)  # pure: fails before creating (the front `plan` prints)
        check_needs(plan)  # what the features need: fails before creating
        if state.load(name) is not None:
            raise UsageError(
                f"a run named {name!r} exists already",
                hint=f"remove it with `testbed down --name {name}` or pick another --name",
            )
        clash = [ns for ns in plan.namespaces.values() if netlink.netns_exists(ns)]
        if clash:
            raise UsageError(
                f"namespace {clash[0]} exists already",
                hint="`testbed clean` removes what crashed runs left behind",
            )
        self.name = name
        self.plan = plan
        self.record = state.RunRecord(
            name=name,
            pid=os.getpid(),
            state="building",
            namespaces=dict(plan.namespaces),
            source=topo.source,
            params=topo.param_dict,
            interfaces=[
                {
                    "node": i.node,
                    "ns": plan.namespaces[i.node],
                    "ifname": i.name,
                    "peer": i.peer_node,
                    "addresses": list(i.addresses),
                }
                for i in plan.addresses.interfaces
            ],
        )
        self.record.save()  # written before anything exists, so `testbed clean` can find it
        record = self.record
        self.defer(Undo(f"remove run {name}", lambda: _remove_record(record)))
        _raise_nofile_limit()
        self._say(f"building {topo.name} as run {name}: {len(plan.actions)} actions")
        try:
            for action in plan.actions:
                signals.check()  # a signal since the last action: stop here, undo it all
                action.apply(self)
        finally:
            self._close_handles()
        signals.check()
        self.record.state = "active"
        self.record.save()
        self.build_seconds = time.monotonic() - start

    def handle(self, ns: str) -> netlink.Netns:
        """A netlink socket in namespace `ns` (kept until the build ends)."""
        h = self._handles.get(ns)
        if h is None:
            h = netlink.Netns(ns)
            self._handles[ns] = h
        return h

    def _close_handles(self) -> None:
        for h in self._handles.values():
            h.close()
        self._handles.clear()

    # ------------------------------------------------------------------ undo journal

    def defer(self, undo: Undo) -> None:
        """Push an undo onto the innermost scope; it runs when that scope closes."""
        self._scopes[-1].append(undo)

    def add_cleanup(self, fn: Callable[[], object], what: str = "cleanup") -> None:
        """Push an extra undo; it runs in reverse order with the others."""
        self.defer(Undo(what, fn))

    @contextlib.contextmanager
    def scope(self) -> Iterator[Testbed]:
        """A nested undo scope: what is started inside (processes, files, feature actions,
        cleanups) is undone when the block ends, in reverse order, whatever happens in it."""
        self._scopes.append([])
        depth = len(self._scopes)
        try:
            yield self
        finally:
            if os.getpid() == self._owner_pid and len(self._scopes) >= depth:
                del self._scopes[depth:]  # scopes left open inside (never on a clean exit)
                self._unwind(self._scopes.pop(), "the scope's cleanup failed")

    def apply(self, action: Action) -> None:
        """Apply one more action (testbed.actions) now; its undo joins the current scope."""
        action.apply(self)

    def teardown(self) -> None:
        """Undo everything in reverse order, each step guarded; report the ones that failed."""
        if os.getpid() != self._owner_pid or not any(self._scopes):
            return
        undos = [u for scope in self._scopes for u in scope]
        self._scopes = [[]]
        self._unwind(undos, "some cleanup steps failed")

    def _unwind(self, undos: list[Undo], headline: str) -> None:
        old_mode = signals.set_mode("defer")  # a second Ctrl-C only notes itself meanwhile
        failures: list[str] = []
        # Removing a namespace removes its links, addresses, routes, qdiscs and /etc/netns
        # files with it: the undos of objects inside a namespace this unwinding removes are
        # folded into its removal.
        owned = {u.removes for u in undos if u.removes is not None}
        try:
            while undos:
                undo = undos.pop()
                if undo.within is not None and undo.within in owned:
                    continue
                try:
                    undo.run()
                except Exception as exc:
                    failures.append(f"{undo.what}: {exc}")
            self._close_handles()
        finally:
            signals.set_mode(old_mode)
        if failures:
            raise TeardownError(
                f"{headline}:\n  " + "\n  ".join(failures),
                hint="`testbed clean` retries; report this as a bug",
            )

    # ------------------------------------------------------------------ use

    def _plan(self) -> Plan:
        if self.plan is None:
            raise UsageError("the testbed is not built")
        return self.plan

    def netns(self, node: str) -> str:
        try:
            return self._plan().namespaces[node]
        except KeyError:
            raise UsageError(
                f"no node {node!r} in {self.topology.name}",
                hint="nodes: " + ", ".join(self.topology.node_names),
            ) from None

    def address(self, node: str, family: int, peer: str | None = None) -> str:
        self.netns(node)
        plan = self._plan()
        try:
            return plan.addresses.address(node, family, peer)
        except KeyError as exc:
            extra = plan.extra_address(node, family)
            if extra is not None:
                return extra.address
            raise UsageError(str(exc.args[0])) from None

    def bind_address(self, node: str, family: int) -> str:
        """The address a server on `node` listens on for clients that reach it over `family`
        (the same as address() except under NAT64, where it is the server's IPv4 address)."""
        extra = self._plan().extra_address(node, family)
        if extra is not None and extra.bind is not None:
            return extra.bind
        return self.address(node, family)

    def scratch_dir(self) -> Path:
        """A folder for this run's files (daemon configs, captures); removed with the run,
        also by `testbed clean` after a crash, since it lives beside the run's record."""
        if self.name is None:
            raise UsageError("the testbed is not built")
        d = state.scratch_dir(self.name)
        if not d.exists():
            d.mkdir(parents=True)
            # the run's folder, whichever scope first asks for it: the build scope removes it
            self._scopes[0].append(
                Undo(f"remove {d}", lambda: shutil.rmtree(d, ignore_errors=True))
            )
        return d

    def interfaces(self, node: str) -> list[Interface]:
        return self._plan().addresses.of(node)

    def run(
        self,
        node: str,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return processes.run(
            processes.ns_argv(self.netns(node), argv),
            check=check,
            timeout=timeout,
            where=f"node {node}",
            input=input,
        )

    def popen(
        self, node: str, argv: Sequence[str], *, name: str = "", **popen_kw: Any
    ) -> processes.ManagedProcess:
        """Start a background process in `node`; it is stopped when the Testbed exits."""
        proc = processes.ManagedProcess(
            processes.ns_argv(self.netns(node), argv), name=name or argv[0], **popen_kw
        )
        self.defer(Undo(f"stop {proc.name} on {node}", proc.stop))
        return proc

    def qdiscs(self) -> list[dict[str, Any]]:
        """The qdiscs in force on every node (tc's JSON, plus the node name)."""
        out: list[dict[str, Any]] = []
        for node, ns in self._plan().namespaces.items():
            proc = processes.run(netlink.qdisc_show_argv(ns), check=False)
            try:
                items = json.loads(proc.stdout or "[]")
            except json.JSONDecodeError:
                items = []
            for q in items:
                if q.get("dev") == "lo" or q.get("kind") == "noqueue":
                    continue
                q["node"] = node
                out.append(q)
        return out

    # ------------------------------------------------------------------ restarting a node

    def relink_node(self, node: str) -> None:
        """Every interface of `node` down and up again; the addresses and routes the kernel
        dropped with them put back from the plan (`ip ... replace`): a "software" reset."""
        plan = self._plan()
        ns = plan.namespaces[node]
        ifaces = [i.name for i in self.interfaces(node)]
        for i in ifaces:
            self.run(node, ["ip", "link", "set", "dev", i, "down"])
        for i in ifaces:
            self.run(node, ["ip", "link", "set", "dev", i, "up"])
        for a in plan.actions:
            if isinstance(a, AddAddress) and a.ns == ns:
                self.run(node, ["ip", "addr", "replace", a.cidr, "dev", a.ifname])
            elif isinstance(a, AddRoute) and a.ns == ns:
                argv = ["ip", "route", "replace", a.dst]
                if a.via:
                    argv += ["via", a.via]
                if a.dev:
                    argv += ["dev", a.dev]
                self.run(node, argv)

    def rebuild_node(self, node: str) -> None:
        """Destroy `node`'s namespace (its veths, addresses, routes, sysctls and processes with
        it) and rebuild it, its links and the far ends' state from the plan, through the same
        actions that built it: a "hardware" reset. The rebuilt node outlives the caller's
        scope: the build's own undos remove it (and its links) by name at teardown."""
        plan = self._plan()
        ns = plan.namespaces[node]
        actions = node_actions(plan, node)
        handle = self._handles.pop(ns, None)
        if handle is not None:
            handle.close()
        remove_namespace(ns)
        # the kernel destroys a removed namespace's devices (and their veth peers) asynchronously
        peers = [(n, i) for n, i in link_ends(plan, node) if n != ns]
        by_ns = {v: k for k, v in plan.namespaces.items()}

        def gone() -> bool:
            return all(self.run(by_ns[n], ["ip", "link", "show", "dev", i], check=False)
                       .returncode != 0 for n, i in peers)

        if not waiting.wait_for(gone, 10.0):
            raise DaemonError("reset", node, "the peers' interfaces of the removed namespace "
                              "still exist after 10 s", ", ".join(f"{n}/{i}" for n, i in peers))
        self._scopes.append([])  # the rebuild's undos duplicate the build's: dropped below
        try:
            for a in actions:
                a.apply(self)
        finally:
            self._close_handles()
            self._scopes.pop()


def link_ends(plan: Plan, node: str) -> set[tuple[str, str]]:
    """(namespace, interface) of every end of every link of `node`."""
    ns = plan.namespaces[node]
    out = set()
    for a in plan.actions:
        if isinstance(a, AddVeth) and ns in (a.ns_a, a.ns_b):
            out.add((a.ns_a, a.if_a))
            out.add((a.ns_b, a.if_b))
    return out


def node_actions(plan: Plan, node: str) -> list[Action]:
    """The plan's actions that rebuild `node` and its links' far ends, in plan order."""
    ns = plan.namespaces[node]
    ends = link_ends(plan, node)
    keep: list[Action] = []
    for a in plan.actions:
        if isinstance(a, CreateNamespace | SetSysctls):
            wanted = a.ns == ns
        elif isinstance(a, AddVeth):
            wanted = ns in (a.ns_a, a.ns_b)
        elif isinstance(a, AddAddress | LinkUp | OffloadOff | SetQdisc):
            wanted = (a.ns, a.ifname) in ends
        elif isinstance(a, AddRoute):
            wanted = a.ns == ns or (a.ns, a.dev) in ends
        else:  # the plan's own wait (every interface) is kept; node features are not
            wanted = isinstance(a, WaitInterfaces)
        if wanted:
            keep.append(a)
    return keep


def check_needs(plan: Plan) -> None:
    """Raise MissingCapability for the first thing the plan's features need that is missing."""
    lacking = capabilities.missing(plan.needs())
    if not lacking:
        return
    need = lacking[0]
    who = next(f for f in plan.features if need in f.needs())
    cap = capabilities.probe([need]).get(need)
    fix = cap.fix if cap is not None and cap.kind == "program" else None
    raise MissingCapability(
        need, f"{who.label} (features[{who.index}]) of {plan.topology.source}", fix
    )


def _remove_record(record: state.RunRecord) -> None:
    """The run's last undo: whatever carries its name prefix is its, journalled or not."""
    for ns in run_namespaces(record.name, netlink.list_netns()):
        remove_namespace(ns)
    shutil.rmtree(state.scratch_dir(record.name), ignore_errors=True)
    record.remove()


def remove_run(record: state.RunRecord) -> list[str]:
    """Remove every namespace (and its processes) of a recorded run, then its record."""
    removed = []
    names = set(record.namespaces.values()) | set(run_namespaces(record.name, netlink.list_netns()))
    for ns in sorted(names):
        if netlink.netns_exists(ns):
            remove_namespace(ns)
            removed.append(ns)
    shutil.rmtree(state.scratch_dir(record.name), ignore_errors=True)
    record.remove()
    return removed


def progress_to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
