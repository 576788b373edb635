"""The Testbed lifecycle: apply a plan, record an undo for everything, remove it all on exit."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from testbed import capabilities, netlink, processes, signals, state
from testbed.errors import KernelError, TestbedError, UsageError
from testbed.plan import (
    AddAddress,
    AddRoute,
    AddVeth,
    CreateNamespace,
    LinkUp,
    OffloadOff,
    Plan,
    SetQdisc,
    SetSysctls,
    compile_plan,
    run_namespaces,
)
from testbed.shaping import MIN_WIRE_FRAME, WIRE_OVERHEAD
from testbed.topology import Topology

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
        self._journal: list[tuple[str, Any]] = []
        self._handles: dict[str, netlink.Netns] = {}
        self._signals = signals.Guard()
        self._mode_before = "raise"
        self._progress = progress
        self.build_seconds = 0.0
        # Filled by testbed.mechanisms: (node, family) -> the address peers use to reach the
        # node through a transition mechanism (6to4, ISATAP, NAT64), and the address the node
        # itself listens on when that differs (NAT64: an IPv4-only server of IPv6 clients).
        self.mechanism_addresses: dict[tuple[str, int], str] = {}
        self.bind_addresses: dict[tuple[str, int], str] = {}
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
                self._journal.clear()
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
        needs_probe = any(not lk.shape.is_plain for lk in topo.links)
        netem = capabilities.has("netem") if needs_probe else False
        name = self.name or state.new_run_name()
        plan = compile_plan(topo, name, netem_available=netem)  # pure: fails before creating
        if topo.mechanism:
            from testbed.mechanisms import check_mechanism

            check_mechanism(topo)  # validation and kernel features: fails before creating
        if state.load(name) is not None:
            raise UsageError(
                f"a run named {name!r} exists already",
                hint=f"remove it with `testbed down {name}` or pick another --name",
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
        self._journal.append(("record", self.record))
        _raise_nofile_limit()
        self._say(f"building {topo.name} as run {name}: {len(plan.actions)} actions")
        try:
            for action in plan.actions:
                signals.check()  # a signal since the last action: stop here, undo it all
                self._apply(action)
            self._wait_ready()
        finally:
            self._close_handles()
        signals.check()
        if topo.mechanism:
            from testbed.mechanisms import apply_mechanism

            apply_mechanism(self)
            signals.check()
        self.record.state = "active"
        self.record.save()
        self.build_seconds = time.monotonic() - start

    def _wait_ready(self, deadline_s: float = 10.0) -> None:
        """Poll until every interface is up and IPv6 on it is ready (not a fixed sleep)."""
        plan = self._plan()
        ours: dict[str, set[str]] = {}
        for iface in plan.addresses.interfaces:
            ours.setdefault(plan.namespaces[iface.node], set()).add(iface.name)
        v6 = {plan.namespaces[n.name]: 6 in n.families for n in self.topology.nodes}
        pending = {ns: v6[ns] for ns in ours}
        if os.environ.get("TESTBED_IN_VM") == "1":
            deadline_s *= 6  # software emulation (TCG) is slow
        deadline = time.monotonic() + deadline_s
        waiting: dict[str, list[str]] = {}
        while pending:
            waiting = {}
            for ns, v6_ns in pending.items():
                names = self._handle(ns).not_ready(v6_ns, ours[ns])
                if names:
                    waiting[ns] = names
            pending = {ns: pending[ns] for ns in waiting}
            if not pending:
                return
            signals.check()
            if time.monotonic() > deadline:
                where = "; ".join(f"{ns}: {', '.join(v)}" for ns, v in waiting.items())
                raise KernelError("bring up interfaces (carrier and IPv6 link-local)", where, 110)
            time.sleep(0.02)

    def _handle(self, ns: str) -> netlink.Netns:
        h = self._handles.get(ns)
        if h is None:
            h = netlink.Netns(ns)
            self._handles[ns] = h
        return h

    def _close_handles(self) -> None:
        for h in self._handles.values():
            h.close()
        self._handles.clear()

    def _apply(self, action: Any) -> None:
        if isinstance(action, CreateNamespace):
            # journalled first: a namespace half-created when the process is stopped (or
            # when creation fails midway) is still removed by teardown
            self._journal.append(("netns", action.ns))
            netlink.create_netns(action.ns)
        elif isinstance(action, SetSysctls):
            netlink.set_sysctls(action.ns, dict(action.values))
        elif isinstance(action, AddVeth):
            self._journal.append(("link", (action.ns_a, action.if_a)))
            self._handle(action.ns_a).add_veth(
                action.if_a, action.ns_b, action.if_b, action.mtu, action.index_a, action.index_b
            )
        elif isinstance(action, AddAddress):
            self._handle(action.ns).add_address(action.ifname, action.cidr)
        elif isinstance(action, LinkUp):
            self._handle(action.ns).set_up(action.ifname)
        elif isinstance(action, AddRoute):
            self._handle(action.ns).add_route(action.dst, action.via, action.dev)
        elif isinstance(action, OffloadOff):
            processes.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    action.ns,
                    "ethtool",
                    "-K",
                    action.ifname,
                    "tso",
                    "off",
                    "gso",
                    "off",
                    "gro",
                    "off",
                ],
                where=f"namespace {action.ns}",
            )
        elif isinstance(action, SetQdisc):
            q = action.qdisc
            if q.tbf is not None:
                rate, burst, limit = q.tbf
                netlink.set_tbf(
                    self._handle(action.ns),
                    action.ifname,
                    rate,
                    burst,
                    limit,
                    WIRE_OVERHEAD,
                    MIN_WIRE_FRAME,
                )
            else:
                processes.run(
                    netlink.tc_argv(action.ns, q.argv(action.ifname)),
                    where=f"namespace {action.ns}",
                )
            self._journal.append(("qdisc", (action.ns, action.ifname)))
        else:  # pragma: no cover - the plan has no other actions
            raise TypeError(f"unknown action {action!r}")

    # ------------------------------------------------------------------ teardown

    def add_cleanup(self, fn: Callable[[], object], what: str = "cleanup") -> None:
        """Push an extra undo; it runs in reverse order with the others."""
        self._journal.append(("callback", (what, fn)))

    def teardown(self) -> None:
        """Undo everything in reverse order, each step guarded; report the ones that failed."""
        if not self._journal or os.getpid() != self._owner_pid:
            return
        old_mode = signals.set_mode("defer")  # a second Ctrl-C only notes itself meanwhile
        failures: list[str] = []
        # Removing a namespace removes its links, addresses, routes and qdiscs with it, so
        # those undos are folded into the removal of a namespace this run created.
        owned = {obj for kind, obj in self._journal if kind == "netns"}
        try:
            while self._journal:
                kind, obj = self._journal.pop()
                if kind in ("link", "qdisc") and obj[0] in owned:
                    continue
                try:
                    self._undo(kind, obj)
                except Exception as exc:
                    failures.append(f"{kind} {obj!r}: {exc}")
            self._close_handles()
        finally:
            signals.set_mode(old_mode)
        if failures:
            raise TeardownError(
                "some cleanup steps failed:\n  " + "\n  ".join(failures),
                hint="`testbed clean` retries; report this as a bug",
            )

    def _undo(self, kind: str, obj: Any) -> None:
        if kind == "process":
            obj.stop()
        elif kind == "callback":
            obj[1]()
        elif kind == "qdisc":
            ns, ifname = obj
            if netlink.netns_exists(ns):
                processes.run(
                    netlink.tc_argv(ns, ["qdisc", "del", "dev", ifname, "root"]), check=False
                )
        elif kind == "link":
            ns, ifname = obj
            if netlink.netns_exists(ns):
                self._handle(ns).delete_link(ifname)
        elif kind == "netns":
            h = self._handles.pop(obj, None)
            if h is not None:
                h.close()
            remove_namespace(obj)
        elif kind == "scratch":
            shutil.rmtree(obj, ignore_errors=True)
        elif kind == "record":
            # whatever carries the run's name prefix is this run's, journalled or not
            for ns in run_namespaces(obj.name, netlink.list_netns()):
                remove_namespace(ns)
            shutil.rmtree(state.scratch_dir(obj.name), ignore_errors=True)
            obj.remove()

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
        try:
            return self._plan().addresses.address(node, family, peer)
        except KeyError as exc:
            extra = self.mechanism_addresses.get((node, family))
            if extra is not None:
                return extra
            raise UsageError(str(exc.args[0])) from None

    def bind_address(self, node: str, family: int) -> str:
        """The address a server on `node` listens on for clients that reach it over `family`
        (the same as address() except under NAT64, where it is the server's IPv4 address)."""
        return self.bind_addresses.get((node, family)) or self.address(node, family)

    def scratch_dir(self) -> Path:
        """A folder for this run's files (daemon configs, captures); removed with the run,
        also by `testbed clean` after a crash, since it lives beside the run's record."""
        if self.name is None:
            raise UsageError("the testbed is not built")
        d = state.scratch_dir(self.name)
        if not d.exists():
            d.mkdir(parents=True)
            self._journal.append(("scratch", d))
        return d

    def interfaces(self, node: str) -> list[Any]:
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
        self._journal.append(("process", proc))
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


def remove_namespace(ns: str) -> None:
    """Kill what runs in `ns`, remove it, and confirm it is gone."""
    processes.kill_netns_processes(ns)
    netlink.remove_netns(ns)
    # per-namespace /etc files (`ip netns exec` binds /etc/netns/NS/* over /etc), e.g. DNS64's
    # resolv.conf: they belong to the namespace and go with it, also after a crash
    shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
    if netlink.netns_exists(ns):
        raise KernelError("remove namespace", ns, 16)


def remove_run(record: state.RunRecord) -> list[str]:
    """Remove every namespace (and its processes) of a recorded run, then its record."""
    removed = []
    names = set(record.namespaces.values()) | set(
        run_namespaces(record.name, netlink.list_netns())
    )
    for ns in sorted(names):
        if netlink.netns_exists(ns):
            remove_namespace(ns)
            removed.append(ns)
    shutil.rmtree(state.scratch_dir(record.name), ignore_errors=True)
    record.remove()
    return removed


def progress_to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
